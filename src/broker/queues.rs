//! Queue-level reads and changes: the queue list, statistics, daily history,
//! groups, pause and queue deletion.
//!
//! Go: `rdb.AllQueues`, `CurrentStats`, `memoryUsage`, `HistoricalStats`,
//! `GroupStats`, `Pause`, `Unpause`, `RemoveQueue` (`internal/rdb/inspect.go`;
//! wire spec §6.4, §9.5–9.8).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use redis::Value;

use super::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// Tasks sampled per list or zset by the memory estimate (Go `taskSampleSize`).
const MEMORY_TASK_SAMPLE: i64 = 20;
/// Groups sampled by the memory estimate (Go `groupSampleSize`).
const MEMORY_GROUP_SAMPLE: i64 = 5;
/// Most days [`Broker::daily_stats`] reads (100 years), so a request
/// cannot make it allocate without bound.
// asynq divergence: COMPATIBILITY.md#q6
pub(crate) const MAX_HISTORY_DAYS: usize = 36_500;
/// Daily counter keys read per `MGET` by [`Broker::daily_stats`].
const HISTORY_KEYS_PER_READ: usize = 100;

/// One snapshot of a queue's numbers (Go `rdb.Stats`), read by
/// [`Broker::queue_stats`].
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
    /// Sampled estimate in bytes (wire spec §9.6).
    pub memory_usage: i64,
    /// When the snapshot was taken.
    pub timestamp: DateTime<Utc>,
}

/// Reads an integer reply.
fn int_of(v: &Value, what: &str) -> Result<i64> {
    match v {
        Value::Int(n) => Ok(*n),
        other => Err(Error::Internal(format!(
            "{what}: expected an integer, got {other:?}"
        ))),
    }
}

/// Reads a stored decimal counter: nil is 0; anything but an integer is corrupt.
// asynq divergence: COMPATIBILITY.md#q4
fn counter_of(v: &Value, key: &str) -> Result<i64> {
    let bytes = match v {
        Value::Nil => return Ok(0),
        Value::Int(n) => return Ok(*n),
        Value::BulkString(b) => b,
        other => {
            return Err(Error::Internal(format!(
                "{key}: expected a counter, got {other:?}"
            )));
        }
    };
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| Error::Corrupt {
            key: key.to_string(),
            reason: format!(
                "counter is not an integer: {:?}",
                String::from_utf8_lossy(bytes)
            ),
        })
}

impl Broker {
    /// `SISMEMBER asynq:queues <queue>`: whether the queue was ever enqueued
    /// to and not deleted since (Go `rdb.queueExists`). Errors: [`Error::Redis`].
    pub(crate) async fn queue_exists(&self, queue: &str) -> Result<bool> {
        let found: bool = redis::cmd("SISMEMBER")
            .arg(keys::ALL_QUEUES)
            .arg(queue)
            .query_async(&mut self.conn())
            .await?;
        Ok(found)
    }

    /// Fails with [`Error::QueueNotFound`] unless the queue exists.
    async fn require_queue(&self, queue: &str) -> Result<()> {
        if self.queue_exists(queue).await? {
            Ok(())
        } else {
            Err(Error::QueueNotFound {
                queue: queue.to_string(),
            })
        }
    }

    /// Every queue name in `asynq:queues`, sorted (Go `rdb.AllQueues`, which
    /// leaves them in SMEMBERS order). Errors: [`Error::Redis`].
    pub(crate) async fn all_queues(&self) -> Result<Vec<String>> {
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(keys::ALL_QUEUES)
            .query_async(&mut self.conn())
            .await?;
        // asynq divergence: COMPATIBILITY.md#q2
        names.sort();
        Ok(names)
    }

    /// The queue's counts, counters, pause flag, latency and memory estimate
    /// (Go `rdb.CurrentStats` + `rdb.memoryUsage`; wire spec §9.6): two
    /// read-only scripts, `queue_stats` then `queue_memory_usage`.
    ///
    /// Errors: [`Error::QueueNotFound`]; [`Error::Corrupt`] when a counter or
    /// `pending_since` is not an integer; [`Error::Internal`] on a reply of
    /// the wrong shape; [`Error::Redis`].
    pub(crate) async fn queue_stats(&self, queue: &str) -> Result<QueueStats> {
        self.require_queue(queue).await?;
        let now = self.now();
        let today = now.date_naive();
        let mut conn = self.conn();
        let counter_keys = [
            keys::processed_key(queue, today),
            keys::failed_key(queue, today),
            keys::processed_total_key(queue),
            keys::failed_total_key(queue),
        ];
        let reply: Vec<Value> = scripts::QUEUE_STATS
            .key(keys::pending_key(queue))
            .key(keys::active_key(queue))
            .key(keys::scheduled_key(queue))
            .key(keys::retry_key(queue))
            .key(keys::archived_key(queue))
            .key(keys::completed_key(queue))
            .key(&counter_keys[0])
            .key(&counter_keys[1])
            .key(&counter_keys[2])
            .key(&counter_keys[3])
            .key(keys::paused_key(queue))
            .key(keys::all_groups_key(queue))
            .arg(keys::task_key_prefix(queue))
            .arg(keys::group_key_prefix(queue))
            .invoke_async(&mut conn)
            .await?;
        let [
            pending,
            active,
            scheduled,
            retry,
            archived,
            completed,
            processed,
            failed,
            processed_total,
            failed_total,
            paused,
            pending_since,
            groups,
            aggregating,
        ] = <[Value; 14]>::try_from(reply).map_err(|r| {
            Error::Internal(format!(
                "queue_stats script replied {} values, expected 14",
                r.len()
            ))
        })?;
        let since_key = format!(
            "{}<next pending> pending_since",
            keys::task_key_prefix(queue)
        );
        // Clamped at 0 (Go can report a negative latency under clock skew).
        // asynq divergence: COMPATIBILITY.md#q4
        let latency = match counter_of(&pending_since, &since_key)? {
            0 => Duration::ZERO,
            ns => (now - DateTime::from_timestamp_nanos(ns))
                .to_std()
                .unwrap_or_default(),
        };
        let memory_usage: i64 = scripts::QUEUE_MEMORY_USAGE
            .key(keys::active_key(queue))
            .key(keys::pending_key(queue))
            .key(keys::scheduled_key(queue))
            .key(keys::retry_key(queue))
            .key(keys::archived_key(queue))
            .key(keys::completed_key(queue))
            .key(keys::all_groups_key(queue))
            .arg(keys::task_key_prefix(queue))
            .arg(MEMORY_TASK_SAMPLE)
            .arg(MEMORY_GROUP_SAMPLE)
            .arg(keys::group_key_prefix(queue))
            .invoke_async(&mut conn)
            .await?;
        Ok(QueueStats {
            pending: int_of(&pending, "pending")?,
            active: int_of(&active, "active")?,
            scheduled: int_of(&scheduled, "scheduled")?,
            retry: int_of(&retry, "retry")?,
            archived: int_of(&archived, "archived")?,
            completed: int_of(&completed, "completed")?,
            processed: counter_of(&processed, &counter_keys[0])?,
            failed: counter_of(&failed, &counter_keys[1])?,
            processed_total: counter_of(&processed_total, &counter_keys[2])?,
            failed_total: counter_of(&failed_total, &counter_keys[3])?,
            paused: int_of(&paused, "paused")? == 1,
            latency,
            groups: int_of(&groups, "groups")?,
            aggregating: int_of(&aggregating, "aggregating")?,
            memory_usage,
            timestamp: now,
        })
    }

    /// Processed and failed counts of the last `days` UTC days, today first:
    /// `(day, processed, failed)`, 0 for a missing counter (Go
    /// `rdb.HistoricalStats`; wire spec §9.7). Day `i` is the UTC date of
    /// now − i × 24 h.
    ///
    /// Errors: [`Error::FailedPrecondition`] `the number of days must be
    /// positive` when `days` is 0 (checked first, as Go);
    /// [`Error::InvalidArgument`] when `days` exceeds [`MAX_HISTORY_DAYS`]
    /// (Go has no limit; daily counters live 90 days anyway);
    /// [`Error::QueueNotFound`]; [`Error::Corrupt`] for a non-integer
    /// counter; [`Error::Redis`].
    pub(crate) async fn daily_stats(
        &self,
        queue: &str,
        days: usize,
    ) -> Result<Vec<(NaiveDate, i64, i64)>> {
        if days < 1 {
            return Err(Error::FailedPrecondition(
                "the number of days must be positive".into(),
            ));
        }
        if days > MAX_HISTORY_DAYS {
            return Err(Error::InvalidArgument(format!(
                "the number of days must be at most {MAX_HISTORY_DAYS}"
            )));
        }
        self.require_queue(queue).await?;
        let now = self.now();
        let dates: Vec<NaiveDate> = (0..days)
            .map(|i| (now - chrono::Duration::days(i as i64)).date_naive())
            .collect();
        let mut conn = self.conn();
        let mut out = Vec::with_capacity(days);
        for chunk in dates.chunks(HISTORY_KEYS_PER_READ / 2) {
            let day_keys: Vec<(String, String)> = chunk
                .iter()
                .map(|d| (keys::processed_key(queue, *d), keys::failed_key(queue, *d)))
                .collect();
            let mut cmd = redis::cmd("MGET");
            for (p, f) in &day_keys {
                cmd.arg(p).arg(f);
            }
            let values: Vec<Value> = cmd.query_async(&mut conn).await?;
            if values.len() != day_keys.len() * 2 {
                return Err(Error::Internal(format!(
                    "MGET replied {} values for {} keys",
                    values.len(),
                    day_keys.len() * 2
                )));
            }
            for ((date, (pkey, fkey)), pair) in chunk.iter().zip(&day_keys).zip(values.chunks(2)) {
                out.push((
                    *date,
                    counter_of(&pair[0], pkey)?,
                    counter_of(&pair[1], fkey)?,
                ));
            }
        }
        Ok(out)
    }

    /// Every group of the queue with its size, in SMEMBERS order (Go
    /// `rdb.GroupStats`; wire spec §9.8). No queue existence check, as Go.
    /// Errors: [`Error::Internal`] on a reply of the wrong shape; [`Error::Redis`].
    pub(crate) async fn group_stats(&self, queue: &str) -> Result<Vec<(String, i64)>> {
        let reply: Vec<Value> = scripts::GROUP_STATS
            .key(keys::all_groups_key(queue))
            .arg(keys::group_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        if !reply.len().is_multiple_of(2) {
            return Err(Error::Internal(format!(
                "group_stats script replied {} values",
                reply.len()
            )));
        }
        reply
            .chunks(2)
            .map(|pair| match (&pair[0], &pair[1]) {
                (Value::BulkString(name), Value::Int(size)) => {
                    Ok((String::from_utf8_lossy(name).into_owned(), *size))
                }
                other => Err(Error::Internal(format!(
                    "group_stats script replied {other:?}"
                ))),
            })
            .collect()
    }

    /// `SETNX asynq:{q}:paused <now unix s>` (Go `rdb.Pause`; wire spec §9.5).
    /// No existence check, as Go. Errors: [`Error::FailedPrecondition`]
    /// `queue "<q>" is already paused`; [`Error::Redis`].
    pub(crate) async fn pause_queue(&self, queue: &str) -> Result<()> {
        let set: bool = redis::cmd("SETNX")
            .arg(keys::paused_key(queue))
            .arg(self.now().timestamp())
            .query_async(&mut self.conn())
            .await?;
        if set {
            Ok(())
        } else {
            Err(Error::FailedPrecondition(format!(
                "queue {queue:?} is already paused"
            )))
        }
    }

    /// `DEL asynq:{q}:paused` (Go `rdb.Unpause`; wire spec §9.5). Errors:
    /// [`Error::FailedPrecondition`] `queue "<q>" is not paused`; [`Error::Redis`].
    pub(crate) async fn unpause_queue(&self, queue: &str) -> Result<()> {
        let deleted: i64 = redis::cmd("DEL")
            .arg(keys::paused_key(queue))
            .query_async(&mut self.conn())
            .await?;
        if deleted == 1 {
            Ok(())
        } else {
            Err(Error::FailedPrecondition(format!(
                "queue {queue:?} is not paused"
            )))
        }
    }

    /// Deletes the queue (Go `rdb.RemoveQueue`; wire spec §9.5): one
    /// `delete_queue` script, then `SREM asynq:queues`.
    ///
    /// Without `force` only a queue holding no task in any state is removed;
    /// with `force` every task but active ones is deleted with its hash.
    /// Unlike Go, completed and aggregating tasks (group zsets, the groups
    /// set, aggregation sets) count as tasks and are deleted when forced
    /// (Go ignores them and orphans their keys, §14.11). Counters, the paused
    /// flag and uniqueness locks stay, as in Go.
    ///
    /// Errors: [`Error::QueueNotFound`]; [`Error::QueueNotEmpty`] (not
    /// forced, tasks remain); [`Error::FailedPrecondition`] `cannot remove
    /// queue with active tasks` (forced, active tasks); [`Error::Internal`];
    /// [`Error::Redis`].
    pub(crate) async fn delete_queue(&self, queue: &str, force: bool) -> Result<()> {
        self.require_queue(queue).await?;
        let mut conn = self.conn();
        let code: i64 = scripts::DELETE_QUEUE
            .key(keys::pending_key(queue))
            .key(keys::active_key(queue))
            .key(keys::scheduled_key(queue))
            .key(keys::retry_key(queue))
            .key(keys::archived_key(queue))
            .key(keys::lease_key(queue))
            .key(keys::completed_key(queue))
            .key(keys::all_groups_key(queue))
            .key(keys::all_aggregation_sets_key(queue))
            .arg(keys::task_key_prefix(queue))
            .arg(keys::group_key_prefix(queue))
            .arg(if force { 1 } else { 0 })
            .invoke_async(&mut conn)
            .await?;
        match code {
            1 => {
                let _: i64 = redis::cmd("SREM")
                    .arg(keys::ALL_QUEUES)
                    .arg(queue)
                    .query_async(&mut conn)
                    .await?;
                Ok(())
            }
            -1 => Err(Error::QueueNotEmpty {
                queue: queue.to_string(),
            }),
            -2 => Err(Error::FailedPrecondition(
                "cannot remove queue with active tasks".into(),
            )),
            other => Err(Error::Internal(format!(
                "delete_queue script replied {other}"
            ))),
        }
    }
}
