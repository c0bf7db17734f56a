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
//! dashboard's poll interval, driven by the engine's due index
//! ([`Sampler::run_indexed`]: a queue is sampled when its sizes changed, and
//! at least every [`KEEPALIVE_SAMPLE`]; COMPATIBILITY.md L2); a library
//! user may run [`Sampler::run`] (every queue each interval) with their own
//! [`Server`](crate::Server).

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::ticker::{FirstTick, Ticker};
use crate::broker::{Broker, DueIndex, MAX_SAMPLES, SAMPLE_WINDOW};
use crate::error::Result;

/// Longest the index-driven sampler goes without sampling a queue whose
/// sizes did not change: 5 min, less a per-queue offset of up to half of
/// it (so the keep-alive samples of many queues spread out). The series
/// lives two hours and the growth figures compare samples by time, so a
/// flat series sampled this rarely still gives growth 0 over each span.
pub const KEEPALIVE_SAMPLE: Duration = Duration::from_secs(300);

/// What the index-driven sampler last recorded for a queue.
#[derive(Clone, Copy, Debug)]
struct Recorded {
    retry: u64,
    archived: u64,
    keepalive_at: DateTime<Utc>,
}

fn keepalive_after(queue: &str, now: DateTime<Utc>) -> DateTime<Utc> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    queue.hash(&mut h);
    let half = KEEPALIVE_SAMPLE.as_secs() / 2;
    let secs = KEEPALIVE_SAMPLE.as_secs() - h.finish() % half.max(1);
    now + chrono::Duration::seconds(secs as i64)
}

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

    /// The maintenance engine's sampler (issue 15, COMPATIBILITY.md L2):
    /// every interval (first round once the [`DueIndex`] is ready), samples
    /// only the queues whose retry or archived size in the index differs
    /// from what was last recorded (at most once per interval per queue),
    /// those never sampled by this engine, and those not sampled for
    /// [`KEEPALIVE_SAMPLE`]. Ends with `shutdown`.
    pub async fn run_indexed(self, index: DueIndex, shutdown: CancellationToken) {
        if !index.ready(&shutdown).await {
            return;
        }
        let mut recorded: HashMap<String, Recorded> = HashMap::new();
        let mut ticks = Ticker::new(self.interval, FirstTick::AtOnce, &shutdown);
        while ticks.next().await {
            let now = self.broker.now();
            let entries = index.entries();
            if entries.len() < recorded.len() {
                let listed: std::collections::HashSet<&str> =
                    entries.iter().map(|(q, _)| q.as_str()).collect();
                recorded.retain(|q, _| listed.contains(q.as_str()));
            }
            for (queue, h) in entries {
                let due = recorded.get(&queue).is_none_or(|r| {
                    (r.retry, r.archived) != (h.retry_size, h.archived_size)
                        || r.keepalive_at <= now
                });
                if !due {
                    continue;
                }
                match self
                    .broker
                    .record_queue_sample(&queue, SAMPLE_WINDOW, MAX_SAMPLES)
                    .await
                {
                    Ok((retry, archived)) => {
                        let keepalive_at = keepalive_after(&queue, now);
                        recorded.insert(
                            queue,
                            Recorded {
                                retry: retry.max(0) as u64,
                                archived: archived.max(0) as u64,
                                keepalive_at,
                            },
                        );
                    }
                    Err(e) => {
                        tracing::warn!(queue = %queue, error = %e, "sampler: queue failed");
                    }
                }
                if shutdown.is_cancelled() {
                    break;
                }
            }
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
