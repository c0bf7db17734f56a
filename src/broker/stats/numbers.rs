//! What a statistics read asks for and what it returns: one queue's
//! numbers as read ([`QueueStats`], Go `rdb.Stats` without the memory
//! estimate), one queue's entry of a many-queue read ([`QueueStatsEntry`]),
//! the request ([`StatsRequest`]) and the whole result ([`QueuesStats`]).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::KeyKinds;
use crate::error::Result;

/// One snapshot of a queue's numbers (Go `rdb.Stats` without the memory
/// estimate, which
/// [`Broker::queue_memory_usage`](crate::broker::Broker::queue_memory_usage)
/// reads), read by [`Broker::queue_stats`](crate::broker::Broker::queue_stats)
/// and [`Broker::queues_stats`](crate::broker::Broker::queues_stats).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QueueStats {
    /// LLEN of `pending`.
    pub pending: i64,
    /// LLEN of `active`.
    pub active: i64,
    /// ZCARD of `scheduled`.
    pub scheduled: i64,
    /// ZCARD of `retry`.
    pub retry: i64,
    /// ZCARD of `archived`.
    pub archived: i64,
    /// ZCARD of `completed`.
    pub completed: i64,
    /// Sum of the group zsets' sizes.
    pub aggregating: i64,
    /// Number of names in `groups`.
    pub groups: i64,
    /// Today's (UTC) processed counter, 0 when absent.
    pub processed: i64,
    /// Today's (UTC) failed counter, 0 when absent.
    pub failed: i64,
    /// All-time processed counter, 0 when absent.
    pub processed_total: i64,
    /// All-time failed counter, 0 when absent.
    pub failed_total: i64,
    /// The `paused` key exists.
    pub paused: bool,
    /// Now minus `pending_since` of the next pending task; zero when there is
    /// none, it has no `pending_since`, or the time lies in the future.
    pub latency: Duration,
    /// `pending_since` of the next pending task as read (unix nanoseconds),
    /// 0 when there is none or it has no such field: what `latency` is
    /// computed from, kept so [`QueueStats::at`] can recompute it.
    pub pending_since: i64,
    /// When the snapshot was taken.
    pub timestamp: DateTime<Utc>,
}

/// Now minus `pending_since` (unix nanoseconds; 0 for none), clamped at 0
/// (Go can report a negative latency under clock skew).
// asynq divergence: COMPATIBILITY.md#q4
pub(super) fn latency_at(now: DateTime<Utc>, pending_since: i64) -> Duration {
    match pending_since {
        0 => Duration::ZERO,
        ns => (now - DateTime::from_timestamp_nanos(ns))
            .to_std()
            .unwrap_or_default(),
    }
}

impl QueueStats {
    /// The same numbers as of `now`: only the latency (it grows with time
    /// while the same task is next) and the timestamp change. For numbers
    /// known unchanged since they were read (key tracking,
    /// `src/broker/stats/tracking.rs`).
    pub(crate) fn at(&self, now: DateTime<Utc>) -> QueueStats {
        QueueStats {
            latency: latency_at(now, self.pending_since),
            timestamp: now,
            ..self.clone()
        }
    }
}

/// One outage-series sample: `(time, retry size, archived size)`.
pub(crate) type Sample = (DateTime<Utc>, i64, i64);

/// One queue's entry of [`Broker::queues_stats`](crate::broker::Broker::queues_stats).
#[derive(Debug)]
pub(crate) struct QueueStatsEntry {
    /// Queue name.
    pub queue: String,
    /// Its numbers, or why they could not be read:
    /// [`Error::QueueNotFound`](crate::Error::QueueNotFound) (deleted since
    /// listed), [`Error::Corrupt`](crate::Error::Corrupt),
    /// [`Error::Redis`](crate::Error::Redis) (e.g. a key of the wrong type:
    /// Redis's own error text), [`Error::Internal`](crate::Error::Internal).
    pub stats: Result<QueueStats>,
    /// The samples of its outage series the growth figures need, oldest first,
    /// as `(time, retry size, archived size)`; see
    /// [`Broker::queues_stats`](crate::broker::Broker::queues_stats). `None`
    /// when not asked for; empty when the counts failed.
    pub samples: Option<Result<Vec<Sample>>>,
    /// The id of the next pending task, as read with the numbers (`None`
    /// when nothing is pending or the numbers failed).
    pub next_id: Option<Vec<u8>>,
}

/// What a statistics read asks besides the queue names (shared by the plain and
/// the tracked reads): the key kinds guessed present per queue (see
/// [`Broker::queues_stats`](crate::broker::Broker::queues_stats)), and the
/// growth samples wanted — scored at or after `since`, one per window of
/// `windows` — or none unless `with_samples`, and the Redis budget.
#[derive(Clone, Copy)]
pub(crate) struct StatsRequest<'a> {
    pub expected: &'a (dyn Fn(&str) -> KeyKinds + Sync),
    pub since: DateTime<Utc>,
    pub windows: &'a [Duration],
    pub with_samples: bool,
    /// The budget every command of the read is metered by
    /// ([`RedisBudget::metered`](super::RedisBudget::metered)); `None`:
    /// unmetered.
    pub budget: Option<&'a super::RedisBudget>,
}

/// The result of [`Broker::queues_stats`](crate::broker::Broker::queues_stats).
#[derive(Debug)]
pub(crate) struct QueuesStats {
    /// One entry per queue asked for, in the order given.
    pub entries: Vec<QueueStatsEntry>,
    /// `asynq:queues` as read with the first queues' numbers, sorted.
    pub members: Vec<String>,
    /// Transactions sent: one per
    /// [`QUEUES_PER_STATS_CALL`](super::QUEUES_PER_STATS_CALL) queues when
    /// `expected` was right, more when it missed a kind or the script had to be
    /// loaded.
    pub transactions: usize,
}
