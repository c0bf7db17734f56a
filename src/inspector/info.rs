//! Facts about the Redis server: `INFO`, and on a cluster node the cluster
//! state and where each queue's keys live. Shown by the dashboard's Redis
//! page and by `/api/redis_info`.
//!
//! Go: asynqmon's `redis_info_handlers.go` (go-redis `Info`, `ClusterInfo`,
//! `ClusterNodes`) and asynq's `Inspector.ClusterKeySlot` /
//! `Inspector.ClusterNodes` (`inspector.go`).

use std::collections::BTreeMap;

use super::Inspector;
pub use crate::broker::SentinelStatus;
use crate::error::Result;

/// What Redis says about itself (asynqmon's `redisInfoResponse`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedisInfo {
    /// `host:port` (or socket path) asynqdeck connects to; never credentials.
    pub address: String,
    /// The `INFO` reply as Redis sent it (`\r\n` line ends, `# Section` headers).
    pub raw_info: String,
    /// `INFO` parsed by [`parse_info`]: `redis_version` → `7.0.15`, ...
    pub info: BTreeMap<String, String>,
    /// Set when the server runs in cluster mode (`INFO` says
    /// `cluster_enabled:1`).
    pub cluster: Option<ClusterInfo>,
    /// Set behind Sentinel: the master in use and the last failover seen.
    pub sentinel: Option<SentinelStatus>,
}

/// Cluster facts read from the node asynqdeck is connected to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterInfo {
    /// The `CLUSTER INFO` reply as sent.
    pub raw_cluster_info: String,
    /// `CLUSTER INFO` parsed by [`parse_info`] (`cluster_state` → `ok`, ...).
    pub cluster_info: BTreeMap<String, String>,
    /// The `CLUSTER NODES` reply as sent (one line per node).
    pub raw_cluster_nodes: String,
    /// Where each queue lives, sorted by queue name.
    pub queue_locations: Vec<QueueLocation>,
}

/// The hash slot of one queue and the nodes serving it (asynqmon's
/// `queueLocationInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueLocation {
    /// Queue name.
    pub queue: String,
    /// Hash slot (0–16383) of the queue's keys: `CLUSTER KEYSLOT
    /// asynq:{<queue>}:pending` (Go `Inspector.ClusterKeySlot`).
    pub keyslot: i64,
    /// `host:port` of each node serving the slot, master first (Go
    /// `Inspector.ClusterNodes`); empty when no node serves it.
    pub nodes: Vec<String>,
}

/// Parses an `INFO` or `CLUSTER INFO` reply into `field → value`: one entry
/// per `field:value` line, split at the first `:`; blank lines and `#`
/// section headers are skipped. asynqmon drops lines whose value contains a
/// `:` (e.g. `listener0:...bind=-::*...`); these are kept.
// asynqmon divergence: COMPATIBILITY.md#a10
pub fn parse_info(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

impl Inspector {
    /// `INFO`, plus on a cluster node `CLUSTER INFO`, `CLUSTER NODES` and
    /// each queue's key slot and nodes (asynqmon `/api/redis_info`; Go
    /// `Inspector.ClusterKeySlot`, `Inspector.ClusterNodes`). Read-only.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis) when Redis is
    /// unreachable or refuses a command (managed services may disable
    /// `INFO` or `CLUSTER`), [`Error::Internal`](crate::Error::Internal) on
    /// a reply of the wrong shape.
    pub async fn redis_info(&self) -> Result<RedisInfo> {
        let raw = self.broker.redis_info().await?;
        let cluster = raw.cluster.map(|c| ClusterInfo {
            cluster_info: parse_info(&c.info),
            raw_cluster_info: c.info,
            raw_cluster_nodes: c.nodes,
            queue_locations: c
                .queues
                .into_iter()
                .map(|(queue, keyslot, nodes)| QueueLocation {
                    queue,
                    keyslot,
                    nodes,
                })
                .collect(),
        });
        Ok(RedisInfo {
            address: raw.address,
            info: parse_info(&raw.info),
            raw_info: raw.info,
            cluster,
            sentinel: self.broker.sentinel_status(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_info_lines() {
        let parsed = parse_info(
            "# Server\r\nredis_version:7.0.15\r\nexecutable:/usr/bin/redis-server\r\n\r\n# Keyspace\r\ndb0:keys=1,expires=0\r\nlistener0:name=tcp,bind=-::*,port=6379\r\n",
        );
        assert_eq!(parsed["redis_version"], "7.0.15");
        assert_eq!(parsed["executable"], "/usr/bin/redis-server");
        assert_eq!(parsed["db0"], "keys=1,expires=0");
        assert_eq!(parsed["listener0"], "name=tcp,bind=-::*,port=6379");
        assert_eq!(parsed.len(), 4);
    }
}
