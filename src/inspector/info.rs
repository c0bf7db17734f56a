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

/// Cluster facts: `CLUSTER INFO` and `CLUSTER NODES` of one node (the
/// first master, on a cluster connection), each queue's location and every
/// node.
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
    /// Every node of the cluster, sorted by address, when asynqdeck is
    /// connected to the cluster (`--redis-cluster-nodes`); empty when it is
    /// connected to one cluster node as to a standalone server.
    pub nodes: Vec<NodeInfo>,
}

/// One node of a Redis Cluster, for the Redis page: `CLUSTER NODES` facts
/// and a few fields of the node's own `INFO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Node id.
    pub id: String,
    /// `host:port`.
    pub addr: String,
    /// `master` or `replica`.
    pub role: String,
    /// `CLUSTER NODES` flags (`myself`, `fail?`, ...), comma-separated.
    pub flags: String,
    /// `connected` or `disconnected` (cluster bus).
    pub link: String,
    /// Slot ranges served, inclusive, ascending (empty for a replica).
    pub slots: Vec<(u16, u16)>,
    /// `used_memory_human` of its `INFO` (`None` when not reported).
    pub used_memory_human: Option<String>,
    /// `instantaneous_ops_per_sec` of its `INFO`.
    pub ops_per_sec: Option<String>,
    /// The queues whose slot it serves as master, sorted.
    pub queues: Vec<String>,
    /// Why its `INFO` could not be read.
    pub error: Option<String>,
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
            nodes: c
                .each_node
                .iter()
                .map(|n| {
                    let info = n.info.as_ref().map(|t| parse_info(t)).ok();
                    let get = |k: &str| {
                        info.as_ref()
                            .and_then(|i| i.get(k))
                            .map(|v| v.trim().to_string())
                    };
                    let addr = n.node.addr();
                    NodeInfo {
                        id: n.node.id.clone(),
                        role: n.node.role.to_string(),
                        flags: n.node.flags.join(","),
                        link: n.node.link.clone(),
                        slots: n.node.slots.clone(),
                        used_memory_human: get("used_memory_human"),
                        ops_per_sec: get("instantaneous_ops_per_sec"),
                        queues: c
                            .queues
                            .iter()
                            .filter(|(_, _, nodes)| nodes.first() == Some(&addr))
                            .map(|(q, _, _)| q.clone())
                            .collect(),
                        error: n.info.as_ref().err().cloned(),
                        addr,
                    }
                })
                .collect(),
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
