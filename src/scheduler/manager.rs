//! The [`PeriodicTaskManager`] (Go `PeriodicTaskManager`,
//! `periodic_task_manager.go`): keeps a [`Scheduler`]'s entries equal to
//! what a [`PeriodicTaskConfigProvider`] returns. Each config is known by a
//! hash of its spec, type, payload and sorted option strings (as Go's
//! `PeriodicTaskConfig.hash`): a sync unregisters the entries whose config
//! is gone and registers the new ones; unchanged entries keep running (and
//! keep their entry ids and fire times).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use md5::{Digest, Md5};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::{Scheduler, option_strings};
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

impl PeriodicTaskConfig {
    /// The config's identity: hex digest of spec, type, payload and the
    /// sorted option strings (Go hashes the same parts with SHA-256; the
    /// digest never leaves the process).
    pub fn hash(&self) -> String {
        let mut h = Md5::new();
        h.update(self.cronspec.as_bytes());
        h.update([0]);
        h.update(self.task.type_name().as_bytes());
        h.update([0]);
        h.update(self.task.payload());
        let mut opts = option_strings(&self.options);
        opts.sort();
        for o in opts {
            h.update([0]);
            h.update(o.as_bytes());
        }
        hex::encode(h.finalize())
    }

    fn validate(&self) -> Result<()> {
        if self.cronspec.is_empty() {
            return Err(Error::InvalidArgument(
                "PeriodicTaskConfig.Cronspec cannot be empty".into(),
            ));
        }
        if self.task.type_name().trim().is_empty() {
            return Err(Error::InvalidArgument(
                "PeriodicTaskConfig.Task cannot be nil".into(),
            ));
        }
        Ok(())
    }
}

/// Where the configs come from (Go `PeriodicTaskConfigProvider`).
pub trait PeriodicTaskConfigProvider: Send + Sync {
    /// The current configs. An error keeps the entries as they are.
    fn get_configs(&self) -> Result<Vec<PeriodicTaskConfig>>;
}

/// What one sync changed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Entry ids registered.
    pub added: Vec<String>,
    /// Entry ids unregistered.
    pub removed: Vec<String>,
    /// Configs the scheduler refused (e.g. a bad cron spec), with the reason.
    pub refused: Vec<String>,
}

/// Keeps a scheduler's entries equal to a provider's configs.
pub struct PeriodicTaskManager {
    scheduler: Scheduler,
    provider: Arc<dyn PeriodicTaskConfigProvider>,
    sync_interval: Duration,
    /// Config hash → entry id.
    registered: Mutex<BTreeMap<String, String>>,
    wake: Arc<Notify>,
    stop: CancellationToken,
    syncer: tokio::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl PeriodicTaskManager {
    /// A manager syncing `scheduler` with `provider` every `sync_interval`
    /// (zero: [`DEFAULT_SYNC_INTERVAL`], Go's 3 min).
    pub fn new(
        scheduler: Scheduler,
        provider: Arc<dyn PeriodicTaskConfigProvider>,
        sync_interval: Duration,
    ) -> Arc<Self> {
        Arc::new(PeriodicTaskManager {
            scheduler,
            provider,
            sync_interval: if sync_interval.is_zero() {
                DEFAULT_SYNC_INTERVAL
            } else {
                sync_interval
            },
            registered: Mutex::new(BTreeMap::new()),
            wake: Arc::new(Notify::new()),
            stop: CancellationToken::new(),
            syncer: tokio::sync::Mutex::new(None),
        })
    }

    /// The scheduler it manages.
    pub fn scheduler(&self) -> &Scheduler {
        &self.scheduler
    }

    /// Initial sync, then starts the scheduler and the sync loop (Go
    /// `Start`). Errors: the provider's error or an invalid config
    /// (`initial call to GetConfigs ...`), or the scheduler's start error.
    pub async fn start(self: &Arc<Self>) -> Result<()> {
        self.sync_now().map_err(|e| match e {
            Error::InvalidArgument(m) => {
                Error::InvalidArgument(format!("initial call to GetConfigs failed: {m}"))
            }
            other => other,
        })?;
        self.scheduler.start().await?;
        let me = self.clone();
        *self.syncer.lock().await = Some(tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = me.stop.cancelled() => break,
                    _ = me.wake.notified() => {}
                    _ = tokio::time::sleep(me.sync_interval) => {}
                }
                if let Err(e) = me.sync_now() {
                    tracing::error!(error = %e, "failed to sync periodic task configs");
                }
            }
        }));
        Ok(())
    }

    /// Asks the sync loop to sync now (what SIGHUP or a changed file does).
    pub fn request_sync(&self) {
        self.wake.notify_one();
    }

    /// Syncs once now (Go `sync`): reads the configs; an error or an
    /// invalid config leaves every entry as it is.
    pub fn sync_now(&self) -> Result<SyncReport> {
        let configs = self.provider.get_configs()?;
        for c in &configs {
            c.validate()?;
        }
        let wanted: BTreeMap<String, &PeriodicTaskConfig> =
            configs.iter().map(|c| (c.hash(), c)).collect();
        let mut registered = self.registered.lock().expect("registered lock");
        let mut report = SyncReport::default();
        let gone: Vec<String> = registered
            .keys()
            .filter(|h| !wanted.contains_key(*h))
            .cloned()
            .collect();
        for hash in gone {
            if let Some(id) = registered.remove(&hash) {
                match self.scheduler.unregister(&id) {
                    Ok(()) => report.removed.push(id),
                    Err(e) => {
                        tracing::error!(entry = %id, error = %e, "failed to unregister periodic task")
                    }
                }
            }
        }
        for (hash, c) in wanted {
            if registered.contains_key(&hash) {
                continue;
            }
            match self
                .scheduler
                .register(&c.cronspec, c.task.clone(), c.options.clone())
            {
                Ok(id) => {
                    tracing::info!(cronspec = %c.cronspec, task = %c.task.type_name(), entry = %id, "registered periodic task");
                    registered.insert(hash, id.clone());
                    report.added.push(id);
                }
                Err(e) => {
                    tracing::error!(cronspec = %c.cronspec, task = %c.task.type_name(), error = %e, "failed to register periodic task");
                    report
                        .refused
                        .push(format!("{} {}: {e}", c.cronspec, c.task.type_name()));
                }
            }
        }
        Ok(report)
    }

    /// Stops the sync loop and shuts the scheduler down (Go `Shutdown`).
    pub async fn shutdown(&self) {
        self.stop.cancel();
        if let Some(h) = self.syncer.lock().await.take() {
            let _ = h.await;
        }
        self.scheduler.shutdown().await;
    }
}
