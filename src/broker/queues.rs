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
/// Most queues one `queues_stats` script call reads, so a call (and the time
/// Redis is busy with it) stays bounded however many queues exist.
pub(crate) const QUEUES_PER_STATS_CALL: usize = 100;
/// Most queues one `queues_memory_usage` script call estimates (each is
/// about 40 commands inside Redis per non-empty state group, so a call
/// stays well under a millisecond).
pub(crate) const QUEUES_PER_MEMORY_CALL: usize = 10;

/// One snapshot of a queue's numbers (Go `rdb.Stats` without the memory
/// estimate, which [`Broker::queue_memory_usage`] reads), read by
/// [`Broker::queue_stats`] and [`Broker::queues_stats`].
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
    /// When the snapshot was taken.
    pub timestamp: DateTime<Utc>,
}

/// One outage-series sample: `(time, retry size, archived size)`.
pub(crate) type Sample = (DateTime<Utc>, i64, i64);

/// One queue's entry of [`Broker::queues_stats`].
#[derive(Debug)]
pub(crate) struct QueueStatsEntry {
    /// Queue name.
    pub queue: String,
    /// Its numbers, or why they could not be read: [`Error::QueueNotFound`]
    /// (deleted since listed), [`Error::Corrupt`], [`Error::Redis`] (e.g. a
    /// key of the wrong type: Redis's own error text), [`Error::Internal`].
    pub stats: Result<QueueStats>,
    /// The samples of its outage series the growth figures need, oldest
    /// first, as `(time, retry size, archived size)`; see
    /// [`Broker::queues_stats`]. `None` when not asked for; empty when the
    /// counts failed.
    pub samples: Option<Result<Vec<Sample>>>,
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

/// The 12 keys `queue_stats` (and `queues_stats`, per queue) reads, in its
/// KEYS order; the daily counters are those of `now`'s UTC date.
fn stats_keys(queue: &str, now: DateTime<Utc>) -> [String; 12] {
    let today = now.date_naive();
    [
        keys::pending_key(queue),
        keys::active_key(queue),
        keys::scheduled_key(queue),
        keys::retry_key(queue),
        keys::archived_key(queue),
        keys::completed_key(queue),
        keys::processed_key(queue, today),
        keys::failed_key(queue, today),
        keys::processed_total_key(queue),
        keys::failed_total_key(queue),
        keys::paused_key(queue),
        keys::all_groups_key(queue),
    ]
}

/// The part of `key` after the queue's prefix `asynq:{<q>}:`, for the
/// scripts that build a queue's keys from its prefix.
fn suffix_of(queue: &str, key: String) -> Result<String> {
    key.strip_prefix(&keys::queue_prefix(queue))
        .map(str::to_string)
        .ok_or_else(|| Error::Internal(format!("key {key:?} lacks the queue prefix")))
}

/// The 14 key suffixes `queues_stats` takes (see its header), from the key
/// functions of [`keys`]; the daily counters are those of `now`'s UTC date.
fn key_suffixes(now: DateTime<Utc>) -> Result<[String; 14]> {
    const Q: &str = "q";
    let [k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, k12] = stats_keys(Q, now);
    Ok([
        suffix_of(Q, k1)?,
        suffix_of(Q, k2)?,
        suffix_of(Q, k3)?,
        suffix_of(Q, k4)?,
        suffix_of(Q, k5)?,
        suffix_of(Q, k6)?,
        suffix_of(Q, k7)?,
        suffix_of(Q, k8)?,
        suffix_of(Q, k9)?,
        suffix_of(Q, k10)?,
        suffix_of(Q, k11)?,
        suffix_of(Q, k12)?,
        suffix_of(Q, keys::task_key_prefix(Q))?,
        suffix_of(Q, keys::group_key_prefix(Q))?,
    ])
}

/// The 9 key suffixes `queues_memory_usage` takes (see its header).
fn memory_key_suffixes() -> Result<[String; 9]> {
    const Q: &str = "q";
    Ok([
        suffix_of(Q, keys::active_key(Q))?,
        suffix_of(Q, keys::pending_key(Q))?,
        suffix_of(Q, keys::scheduled_key(Q))?,
        suffix_of(Q, keys::retry_key(Q))?,
        suffix_of(Q, keys::archived_key(Q))?,
        suffix_of(Q, keys::completed_key(Q))?,
        suffix_of(Q, keys::all_groups_key(Q))?,
        suffix_of(Q, keys::task_key_prefix(Q))?,
        suffix_of(Q, keys::group_key_prefix(Q))?,
    ])
}

/// A script's reply of the wrong shape for `queue`.
fn shape_error(script: &str, queue: &str, what: &Value) -> Error {
    Error::Internal(format!(
        "{script} script replied {what:?} for queue {queue:?}"
    ))
}

/// Reads the 14 values of `lib/queue_counts.lua` for `queue`, taken at `now`.
fn parse_stats(queue: &str, now: DateTime<Utc>, reply: Vec<Value>) -> Result<QueueStats> {
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
    let today = now.date_naive();
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
    Ok(QueueStats {
        pending: int_of(&pending, "pending")?,
        active: int_of(&active, "active")?,
        scheduled: int_of(&scheduled, "scheduled")?,
        retry: int_of(&retry, "retry")?,
        archived: int_of(&archived, "archived")?,
        completed: int_of(&completed, "completed")?,
        processed: counter_of(&processed, &keys::processed_key(queue, today))?,
        failed: counter_of(&failed, &keys::failed_key(queue, today))?,
        processed_total: counter_of(&processed_total, &keys::processed_total_key(queue))?,
        failed_total: counter_of(&failed_total, &keys::failed_total_key(queue))?,
        paused: int_of(&paused, "paused")? == 1,
        latency,
        groups: int_of(&groups, "groups")?,
        aggregating: int_of(&aggregating, "aggregating")?,
        timestamp: now,
    })
}

/// Text of a bulk or simple string reply.
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// An error a script caught with `pcall` (`WRONGTYPE Operation against
/// ...`), as the [`Error::Redis`] the same error reply would have given
/// uncaught: read as an error line, so its code and kind are Redis's.
fn caught_error(text: &str) -> Error {
    let line = format!("-{}\r\n", text.replace(['\r', '\n'], " "));
    match redis::parse_redis_value(line.as_bytes()).and_then(Value::extract_error) {
        Err(e) => Error::Redis(e),
        Ok(_) => Error::Internal(format!("script error {text:?} did not read as an error")),
    }
}

/// Reads one queue's entry of the `queues_stats` reply (see its header).
fn parse_entry(
    queue: &str,
    now: DateTime<Utc>,
    entry: Value,
    with_samples: bool,
) -> Result<QueueStatsEntry> {
    let shape = |what: &Value| shape_error("queues_stats", queue, what);
    let Value::Array(parts) = entry else {
        return Err(shape(&entry));
    };
    let failed = |e: Error| QueueStatsEntry {
        queue: queue.to_string(),
        stats: Err(e),
        samples: with_samples.then(|| Ok(Vec::new())),
    };
    match parts.as_slice() {
        [Value::Int(0)] => Ok(failed(Error::QueueNotFound {
            queue: queue.to_string(),
        })),
        [Value::Int(-1), msg] => {
            let text = text_of(msg).ok_or_else(|| shape(msg))?;
            Ok(failed(caught_error(&text)))
        }
        [
            Value::Int(1),
            Value::Array(counts),
            Value::Array(samples),
            samples_err,
        ] => {
            let stats = parse_stats(queue, now, counts.clone());
            let samples = match samples_err {
                _ if !with_samples => None,
                Value::Nil => Some(Ok(parse_samples(queue, samples)?)),
                other => Some(Err(caught_error(
                    &text_of(other).ok_or_else(|| shape(other))?,
                ))),
            };
            Ok(QueueStatsEntry {
                queue: queue.to_string(),
                stats,
                samples,
            })
        }
        _ => Err(shape(&Value::Array(parts))),
    }
}

/// Reads the sample members of a `queues_stats` entry: deduplicated and
/// ordered by time then member (the order of a full read of the series),
/// unparsable members skipped (logged).
fn parse_samples(queue: &str, members: &[Value]) -> Result<Vec<Sample>> {
    let key = super::samples_key(queue);
    let mut parsed = Vec::with_capacity(members.len());
    for m in members {
        let Value::BulkString(m) = m else {
            return Err(shape_error("queues_stats", queue, m));
        };
        match super::samples::parse_sample(m) {
            Some(sample) => parsed.push((sample, m.clone())),
            None => {
                tracing::warn!(%key, member = %String::from_utf8_lossy(m), "skipping unparsable sample")
            }
        }
    }
    parsed.sort_by(|a, b| a.0.0.cmp(&b.0.0).then_with(|| a.1.cmp(&b.1)));
    parsed.dedup_by(|a, b| a.1 == b.1);
    Ok(parsed.into_iter().map(|(sample, _)| sample).collect())
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

    /// The queue's counts, counters, pause flag and latency (Go
    /// `rdb.CurrentStats`; wire spec §9.6): the read-only `queue_stats`
    /// script after the existence check. The memory estimate is
    /// [`Broker::queue_memory_usage`].
    ///
    /// Errors: [`Error::QueueNotFound`]; [`Error::Corrupt`] when a counter or
    /// `pending_since` is not an integer; [`Error::Internal`] on a reply of
    /// the wrong shape; [`Error::Redis`].
    pub(crate) async fn queue_stats(&self, queue: &str) -> Result<QueueStats> {
        self.require_queue(queue).await?;
        let now = self.now();
        let [k1, k2, k3, k4, k5, k6, k7, k8, k9, k10, k11, k12] = stats_keys(queue, now);
        let reply: Vec<Value> = scripts::QUEUE_STATS
            .key(k1)
            .key(k2)
            .key(k3)
            .key(k4)
            .key(k5)
            .key(k6)
            .key(k7)
            .key(k8)
            .key(k9)
            .key(k10)
            .key(k11)
            .key(k12)
            .arg(keys::task_key_prefix(queue))
            .arg(keys::group_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        parse_stats(queue, now, reply)
    }

    /// The sampled estimate in bytes of what the queue takes in Redis (Go
    /// `rdb.memoryUsage`, guarded form; wire spec §9.6): the read-only
    /// `queue_memory_usage` script, which runs `MEMORY USAGE` on up to 20
    /// tasks per state, 20 tasks of each of 5 groups, and the queue's keys.
    /// No existence check (an unknown queue estimates 0).
    ///
    /// Errors: [`Error::Redis`] (also when `MEMORY USAGE` is refused, as some
    /// managed services do).
    pub(crate) async fn queue_memory_usage(&self, queue: &str) -> Result<i64> {
        let bytes: i64 = scripts::QUEUE_MEMORY_USAGE
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
            .invoke_async(&mut self.conn())
            .await?;
        Ok(bytes)
    }

    /// The numbers of every queue in `queues` (exactly what
    /// [`Broker::queue_stats`] reads for each) and, with `with_samples`, the
    /// samples of their outage series that the retry-growth figures need, in
    /// one `queues_stats` script call per [`QUEUES_PER_STATS_CALL`] queues.
    /// One entry per queue, in the order given.
    ///
    /// Samples: those scored at or after `since`; of them the newest, the
    /// oldest, and for each of `windows` that the series covers the newest
    /// at least that much older than the newest (at most `windows.len() +
    /// 2`), deduplicated, oldest first by time then member, as a full read
    /// of the series orders them. A member that does not parse is skipped
    /// (logged).
    ///
    /// A queue whose keys cannot be read (a key of the wrong type) gets an
    /// error entry; the others are unaffected. Errors of the whole call:
    /// [`Error::Internal`] on a reply of the wrong shape; [`Error::Redis`]
    /// (Redis unreachable).
    pub(crate) async fn queues_stats(
        &self,
        queues: &[String],
        since: DateTime<Utc>,
        windows: &[Duration],
        with_samples: bool,
    ) -> Result<Vec<QueueStatsEntry>> {
        let now = self.now();
        let suffixes = key_suffixes(now)?;
        let mut conn = self.conn();
        let mut out = Vec::with_capacity(queues.len());
        for chunk in queues.chunks(QUEUES_PER_STATS_CALL) {
            let mut inv = scripts::QUEUES_STATS.key(keys::ALL_QUEUES);
            inv.arg(if with_samples { "1" } else { "0" })
                .arg(since.timestamp())
                .arg(windows.len());
            for w in windows {
                inv.arg(w.as_secs());
            }
            for suffix in &suffixes {
                inv.arg(suffix);
            }
            for queue in chunk {
                inv.arg(queue)
                    .arg(keys::queue_prefix(queue))
                    .arg(super::samples_key(queue));
            }
            let reply: Vec<Value> = inv.invoke_async(&mut conn).await?;
            if reply.len() != chunk.len() {
                return Err(Error::Internal(format!(
                    "queues_stats script replied {} entries for {} queues",
                    reply.len(),
                    chunk.len()
                )));
            }
            for (queue, entry) in chunk.iter().zip(reply) {
                out.push(parse_entry(queue, now, entry, with_samples)?);
            }
        }
        Ok(out)
    }

    /// The memory estimate of every queue in `queues` (exactly what
    /// [`Broker::queue_memory_usage`] computes for each), in one
    /// `queues_memory_usage` script call per [`QUEUES_PER_MEMORY_CALL`]
    /// queues, so Redis is never busy with one call for long. One entry per
    /// queue, in the order given; no existence check (an unknown queue
    /// estimates 0). A queue whose estimate fails (a key of the wrong type,
    /// `MEMORY USAGE` refused) gets its error; the others are unaffected.
    ///
    /// Errors of the whole call: [`Error::Internal`] on a reply of the wrong
    /// shape; [`Error::Redis`] (Redis unreachable).
    pub(crate) async fn queues_memory_usage(
        &self,
        queues: &[String],
    ) -> Result<Vec<(String, Result<i64>)>> {
        let suffixes = memory_key_suffixes()?;
        let mut conn = self.conn();
        let mut out = Vec::with_capacity(queues.len());
        for chunk in queues.chunks(QUEUES_PER_MEMORY_CALL) {
            let mut inv = scripts::QUEUES_MEMORY_USAGE.arg(MEMORY_TASK_SAMPLE);
            inv.arg(MEMORY_GROUP_SAMPLE);
            for suffix in &suffixes {
                inv.arg(suffix);
            }
            for queue in chunk {
                inv.arg(keys::queue_prefix(queue));
            }
            let reply: Vec<Value> = inv.invoke_async(&mut conn).await?;
            if reply.len() != chunk.len() {
                return Err(Error::Internal(format!(
                    "queues_memory_usage script replied {} entries for {} queues",
                    reply.len(),
                    chunk.len()
                )));
            }
            for (queue, entry) in chunk.iter().zip(reply) {
                let shape = || shape_error("queues_memory_usage", queue, &entry);
                let estimate = match &entry {
                    Value::Array(parts) => match parts.as_slice() {
                        [Value::Int(1), Value::Int(bytes)] => Ok(*bytes),
                        [Value::Int(-1), msg] => {
                            Err(caught_error(&text_of(msg).ok_or_else(shape)?))
                        }
                        _ => return Err(shape()),
                    },
                    _ => return Err(shape()),
                };
                out.push((queue.clone(), estimate));
            }
        }
        Ok(out)
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
