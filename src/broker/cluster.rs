//! The shape of a Redis Cluster as the broker reads it: its nodes
//! (`CLUSTER NODES`, parsed into [`ClusterNode`]), the hash slot of a key
//! (computed here as Redis does, CRC16 of the hash tag), and one command
//! sent to one node by address (redis-rs `route_command`, `ByAddress`).
//!
//! Used by the keyspace walks (`scan.rs`), the Redis page (`info.rs`) and
//! the reads that go per node on a cluster. Outside a cluster the functions
//! that need one answer [`Error::FailedPrecondition`].

use redis::Value;
use redis::cluster_routing::{RoutingInfo, SingleNodeRoutingInfo};

use super::{Broker, keys};
use crate::error::{Error, Result};

/// Number of hash slots of a Redis Cluster.
pub const CLUSTER_SLOTS: u16 = 16384;

/// One node of a Redis Cluster, as a line of `CLUSTER NODES` describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// The node id (40 hex characters).
    pub id: String,
    /// Host (IP address as the cluster announces it; the seed's host when
    /// the node announces none).
    pub host: String,
    /// Client port.
    pub port: u16,
    /// `master` or `replica`.
    pub role: &'static str,
    /// The id of its master, for a replica.
    pub master_id: Option<String>,
    /// The flags as listed (`myself`, `master`, `fail?`, ...).
    pub flags: Vec<String>,
    /// `connected` or `disconnected` (the cluster bus link).
    pub link: String,
    /// The slot ranges it serves, inclusive, ascending; empty for a replica.
    pub slots: Vec<(u16, u16)>,
}

impl ClusterNode {
    /// `host:port` (IPv6 hosts in brackets).
    pub fn addr(&self) -> String {
        join_host_port(&self.host, self.port)
    }

    /// Whether the node serves `slot`.
    pub fn serves(&self, slot: u16) -> bool {
        self.slots.iter().any(|(a, b)| (*a..=*b).contains(&slot))
    }
}

/// `host:port`, with an IPv6 host in brackets (Go `net.JoinHostPort`).
pub(crate) fn join_host_port(host: &str, port: impl std::fmt::Display) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum
/// Redis Cluster hashes keys with.
fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The hash slot of `key`, as `CLUSTER KEYSLOT` computes it: the CRC16 of
/// the key's hash tag (what lies between the first `{` and the first `}`
/// after it, when that is not empty) or of the whole key, modulo 16,384.
pub fn key_slot(key: &[u8]) -> u16 {
    let hashed = match key.iter().position(|&b| b == b'{') {
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &key[open + 1..open + 1 + len],
            _ => key,
        },
        None => key,
    };
    crc16(hashed) % CLUSTER_SLOTS
}

/// Parses a `CLUSTER NODES` reply. `fallback_host` stands for a node that
/// announces no address (`:port@cport`). Lines of another shape and slot
/// entries in migration (`[slot->-id]`) are skipped. Nodes come sorted by
/// address.
pub(crate) fn parse_cluster_nodes(text: &str, fallback_host: &str) -> Vec<ClusterNode> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        // ip:port@cport[,hostname]
        let addr = f[1].split(['@', ',']).next().unwrap_or("");
        let Some((host, port)) = addr.rsplit_once(':') else {
            continue;
        };
        let Ok(port) = port.parse::<u16>() else {
            continue;
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let host = if host.is_empty() { fallback_host } else { host };
        let flags: Vec<String> = f[2].split(',').map(str::to_string).collect();
        let role = if flags.iter().any(|x| x == "master") {
            "master"
        } else {
            "replica"
        };
        let mut slots = Vec::new();
        for s in &f[8..] {
            if s.starts_with('[') {
                continue;
            }
            let (a, b) = s.split_once('-').unwrap_or((s, s));
            if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>()) {
                slots.push((a, b));
            }
        }
        slots.sort_unstable();
        out.push(ClusterNode {
            id: f[0].to_string(),
            host: host.to_string(),
            port,
            role,
            master_id: (f[3] != "-").then(|| f[3].to_string()),
            flags,
            link: f[7].to_string(),
            slots,
        });
    }
    out.sort_by_key(|n| (n.host.clone(), n.port));
    out
}

/// Redis's error reply outside cluster mode, as a clear error; other
/// errors unchanged.
fn cluster_refused(e: redis::RedisError) -> Error {
    if e.to_string().contains("cluster support disabled") {
        Error::FailedPrecondition(format!(
            "Redis is not a cluster: {}",
            e.detail().unwrap_or("cluster support disabled")
        ))
    } else {
        Error::Redis(e)
    }
}

fn not_a_cluster() -> Error {
    Error::FailedPrecondition(
        "Redis is not a cluster (connect with --redis-cluster-nodes or a redis-cluster:// URL)"
            .into(),
    )
}

impl Broker {
    /// The cluster's nodes from `CLUSTER NODES` (one command, to any
    /// node; or to the one server, which may be a cluster node reached as a
    /// standalone one), sorted by address, with that reply as sent.
    ///
    /// Errors: [`Error::FailedPrecondition`] when Redis is not in cluster
    /// mode; [`Error::Redis`].
    pub(crate) async fn cluster_nodes_raw(&self) -> Result<(Vec<ClusterNode>, String)> {
        let mut conn = self.conn();
        let text: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut conn)
            .await
            .map_err(cluster_refused)?;
        let fallback = match &*self.target {
            super::Target::Cluster(c) => c.seeds.first().map(|(h, _)| h.clone()),
            _ => None,
        }
        .unwrap_or_else(|| {
            let addr = self.target.address();
            addr.rsplit_once(':')
                .map(|(h, _)| h.to_string())
                .unwrap_or(addr)
        });
        Ok((parse_cluster_nodes(&text, &fallback), text))
    }

    /// The hash slot of `queue`'s keys: `CLUSTER KEYSLOT asynq:{<queue>}:pending`
    /// (Go `rdb.ClusterKeySlot`, `Inspector.ClusterKeySlot`).
    ///
    /// Errors: [`Error::FailedPrecondition`] when Redis is not in cluster
    /// mode (Go passes Redis's `ERR This instance has cluster support
    /// disabled` on); [`Error::Redis`].
    pub(crate) async fn cluster_key_slot(&self, queue: &str) -> Result<i64> {
        redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(keys::pending_key(queue))
            .query_async(&mut self.conn())
            .await
            .map_err(cluster_refused)
    }

    /// The nodes serving `queue`'s slot ([`Broker::cluster_key_slot`]):
    /// the master, then its replicas, as `CLUSTER NODES` lists them (Go
    /// `rdb.ClusterNodes` reads `CLUSTER SLOTS`, which names the same
    /// nodes in the same order).
    ///
    /// Errors: [`Error::FailedPrecondition`] when Redis is not in cluster
    /// mode or no node serves the slot (Go: `nodes not found`);
    /// [`Error::Redis`].
    pub(crate) async fn cluster_nodes_of(&self, queue: &str) -> Result<Vec<ClusterNode>> {
        let slot = self.cluster_key_slot(queue).await?;
        let (nodes, _) = self.cluster_nodes_raw().await?;
        let slot = u16::try_from(slot)
            .map_err(|_| Error::Internal(format!("CLUSTER KEYSLOT replied {slot}")))?;
        let Some(master) = nodes
            .iter()
            .find(|n| n.role == "master" && n.serves(slot))
            .cloned()
        else {
            return Err(Error::FailedPrecondition(format!(
                "no cluster node serves slot {slot} of queue {queue:?}"
            )));
        };
        let id = master.id.clone();
        let replicas = nodes
            .into_iter()
            .filter(|n| n.master_id.as_deref() == Some(id.as_str()));
        Ok(std::iter::once(master).chain(replicas).collect())
    }

    /// Sends `cmd` to the node at `host:port` of the cluster and returns
    /// its reply as that node sent it. Errors: [`Error::FailedPrecondition`]
    /// outside a cluster; [`Error::Redis`].
    pub(crate) async fn on_node(&self, host: &str, port: u16, cmd: redis::Cmd) -> Result<Value> {
        let mut conn = self.conn();
        let cluster = conn.as_cluster().ok_or_else(not_a_cluster)?;
        let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress {
            host: host.to_string(),
            port,
        });
        Ok(cluster.route_command(cmd, routing).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Slots as `CLUSTER KEYSLOT` gives them (values from Redis 7.0).
    #[test]
    fn key_slots_follow_the_hash_tag() {
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"123456789"), 12739);
        assert_eq!(key_slot(b"asynq:{default}:pending"), key_slot(b"default"));
        assert_eq!(key_slot(b"{}foo"), crc16(b"{}foo") % CLUSTER_SLOTS);
        assert_eq!(key_slot(b"a{b}c{d}"), key_slot(b"b"));
        assert_eq!(key_slot(b"a{"), crc16(b"a{") % CLUSTER_SLOTS);
    }

    #[test]
    fn parses_cluster_nodes_lines() {
        let text = "\
07c3 127.0.0.1:30004@40004 slave e7d1 0 1426238317239 4 connected\n\
67ed 127.0.0.1:30002@40002,host2 master - 0 1426238316232 2 connected 5461-10922\n\
e7d1 :30001@40001 myself,master - 0 0 1 connected 0-5460 [5461->-67ed]\n\
292f 127.0.0.1:30003@40003 master - 0 1426238318243 3 connected 10923-16383 12000\n";
        let nodes = parse_cluster_nodes(text, "10.0.0.9");
        let addrs: Vec<String> = nodes.iter().map(ClusterNode::addr).collect();
        assert_eq!(
            addrs,
            [
                "10.0.0.9:30001",
                "127.0.0.1:30002",
                "127.0.0.1:30003",
                "127.0.0.1:30004"
            ]
        );
        assert_eq!(nodes[0].slots, [(0, 5460)]);
        assert_eq!(nodes[0].role, "master");
        assert!(nodes[0].flags.contains(&"myself".to_string()));
        assert_eq!(nodes[1].slots, [(5461, 10922)]);
        assert_eq!(nodes[2].slots, [(10923, 16383), (12000, 12000)]);
        assert_eq!(nodes[3].role, "replica");
        assert_eq!(nodes[3].master_id.as_deref(), Some("e7d1"));
        assert!(nodes[3].slots.is_empty());
        assert!(nodes[1].serves(6000) && !nodes[1].serves(0));
    }
}
