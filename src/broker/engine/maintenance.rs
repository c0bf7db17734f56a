//! The maintenance loops' writes: the forwarder's move of due tasks
//! (Go `ForwardIfReady`), the recoverer's read of expired leases and its
//! archive of undecodable tasks (`ListLeaseExpired`), the janitor's
//! deletion of expired completed tasks (`DeleteExpiredCompletedTasks`) and
//! the reclaim of stale aggregation sets (`ReclaimStaleAggregationSets`;
//! wire spec §6.10–6.15).

use chrono::{DateTime, Utc};

use super::unreadable_key;
use crate::broker::proto::WireTask;
use crate::broker::{Broker, decode_task, keys, scripts};
use crate::error::{Error, Result};

/// Tasks moved per forwarder script call (Go: 100).
pub const FORWARD_BATCH: usize = 100;
/// Most expired leases one recoverer pass reads per queue (Go: no limit).
// asynq divergence: COMPATIBILITY.md#w5
pub const RECOVER_BATCH: usize = 1000;

impl Broker {
    /// Moves every due scheduled and retry task of `queue` to pending (or to
    /// its group), in batches of [`FORWARD_BATCH`] (S12; Go `ForwardIfReady`).
    /// Returns how many moved. A due id whose task key is of another type is
    /// moved to the archive (key untouched), one whose task key is missing
    /// is dropped; each is logged once (it leaves the set) and the batch
    /// goes on (COMPATIBILITY.md X1).
    pub async fn forward_if_ready(&self, queue: &str) -> Result<u64> {
        let mut moved = 0;
        let cutoff = |now: DateTime<Utc>| {
            now.timestamp() - crate::broker::ARCHIVE_RETENTION.as_secs() as i64
        };
        for source in [keys::scheduled_key(queue), keys::retry_key(queue)] {
            loop {
                let now = self.now();
                let (taken, n, archived, dropped): (u64, u64, Vec<Vec<u8>>, Vec<Vec<u8>>) =
                    scripts::FORWARD
                        .key(&source)
                        .key(keys::pending_key(queue))
                        .key(keys::all_groups_key(queue))
                        .key(keys::archived_key(queue))
                        .arg(now.timestamp())
                        .arg(keys::task_key_prefix(queue))
                        .arg(now.timestamp_nanos_opt().unwrap_or(i64::MAX))
                        .arg(keys::group_key_prefix(queue))
                        .arg(FORWARD_BATCH)
                        .arg(cutoff(now))
                        .arg(crate::broker::MAX_ARCHIVE_SIZE)
                        .invoke_async(&mut self.conn())
                        .await?;
                moved += n;
                // asynq divergence: COMPATIBILITY.md#x1
                for id in archived {
                    tracing::warn!(
                        key = %keys::task_key(queue, &String::from_utf8_lossy(&id)),
                        from = %source,
                        "forwarder: task key is not a hash; id moved to the archive, key left as is"
                    );
                }
                for id in dropped {
                    tracing::warn!(
                        key = %keys::task_key(queue, &String::from_utf8_lossy(&id)),
                        from = %source,
                        "forwarder: task key missing; id dropped"
                    );
                }
                // Go loops until a batch moves 0.
                // asynq divergence: COMPATIBILITY.md#w6
                if taken < FORWARD_BATCH as u64 {
                    break;
                }
            }
        }
        Ok(moved)
    }

    /// Active tasks of `queue` whose lease expired at or before `cutoff`
    /// (Go `ListLeaseExpired`), at most [`RECOVER_BATCH`]. An entry whose
    /// msg does not decode, or whose key is not a readable task hash, comes
    /// back as an error with its id.
    // asynq divergence: COMPATIBILITY.md#w13
    pub async fn list_lease_expired(
        &self,
        queue: &str,
        cutoff: DateTime<Utc>,
    ) -> Result<Vec<std::result::Result<WireTask, (String, Error)>>> {
        let reply: Vec<redis::Value> = scripts::LIST_LEASE_EXPIRED
            .key(keys::lease_key(queue))
            .arg(cutoff.timestamp())
            .arg(keys::task_key_prefix(queue))
            .arg(RECOVER_BATCH)
            .invoke_async(&mut self.conn())
            .await?;
        if !reply.len().is_multiple_of(2) {
            return Err(Error::Internal(format!(
                "list_lease_expired replied {} values, not id and msg pairs",
                reply.len()
            )));
        }
        let mut ids = reply.into_iter();
        let mut out = Vec::new();
        while let (Some(id), Some(msg)) = (ids.next(), ids.next()) {
            let redis::Value::BulkString(id) = id else {
                return Err(Error::Internal(format!(
                    "list_lease_expired replied {id:?} for an id"
                )));
            };
            let id = String::from_utf8_lossy(&id).into_owned();
            out.push(match msg {
                redis::Value::BulkString(msg) => {
                    decode_task(&keys::task_key(queue, &id), &msg).map_err(|e| (id, e))
                }
                redis::Value::Int(_) => {
                    let e = unreadable_key(queue, &id);
                    Err((id, e))
                }
                other => {
                    return Err(Error::Internal(format!(
                        "list_lease_expired replied {other:?} for a msg"
                    )));
                }
            });
        }
        Ok(out)
    }

    /// Moves a leased task whose msg cannot be decoded to the archive with
    /// its msg untouched (it cannot be re-encoded), so it stops holding a
    /// lease and shows on the archived tab, where it can be deleted. Trims
    /// the archive like every archive write; counts nothing (no attempt ran).
    /// Returns whether it was moved (false: no longer active nor leased).
    // asynq divergence: COMPATIBILITY.md#w3
    pub async fn archive_undecodable(&self, queue: &str, id: &str) -> Result<bool> {
        let now = self.now();
        let cutoff = now.timestamp() - crate::broker::ARCHIVE_RETENTION.as_secs() as i64;
        let code: i64 = scripts::ARCHIVE_UNDECODABLE
            .key(keys::task_key(queue, id))
            .key(keys::active_key(queue))
            .key(keys::lease_key(queue))
            .key(keys::archived_key(queue))
            .arg(id)
            .arg(now.timestamp())
            .arg(cutoff)
            .arg(crate::broker::MAX_ARCHIVE_SIZE)
            .arg(keys::task_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        Ok(code == 1)
    }

    /// Deletes completed tasks of `queue` whose retention ended, `batch` per
    /// script call until none is left (Go `DeleteExpiredCompletedTasks`).
    /// Returns how many were deleted.
    pub async fn delete_expired_completed(&self, queue: &str, batch: usize) -> Result<u64> {
        let batch = batch.max(1);
        let mut deleted = 0;
        loop {
            let n: u64 = scripts::DELETE_EXPIRED_COMPLETED
                .key(keys::completed_key(queue))
                .arg(self.now().timestamp())
                .arg(keys::task_key_prefix(queue))
                .arg(batch)
                .invoke_async(&mut self.conn())
                .await?;
            deleted += n;
            // asynq divergence: COMPATIBILITY.md#w6
            if n < batch as u64 {
                return Ok(deleted);
            }
        }
    }

    /// Returns the tasks of aggregation sets whose deadline passed to their
    /// groups (Go `ReclaimStaleAggregationSets`). Returns how many sets.
    /// An aggregation set key of another type is dropped from the index
    /// (key left as is), a set whose group key is of another type is left
    /// where it is; both are logged and the other sets are reclaimed
    /// (COMPATIBILITY.md X1).
    pub async fn reclaim_stale_aggregation_sets(&self, queue: &str) -> Result<u64> {
        let (n, bad_sets, bad_groups): (u64, Vec<Vec<u8>>, Vec<Vec<u8>>) =
            scripts::RECLAIM_STALE_AGGREGATION_SETS
                .key(keys::all_aggregation_sets_key(queue))
                .key(keys::all_groups_key(queue))
                .arg(self.now().timestamp())
                .arg(keys::group_key_prefix(queue))
                .invoke_async(&mut self.conn())
                .await?;
        // asynq divergence: COMPATIBILITY.md#x1
        for key in bad_sets {
            tracing::warn!(
                key = %String::from_utf8_lossy(&key),
                "recoverer: aggregation set is not a sorted set; dropped from the index, key left as is"
            );
        }
        for key in bad_groups {
            tracing::warn!(
                set = %String::from_utf8_lossy(&key),
                "recoverer: the group of this stale aggregation set is not a sorted set; set left as is"
            );
        }
        Ok(n)
    }
}
