//! Queue discovery (issue 12 R14; asynqdeck only): finds queues that hold
//! tasks but are missing from `asynq:queues` and adds them back, unpaused.
//!
//! Go ≥ 0.25 clients and schedulers remember that they registered a queue
//! and send `SADD asynq:queues` only once per process. When such a queue is
//! deleted while they run, their new tasks arrive in a queue that nobody
//! lists (no server is told to serve it, the dashboard answers 404), and a
//! `paused` flag left by Go's `RemoveQueue` would keep it paused. Go has no
//! remedy. [`QueueDiscovery`] has two paths, both bounded:
//! - **Known queues that left the list** (the case above): every
//!   [`LIST_EVERY_TICKS`] ticks it reads `asynq:queues`; a queue listed
//!   before and missing now is looked at again (one script over its
//!   container keys) at each such read for [`WATCH_FOR`], so it is listed
//!   again within seconds of its next task. The cost follows deletions, not
//!   the number of queues or keys.
//! - **Queues it never saw** (deleted before this process started): a walk
//!   over the keyspace with `SCAN … COUNT 100` (never `KEYS`; on a
//!   Redis Cluster every master in turn, `DBSIZE` summed), at most
//!   [`MAX_STEPS_PER_TICK`] steps a tick. Redis visits every key of the
//!   database on the way (≈ 0.8–1 µs each on Redis 7.0, task hashes
//!   included, whatever the `MATCH`), so the walk is capped at 2,000 keys
//!   a second (≈ 0.2 % of a core): a cycle ends within [`CYCLE_TICKS`] s up
//!   to 100,000 keys, and takes keys / 2,000 s beyond (500 s at a million).
// asynq divergence: COMPATIBILITY.md#r14

use std::collections::{BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::broker::{Broker, DISCOVERY_SCAN_COUNT, DueIndex, ScanCursor};
use crate::error::Result;

pub use super::defaults::DEFAULT_DISCOVERY_INTERVAL;

/// Ticks one cycle over the keyspace is sized to take: 50.
pub const CYCLE_TICKS: u64 = 50;

/// Most `SCAN` steps in one tick: 20 (2,000 keys visited).
pub const MAX_STEPS_PER_TICK: u64 = 20;

/// The queue list is read every this many ticks: 5.
pub const LIST_EVERY_TICKS: u64 = 5;

/// How long a queue that left `asynq:queues` is watched for new tasks: 1 h.
pub const WATCH_FOR: Duration = Duration::from_secs(3600);

/// Most queues watched at once after leaving the list: 1,000 (the oldest
/// are dropped first; the keyspace walk still finds them).
pub const MAX_WATCHED: usize = 1_000;

/// What one [`QueueDiscovery::tick`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryOutcome {
    /// Queues added back to `asynq:queues`, by name.
    pub restored: Vec<String>,
    /// This tick ended a cycle over the whole keyspace (the next tick
    /// starts a new one).
    pub cycle_done: bool,
}

/// A discovery walk over the keyspace, and the queues watched since they
/// left the list; both live between ticks.
#[derive(Debug)]
pub struct QueueDiscovery {
    broker: Broker,
    cursor: ScanCursor,
    /// The masters this cycle walks (a cluster's, one after the other;
    /// empty for a single server), read at the cycle's start.
    masters: Vec<(String, u16)>,
    /// `None` between cycles: the next tick sizes a new cycle.
    steps_per_tick: Option<u64>,
    ticks: u64,
    /// The queues listed at the last read of `asynq:queues`.
    listed: HashSet<String>,
    /// Queues listed before and missing since, with when they went missing.
    watched: HashMap<String, Instant>,
    /// Where the queue list comes from when set (the maintenance engine's
    /// due index, kept current by key tracking): no `SMEMBERS` then.
    index: Option<DueIndex>,
}

impl QueueDiscovery {
    /// A walk on `broker`, starting a cycle at its first tick.
    pub fn new(broker: Broker) -> Self {
        QueueDiscovery {
            broker,
            cursor: ScanCursor::START,
            masters: Vec::new(),
            steps_per_tick: None,
            ticks: 0,
            listed: HashSet::new(),
            watched: HashMap::new(),
            index: None,
        }
    }

    /// The same discovery reading the queue list from `index` once it is
    /// ready (issue 15: at 25,000 queues `SMEMBERS asynq:queues` costs
    /// Redis ~28 ms; the index reads it only when it changed).
    pub fn with_index(mut self, index: DueIndex) -> Self {
        self.index = Some(index);
        self
    }

    /// One tick. Every [`LIST_EVERY_TICKS`] ticks (the first included) it
    /// reads `asynq:queues` and looks at each watched queue (one that left
    /// the list). Then the keyspace walk: at a cycle's start it sizes the
    /// cycle from `DBSIZE` (steps per tick = keys / (100 × [`CYCLE_TICKS`]),
    /// between 1 and [`MAX_STEPS_PER_TICK`]), then takes that many `SCAN`
    /// steps from the kept cursor. Each queue found, by either path,
    /// missing from `asynq:queues` and holding tasks is added back, its
    /// leftover `paused` flag deleted ([`Broker::restore_queue`]; logged at
    /// info). On an error the cursor stays where the last good step left
    /// it. Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn tick(&mut self) -> Result<DiscoveryOutcome> {
        let mut out = DiscoveryOutcome::default();
        if self.ticks.is_multiple_of(LIST_EVERY_TICKS) {
            self.look_at_watched(&mut out).await?;
        }
        self.ticks += 1;
        let steps = match self.steps_per_tick {
            Some(n) => n,
            None => {
                let keys = self.broker.key_count().await?;
                let per_tick = DISCOVERY_SCAN_COUNT as u64 * CYCLE_TICKS;
                let n = keys.div_ceil(per_tick).clamp(1, MAX_STEPS_PER_TICK);
                self.masters = self.broker.scan_masters().await?;
                self.cursor = ScanCursor::START;
                self.steps_per_tick = Some(n);
                n
            }
        };
        let mut found = BTreeSet::new();
        for _ in 0..steps {
            let (next, queues) = self
                .broker
                .scan_queue_keys(&self.masters, self.cursor)
                .await?;
            found.extend(queues);
            match next {
                Some(next) => self.cursor = next,
                None => {
                    out.cycle_done = true;
                    self.steps_per_tick = None;
                    break;
                }
            }
        }
        for queue in self.broker.unlisted_queues(&found).await? {
            self.restore(queue, &mut out).await?;
        }
        Ok(out)
    }

    /// Reads the queue list, starts watching the queues that left it, stops
    /// watching those back in it or watched for [`WATCH_FOR`], and restores
    /// each watched queue that holds tasks again.
    async fn look_at_watched(&mut self, out: &mut DiscoveryOutcome) -> Result<()> {
        let listed = match self.index.as_ref().and_then(DueIndex::queues) {
            Some(q) => q,
            None => self.broker.workable_queues().await?,
        };
        let now: HashSet<String> = listed.into_iter().collect();
        let at = Instant::now();
        for gone in self.listed.difference(&now) {
            self.watched.entry(gone.clone()).or_insert(at);
        }
        self.listed = now;
        let listed = &self.listed;
        self.watched
            .retain(|q, since| !listed.contains(q) && at.duration_since(*since) < WATCH_FOR);
        if self.watched.len() > MAX_WATCHED {
            let mut by_age: Vec<(Instant, String)> =
                self.watched.iter().map(|(q, t)| (*t, q.clone())).collect();
            by_age.sort();
            for (_, q) in by_age.into_iter().take(self.watched.len() - MAX_WATCHED) {
                self.watched.remove(&q);
            }
        }
        let mut watched: Vec<String> = self.watched.keys().cloned().collect();
        watched.sort();
        for queue in watched {
            if self.restore(queue.clone(), out).await? {
                self.watched.remove(&queue);
            }
        }
        Ok(())
    }

    /// Adds `queue` back when it holds tasks; whether it did.
    async fn restore(&mut self, queue: String, out: &mut DiscoveryOutcome) -> Result<bool> {
        // A name this deployment cannot hold (COMPATIBILITY.md K2) is left
        // alone: its keys cross slots.
        if self.broker.check_queue_name(&queue).is_err()
            || out.restored.contains(&queue)
            || !self.broker.restore_queue(&queue).await?
        {
            return Ok(false);
        }
        tracing::info!(queue = %queue, "queue discovery: a queue holding tasks was missing from asynq:queues; listed it again");
        self.listed.insert(queue.clone());
        out.restored.push(queue);
        Ok(true)
    }

    /// Ticks every `interval` (first at once) until `shutdown` is
    /// cancelled; failures are logged and the walk goes on.
    pub async fn run(mut self, interval: Duration, shutdown: CancellationToken) {
        let mut ticks = Ticker::new(interval, FirstTick::AtOnce, &shutdown);
        while ticks.next().await {
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "queue discovery: step failed");
            }
        }
        tracing::debug!("queue discovery done");
    }
}
