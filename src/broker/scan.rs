//! Keyspace walks with `SCAN` that work on every deployment.
//!
//! redis-rs sends a `SCAN` on a cluster connection to a random node, so a
//! walk there would see one node's keys, and a different node's at each
//! step. [`Broker::scan_each_master`] walks every master in turn, one
//! node's `SCAN` per step, its cursor saying which master and where;
//! [`Broker::scan_slot_owner`] walks only the master serving one slot (all
//! keys of one queue live there). Outside a cluster both are a plain
//! `SCAN` step.
// asynq divergence: COMPATIBILITY.md#c-b5

use redis::Value;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use super::{Broker, cluster::key_slot};
use crate::error::{Error, Result};

/// Bits of a cluster walk's cursor that hold the node's own `SCAN` cursor;
/// the bits above hold the master's index (masters sorted by address). A
/// Redis cursor needs the bits of its hash table's size (plus 14 for the
/// slot on Redis ≥ 7.4 clusters): 54 bits cover 2^40 keys per node.
const NODE_CURSOR_BITS: u32 = 54;

fn scan_cmd(cursor: u64, pattern: &str, count: usize) -> redis::Cmd {
    let mut cmd = redis::cmd("SCAN");
    cmd.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(count);
    cmd
}

fn scan_reply(v: Value) -> Result<(u64, Vec<Vec<u8>>)> {
    redis::from_redis_value(v)
        .map_err(|e| Error::Internal(format!("SCAN replied a value of the wrong shape: {e}")))
}

impl Broker {
    /// One step of a walk over every key matching `pattern` (a `SCAN MATCH`
    /// glob) with `COUNT count`, from `cursor` (0 starts): the next cursor
    /// (0 when the walk is complete) and the keys the step returned.
    ///
    /// On a cluster the cursor is the index of a master in address order
    /// (top bits, see `NODE_CURSOR_BITS`) and that master's own `SCAN`
    /// cursor; each step sends one `CLUSTER NODES` and one `SCAN` to that
    /// master, and a master's walk ending moves to the next. SCAN's
    /// guarantee (a key present for the whole walk is returned) holds while
    /// the set of masters does not change; after a failover or resharding
    /// the walk goes on over the masters then listed.
    ///
    /// Errors: [`Error::Redis`]; [`Error::Internal`] when a node's cursor
    /// does not fit the bits kept for it.
    pub(crate) async fn scan_each_master(
        &self,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> Result<(u64, Vec<Vec<u8>>)> {
        if !self.conn.is_cluster() {
            let v: Value = scan_cmd(cursor, pattern, count)
                .query_async(&mut self.conn())
                .await?;
            return scan_reply(v);
        }
        let masters = self.cluster_masters().await?;
        let index = (cursor >> NODE_CURSOR_BITS) as usize;
        let node_cursor = cursor & ((1u64 << NODE_CURSOR_BITS) - 1);
        let Some(node) = masters.get(index) else {
            // Fewer masters than when the walk began: it is over.
            return Ok((0, Vec::new()));
        };
        let reply = self
            .on_node(&node.host, node.port, scan_cmd(node_cursor, pattern, count))
            .await?;
        let (next, keys) = scan_reply(reply)?;
        if next >> NODE_CURSOR_BITS != 0 {
            return Err(Error::Internal(format!(
                "SCAN cursor {next} of {} does not fit {NODE_CURSOR_BITS} bits",
                node.addr()
            )));
        }
        let next = match (next, index + 1 < masters.len()) {
            (0, true) => ((index + 1) as u64) << NODE_CURSOR_BITS,
            (0, false) => 0,
            (n, _) => ((index as u64) << NODE_CURSOR_BITS) | n,
        };
        Ok((next, keys))
    }

    /// One `SCAN` step over the keys matching `pattern`, on the master that
    /// serves the slot of `slot_key` when this is a cluster (every key
    /// sharing `slot_key`'s hash tag is there), else on the one server.
    /// Cursors as plain `SCAN`'s. Errors: [`Error::Redis`].
    pub(crate) async fn scan_slot_owner(
        &self,
        slot_key: &str,
        cursor: u64,
        pattern: &str,
        count: usize,
    ) -> Result<(u64, Vec<Vec<u8>>)> {
        let mut conn = self.conn();
        let cmd = scan_cmd(cursor, pattern, count);
        let v: Value = match conn.as_cluster() {
            Some(cluster) => {
                let route = Route::new(key_slot(slot_key.as_bytes()), SlotAddr::Master);
                cluster
                    .route_command(
                        cmd,
                        RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route)),
                    )
                    .await?
            }
            None => cmd.query_async(&mut conn).await?,
        };
        scan_reply(v)
    }
}
