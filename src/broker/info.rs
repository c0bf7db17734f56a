//! Facts about the Redis server itself: `INFO`, and on a cluster node
//! `CLUSTER INFO`, `CLUSTER NODES` and where each queue's keys live.
//!
//! Go: asynqmon's `redis_info_handlers.go` (which calls go-redis directly)
//! and asynq's `rdb.ClusterKeySlot` / `rdb.ClusterNodes`
//! (`internal/rdb/inspect.go`). Read-only; no script.

use futures_util::stream::{self, StreamExt};
use redis::Value;

use super::cluster::{ClusterNode, join_host_port, key_slot};
use super::per_key::CLUSTER_IN_FLIGHT;
use super::{Broker, keys};
use crate::error::{Error, Result};

/// `CLUSTER KEYSLOT` commands sent per pipeline round trip.
const KEYSLOTS_PER_ROUND_TRIP: usize = 100;

/// What [`Broker::redis_info`] read, unparsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawRedisInfo {
    /// `host:port` (or socket path) the broker connects to; never credentials.
    pub address: String,
    /// The reply of `INFO` (all default sections), as Redis sent it.
    pub info: String,
    /// Set when `INFO` says `cluster_enabled:1`.
    pub cluster: Option<RawClusterInfo>,
}

/// One node of a Redis Cluster and its own `INFO`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawNodeInfo {
    /// The node as `CLUSTER NODES` lists it.
    pub node: ClusterNode,
    /// Its `INFO` reply, or why it could not be read.
    pub info: std::result::Result<String, String>,
}

/// Cluster facts read from a cluster-enabled node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawClusterInfo {
    /// The reply of `CLUSTER INFO`.
    pub info: String,
    /// The reply of `CLUSTER NODES`.
    pub nodes: String,
    /// Per queue (sorted by name): the hash slot of its pending key
    /// (`CLUSTER KEYSLOT asynq:{<q>}:pending`) and the `host:port` of every
    /// node serving that slot, master first (from `CLUSTER SLOTS`).
    pub queues: Vec<(String, i64, Vec<String>)>,
    /// Every node with its `INFO`, sorted by address; empty when connected
    /// to one node of a cluster as to a standalone server.
    pub each_node: Vec<RawNodeInfo>,
}

/// Whether an `INFO` reply says cluster mode is on (`cluster_enabled:1`).
fn cluster_enabled(info: &str) -> bool {
    info.lines()
        .any(|l| l.trim_end_matches('\r') == "cluster_enabled:1")
}

fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

fn as_text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

/// Parses a `CLUSTER SLOTS` reply into `(start, end, [host:port, ...])`
/// ranges. An empty host means "the address you connected to" (a node that
/// has not learnt its own IP), so `own_host` is used for it. Entries of an
/// unexpected shape are skipped.
fn parse_slots(reply: &Value, own_host: &str) -> Vec<(i64, i64, Vec<String>)> {
    let Value::Array(ranges) = reply else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for range in ranges {
        let Value::Array(parts) = range else { continue };
        let (Some(start), Some(end)) = (
            parts.first().and_then(as_int),
            parts.get(1).and_then(as_int),
        ) else {
            continue;
        };
        let nodes = parts[2..]
            .iter()
            .filter_map(|node| {
                let Value::Array(fields) = node else {
                    return None;
                };
                let host = fields.first().and_then(as_text)?;
                let port = fields.get(1).and_then(as_int)?;
                let host = if host.is_empty() { own_host } else { &host };
                Some(join_host_port(host, port))
            })
            .collect();
        out.push((start, end, nodes));
    }
    out
}

impl Broker {
    /// `INFO`, and when the server runs in cluster mode also `CLUSTER INFO`,
    /// `CLUSTER NODES`, `CLUSTER SLOTS` and one `CLUSTER KEYSLOT` per queue
    /// (pipelined, 100 per round trip), as asynqmon's `/api/redis_info`
    /// shows them (its `queue_locations`; Go `rdb.ClusterKeySlot`,
    /// `rdb.ClusterNodes`). A queue whose slot no range covers gets no nodes
    /// (Go errors with `nodes not found`).
    ///
    /// Errors: [`Error::Redis`] (including a server that refuses `INFO` or
    /// a `CLUSTER` command), [`Error::Internal`] when `CLUSTER KEYSLOT`
    /// answers something other than an integer.
    pub(crate) async fn redis_info(&self) -> Result<RawRedisInfo> {
        if self.conn.is_cluster() {
            return self.cluster_redis_info().await;
        }
        let mut conn = self.conn();
        let info: String = redis::cmd("INFO").query_async(&mut conn).await?;
        let address = self.target.address();
        if !cluster_enabled(&info) {
            return Ok(RawRedisInfo {
                address,
                info,
                cluster: None,
            });
        }
        let cluster_info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut conn)
            .await?;
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut conn)
            .await?;
        let slots_reply: Value = redis::cmd("CLUSTER")
            .arg("SLOTS")
            .query_async(&mut conn)
            .await?;
        let own_host = address
            .rsplit_once(':')
            .map(|(h, _)| h.to_string())
            .unwrap_or_default();
        let ranges = parse_slots(&slots_reply, &own_host);
        let names = self.all_queues().await?;
        let mut queues = Vec::with_capacity(names.len());
        for chunk in names.chunks(KEYSLOTS_PER_ROUND_TRIP) {
            let mut pipe = redis::pipe();
            for q in chunk {
                pipe.cmd("CLUSTER").arg("KEYSLOT").arg(keys::pending_key(q));
            }
            let slots: Vec<Value> = pipe.query_async(&mut conn).await?;
            if slots.len() != chunk.len() {
                return Err(Error::Internal(format!(
                    "CLUSTER KEYSLOT pipeline replied {} values for {} queues",
                    slots.len(),
                    chunk.len()
                )));
            }
            for (q, slot) in chunk.iter().zip(slots) {
                let slot = as_int(&slot).ok_or_else(|| {
                    Error::Internal(format!("CLUSTER KEYSLOT replied {slot:?} for queue {q:?}"))
                })?;
                let nodes = ranges
                    .iter()
                    .find(|(start, end, _)| (*start..=*end).contains(&slot))
                    .map(|(_, _, nodes)| nodes.clone())
                    .unwrap_or_default();
                queues.push((q.clone(), slot, nodes));
            }
        }
        Ok(RawRedisInfo {
            address,
            info,
            cluster: Some(RawClusterInfo {
                info: cluster_info,
                nodes,
                queues,
                each_node: Vec::new(),
            }),
        })
    }

    /// [`Broker::redis_info`] on a Redis Cluster connection: `CLUSTER
    /// NODES` once, then `INFO` on every node (by address, all at once up
    /// to [`CLUSTER_IN_FLIGHT`]), `CLUSTER INFO` on the first master. The
    /// top-level `INFO` and address are the first master's. Each queue's
    /// slot is computed here (the hash of `asynq:{<q>}:pending`, what
    /// `CLUSTER KEYSLOT` answers) and its nodes are the master serving the
    /// slot then that master's replicas. A node whose `INFO` fails keeps
    /// its error; the call fails only when no master answers.
    ///
    /// Errors: [`Error::Redis`]; [`Error::Internal`] for a cluster with no
    /// master serving slots.
    // asynqmon divergence: COMPATIBILITY.md#k7
    async fn cluster_redis_info(&self) -> Result<RawRedisInfo> {
        let (nodes, raw_nodes) = self.cluster_nodes_raw().await?;
        let infos: Vec<RawNodeInfo> = stream::iter(nodes.iter().cloned())
            .map(|node| async move {
                let info = match self
                    .on_node(&node.host, node.port, redis::cmd("INFO"))
                    .await
                {
                    Ok(v) => redis::from_redis_value::<String>(v).map_err(|e| e.to_string()),
                    Err(e) => Err(e.to_string()),
                };
                RawNodeInfo { node, info }
            })
            .buffered(CLUSTER_IN_FLIGHT)
            .collect()
            .await;
        let first = infos
            .iter()
            .find(|n| n.node.role == "master" && !n.node.slots.is_empty() && n.info.is_ok())
            .ok_or_else(|| Error::Internal("no master of the cluster answered INFO".to_string()))?;
        let info = first.info.clone().unwrap_or_default();
        let address = first.node.addr();
        let mut cluster_cmd = redis::cmd("CLUSTER");
        cluster_cmd.arg("INFO");
        let cluster_info: String = redis::from_redis_value(
            self.on_node(&first.node.host, first.node.port, cluster_cmd)
                .await?,
        )
        .map_err(|e| Error::Internal(format!("CLUSTER INFO replied: {e}")))?;
        let names = self.all_queues().await?;
        let queues = names
            .into_iter()
            .map(|q| {
                let slot = key_slot(keys::pending_key(&q).as_bytes());
                let serving: Vec<String> =
                    match nodes.iter().find(|n| n.role == "master" && n.serves(slot)) {
                        None => Vec::new(),
                        Some(m) => std::iter::once(m.addr())
                            .chain(
                                nodes
                                    .iter()
                                    .filter(|r| r.master_id.as_deref() == Some(m.id.as_str()))
                                    .map(ClusterNode::addr),
                            )
                            .collect(),
                    };
                (q, i64::from(slot), serving)
            })
            .collect();
        Ok(RawRedisInfo {
            address,
            info,
            cluster: Some(RawClusterInfo {
                info: cluster_info,
                nodes: raw_nodes,
                queues,
                each_node: infos,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detects_cluster_mode() {
        assert!(cluster_enabled("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!cluster_enabled("# Cluster\r\ncluster_enabled:0\r\n"));
        assert!(!cluster_enabled("redis_version:7.0.15\r\n"));
    }

    /// A Redis 7 `CLUSTER SLOTS` reply (node entries carry an id and a
    /// metadata map after host and port).
    #[test]
    fn parses_cluster_slots() {
        let node = |host: &str, port: i64| {
            Value::Array(vec![
                Value::BulkString(host.as_bytes().to_vec()),
                Value::Int(port),
                Value::BulkString(b"abc".to_vec()),
                Value::Array(vec![]),
            ])
        };
        let reply = Value::Array(vec![
            Value::Array(vec![
                Value::Int(0),
                Value::Int(8191),
                node("10.0.0.1", 7000),
                node("::1", 7003),
            ]),
            Value::Array(vec![Value::Int(8192), Value::Int(16383), node("", 7001)]),
            Value::Int(3),
        ]);
        assert_eq!(
            parse_slots(&reply, "h"),
            vec![
                (
                    0,
                    8191,
                    vec!["10.0.0.1:7000".to_string(), "[::1]:7003".to_string()]
                ),
                (8192, 16383, vec!["h:7001".to_string()]),
            ]
        );
    }
}

/// Property tests of the script reply parsers (issue 12).
#[cfg(test)]
mod reply_props;
