//! The recoverer: takes back tasks whose worker vanished (Go `recoverer.go`;
//! wire spec §6.15, §7.5, §12; seed S12, S13; issue 12 R4, R8).
//!
//! An active task whose lease ended over [`RECOVER_CUTOFF`] ago (slack for
//! clock skew between servers) has no live worker: the recoverer retries it
//! with [`LeaseExpired`] (`asynq: task lease expired`), or archives it when
//! its retries are used up. Because leases live in Redis, any server of the
//! queue recovers the tasks of one that died (S13). Two recoverers racing on
//! one task are safe: the loser's script finds it gone (NOT FOUND). Then
//! stale aggregation sets are given back to their groups.
//!
//! # When it looks (R8)
//! A *full pass* over every queue runs at start and then every interval (Go:
//! 1 min, its only pass). Go recovers a crashed worker's tasks up to one
//! interval after lease + grace; we also learn, per queue, the earliest
//! lease that is not yet recoverable, and look at a queue that holds leases
//! again at that lease + [`RECOVER_CUTOFF`], at most [`LEASE_CHECK_CAP`]
//! ahead (which bounds the delay for a lease written earlier than the ones
//! seen, by a server whose clock is behind). So a crashed worker's tasks
//! come back within about a second of lease + grace, and the cost between
//! full passes is two calls per queue that holds leases every few seconds at
//! most, none for the other queues. A lease in a queue that held none is
//! found by the next full pass: a new lease ends 30 s after it was taken,
//! so with the 1 min interval it is seen before it becomes recoverable.
//!
//! # Orphans (R4)
//! Go never looks at an id in `active` that has no lease entry, or whose
//! task hash is gone: it stays active forever. Each full pass reads up to
//! [`ORPHAN_CHUNKS_PER_PASS`] chunks of [`ORPHAN_SCAN_CHUNK`] ids of each
//! queue's `active` list (a cursor from the oldest end, kept between
//! passes), and notes the ids lacking either. One still lacking it
//! [`ORPHAN_GRACE`] after it was first seen (checked atomically then) is
//! settled: a task without a lease gets an already expired lease and is
//! retried or archived like any lease-expired task in the same step; an id
//! without a task key is dropped from `active` and `lease`.
// asynq divergence: COMPATIBILITY.md#r4, COMPATIBILITY.md#r8

mod orphans;

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::handler::user_task;
use super::hooks::IsFailureFunc;
use super::lease::{LeaseExpired, RECOVER_CUTOFF};
use super::retry::{RetryDelayFunc, retry_at};
use super::task_error::TaskError;
use super::ticker::sleep_unless_shutdown;
use crate::broker::proto::WireTask;
use crate::broker::{
    Adopted, Broker, DueIndex, ORPHAN_SCAN_CHUNK, QueueHeads, RECOVER_BATCH, score_time,
};
use crate::error::{Error, Result};

/// Go's recoverer interval (1 min); here the interval of full passes.
pub use super::defaults::DEFAULT_RECOVER_INTERVAL;

/// How long an active id must have been seen without a lease entry or
/// without a task key before it is settled: 30 s, the same slack the
/// recoverer gives expired leases (R4).
pub const ORPHAN_GRACE: Duration = Duration::from_secs(30);

/// Longest wait between two looks at a queue that holds leases (R8): 5 s.
pub const LEASE_CHECK_CAP: Duration = Duration::from_secs(5);

/// Chunks of `active` the orphan scan reads per queue per full pass: 10
/// (1,000 ids; each chunk is one script call of O(chunk) cost).
pub const ORPHAN_CHUNKS_PER_PASS: usize = 10;

/// Shortest gap between two passes of [`Recoverer::run`] (clock time).
const MIN_WAKE_GAP: Duration = Duration::from_secs(1);

/// Longest real-time sleep of [`Recoverer::run`] before it reads the clock
/// again (so a simulated clock moved forward is noticed within it).
const CLOCK_RECHECK: Duration = Duration::from_secs(1);

fn chrono_of(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).expect("a recoverer duration fits chrono")
}

/// What one recoverer pass did, summed over the queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoverOutcome {
    /// Tasks moved to `retry`.
    pub retried: u64,
    /// Tasks moved to `archived` (retries used up).
    pub archived: u64,
    /// Tasks another server recovered first (NOT FOUND).
    pub lost_race: u64,
    /// Lease entries whose message did not decode; left in place.
    pub corrupt: u64,
    /// Stale aggregation sets given back to their groups.
    pub reclaimed_sets: u64,
    /// Lease-less active tasks given an expired lease (R4); each is also
    /// counted in `retried`, `archived`, `lost_race` or `corrupt`.
    pub orphans_leased: u64,
    /// Active ids without a task key dropped from `active` (R4).
    pub orphans_dropped: u64,
}

/// Which queues a recoverer serves.
#[derive(Clone, Debug)]
enum QueueSource {
    /// A server's queues, fixed at start.
    Fixed(Vec<String>),
    /// Every queue in `asynq:queues`, read again at each full pass.
    All,
    /// The queues of a [`DueIndex`] that hold leases, active ids or
    /// aggregation sets (the maintenance engine, issue 15).
    Index(DueIndex),
}

/// Whether a full pass has anything to look at in a queue.
fn needs_pass(h: &QueueHeads) -> bool {
    h.lease.is_some() || h.active > 0 || h.aggregation.is_some()
}

/// The score from which a lease is recoverable: its end + [`RECOVER_CUTOFF`].
fn recoverable_at(h: &QueueHeads) -> Option<f64> {
    h.lease.map(|l| l + RECOVER_CUTOFF.as_secs_f64())
}

/// What the recoverer knows between passes.
#[derive(Debug, Default)]
struct State {
    /// The queues of the last full pass.
    queues: Vec<String>,
    /// When the next full pass is due; `None`: now.
    next_full: Option<DateTime<Utc>>,
    /// Queues that hold leases -> when to look at them next.
    watch: BTreeMap<String, DateTime<Utc>>,
    orphans: orphans::Orphans,
}

/// Retries or archives the lease-expired tasks of the server's queues.
pub struct Recoverer {
    broker: Broker,
    source: QueueSource,
    interval: Duration,
    retry_delay_func: RetryDelayFunc,
    is_failure: IsFailureFunc,
    state: Mutex<State>,
}

impl std::fmt::Debug for Recoverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recoverer")
            .field("source", &self.source)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Recoverer {
    /// A recoverer for `queues`, a full pass every `interval` (Go: 1 min,
    /// [`DEFAULT_RECOVER_INTERVAL`]) and lease-holding queues looked at in
    /// between (module docs). A retried task waits
    /// `retry_delay_func(retried, LeaseExpired, task)`; it counts as a
    /// failure (Retried + 1, failed counters) when `is_failure(LeaseExpired)`
    /// (true by default). Go `newRecoverer`.
    pub fn new(
        broker: Broker,
        queues: Vec<String>,
        interval: Duration,
        retry_delay_func: RetryDelayFunc,
        is_failure: IsFailureFunc,
    ) -> Self {
        Recoverer::with_source(
            broker,
            QueueSource::Fixed(queues),
            interval,
            retry_delay_func,
            is_failure,
        )
    }

    /// Like [`Recoverer::new`] over every queue of `asynq:queues`, listed
    /// again at each full pass (the maintenance engine's recoverer, S30).
    pub fn for_all_queues(
        broker: Broker,
        interval: Duration,
        retry_delay_func: RetryDelayFunc,
        is_failure: IsFailureFunc,
    ) -> Self {
        Recoverer::with_source(
            broker,
            QueueSource::All,
            interval,
            retry_delay_func,
            is_failure,
        )
    }

    /// Like [`Recoverer::for_all_queues`], driven by `index` (issue 15,
    /// COMPATIBILITY.md L1): a full pass looks only at the queues holding
    /// leases, active ids or aggregation sets, and between passes a queue is
    /// looked at as soon as the index shows its earliest lease recoverable
    /// (lease + [`RECOVER_CUTOFF`]) or its earliest aggregation set past its
    /// deadline. No Redis call for a queue holding none of them.
    pub fn for_index(
        broker: Broker,
        index: DueIndex,
        interval: Duration,
        retry_delay_func: RetryDelayFunc,
        is_failure: IsFailureFunc,
    ) -> Self {
        Recoverer::with_source(
            broker,
            QueueSource::Index(index),
            interval,
            retry_delay_func,
            is_failure,
        )
    }

    fn with_source(
        broker: Broker,
        source: QueueSource,
        interval: Duration,
        retry_delay_func: RetryDelayFunc,
        is_failure: IsFailureFunc,
    ) -> Self {
        let queues = match &source {
            QueueSource::Fixed(q) => q.clone(),
            QueueSource::All | QueueSource::Index(_) => Vec::new(),
        };
        Recoverer {
            broker,
            source,
            interval,
            retry_delay_func,
            is_failure,
            state: Mutex::new(State {
                queues,
                ..State::default()
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state invalid
        // (every update is one assignment), so a poisoned lock is taken as is.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The queues that hold leases, looked at between full passes (R8), by
    /// name.
    pub fn watched_queues(&self) -> Vec<String> {
        self.state().watch.keys().cloned().collect()
    }

    /// When something is next due (broker clock, UTC): the earliest of the
    /// next full pass, the next look at a lease-holding queue, and the end
    /// of the grace of the oldest orphan suspect. Now, before the first
    /// pass.
    pub fn next_wake(&self) -> DateTime<Utc> {
        let st = self.state();
        let Some(full) = st.next_full else {
            return self.broker.now();
        };
        let orphan = st.orphans.earliest().map(|t| t + chrono_of(ORPHAN_GRACE));
        let indexed = match &self.source {
            QueueSource::Index(index) => index
                .earliest(|_, h| {
                    [recoverable_at(h), h.aggregation]
                        .into_iter()
                        .flatten()
                        .reduce(f64::min)
                })
                .map(score_time),
            _ => None,
        };
        st.watch
            .values()
            .copied()
            .chain(orphan)
            .chain(indexed)
            .fold(full, DateTime::min)
    }

    /// Does what is due at the broker's clock: a full pass ([`Recoverer::tick`])
    /// when one is due, else only the lease-holding queues whose look is due
    /// and the orphan suspects whose grace ended. Errors as `tick`.
    pub async fn poll(&self) -> Result<RecoverOutcome> {
        let now = self.broker.now();
        let (full_due, mut due) = {
            let st = self.state();
            let full_due = st.next_full.is_none_or(|t| t <= now);
            let mut due: Vec<String> = st
                .watch
                .iter()
                .filter(|(_, t)| **t <= now)
                .map(|(q, _)| q.clone())
                .collect();
            due.extend(st.orphans.queues_due(now - chrono_of(ORPHAN_GRACE)));
            (full_due, due)
        };
        if full_due {
            return self.tick().await;
        }
        let mut out = RecoverOutcome::default();
        let mut first_err = None;
        let mut touched = Vec::new();
        if let QueueSource::Index(index) = &self.source {
            let secs = now.timestamp() as f64;
            due.extend(index.select(|_, h| recoverable_at(h).is_some_and(|t| t <= secs)));
            let sets = index.select(|_, h| h.aggregation.is_some_and(|t| t <= secs));
            for queue in &sets {
                match self.broker.reclaim_stale_aggregation_sets(queue).await {
                    Ok(n) => out.reclaimed_sets += n,
                    Err(e) => {
                        tracing::warn!(queue = %queue, error = %e, "recoverer: could not reclaim stale aggregation sets");
                        first_err.get_or_insert(e);
                    }
                }
            }
            touched = sets;
            touched.extend(due.iter().cloned());
        }
        due.sort();
        due.dedup();
        for queue in &due {
            if let Err(e) = self.settle_orphans(queue, now, &mut out).await {
                tracing::warn!(queue = %queue, error = %e, "recoverer: could not settle orphaned active ids");
                first_err.get_or_insert(e);
            }
            if let Err(e) = self.recover_queue(queue, now, &mut out).await {
                tracing::warn!(queue = %queue, error = %e, "recoverer: could not recover lease-expired tasks");
                first_err.get_or_insert(e);
            }
        }
        if let QueueSource::Index(index) = &self.source {
            touched.sort();
            touched.dedup();
            index.touched(&touched);
        }
        first_err.map_or(Ok(out), Err)
    }

    /// Passes until `shutdown` is cancelled: one at once, then whenever
    /// [`Recoverer::next_wake`] comes (at least 1 s apart, clock time);
    /// failures are logged and the loop goes on. The clock is read again at
    /// least every second, so a simulated clock is followed. Go
    /// `recoverer.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            let passed_at = self.broker.now();
            // Failures are logged by `poll`.
            let _ = self.poll().await;
            loop {
                // Read again each time: with a due index, a lease written
                // since brings the wake forward.
                let wake = self.next_wake().max(passed_at + chrono_of(MIN_WAKE_GAP));
                let left = (wake - self.broker.now())
                    .to_std()
                    .unwrap_or(Duration::ZERO);
                if left.is_zero() {
                    break;
                }
                if !sleep_unless_shutdown(&shutdown, left.min(CLOCK_RECHECK)).await {
                    tracing::debug!("recoverer done");
                    return;
                }
            }
            if shutdown.is_cancelled() {
                break;
            }
        }
        tracing::debug!("recoverer done");
    }

    /// One full pass over every queue: (a) orphan suspects whose grace ended
    /// are settled and the next chunks of `active` are scanned (R4); (b)
    /// each task whose lease score is at or before now − [`RECOVER_CUTOFF`]
    /// (at most [`RECOVER_BATCH`] per queue) is archived when
    /// `retried >= retry`, else retried at now + delay, both with error text
    /// `asynq: task lease expired`, and the queue's next look is planned
    /// from its earliest remaining lease (R8); (c) stale aggregation sets
    /// are reclaimed. NOT FOUND (another recoverer won) is logged at debug
    /// and counted; an entry that does not decode is archived as is. Other
    /// failures are logged, the pass goes on, and the first is returned at
    /// the end. The next full pass is due one interval later. Go
    /// `recoverer.recover`.
    pub async fn tick(&self) -> Result<RecoverOutcome> {
        let now = self.broker.now();
        let mut out = RecoverOutcome::default();
        let mut first_err = None;
        if let QueueSource::Index(index) = &self.source {
            let queues = index.select(|_, h| needs_pass(h));
            let mut st = self.state();
            st.watch.retain(|q, _| queues.contains(q));
            st.orphans.retain(&queues);
            st.queues = queues;
        }
        if let QueueSource::All = self.source {
            match self.broker.workable_queues().await {
                Ok(queues) => {
                    let mut st = self.state();
                    st.watch.retain(|q, _| queues.contains(q));
                    st.orphans.retain(&queues);
                    st.queues = queues;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "recoverer: cannot list queues; passing over the last known ones");
                    first_err.get_or_insert(e);
                }
            }
        }
        let queues = self.state().queues.clone();
        for queue in &queues {
            if let Err(e) = self.settle_orphans(queue, now, &mut out).await {
                tracing::warn!(queue = %queue, error = %e, "recoverer: could not settle orphaned active ids");
                first_err.get_or_insert(e);
            }
            if let Err(e) = self.scan_orphans(queue, now).await {
                tracing::warn!(queue = %queue, error = %e, "recoverer: could not scan active for orphans");
                first_err.get_or_insert(e);
            }
            if let Err(e) = self.recover_queue(queue, now, &mut out).await {
                tracing::warn!(queue = %queue, error = %e, "recoverer: could not recover lease-expired tasks");
                first_err.get_or_insert(e);
            }
        }
        for queue in &queues {
            match self.broker.reclaim_stale_aggregation_sets(queue).await {
                Ok(n) => out.reclaimed_sets += n,
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "recoverer: could not reclaim stale aggregation sets");
                    first_err.get_or_insert(e);
                }
            }
        }
        if let QueueSource::Index(index) = &self.source {
            index.touched(&queues);
        }
        self.state().next_full = Some(now + chrono_of(self.interval));
        first_err.map_or(Ok(out), Err)
    }

    /// Reads the next [`ORPHAN_CHUNKS_PER_PASS`] chunks of `queue`'s
    /// `active` from the kept cursor (back to the oldest end after the
    /// last) and notes the ids lacking a lease entry or a task key.
    async fn scan_orphans(&self, queue: &str, now: DateTime<Utc>) -> Result<()> {
        let mut offset = self.state().orphans.cursor(queue);
        for _ in 0..ORPHAN_CHUNKS_PER_PASS {
            let chunk = self.broker.scan_active(queue, offset).await?;
            {
                let mut st = self.state();
                for (id, _) in chunk.suspects {
                    st.orphans.saw(queue, id, now);
                }
            }
            offset += ORPHAN_SCAN_CHUNK;
            if offset >= chunk.len {
                offset = 0;
                break;
            }
        }
        self.state().orphans.set_cursor(queue, offset);
        Ok(())
    }

    /// Settles the suspects of `queue` first seen [`ORPHAN_GRACE`] or more
    /// before `now` (module docs). A suspect whose settling failed is kept.
    async fn settle_orphans(
        &self,
        queue: &str,
        now: DateTime<Utc>,
        out: &mut RecoverOutcome,
    ) -> Result<()> {
        let seen_by = now - chrono_of(ORPHAN_GRACE);
        let due = self.state().orphans.take_due(queue, seen_by);
        let expired_at = now - chrono_of(RECOVER_CUTOFF);
        let mut ids = due.into_iter();
        let mut dropped = 0;
        let mut result = Ok(());
        while let Some(id) = ids.next() {
            match self.broker.adopt_orphan(queue, &id, expired_at).await {
                Ok(Adopted::Leased) => {
                    tracing::warn!(queue = %queue, id = %id, "recoverer: an active task had no lease; recovering it as lease-expired");
                    out.orphans_leased += 1;
                }
                Ok(Adopted::Dropped) => {
                    tracing::warn!(queue = %queue, id = %id, "recoverer: dropped an active id whose task hash is gone");
                    out.orphans_dropped += 1;
                    dropped += 1;
                }
                Ok(Adopted::Healthy) => {}
                Err(e) => {
                    let mut st = self.state();
                    st.orphans.put_back(queue, id, seen_by);
                    for rest in ids.by_ref() {
                        st.orphans.put_back(queue, rest, seen_by);
                    }
                    result = Err(e);
                }
            }
        }
        // The dropped ids were seen, so most sat behind the cursor (nearer
        // the tail): the ids beyond moved that many places tailwards.
        if dropped > 0 {
            let mut st = self.state();
            let cursor = st.orphans.cursor(queue).saturating_sub(dropped);
            st.orphans.set_cursor(queue, cursor);
        }
        result
    }

    /// Recovers the lease-expired tasks of one queue, then plans its next
    /// look from its earliest remaining lease. Errors only when the
    /// listing fails; a failed move is logged and the pass goes on.
    async fn recover_queue(
        &self,
        queue: &str,
        now: DateTime<Utc>,
        out: &mut RecoverOutcome,
    ) -> Result<()> {
        let cutoff = now - chrono_of(RECOVER_CUTOFF);
        let entries = self.broker.list_lease_expired(queue, cutoff).await?;
        let more = entries.len() >= RECOVER_BATCH;
        for entry in entries {
            let task = match entry {
                Ok(task) => task,
                Err((id, e)) => {
                    tracing::warn!(queue = %queue, id = %id, error = %e, "recoverer: archiving a leased task that does not decode");
                    if let Err(e) = self.broker.archive_undecodable(queue, &id).await {
                        tracing::warn!(queue = %queue, id = %id, error = %e, "recoverer: could not archive it");
                    }
                    out.corrupt += 1;
                    continue;
                }
            };
            let archive = task.msg.retried >= task.msg.retry;
            match self.recover_task(&task, archive).await {
                Ok(()) if archive => out.archived += 1,
                Ok(()) => out.retried += 1,
                Err(Error::TaskNotFound { .. }) => {
                    tracing::debug!(queue = %queue, id = %task.msg.id, "recoverer: task already recovered elsewhere");
                    out.lost_race += 1;
                }
                Err(e) => {
                    tracing::warn!(queue = %queue, id = %task.msg.id, error = %e, archive, "recoverer: could not move lease-expired task");
                }
            }
        }
        // The batch was full: more are due at once (the run loop still
        // waits its 1 s gap). Else the earliest lease not yet recoverable.
        let next = if more {
            Some(now)
        } else {
            self.broker
                .earliest_lease_after(queue, cutoff)
                .await?
                .map(|lease| {
                    (lease + chrono_of(RECOVER_CUTOFF)).min(now + chrono_of(LEASE_CHECK_CAP))
                })
        };
        let mut st = self.state();
        match next {
            Some(at) => st.watch.insert(queue.to_string(), at),
            None => st.watch.remove(queue),
        };
        Ok(())
    }

    async fn recover_task(&self, task: &WireTask, archive: bool) -> Result<()> {
        let err: TaskError = LeaseExpired.into();
        let text = err.to_string();
        if archive {
            return self.broker.archive(task, &text).await;
        }
        let msg = &task.msg;
        let retry_at = retry_at(
            &self.retry_delay_func,
            msg.retried,
            &err,
            &user_task(msg),
            || self.broker.now(),
        );
        self.broker
            .retry(task, retry_at, &text, (self.is_failure)(&err))
            .await
    }
}
