//! Inspects and changes queues and tasks. Go: `inspector.go`.
//!
//! The [`Inspector`] is what the dashboard and operators' scripts use: list
//! queues and their statistics, list tasks per state, run, archive or delete
//! them, pause queues, list servers and scheduler entries. Precondition errors
//! match Go's (spec §9). Every path that writes to the archive trims it to
//! 10,000 tasks and 90 days and deletes the trimmed tasks' hashes (S16).
//! Every method taking a queue name checks it first with
//! [`Broker::check_queue_name`](crate::broker::Broker::check_queue_name):
//! a blank name is refused even where Go does not check
//! (`COMPATIBILITY.md#q1`), and on a Redis Cluster so is a name whose keys
//! cannot share a slot (`COMPATIBILITY.md#k2`).
//!
//! Files: `queues.rs` (queue list, info, history, groups, pause, delete),
//! `stats.rs` (many queues' statistics at once, with the hints a dashboard
//! keeps between reads, and memory estimates), `snapshot.rs` (the
//! dashboard's snapshot of every queue: reading it, adding growth and
//! memory),
//! `tasks.rs` (listing, lookup, run/archive/delete, cancel), `servers.rs`
//! (servers with their workers, scheduler entries and events),
//! `run_entry.rs` (a scheduler entry's "Run now"), `info.rs`
//! (Redis `INFO` and cluster facts, every node of a Cluster), `cluster.rs`
//! (a queue's hash slot and nodes, Go `ClusterKeySlot`/`ClusterNodes`),
//! `left_behind.rs` (left-behind task
//! hashes: check and bounded sweep), `samples.rs` (the outage signal: retry
//! growth from asynqdeck's own samples), `actions.rs` (which actions a
//! task state allows, one table; one task, a list of ids, a whole
//! container), `tab.rs` (what a queue tab shows: page, filters, bounded
//! scan, summary, the join with active workers), `errgroups.rs` (LastErr
//! grouping and its verdict), `signatures.rs` (error signatures: type +
//! normalised LastErr with first / last seen and 1 h trend),
//! `retry_pressure.rs` (retries due in the next 1 / 5 / 60 min), `search_query.rs` and
//! `search.rs` (search across queues and states: the query language, the
//! bounded scan). The queue data types ([`QueueInfo`],
//! [`DailyStats`], [`GroupInfo`]) and [`Page`] are the broker's,
//! re-exported here.

mod actions;
mod alert_claims;
pub mod attention;
mod audit;
mod cluster;
pub mod errgroups;
mod export;
mod info;
pub mod jobs;
mod left_behind;
mod memory_cache;
mod queues;
mod retry_pressure;
mod run_entry;
mod samples;
mod scheduler_groups;
mod search;
mod search_jobs;
mod search_query;
mod servers;
pub mod signatures;
mod snapshot;
mod stats;
mod tab;
mod tasks;

pub use crate::broker::Page;
pub use crate::broker::SweepCount;
pub use crate::broker::{AlertClaim, ClaimRequest};
pub use crate::broker::{BudgetUsage, DailyStats, GroupInfo, QueueInfo, RedisBudget};
pub use crate::broker::{RETRY_PRESSURE_COMMANDS, RetryPressure};
pub use actions::{BATCH_CONCURRENCY, TaskAction};
pub use attention::{Finding, Kind as FindingKind, Severity, Target as FindingTarget};
pub use audit::{AUDIT_PAGE_MAX, AuditEntry, AuditFilter, AuditPage};
pub use cluster::ClusterNode;
pub use errgroups::ErrGroup;
pub use export::{EXPORT_CHUNK, EXPORT_CHUNK_BYTES, ExportRequest};
pub use info::{ClusterInfo, NodeInfo, QueueLocation, RedisInfo, SentinelStatus, parse_info};
pub use left_behind::SweepBudget;
pub use memory_cache::{CachedMemory, MEMORY_CACHE_TTL};
pub use queues::{GROUPS_PAGE_MAX, GroupsPage};
pub use samples::{
    FAST_GROWTH_MIN_PERCENT, FAST_GROWTH_MIN_TASKS, FAST_GROWTH_WINDOW, GROWTH_WINDOWS, Growth,
    QueueSample, RetryGrowth, retry_growth,
};
pub use scheduler_groups::ReplicaGroup;
pub use search::{
    SEARCH_BUDGET, SEARCH_MAX_READS, SEARCH_STEP_BYTES, SearchCursor, SearchHit, SearchPage,
};
pub use search_jobs::{SEARCH_JOB_TABS, SEARCH_PREVIEW_STEPS, SearchJobPlan};
pub use search_query::{SEARCH_STATES, SearchQuery};
pub use servers::{
    SchedulerEnqueueEvent, SchedulerEntriesPage, SchedulerEntry, ServerInfo, ServersPage,
    WorkerInfo,
};
pub use signatures::ErrSignature;
pub use snapshot::{GrowthSamples, MemoryEstimate, QueueRow, Snapshot};
pub use stats::{QueueStatsRow, StatsHints};
pub use tab::{
    IdLookup, PICKER_GROUPS, SCAN_BYTES, SCAN_LIMIT, SCAN_PAGE, SCANS_AT_ONCE, ScanCount,
    TabFilter, TabRead, TabRequest, TabSummary, WorkerTimes, state_count,
};
pub use tasks::TaskRow;

use crate::broker::Broker;
use crate::error::Result;

/// Reads and changes asynq state in one Redis (Go `asynq.Inspector`).
#[derive(Clone, Debug)]
pub struct Inspector {
    broker: Broker,
    sweep_budget: SweepBudget,
    memory_cache: memory_cache::MemoryCache,
    jobs: jobs::JobConfig,
}

impl Inspector {
    /// Connects to Redis at `url` (`redis://host:port/db`). Errors with
    /// [`Error::Redis`](crate::Error::Redis) when Redis cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        Ok(Inspector::from_broker(Broker::connect(url).await?))
    }

    /// An inspector on an existing broker connection.
    pub fn from_broker(broker: Broker) -> Self {
        Inspector {
            broker,
            sweep_budget: SweepBudget::default(),
            memory_cache: Default::default(),
            jobs: jobs::JobConfig::default(),
        }
    }

    /// This inspector with `budget` for each slice of the left-behind sweep
    /// ([`Inspector::left_behind_slice`]; default [`SweepBudget::default`]).
    /// Tests set a small one to make several slices out of a few keys.
    pub fn with_sweep_budget(mut self, budget: SweepBudget) -> Self {
        self.sweep_budget = budget;
        self
    }

    /// This inspector with `config` for background jobs (default
    /// [`jobs::JobConfig::default`]). Tests set tiny chunks.
    pub fn with_job_config(mut self, config: jobs::JobConfig) -> Self {
        self.jobs = config;
        self
    }

    /// How background jobs run.
    pub fn job_config(&self) -> jobs::JobConfig {
        self.jobs
    }

    /// The budget of one left-behind sweep slice.
    pub fn sweep_budget(&self) -> SweepBudget {
        self.sweep_budget
    }

    /// The broker this inspector uses.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// The current time (UTC) of the broker's clock: the system clock, or
    /// the simulated clock a test injected with `Broker::with_clock`.
    /// Pages use it for "ago"/"in" columns so they agree with the engine.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.broker.now()
    }
}
