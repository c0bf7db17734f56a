//! The dashboard's queue statistics through Redis key tracking
//! (client-side caching, Redis ≥ 6): a queue whose keys did not change since
//! its numbers were read is not read again.
//!
//! A dedicated RESP3 connection turns `CLIENT TRACKING ON` (default mode):
//! Redis remembers every key this connection reads and, the first time one
//! of them changes (by any client, Go's included), pushes an `invalidate`
//! message naming it on this connection. A statistics read then re-reads
//! only the queues with an invalidated key (and all of them at the change of
//! the UTC day, whose counters are other keys), and for the others sends
//! only a barrier. Redis writes a push message into this connection's
//! stream when the change happens, so every change made before the barrier
//! or transaction ran is heard of before its reply is: numbers served from
//! the cache are those of the moment of that reply, as fresh as a full read.
//! A cached queue that turns out changed by then is read in another round.
//! Pushes taken after a reply may also come from changes made after it (the
//! connection's driver can receive them before the caller runs): a queue
//! read in that transaction and named by one is served as read but not
//! cached, since Redis will not push for that key again. Every
//! [`MAX_CACHE_AGE`] every queue is read again whatever was heard, which
//! bounds what Redis never reports (`SWAPDB` sends no invalidation).
//!
//! What is tracked: the plain commands of the statistics transaction
//! (`SMEMBERS asynq:queues`, the counters' `MGET`, the `EXISTS` probes) as
//! they are, and the `queues_stats` script's reads through one more plain
//! `EXISTS` of the same keys right after it (Redis does not track what a
//! script's commands read; declaring them as the script's KEYS would be
//! tracked, but Redis remembers a script's KEYS anew at every command the
//! script runs, which cost 4–5 ms per 51 queues): pending list, the sizes
//! read, and the hash of the next pending task as last seen. A queue is
//! kept only when that hash was the one read (the next task is the one seen
//! before) and it has no groups (group zsets are found inside the script,
//! so not declared): other queues are read every time, as without
//! tracking.
//!
//! Any trouble — the connection drops (a `Disconnection` push), Redis
//! flushes (an invalidation of everything), a read fails — forgets
//! everything cached; when Redis refuses RESP3 or `CLIENT TRACKING`
//! (Redis < 6, an ACL without `client`, a proxy) the reads go through the
//! broker's own connection, uncached, and tracking is tried again after
//! [`RETRY_TRACKING`] (COMPATIBILITY.md A7).

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::{UnboundedReceiver, error::TryRecvError};

use super::queues::{
    QUEUES_PER_STATS_CALL, QueueStats, QueueStatsEntry, QueuesStats, Sample, StatsRequest,
};
use super::{Broker, keys};
use crate::error::{Error, Result};

/// How long reads go uncached after Redis refused tracking.
pub(crate) const RETRY_TRACKING: Duration = Duration::from_secs(600);
/// How long reads go uncached after the tracked connection could not be
/// opened (Redis down).
const RETRY_CONNECT: Duration = Duration::from_secs(5);
/// Longest a queue's numbers are served from the cache without a full
/// read: a bound for what invalidations never report (`SWAPDB` sends none in
/// Redis 7.0; a Redis-compatible server that accepts `CLIENT TRACKING` but
/// does not push).
pub(crate) const MAX_CACHE_AGE: Duration = Duration::from_secs(300);
/// Rounds of one chunk before it is read whole (a cached queue changed
/// during each of the previous rounds: a busy Redis).
const ROUNDS: usize = 3;

/// The tracked connection and what it has cached; kept by the caller from
/// one statistics read to the next (the dashboard's `StatsHints`).
#[derive(Default)]
pub(crate) struct StatsTracking {
    conn: Option<Tracked>,
    /// Numbers read on the tracked connection and unchanged since, with the
    /// UTC day of their daily counters.
    rows: HashMap<String, (QueueStats, NaiveDate)>,
    /// `asynq:queues` as read on the tracked connection, while unchanged.
    members: Option<Vec<String>>,
    /// Each queue's next pending task as last read: its hash is declared
    /// on the next read.
    next_ids: HashMap<String, Vec<u8>>,
    /// When every queue was last read, by the broker's clock (the cache's
    /// age bound, [`MAX_CACHE_AGE`]).
    full_read_at: Option<DateTime<Utc>>,
    /// Redis refused tracking or could not be reached: read uncached until
    /// then.
    refused_until: Option<Instant>,
}

impl std::fmt::Debug for StatsTracking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatsTracking")
            .field("connected", &self.conn.is_some())
            .field("cached", &self.rows.len())
            .field("refused_until", &self.refused_until)
            .finish_non_exhaustive()
    }
}

struct Tracked {
    conn: MultiplexedConnection,
    pushes: UnboundedReceiver<PushInfo>,
}

/// What the push messages received so far say.
#[derive(Default)]
struct Heard {
    /// Every tracked key may have changed (flush, lost connection).
    all: bool,
    /// The connection is gone.
    lost: bool,
    /// Keys named by invalidations.
    keys: Vec<Vec<u8>>,
}

impl Tracked {
    /// Opens a RESP3 connection like `broker`'s and turns tracking on.
    /// `Ok(None)` when Redis refuses (no RESP3, `CLIENT` not allowed).
    async fn open(broker: &Broker) -> Result<Option<Tracked>> {
        let info = broker.client.get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
        let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(super::REPLY_TIMEOUT))
            .set_push_sender(tx);
        let mut conn = match client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(c) => c,
            Err(e) if refused(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let on: redis::RedisResult<()> = redis::cmd("CLIENT")
            .arg("TRACKING")
            .arg("ON")
            .query_async(&mut conn)
            .await;
        match on {
            Ok(()) => Ok(Some(Tracked { conn, pushes })),
            Err(e) if refused(&e) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Takes every push message received so far.
    fn drain(&mut self) -> Heard {
        let mut heard = Heard::default();
        loop {
            match self.pushes.try_recv() {
                Ok(PushInfo {
                    kind: PushKind::Invalidate,
                    data,
                }) => {
                    for v in data {
                        match v {
                            Value::Array(keys) => {
                                for k in keys {
                                    match k {
                                        Value::BulkString(k) => heard.keys.push(k),
                                        _ => heard.all = true,
                                    }
                                }
                            }
                            // FLUSHALL / FLUSHDB: a null list.
                            _ => heard.all = true,
                        }
                    }
                }
                Ok(PushInfo {
                    kind: PushKind::Disconnection,
                    ..
                })
                | Err(TryRecvError::Disconnected) => {
                    heard.all = true;
                    heard.lost = true;
                    return heard;
                }
                Ok(_) => {}
                Err(TryRecvError::Empty) => return heard,
            }
        }
    }
}

/// Whether `e` is Redis refusing the feature (as opposed to being down).
fn refused(e: &redis::RedisError) -> bool {
    !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal())
}

/// The queues among `known` whose keys `key` may be (`asynq:{<q>}:…`; a
/// queue name may hold `}:`, so every split is tried).
fn queues_of_key<'a>(key: &[u8], known: &'a HashSet<&str>) -> Vec<&'a str> {
    let Some(rest) = key.strip_prefix(b"asynq:{") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for i in 0..rest.len().saturating_sub(1) {
        if &rest[i..i + 2] == b"}:"
            && let Ok(q) = std::str::from_utf8(&rest[..i])
            && let Some(q) = known.get(q)
        {
            out.push(*q);
        }
    }
    out
}

impl StatsTracking {
    /// Forgets everything and drops the connection.
    fn reset(&mut self) {
        self.conn = None;
        self.rows.clear();
        self.members = None;
        self.full_read_at = None;
    }

    /// Applies what was heard: drops the rows of queues with a changed key,
    /// except those in `fresh` (read in the transaction whose reply came
    /// just now: their changes came before that read). Returns whether a
    /// row that was used (cached, not fresh) or the cached queue list
    /// changed.
    fn apply(&mut self, heard: Heard, fresh: &HashSet<&str>) -> Result<bool> {
        if heard.lost {
            self.reset();
            return Err(Error::Internal(
                "the statistics' tracked Redis connection was lost".into(),
            ));
        }
        if heard.all {
            self.rows.clear();
            self.members = None;
            return Ok(true);
        }
        let mut changed = false;
        let known: HashSet<&str> = self.rows.keys().map(String::as_str).collect();
        let mut gone: HashSet<String> = HashSet::new();
        for k in &heard.keys {
            if k.as_slice() == keys::ALL_QUEUES.as_bytes() {
                changed |= self.members.take().is_some();
                continue;
            }
            for q in queues_of_key(k, &known) {
                if !fresh.contains(q) {
                    gone.insert(q.to_string());
                }
            }
        }
        for q in gone {
            changed |= self.rows.remove(&q).is_some();
        }
        Ok(changed)
    }
}

impl Broker {
    /// [`Broker::queues_stats`] through Redis key tracking (module docs):
    /// the same entries, fresh as of the call, but a queue whose keys did
    /// not change since `tracking` last read them costs Redis nothing, and
    /// `asynq:queues` is read only when it changed. `tracking` is the state
    /// kept between calls (empty at first). Falls back to
    /// [`Broker::queues_stats`] when Redis refuses tracking, and once after
    /// the tracked connection failed (`tracking` then starts empty).
    ///
    /// Errors as [`Broker::queues_stats`].
    pub(crate) async fn queues_stats_tracked(
        &self,
        tracking: &mut StatsTracking,
        queues: &[String],
        req: &StatsRequest<'_>,
    ) -> Result<QueuesStats> {
        if tracking.conn.is_none() && tracking.refused_until.is_none_or(|t| Instant::now() >= t) {
            match Tracked::open(self).await {
                Ok(Some(t)) => {
                    tracking.conn = Some(t);
                    tracking.refused_until = None;
                }
                Ok(None) => {
                    tracing::info!(
                        "Redis refused key tracking: dashboard statistics read uncached"
                    );
                    tracking.refused_until = Some(Instant::now() + RETRY_TRACKING);
                }
                Err(e) => {
                    // Redis down or unreachable: the uncached read below
                    // says so; do not add a connection timeout to every view.
                    tracing::debug!(error = %e, "tracked statistics connection");
                    tracking.refused_until = Some(Instant::now() + RETRY_CONNECT);
                }
            }
        }
        if tracking.conn.is_some() {
            match self.tracked_stats(tracking, queues, req).await {
                Ok(out) => return Ok(out),
                Err(e) => {
                    tracing::debug!(error = %e, "tracked statistics read failed; reading uncached");
                    tracking.reset();
                }
            }
        }
        self.queues_stats(queues, req).await
    }

    /// The tracked read, chunk by chunk ([`QUEUES_PER_STATS_CALL`] queues,
    /// each chunk's numbers of one moment as without tracking).
    async fn tracked_stats(
        &self,
        tracking: &mut StatsTracking,
        queues: &[String],
        req: &StatsRequest<'_>,
    ) -> Result<QueuesStats> {
        let StatsRequest {
            since,
            windows,
            with_samples,
            ..
        } = *req;
        let now = self.now();
        let today = now.date_naive();
        let mut out = QueuesStats {
            entries: Vec::with_capacity(queues.len()),
            members: Vec::new(),
            transactions: 0,
        };
        if tracking
            .full_read_at
            .is_none_or(|t| (now - t).to_std().unwrap_or_default() >= MAX_CACHE_AGE)
        {
            tracking.rows.clear();
            tracking.members = None;
            tracking.full_read_at = Some(now);
        }
        for (i, chunk) in queues.chunks(QUEUES_PER_STATS_CALL).enumerate() {
            let mut round = 0;
            let (members, entries) = loop {
                let conn = tracking.conn.as_mut().ok_or_else(lost)?;
                let heard = conn.drain();
                tracking.apply(heard, &HashSet::new())?;
                tracking.rows.retain(|_, (_, day)| *day == today);
                let whole = round + 1 == ROUNDS;
                let read: Vec<String> = chunk
                    .iter()
                    .filter(|q| whole || !tracking.rows.contains_key(*q))
                    .cloned()
                    .collect();
                let conn = tracking.conn.as_mut().ok_or_else(lost)?;
                let mut fresh_members = None;
                let mut fresh = Vec::new();
                if !read.is_empty() {
                    let r = self
                        .queues_stats_on(&mut conn.conn, Some(&tracking.next_ids), &read, req)
                        .await?;
                    out.transactions += r.transactions;
                    fresh_members = Some(r.members);
                    fresh = r.entries;
                } else if tracking.members.is_none() {
                    let mut m: Vec<String> = redis::cmd("SMEMBERS")
                        .arg(keys::ALL_QUEUES)
                        .query_async(&mut conn.conn)
                        .await?;
                    m.sort();
                    out.transactions += 1;
                    fresh_members = Some(m);
                } else {
                    // The barrier: every change before it is heard of by its reply.
                    let _: () = redis::cmd("PING").query_async(&mut conn.conn).await?;
                    out.transactions += 1;
                }
                let heard = conn.drain();
                let read_now: HashSet<&str> = read.iter().map(String::as_str).collect();
                // A push drained now may also come from a change made
                // after the read (the driver can receive it before we run):
                // what was read and invalidated is used once, not cached.
                let mut doubtful: HashSet<String> = HashSet::new();
                let mut members_doubtful = heard.all;
                for k in &heard.keys {
                    if k.as_slice() == keys::ALL_QUEUES.as_bytes() {
                        members_doubtful = true;
                    }
                    for q in queues_of_key(k, &read_now) {
                        doubtful.insert(q.to_string());
                    }
                }
                if heard.all {
                    doubtful.extend(read.iter().cloned());
                }
                let mut stale = tracking.apply(heard, &read_now)?;
                let mut members_used = None;
                match fresh_members {
                    Some(m) => {
                        if members_doubtful {
                            members_used = Some(m);
                            tracking.members = None;
                        } else {
                            tracking.members = Some(m);
                        }
                    }
                    None => stale |= tracking.members.is_none(),
                }
                let fresh = self.keep(tracking, fresh, today, &doubtful);
                if !stale || whole {
                    let members = members_used
                        .or_else(|| tracking.members.clone())
                        .unwrap_or_default();
                    let mut samples = HashMap::new();
                    if with_samples {
                        // The cached queues' samples (the series is not
                        // tracked: the sampler adds to it every interval).
                        let unread: Vec<String> = chunk
                            .iter()
                            .filter(|q| !fresh.contains_key(*q))
                            .cloned()
                            .collect();
                        if !unread.is_empty() {
                            let conn = tracking.conn.as_mut().ok_or_else(lost)?;
                            samples = self
                                .queues_samples(&mut conn.conn, &unread, since, windows)
                                .await?
                                .into_iter()
                                .collect();
                            out.transactions += 1;
                        }
                    }
                    let entries = self.assemble(tracking, chunk, fresh, samples, &members, now)?;
                    break (members, entries);
                }
                round += 1;
            };
            if i == 0 {
                out.members = members;
            }
            out.entries.extend(entries);
        }
        let asked: HashSet<&str> = queues.iter().map(String::as_str).collect();
        tracking.rows.retain(|q, _| asked.contains(q.as_str()));
        tracking.next_ids.retain(|q, _| asked.contains(q.as_str()));
        Ok(out)
    }

    /// Caches the fresh entries that may be (module docs), records the next
    /// pending ids, and returns the entries by queue.
    fn keep(
        &self,
        tracking: &mut StatsTracking,
        fresh: Vec<QueueStatsEntry>,
        today: NaiveDate,
        doubtful: &HashSet<String>,
    ) -> HashMap<String, QueueStatsEntry> {
        let mut by_queue = HashMap::with_capacity(fresh.len());
        for e in fresh {
            let declared = tracking.next_ids.get(&e.queue);
            let cacheable = match &e.stats {
                Ok(s) => {
                    !doubtful.contains(&e.queue)
                        && s.groups == 0
                        && (s.pending == 0 || declared == e.next_id.as_ref())
                }
                Err(_) => false,
            };
            if cacheable && let Ok(s) = &e.stats {
                tracking.rows.insert(e.queue.clone(), (s.clone(), today));
            } else {
                tracking.rows.remove(&e.queue);
            }
            match &e.next_id {
                Some(id) => {
                    tracking.next_ids.insert(e.queue.clone(), id.clone());
                }
                None => {
                    tracking.next_ids.remove(&e.queue);
                }
            }
            by_queue.insert(e.queue.clone(), e);
        }
        by_queue
    }

    /// The entries of `chunk` in order: fresh ones as read, the others from
    /// the cache as of `now` with their `samples` when read (a queue not in
    /// `members` is gone: [`Error::QueueNotFound`]).
    fn assemble(
        &self,
        tracking: &StatsTracking,
        chunk: &[String],
        mut fresh: HashMap<String, QueueStatsEntry>,
        mut samples: HashMap<String, Result<Vec<Sample>>>,
        members: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<QueueStatsEntry>> {
        chunk
            .iter()
            .map(|q| {
                if let Some(e) = fresh.remove(q) {
                    return Ok(e);
                }
                let mut samples = samples.remove(q);
                let stats = if members.binary_search(q).is_err() {
                    samples = samples.map(|_| Ok(Vec::new()));
                    Err(Error::QueueNotFound { queue: q.clone() })
                } else {
                    let (s, _) = tracking
                        .rows
                        .get(q)
                        .ok_or_else(|| Error::Internal(format!("no numbers for queue {q}")))?;
                    Ok(s.at(now))
                };
                Ok(QueueStatsEntry {
                    queue: q.clone(),
                    stats,
                    samples,
                    next_id: tracking.next_ids.get(q).cloned(),
                })
            })
            .collect()
    }
}

fn lost() -> Error {
    Error::Internal("no tracked statistics connection".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_names_its_queue_even_with_braces_in_the_name() {
        let known: HashSet<&str> = ["a", "b}:c", "b"].into_iter().collect();
        assert_eq!(queues_of_key(b"asynq:{a}:pending", &known), ["a"]);
        let mut both = queues_of_key(b"asynq:{b}:c}:t:1", &known);
        both.sort();
        assert_eq!(both, ["b", "b}:c"]);
        assert!(queues_of_key(b"asynq:{zz}:pending", &known).is_empty());
        assert!(queues_of_key(b"asynqdeck:{a}:samples", &known).is_empty());
        assert!(queues_of_key(b"asynq:queues", &known).is_empty());
    }
}
