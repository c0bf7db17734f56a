//! Left-behind tasks: hashes whose `state` names a zset or a group that no
//! longer holds them, as Go's inspector archive trim leaves them (wire spec
//! §14.7; R12). Go cannot show, run or delete them; here they are shown for
//! what they are, deleted one by one ([`Inspector::delete_task`]) or swept in
//! bulk: count first (the preview), then delete, each as a job of bounded
//! slices ([`Inspector::left_behind_slice`], a few dozen bounded steps
//! [`Inspector::left_behind_step`] each) that the caller drives with the
//! cursor each slice returns: the dashboard does one slice per request.
//! [`Inspector::count_left_behind`] and [`Inspector::delete_left_behind`]
//! run a whole sweep in one call, for library users.
// asynq divergence: COMPATIBILITY.md#r12

use std::time::{Duration, Instant};

use super::Inspector;
use crate::broker::SweepCount;
use crate::error::{Error, Result};

/// How much one slice of the left-behind sweep may do
/// ([`Inspector::left_behind_slice`]): it stops after `max_steps` steps or
/// once `max_time` has passed since it started, whichever comes first,
/// checked after each step (so a slice always makes at least one step and
/// may overrun `max_time` by one step, itself ~1 ms of Redis time).
/// Default: 50 steps (~5,000 task keys) or 200 ms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SweepBudget {
    /// Steps (one `SCAN … COUNT 100` and one script each) per slice; 0 is
    /// taken as 1.
    pub max_steps: u32,
    /// Wall time after which a slice makes no further step.
    pub max_time: Duration,
}

impl Default for SweepBudget {
    fn default() -> Self {
        SweepBudget {
            max_steps: 50,
            max_time: Duration::from_millis(200),
        }
    }
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
        self.broker.check_queue_name(queue)?;
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
        self.broker.check_queue_name(queue)?;
        self.broker.left_behind_step(queue, cursor, delete).await
    }

    /// One slice of the sweep of `queue` from `cursor` (0 starts): steps of
    /// [`Inspector::left_behind_step`] until the sweep is done or this
    /// inspector's [`SweepBudget`] is spent ([`Inspector::with_sweep_budget`]).
    /// Returns the cursor to pass to the next slice (0: the sweep is done)
    /// and the slice's numbers; the caller adds them up. `delete` false is
    /// the preview (counts only, changes nothing). A key may be counted
    /// twice when Redis shrinks its key table between slices (SCAN's rule);
    /// none is deleted twice.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`] when
    /// `queue` is not a known queue (unlike a single step), [`Error::Redis`],
    /// [`Error::Internal`].
    pub async fn left_behind_slice(
        &self,
        queue: &str,
        cursor: u64,
        delete: bool,
    ) -> Result<(u64, SweepCount)> {
        self.broker.check_queue_name(queue)?;
        if !self.broker.queue_exists(queue).await? {
            return Err(Error::QueueNotFound {
                queue: queue.to_string(),
            });
        }
        let budget = self.sweep_budget;
        let started = Instant::now();
        let mut total = SweepCount::default();
        let mut cursor = cursor;
        let mut steps = 0;
        loop {
            let (next, step) = self.broker.left_behind_step(queue, cursor, delete).await?;
            total.add(step);
            steps += 1;
            if next == 0 || steps >= budget.max_steps.max(1) || started.elapsed() >= budget.max_time
            {
                return Ok((next, total));
            }
            cursor = next;
        }
    }

    /// Counts the left-behind tasks of `queue` (the preview of a sweep) in
    /// one call: every step of [`Inspector::left_behind_step`] without
    /// deleting. Each Redis call is bounded, but the whole count takes one
    /// round trip per ~100 task keys of the queue (10,000 for a million):
    /// a request handler should drive [`Inspector::left_behind_slice`]
    /// instead.
    ///
    /// Errors: as [`Inspector::left_behind_step`].
    pub async fn count_left_behind(&self, queue: &str) -> Result<SweepCount> {
        self.sweep(queue, false).await
    }

    /// Deletes every left-behind task of `queue`, releasing their uniqueness
    /// locks, in bounded steps, in one call; returns what was scanned, found
    /// and deleted. One round trip per ~100 task keys, as
    /// [`Inspector::count_left_behind`]; see [`Inspector::left_behind_slice`].
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
