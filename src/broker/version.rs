//! The Redis server version, from `INFO server` (on a cluster, a random
//! node's stands for every node's: a cluster runs one version, or is being
//! upgraded node by node, which the callers tolerate).

use super::Conn;
use crate::error::{Error, Result};

/// `(major, minor)` of the server behind `conn` (`redis_version:7.0.15` →
/// `(7, 0)`); `(0, 0)` when `INFO` does not say. Errors:
/// [`Error::Redis`], [`Error::Internal`] for a reply that is not text.
pub(crate) async fn redis_version(conn: &mut Conn) -> Result<(u32, u32)> {
    let info: String = match conn.as_cluster() {
        Some(c) => {
            let v = c
                .route_command(
                    redis::cmd("INFO").arg("server").clone(),
                    redis::cluster_routing::RoutingInfo::SingleNode(
                        redis::cluster_routing::SingleNodeRoutingInfo::Random,
                    ),
                )
                .await?;
            redis::from_redis_value(v)
                .map_err(|e| Error::Internal(format!("INFO server reply: {e}")))?
        }
        None => redis::cmd("INFO").arg("server").query_async(conn).await?,
    };
    Ok(parse_version(&info))
}

/// `(major, minor)` from an `INFO server` text.
fn parse_version(info: &str) -> (u32, u32) {
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("0");
    let mut parts = version
        .trim()
        .split('.')
        .map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #[test]
    fn versions() {
        assert_eq!(
            super::parse_version("# Server\r\nredis_version:7.0.15\r\n"),
            (7, 0)
        );
        assert_eq!(super::parse_version("redis_version:6.2.1\n"), (6, 2));
        assert_eq!(super::parse_version("no version here"), (0, 0));
    }
}
