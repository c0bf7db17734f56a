//! The queue data types the statistics reads produce, public through the
//! inspector (`asynqdeck::inspector::QueueInfo` and friends): one queue's
//! snapshot ([`QueueInfo`], Go `asynq.QueueInfo`), a day of its history
//! ([`DailyStats`]) and one of its groups ([`GroupInfo`]).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};

use super::QueueStats;

/// A snapshot of one queue (Go `asynq.QueueInfo`; wire spec §9.6).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueueInfo {
    /// Queue name.
    pub queue: String,
    /// Approximate bytes the queue and its tasks take in Redis, estimated by
    /// sampling 20 tasks per state and 5 groups, as Go does.
    pub memory_usage: i64,
    /// Age of the next pending task to run: now − its `pending_since`. Zero
    /// when nothing is pending or that task has no `pending_since` (it was
    /// requeued or run by hand, §14.5).
    pub latency: Duration,
    /// Tasks in every state: pending + active + scheduled + retry + archived
    /// + completed + aggregating (Go counts completed too, §14.10).
    pub size: i64,
    /// Number of groups (names in `asynq:{q}:groups`).
    pub groups: i64,
    /// Pending tasks.
    pub pending: i64,
    /// Active tasks.
    pub active: i64,
    /// Scheduled tasks.
    pub scheduled: i64,
    /// Tasks waiting for a retry.
    pub retry: i64,
    /// Archived tasks.
    pub archived: i64,
    /// Completed tasks kept for their retention.
    pub completed: i64,
    /// Tasks in groups, waiting for aggregation.
    pub aggregating: i64,
    /// Tasks processed today (UTC day), successes and failures.
    pub processed: i64,
    /// Tasks failed today (UTC day).
    pub failed: i64,
    /// Tasks processed since the queue's counters began.
    pub processed_total: i64,
    /// Tasks failed since the queue's counters began.
    pub failed_total: i64,
    /// The queue is paused: servers take no task from it.
    pub paused: bool,
    /// When the snapshot was taken.
    pub timestamp: DateTime<Utc>,
}

/// Processed and failed counts of one queue on one UTC day (Go
/// `asynq.DailyStats`; wire spec §9.7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DailyStats {
    /// Queue name.
    pub queue: String,
    /// The UTC date (Go keeps the instant now − i days; the date is what the
    /// counters are keyed by).
    // asynq divergence: COMPATIBILITY.md#q6
    pub date: NaiveDate,
    /// Tasks processed that day, successes and failures; 0 when no counter.
    pub processed: i64,
    /// Tasks failed that day; 0 when no counter.
    pub failed: i64,
}

/// One group of a queue (Go `asynq.GroupInfo`; wire spec §9.8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    /// Group name.
    pub group: String,
    /// Aggregating tasks in the group.
    pub size: i64,
}

impl QueueStats {
    /// These numbers of `queue` as a [`QueueInfo`] with `memory_usage`
    /// (read apart, [`Broker::queue_memory_usage`](crate::broker::Broker)).
    pub(crate) fn info(self, queue: &str, memory_usage: i64) -> QueueInfo {
        let s = self;
        QueueInfo {
            queue: queue.to_string(),
            memory_usage,
            latency: s.latency,
            size: s.pending
                + s.active
                + s.scheduled
                + s.retry
                + s.archived
                + s.completed
                + s.aggregating,
            groups: s.groups,
            pending: s.pending,
            active: s.active,
            scheduled: s.scheduled,
            retry: s.retry,
            archived: s.archived,
            completed: s.completed,
            aggregating: s.aggregating,
            processed: s.processed,
            failed: s.failed,
            processed_total: s.processed_total,
            failed_total: s.failed_total,
            paused: s.paused,
            timestamp: s.timestamp,
        }
    }
}
