//! `asynqdeck serve --schedule FILE`: a [`Scheduler`] driven by a
//! [`PeriodicTaskManager`] on the YAML file, synced again when the file's
//! modification time or length changes (checked every second: one `stat`,
//! no Redis call) and on SIGHUP.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::app::ServeError;
use crate::broker::Broker;
use crate::scheduler::{
    DEFAULT_SYNC_INTERVAL, FileConfigProvider, PeriodicTaskManager, Scheduler, SchedulerOpts,
};

/// How often the file's metadata is compared.
const FILE_CHECK: Duration = Duration::from_secs(1);

fn stamp(path: &PathBuf) -> Option<(std::time::SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Starts the scheduler on `path`. Errors: [`ServeError::Config`] when the
/// file cannot be read or is not a schedule at all (bad entries alone are
/// logged and left out).
pub(crate) async fn start(
    broker: Broker,
    path: PathBuf,
    stop: CancellationToken,
) -> Result<Arc<PeriodicTaskManager>, ServeError> {
    let provider = Arc::new(FileConfigProvider::new(path.clone()));
    let scheduler = Scheduler::new(broker, SchedulerOpts::default());
    let manager = PeriodicTaskManager::new(scheduler, provider, DEFAULT_SYNC_INTERVAL);
    manager
        .start()
        .await
        .map_err(|e| ServeError::Config(e.to_string()))?;
    let watched = manager.clone();
    tokio::spawn(async move {
        #[cfg(unix)]
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()).ok();
        let mut last = stamp(&path);
        loop {
            #[cfg(unix)]
            let hup_recv = async {
                match hup.as_mut() {
                    Some(h) => {
                        h.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            #[cfg(not(unix))]
            let hup_recv = std::future::pending::<()>();
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = hup_recv => {
                    tracing::info!("SIGHUP: reading the schedule file again");
                    watched.request_sync();
                }
                _ = tokio::time::sleep(FILE_CHECK) => {
                    let now = stamp(&path);
                    if now != last {
                        last = now;
                        tracing::info!("schedule file changed: reading it again");
                        watched.request_sync();
                    }
                }
            }
        }
    });
    Ok(manager)
}
