//! The due index: what the embedded maintenance engine
//! (`server::Maintenance`) needs to know about every queue, kept in memory
//! and read again only where Redis says something changed (issue 15 target
//! 1; COMPATIBILITY.md L1). asynqdeck only: Go asynq polls every queue.
//!
//! For each queue of `asynq:queues` the index holds a [`QueueHeads`]: the
//! earliest score (unix s) of `asynq:{<q>}:scheduled`, `:retry`, `:lease`,
//! `:completed` and `:aggregation_sets` (`ZRANGE <key> 0 0 WITHSCORES`), and
//! the sizes the sampler and the orphan scan need (`ZCARD` of `:retry` and
//! `:archived`, `LLEN` of `:active`): eight plain commands per queue, sent
//! in pipelines of [`CHUNK_QUEUES`] queues (480 commands, well under 10 ms
//! of Redis time).
//!
//! # Tracking mode (one server, Sentinel; Redis ≥ 6)
//! The reads go over a dedicated RESP3 connection with `CLIENT TRACKING ON`
//! (default mode; opened like the dashboard statistics' connection,
//! `broker::stats::tracking`, named `asynqdeck-due-index`). Each read arms
//! tracking of its key; the first later change of that key (by anyone, Go
//! included) pushes an `invalidate` naming it. The index gathers the named
//! queues for [`COALESCE`] and reads those queues again (and `asynq:queues`
//! when it is named: new queues are read, removed ones forgotten). A queue
//! nobody writes to costs nothing.
//!
//! Safety nets: every [`MAX_INDEX_AGE`] every queue is read again
//! (`SWAPDB` sends no invalidation); a flush (an invalidation of
//! everything), a lost connection, a failed read or, behind Sentinel, a
//! change of master (broker generation) drops the connection and reads
//! everything again on a new one.
//!
//! # Polling mode (Redis Cluster; tracking refused)
//! On a Redis Cluster (the broker has no tracked connection there), or
//! where Redis refuses RESP3 or `CLIENT TRACKING` (Redis < 6, an ACL
//! without `client`), every queue is read again each poll interval through
//! the broker's connection (pipelined per chunk; on a cluster
//! [`CLUSTER_IN_FLIGHT`](crate::broker::per_key) commands at a time): eight
//! cheap reads per queue instead of the scripts Go runs for every queue.
//! Tracking is tried again after 10 min.
//!
//! # Consumers
//! [`DueIndex::select`] and [`DueIndex::earliest`] answer "which queues
//! have something due by now" and "when is the next due time" from memory;
//! [`DueIndex::subscribe`] wakes at every change. A consumer that acted on
//! a queue calls [`DueIndex::touched`]: the queue is left out of
//! [`DueIndex::select`] until it has been read again (so a write that is
//! still on its way is not acted on twice).

mod read;
mod refresh;

pub use refresh::CLIENT_NAME;

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::Broker;

/// Queues per pipeline: 60 (eight commands each, 480 per pipeline).
pub const CHUNK_QUEUES: usize = 60;
/// How long invalidations are gathered before the named queues are read
/// again: 50 ms.
pub const COALESCE: Duration = Duration::from_millis(50);
/// Longest the index goes in tracking mode without reading every queue
/// again: 5 min (as the dashboard statistics' `MAX_CACHE_AGE`).
pub const MAX_INDEX_AGE: Duration = Duration::from_secs(300);

/// What the index knows of one queue, as last read. Scores are the unix
/// seconds asynq stores; `None`: the set is empty (or not a sorted set).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QueueHeads {
    /// Earliest process-at in `scheduled`.
    pub scheduled: Option<f64>,
    /// Earliest retry time in `retry`.
    pub retry: Option<f64>,
    /// Earliest lease expiry in `lease`.
    pub lease: Option<f64>,
    /// Earliest expiry in `completed`.
    pub completed: Option<f64>,
    /// Earliest deadline in `aggregation_sets`.
    pub aggregation: Option<f64>,
    /// `ZCARD retry`.
    pub retry_size: u64,
    /// `ZCARD archived`.
    pub archived_size: u64,
    /// `LLEN active`.
    pub active: u64,
}

impl QueueHeads {
    /// The earlier of the scheduled and retry heads: when the forwarder
    /// has work.
    pub fn forward_at(&self) -> Option<f64> {
        match (self.scheduled, self.retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// How the index learns about changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DueMode {
    /// No read has completed yet.
    Starting,
    /// Key-tracking invalidations on a dedicated connection.
    Tracking,
    /// Every queue read again each poll interval.
    Polling,
}

/// Counters of the index's own work (for tests and benchmarks).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DueStats {
    /// Reads of every queue.
    pub full_reads: u64,
    /// Queues read again after an invalidation or a [`DueIndex::touched`].
    pub queue_rereads: u64,
    /// Tracked connections opened.
    pub connections: u64,
}

#[derive(Debug, Default)]
struct State {
    mode: Option<DueMode>,
    /// `None` until the first full read.
    queues: Option<BTreeMap<String, QueueHeads>>,
    /// Queues acted on and not read again since.
    stale: HashSet<String>,
    /// Queues to read again at the next round.
    wanted: HashSet<String>,
    stats: DueStats,
}

struct Inner {
    broker: Broker,
    poll_interval: Duration,
    state: Mutex<State>,
    /// Bumped after every read that changed something.
    version: watch::Sender<u64>,
    /// Wakes the refresh loop for [`DueIndex::touched`].
    wake: Notify,
}

/// The due index (module docs). Cheap to clone; clones share one index and
/// one refresh loop, which [`DueIndex::start`] spawns and `shutdown` ends.
#[derive(Clone)]
pub struct DueIndex {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for DueIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DueIndex")
            .field("mode", &self.mode())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

/// A score as the broker's clock time (whole seconds, UTC).
pub fn score_time(score: f64) -> DateTime<Utc> {
    DateTime::from_timestamp(score.floor() as i64, 0).unwrap_or(DateTime::<Utc>::MAX_UTC)
}

impl DueIndex {
    /// Starts the index on `broker` (a tokio task, ended by `shutdown`).
    /// `poll_interval` is the period of the polling mode (the forwarder
    /// interval; at least 100 ms). Nothing is known until the first read
    /// completes ([`DueIndex::is_ready`]).
    pub fn start(broker: Broker, poll_interval: Duration, shutdown: CancellationToken) -> Self {
        let (version, _) = watch::channel(0);
        let inner = Arc::new(Inner {
            broker,
            poll_interval: poll_interval.max(Duration::from_millis(100)),
            state: Mutex::new(State::default()),
            version,
            wake: Notify::new(),
        });
        tokio::spawn(refresh::run(inner.clone(), shutdown));
        DueIndex { inner }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.state()
    }

    /// How the index learns about changes now.
    pub fn mode(&self) -> DueMode {
        self.state().mode.unwrap_or(DueMode::Starting)
    }

    /// Whether every queue has been read once.
    pub fn is_ready(&self) -> bool {
        self.state().queues.is_some()
    }

    /// The index's own counters.
    pub fn stats(&self) -> DueStats {
        self.state().stats
    }

    /// Every queue of `asynq:queues` this deployment can hold, sorted;
    /// `None` before the first read.
    pub fn queues(&self) -> Option<Vec<String>> {
        self.state()
            .queues
            .as_ref()
            .map(|q| q.keys().cloned().collect())
    }

    /// What the index holds for `queue`.
    pub fn heads(&self, queue: &str) -> Option<QueueHeads> {
        self.state().queues.as_ref()?.get(queue).copied()
    }

    /// The queues (sorted) for which `pred` holds, leaving out those acted
    /// on and not read again since ([`DueIndex::touched`]). Empty before
    /// the first read.
    pub fn select(&self, pred: impl Fn(&str, &QueueHeads) -> bool) -> Vec<String> {
        let st = self.state();
        let Some(queues) = &st.queues else {
            return Vec::new();
        };
        queues
            .iter()
            .filter(|(q, h)| !st.stale.contains(*q) && pred(q, h))
            .map(|(q, _)| q.clone())
            .collect()
    }

    /// Every queue with what the index holds for it (stale ones included),
    /// sorted; empty before the first read.
    pub fn entries(&self) -> Vec<(String, QueueHeads)> {
        let st = self.state();
        st.queues
            .as_ref()
            .map(|m| m.iter().map(|(q, h)| (q.clone(), *h)).collect())
            .unwrap_or_default()
    }

    /// The least of `of` over the queues not left out as in
    /// [`DueIndex::select`].
    pub fn earliest(&self, of: impl Fn(&str, &QueueHeads) -> Option<f64>) -> Option<f64> {
        let st = self.state();
        st.queues
            .as_ref()?
            .iter()
            .filter(|(q, _)| !st.stale.contains(*q))
            .filter_map(|(q, h)| of(q, h))
            .reduce(f64::min)
    }

    /// Marks `queues` as acted on: left out of [`DueIndex::select`] until
    /// read again, which the refresh loop does within [`COALESCE`].
    pub fn touched(&self, queues: &[String]) {
        if queues.is_empty() {
            return;
        }
        {
            let mut st = self.state();
            for q in queues {
                st.stale.insert(q.clone());
                st.wanted.insert(q.clone());
            }
        }
        self.inner.wake.notify_one();
    }

    /// A receiver that wakes after every read that changed the index.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.version.subscribe()
    }

    /// Waits until every queue has been read once, or `shutdown`. Returns
    /// whether the index is ready.
    pub async fn ready(&self, shutdown: &CancellationToken) -> bool {
        let mut rx = self.subscribe();
        loop {
            if self.is_ready() {
                return true;
            }
            tokio::select! {
                _ = shutdown.cancelled() => return false,
                r = rx.changed() => if r.is_err() { return false },
            }
        }
    }
}

impl Inner {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Every update is a plain assignment: a poisoned lock is taken as is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The queue whose index key `key` is (`asynq:{<q>}:<kind>` for the kinds
/// the index reads), exactly: the suffix is known, so a name holding `}:`
/// is no trouble.
fn queue_of_index_key(key: &[u8]) -> Option<String> {
    let rest = key.strip_prefix(b"asynq:{")?;
    for kind in read::KINDS {
        let suffix = format!("}}:{kind}");
        if let Some(q) = rest.strip_suffix(suffix.as_bytes()) {
            return std::str::from_utf8(q).ok().map(str::to_string);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_keys_name_their_queue() {
        assert_eq!(
            queue_of_index_key(b"asynq:{a}:scheduled").as_deref(),
            Some("a")
        );
        assert_eq!(
            queue_of_index_key(b"asynq:{b}:lease}:retry").as_deref(),
            Some("b}:lease")
        );
        assert_eq!(
            queue_of_index_key(b"asynq:{c}:aggregation_sets").as_deref(),
            Some("c")
        );
        assert_eq!(queue_of_index_key(b"asynq:{c}:pending"), None);
        assert_eq!(queue_of_index_key(b"asynq:queues"), None);
        assert_eq!(queue_of_index_key(b"asynqdeck:{a}:samples"), None);
    }

    #[test]
    fn forward_at_is_the_earlier_head() {
        let h = QueueHeads {
            scheduled: Some(10.0),
            retry: Some(5.0),
            ..QueueHeads::default()
        };
        assert_eq!(h.forward_at(), Some(5.0));
        let h = QueueHeads {
            scheduled: Some(10.0),
            ..QueueHeads::default()
        };
        assert_eq!(h.forward_at(), Some(10.0));
        assert_eq!(QueueHeads::default().forward_at(), None);
        assert_eq!(score_time(12.7).timestamp(), 12);
    }
}
