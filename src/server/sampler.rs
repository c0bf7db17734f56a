//! The sampler: records every queue's retry and archived sizes each poll
//! interval, for the dashboard's outage signal (S14, S29). asynqdeck only;
//! Go asynq has no counterpart.
//!
//! Each tick lists the queues (`SMEMBERS asynq:queues`) and runs one
//! `record_queue_sample` script per queue, which reads the sizes (ZCARD of
//! `asynq:{<q>}:retry` and `asynq:{<q>}:archived`) and appends
//! `<unix s>:<retry>:<archived>` to the ZSET `asynqdeck:{<queue>}:samples`
//! (score = unix s), trimming it to the last hour
//! ([`SAMPLE_WINDOW`]) and at most [`MAX_SAMPLES`] samples in the same
//! write, with a TTL of two hours so the series of a deleted queue
//! disappears. See [`samples_key`](crate::broker::samples_key).
//!
//! `asynqdeck serve` runs it beside the other maintenance loops at the
//! dashboard's poll interval; a library user may run it with their own
//! [`Server`](crate::Server).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::broker::{Broker, MAX_SAMPLES, SAMPLE_WINDOW};
use crate::error::Result;

/// Samples every queue's retry and archived sizes.
#[derive(Debug)]
pub struct Sampler {
    broker: Broker,
    interval: Duration,
}

impl Sampler {
    /// A sampler taking one sample per queue every `interval` (the
    /// dashboard's poll interval, default 5 s; under 1 s is taken as 1 s).
    pub fn new(broker: Broker, interval: Duration) -> Self {
        Sampler {
            broker,
            interval: interval.max(Duration::from_secs(1)),
        }
    }

    /// Samples at once, then every interval, until `shutdown` is cancelled;
    /// a failed tick is logged and the loop goes on.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = Ticker::new(self.interval, FirstTick::AtOnce, &shutdown);
        while ticks.next().await {
            // Failures are logged by `tick`.
            let _ = self.tick().await;
        }
        tracing::debug!("sampler done");
    }

    /// One round: a sample for every queue in `asynq:queues`. Returns how
    /// many queues were sampled. A queue that fails is logged and the others
    /// are still sampled; the first error is returned at the end.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis) (also when the queue
    /// list cannot be read); [`Error::Internal`](crate::Error::Internal).
    pub async fn tick(&self) -> Result<usize> {
        let queues = self.broker.workable_queues().await.inspect_err(|e| {
            tracing::warn!(error = %e, "sampler: cannot list queues");
        })?;
        let mut sampled = 0;
        let mut first_err = None;
        for queue in &queues {
            match self
                .broker
                .record_queue_sample(queue, SAMPLE_WINDOW, MAX_SAMPLES)
                .await
            {
                Ok(_) => sampled += 1,
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "sampler: queue failed");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(sampled),
        }
    }
}
