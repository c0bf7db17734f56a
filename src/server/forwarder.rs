//! The forwarder: moves due scheduled and retry tasks to pending (Go
//! `forwarder.go`; wire spec §6.11, §7.6; seed S12, S7).
//!
//! Retry and scheduled are twins (S12): one poll covers both sorted sets of
//! every server queue. A zero retry delay makes a task due at the next poll
//! (S7). The first poll runs one interval after start, as Go's.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::ticker::{FirstTick, Ticker};
use crate::broker::{Broker, DueIndex, score_time};
use crate::error::Result;

/// Longest the index-driven forwarder sleeps before it compares the index
/// with the broker's clock again (a simulated clock that jumps is followed
/// within it): 1 s.
pub const INDEX_RECHECK: Duration = Duration::from_secs(1);

pub use super::defaults::DEFAULT_FORWARD_INTERVAL;

/// Polls the scheduled and retry sets of the server's queues.
#[derive(Debug)]
pub struct Forwarder {
    broker: Broker,
    queues: Vec<String>,
    interval: Duration,
}

impl Forwarder {
    /// A forwarder for `queues`, polling every `interval` (Go default
    /// [`DEFAULT_FORWARD_INTERVAL`]). Go `newForwarder`.
    pub fn new(broker: Broker, queues: Vec<String>, interval: Duration) -> Self {
        Forwarder {
            broker,
            queues,
            interval,
        }
    }

    /// Polls every `interval` (first poll after one interval) until
    /// `shutdown` is cancelled; a failed poll is logged and the loop goes on.
    /// Go `forwarder.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = Ticker::new(self.interval, FirstTick::AfterInterval, &shutdown);
        while ticks.next().await {
            // Failures are logged per queue by `tick`.
            let _ = self.tick().await;
        }
        tracing::debug!("forwarder done");
    }

    /// One poll: [`Broker::forward_if_ready`] for each queue, in order.
    /// Returns how many tasks moved in all. A queue that fails is logged and
    /// the others are still polled; the first error is returned at the end.
    /// Go `forwarder.exec`.
    pub async fn tick(&self) -> Result<u64> {
        let mut moved = 0;
        let mut first_err = None;
        for queue in &self.queues {
            match self.broker.forward_if_ready(queue).await {
                Ok(n) => moved += n,
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "forwarder: queue failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(moved),
        }
    }
}

/// The maintenance engine's forwarder (issue 15, COMPATIBILITY.md L1):
/// waits until the [`DueIndex`] says a queue's earliest scheduled or retry
/// task is due (its score at or before the broker clock's unix second),
/// then runs [`Broker::forward_if_ready`] for those queues only and marks
/// them [`DueIndex::touched`]. It wakes at the earliest due time, at every
/// change of the index, and at least every [`INDEX_RECHECK`] (memory only,
/// no Redis call), so a due task moves within about a second of its time
/// (Go: up to the 5 s interval). A queue whose forward failed is left alone
/// for `interval`. As Go's, the first forward comes one `interval` after
/// start. Ends with `shutdown`.
pub async fn run_indexed(
    broker: Broker,
    index: DueIndex,
    interval: Duration,
    shutdown: CancellationToken,
) {
    let retry_after = interval;
    tokio::select! {
        _ = shutdown.cancelled() => return,
        _ = tokio::time::sleep(interval) => {}
    }
    if !index.ready(&shutdown).await {
        return;
    }
    let mut changes = index.subscribe();
    let mut held: HashMap<String, DateTime<Utc>> = HashMap::new();
    loop {
        let now = broker.now();
        held.retain(|_, until| *until > now);
        let secs = now.timestamp() as f64;
        let due =
            index.select(|q, h| !held.contains_key(q) && h.forward_at().is_some_and(|t| t <= secs));
        if !due.is_empty() {
            for queue in &due {
                if let Err(e) = broker.forward_if_ready(queue).await {
                    tracing::warn!(queue = %queue, error = %e, "forwarder: queue failed");
                    let wait = chrono::Duration::from_std(retry_after).unwrap_or_default();
                    held.insert(queue.clone(), broker.now() + wait);
                }
                if shutdown.is_cancelled() {
                    break;
                }
            }
            index.touched(&due);
            continue;
        }
        let next = index
            .earliest(|q, h| h.forward_at().filter(|_| !held.contains_key(q)))
            .map(score_time)
            .into_iter()
            .chain(held.values().copied())
            .min();
        let wait = next
            .map_or(INDEX_RECHECK, |t| (t - now).to_std().unwrap_or_default())
            .clamp(Duration::from_millis(10), INDEX_RECHECK);
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(wait) => {}
            r = changes.changed() => if r.is_err() { break },
        }
    }
    tracing::debug!("forwarder done");
}
