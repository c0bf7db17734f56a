//! `SCAN` on every deployment: a keyspace walk over every master of a
//! Redis Cluster (one cursor per master; a cluster's `SCAN` is a node's
//! own, and redis-rs would send it to a random node), or over the one
//! server elsewhere; and a walk over the keys of one slot (a pattern
//! inside one queue's `{<queue>}` tag), sent to the master serving it.
//!
//! Every step is one `SCAN … COUNT n`: O(n) in Redis.
// asynq divergence: COMPATIBILITY.md#k11

use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use super::Broker;
use crate::error::{Error, Result};

/// Where a walk over every master stands: the master's index in
/// [`Broker::scan_masters`]'s order (by address) and its `SCAN` cursor.
/// [`ScanCursor::START`] starts a walk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScanCursor {
    /// Index of the master being walked (0 on a single server).
    pub node: usize,
    /// That master's `SCAN` cursor.
    pub cursor: u64,
}

impl ScanCursor {
    /// The start of a walk.
    pub const START: ScanCursor = ScanCursor { node: 0, cursor: 0 };
}

/// `(host, port)` of the masters serving slots, from a `CLUSTER NODES`
/// reply, sorted.
fn masters_of(nodes: &str) -> Vec<(String, u16)> {
    let mut out: Vec<(String, u16)> = nodes
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let serves = f.len() > 8;
            let master = f.get(2)?.split(',').any(|x| x == "master");
            let failed = f.get(2)?.split(',').any(|x| x == "fail");
            if !(serves && master && !failed) {
                return None;
            }
            let addr = f[1].split('@').next()?;
            let (host, port) = addr.rsplit_once(':')?;
            Some((host.to_string(), port.parse().ok()?))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

impl Broker {
    /// The masters a keyspace walk visits, by address: a cluster's masters
    /// serving slots (`CLUSTER NODES` on a random node), or an empty list
    /// for a single server (the connection's own). Errors: [`Error::Redis`].
    pub async fn scan_masters(&self) -> Result<Vec<(String, u16)>> {
        let mut conn = self.conn();
        let Some(c) = conn.as_cluster() else {
            return Ok(Vec::new());
        };
        let reply = c
            .route_command(
                redis::cmd("CLUSTER").arg("NODES").clone(),
                RoutingInfo::SingleNode(SingleNodeRoutingInfo::Random),
            )
            .await?;
        let text: String = redis::from_redis_value(reply)
            .map_err(|e| Error::Internal(format!("CLUSTER NODES reply: {e}")))?;
        Ok(masters_of(&text))
    }

    /// One `SCAN <cursor> MATCH <pattern> COUNT <count>` step of a walk
    /// over `masters` (from [`Broker::scan_masters`] at the walk's start;
    /// empty for a single server): the keys it returned and where the walk
    /// goes on (`None` once the last master's cursor came back to 0). A
    /// master index past the list ends the walk. Errors: [`Error::Redis`]
    /// (also for a master that left the cluster mid-walk).
    pub async fn scan_step(
        &self,
        masters: &[(String, u16)],
        at: ScanCursor,
        pattern: &str,
        count: usize,
    ) -> Result<(Option<ScanCursor>, Vec<Vec<u8>>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(at.cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let mut conn = self.conn();
        let (next, keys, nodes): (u64, Vec<Vec<u8>>, usize) = match conn.as_cluster() {
            Some(c) if !masters.is_empty() => {
                let Some((host, port)) = masters.get(at.node).cloned() else {
                    return Ok((None, Vec::new()));
                };
                let reply = c
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::ByAddress { host, port }),
                    )
                    .await?;
                let (next, keys) = redis::from_redis_value(reply)
                    .map_err(|e| Error::Internal(format!("SCAN reply: {e}")))?;
                (next, keys, masters.len())
            }
            _ => {
                let (next, keys) = cmd.query_async(&mut conn).await?;
                (next, keys, 1)
            }
        };
        let after = if next != 0 {
            Some(ScanCursor {
                node: at.node,
                cursor: next,
            })
        } else if at.node + 1 < nodes {
            Some(ScanCursor {
                node: at.node + 1,
                cursor: 0,
            })
        } else {
            None
        };
        Ok((after, keys))
    }

    /// Walks every master with `pattern`, `count` keys a step, handing each
    /// step's keys to `f`. For small keyspaces and tests: the whole walk
    /// runs now. Errors: [`Error::Redis`] (the walk stops).
    pub async fn scan_each_master<F>(&self, pattern: &str, count: usize, mut f: F) -> Result<()>
    where
        F: FnMut(Vec<Vec<u8>>),
    {
        let masters = self.scan_masters().await?;
        let mut at = Some(ScanCursor::START);
        while let Some(cursor) = at {
            let (next, keys) = self.scan_step(&masters, cursor, pattern, count).await?;
            f(keys);
            at = next;
        }
        Ok(())
    }

    /// One `SCAN <cursor> MATCH <pattern> COUNT <count>` step on the master
    /// serving `key`'s slot (the single server elsewhere), for a pattern
    /// whose keys all share `key`'s hash tag (`asynq:{q}:t:*` with
    /// `asynq:{q}:t:`): the next cursor (0 when done) and the keys.
    /// Errors: [`Error::Redis`].
    pub async fn scan_slot_of(
        &self,
        key: &str,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> Result<(u64, Vec<Vec<u8>>)> {
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(count);
        let mut conn = self.conn();
        match conn.as_cluster() {
            None => Ok(cmd.query_async(&mut conn).await?),
            Some(c) => {
                let route = Route::with_key(key, SlotAddr::Master);
                let reply = c
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?;
                redis::from_redis_value(reply)
                    .map_err(|e| Error::Internal(format!("SCAN reply: {e}")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn masters_serving_slots() {
        let nodes = "\
a1 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460\n\
b2 127.0.0.1:7000@17000 master - 0 0 2 connected 5461-10922\n\
c3 127.0.0.1:7002@17002 master,fail - 0 0 3 connected 10923-16383\n\
d4 127.0.0.1:7003@17003 slave b2 0 0 2 connected\n\
e5 127.0.0.1:7004@17004 master - 0 0 5 connected\n";
        assert_eq!(
            super::masters_of(nodes),
            vec![
                ("127.0.0.1".to_string(), 7000),
                ("127.0.0.1".to_string(), 7001)
            ]
        );
    }
}
