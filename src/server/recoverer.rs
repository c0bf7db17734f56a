//! The recoverer: takes back tasks whose worker vanished (Go `recoverer.go`;
//! wire spec §6.15, §7.5, §12; seed S12, S13).
//!
//! An active task whose lease ended over [`RECOVER_CUTOFF`] ago (slack for
//! clock skew between servers) has no live worker: the recoverer retries it
//! with [`LeaseExpired`] (`asynq: task lease expired`), or archives it when
//! its retries are used up. Because leases live in Redis, any server of the
//! queue recovers the tasks of one that died (S13). Two recoverers racing on
//! one task are safe: the loser's script finds it gone (NOT FOUND). Then
//! stale aggregation sets are given back to their groups.
//!
//! The first pass runs at start, then one every interval (Go: 1 min).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::lease::{LeaseExpired, RECOVER_CUTOFF};
use super::retry::RetryDelayFunc;
use super::task_error::TaskError;
use crate::broker::Broker;
use crate::broker::proto::WireTask;
use crate::error::{Error, Result};
use crate::task::Task;

/// Go's recoverer interval: 1 minute (hard-coded; wire spec §7.1).
pub const DEFAULT_RECOVER_INTERVAL: Duration = Duration::from_secs(60);

/// Scaffolding (R4): how long an active id must stay lease-less.
pub const ORPHAN_GRACE: Duration = Duration::from_secs(30);

/// What one recoverer pass did, summed over the queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoverOutcome {
    /// Tasks moved to `retry`.
    pub retried: u64,
    /// Tasks moved to `archived` (retries used up).
    pub archived: u64,
    /// Tasks another server recovered first (NOT FOUND).
    pub lost_race: u64,
    /// Lease entries whose message did not decode; left in place.
    pub corrupt: u64,
    /// Stale aggregation sets given back to their groups.
    pub reclaimed_sets: u64,
    /// Scaffolding (R4).
    pub orphans_leased: u64,
    /// Scaffolding (R4).
    pub orphans_dropped: u64,
}

/// Retries or archives the lease-expired tasks of the server's queues.
pub struct Recoverer {
    broker: Broker,
    queues: Vec<String>,
    interval: Duration,
    retry_delay_func: RetryDelayFunc,
    is_failure: Arc<dyn Fn(&TaskError) -> bool + Send + Sync>,
}

impl std::fmt::Debug for Recoverer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recoverer")
            .field("queues", &self.queues)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Recoverer {
    /// A recoverer for `queues`, passing every `interval` (Go: 1 min,
    /// [`DEFAULT_RECOVER_INTERVAL`]). A retried task waits
    /// `retry_delay_func(retried, LeaseExpired, task)`; it counts as a
    /// failure (Retried + 1, failed counters) when `is_failure(LeaseExpired)`
    /// (true by default). Go `newRecoverer`.
    pub fn new(
        broker: Broker,
        queues: Vec<String>,
        interval: Duration,
        retry_delay_func: RetryDelayFunc,
        is_failure: Arc<dyn Fn(&TaskError) -> bool + Send + Sync>,
    ) -> Self {
        Recoverer {
            broker,
            queues,
            interval,
            retry_delay_func,
            is_failure,
        }
    }

    /// Scaffolding (R8): queues watched between passes.
    pub fn watched_queues(&self) -> Vec<String> {
        Vec::new()
    }

    /// Scaffolding (R8): the next wake.
    pub fn next_wake(&self) -> chrono::DateTime<chrono::Utc> {
        self.broker.now() + chrono::Duration::from_std(self.interval).expect("interval")
    }

    /// Scaffolding (R8): between passes.
    pub async fn poll(&self) -> Result<RecoverOutcome> {
        Ok(RecoverOutcome::default())
    }

    /// One pass at once, then one every `interval`, until `shutdown` is
    /// cancelled; failures are logged and the loop goes on. Go `recoverer.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            // Failures are logged by `tick`.
            let _ = self.tick().await;
            tokio::select! {
                biased;
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.interval) => {}
            }
        }
        tracing::debug!("recoverer done");
    }

    /// One pass over every queue: (a) each task whose lease score is at or
    /// before now − [`RECOVER_CUTOFF`] (at most
    /// [`RECOVER_BATCH`](crate::broker::RECOVER_BATCH) per queue) is archived
    /// when `retried >= retry`, else retried at now + delay, both with error
    /// text `asynq: task lease expired`; (b) stale aggregation sets are
    /// reclaimed. NOT FOUND (another recoverer won) is logged at debug and
    /// counted; an entry that does not decode is logged and skipped. Other
    /// failures are logged, the pass goes on, and the first is returned at
    /// the end. Go `recoverer.recover`.
    pub async fn tick(&self) -> Result<RecoverOutcome> {
        let mut out = RecoverOutcome::default();
        let mut first_err = None;
        for queue in &self.queues {
            if let Err(e) = self.recover_queue(queue, &mut out).await {
                tracing::warn!(queue = %queue, error = %e, "recoverer: could not recover lease-expired tasks");
                first_err.get_or_insert(e);
            }
        }
        for queue in &self.queues {
            match self.broker.reclaim_stale_aggregation_sets(queue).await {
                Ok(n) => out.reclaimed_sets += n,
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "recoverer: could not reclaim stale aggregation sets");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Recovers the lease-expired tasks of one queue. Errors only when the
    /// listing fails; a failed move is logged and the pass goes on.
    async fn recover_queue(&self, queue: &str, out: &mut RecoverOutcome) -> Result<()> {
        let cutoff = self.broker.now() - chrono::Duration::from_std(RECOVER_CUTOFF).expect("30 s");
        let entries = self.broker.list_lease_expired(queue, cutoff).await?;
        for entry in entries {
            let task = match entry {
                Ok(task) => task,
                Err((id, e)) => {
                    tracing::warn!(queue = %queue, id = %id, error = %e, "recoverer: archiving a leased task that does not decode");
                    if let Err(e) = self.broker.archive_undecodable(queue, &id).await {
                        tracing::warn!(queue = %queue, id = %id, error = %e, "recoverer: could not archive it");
                    }
                    out.corrupt += 1;
                    continue;
                }
            };
            let archive = task.msg.retried >= task.msg.retry;
            match self.recover_task(&task, archive).await {
                Ok(()) if archive => out.archived += 1,
                Ok(()) => out.retried += 1,
                Err(Error::TaskNotFound { .. }) => {
                    tracing::debug!(queue = %queue, id = %task.msg.id, "recoverer: task already recovered elsewhere");
                    out.lost_race += 1;
                }
                Err(e) => {
                    tracing::warn!(queue = %queue, id = %task.msg.id, error = %e, archive, "recoverer: could not move lease-expired task");
                }
            }
        }
        Ok(())
    }

    async fn recover_task(&self, task: &WireTask, archive: bool) -> Result<()> {
        let err: TaskError = LeaseExpired.into();
        let text = err.to_string();
        if archive {
            return self.broker.archive(task, &text).await;
        }
        let msg = &task.msg;
        let user_task =
            Task::new(msg.r#type.clone(), msg.payload.clone()).with_headers(msg.headers.clone());
        let retried = u32::try_from(msg.retried).unwrap_or(0);
        let delay = (self.retry_delay_func)(retried, &err, &user_task);
        let now = self.broker.now();
        let retry_at = chrono::Duration::from_std(delay)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC);
        self.broker
            .retry(task, retry_at, &text, (self.is_failure)(&err))
            .await
    }
}
