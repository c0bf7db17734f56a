//! Left-behind tasks: hashes whose `state` names a zset or a group that no
//! longer holds them, as Go's inspector archive trim leaves them (wire spec
//! §14.7; R12). Go cannot show, run or delete them; here they are shown for
//! what they are, deleted one by one ([`Inspector::delete_task`]) or swept in
//! bulk: count first ([`Inspector::count_left_behind`]), then delete
//! ([`Inspector::delete_left_behind`]), each in bounded steps
//! ([`Inspector::left_behind_step`]).
// asynq divergence: COMPATIBILITY.md#r12

use super::Inspector;
use crate::broker::{SweepCount, keys};
use crate::error::{Error, Result};

/// Rejects a blank queue name with Go's error.
fn validate_queue(queue: &str) -> Result<()> {
    keys::validate_queue_name(queue).map_err(|_| Error::InvalidQueueName)
}

impl Inspector {
    /// Whether task `id` of `queue` is left behind: its hash says scheduled,
    /// retry, archived or completed and that zset does not hold it, or says
    /// aggregating and neither its group nor an aggregation set holds it.
    /// `false` for a missing task and for pending and active tasks (not
    /// judged: list membership would cost a scan of the list).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::Redis`].
    pub async fn is_left_behind(&self, queue: &str, id: &str) -> Result<bool> {
        validate_queue(queue)?;
        self.broker.is_left_behind(queue, id).await
    }

    /// One bounded step of the sweep of `queue` from `cursor` (0 starts):
    /// one `SCAN … COUNT 100` of `asynq:{<q>}:t:*` and one script over the
    /// keys it returned, counting (and when `delete`, deleting, with their
    /// uniqueness locks) the left-behind tasks. Returns the next cursor (0
    /// when done) and the step's numbers. No queue check: a deleted queue's
    /// leftovers can be swept too.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::Redis`],
    /// [`Error::Internal`].
    pub async fn left_behind_step(
        &self,
        queue: &str,
        cursor: u64,
        delete: bool,
    ) -> Result<(u64, SweepCount)> {
        validate_queue(queue)?;
        self.broker.left_behind_step(queue, cursor, delete).await
    }

    /// Counts the left-behind tasks of `queue` (the preview of a sweep):
    /// every step of [`Inspector::left_behind_step`] without deleting. Each
    /// Redis call is bounded; the whole count takes one round trip per
    /// ~100 task keys of the queue.
    ///
    /// Errors: as [`Inspector::left_behind_step`].
    pub async fn count_left_behind(&self, queue: &str) -> Result<SweepCount> {
        self.sweep(queue, false).await
    }

    /// Deletes every left-behind task of `queue`, releasing their uniqueness
    /// locks, in bounded steps; returns what was scanned, found and deleted.
    ///
    /// Errors: as [`Inspector::left_behind_step`].
    pub async fn delete_left_behind(&self, queue: &str) -> Result<SweepCount> {
        self.sweep(queue, true).await
    }

    async fn sweep(&self, queue: &str, delete: bool) -> Result<SweepCount> {
        let mut total = SweepCount::default();
        let mut cursor = 0;
        loop {
            let (next, step) = self.left_behind_step(queue, cursor, delete).await?;
            total.add(step);
            if next == 0 {
                return Ok(total);
            }
            cursor = next;
        }
    }
}
