//! The statistics reads: one queue's numbers (the `queue_stats` script, Go
//! `rdb.CurrentStats`) and many queues' numbers with their growth samples
//! in one `MULTI`/`EXEC` per [`QUEUES_PER_STATS_CALL`] queues (the
//! `queues_stats` script between plain reads that prove the unread keys
//! absent), and the growth samples alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::Value;

use super::reply::{
    flat_error, parse_queue, parse_samples_part, parse_stats, resp2, text_of, value_error,
};
use super::{
    KeyKinds, QUEUES_PER_STATS_CALL, QueueStats, QueueStatsEntry, QueuesStats, Sample, StatsRequest,
};
use crate::broker::{Broker, keys, scripts};
use crate::error::{Error, Result};

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

/// Set once Redis refused `SMISMEMBER` (Redis < 6.2): every transaction
/// then reads the whole queue list.
static NO_SMISMEMBER: AtomicBool = AtomicBool::new(false);

/// Whether `e` is Redis refusing a command it does not know (inside a
/// transaction: `EXECABORT`).
fn unknown_command(e: &Error) -> bool {
    let text = e.to_string();
    text.contains("EXECABORT") || text.contains("unknown command")
}

/// What one transaction of [`Broker::queues_stats`] found.
enum Transaction {
    /// The script is not loaded (Redis restarted or flushed its scripts).
    NoScript,
    /// Redis does not know `SMISMEMBER`: read the whole list instead.
    NoSmismember,
    /// Keys of these kinds exist among those not read: read them too.
    Found(KeyKinds),
    /// The numbers, and `asynq:queues` (sorted).
    Read {
        members: Vec<String>,
        entries: Vec<QueueStatsEntry>,
    },
}

impl Broker {
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
    /// last time, [`KeyKinds::present_in_info`]) only saves Redis work.
    ///
    /// Samples: those scored at or after `since`; of them the newest, the
    /// oldest, and for each of `windows` that the series covers the newest
    /// at least that much older than the newest (at most `windows.len() +
    /// 2`), deduplicated, oldest first by time then member, as a full read
    /// of the series orders them. A member that does not parse is skipped
    /// (logged).
    ///
    /// On a Redis Cluster the queues are read one transaction each, on
    /// their own slots, many at once (`per_queue.rs`): each queue's numbers
    /// are of one moment, not all queues' together.
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
        if conn.is_cluster() {
            return self.queues_stats_per_queue(queues, req).await;
        }
        self.queues_stats_on(&mut conn, None, queues, req, true)
            .await
    }

    /// [`Broker::queues_stats`] on `conn`. With `declare` (the next pending
    /// task's id per queue as last read), every key the script reads
    /// besides group zsets and growth samples — the pending list, the hash
    /// of the task `declare` names, and the sizes read — is also read by a
    /// plain `EXISTS` in the same transaction, so that a connection with
    /// Redis's key tracking on hears of their changes (Redis does not track
    /// the keys a script's commands read; the transaction's plain commands
    /// are tracked as they are).
    ///
    /// With `read_list`, the first transaction reads the whole of
    /// `asynq:queues` (the result's `members`); the others (and all of them
    /// without `read_list`) ask only about their own queues (`SMISMEMBER`,
    /// O(chunk) instead of O(queues) each: the whole list in every
    /// transaction made a read of many queues quadratic), and `members` then
    /// holds only the first chunk's queues that exist. Redis < 6.2 (no
    /// `SMISMEMBER`): every transaction reads the whole list.
    pub(super) async fn queues_stats_on<C>(
        &self,
        conn: &mut C,
        declare: Option<&HashMap<String, Vec<u8>>>,
        queues: &[String],
        req: &StatsRequest<'_>,
        read_list: bool,
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
                let full_list = (read_list && i == 0) || NO_SMISMEMBER.load(Ordering::Relaxed);
                let probed = match self
                    .stats_transaction(conn, chunk, &read, declare, now, req, full_list)
                    .await
                {
                    // Redis < 6.2 refuses the queued SMISMEMBER: EXECABORT.
                    Err(e) if !full_list && unknown_command(&e) => Transaction::NoSmismember,
                    r => r?,
                };
                out.transactions += 1;
                match probed {
                    Transaction::NoSmismember => NO_SMISMEMBER.store(true, Ordering::Relaxed),
                    Transaction::NoScript if !loaded => {
                        super::metered(req.budget, 1, scripts::QUEUES_STATS.load_async(conn))
                            .await?;
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
    /// `declare` as for [`Broker::queues_stats_on`]; the whole queue list
    /// with `full_list`, else only whether the chunk's queues are in it.
    #[allow(clippy::too_many_arguments)]
    async fn stats_transaction<C>(
        &self,
        conn: &mut C,
        chunk: &[String],
        read: &[KeyKinds],
        declare: Option<&HashMap<String, Vec<u8>>>,
        now: DateTime<Utc>,
        req: &StatsRequest<'_>,
        full_list: bool,
    ) -> Result<Transaction>
    where
        C: redis::aio::ConnectionLike + Send,
    {
        let StatsRequest {
            since,
            windows,
            with_samples,
            budget,
            ..
        } = *req;
        let today = now.date_naive();
        let mut pipe = redis::pipe();
        pipe.atomic().ignore_errors();
        if full_list {
            pipe.cmd("SMEMBERS").arg(keys::ALL_QUEUES);
        } else {
            pipe.cmd("SMISMEMBER").arg(keys::ALL_QUEUES).arg(chunk);
        }
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
                script.arg(crate::broker::samples_key(q));
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
        // MULTI, SMEMBERS, MGET, the probes, EVALSHA, the declaration, EXEC.
        let commands = 5 + probed.len() + usize::from(declares);
        let replies: Vec<Value> =
            super::metered(budget, commands as u64, pipe.query_async(conn)).await?;
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
            Value::Array(m) if full_list => m.iter().filter_map(text_of).collect(),
            Value::Array(m) if m.len() == chunk.len() => chunk
                .iter()
                .zip(&m)
                .filter(|(_, v)| matches!(v, Value::Int(1)))
                .map(|(q, _)| q.clone())
                .collect(),
            Value::ServerError(_) if !full_list => return Ok(Transaction::NoSmismember),
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
    /// Each call is metered by `budget` when given.
    ///
    /// Errors of the whole call: [`Error::Internal`] on a reply of the wrong
    /// shape; [`Error::Redis`] (Redis unreachable).
    pub(super) async fn queues_samples<C>(
        &self,
        conn: &mut C,
        queues: &[String],
        since: DateTime<Utc>,
        windows: &[Duration],
        budget: Option<&super::RedisBudget>,
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
                inv.arg("")
                    .arg("")
                    .arg("0")
                    .arg(crate::broker::samples_key(q));
            }
            let flat: Vec<Value> = super::metered(budget, 1, inv.invoke_async(conn)).await?;
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
}
