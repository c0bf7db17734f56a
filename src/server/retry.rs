//! How long a failed task waits before its next attempt (Go
//! `RetryDelayFunc`, `DefaultRetryDelayFunc`; wire spec §7.4; S4–S11).
//!
//! A [`RetryDelayFunc`] gets `(n, error, task)`, where `n` is the number of
//! retries already made (0 after the first failure), and returns the delay.
//! The server calls it only when a retry will really happen — never for a
//! success, a [`RevokeTask`](super::RevokeTask), or a task going to the
//! archive (ceiling reached or [`SkipRetry`](super::SkipRetry)) (S6). The
//! task is then put in the queue's retry set with score `now + delay` (S7).
//!
//! - [`default_retry_delay`]: Sidekiq's curve, `n^4 + 15 + r*(n+1)` seconds (S4).
//! - [`RetryPolicy`]: a default [`Backoff`] plus rules by task-type prefix,
//!   optional jitter, and [`RetryAfter`](super::RetryAfter) hints honoured (S8–S11).
//!   The config is per server, so different policies per *queue* need separate
//!   servers; per task *type* a policy's prefix rules do it (S11).
//!
//! # Warnings
//! - A zero delay is taken literally: the task becomes due at the next
//!   forwarder poll (every few seconds). A wave of failures all returning zero
//!   is a thundering herd against whatever just failed; keep a floor (S7).
//! - Retries share the worker pool with fresh tasks: a retry storm slows new
//!   work and hammers the failing external system. Prefer a finite ceiling
//!   (`max_retry`) plus an alert over near-infinite retries (S27).
//!
//! ```
//! use std::time::Duration;
//! use asynqdeck::server::{Backoff, RetryDelayFunc, RetryPolicy};
//!
//! let policy: RetryDelayFunc = RetryPolicy::new(Backoff::Capped(Duration::from_secs(3600)))
//!     .rule("email:", Backoff::Linear(Duration::from_secs(120)))
//!     .jitter(0.1)
//!     .into();
//! # let _ = policy;
//! ```

use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

use super::task_error::{TaskError, retry_after};
use crate::task::Task;

/// The retry delay function of a server: `(n, error, task) -> delay`, `n` =
/// retries already made (Go `Config.RetryDelayFunc`; S5). It may look at the
/// error's types ([`find_cause`](super::find_cause)), the task type and,
/// sparingly, the payload.
pub type RetryDelayFunc = Arc<dyn Fn(u32, &TaskError, &Task) -> Duration + Send + Sync>;

/// When a failed task runs next: now + `delay_func(retried, err, task)`
/// (`retried` = the message's Retried, a negative one taken as 0), the one
/// place both the worker and the recoverer compute it. A delay too large for
/// a date (e.g. `Duration::MAX` for "never") saturates at the latest
/// representable time instead of panicking. `now` is read after the delay
/// function returns.
pub(crate) fn retry_at(
    delay_func: &RetryDelayFunc,
    retried: i32,
    err: &TaskError,
    task: &Task,
    now: impl FnOnce() -> chrono::DateTime<chrono::Utc>,
) -> chrono::DateTime<chrono::Utc> {
    let delay = delay_func(u32::try_from(retried).unwrap_or(0), err, task);
    let now = now();
    chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

/// Largest `r` of the default curve: `r` is uniform in `0..=29` (wire spec §7.4).
const SIDEKIQ_MAX_R: u64 = 29;

fn sidekiq_secs(n: u32, r: u64) -> u64 {
    let n = u64::from(n);
    n.saturating_pow(4)
        .saturating_add(15)
        .saturating_add(r.saturating_mul(n + 1))
}

/// Go `DefaultRetryDelayFunc` (Sidekiq's curve; S4, wire spec §7.4):
/// `n^4 + 15 + r*(n+1)` whole seconds with `r` uniform in `0..=29`.
///
/// n=0 → 15–44 s; n=4 → 271–416 s; n=10 → 10 015–10 334 s (about 3 h);
/// n=24 → 331 791–332 516 s (about 3 days 20 h). Saturates instead of
/// overflowing for huge `n`. Error and task are ignored.
pub fn default_retry_delay(n: u32, _err: &TaskError, _task: &Task) -> Duration {
    let r = rand::rng().random_range(0..=SIDEKIQ_MAX_R);
    Duration::from_secs(sidekiq_secs(n, r))
}

/// The smallest and largest delay [`default_retry_delay`] can return for `n`
/// (`r` = 0 and `r` = 29). For the dashboard and tests.
pub fn default_retry_delay_bounds(n: u32) -> (Duration, Duration) {
    (
        Duration::from_secs(sidekiq_secs(n, 0)),
        Duration::from_secs(sidekiq_secs(n, SIDEKIQ_MAX_R)),
    )
}

/// [`default_retry_delay`] as a [`RetryDelayFunc`] (a server's default).
pub fn default_retry_delay_fn() -> RetryDelayFunc {
    Arc::new(default_retry_delay)
}

/// One backoff curve (the policies of S10). `n` = retries already made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backoff {
    /// [`default_retry_delay`]: `n^4 + 15 + r*(n+1)` s (S4).
    Sidekiq,
    /// The same delay every time.
    Constant(Duration),
    /// `k * (n + 1)`: with `k` = 2 min gives 2, 4, 6 min for n = 0, 1, 2 (S10).
    Linear(Duration),
    /// `min(default_retry_delay(n), cap)`: keeps the default's growth and
    /// spread, bounds the tail (S8).
    Capped(Duration),
    /// `min(base * factor^n, cap)` (S10).
    Exponential {
        /// Delay for n = 0.
        base: Duration,
        /// Growth per retry.
        factor: u32,
        /// Upper bound.
        cap: Duration,
    },
}

impl Backoff {
    /// The delay of this curve for `n` retries made (before any jitter).
    /// Saturates at [`Duration::MAX`] instead of overflowing.
    pub fn delay(&self, n: u32, err: &TaskError, task: &Task) -> Duration {
        match self {
            Backoff::Sidekiq => default_retry_delay(n, err, task),
            Backoff::Constant(d) => *d,
            Backoff::Linear(k) => k.checked_mul(n.saturating_add(1)).unwrap_or(Duration::MAX),
            Backoff::Capped(cap) => default_retry_delay(n, err, task).min(*cap),
            Backoff::Exponential { base, factor, cap } => exponential(*base, *factor, *cap, n),
        }
    }
}

fn exponential(base: Duration, factor: u32, cap: Duration, n: u32) -> Duration {
    let mut d = base;
    // Stops as soon as the cap is reached, so the loop is short even for huge n.
    for _ in 0..n {
        if d >= cap || d.is_zero() || factor == 1 {
            break;
        }
        d = d.checked_mul(factor).unwrap_or(Duration::MAX);
    }
    d.min(cap)
}

/// A configurable retry policy, usable as a [`RetryDelayFunc`] via
/// [`RetryPolicy::into_fn`] or `From`. Delay for one failure, in order:
/// 1. a [`RetryAfter`](super::RetryAfter) hint anywhere in the error chain is
///    returned exactly, without jitter (S9) — unless
///    [`honour_retry_after(false)`](RetryPolicy::honour_retry_after);
/// 2. otherwise the [`Backoff`] of the rule with the longest prefix of the task
///    type, or the default backoff when no rule matches (S11);
/// 3. then jitter, if configured.
#[derive(Clone, Debug)]
pub struct RetryPolicy {
    default: Backoff,
    rules: Vec<(String, Backoff)>,
    jitter: f64,
    honour_retry_after: bool,
}

impl Default for RetryPolicy {
    /// Sidekiq curve, no rules, no extra jitter, hints honoured.
    fn default() -> Self {
        RetryPolicy::new(Backoff::Sidekiq)
    }
}

impl RetryPolicy {
    /// A policy using `default` for every task type, no jitter, hints honoured.
    pub fn new(default: Backoff) -> Self {
        RetryPolicy {
            default,
            rules: Vec::new(),
            jitter: 0.0,
            honour_retry_after: true,
        }
    }

    /// Uses `backoff` for task types starting with `prefix`; the longest
    /// matching prefix wins. Registering the same prefix again replaces it.
    pub fn rule(mut self, prefix: impl Into<String>, backoff: Backoff) -> Self {
        let prefix = prefix.into();
        self.rules.retain(|(p, _)| *p != prefix);
        self.rules.push((prefix, backoff));
        self
    }

    /// Spreads each computed delay uniformly within ±`fraction` of itself
    /// (0.1 = ±10 %). `fraction` is clamped to `0.0..=1.0` (NaN → 0), so a
    /// delay never goes negative. Not applied to [`RetryAfter`](super::RetryAfter) hints.
    pub fn jitter(mut self, fraction: f64) -> Self {
        self.jitter = if fraction.is_nan() {
            0.0
        } else {
            fraction.clamp(0.0, 1.0)
        };
        self
    }

    /// Whether a [`RetryAfter`](super::RetryAfter) hint overrides the rules (default: yes).
    pub fn honour_retry_after(mut self, honour: bool) -> Self {
        self.honour_retry_after = honour;
        self
    }

    /// The backoff used for `task_type` (longest matching rule prefix, else the default).
    pub fn backoff_for(&self, task_type: &str) -> &Backoff {
        self.rules
            .iter()
            .filter(|(prefix, _)| task_type.starts_with(prefix.as_str()))
            .max_by_key(|(prefix, _)| prefix.len())
            .map(|(_, backoff)| backoff)
            .unwrap_or(&self.default)
    }

    /// The delay before retry number `n + 1` of `task` after `err` (see the type doc).
    pub fn delay(&self, n: u32, err: &TaskError, task: &Task) -> Duration {
        if self.honour_retry_after
            && let Some(hint) = retry_after(err)
        {
            return hint;
        }
        let d = self.backoff_for(task.type_name()).delay(n, err, task);
        apply_jitter(d, self.jitter)
    }

    /// This policy as a [`RetryDelayFunc`].
    pub fn into_fn(self) -> RetryDelayFunc {
        Arc::new(move |n, err, task| self.delay(n, err, task))
    }
}

impl From<RetryPolicy> for RetryDelayFunc {
    fn from(policy: RetryPolicy) -> Self {
        policy.into_fn()
    }
}

fn apply_jitter(d: Duration, fraction: f64) -> Duration {
    if fraction <= 0.0 || d.is_zero() {
        return d;
    }
    let u: f64 = rand::rng().random_range(-fraction..=fraction);
    let secs = (d.as_secs_f64() * (1.0 + u)).max(0.0);
    Duration::try_from_secs_f64(secs).unwrap_or(Duration::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::RetryAfter;
    use std::collections::HashSet;

    fn plain() -> TaskError {
        anyhow::anyhow!("connection refused")
    }

    fn task(t: &str) -> Task {
        Task::new(t, b"{}".to_vec())
    }

    /// S4, wire spec §7.4: bounds of the default curve for n = 0..=24,
    /// including the seed's reference points.
    #[test]
    fn s4_default_delay_bounds_table() {
        for n in 0..=24u32 {
            let (lo, hi) = default_retry_delay_bounds(n);
            let n4 = u64::from(n).pow(4);
            assert_eq!(lo, Duration::from_secs(n4 + 15), "min for n={n}");
            assert_eq!(
                hi,
                Duration::from_secs(n4 + 15 + 29 * (u64::from(n) + 1)),
                "max for n={n}"
            );
        }
        let secs = |n| {
            let (lo, hi) = default_retry_delay_bounds(n);
            (lo.as_secs(), hi.as_secs())
        };
        assert_eq!(secs(0), (15, 44));
        assert_eq!(secs(4), (271, 416));
        assert_eq!(secs(10), (10015, 10334));
        assert_eq!(secs(24), (331791, 332516));
    }

    /// S4: the default delay is random (more than one value in 100 runs),
    /// whole seconds, and always within the bounds.
    #[test]
    fn s4_default_delay_jitter_within_bounds() {
        for n in [0u32, 4, 10, 24] {
            let (lo, hi) = default_retry_delay_bounds(n);
            let mut seen = HashSet::new();
            for _ in 0..100 {
                let d = default_retry_delay(n, &plain(), &task("t"));
                assert!(d >= lo && d <= hi, "n={n}: {d:?} outside {lo:?}..={hi:?}");
                assert_eq!(d.subsec_nanos(), 0);
                seen.insert(d);
            }
            assert!(seen.len() > 1, "n={n}: no spread");
        }
    }

    /// S4: huge n saturates instead of overflowing.
    #[test]
    fn s4_default_delay_saturates() {
        let (lo, hi) = default_retry_delay_bounds(u32::MAX);
        assert_eq!(lo, Duration::from_secs(u64::MAX));
        assert_eq!(hi, Duration::from_secs(u64::MAX));
    }

    /// S10: linear 2 min gives exactly 2, 4, 6 minutes for n = 0, 1, 2.
    #[test]
    fn s10_linear_two_minutes() {
        let f: RetryDelayFunc = RetryPolicy::new(Backoff::Linear(Duration::from_secs(120))).into();
        let got: Vec<u64> = (0..3)
            .map(|n| f(n, &plain(), &task("t")).as_secs())
            .collect();
        assert_eq!(got, vec![120, 240, 360]);
    }

    /// S10: constant and exponential-with-cap curves.
    #[test]
    fn s10_constant_and_exponential() {
        let c = Backoff::Constant(Duration::from_secs(7));
        assert_eq!(c.delay(0, &plain(), &task("t")), Duration::from_secs(7));
        assert_eq!(c.delay(9, &plain(), &task("t")), Duration::from_secs(7));
        let e = Backoff::Exponential {
            base: Duration::from_secs(10),
            factor: 2,
            cap: Duration::from_secs(100),
        };
        let got: Vec<u64> = (0..6)
            .map(|n| e.delay(n, &plain(), &task("t")).as_secs())
            .collect();
        assert_eq!(got, vec![10, 20, 40, 80, 100, 100]);
        assert_eq!(
            e.delay(u32::MAX, &plain(), &task("t")),
            Duration::from_secs(100)
        );
    }

    /// S8: a capped default never exceeds the cap and keeps the default below it.
    #[test]
    fn s8_capped_never_exceeds_cap() {
        let cap = Duration::from_secs(600);
        let b = Backoff::Capped(cap);
        for n in 0..=24 {
            for _ in 0..20 {
                let d = b.delay(n, &plain(), &task("t"));
                assert!(d <= cap, "n={n}: {d:?}");
                let (lo, hi) = default_retry_delay_bounds(n);
                assert!(d >= lo.min(cap) && d <= hi.min(cap));
            }
        }
        assert_eq!(b.delay(24, &plain(), &task("t")), cap);
    }

    /// S9: a RetryAfter(30 s) hint wrapped in context gives exactly 30 s, even
    /// with jitter and rules configured; off when honour_retry_after(false).
    #[test]
    fn s9_retry_after_hint_wins_exactly() {
        let policy = RetryPolicy::new(Backoff::Constant(Duration::from_secs(500)))
            .rule("api:", Backoff::Linear(Duration::from_secs(60)))
            .jitter(0.5);
        let err = anyhow::Error::new(RetryAfter(Duration::from_secs(30)))
            .context("rate limited")
            .context("call api");
        for _ in 0..50 {
            assert_eq!(
                policy.delay(3, &err, &task("api:call")),
                Duration::from_secs(30)
            );
        }
        let off =
            RetryPolicy::new(Backoff::Constant(Duration::from_secs(500))).honour_retry_after(false);
        assert_eq!(
            off.delay(0, &err, &task("api:call")),
            Duration::from_secs(500)
        );
    }

    /// S11: the rule with the longest matching prefix wins; no match uses the default.
    #[test]
    fn s11_longest_prefix_rule_wins() {
        let policy = RetryPolicy::new(Backoff::Constant(Duration::from_secs(1)))
            .rule("email", Backoff::Constant(Duration::from_secs(2)))
            .rule("email:bulk", Backoff::Constant(Duration::from_secs(3)))
            .rule("email:", Backoff::Constant(Duration::from_secs(4)));
        let d = |t: &str| policy.delay(0, &plain(), &task(t)).as_secs();
        assert_eq!(d("email:bulk:weekly"), 3);
        assert_eq!(d("email:send"), 4);
        assert_eq!(d("emailer"), 2);
        assert_eq!(d("sms:send"), 1);
        // Re-registering a prefix replaces it.
        let policy = policy.rule("email:", Backoff::Constant(Duration::from_secs(9)));
        assert_eq!(policy.delay(0, &plain(), &task("email:send")).as_secs(), 9);
    }

    /// S10 with jitter: delays stay within ±fraction, spread, and never go negative.
    #[test]
    fn jitter_stays_within_fraction() {
        let policy = RetryPolicy::new(Backoff::Constant(Duration::from_secs(100))).jitter(0.2);
        let mut seen = HashSet::new();
        for _ in 0..100 {
            let d = policy.delay(0, &plain(), &task("t"));
            assert!(
                d >= Duration::from_secs(80) && d <= Duration::from_secs(120),
                "{d:?}"
            );
            seen.insert(d);
        }
        assert!(seen.len() > 1);
        let wild = RetryPolicy::new(Backoff::Constant(Duration::from_secs(10))).jitter(5.0);
        for _ in 0..100 {
            assert!(wild.delay(0, &plain(), &task("t")) <= Duration::from_secs(20));
        }
        let zero = RetryPolicy::new(Backoff::Constant(Duration::ZERO)).jitter(0.5);
        assert_eq!(zero.delay(0, &plain(), &task("t")), Duration::ZERO);
    }

    /// S5: the default policy equals the Sidekiq curve and a plain context
    /// error without a hint follows the rules.
    #[test]
    fn s5_default_policy_is_sidekiq() {
        let f = RetryPolicy::default().into_fn();
        let err = plain().context("wrapped");
        let (lo, hi) = default_retry_delay_bounds(2);
        let d = f(2, &err, &task("t"));
        assert!(d >= lo && d <= hi);
        let g = default_retry_delay_fn();
        let d = g(0, &err, &task("t"));
        assert!(d >= Duration::from_secs(15) && d <= Duration::from_secs(44));
    }

    /// The shared retry time (worker and recoverer): now + delay, read
    /// after the delay function; the delay function sees Retried (a
    /// negative one as 0); a delay too large for a date saturates.
    #[test]
    fn retry_at_adds_the_delay_and_saturates() {
        let now = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        let f: RetryDelayFunc = Arc::new(move |n, _e, _t| {
            log.lock().unwrap().push(n);
            if n == 7 {
                Duration::MAX
            } else {
                Duration::from_secs(10)
            }
        });
        let err = plain();
        assert_eq!(
            retry_at(&f, 3, &err, &task("t"), || now),
            now + chrono::Duration::seconds(10)
        );
        assert_eq!(
            retry_at(&f, -1, &err, &task("t"), || now),
            now + chrono::Duration::seconds(10)
        );
        assert_eq!(
            retry_at(&f, 7, &err, &task("t"), || now),
            chrono::DateTime::<chrono::Utc>::MAX_UTC
        );
        assert_eq!(*seen.lock().unwrap(), vec![3, 0, 7]);
    }
}
