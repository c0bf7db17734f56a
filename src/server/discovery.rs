//! Queue discovery (issue 12 R14; asynqdeck only): finds queues that hold
//! tasks but are missing from `asynq:queues` and adds them back, unpaused.
//!
//! Go ≥ 0.25 clients and schedulers remember that they registered a queue
//! and send `SADD asynq:queues` only once per process. When such a queue is
//! deleted while they run, their new tasks arrive in a queue that nobody
//! lists (no server is told to serve it, the dashboard answers 404), and a
//! `paused` flag left by Go's `RemoveQueue` would keep it paused. Go has no
//! remedy. [`QueueDiscovery`] walks the keyspace with `SCAN … COUNT 100`
//! (never `KEYS`), a few steps per tick, so that every Redis call stays
//! O(100) and a full cycle ends within about [`CYCLE_TICKS`] ticks (30 s at
//! the engine's 1 s tick) for up to [`MAX_STEPS_PER_TICK`] × 100 × 30 =
//! 1.5 million keys; beyond that a cycle takes proportionally longer.
// asynq divergence: COMPATIBILITY.md#r14

use std::collections::BTreeSet;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::broker::{Broker, DISCOVERY_SCAN_COUNT};
use crate::error::Result;

/// The maintenance engine's discovery tick: 1 s.
pub const DEFAULT_DISCOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// Ticks one cycle over the keyspace is sized to take: 30.
pub const CYCLE_TICKS: u64 = 30;

/// Most `SCAN` steps in one tick: 500 (50,000 keys examined).
pub const MAX_STEPS_PER_TICK: u64 = 500;

/// What one [`QueueDiscovery::tick`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DiscoveryOutcome {
    /// Queues added back to `asynq:queues`, by name.
    pub restored: Vec<String>,
    /// This tick ended a cycle over the whole keyspace (the next tick
    /// starts a new one).
    pub cycle_done: bool,
}

/// A discovery walk over the keyspace: the `SCAN` cursor and the number of
/// steps per tick live between ticks.
#[derive(Debug)]
pub struct QueueDiscovery {
    broker: Broker,
    cursor: u64,
    /// `None` between cycles: the next tick sizes a new cycle.
    steps_per_tick: Option<u64>,
}

impl QueueDiscovery {
    /// A walk on `broker`, starting a cycle at its first tick.
    pub fn new(broker: Broker) -> Self {
        QueueDiscovery {
            broker,
            cursor: 0,
            steps_per_tick: None,
        }
    }

    /// One tick: at a cycle's start, sizes it from `DBSIZE` (steps per tick
    /// = keys / (100 × [`CYCLE_TICKS`]), between 1 and
    /// [`MAX_STEPS_PER_TICK`]); then that many `SCAN` steps from the kept
    /// cursor; each queue named by a container key found and missing from
    /// `asynq:queues` is added back when it holds tasks, its leftover
    /// `paused` flag deleted ([`Broker::restore_queue`]; logged at info).
    /// On an error the cursor stays where the last good step left it.
    /// Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn tick(&mut self) -> Result<DiscoveryOutcome> {
        let steps = match self.steps_per_tick {
            Some(n) => n,
            None => {
                let keys = self.broker.key_count().await?;
                let per_tick = DISCOVERY_SCAN_COUNT as u64 * CYCLE_TICKS;
                let n = keys.div_ceil(per_tick).clamp(1, MAX_STEPS_PER_TICK);
                self.cursor = 0;
                self.steps_per_tick = Some(n);
                n
            }
        };
        let mut found = BTreeSet::new();
        let mut cycle_done = false;
        for _ in 0..steps {
            let (next, queues) = self.broker.scan_queue_keys(self.cursor).await?;
            found.extend(queues);
            self.cursor = next;
            if next == 0 {
                cycle_done = true;
                self.steps_per_tick = None;
                break;
            }
        }
        let mut out = DiscoveryOutcome {
            restored: Vec::new(),
            cycle_done,
        };
        for queue in self.broker.unlisted_queues(&found).await? {
            if self.broker.restore_queue(&queue).await? {
                tracing::info!(queue = %queue, "queue discovery: a queue holding tasks was missing from asynq:queues; listed it again");
                out.restored.push(queue);
            }
        }
        Ok(out)
    }

    /// Ticks every `interval` (first at once) until `shutdown` is
    /// cancelled; failures are logged and the walk goes on.
    pub async fn run(mut self, interval: Duration, shutdown: CancellationToken) {
        loop {
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "queue discovery: step failed");
            }
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(interval) => {}
            }
        }
        tracing::debug!("queue discovery done");
    }
}
