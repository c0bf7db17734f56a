//! The [`PeriodicTaskManager`] (Go `PeriodicTaskManager`): keeps a
//! [`Scheduler`]'s entries in step with a config provider.

use std::sync::Arc;
use std::time::Duration;

use super::Scheduler;
use crate::error::{Error, Result};
use crate::task::{EnqueueOptions, Task};

/// Go's default sync interval (`defaultSyncInterval`, 3 min).
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(180);

/// One periodic task (Go `PeriodicTaskConfig`).
#[derive(Clone, Debug, PartialEq)]
pub struct PeriodicTaskConfig {
    /// Cron spec (required, non-empty).
    pub cronspec: String,
    /// The task (required, non-empty type).
    pub task: Task,
    /// Its enqueue options.
    pub options: EnqueueOptions,
}

/// Where the configs come from (Go `PeriodicTaskConfigProvider`).
pub trait PeriodicTaskConfigProvider: Send + Sync {
    /// The current configs. An error keeps the entries as they are.
    fn get_configs(&self) -> Result<Vec<PeriodicTaskConfig>>;
}

/// Keeps a scheduler's entries equal to a provider's configs.
pub struct PeriodicTaskManager {
    scheduler: Arc<Scheduler>,
    provider: Arc<dyn PeriodicTaskConfigProvider>,
    sync_interval: Duration,
}

impl PeriodicTaskManager {
    /// A manager syncing `scheduler` with `provider` every `sync_interval`
    /// (zero: [`DEFAULT_SYNC_INTERVAL`]).
    pub fn new(
        scheduler: Arc<Scheduler>,
        provider: Arc<dyn PeriodicTaskConfigProvider>,
        sync_interval: Duration,
    ) -> Self {
        PeriodicTaskManager {
            scheduler,
            provider,
            sync_interval,
        }
    }

    /// Initial sync, then starts the scheduler and the sync loop.
    pub async fn start(&self) -> Result<()> {
        let _ = (&self.scheduler, &self.provider, self.sync_interval);
        Err(Error::Internal("not yet implemented".into()))
    }

    /// Syncs once now (also what SIGHUP triggers).
    pub async fn sync_now(&self) -> Result<()> {
        Err(Error::Internal("not yet implemented".into()))
    }

    /// Stops the sync loop and shuts the scheduler down.
    pub async fn shutdown(&self) {}
}
