//! The janitor: deletes completed tasks whose retention ended (Go
//! `janitor.go`; wire spec §6.14, §7.6).
//!
//! The first sweep runs one interval after start, as Go's.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::broker::{Broker, DueIndex};
use crate::error::Result;

pub use super::defaults::{DEFAULT_JANITOR_BATCH_SIZE, DEFAULT_JANITOR_INTERVAL};

/// Sweeps the completed sets of the server's queues.
#[derive(Debug)]
pub struct Janitor {
    broker: Broker,
    queues: Vec<String>,
    interval: Duration,
    batch_size: usize,
}

impl Janitor {
    /// A janitor for `queues`, sweeping every `interval` and deleting
    /// `batch_size` tasks per script call (Go defaults
    /// [`DEFAULT_JANITOR_INTERVAL`], [`DEFAULT_JANITOR_BATCH_SIZE`]; a
    /// batch of 0 is taken as 1). Go `newJanitor`.
    pub fn new(broker: Broker, queues: Vec<String>, interval: Duration, batch_size: usize) -> Self {
        Janitor {
            broker,
            queues,
            interval,
            batch_size: batch_size.max(1),
        }
    }

    /// Sweeps every `interval` (first sweep after one interval) until
    /// `shutdown` is cancelled; a failed sweep is logged and the loop goes
    /// on. Go `janitor.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = Ticker::new(self.interval, FirstTick::AfterInterval, &shutdown);
        while ticks.next().await {
            // Failures are logged per queue by `tick`.
            let _ = self.tick().await;
        }
        tracing::debug!("janitor done");
    }

    /// One sweep: [`Broker::delete_expired_completed`] for each queue.
    /// Returns how many tasks were deleted in all. A queue that fails is
    /// logged and the others are still swept; the first error is returned at
    /// the end. Go `janitor.exec`.
    pub async fn tick(&self) -> Result<u64> {
        let mut deleted = 0;
        let mut first_err = None;
        for queue in &self.queues {
            match self
                .broker
                .delete_expired_completed(queue, self.batch_size)
                .await
            {
                Ok(n) => deleted += n,
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "janitor: queue failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(deleted),
        }
    }
}

/// The maintenance engine's janitor (issue 15, COMPATIBILITY.md L1): every
/// `interval` (first sweep after one interval, as Go), sweeps only the
/// queues whose earliest completed task expired by the broker's clock per
/// the [`DueIndex`], and marks them [`DueIndex::touched`]. No Redis call
/// when nothing expired. Ends with `shutdown`.
pub async fn run_indexed(
    broker: Broker,
    index: DueIndex,
    interval: Duration,
    batch_size: usize,
    shutdown: CancellationToken,
) {
    let mut ticks = Ticker::new(interval, FirstTick::AfterInterval, &shutdown);
    while ticks.next().await {
        let secs = broker.now().timestamp() as f64;
        let due = index.select(|_, h| h.completed.is_some_and(|t| t <= secs));
        if due.is_empty() {
            continue;
        }
        let _ = Janitor::new(broker.clone(), due.clone(), interval, batch_size)
            .tick()
            .await;
        index.touched(&due);
    }
    tracing::debug!("janitor done");
}
