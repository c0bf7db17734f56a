//! The tick loop every maintenance component runs (forwarder, janitor,
//! syncer, health check, heartbeat, sampler, queue discovery, and the
//! maintenance engine's own loops), written once.
//!
//! ```text
//! let mut ticks = Ticker::new(interval, FirstTick::AtOnce, &shutdown);
//! while ticks.next().await {
//!     // one tick of work; errors are the caller's to log
//! }
//! // shutdown: the caller's last step (e.g. the heartbeat clears its keys)
//! ```
//!
//! - **Interval:** a plain sleep of `interval` *after* each tick ends, so
//!   the time between tick starts is `interval` plus the tick's own length.
//!   No tick is ever skipped or made up for, there is no jitter, and ticks
//!   never overlap (as Go's loops, which reset a timer after each run).
//! - **First tick:** [`FirstTick::AtOnce`] (heartbeat, sampler, discovery:
//!   the first tick does not even look at the shutdown signal, so a loop
//!   started already cancelled still ticks once) or
//!   [`FirstTick::AfterInterval`] (forwarder, janitor, syncer, health
//!   check: Go's first run is one interval after start).
//! - **Shutdown signal:** the token is looked at before each sleep and wins
//!   over a sleep that ends at the same moment (a `biased` select). A tick
//!   in progress is never interrupted: [`Ticker::next`] returns `false` once
//!   the tick has ended and the token is cancelled.
//! - **Errors and panics:** the ticker sees neither. Each loop logs its own
//!   tick's error and goes on. A panic in a tick is not caught here: it ends
//!   that loop's task (the server ignores the join error); the loops that
//!   call user code catch its panics themselves (the health check's
//!   callback, R3, `panic_guard::call_user`).
//!
//! The recoverer plans its own next look (R8) and the subscriber waits only
//! after a lost subscription; both wait through [`sleep_unless_shutdown`],
//! the same shutdown rule without the fixed interval.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

/// When a [`Ticker`]'s first tick comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstTick {
    /// At once, without looking at the shutdown signal.
    AtOnce,
    /// One interval after start (unless shutdown comes first).
    AfterInterval,
}

/// Paces one maintenance loop (see the module docs).
#[derive(Debug)]
pub(crate) struct Ticker<'a> {
    interval: Duration,
    first_pending: bool,
    shutdown: &'a CancellationToken,
}

impl<'a> Ticker<'a> {
    /// Ticks every `interval` (measured from the end of the previous tick),
    /// the first as `first` says, until `shutdown` is cancelled.
    pub(crate) fn new(
        interval: Duration,
        first: FirstTick,
        shutdown: &'a CancellationToken,
    ) -> Self {
        Ticker {
            interval,
            first_pending: first == FirstTick::AtOnce,
            shutdown,
        }
    }

    /// Waits until the next tick is due: `true` then, `false` once shutdown
    /// is cancelled (the loop ends).
    pub(crate) async fn next(&mut self) -> bool {
        if std::mem::take(&mut self.first_pending) {
            return true;
        }
        sleep_unless_shutdown(self.shutdown, self.interval).await
    }
}

/// Sleeps for `duration` unless `shutdown` is cancelled first: `true` after
/// the whole sleep, `false` (at once when it already is) on shutdown. On a
/// tie shutdown wins.
pub(crate) async fn sleep_unless_shutdown(
    shutdown: &CancellationToken,
    duration: Duration,
) -> bool {
    tokio::select! {
        biased;
        _ = shutdown.cancelled() => false,
        _ = tokio::time::sleep(duration) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn at_once_ticks_first_even_when_already_shut_down() {
        let shutdown = CancellationToken::new();
        shutdown.cancel();
        let mut t = Ticker::new(Duration::from_secs(3600), FirstTick::AtOnce, &shutdown);
        assert!(t.next().await);
        assert!(!t.next().await);
        let mut t = Ticker::new(
            Duration::from_secs(3600),
            FirstTick::AfterInterval,
            &shutdown,
        );
        assert!(!t.next().await);
    }

    #[tokio::test]
    async fn ticks_one_interval_apart_until_shutdown() {
        let shutdown = CancellationToken::new();
        let interval = Duration::from_millis(20);
        let mut t = Ticker::new(interval, FirstTick::AfterInterval, &shutdown);
        let started = Instant::now();
        assert!(t.next().await);
        assert!(t.next().await);
        assert!(started.elapsed() >= 2 * interval);
        let stopper = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            stopper.cancel();
        });
        let mut slow = Ticker::new(
            Duration::from_secs(3600),
            FirstTick::AfterInterval,
            &shutdown,
        );
        assert!(!slow.next().await, "shutdown ends the wait");
    }
}
