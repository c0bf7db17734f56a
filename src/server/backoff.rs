//! When the fetch loop tries a queue again after a failed lease call
//! (issue 12 R5; COMPATIBILITY.md#r5).
//!
//! A broken connection (Redis restarted, `CLIENT KILL`, a network blip) is
//! retried at once: the connection manager reconnects, and the retry waits
//! for that instead of a fixed pause. Failures in a row then back off, 10
//! ms doubling up to 1 s, each delay with jitter (a uniform pick in its
//! upper half) so that many workers do not retry in step; one success
//! resets the schedule. A queue whose calls keep failing (a key of the
//! wrong type) is so tried about once a second, while the other queues go
//! on (`processor.rs`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;

/// The delay after the second failure in a row (the first is retried at once).
pub const FIRST_BACKOFF: Duration = Duration::from_millis(10);
/// The longest delay between two tries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Failures in a row of one queue's lease calls, and the delay before the
/// next try.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Backoff {
    failures: u32,
}

impl Backoff {
    /// The longest delay after `failures` failures in a row: zero after the
    /// first, then [`FIRST_BACKOFF`] doubling per failure, at most
    /// [`MAX_BACKOFF`].
    pub fn ceiling(failures: u32) -> Duration {
        match failures {
            0 | 1 => Duration::ZERO,
            n => FIRST_BACKOFF
                .saturating_mul(1u32 << (n - 2).min(16))
                .min(MAX_BACKOFF),
        }
    }

    /// Records one more failure and returns the delay before the next try:
    /// a uniform pick in [ceiling / 2, ceiling] (zero for the first).
    pub fn fail(&mut self, rng: &mut impl Rng) -> Duration {
        self.failures = self.failures.saturating_add(1);
        let ceiling = Self::ceiling(self.failures);
        if ceiling.is_zero() {
            return ceiling;
        }
        let half = ceiling / 2;
        half + rng.random_range(Duration::ZERO..=ceiling - half)
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// The queues whose last lease call failed, each with its [`Backoff`] and
/// the instant it may be tried again. Shared by the fetch loop's calls.
#[derive(Debug, Default)]
pub struct FailingQueues {
    map: Mutex<HashMap<String, (Instant, Backoff)>>,
}

impl FailingQueues {
    /// Whether `queue` must not be tried at `now` (its retry instant is ahead).
    pub fn is_waiting(&self, queue: &str, now: Instant) -> bool {
        let map = self.map.lock().expect("failing queues");
        map.get(queue).is_some_and(|(until, _)| *until > now)
    }

    /// Records a failed call on `queue` at `now`; returns the delay before
    /// it is tried again and how many calls failed in a row.
    pub fn failed(&self, queue: &str, now: Instant) -> (Duration, u32) {
        let mut map = self.map.lock().expect("failing queues");
        let (until, backoff) = map
            .entry(queue.to_string())
            .or_insert((now, Backoff::default()));
        let delay = backoff.fail(&mut rand::rng());
        *until = now + delay;
        (delay, backoff.failures())
    }

    /// Records a call on `queue` that worked: its schedule starts over.
    pub fn succeeded(&self, queue: &str) {
        let mut map = self.map.lock().expect("failing queues");
        if !map.is_empty() {
            map.remove(queue);
        }
    }

    /// The earliest instant a failing queue may be tried again, if any.
    pub fn next_try(&self) -> Option<Instant> {
        let map = self.map.lock().expect("failing queues");
        map.values().map(|(until, _)| *until).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    const MS: Duration = Duration::from_millis(1);

    /// R5: at once, then 10 ms doubling up to 1 s, jittered within the
    /// upper half; a success starts over.
    #[test]
    fn r5_backoff_retries_at_once_then_doubles_from_10_ms_to_1_s() {
        let ceilings: Vec<Duration> = (1..=10).map(Backoff::ceiling).collect();
        assert_eq!(
            ceilings,
            [0, 10, 20, 40, 80, 160, 320, 640, 1000, 1000].map(|n| MS * n)
        );
        assert_eq!(Backoff::ceiling(u32::MAX), MAX_BACKOFF);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let mut b = Backoff::default();
            for n in 1..=12 {
                let d = b.fail(&mut rng);
                let c = Backoff::ceiling(n);
                assert!(
                    d >= c / 2 && d <= c,
                    "failure {n}: {d:?} not in [{:?}, {c:?}]",
                    c / 2
                );
            }
        }
        let failing = FailingQueues::default();
        let t0 = Instant::now();
        assert_eq!(failing.failed("q", t0), (Duration::ZERO, 1));
        assert!(!failing.is_waiting("q", t0), "the first retry is at once");
        let (d, n) = failing.failed("q", t0);
        assert!((5 * MS..=10 * MS).contains(&d) && n == 2, "{d:?} {n}");
        assert!(failing.is_waiting("q", t0) && !failing.is_waiting("other", t0));
        assert_eq!(failing.next_try(), Some(t0 + d));
        failing.succeeded("q");
        assert_eq!(failing.next_try(), None);
        assert_eq!(failing.failed("q", t0), (Duration::ZERO, 1), "reset");
    }
}
