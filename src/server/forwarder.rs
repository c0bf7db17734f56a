//! The forwarder: moves due scheduled and retry tasks to pending (Go
//! `forwarder.go`; wire spec §6.11, §7.6; seed S12, S7).
//!
//! Retry and scheduled are twins (S12): one poll covers both sorted sets of
//! every server queue. A zero retry delay makes a task due at the next poll
//! (S7). The first poll runs one interval after start, as Go's.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::broker::Broker;
use crate::error::Result;

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
