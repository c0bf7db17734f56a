//! Inspects and changes queues and tasks. Go: `inspector.go`.
//!
//! The [`Inspector`] is what the dashboard and operators' scripts use: list
//! queues and their statistics, list tasks per state, run, archive or delete
//! them, pause queues, list servers and scheduler entries. Precondition errors
//! match Go's (spec §9). Every path that writes to the archive trims it to
//! 10,000 tasks and 90 days and deletes the trimmed tasks' hashes (S16).
//!
//! Files: `queues.rs` (queue list, info, history, groups, pause, delete),
//! `tasks.rs` (listing, lookup, run/archive/delete, cancel), `servers.rs`
//! (servers with their workers, scheduler entries and events), `info.rs`
//! (Redis `INFO` and cluster facts), `left_behind.rs` (left-behind task
//! hashes: check and bounded sweep), `samples.rs` (the outage signal: retry
//! growth from asynqdeck's own samples).

mod info;
mod left_behind;
mod queues;
mod samples;
mod servers;
mod tasks;

pub use crate::broker::SweepCount;
pub use info::{ClusterInfo, QueueLocation, RedisInfo, parse_info};
pub use queues::{DailyStats, GroupInfo, QueueInfo, QueueStatsRow, StatsHints};
pub use samples::{
    FAST_GROWTH_MIN_PERCENT, FAST_GROWTH_MIN_TASKS, FAST_GROWTH_WINDOW, GROWTH_WINDOWS, Growth,
    QueueSample, RetryGrowth, retry_growth,
};
pub use servers::{
    SchedulerEnqueueEvent, SchedulerEntriesPage, SchedulerEntry, ServerInfo, WorkerInfo,
};
pub use tasks::{Page, TaskRow};

use crate::broker::Broker;
use crate::error::Result;

/// Reads and changes asynq state in one Redis (Go `asynq.Inspector`).
#[derive(Clone, Debug)]
pub struct Inspector {
    broker: Broker,
}

impl Inspector {
    /// Connects to Redis at `url` (`redis://host:port/db`). Errors with
    /// [`Error::Redis`](crate::Error::Redis) when Redis cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        Ok(Inspector {
            broker: Broker::connect(url).await?,
        })
    }

    /// An inspector on an existing broker connection.
    pub fn from_broker(broker: Broker) -> Self {
        Inspector { broker }
    }

    /// The broker this inspector uses.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }
}
