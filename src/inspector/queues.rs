//! Queue-level inspector operations: list queues, their statistics and daily
//! history, groups, pause and unpause, delete a queue.
//!
//! Go: `Inspector.Queues`, `GetQueueInfo`, `History`, `Groups`,
//! `PauseQueue`, `UnpauseQueue`, `DeleteQueue` (`inspector.go`; wire spec
//! §9.5–9.8).

use std::collections::HashMap;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};

use super::Inspector;
use crate::broker::keys;
use crate::broker::{KeyKinds, StatsRequest, StatsTracking};
use crate::error::{Error, Result};

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

/// One queue's row of [`Inspector::queues_stats`].
#[derive(Debug)]
pub struct QueueStatsRow {
    /// Queue name.
    pub queue: String,
    /// Its statistics as [`Inspector::queue_info`] returns them but with
    /// `memory_usage` 0 (not estimated here), or why they could not be read.
    pub info: Result<QueueInfo>,
    /// The samples of its outage series that [`retry_growth`](super::retry_growth)
    /// looks at, oldest first (at most 5; empty without a series or when
    /// `info` failed), or why the series could not be read; `None` when not
    /// asked for.
    pub samples: Option<Result<Vec<super::QueueSample>>>,
}

/// What [`Inspector::queues_stats_with`] carries from one call to the next
/// to do less Redis work: which of each queue's keys besides `pending` held
/// something (those it reads again; the others it only proves absent), and
/// the queue list as last read (the queues to read next, when the caller
/// has no fresher list). Hints never change the numbers: a wrong guess
/// costs a second transaction. Empty at first.
///
/// Hints made by [`StatsHints::tracked`] also keep a Redis connection with
/// key tracking on (Redis ≥ 6, client-side caching): a queue none of whose
/// keys changed since the last call is not read again (`src/broker/tracking.rs`).
#[derive(Debug, Default)]
pub struct StatsHints {
    present: HashMap<String, KeyKinds>,
    members: Option<Vec<String>>,
    transactions: usize,
    tracking: Option<Box<StatsTracking>>,
}

impl StatsHints {
    /// Empty hints that also track keys: each call reads only the queues
    /// whose keys changed since the previous one (any change, by any
    /// client, before the call's last reply is heard of, so the numbers are
    /// as fresh as a full read), and the others cost Redis one `PING` per
    /// 100 queues. Holds one more Redis connection (RESP3, `CLIENT TRACKING
    /// ON`) from the first call on. Where Redis refuses that (Redis < 6, an
    /// ACL without `client`, a proxy without RESP3), calls read everything
    /// as with [`StatsHints::default`], trying again every 10 minutes.
    pub fn tracked() -> StatsHints {
        StatsHints {
            tracking: Some(Box::default()),
            ..StatsHints::default()
        }
    }

    /// Forgets what was learned, keeping the kind of hints (tracked or not).
    pub fn reset(&mut self) {
        *self = if self.tracking.is_some() {
            StatsHints::tracked()
        } else {
            StatsHints::default()
        };
    }

    /// How many Redis transactions the last call took: one per 100 queues
    /// when the hints were right.
    pub fn last_transactions(&self) -> usize {
        self.transactions
    }

    /// `asynq:queues` as the last call read it (sorted), `None` before the
    /// first call.
    pub fn members(&self) -> Option<&[String]> {
        self.members.as_deref()
    }
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

/// Rejects a blank queue name with Go's error (also where Go does not check:
/// `Groups`, `DeleteQueue`).
// asynq divergence: COMPATIBILITY.md#q1
fn validate(queue: &str) -> Result<()> {
    keys::validate_queue_name(queue).map_err(|_| Error::InvalidQueueName)
}

/// A [`QueueInfo`] of the broker's numbers and a memory estimate.
fn info_of(queue: &str, s: crate::broker::QueueStats, memory_usage: i64) -> QueueInfo {
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
    /// negative and the memory estimate survives missing hashes
    /// (`COMPATIBILITY.md` Q4, Q5).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::Corrupt`] (a counter or `pending_since` that is not an
    /// integer), [`Error::Internal`], [`Error::Redis`].
    pub async fn queue_info(&self, queue: &str) -> Result<QueueInfo> {
        validate(queue)?;
        let s = self.broker.queue_stats(queue).await?;
        let memory_usage = self.broker.queue_memory_usage(queue).await?;
        Ok(info_of(queue, s, memory_usage))
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
        validate(queue)?;
        if !self.broker.queue_exists(queue).await? {
            return Err(Error::QueueNotFound {
                queue: queue.to_string(),
            });
        }
        self.broker.queue_memory_usage(queue).await
    }

    /// Statistics of several queues at once, for a dashboard: for each queue
    /// what [`Inspector::queue_info`] returns, except `memory_usage`, which
    /// is 0 here (see [`Inspector::queues_memory_usage`]), and with
    /// `with_samples` the samples of its outage series that
    /// [`retry_growth`](super::retry_growth) needs. One Redis transaction
    /// per 100 queues instead of three calls per queue; one row per queue,
    /// in the order given. asynqdeck only (Go reads queue by queue).
    ///
    /// A queue that cannot be read does not fail the others: its row holds
    /// the error ([`Error::InvalidQueueName`], [`Error::QueueNotFound`] when
    /// it was deleted since listed, [`Error::Corrupt`], [`Error::Redis`] for
    /// a key of the wrong type, with Redis's text). The samples are those
    /// of the last hour ([`SAMPLE_WINDOW`](crate::broker::SAMPLE_WINDOW))
    /// that the growth figures look at: the newest, the oldest, and the
    /// newest at least 5 min, 15 min and 1 h older than the newest
    /// ([`GROWTH_WINDOWS`](super::GROWTH_WINDOWS)) when the series reaches
    /// back that far; `retry_growth` of them equals `retry_growth` of
    /// [`Inspector::queue_samples`] (as long as every sample parses).
    ///
    /// Errors of the whole call: [`Error::Redis`] (Redis unreachable),
    /// [`Error::Internal`].
    pub async fn queues_stats(
        &self,
        queues: &[String],
        with_samples: bool,
    ) -> Result<Vec<QueueStatsRow>> {
        self.read_queues_stats(queues, with_samples, &|_| KeyKinds::ALL, None)
            .await
            .map(|(rows, _, _)| rows)
    }

    /// [`Inspector::queues_stats`] for a caller that reads the same queues
    /// again and again (the dashboard): `hints` from the previous call let
    /// Redis skip the keys that held nothing then (proving them still
    /// absent is cheaper than reading them), and are updated for the next
    /// call, with the queue list this call read. The rows are exactly those
    /// of [`Inspector::queues_stats`] whatever the hints.
    pub async fn queues_stats_with(
        &self,
        queues: &[String],
        with_samples: bool,
        hints: &mut StatsHints,
    ) -> Result<Vec<QueueStatsRow>> {
        let present = &hints.present;
        let (rows, members, transactions) = self
            .read_queues_stats(
                queues,
                with_samples,
                &|q| present.get(q).copied().unwrap_or(KeyKinds::NONE),
                hints.tracking.as_deref_mut(),
            )
            .await?;
        hints.transactions = transactions;
        hints.present = rows
            .iter()
            .map(|r| {
                let kinds = match &r.info {
                    Ok(info) => KeyKinds::present_in_info(info),
                    // Read everything again, so the error shows again at
                    // the first try.
                    Err(_) => KeyKinds::ALL,
                };
                (r.queue.clone(), kinds)
            })
            .collect();
        hints.members = Some(members);
        Ok(rows)
    }

    /// The rows of [`Inspector::queues_stats`], reading for each valid queue
    /// the kinds of keys `expected` says (the others are proved absent or
    /// read after all), and `asynq:queues` as read (sorted); through key
    /// tracking when given its state.
    async fn read_queues_stats(
        &self,
        queues: &[String],
        with_samples: bool,
        expected: &(dyn Fn(&str) -> KeyKinds + Sync),
        tracking: Option<&mut StatsTracking>,
    ) -> Result<(Vec<QueueStatsRow>, Vec<String>, usize)> {
        let valid: Vec<String> = queues
            .iter()
            .filter(|q| keys::validate_queue_name(q).is_ok())
            .cloned()
            .collect();
        let window = chrono::Duration::from_std(crate::broker::SAMPLE_WINDOW)
            .unwrap_or(chrono::Duration::zero());
        let since = self.broker.now() - window;
        let req = StatsRequest {
            expected,
            since,
            windows: &super::GROWTH_WINDOWS,
            with_samples,
        };
        let read = match tracking {
            Some(t) => self.broker.queues_stats_tracked(t, &valid, &req).await?,
            None => self.broker.queues_stats(&valid, &req).await?,
        };
        let (members, transactions) = (read.members, read.transactions);
        let mut read = read.entries.into_iter();
        let mut rows = Vec::with_capacity(queues.len());
        for queue in queues {
            if keys::validate_queue_name(queue).is_err() {
                rows.push(QueueStatsRow {
                    queue: queue.clone(),
                    info: Err(Error::InvalidQueueName),
                    samples: with_samples.then(|| Ok(Vec::new())),
                });
                continue;
            }
            let e = read.next().ok_or_else(|| {
                Error::Internal("queues_stats returned fewer rows than queues".into())
            })?;
            rows.push(QueueStatsRow {
                info: e.stats.map(|s| info_of(queue, s, 0)),
                samples: e.samples.map(|r| {
                    r.map(|v| {
                        v.into_iter()
                            .map(|(at, retry, archived)| super::QueueSample {
                                at,
                                retry,
                                archived,
                            })
                            .collect()
                    })
                }),
                queue: e.queue,
            });
        }
        Ok((rows, members, transactions))
    }

    /// The memory estimates of several queues at once (each what
    /// [`Inspector::queue_memory_usage`] returns, without the existence
    /// check: a queue that does not exist estimates 0), one Redis script
    /// call per 10 queues, so Redis is never busy with one call for long.
    /// One `(queue, estimate)` per queue, in the order given; a queue whose
    /// estimate fails ([`Error::InvalidQueueName`], [`Error::Redis`] for a
    /// key of the wrong type or a refused `MEMORY USAGE`) does not fail the
    /// others. asynqdeck only.
    ///
    /// Errors of the whole call: [`Error::Redis`] (Redis unreachable),
    /// [`Error::Internal`].
    pub async fn queues_memory_usage(
        &self,
        queues: &[String],
    ) -> Result<Vec<(String, Result<i64>)>> {
        let valid: Vec<String> = queues
            .iter()
            .filter(|q| keys::validate_queue_name(q).is_ok())
            .cloned()
            .collect();
        let mut read = self.broker.queues_memory_usage(&valid).await?.into_iter();
        let mut out = Vec::with_capacity(queues.len());
        for queue in queues {
            if keys::validate_queue_name(queue).is_err() {
                out.push((queue.clone(), Err(Error::InvalidQueueName)));
                continue;
            }
            out.push(read.next().ok_or_else(|| {
                Error::Internal("queues_memory_usage returned fewer rows than queues".into())
            })?);
        }
        Ok(out)
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
        validate(queue)?;
        let rows = self.broker.daily_stats(queue, days).await?;
        Ok(rows
            .into_iter()
            .map(|(date, processed, failed)| DailyStats {
                queue: queue.to_string(),
                date,
                processed,
                failed,
            })
            .collect())
    }

    /// The queue's groups with their sizes, sorted by name (Go
    /// `Inspector.Groups`, unsorted; wire spec §9.8). Like Go, an unknown
    /// queue is not an error: it has no groups.
    ///
    /// Errors: [`Error::InvalidQueueName`] (Go does not validate here),
    /// [`Error::Internal`], [`Error::Redis`].
    pub async fn groups(&self, queue: &str) -> Result<Vec<GroupInfo>> {
        validate(queue)?;
        let mut groups: Vec<GroupInfo> = self
            .broker
            .group_stats(queue)
            .await?
            .into_iter()
            .map(|(group, size)| GroupInfo { group, size })
            .collect();
        // asynq divergence: COMPATIBILITY.md#q2
        groups.sort_by(|a, b| a.group.cmp(&b.group));
        Ok(groups)
    }

    /// Pauses the queue: `SETNX asynq:{q}:paused <now unix s>`, no TTL (Go
    /// `Inspector.PauseQueue`; wire spec §9.5). Servers stop taking tasks
    /// from it. Like Go, the queue need not exist (a queue can be paused
    /// before its first task).
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::FailedPrecondition`]
    /// `queue "<q>" is already paused`; [`Error::Redis`].
    pub async fn pause_queue(&self, queue: &str) -> Result<()> {
        validate(queue)?;
        self.broker.pause_queue(queue).await
    }

    /// Resumes the queue: `DEL asynq:{q}:paused` (Go
    /// `Inspector.UnpauseQueue`; wire spec §9.5). No existence check, as Go.
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::FailedPrecondition`]
    /// `queue "<q>" is not paused`; [`Error::Redis`].
    pub async fn unpause_queue(&self, queue: &str) -> Result<()> {
        validate(queue)?;
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
        validate(queue)?;
        self.broker.delete_queue(queue, force).await
    }
}
