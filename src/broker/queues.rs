//! Queue-level reads and changes: the queue list, statistics, daily history,
//! groups, pause and queue deletion.
//!
//! Go: `rdb.AllQueues`, `CurrentStats`, `memoryUsage`, `HistoricalStats`,
//! `GroupStats`, `Pause`, `Unpause`, `RemoveQueue` (`internal/rdb/inspect.go`;
//! wire spec §6.4, §9.5–9.8).

use std::collections::HashMap;
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
fn latency_at(now: DateTime<Utc>, pending_since: i64) -> Duration {
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
    /// `src/broker/tracking.rs`).
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
    /// The id of the next pending task, as read with the numbers (`None`
    /// when nothing is pending or the numbers failed).
    pub next_id: Option<Vec<u8>>,
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
    let pending_since = counter_of(&pending_since, &since_key)?;
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
        latency: latency_at(now, pending_since),
        pending_since,
        groups: int_of(&groups, "groups")?,
        aggregating: int_of(&aggregating, "aggregating")?,
        timestamp: now,
    })
}

/// `v` in the shapes of RESP2: sets as arrays, booleans as Lua's `true`
/// and `false` come back there (1 and nil), inside arrays too.
fn resp2(v: Value) -> Value {
    match v {
        Value::Set(items) | Value::Array(items) => {
            Value::Array(items.into_iter().map(resp2).collect())
        }
        Value::Boolean(true) => Value::Int(1),
        Value::Boolean(false) => Value::Nil,
        other => other,
    }
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

/// Kinds of a queue's keys besides `pending` (bit set), for
/// [`Broker::queues_stats`]: which of them it reads per queue, and which
/// were found present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct KeyKinds(u8);

impl KeyKinds {
    /// `active` (list).
    pub const ACTIVE: KeyKinds = KeyKinds(1);
    /// `scheduled` (zset).
    pub const SCHEDULED: KeyKinds = KeyKinds(2);
    /// `retry` (zset).
    pub const RETRY: KeyKinds = KeyKinds(4);
    /// `archived` (zset).
    pub const ARCHIVED: KeyKinds = KeyKinds(8);
    /// `completed` (zset).
    pub const COMPLETED: KeyKinds = KeyKinds(16);
    /// `groups` (set of group names; with it the group zsets).
    pub const GROUPS: KeyKinds = KeyKinds(32);
    /// None of them.
    pub const NONE: KeyKinds = KeyKinds(0);
    /// All of them.
    pub const ALL: KeyKinds = KeyKinds(63);
    /// Each kind, in the order the script's items and the 14 values go.
    const EACH: [KeyKinds; 6] = [
        KeyKinds::ACTIVE,
        KeyKinds::SCHEDULED,
        KeyKinds::RETRY,
        KeyKinds::ARCHIVED,
        KeyKinds::COMPLETED,
        KeyKinds::GROUPS,
    ];

    /// Whether every kind of `other` is in `self`.
    pub fn contains(self, other: KeyKinds) -> bool {
        self.0 & other.0 == other.0
    }

    /// The kinds of `self` and `other`.
    pub fn union(self, other: KeyKinds) -> KeyKinds {
        KeyKinds(self.0 | other.0)
    }

    /// The kinds whose keys hold something in `s` (a size above 0: Redis
    /// deletes an empty list, zset or set).
    pub fn present_in_info(s: &crate::inspector::QueueInfo) -> KeyKinds {
        let mut k = KeyKinds::NONE;
        for (kind, size) in KeyKinds::EACH.into_iter().zip([
            s.active,
            s.scheduled,
            s.retry,
            s.archived,
            s.completed,
            s.groups,
        ]) {
            if size > 0 {
                k = k.union(kind);
            }
        }
        k
    }

    /// The key of this (single) kind for `queue`.
    fn key(self, queue: &str) -> String {
        match self {
            KeyKinds::ACTIVE => keys::active_key(queue),
            KeyKinds::SCHEDULED => keys::scheduled_key(queue),
            KeyKinds::RETRY => keys::retry_key(queue),
            KeyKinds::ARCHIVED => keys::archived_key(queue),
            KeyKinds::COMPLETED => keys::completed_key(queue),
            _ => keys::all_groups_key(queue),
        }
    }
}

/// What a statistics read asks besides the queue names (shared by the
/// plain and the tracked reads): the key kinds guessed present per queue
/// (see [`Broker::queues_stats`]), and the growth samples wanted — scored
/// at or after `since`, one per window of `windows` — or none unless
/// `with_samples`.
#[derive(Clone, Copy)]
pub(crate) struct StatsRequest<'a> {
    pub expected: &'a (dyn Fn(&str) -> KeyKinds + Sync),
    pub since: DateTime<Utc>,
    pub windows: &'a [Duration],
    pub with_samples: bool,
}

/// The result of [`Broker::queues_stats`].
#[derive(Debug)]
pub(crate) struct QueuesStats {
    /// One entry per queue asked for, in the order given.
    pub entries: Vec<QueueStatsEntry>,
    /// `asynq:queues` as read with the first queues' numbers, sorted.
    pub members: Vec<String>,
    /// Transactions sent: one per [`QUEUES_PER_STATS_CALL`] queues when
    /// `expected` was right, more when it missed a kind or the script had
    /// to be loaded.
    pub transactions: usize,
}

/// What one transaction of [`Broker::queues_stats`] found.
enum Transaction {
    /// The script is not loaded (Redis restarted or flushed its scripts).
    NoScript,
    /// Keys of these kinds exist among those not read: read them too.
    Found(KeyKinds),
    /// The numbers, and `asynq:queues` (sorted).
    Read {
        members: Vec<String>,
        entries: Vec<QueueStatsEntry>,
    },
}

/// The Redis error of an error reply inside the transaction, or an
/// internal error for any other unexpected value.
fn value_error(v: Value) -> redis::RedisError {
    match v.extract_error() {
        Err(e) => e,
        Ok(other) => redis::RedisError::from((
            redis::ErrorKind::Client,
            "unexpected reply in the statistics transaction",
            format!("{other:?}"),
        )),
    }
}

/// A script's reply of the wrong shape at `what`.
fn flat_error(what: &str) -> Error {
    Error::Internal(format!("queues_stats script reply: {what}"))
}

/// Reads one queue's part of the flat `queues_stats` reply (see its header)
/// starting at `*at`, advancing `*at` past it: its counts (`read` says which
/// kinds the script read, the others are 0), merged with `strings` (its
/// five values of the MGET: today's processed and failed, the all-time
/// counters, paused), and with `with_samples` its samples.
fn parse_queue(
    queue: &str,
    now: DateTime<Utc>,
    flat: &[Value],
    at: &mut usize,
    read: KeyKinds,
    strings: &[Value],
    with_samples: bool,
) -> Result<QueueStatsEntry> {
    let mut next = || {
        let v = flat.get(*at).ok_or_else(|| flat_error("too short"))?;
        *at += 1;
        Ok::<&Value, Error>(v)
    };
    let failed = |e: Error| QueueStatsEntry {
        queue: queue.to_string(),
        stats: Err(e),
        samples: with_samples.then(|| Ok(Vec::new())),
        next_id: None,
    };
    let pending = next()?;
    if let Value::Int(-1) = pending {
        let msg = next()?;
        let text = text_of(msg).ok_or_else(|| shape_error("queues_stats", queue, msg))?;
        return Ok(failed(caught_error(&text)));
    }
    let pending = pending.clone();
    let pending_since = next()?.clone();
    let next_id = match next()? {
        Value::BulkString(id) => Some(id.clone()),
        _ => None,
    };
    let zero = || Value::Int(0);
    let mut sizes = [zero(), zero(), zero(), zero(), zero(), zero(), zero()];
    for (i, kind) in KeyKinds::EACH.into_iter().enumerate() {
        if read.contains(kind) {
            sizes[i] = next()?.clone();
            if kind == KeyKinds::GROUPS {
                sizes[6] = next()?.clone();
            }
        }
    }
    let [
        active,
        scheduled,
        retry,
        archived,
        completed,
        groups,
        aggregating,
    ] = sizes;
    let [
        processed,
        failed_today,
        processed_total,
        failed_total,
        paused,
    ] = <[Value; 5]>::try_from(strings.to_vec())
        .map_err(|_| flat_error("MGET replied too few values"))?;
    let paused = Value::Int(i64::from(paused != Value::Nil));
    let stats = parse_stats(
        queue,
        now,
        vec![
            pending,
            active,
            scheduled,
            retry,
            archived,
            completed,
            processed,
            failed_today,
            processed_total,
            failed_total,
            paused,
            pending_since,
            groups,
            aggregating,
        ],
    );
    let samples = if with_samples {
        Some(parse_samples_part(queue, flat, at)?)
    } else {
        None
    };
    Ok(QueueStatsEntry {
        queue: queue.to_string(),
        stats,
        samples,
        next_id,
    })
}

/// Reads the samples part of one queue's `queues_stats` reply at `*at`,
/// advancing `*at` past it: the samples, or why the series could not be
/// read.
fn parse_samples_part(queue: &str, flat: &[Value], at: &mut usize) -> Result<Result<Vec<Sample>>> {
    let v = flat.get(*at).ok_or_else(|| flat_error("too short"))?;
    *at += 1;
    Ok(match v {
        Value::Int(-1) => {
            let msg = flat.get(*at).ok_or_else(|| flat_error("too short"))?;
            *at += 1;
            Err(caught_error(
                &text_of(msg).ok_or_else(|| shape_error("queues_stats", queue, msg))?,
            ))
        }
        Value::Int(n) if *n >= 0 => {
            let end = *at + *n as usize;
            let members = flat.get(*at..end).ok_or_else(|| flat_error("too short"))?;
            *at = end;
            Ok(parse_samples(queue, members)?)
        }
        other => return Err(shape_error("queues_stats", queue, other)),
    })
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
    /// samples of their outage series that the retry-growth figures need,
    /// in one MULTI/EXEC per [`QUEUES_PER_STATS_CALL`] queues. One entry per
    /// queue, in the order given.
    ///
    /// Each transaction holds `SMEMBERS asynq:queues` (a queue not in it
    /// gets [`Error::QueueNotFound`]: deleted since listed), one `MGET` of
    /// every queue's counters and paused flag, the `queues_stats` script
    /// (pending size, latency, samples, and the other sizes of the kinds in
    /// `expected(queue)`), and per kind one `EXISTS` over that kind's keys of
    /// the queues the script does not read it for. A kind whose `EXISTS`
    /// finds a key is read again for every queue of the chunk (at most
    /// twice, then every kind of every queue), so the numbers are those of
    /// one moment whatever `expected` says; a good guess (the kinds present
    /// last time, [`KeyKinds::present_in`]) only saves Redis work.
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
    /// (Redis unreachable, `asynq:queues` not a set).
    pub(crate) async fn queues_stats(
        &self,
        queues: &[String],
        req: &StatsRequest<'_>,
    ) -> Result<QueuesStats> {
        let mut conn = self.conn();
        self.queues_stats_on(&mut conn, None, queues, req).await
    }

    /// [`Broker::queues_stats`] on `conn`. With `declare` (the next pending
    /// task's id per queue as last read), every key the script reads
    /// besides group zsets and growth samples — the pending list, the hash
    /// of the task `declare` names, and the sizes read — is also read by a
    /// plain `EXISTS` in the same transaction, so that a connection with
    /// Redis's key tracking on hears of their changes (Redis does not track
    /// the keys a script's commands read; the transaction's plain commands
    /// are tracked as they are).
    pub(super) async fn queues_stats_on<C>(
        &self,
        conn: &mut C,
        declare: Option<&HashMap<String, Vec<u8>>>,
        queues: &[String],
        req: &StatsRequest<'_>,
    ) -> Result<QueuesStats>
    where
        C: redis::aio::ConnectionLike + Send,
    {
        let expected = req.expected;
        let now = self.now();
        let mut out = QueuesStats {
            entries: Vec::with_capacity(queues.len()),
            members: Vec::new(),
            transactions: 0,
        };
        for (i, chunk) in queues.chunks(QUEUES_PER_STATS_CALL).enumerate() {
            let mut also = KeyKinds::NONE;
            let mut loaded = false;
            let mut attempt = 0;
            let (members, entries) = loop {
                let read: Vec<KeyKinds> = chunk
                    .iter()
                    .map(|q| match attempt {
                        0 | 1 => expected(q).union(also),
                        _ => KeyKinds::ALL,
                    })
                    .collect();
                let probed = self
                    .stats_transaction(conn, chunk, &read, declare, now, req)
                    .await?;
                out.transactions += 1;
                match probed {
                    Transaction::NoScript if !loaded => {
                        scripts::QUEUES_STATS.load_async(conn).await?;
                        loaded = true;
                    }
                    Transaction::NoScript => {
                        return Err(Error::Internal(
                            "queues_stats script missing right after loading it".into(),
                        ));
                    }
                    Transaction::Found(kinds) => {
                        also = also.union(kinds);
                        attempt += 1;
                    }
                    Transaction::Read { members, entries } => break (members, entries),
                }
            };
            if i == 0 {
                out.members = members;
            }
            out.entries.extend(entries);
        }
        Ok(out)
    }

    /// One transaction of [`Broker::queues_stats`] for `chunk`, reading per
    /// queue the kinds in `read` (same order) and proving the others absent;
    /// `declare` as for [`Broker::queues_stats_on`].
    #[allow(clippy::too_many_arguments)]
    async fn stats_transaction<C>(
        &self,
        conn: &mut C,
        chunk: &[String],
        read: &[KeyKinds],
        declare: Option<&HashMap<String, Vec<u8>>>,
        now: DateTime<Utc>,
        req: &StatsRequest<'_>,
    ) -> Result<Transaction>
    where
        C: redis::aio::ConnectionLike + Send,
    {
        let StatsRequest {
            since,
            windows,
            with_samples,
            ..
        } = *req;
        let today = now.date_naive();
        let mut pipe = redis::pipe();
        pipe.atomic().ignore_errors();
        pipe.cmd("SMEMBERS").arg(keys::ALL_QUEUES);
        let mget = pipe.cmd("MGET");
        for q in chunk {
            mget.arg(keys::processed_key(q, today))
                .arg(keys::failed_key(q, today))
                .arg(keys::processed_total_key(q))
                .arg(keys::failed_total_key(q))
                .arg(keys::paused_key(q));
        }
        let mut probed = Vec::new();
        for kind in KeyKinds::EACH {
            let unread: Vec<&String> = chunk
                .iter()
                .zip(read)
                .filter(|(_, r)| !r.contains(kind))
                .map(|(q, _)| q)
                .collect();
            if !unread.is_empty() {
                let exists = pipe.cmd("EXISTS");
                for q in unread {
                    exists.arg(kind.key(q));
                }
                probed.push(kind);
            }
        }
        let mut declared: Vec<Vec<u8>> = Vec::new();
        if let Some(ids) = declare {
            for (q, r) in chunk.iter().zip(read) {
                declared.push(keys::pending_key(q).into_bytes());
                if let Some(id) = ids.get(q) {
                    let mut hash = keys::task_key_prefix(q).into_bytes();
                    hash.extend_from_slice(id);
                    declared.push(hash);
                }
                for kind in KeyKinds::EACH.into_iter().filter(|k| r.contains(*k)) {
                    declared.push(kind.key(q).into_bytes());
                }
            }
        }
        let script = pipe
            .cmd("EVALSHA")
            .arg(scripts::QUEUES_STATS.get_hash())
            .arg(0)
            .arg(if with_samples { "1" } else { "0" })
            .arg(since.timestamp().to_string())
            .arg(windows.len().to_string());
        for w in windows {
            script.arg(w.as_secs().to_string());
        }
        for (q, r) in chunk.iter().zip(read) {
            script
                .arg(keys::pending_key(q))
                .arg(keys::task_key_prefix(q));
            let mut items: Vec<String> = Vec::new();
            for kind in KeyKinds::EACH.into_iter().filter(|k| r.contains(*k)) {
                match kind {
                    KeyKinds::ACTIVE => items.extend(["l".into(), kind.key(q)]),
                    KeyKinds::GROUPS => {
                        items.extend(["g".into(), kind.key(q), keys::group_key_prefix(q)])
                    }
                    _ => items.extend(["z".into(), kind.key(q)]),
                }
            }
            script.arg(items.len().to_string()).arg(items);
            if with_samples {
                script.arg(super::samples_key(q));
            }
        }
        // Tracking: the script's keys are declared by a plain read right
        // after it (same moment, MULTI), not as its KEYS: Redis remembers a
        // script's KEYS again at each command the script runs, which costs
        // keys × commands.
        let declares = !declared.is_empty();
        if declares {
            pipe.cmd("EXISTS").arg(declared);
        }
        let replies: Vec<Value> = pipe.query_async(conn).await?;
        // A RESP3 connection (key tracking) answers sets and Lua's false in
        // their own types; read them as on RESP2.
        let replies: Vec<Value> = replies.into_iter().map(resp2).collect();
        let expected_len = 3 + probed.len() + usize::from(declares);
        if replies.len() != expected_len {
            return Err(flat_error(&format!(
                "transaction replied {} values, expected {expected_len}",
                replies.len()
            )));
        }
        let mut replies = replies.into_iter();
        let mut take = || replies.next().unwrap_or(Value::Nil);
        let members: Vec<String> = match take() {
            Value::Array(m) => m.iter().filter_map(text_of).collect(),
            other => return Err(Error::Redis(value_error(other))),
        };
        let strings = match take() {
            Value::Array(v) if v.len() == 5 * chunk.len() => v,
            other => return Err(flat_error(&format!("MGET replied {other:?}"))),
        };
        let mut found = KeyKinds::NONE;
        for kind in &probed {
            match take() {
                Value::Int(0) => {}
                Value::Int(_) => found = found.union(*kind),
                other => return Err(Error::Redis(value_error(other))),
            }
        }
        let flat = match take() {
            Value::ServerError(e) if e.kind() == Some(redis::ServerErrorKind::NoScript) => {
                return Ok(Transaction::NoScript);
            }
            Value::Array(flat) => flat,
            other => return Err(Error::Redis(value_error(other))),
        };
        if found != KeyKinds::NONE {
            return Ok(Transaction::Found(found));
        }
        let mut members = members;
        members.sort();
        let mut at = 0;
        let mut entries = Vec::with_capacity(chunk.len());
        for ((i, q), r) in chunk.iter().enumerate().zip(read) {
            let entry = parse_queue(
                q,
                now,
                &flat,
                &mut at,
                *r,
                &strings[5 * i..5 * i + 5],
                with_samples,
            )?;
            if members.binary_search(q).is_ok() {
                entries.push(entry);
            } else {
                entries.push(QueueStatsEntry {
                    queue: q.clone(),
                    stats: Err(Error::QueueNotFound { queue: q.clone() }),
                    samples: with_samples.then(|| Ok(Vec::new())),
                    next_id: None,
                });
            }
        }
        if at != flat.len() {
            return Err(flat_error(&format!("{} values left over", flat.len() - at)));
        }
        Ok(Transaction::Read { members, entries })
    }

    /// The growth samples of every queue in `queues`, as
    /// [`Broker::queues_stats`] reads them with its numbers (`since`,
    /// `windows` alike), without the numbers: one `queues_stats` script call
    /// per [`QUEUES_PER_STATS_CALL`] queues on `conn`. One entry per queue,
    /// in the order given; a series that cannot be read (a key of the wrong
    /// type) gets its error.
    ///
    /// Errors of the whole call: [`Error::Internal`] on a reply of the wrong
    /// shape; [`Error::Redis`] (Redis unreachable).
    pub(super) async fn queues_samples<C>(
        &self,
        conn: &mut C,
        queues: &[String],
        since: DateTime<Utc>,
        windows: &[Duration],
    ) -> Result<Vec<(String, Result<Vec<Sample>>)>>
    where
        C: redis::aio::ConnectionLike + Send,
    {
        let mut out = Vec::with_capacity(queues.len());
        for chunk in queues.chunks(QUEUES_PER_STATS_CALL) {
            let mut inv = scripts::QUEUES_STATS.arg("1");
            inv.arg(since.timestamp().to_string())
                .arg(windows.len().to_string());
            for w in windows {
                inv.arg(w.as_secs().to_string());
            }
            for q in chunk {
                inv.arg("").arg("").arg("0").arg(super::samples_key(q));
            }
            let flat: Vec<Value> = inv.invoke_async(conn).await?;
            let flat: Vec<Value> = flat.into_iter().map(resp2).collect();
            let mut at = 0;
            for q in chunk {
                let samples = parse_samples_part(q, &flat, &mut at)?;
                out.push((q.clone(), samples));
            }
            if at != flat.len() {
                return Err(flat_error(&format!("{} values left over", flat.len() - at)));
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

/// Property tests of the script reply parsers (issue 12).
#[cfg(test)]
mod reply_props;
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
