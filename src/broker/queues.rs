//! Queue-level reads and changes besides the statistics (`stats/`): the
//! queue list and existence check, daily history, groups (paged), pause and queue
//! deletion.
//!
//! Go: `rdb.AllQueues`, `HistoricalStats`, `GroupStats`, `Pause`,
//! `Unpause`, `RemoveQueue` (`internal/rdb/inspect.go`; wire spec §6.4,
//! §9.5, §9.7, §9.8).

use chrono::NaiveDate;
use redis::Value;

use super::stats::{DailyStats, GroupInfo, counter_of};
use super::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// Most days [`Broker::daily_stats`] reads (100 years), so a request
/// cannot make it allocate without bound.
// asynq divergence: COMPATIBILITY.md#q6
pub(crate) const MAX_HISTORY_DAYS: usize = 36_500;
/// Daily counter keys read per `MGET` by [`Broker::daily_stats`].
const HISTORY_KEYS_PER_READ: usize = 100;

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
    pub(super) async fn require_queue(&self, queue: &str) -> Result<()> {
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

    /// [`Broker::all_queues`] without the names this deployment cannot hold
    /// ([`Broker::check_queue_name`]: on a cluster a name starting with `}`,
    /// left in `asynq:queues` by a Go enqueue that then failed). The
    /// maintenance loops work on these, so they never send a script whose
    /// keys cross slots (COMPATIBILITY.md K2). Errors: [`Error::Redis`].
    pub async fn workable_queues(&self) -> Result<Vec<String>> {
        let mut names = self.all_queues().await?;
        names.retain(|q| self.check_queue_name(q).is_ok());
        Ok(names)
    }

    /// Processed and failed counts of the last `days` UTC days, today first,
    /// 0 for a missing counter (Go
    /// `rdb.HistoricalStats`; wire spec §9.7). Day `i` is the UTC date of
    /// now − i × 24 h.
    ///
    /// Errors: [`Error::FailedPrecondition`] `the number of days must be
    /// positive` when `days` is 0 (checked first, as Go);
    /// [`Error::InvalidArgument`] when `days` exceeds [`MAX_HISTORY_DAYS`]
    /// (Go has no limit; daily counters live 90 days anyway);
    /// [`Error::QueueNotFound`]; [`Error::Corrupt`] for a non-integer
    /// counter; [`Error::Redis`].
    pub(crate) async fn daily_stats(&self, queue: &str, days: usize) -> Result<Vec<DailyStats>> {
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
                out.push(DailyStats {
                    queue: queue.to_string(),
                    date: *date,
                    processed: counter_of(&pair[0], pkey)?,
                    failed: counter_of(&pair[1], fkey)?,
                });
            }
        }
        Ok(out)
    }

    /// One page of the queue's groups with their sizes (Go `rdb.GroupStats`,
    /// paged; wire spec §9.8; COMPATIBILITY.md L9): one `group_stats`
    /// script call, `SSCAN asynq:{q}:groups <cursor> COUNT <count>` and a
    /// `ZCARD` per name returned. `cursor` 0 starts a walk; the returned
    /// cursor continues it, 0 when it is over. A page holds about `count`
    /// names (whole hash buckets; a small set, stored as a listpack or
    /// intset, comes whole), in SSCAN order. No queue existence check, as Go.
    /// Errors: [`Error::InvalidArgument`] when `count` is 0;
    /// [`Error::Internal`] on a reply of the wrong shape; [`Error::Redis`].
    pub(crate) async fn group_page(
        &self,
        queue: &str,
        cursor: u64,
        count: usize,
    ) -> Result<(Vec<GroupInfo>, u64)> {
        if count == 0 {
            return Err(Error::InvalidArgument(
                "the page size must be positive".into(),
            ));
        }
        let reply: Vec<Value> = scripts::GROUP_STATS
            .key(keys::all_groups_key(queue))
            .arg(keys::group_key_prefix(queue))
            .arg(cursor)
            .arg(count)
            .invoke_async(&mut self.conn())
            .await?;
        let shape = |what: &dyn std::fmt::Debug| {
            Error::Internal(format!("group_stats script replied {what:?}"))
        };
        let Some((first, rest)) = reply.split_first() else {
            return Err(shape(&reply));
        };
        let next = match first {
            Value::BulkString(b) => std::str::from_utf8(b)
                .ok()
                .and_then(|t| t.parse::<u64>().ok())
                .ok_or_else(|| shape(first))?,
            other => return Err(shape(other)),
        };
        if !rest.len().is_multiple_of(2) {
            return Err(shape(&rest.len()));
        }
        let mut groups = Vec::new();
        for pair in rest.chunks(2) {
            match (&pair[0], &pair[1]) {
                // A group key that is not a sorted set: left out, named in
                // the log (one bad key must not hide the queue's groups).
                (Value::BulkString(name), Value::Int(size)) if *size < 0 => {
                    tracing::warn!(
                        key = %keys::group_key(queue, &String::from_utf8_lossy(name)),
                        "group key is not a sorted set; group left out"
                    );
                }
                (Value::BulkString(name), Value::Int(size)) => groups.push(GroupInfo {
                    group: String::from_utf8_lossy(name).into_owned(),
                    size: *size,
                }),
                other => return Err(shape(&other)),
            }
        }
        Ok((groups, next))
    }

    /// `ZCARD asynq:{q}:g:<group>`: the group's size (0 for an unknown
    /// group). Errors: [`Error::Redis`] (also a key of the wrong type).
    pub(crate) async fn group_size(&self, queue: &str, group: &str) -> Result<i64> {
        let size: i64 = redis::cmd("ZCARD")
            .arg(keys::group_key(queue, group))
            .query_async(&mut self.conn())
            .await?;
        Ok(size)
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
    /// (Go ignores them and orphans their keys, §14.11), and every other key
    /// of the queue goes too (issue 12 R14; Go keeps them): the paused flag,
    /// the all-time and daily counters (every day of the last
    /// [`STATS_TTL`](super::STATS_TTL) + 2), the outage samples and the
    /// uniqueness locks the deleted tasks held.
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
            .key(keys::paused_key(queue))
            .key(keys::processed_total_key(queue))
            .key(keys::failed_total_key(queue))
            .key(super::samples_key(queue))
            .key(daily_counter_keys(queue, self.now()))
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

/// The daily processed and failed counter keys of `queue` that can still
/// exist at `now`: each lives [`STATS_TTL`](super::STATS_TTL) (90 days)
/// after its last increment, so every day from 91 days ago to tomorrow
/// (clock skew), 2 × 93 keys.
fn daily_counter_keys(queue: &str, now: chrono::DateTime<chrono::Utc>) -> Vec<String> {
    let days = (super::STATS_TTL.as_secs() / 86_400) as i64 + 1;
    let today = now.date_naive();
    (-days..=1)
        .filter_map(|d| today.checked_add_signed(chrono::Duration::days(d)))
        .flat_map(|day| {
            [
                keys::processed_key(queue, day),
                keys::failed_key(queue, day),
            ]
        })
        .collect()
}
