//! The fetch loop's own thread, and its busy-poll for lease replies.
//!
//! Why: with Redis on the same host, most of what a lease call costs Redis
//! beyond the script is waking the worker that waits for the reply: Redis's
//! `write` of the reply finds the worker's thread asleep and the kernel
//! wakes it on Redis's time (on the 2-vCPU bench VM ≈ 30–50 µs of Redis
//! kernel CPU per round trip with a sleeping client, ≈ 10 µs with a
//! spinning one; BENCHMARKS.md). So the fetch loop runs on a thread of its
//! own (a one-worker tokio runtime that also owns the loop's Redis
//! connection) and, after sending a lease call, keeps that thread awake
//! polling for the reply for up to [`Config::fetch_spin`] instead of
//! sleeping. On a shared multi-thread runtime that would not work: another
//! worker thread, asleep in `epoll_wait`, would still be the one Redis
//! wakes.
//!
//! Handlers still run on the caller's runtime: workers are spawned there,
//! and the inline first polls of quick task types
//! ([`inline_start`](super::inline_start)) enter its context.
//!
//! [`Config::fetch_spin`]: super::Config::fetch_spin

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

use super::processor::{Processor, RunControl};
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

/// Runs `processor` (see [`Processor::run`]) on a thread of its own with a
/// one-worker runtime and a Redis connection of its own; workers are
/// spawned on the calling runtime. Completes when the loop has ended.
/// Falls back to a task on the calling runtime (and the shared connection)
/// when the thread or its runtime cannot be made, and to the shared
/// connection when its own cannot be opened. Dropped before it completes
/// (the calling runtime shuts down), it abandons the loop
/// ([`RunControl::abandon`]): no worker can run any more.
pub(crate) async fn run_processor(processor: Processor, ctl: RunControl) {
    tracing::debug!(spin = ?processor.spin.budget(), "fetch loop starting on its own thread");
    // Dropped in reverse order: abandon is set before stop is seen.
    let _stop_on_drop = ctl.stop.clone().drop_guard();
    let _abandon_on_drop = ctl.abandon.clone().drop_guard();
    // The thread takes the processor out; when it cannot start, it is
    // still here for the fallback.
    let slot = Arc::new(Mutex::new(Some(processor)));
    // `Some` back: the thread could not run it.
    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel::<Option<Processor>>();
    let (thread_slot, thread_ctl) = (slot.clone(), ctl.clone());
    let spawned = std::thread::Builder::new()
        .name("asynqdeck-fetch".into())
        .spawn(move || {
            let Some(processor) = thread_slot.lock().expect("processor slot").take() else {
                return;
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("asynqdeck-fetch")
                .enable_all()
                .build();
            let rt = match rt {
                Ok(rt) => rt,
                Err(err) => {
                    tracing::warn!(%err, "no runtime for the fetch loop; it runs on the server's");
                    let _ = ended_tx.send(Some(processor));
                    return;
                }
            };
            rt.block_on(async move {
                // Spawned, not run by block_on: the loop must run on the
                // runtime's worker, the thread that polls its I/O.
                let _ = tokio::spawn(run_on_own_connection(processor, thread_ctl)).await;
            });
            let _ = ended_tx.send(None);
        });
    let fallback = match spawned {
        // A panic on the thread (Err) ends the loop as a panicking task would.
        Ok(_) => ended_rx.await.ok().flatten(),
        Err(err) => {
            tracing::warn!(%err, "no thread for the fetch loop; it runs on the server's runtime");
            slot.lock().expect("processor slot").take()
        }
    };
    if let Some(processor) = fallback {
        processor.run(ctl).await;
    }
}

/// Runs `processor` on a connection opened on this runtime (or the shared
/// one when that fails).
async fn run_on_own_connection(mut processor: Processor, ctl: RunControl) {
    match processor.broker.own_connection().await {
        Ok(own) => processor.broker = own,
        Err(err) => {
            tracing::warn!(%err, "no connection of its own for the fetch loop; sharing the server's");
        }
    }
    processor.run(ctl).await;
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
