//! The fetch loop's busy-poll for lease replies: after it sends a lease
//! call, the fetch loop's thread stays awake polling for the reply for up
//! to [`Config::fetch_spin`](super::Config::fetch_spin) instead of sleeping,
//! which spares a Redis on the same host the cost of waking it (why, and
//! the figures: [`fetch_thread`](super::fetch_thread), BENCHMARKS.md).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::Poll;
use std::time::{Duration, Instant};

use crate::broker::Broker;

pub use super::defaults::DEFAULT_FETCH_SPIN;

/// The spin per reply: `configured` when set, else [`DEFAULT_FETCH_SPIN`]
/// for a Redis on this host (`local`) and none for another.
fn spin_budget(configured: Option<Duration>, local: bool) -> Duration {
    configured.unwrap_or(if local {
        DEFAULT_FETCH_SPIN
    } else {
        Duration::ZERO
    })
}

/// Busy-polls a lease call's reply for up to a budget, unless replies have
/// lately taken longer than that (a loaded Redis): then spinning would
/// only burn this host's CPU, which Redis may need.
#[derive(Debug)]
pub(crate) struct ReplySpin {
    budget: Duration,
    /// Moving average of reply times, µs (each new reply weighs 1/8).
    typical_us: AtomicU64,
}

impl ReplySpin {
    /// A spin of at most `budget` per reply (zero: never spin).
    pub fn new(budget: Duration) -> Self {
        ReplySpin {
            budget,
            typical_us: AtomicU64::new(0),
        }
    }

    /// The spin for a connection to Redis per `configured`
    /// ([`Config::fetch_spin`](super::Config::fetch_spin)): the given
    /// duration, or when `None` [`DEFAULT_FETCH_SPIN`] if `broker` reaches
    /// Redis on this host and zero otherwise.
    pub fn for_broker(configured: Option<Duration>, broker: &Broker) -> Self {
        ReplySpin::new(spin_budget(configured, broker.is_local()))
    }

    /// The spin budget per reply.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Awaits `reply`, keeping this thread awake (yielding to the runtime,
    /// which polls its I/O without blocking) until it is ready or the budget
    /// is spent; then waits for it normally.
    pub async fn wait<F: Future>(&self, reply: F) -> F::Output {
        let started = Instant::now();
        let typical = Duration::from_micros(self.typical_us.load(Ordering::Relaxed));
        let spin = if typical < self.budget {
            self.budget
        } else {
            Duration::ZERO
        };
        let mut reply = std::pin::pin!(reply);
        let out = loop {
            if let Poll::Ready(out) = futures_util::poll!(reply.as_mut()) {
                break out;
            }
            if started.elapsed() >= spin {
                break reply.await;
            }
            tokio::task::yield_now().await;
        };
        let took = started.elapsed().as_micros().min(u64::MAX as u128) as u64;
        let old = self.typical_us.load(Ordering::Relaxed);
        self.typical_us
            .store(old - old / 8 + took / 8, Ordering::Relaxed);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// `inner`, counting how often it is polled.
    async fn counted<F: Future>(polls: &AtomicUsize, inner: F) -> F::Output {
        let mut inner = std::pin::pin!(inner);
        std::future::poll_fn(|cx| {
            polls.fetch_add(1, Ordering::SeqCst);
            inner.as_mut().poll(cx)
        })
        .await
    }

    /// Polls of one wait on a reply that takes `took`.
    async fn polls_of(spin: &ReplySpin, took: Duration) -> usize {
        let polls = AtomicUsize::new(0);
        spin.wait(counted(&polls, tokio::time::sleep(took))).await;
        polls.load(Ordering::SeqCst)
    }

    /// `Config::fetch_spin`: `None` spins 1 ms for a Redis on this host and
    /// not at all for another; a set value wins either way.
    #[test]
    fn the_spin_budget_follows_the_config_and_where_redis_is() {
        let ms = Duration::from_millis;
        assert_eq!(spin_budget(None, true), ms(1));
        assert_eq!(spin_budget(None, false), Duration::ZERO);
        assert_eq!(spin_budget(Some(Duration::ZERO), true), Duration::ZERO);
        assert_eq!(spin_budget(Some(ms(3)), false), ms(3));
    }

    #[tokio::test]
    async fn spins_within_the_budget_and_sleeps_without_one() {
        // Spinning polls the reply again after every yield; not spinning
        // polls it once to look, once as it starts to sleep, once woken.
        let spin = ReplySpin::new(Duration::from_millis(50));
        assert!(polls_of(&spin, Duration::from_millis(5)).await > 10);
        let never = ReplySpin::new(Duration::ZERO);
        assert_eq!(polls_of(&never, Duration::from_millis(5)).await, 3);
        // A ready reply is taken at the first poll either way.
        let polls = AtomicUsize::new(0);
        assert_eq!(spin.wait(counted(&polls, async { 7 })).await, 7);
        assert_eq!(polls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn stops_spinning_while_replies_take_longer_than_the_budget() {
        let spin = ReplySpin::new(Duration::from_millis(2));
        // Over budget each: the first still spins (nothing known yet), then
        // the average passes 2 ms (10 ms / 8 = 1.25, then 2.3 ms).
        assert!(polls_of(&spin, Duration::from_millis(10)).await > 10);
        polls_of(&spin, Duration::from_millis(10)).await;
        assert_eq!(polls_of(&spin, Duration::from_millis(10)).await, 3);
        // Quick replies bring the average back under the budget.
        let mut quick = 0;
        while spin.typical_us.load(Ordering::Relaxed) >= 2_000 {
            spin.wait(async {}).await;
            quick += 1;
            assert!(quick < 50, "the average never came down");
        }
        assert!(polls_of(&spin, Duration::from_millis(1)).await > 10);
    }
}
