//! The [`Scheduler`] (Go `asynq.Scheduler`).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::broker::Broker;
use crate::error::{Error, Result};
use crate::task::{EnqueueOptions, Task, TaskInfo};

/// Go's default scheduler heartbeat interval (`defaultHeartbeatInterval`, 10 s).
pub const DEFAULT_SCHEDULER_HEARTBEAT: Duration = Duration::from_secs(10);

/// Called before each enqueue with the task and its options (Go `PreEnqueueFunc`).
pub type PreEnqueueFunc = Arc<dyn Fn(&Task, &EnqueueOptions) + Send + Sync>;
/// Called after each enqueue with its result (Go `PostEnqueueFunc`).
pub type PostEnqueueFunc = Arc<dyn Fn(&Result<TaskInfo>) + Send + Sync>;

/// Scheduler settings (Go `SchedulerOpts`).
#[derive(Clone)]
pub struct SchedulerOpts {
    /// How often the entries are published; they live 2× this. Default 10 s (Go).
    pub heartbeat_interval: Duration,
    /// Zone of specs without a `CRON_TZ=` prefix. Default UTC (Go).
    pub location: Tz,
    /// Go `PreEnqueueFunc`.
    pub pre_enqueue: Option<PreEnqueueFunc>,
    /// Go `PostEnqueueFunc`.
    pub post_enqueue: Option<PostEnqueueFunc>,
    /// Beyond Go: schedulers with the same group share one Redis lease and
    /// only the holder enqueues and publishes. `None` (default): every
    /// scheduler is active, as in Go.
    pub replica_group: Option<String>,
}

impl Default for SchedulerOpts {
    fn default() -> Self {
        SchedulerOpts {
            heartbeat_interval: DEFAULT_SCHEDULER_HEARTBEAT,
            location: Tz::UTC,
            pre_enqueue: None,
            post_enqueue: None,
            replica_group: None,
        }
    }
}

/// One registered entry as the scheduler knows it.
#[derive(Clone, Debug, PartialEq)]
pub struct EntrySnapshot {
    /// Entry id (UUID v4).
    pub id: String,
    /// Cron spec as registered.
    pub spec: String,
    /// The task.
    pub task: Task,
    /// Its options.
    pub options: EnqueueOptions,
    /// Next fire time.
    pub next: Option<DateTime<Utc>>,
    /// Last fire time, `None` before the first.
    pub prev: Option<DateTime<Utc>>,
}

/// Enqueues registered tasks on their cron specs (Go `asynq.Scheduler`).
pub struct Scheduler {
    broker: Broker,
    opts: SchedulerOpts,
    id: String,
}

impl Scheduler {
    /// A scheduler on `broker`; its id is `<host>:<pid>:<uuid v4>` (Go).
    pub fn new(broker: Broker, opts: SchedulerOpts) -> Self {
        Scheduler {
            broker,
            opts,
            id: String::new(),
        }
    }

    /// The scheduler id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Registers `task` with `options` on `cronspec`; returns the entry id
    /// (Go `Register`). Errors: [`Error::InvalidArgument`] for a bad spec.
    pub fn register(&self, cronspec: &str, task: Task, options: EnqueueOptions) -> Result<String> {
        let _ = (cronspec, task, options, &self.broker, &self.opts);
        Err(Error::Internal("not yet implemented".into()))
    }

    /// Removes an entry (Go `Unregister`). Errors: [`Error::InvalidArgument`]
    /// `no scheduler entry found` for an unknown id.
    pub fn unregister(&self, entry_id: &str) -> Result<()> {
        let _ = entry_id;
        Err(Error::Internal("not yet implemented".into()))
    }

    /// The registered entries.
    pub fn entries(&self) -> Vec<EntrySnapshot> {
        Vec::new()
    }

    /// Whether this scheduler enqueues now (always true without a replica group).
    pub fn is_active(&self) -> bool {
        false
    }

    /// Starts firing and publishing (Go `Start`). Errors when already started or shut down.
    pub async fn start(&self) -> Result<()> {
        Err(Error::Internal("not yet implemented".into()))
    }

    /// Stops firing, clears the entries and their history (Go `Shutdown`).
    pub async fn shutdown(&self) {}
}
