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
//! Any trouble — the connection drops (a `Disconnection` push), behind
//! Sentinel the master changes (the connection is on the former master), Redis
//! flushes (an invalidation of everything), a read fails — forgets
//! everything cached; when Redis refuses RESP3 or `CLIENT TRACKING`
//! (Redis < 6, an ACL without `client`, a proxy) the reads go through the
//! broker's own connection, uncached, and tracking is tried again after
//! [`RETRY_TRACKING`] (COMPATIBILITY.md A7).
//!
//! Files: this one (the tracked connection, what it caches and what its
//! push messages say), `tracking/read.rs` (the tracked read itself).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use redis::aio::MultiplexedConnection;
use redis::{PushInfo, PushKind, Value};
use tokio::sync::mpsc::{UnboundedReceiver, error::TryRecvError};

use super::QueueStats;
use crate::broker::{Broker, keys};
use crate::error::{Error, Result};

/// The tracked read itself ([`Broker::queues_stats_tracked`]).
mod read;

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
    rows: std::collections::HashMap<String, (QueueStats, NaiveDate)>,
    /// `asynq:queues` as read on the tracked connection, while unchanged.
    members: Option<Vec<String>>,
    /// Each queue's next pending task as last read: its hash is declared
    /// on the next read.
    next_ids: std::collections::HashMap<String, Vec<u8>>,
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

/// A RESP3 connection with `CLIENT TRACKING ON` and the receiver of its
/// push messages (also used by the maintenance engine's due index,
/// `broker::due`).
pub(crate) struct Tracked {
    pub(crate) conn: MultiplexedConnection,
    pub(crate) pushes: UnboundedReceiver<PushInfo>,
    /// The broker's generation when opened (behind Sentinel, a change of
    /// master makes it another: the connection is on a former master).
    pub(crate) generation: u64,
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
    pub(crate) async fn open(broker: &Broker) -> Result<Option<Tracked>> {
        let generation = broker.target.generation();
        let Some(client) = broker.target.tracking_client().await? else {
            return Ok(None);
        };
        let info = client.get_connection_info().clone();
        let settings = info
            .redis_settings()
            .clone()
            .set_protocol(redis::ProtocolVersion::RESP3);
        let client = redis::Client::open(info.set_redis_settings(settings))?;
        let (tx, pushes) = tokio::sync::mpsc::unbounded_channel();
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(5)))
            .set_response_timeout(Some(crate::broker::REPLY_TIMEOUT))
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
            Ok(()) => Ok(Some(Tracked {
                conn,
                pushes,
                generation,
            })),
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
