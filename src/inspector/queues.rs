//! Queue-level inspector operations: list queues, one queue's statistics
//! and daily history, groups, pause and unpause, delete a queue (many
//! queues' statistics at once: `stats.rs`).
//!
//! Go: `Inspector.Queues`, `GetQueueInfo`, `History`, `Groups`,
//! `PauseQueue`, `UnpauseQueue`, `DeleteQueue` (`inspector.go`; wire spec
//! §9.5–9.8).

use super::Inspector;
use crate::broker::{DailyStats, GroupInfo, QueueInfo};
use crate::error::{Error, Result};

/// Largest page [`Inspector::groups_page`] serves, and the page
/// [`Inspector::groups`] reads: one Redis call of an `SSCAN … COUNT 500`
/// and about 500 `ZCARD`s (about 1–2 ms on a 1,000,000-group set here).
pub const GROUPS_PAGE_MAX: usize = 500;

/// One page of a queue's groups ([`Inspector::groups_page`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupsPage {
    /// The page's groups with their sizes, sorted by name.
    pub groups: Vec<GroupInfo>,
    /// Cursor of the next page; 0 when the walk is over.
    pub next_cursor: u64,
}

impl Inspector {
    /// Every queue name, sorted (Go `Inspector.Queues`: `SMEMBERS
    /// asynq:queues`, unsorted). Queues appear when a task is enqueued to
    /// them and disappear on [`Inspector::delete_queue`]. Errors: [`Error::Redis`].
    pub async fn queues(&self) -> Result<Vec<String>> {
        self.broker.all_queues().await
    }

    /// The queue's sizes per state, counters, pause flag, latency and memory
    /// estimate, as Go's `Inspector.GetQueueInfo` computes them (wire spec
    /// §9.6), except that counters are exact integers, latency is never
    /// negative, the memory estimate survives missing hashes
    /// (`COMPATIBILITY.md` Q4, Q5) and is reused for
    /// [`MEMORY_CACHE_TTL`](super::MEMORY_CACHE_TTL) per queue
    /// ([`Inspector::queue_memory_estimate`], L11), and past 1,000 groups the
    /// aggregating count is estimated from about 200 of them (L10).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::Corrupt`] (a counter or `pending_since` that is not an
    /// integer), [`Error::Internal`], [`Error::Redis`].
    pub async fn queue_info(&self, queue: &str) -> Result<QueueInfo> {
        self.broker.check_queue_name(queue)?;
        let s = self.broker.queue_stats(queue).await?;
        // Cached per queue (COMPATIBILITY.md L11; Go estimates every call).
        let memory_usage = self.cached_memory_of_existing(queue).await?;
        Ok(s.info(queue, memory_usage))
    }

    /// The sampled estimate in bytes of what the queue takes in Redis: the
    /// `memory_usage` of [`Inspector::queue_info`] alone (Go
    /// `rdb.memoryUsage`, guarded form, `COMPATIBILITY.md` Q5): `MEMORY
    /// USAGE` of up to 20 tasks per state and of 20 tasks in each of 5
    /// groups, scaled to the sizes, plus the queue's own keys. The costly
    /// part of a queue's statistics (about 25 Redis commands per non-empty
    /// state), which is why the dashboard refreshes it on its own, slower
    /// cadence.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::Redis`] (also when the server refuses `MEMORY USAGE`, as
    /// some managed services do).
    pub async fn queue_memory_usage(&self, queue: &str) -> Result<i64> {
        self.broker.check_queue_name(queue)?;
        if !self.broker.queue_exists(queue).await? {
            return Err(Error::QueueNotFound {
                queue: queue.to_string(),
            });
        }
        self.broker.queue_memory_usage(queue).await
    }

    /// Processed and failed counts of the last `days` UTC days; index 0 is
    /// today, missing counters read 0 (Go `Inspector.History`; wire spec §9.7).
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::FailedPrecondition`]
    /// `the number of days must be positive` when `days` is 0;
    /// [`Error::InvalidArgument`] when `days` exceeds 36,500 (100 years; Go
    /// has no limit, daily counters live 90 days);
    /// [`Error::QueueNotFound`]; [`Error::Corrupt`] (a counter that is not an
    /// integer); [`Error::Redis`].
    pub async fn history(&self, queue: &str, days: usize) -> Result<Vec<DailyStats>> {
        self.broker.check_queue_name(queue)?;
        self.broker.daily_stats(queue, days).await
    }

    /// The queue's first groups with their sizes, sorted by name (Go
    /// `Inspector.Groups`, every group, unsorted; wire spec §9.8): the first
    /// page of a walk ([`Inspector::groups_page`] from cursor 0 with
    /// [`GROUPS_PAGE_MAX`]), so about 500 groups at most however many the
    /// queue has (COMPATIBILITY.md L9); a queue with fewer has them all.
    /// Like Go, an unknown queue is not an error: it has no groups.
    ///
    /// Errors: [`Error::InvalidQueueName`] (Go does not validate here),
    /// [`Error::Internal`], [`Error::Redis`].
    pub async fn groups(&self, queue: &str) -> Result<Vec<GroupInfo>> {
        Ok(self.groups_page(queue, 0, GROUPS_PAGE_MAX).await?.groups)
    }

    /// One page of the queue's groups (issue 15): `cursor` 0 starts a walk,
    /// [`GroupsPage::next_cursor`] continues it and is 0 once every group
    /// was returned. One bounded Redis call per page (`SSCAN … COUNT size`
    /// and a `ZCARD` per name). A page holds about `size` groups (Redis
    /// returns whole hash buckets; a small set stored compactly, an intset,
    /// or on Redis 7.2+ a listpack of up to 128 names, comes whole),
    /// sorted by name within the page. A walk returns every group that
    /// exists throughout it exactly once while the set is not resized;
    /// groups added or removed meanwhile may be missed or, if Redis rehashes
    /// the set, repeated (SSCAN's contract).
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::InvalidArgument`] when
    /// `size` is 0 or over [`GROUPS_PAGE_MAX`]; [`Error::Internal`];
    /// [`Error::Redis`].
    pub async fn groups_page(&self, queue: &str, cursor: u64, size: usize) -> Result<GroupsPage> {
        self.broker.check_queue_name(queue)?;
        if size == 0 || size > GROUPS_PAGE_MAX {
            return Err(Error::InvalidArgument(format!(
                "the groups page size must be 1 to {GROUPS_PAGE_MAX}"
            )));
        }
        let (mut groups, next_cursor) = self.broker.group_page(queue, cursor, size).await?;
        // asynq divergence: COMPATIBILITY.md#q2
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        Ok(GroupsPage {
            groups,
            next_cursor,
        })
    }

    /// The size of one group (`ZCARD`; 0 for an unknown group). Errors:
    /// [`Error::InvalidQueueName`]; [`Error::Redis`].
    pub async fn group_size(&self, queue: &str, group: &str) -> Result<i64> {
        self.broker.check_queue_name(queue)?;
        self.broker.group_size(queue, group).await
    }

    /// Pauses the queue: `SETNX asynq:{q}:paused <now unix s>`, no TTL (Go
    /// `Inspector.PauseQueue`; wire spec §9.5). Servers stop taking tasks
    /// from it. Like Go, the queue need not exist (a queue can be paused
    /// before its first task).
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::FailedPrecondition`]
    /// `queue "<q>" is already paused`; [`Error::Redis`].
    pub async fn pause_queue(&self, queue: &str) -> Result<()> {
        self.broker.check_queue_name(queue)?;
        self.broker.pause_queue(queue).await
    }

    /// Resumes the queue: `DEL asynq:{q}:paused` (Go
    /// `Inspector.UnpauseQueue`; wire spec §9.5). No existence check, as Go.
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::FailedPrecondition`]
    /// `queue "<q>" is not paused`; [`Error::Redis`].
    pub async fn unpause_queue(&self, queue: &str) -> Result<()> {
        self.broker.check_queue_name(queue)?;
        self.broker.unpause_queue(queue).await
    }

    /// Deletes the queue (Go `Inspector.DeleteQueue`; wire spec §9.5).
    ///
    /// Without `force`, only a queue with no task in any state is deleted.
    /// With `force`, every task is deleted with its hash unless some task is
    /// active. Then the queue leaves `asynq:queues`.
    ///
    /// Differs from Go: completed and aggregating tasks count as tasks (Go
    /// ignores them), and a forced delete removes them, their group zsets,
    /// the groups set and aggregation sets instead of orphaning them
    /// (§14.11). Unlike Go, every other key of the queue goes too (issue 12
    /// R14): the paused flag, the all-time and daily counters, the outage
    /// samples and the uniqueness locks of the deleted tasks, so a queue of
    /// the same name that comes back (a Go producer still enqueuing, found
    /// by the engine's queue discovery) starts unpaused and from zero.
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::QueueNotFound`];
    /// [`Error::QueueNotEmpty`] (not forced); [`Error::FailedPrecondition`]
    /// `cannot remove queue with active tasks` (forced); [`Error::Internal`];
    /// [`Error::Redis`].
    pub async fn delete_queue(&self, queue: &str, force: bool) -> Result<()> {
        self.broker.check_queue_name(queue)?;
        self.broker.delete_queue(queue, force).await
    }
}
