//! Queue statistics, as the inspector and the dashboard read them (Go:
//! `rdb.CurrentStats`, `memoryUsage`; `internal/rdb/inspect.go`, wire spec
//! §9.6), with their data types.
//!
//! Files: `queue_info.rs` (the public data types [`QueueInfo`],
//! [`DailyStats`], [`GroupInfo`], re-exported by the inspector),
//! `numbers.rs` (one queue's numbers as read, [`QueueStats`], and what a
//! many-queue read asks and returns), `key_kinds.rs` ([`KeyKinds`]: which
//! keys of a queue a read reads), `transaction.rs` (one queue's read, and
//! many queues' numbers in one `MULTI`/`EXEC` per
//! [`QUEUES_PER_STATS_CALL`] queues), `reply.rs` (reading the scripts'
//! replies), `memory.rs` (the memory estimate), `tracking.rs` and
//! `tracking/read.rs` (the same many-queue read through Redis key
//! tracking: only queues with a changed key are read again),
//! `per_queue.rs` (the many-queue read on a Redis Cluster: one
//! transaction per queue on its own slot, many in flight), `budget.rs`
//! (the dashboard's Redis budget every read above is metered by).

mod budget;
mod key_kinds;
mod memory;
mod numbers;
mod per_queue;
mod queue_info;
mod reply;
mod tracking;
mod transaction;

/// Property tests of the script reply parsers (issue 12).
#[cfg(test)]
mod reply_props;

pub(crate) use budget::metered;
pub use budget::{BURST, BudgetUsage, RedisBudget};
pub(crate) use key_kinds::KeyKinds;
pub(crate) use memory::QUEUES_PER_MEMORY_CALL;
use numbers::latency_at;
pub(crate) use numbers::{QueueStats, QueueStatsEntry, QueuesStats, Sample, StatsRequest};
pub use queue_info::{DailyStats, GroupInfo, QueueInfo};
pub(in crate::broker) use reply::counter_of;
pub(crate) use tracking::{StatsTracking, Tracked};

/// Most queues one `queues_stats` script call reads, so a call (and the time
/// Redis is busy with it) stays bounded however many queues exist.
pub(crate) const QUEUES_PER_STATS_CALL: usize = 100;
