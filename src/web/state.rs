//! Handles shared by every request ([`AppState`]), and the
//! queue-statistics cache ([`StatsCache`]: when a snapshot is read, shared
//! and refreshed; reading one and the snapshot types are the inspector's,
//! `src/inspector/snapshot.rs`, re-exported here).
//!
//! # The statistics snapshot
//! The queues page, the queue pages' banners, `/api/queues` and `/metrics`
//! all read one [`Snapshot`] of every queue's numbers, kept by
//! [`StatsCache`]:
//!
//! - **Shared per poll slot.** Snapshots belong to wall-clock slots of one
//!   poll interval (slot = unix time / interval, from the inspector's
//!   clock), not to the moment a viewer asked, so one viewer and ten
//!   viewers polling at that interval cost Redis the same: at most one
//!   computation per slot.
//! - **Cheap to compute.** A snapshot is one Redis transaction per 100
//!   queues ([`Inspector::stats_snapshot`], through
//!   [`Inspector::queues_stats_with`]): every queue's counts, and
//!   every [`GROWTH_REFRESH`] the few outage-series samples its retry-growth
//!   figures need (in between, the growth figures are recomputed from the
//!   samples last read; the sampler adds one per poll interval, and reading
//!   them costs Redis as much as the counts). The [`StatsHints`] of the last
//!   snapshot (queue list, which keys held something) spare a separate
//!   queue-list read and the reads of absent keys; they never change the
//!   numbers. They are [`StatsHints::tracked`]: through Redis key tracking,
//!   only queues with a key changed since the last snapshot are read again
//!   (the others cost one `PING` per 100 queues), with numbers as fresh as
//!   a full read.
//! - **Never waited for when one exists (stale-while-revalidate).** A view
//!   that finds the snapshot of the current slot uses it; one that finds the
//!   previous slot's uses that too and starts a refresh in the background
//!   (at most one in flight). While someone viewed in the last slot, a
//!   background task computes each new slot's snapshot as the slot starts,
//!   so polling viewers find it ready; when nobody views, it stops and Redis
//!   sees nothing from the dashboard. Only a view with no usable snapshot —
//!   the first one, one after two whole slots without views, one after
//!   [`StatsCache::invalidate`], or one after a failed read (every view
//!   that began after the failed computation started, even within its
//!   slot, so the numbers come back at the first view after Redis does) —
//!   computes it inline; concurrent views then wait for that one
//!   computation instead of starting their own.
//! - **Memory estimates on their own cadence.** The memory estimate (`MEMORY
//!   USAGE` sampling, Go's `rdb.memoryUsage`) is most of what asynqmon's
//!   queue statistics cost Redis. It is refreshed off the view path, per
//!   queue at most once per [`MEMORY_REFRESH`] (or per poll interval, when
//!   longer), by one background task at a time, ten queues per script call
//!   ([`Inspector::queues_memory_usage`]), and every snapshot carries each
//!   queue's last estimate with its time
//!   ([`QueueRow::memory`]); a queue not estimated yet shows "…". asynqmon
//!   recomputes it on every request (`COMPATIBILITY.md` A7, A15).
//!
//! - **Within a Redis budget.** Every command the cache's reads send
//!   (snapshots, growth samples, memory estimates) is metered by one
//!   [`RedisBudget`] (`--redis-budget-commands`, `--redis-budget-ms`;
//!   `src/broker/stats/budget.rs` says what is counted and how): a read
//!   waits for the budget's tokens, and while the budget is spent no
//!   refresh starts — a view then gets the last snapshot whatever its age
//!   (a good one), and the pages show a stale marker with the numbers' age
//!   ([`StatsCache::stale_note`]). More viewers or more queues make the
//!   numbers older, never the Redis load higher. Deferred refreshes are
//!   counted (at most one per slot) for the Redis page.
//!
//! A poll interval of zero turns the cache off: every request computes
//! everything, memory included, inline (tests use it to see their own
//! changes at once).

// asynqmon divergence: COMPATIBILITY.md#a7, COMPATIBILITY.md#a15

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

use super::WebConfig;
use super::pressure::PressureCache;
use crate::Inspector;
use crate::inspector::{GrowthSamples, StatsHints};
pub use crate::inspector::{MemoryEstimate, QueueRow, RedisBudget, Snapshot};

/// Least time between two memory estimates of one queue: five minutes (or
/// the poll interval, when longer). A memory run costs Redis about five
/// snapshots (about 40 commands per queue, most of them `MEMORY USAGE`);
/// once every five minutes it adds under a tenth of a millisecond per view
/// of a viewer polling every 5 s, where once a minute would add half a
/// millisecond (BENCHMARKS.md, "Dashboard").
pub const MEMORY_REFRESH: Duration = Duration::from_secs(300);
/// Least time between two reads of the outage-series samples behind the
/// retry-growth figures: 30 s (or the poll interval, when longer).
pub const GROWTH_REFRESH: Duration = Duration::from_secs(30);

/// State every handler gets: cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The inspector all pages and API routes read and act through.
    pub inspector: Inspector,
    /// Dashboard settings.
    pub config: Arc<WebConfig>,
    /// Token every HTML mutation must carry (`X-CSRF-Token` header); random
    /// per process.
    pub csrf_token: Arc<str>,
    /// The shared queue-statistics snapshot.
    pub stats: Arc<StatsCache>,
    /// Retries due soon per queue, read for the rows shown, metered by the
    /// same Redis budget as `stats` (`src/web/pressure.rs`).
    pub pressure: Arc<PressureCache>,
    /// The attention board's findings per snapshot, metered by the same
    /// Redis budget (`src/web/attention.rs`).
    pub attention: Arc<super::attention::AttentionCache>,
    /// Alert webhooks' dedupe state and last sends (`src/web/alerts/`).
    pub alerts: Arc<super::alerts::Alerter>,
}

impl AppState {
    /// State for `inspector` with `config` and a fresh CSRF token.
    pub fn new(inspector: Inspector, config: WebConfig) -> Self {
        let token = format!("{:032x}", rand::random::<u128>());
        let interval = config.poll_interval;
        let budget = RedisBudget::new(
            config.redis_budget_commands as f64,
            config.redis_budget_ms as f64,
        );
        let budget = Arc::new(budget);
        let alerts = Arc::new(super::alerts::Alerter::new(config.alerts.clone()));
        AppState {
            inspector,
            config: Arc::new(config),
            csrf_token: token.into(),
            stats: Arc::new(StatsCache::with_budget(interval, budget.clone())),
            pressure: Arc::new(PressureCache::new(interval, budget.clone())),
            attention: Arc::new(super::attention::AttentionCache::new(budget)),
            alerts,
        }
    }
}

/// The shared, per-poll-slot cache of [`Snapshot`] (see the module docs for
/// the rules). Cheap to share: handlers hold it in an `Arc`.
#[derive(Debug)]
pub struct StatsCache {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The poll interval; zero turns caching off.
    interval: Duration,
    /// Least time between two memory estimates of one queue.
    memory_period: Duration,
    /// Least time between two reads of the growth samples.
    growth_period: Duration,
    state: Mutex<State>,
    /// Held while a snapshot is computed, so there is one computation at a
    /// time (inline or background).
    compute: tokio::sync::Mutex<()>,
    /// Background jobs (refreshes, memory runs) started and not finished.
    busy: tokio::sync::watch::Sender<usize>,
    /// Snapshots computed.
    computed: AtomicU64,
    /// Memory estimates computed (one per queue per run).
    estimated: AtomicU64,
    /// What every read is metered by.
    budget: Arc<RedisBudget>,
}

#[derive(Debug, Default)]
struct State {
    /// The last snapshot with the slot it was computed in. `None` at first,
    /// and after [`StatsCache::invalidate`].
    snapshot: Option<(u64, Arc<Snapshot>)>,
    /// When the computation of `snapshot` started, if it is a failed read
    /// (see [`usable`]).
    failed_at: Option<Instant>,
    /// Bumped by every invalidation; a computation started before one is
    /// not installed.
    generation: u64,
    /// The slot of the latest view.
    last_view: u64,
    /// The slot-start refresher task is running.
    refresher: bool,
    /// A background refresh is in flight.
    refreshing: bool,
    /// A memory run is in flight.
    estimating: bool,
    /// Last memory estimate per queue, with when it was taken (monotonic).
    memory: HashMap<String, (MemoryEstimate, Instant)>,
    /// The growth samples last read per queue (queues whose series could
    /// not be read are absent), and when they were read.
    samples: GrowthSamples,
    samples_read: Option<Instant>,
    /// What the last computation learned (queue list, keys present), so
    /// the next one costs Redis less; kept across invalidations (it never
    /// changes the numbers).
    hints: StatsHints,
    /// A refresh was deferred for the budget since `snapshot` was
    /// installed (the pages mark its numbers stale).
    deferred: bool,
    /// The slot of the last deferral counted (one per slot).
    deferred_slot: Option<u64>,
}

/// Whether `snap` of `slot` may be served to a view in slot `now` that
/// began at `view_start`: a good read of the current or the previous slot;
/// a failed read (Redis down; its computation started at `failed_at`) only
/// to views that began before that computation did, so waited for it. Any
/// later view reads again, so the statistics recover at the first view
/// after Redis returns, not at the end of the slot of the last failure
/// (COMPATIBILITY.md X2).
fn usable(
    slot: u64,
    snap: &Snapshot,
    failed_at: Option<Instant>,
    now: u64,
    view_start: Instant,
) -> bool {
    match snap.error {
        None => slot >= now || slot + 1 == now,
        Some(_) => slot >= now && failed_at.is_some_and(|t| t >= view_start),
    }
}

impl StatsCache {
    /// A cache whose snapshots belong to slots of `interval`; zero computes
    /// every snapshot afresh (no sharing, no background work). Unlimited
    /// Redis budget (use still measured).
    pub fn new(interval: Duration) -> Self {
        StatsCache::with_budget(interval, Arc::new(RedisBudget::unlimited()))
    }

    /// [`StatsCache::new`] with every Redis read metered by `budget`.
    pub fn with_budget(interval: Duration, budget: Arc<RedisBudget>) -> Self {
        StatsCache {
            shared: Arc::new(Shared {
                interval,
                memory_period: interval.max(MEMORY_REFRESH),
                growth_period: interval.max(GROWTH_REFRESH),
                state: Mutex::new(State {
                    hints: StatsHints::tracked().with_budget(budget.clone()),
                    ..State::default()
                }),
                budget,
                compute: tokio::sync::Mutex::new(()),
                busy: tokio::sync::watch::Sender::new(0),
                computed: AtomicU64::new(0),
                estimated: AtomicU64::new(0),
            }),
        }
    }

    /// The snapshot for a view now. Never fails: errors are inside the
    /// snapshot.
    ///
    /// Returns at once (no Redis command) when the current or the previous
    /// slot's snapshot exists, starting a background refresh in the latter
    /// case, or when an older good one exists and the Redis budget is spent
    /// (a deferral: [`StatsCache::stale_note`]); otherwise computes it inline (one Redis transaction per 100
    /// queues) or waits for the computation already running. May start the
    /// background memory run and the slot-start refresher (tokio tasks).
    pub async fn get(&self, inspector: &Inspector) -> Arc<Snapshot> {
        let shared = &self.shared;
        if shared.interval.is_zero() {
            return Arc::new(shared.compute_uncached(inspector).await);
        }
        let now = shared.slot_of(inspector.now());
        let view_start = Instant::now();
        {
            let mut st = shared.lock();
            st.last_view = st.last_view.max(now);
            if !st.refresher {
                st.refresher = true;
                tokio::spawn(refresher(Arc::downgrade(shared), inspector.clone()));
            }
            if let Some((slot, snap)) = &st.snapshot
                && usable(*slot, snap, st.failed_at, now, view_start)
            {
                let snap = snap.clone();
                if *slot < now {
                    shared.spawn_refresh(&mut st, inspector, now);
                }
                return snap;
            }
            if let Some((_, snap)) = &st.snapshot
                && snap.error.is_none()
                && shared.budget.over()
            {
                // Over budget: older numbers, marked stale, rather than a
                // read Redis cannot afford now.
                let snap = snap.clone();
                shared.defer(&mut st, now);
                return snap;
            }
        }
        let _computing = shared.compute.lock().await;
        let generation = {
            let st = shared.lock();
            if let Some((slot, snap)) = &st.snapshot
                && usable(*slot, snap, st.failed_at, now, view_start)
            {
                // Computed while this view waited.
                return snap.clone();
            }
            st.generation
        };
        // Nothing to show: this read does not wait for the budget (it is
        // charged, and its debt defers the next refreshes).
        let budget = shared.budget.clone();
        budget
            .on_credit(shared.compute_and_install(inspector, generation))
            .await
    }

    /// How many snapshots this cache has computed since it was made
    /// (inline and background; memory runs not included).
    pub fn computations(&self) -> u64 {
        self.shared.computed.load(Ordering::Relaxed)
    }

    /// How many per-queue memory estimates this cache has computed.
    pub fn memory_estimates(&self) -> u64 {
        self.shared.estimated.load(Ordering::Relaxed)
    }

    /// Drops the cached snapshot (after an action changed the numbers): the
    /// next view computes a fresh one inline, and a computation already
    /// running is not installed. Memory estimates are kept (they refresh on
    /// their own cadence).
    pub async fn invalidate(&self) {
        let mut st = self.shared.lock();
        st.snapshot = None;
        st.generation += 1;
    }

    /// The Redis budget every read of this cache is metered by (its limits
    /// can be changed at run time: [`RedisBudget::set_limits`]).
    pub fn budget(&self) -> &Arc<RedisBudget> {
        &self.shared.budget
    }

    /// The stale marker for `snap` as of `now`: `Some("numbers 42 s old —
    /// Redis budget")` when a refresh was deferred for the budget since
    /// `snap` was taken (it is still the cache's snapshot), else `None`.
    pub fn stale_note(&self, snap: &Snapshot, now: DateTime<Utc>) -> Option<String> {
        let st = self.shared.lock();
        let current = st
            .snapshot
            .as_ref()
            .is_some_and(|(_, s)| s.taken_at == snap.taken_at);
        (st.deferred && current).then(|| {
            let age = (now - snap.taken_at).num_seconds().max(0);
            format!("numbers {age} s old — Redis budget")
        })
    }

    /// Waits until no background refresh or memory run is in flight (for
    /// tests and benches; the slot-start refresher's wait does not count).
    pub async fn settle(&self) {
        let mut rx = self.shared.busy.subscribe();
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The slot `t` falls in.
    fn slot_of(&self, t: DateTime<Utc>) -> u64 {
        let ms = u64::try_from(t.timestamp_millis()).unwrap_or(0);
        let interval = u64::try_from(self.interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        ms / interval
    }

    /// Time from `t` to the start of the next slot, plus 1 ms.
    fn until_next_slot(&self, t: DateTime<Utc>) -> Duration {
        let ms = u64::try_from(t.timestamp_millis()).unwrap_or(0);
        let interval = u64::try_from(self.interval.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        Duration::from_millis(interval - ms % interval + 1)
    }

    fn job_started(&self) {
        self.busy.send_modify(|n| *n += 1);
    }

    fn job_finished(&self) {
        self.busy.send_modify(|n| *n = n.saturating_sub(1));
    }

    /// Notes a refresh deferred for the budget in slot `now` (counted once
    /// per slot).
    fn defer(&self, st: &mut State, now: u64) {
        st.deferred = true;
        if st.deferred_slot != Some(now) {
            st.deferred_slot = Some(now);
            self.budget.note_deferred();
        }
    }

    /// Starts a background refresh unless one is in flight or the budget is
    /// spent (then defers it).
    fn spawn_refresh(self: &Arc<Self>, st: &mut State, inspector: &Inspector, now: u64) {
        if st.refreshing {
            return;
        }
        if self.budget.over() {
            self.defer(st, now);
            return;
        }
        st.refreshing = true;
        self.job_started();
        let shared = self.clone();
        let inspector = inspector.clone();
        tokio::spawn(async move {
            shared.refresh(&inspector).await;
        });
    }

    /// The background refresh: computes the current slot's snapshot unless
    /// it exists by now. Called with `refreshing` set; clears it.
    async fn refresh(self: &Arc<Self>, inspector: &Inspector) {
        {
            let _computing = self.compute.lock().await;
            let now = self.slot_of(inspector.now());
            let generation = {
                let st = self.lock();
                match &st.snapshot {
                    Some((slot, _)) if *slot >= now => None,
                    _ => Some(st.generation),
                }
            };
            if let Some(generation) = generation {
                self.compute_and_install(inspector, generation).await;
            }
        }
        self.lock().refreshing = false;
        self.job_finished();
    }

    /// Computes a snapshot (caller holds `compute`), reading the growth
    /// samples when they are due, installs it for the current slot unless
    /// an invalidation came in between, and starts the memory run when
    /// estimates are due.
    async fn compute_and_install(
        self: &Arc<Self>,
        inspector: &Inspector,
        generation: u64,
    ) -> Arc<Snapshot> {
        let started = Instant::now();
        let (with_samples, mut hints) = {
            let mut st = self.lock();
            let due = st
                .samples_read
                .is_none_or(|at| at.elapsed() >= self.growth_period);
            (due, std::mem::take(&mut st.hints))
        };
        let (mut snap, samples) = inspector.stats_snapshot(with_samples, &mut hints).await;
        self.computed.fetch_add(1, Ordering::Relaxed);
        let slot = self.slot_of(inspector.now());
        let mut st = self.lock();
        st.hints = hints;
        if let Some(samples) = samples {
            st.samples = samples;
            st.samples_read = Some(Instant::now());
        }
        snap.attach_growth(&st.samples);
        snap.attach_memory(|q| st.memory.get(q).map(|(m, _)| m));
        let snap = Arc::new(snap);
        if st.generation == generation {
            st.snapshot = Some((slot, snap.clone()));
            st.failed_at = snap.error.is_some().then_some(started);
            st.deferred = false;
        }
        if snap.error.is_none() {
            self.spawn_memory_run(&mut st, &snap, inspector);
        }
        snap
    }

    /// Starts the memory run for the queues of `snap` whose estimate is
    /// missing or older than `memory_period`, unless one is in flight, and
    /// forgets the estimates of queues that are gone.
    fn spawn_memory_run(self: &Arc<Self>, st: &mut State, snap: &Snapshot, inspector: &Inspector) {
        st.memory
            .retain(|name, _| snap.queues.iter().any(|r| &r.name == name));
        if st.estimating {
            return;
        }
        let due: Vec<String> = snap
            .queues
            .iter()
            .filter(|r| r.info.is_ok())
            .filter(|r| {
                st.memory
                    .get(&r.name)
                    .is_none_or(|(_, at)| at.elapsed() >= self.memory_period)
            })
            .map(|r| r.name.clone())
            .collect();
        if due.is_empty() {
            return;
        }
        st.estimating = true;
        self.job_started();
        let shared = self.clone();
        let inspector = inspector.clone();
        tokio::spawn(async move {
            shared.memory_run(&inspector, due).await;
        });
    }

    /// Estimates the memory of `queues` (ten per script call, so Redis is
    /// never busy long), then puts the estimates into the current snapshot.
    /// Keeps the old estimates when the run fails as a whole (Redis
    /// unreachable).
    async fn memory_run(self: &Arc<Self>, inspector: &Inspector, queues: Vec<String>) {
        let result = inspector
            .queues_memory_usage_within(&queues, &self.budget)
            .await;
        self.estimated
            .fetch_add(queues.len() as u64, Ordering::Relaxed);
        let at = inspector.now();
        let mut st = self.lock();
        match result {
            Ok(estimates) => {
                let done = Instant::now();
                for (queue, bytes) in estimates {
                    st.memory
                        .insert(queue, (MemoryEstimate::of(bytes, at), done));
                }
                if let Some((slot, snap)) = &st.snapshot {
                    let mut patched = Snapshot::clone(snap);
                    patched.attach_memory(|q| st.memory.get(q).map(|(m, _)| m));
                    st.snapshot = Some((*slot, Arc::new(patched)));
                }
            }
            Err(e) => tracing::warn!(error = %e, "memory estimates not refreshed"),
        }
        st.estimating = false;
        drop(st);
        self.job_finished();
    }

    /// A snapshot with growth samples and memory read inline (poll
    /// interval zero).
    async fn compute_uncached(&self, inspector: &Inspector) -> Snapshot {
        let mut hints = StatsHints::default().with_budget(self.budget.clone());
        let (mut snap, samples) = inspector.stats_snapshot(true, &mut hints).await;
        self.computed.fetch_add(1, Ordering::Relaxed);
        snap.attach_growth(&samples.unwrap_or_default());
        let estimated = inspector.attach_memory_now(&mut snap).await;
        self.estimated.fetch_add(estimated, Ordering::Relaxed);
        snap
    }
}

/// The slot-start refresher: at the start of every slot, computes its
/// snapshot in the background if someone viewed in the previous one (so
/// polling viewers find it ready); ends when nobody did, or when the cache
/// is gone. At most one per cache; [`StatsCache::get`] starts it again.
async fn refresher(shared: Weak<Shared>, inspector: Inspector) {
    loop {
        let Some(s) = shared.upgrade() else { return };
        let wait = s.until_next_slot(inspector.now());
        drop(s);
        tokio::time::sleep(wait).await;
        let Some(s) = shared.upgrade() else { return };
        let now = s.slot_of(inspector.now());
        {
            let mut st = s.lock();
            if st.last_view + 1 < now {
                st.refresher = false;
                return;
            }
            let current = matches!(&st.snapshot, Some((slot, _)) if *slot >= now);
            if current || st.refreshing {
                continue;
            }
            if s.budget.over() {
                s.defer(&mut st, now);
                continue;
            }
            st.refreshing = true;
            s.job_started();
        }
        s.refresh(&inspector).await;
    }
}
