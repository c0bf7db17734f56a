//! The dashboard's Redis budget ([`RedisBudget`]): a limit of commands per
//! second and of Redis milliseconds per second for everything the
//! statistics reader sends (snapshot reads, growth samples, memory
//! estimates, the tracked connection's setup), issue 15 target 2.
//!
//! Accounting, as honestly as the client can see it:
//! - **Commands** are the commands the reader sends, counted where they are
//!   built (`MULTI` and `EXEC` included; a script call counts one: the
//!   commands it runs inside are paid for in the time budget).
//! - **Redis time** is the round-trip time of each call, from sending to the
//!   last byte of its reply: an upper bound of the Redis time it cost (it
//!   also holds the network and this process's own scheduling). Calls in
//!   flight at once (a Redis Cluster) are each charged their whole round
//!   trip.
//!
//! Both are token buckets that refill at the budget's rate and hold at most
//! [`BURST`] of it, full at first. A call waits until its commands fit (a
//! call bigger than the bucket waits for a full bucket) and the time bucket
//! is not in debt; its round trip is charged when its reply is in. So over
//! any `T` seconds the reader sends at most `commands/s × (T + 10)` commands
//! plus one call, and costs at most `ms/s × (T + 10)` ms plus the calls in
//! flight, plus the reads made on credit ([`RedisBudget::on_credit`]: a view
//! with no numbers at all does not wait; the debt defers the next refreshes).
//! Background work (the memory estimates) waits until both buckets
//! are half full ([`RedisBudget::spend_background`]), so it never starves the
//! refreshes. A caller deciding whether to start a refresh at all asks
//! [`RedisBudget::over`] (the dashboard then serves older numbers marked
//! stale and counts a deferral).

use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

tokio::task_local! {
    /// Set for a read that may run on credit ([`RedisBudget::on_credit`]).
    static CREDIT: bool;
}

/// How much of the budget a bucket holds: 10 s worth. The first view of a
/// large dashboard (every queue read once, with its growth samples) fits in
/// it, so it is not paced; what follows is.
pub const BURST: Duration = Duration::from_secs(10);

/// Seconds of history [`RedisBudget::usage`] averages over.
const WINDOW_S: u64 = 60;

/// Commands per second and Redis milliseconds per second the dashboard's
/// statistics reader may use (module docs). Shared by reference (the
/// dashboard's cache holds it in an `Arc`); every method takes `&self`.
#[derive(Debug)]
pub struct RedisBudget {
    inner: Mutex<Inner>,
    /// Wakes calls waiting for tokens when the limits change.
    changed: tokio::sync::Notify,
}

#[derive(Debug)]
struct Inner {
    /// Commands per second; 0 = unlimited.
    commands_per_s: f64,
    /// Redis ms per second; 0 = unlimited.
    ms_per_s: f64,
    commands: f64,
    ms: f64,
    refilled: Instant,
    origin: Instant,
    /// Per whole second since `origin`: commands sent, ms charged,
    /// refreshes deferred. The last [`WINDOW_S`] seconds.
    seconds: VecDeque<(u64, f64, f64, u64)>,
    deferred_total: u64,
    waits: u64,
}

/// The use of a [`RedisBudget`] over the last minute (or since it was
/// made, when younger).
#[derive(Clone, Debug, PartialEq)]
pub struct BudgetUsage {
    /// The limits: commands per second and Redis ms per second (0 =
    /// unlimited).
    pub commands_per_s_limit: f64,
    pub ms_per_s_limit: f64,
    /// Commands sent per second, mean over the window.
    pub commands_per_s: f64,
    /// Redis ms (round trips) per second, mean over the window.
    pub ms_per_s: f64,
    /// The window's length in seconds (60, less right after start).
    pub window_s: u64,
    /// Refreshes deferred in the window, and since start.
    pub deferred: u64,
    pub deferred_total: u64,
    /// Calls that had to wait for tokens since start.
    pub waits: u64,
}

impl RedisBudget {
    /// A budget of `commands_per_s` commands and `ms_per_s` Redis
    /// milliseconds per second (either 0: that one is unlimited), buckets
    /// full.
    pub fn new(commands_per_s: f64, ms_per_s: f64) -> Self {
        let now = Instant::now();
        let mut inner = Inner {
            commands_per_s: 0.0,
            ms_per_s: 0.0,
            commands: 0.0,
            ms: 0.0,
            refilled: now,
            origin: now,
            seconds: VecDeque::new(),
            deferred_total: 0,
            waits: 0,
        };
        inner.set(commands_per_s, ms_per_s);
        RedisBudget {
            inner: Mutex::new(inner),
            changed: tokio::sync::Notify::new(),
        }
    }

    /// No limit (use is still measured).
    pub fn unlimited() -> Self {
        RedisBudget::new(0.0, 0.0)
    }

    /// Changes the limits (0 = unlimited) and fills both buckets; calls
    /// waiting for tokens look again.
    pub fn set_limits(&self, commands_per_s: f64, ms_per_s: f64) {
        self.lock().set(commands_per_s, ms_per_s);
        self.changed.notify_waiters();
    }

    /// Whether a bucket is empty or in debt, so that a refresh started now
    /// would wait: the caller should defer it ([`RedisBudget::note_deferred`]).
    pub fn over(&self) -> bool {
        let mut inner = self.lock();
        inner.refill(Instant::now());
        (inner.commands_per_s > 0.0 && inner.commands <= 0.0)
            || (inner.ms_per_s > 0.0 && inner.ms < 0.0)
    }

    /// Counts one deferred refresh.
    pub fn note_deferred(&self) {
        let mut inner = self.lock();
        inner.deferred_total += 1;
        inner.record(Instant::now(), 0.0, 0.0, 1);
    }

    /// Waits until `commands` commands may be sent, then counts them
    /// (inside [`RedisBudget::on_credit`]: counts them at once).
    pub async fn spend(&self, commands: u64) {
        self.spend_keeping(commands, 0.0).await
    }

    /// Runs `read` on credit when the budget is not spent now: its calls do
    /// not wait for tokens but are charged as usual, so the buckets may go
    /// into debt, which defers what follows until it is paid back. For a
    /// view that has no numbers at all to show (the first view after
    /// start, the one after an action): it should not wait for the budget
    /// to refill. When the budget is spent, `read` waits as usual, so credit
    /// is only taken from a non-negative balance.
    pub async fn on_credit<T>(&self, read: impl Future<Output = T>) -> T {
        let credit = !self.over();
        CREDIT.scope(credit, read).await
    }

    /// [`RedisBudget::spend`] for background work that must not starve the
    /// refreshes (the memory estimates): waits until both buckets are at
    /// least half full.
    pub async fn spend_background(&self, commands: u64) {
        self.spend_keeping(commands, 0.5).await
    }

    /// Waits until `commands` fit and each bucket holds at least `keep` of
    /// its capacity besides, then counts them.
    async fn spend_keeping(&self, commands: u64, keep: f64) {
        let cost = commands as f64;
        if keep == 0.0 && CREDIT.try_with(|c| *c).unwrap_or(false) {
            let mut inner = self.lock();
            let now = Instant::now();
            inner.refill(now);
            if inner.commands_per_s > 0.0 {
                inner.commands -= cost;
            }
            inner.record(now, cost, 0.0, 0);
            return;
        }
        loop {
            let wait = {
                let mut inner = self.lock();
                let now = Instant::now();
                inner.refill(now);
                let cmd_cap = inner.commands_per_s * BURST.as_secs_f64();
                let need = (cost + keep * cmd_cap).min(cmd_cap);
                let ms_need = keep * inner.ms_per_s * BURST.as_secs_f64();
                let mut wait = 0.0f64;
                if inner.commands_per_s > 0.0 && inner.commands < need {
                    wait = wait.max((need - inner.commands) / inner.commands_per_s);
                }
                if inner.ms_per_s > 0.0 && inner.ms < ms_need {
                    wait = wait.max((ms_need - inner.ms) / inner.ms_per_s);
                }
                if wait <= 0.0 {
                    if inner.commands_per_s > 0.0 {
                        inner.commands -= cost;
                    }
                    inner.record(now, cost, 0.0, 0);
                    return;
                }
                inner.waits += 1;
                Duration::from_secs_f64(wait.clamp(0.001, 3600.0))
            };
            let changed = self.changed.notified();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = changed => {}
            }
        }
    }

    /// Charges `rtt` of Redis time.
    pub fn charge(&self, rtt: Duration) {
        let ms = rtt.as_secs_f64() * 1000.0;
        let mut inner = self.lock();
        let now = Instant::now();
        inner.refill(now);
        if inner.ms_per_s > 0.0 {
            inner.ms -= ms;
        }
        inner.record(now, 0.0, ms, 0);
    }

    /// Runs `call` (which sends `commands` commands) within the budget:
    /// waits for tokens, then charges its round trip when it succeeded. A
    /// failed call (Redis down, a timeout) is not charged its time: Redis
    /// spent none on it, and charging the timeouts of an outage would hold
    /// the numbers back after Redis returns (the chaos suite's
    /// `dashboard_with_redis_down`).
    pub async fn metered<T, E>(
        &self,
        commands: u64,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.spend(commands).await;
        let started = Instant::now();
        let out = call.await;
        if out.is_ok() {
            self.charge(started.elapsed());
        }
        out
    }

    /// [`RedisBudget::metered`] for background work
    /// ([`RedisBudget::spend_background`]).
    pub async fn metered_background<T, E>(
        &self,
        commands: u64,
        call: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.spend_background(commands).await;
        let started = Instant::now();
        let out = call.await;
        if out.is_ok() {
            self.charge(started.elapsed());
        }
        out
    }

    /// The limits and the use over the last minute.
    pub fn usage(&self) -> BudgetUsage {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.refill(now);
        let sec = now.duration_since(inner.origin).as_secs();
        let window = (sec + 1).min(WINDOW_S);
        let from = sec + 1 - window;
        let (mut c, mut m, mut d) = (0.0, 0.0, 0);
        for &(s, sc, sm, sd) in &inner.seconds {
            if s >= from {
                c += sc;
                m += sm;
                d += sd;
            }
        }
        let w = window as f64;
        BudgetUsage {
            commands_per_s_limit: inner.commands_per_s,
            ms_per_s_limit: inner.ms_per_s,
            commands_per_s: c / w,
            ms_per_s: m / w,
            window_s: window,
            deferred: d,
            deferred_total: inner.deferred_total,
            waits: inner.waits,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Runs `call` within `budget` when there is one ([`RedisBudget::metered`]).
pub(crate) async fn metered<T, E>(
    budget: Option<&RedisBudget>,
    commands: u64,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    match budget {
        Some(b) => b.metered(commands, call).await,
        None => call.await,
    }
}

impl Inner {
    fn set(&mut self, commands_per_s: f64, ms_per_s: f64) {
        self.commands_per_s = commands_per_s.max(0.0);
        self.ms_per_s = ms_per_s.max(0.0);
        self.commands = self.commands_per_s * BURST.as_secs_f64();
        self.ms = self.ms_per_s * BURST.as_secs_f64();
        self.refilled = Instant::now();
    }

    fn refill(&mut self, now: Instant) {
        let dt = now.duration_since(self.refilled).as_secs_f64();
        self.refilled = now;
        let burst = BURST.as_secs_f64();
        self.commands = (self.commands + dt * self.commands_per_s).min(self.commands_per_s * burst);
        self.ms = (self.ms + dt * self.ms_per_s).min(self.ms_per_s * burst);
    }

    fn record(&mut self, now: Instant, commands: f64, ms: f64, deferred: u64) {
        let sec = now.duration_since(self.origin).as_secs();
        match self.seconds.back_mut() {
            Some(last) if last.0 == sec => {
                last.1 += commands;
                last.2 += ms;
                last.3 += deferred;
            }
            _ => self.seconds.push_back((sec, commands, ms, deferred)),
        }
        while self.seconds.front().is_some_and(|f| f.0 + WINDOW_S <= sec) {
            self.seconds.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_budget_counts_and_goes_into_debt() {
        let b = RedisBudget::new(1.0, 0.0);
        assert!(!b.over());
        b.spend(25).await; // bigger than the bucket (10): allowed when full
        assert!(b.over());
        let u = b.usage();
        assert_eq!(u.commands_per_s_limit, 1.0);
        assert_eq!(u.commands_per_s * u.window_s as f64, 25.0);
        b.note_deferred();
        assert_eq!(b.usage().deferred, 1);
        b.set_limits(0.0, 0.0);
        assert!(!b.over());
    }

    #[tokio::test]
    async fn time_in_debt_defers() {
        let b = RedisBudget::new(0.0, 1.0);
        b.charge(Duration::from_millis(20));
        assert!(b.over());
        let u = b.usage();
        assert!((u.ms_per_s * u.window_s as f64 - 20.0).abs() < 1e-9);
    }
}
