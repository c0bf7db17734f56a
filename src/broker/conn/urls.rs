//! The two URL forms beyond redis-rs's own: asynq's Sentinel URI and
//! asynqdeck's cluster URL.
//!
//! - `redis-sentinel://[[user]:password@]host1:port1[,host2:port2...][/db]?master=NAME`:
//!   asynq `ParseRedisURI` (v0.26.0 `parseRedisSentinelURI`): the hosts are
//!   the sentinels, the password is the sentinels' (`SentinelPassword`),
//!   `master` names the monitored master; the `/db` path is read as asynq's
//!   post-0.26 master reads it. A port defaults to 26379.
//! - `redis-cluster://[[user]:password@]host1:port1[,host2:port2...]` (and
//!   `rediss-cluster://` for TLS): the seed nodes of a Redis Cluster, with
//!   the ACL user and password of every node. Go has no URL for a cluster
//!   (`RedisClusterClientOpt`, asynqmon `--redis-cluster-nodes`); this one
//!   lets every place that takes a URL reach a cluster (COMPATIBILITY.md
//!   K1).

use crate::error::{Error, Result};

/// A parsed `redis-sentinel://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SentinelUrl {
    pub addrs: Vec<String>,
    pub master: String,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: Option<i64>,
}

/// A parsed `redis-cluster://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterUrl {
    pub nodes: Vec<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub tls: bool,
}

/// Splits `scheme://[userinfo@]hosts[/path][?query]` after the scheme.
fn split(rest: &str) -> (Option<&str>, &str, &str, &str) {
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (userinfo, hostpath) = match before_query.rfind('@') {
        Some(at) => (Some(&before_query[..at]), &before_query[at + 1..]),
        None => (None, before_query),
    };
    let (hosts, path) = hostpath.split_once('/').unwrap_or((hostpath, ""));
    (userinfo, hosts, path, query)
}

/// `user:password`, `:password` or `password`-less `user`, percent-decoded.
fn credentials(userinfo: Option<&str>) -> (Option<String>, Option<String>) {
    match userinfo {
        None => (None, None),
        Some(u) => {
            let (user, pw) = match u.split_once(':') {
                Some((user, pw)) => (user, Some(pw)),
                None => (u, None),
            };
            let user = Some(percent_decode(user)).filter(|s| !s.is_empty());
            let pw = pw.map(percent_decode).filter(|s| !s.is_empty());
            (user, pw)
        }
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = std::str::from_utf8(&bytes[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `host:port` items separated by commas; `default_port` for a bare host.
fn host_list(hosts: &str, default_port: u16, what: &str) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for h in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let has_port = match h.rfind(':') {
            Some(i) => !h.ends_with(']') && h[i + 1..].parse::<u16>().is_ok(),
            None => false,
        };
        if h.contains(char::is_whitespace) {
            return Err(Error::InvalidArgument(format!("{what}: bad address {h:?}")));
        }
        out.push(if has_port {
            h.to_string()
        } else {
            format!("{h}:{default_port}")
        });
    }
    if out.is_empty() {
        return Err(Error::InvalidArgument(format!("{what}: no address given")));
    }
    Ok(out)
}

/// Parses a `redis-sentinel://` URL. Errors with [`Error::InvalidArgument`]
/// without a host, without `master=`, or with a path that is not a database
/// number.
pub(crate) fn parse_sentinel_url(url: &str) -> Result<SentinelUrl> {
    let rest = url
        .strip_prefix("redis-sentinel://")
        .ok_or_else(|| Error::InvalidArgument(format!("not a redis-sentinel:// URL: {url:?}")))?;
    let (userinfo, hosts, path, query) = split(rest);
    let addrs = host_list(hosts, 26379, "redis-sentinel:// URL")?;
    let master = query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == "master")
        .map(|(_, v)| percent_decode(v))
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            Error::InvalidArgument(
                "redis-sentinel:// URL needs ?master=<name> (the master the sentinels monitor)"
                    .into(),
            )
        })?;
    let db = match path.trim_matches('/') {
        "" => None,
        p => Some(p.parse::<i64>().ok().filter(|d| *d >= 0).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "redis-sentinel:// URL: database {p:?} is not a number"
            ))
        })?),
    };
    let (username, password) = credentials(userinfo);
    Ok(SentinelUrl {
        addrs,
        master,
        username,
        password,
        db,
    })
}

/// Parses a `redis-cluster://` or `rediss-cluster://` URL. Errors with
/// [`Error::InvalidArgument`] without a node or with a database other
/// than 0 (a cluster has only database 0).
pub(crate) fn parse_cluster_url(url: &str) -> Result<ClusterUrl> {
    let (rest, tls) = if let Some(r) = url.strip_prefix("redis-cluster://") {
        (r, false)
    } else if let Some(r) = url.strip_prefix("rediss-cluster://") {
        (r, true)
    } else {
        return Err(Error::InvalidArgument(format!(
            "not a redis-cluster:// URL: {url:?}"
        )));
    };
    let (userinfo, hosts, path, _query) = split(rest);
    let nodes = host_list(hosts, 6379, "redis-cluster:// URL")?;
    if !matches!(path.trim_matches('/'), "" | "0") {
        return Err(Error::InvalidArgument(format!(
            "redis-cluster:// URL: a cluster has only database 0, not {path:?}"
        )));
    }
    let (username, password) = credentials(userinfo);
    Ok(ClusterUrl {
        nodes,
        username,
        password,
        tls,
    })
}

/// Whether `url` names a cluster (`redis-cluster://`, `rediss-cluster://`).
pub(crate) fn is_cluster_url(url: &str) -> bool {
    url.starts_with("redis-cluster://") || url.starts_with("rediss-cluster://")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// asynq `ParseRedisURI` forms: hosts, password for the sentinels,
    /// `master`, and (post-0.26) the db path.
    #[test]
    fn sentinel_urls() {
        let u = parse_sentinel_url("redis-sentinel://:s3cret@h1:5000,h2:5001,h3?master=mymaster")
            .unwrap();
        assert_eq!(u.addrs, ["h1:5000", "h2:5001", "h3:26379"]);
        assert_eq!(u.master, "mymaster");
        assert_eq!(u.password.as_deref(), Some("s3cret"));
        assert_eq!(u.username, None);
        assert_eq!(u.db, None);
        let u = parse_sentinel_url("redis-sentinel://u:p%40ss@[::1]:5000/3?master=m").unwrap();
        assert_eq!(u.addrs, ["[::1]:5000"]);
        assert_eq!(
            (u.username.as_deref(), u.password.as_deref()),
            (Some("u"), Some("p@ss"))
        );
        assert_eq!(u.db, Some(3));
        for bad in [
            "redis-sentinel://h1:5000",
            "redis-sentinel://?master=m",
            "redis-sentinel://h:1/x?master=m",
            "redis-sentinel://h:1/-1?master=m",
        ] {
            assert!(
                matches!(parse_sentinel_url(bad), Err(Error::InvalidArgument(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn cluster_urls() {
        let u = parse_cluster_url("redis-cluster://a:7000,b:7001, c").unwrap();
        assert_eq!(u.nodes, ["a:7000", "b:7001", "c:6379"]);
        assert!(!u.tls);
        let u = parse_cluster_url("rediss-cluster://user:pw@a:7000/0").unwrap();
        assert_eq!(
            (u.username.as_deref(), u.password.as_deref()),
            (Some("user"), Some("pw"))
        );
        assert!(u.tls);
        assert!(parse_cluster_url("redis-cluster://a:1/2").is_err());
        assert!(parse_cluster_url("redis-cluster://").is_err());
        assert!(is_cluster_url("redis-cluster://a:1") && !is_cluster_url("redis://a:1"));
    }
}
