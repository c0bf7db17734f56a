//! [`JobRunner`]: the loop that finds jobs to run (queued ones, and those
//! whose lease lapsed because the dashboard running them died) and runs
//! them. One cheap read of the global open index per poll, whatever the
//! number of queues; a claim script decides which runner gets a job.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::run::{self, Driven};
use crate::Inspector;

/// How long a job whose drive failed waits before a runner tries it
/// again (ms).
const RETRY_AFTER_MS: i64 = 5_000;

/// Woken when this process creates a job, so its runners look at once.
pub(super) static CREATED: Notify = Notify::const_new();

/// Finds and runs background jobs; `asynqdeck serve` and the demo run one
/// (not in read-only mode). Several runners (dashboards) on one Redis
/// share the work: each job is run by one at a time (its lease), and a
/// job whose runner died is resumed by another once its lease lapses
/// ([`JobConfig::lease`](super::JobConfig::lease)), from its stored
/// progress.
pub struct JobRunner {
    inspector: Inspector,
    owner: String,
}

impl JobRunner {
    /// A runner using `inspector`'s connection and job settings.
    pub fn new(inspector: Inspector) -> Self {
        JobRunner {
            inspector,
            owner: run::new_owner(),
        }
    }

    /// This runner's owner id (the `owner` field of the jobs it runs).
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// Runs until `stop` is cancelled: every [`JobConfig::poll`](super::JobConfig::poll)
    /// (or at once when this process creates a job) reads up to a few due
    /// jobs from the open index and drives each one not already running
    /// here, at most [`JobConfig::concurrency`](super::JobConfig::concurrency)
    /// at once. On stop, the jobs in progress stop after their chunk and
    /// give their lease back. Redis errors are logged and retried at the
    /// next poll.
    pub async fn run(self, stop: CancellationToken) {
        let cfg = self.inspector.job_config();
        let running: Arc<Mutex<HashSet<String>>> = Arc::default();
        let mut tasks = JoinSet::new();
        loop {
            let free = cfg
                .concurrency
                .max(1)
                .saturating_sub(running.lock().map_or(0, |r| r.len()));
            if free > 0 {
                let now = self.inspector.now().timestamp_millis();
                match self.inspector.broker().job_open_due(now, free + 8).await {
                    Ok(due) => {
                        for (id, queue) in due {
                            let Some(queue) = queue else {
                                let _ = self.inspector.broker().job_closed(&id).await;
                                continue;
                            };
                            let mut set = match running.lock() {
                                Ok(s) => s,
                                Err(_) => break,
                            };
                            if set.len() >= cfg.concurrency.max(1) || !set.insert(id.clone()) {
                                continue;
                            }
                            drop(set);
                            let ins = self.inspector.clone();
                            let owner = self.owner.clone();
                            let child = stop.child_token();
                            let running = running.clone();
                            tasks.spawn(async move {
                                let r = run::drive(&ins, &queue, &id, &owner, &child).await;
                                if let Err(e) = &r {
                                    tracing::warn!(job = %id, error = %e, "job runner: chunk failed; retrying later");
                                    // Not due again before RETRY_AFTER: a job
                                    // whose keys cannot be read (corrupt, or
                                    // Redis failing) must not spin the runner.
                                    let at = ins.now().timestamp_millis() + RETRY_AFTER_MS;
                                    let _ = ins.broker().job_open_at(&id, at).await;
                                }
                                if let Ok(mut set) = running.lock() {
                                    set.remove(&id);
                                }
                                r.ok() == Some(Driven::Finished)
                            });
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "job runner: cannot read the job index"),
                }
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(cfg.poll) => {}
                _ = CREATED.notified() => {}
                Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            }
        }
        while tasks.join_next().await.is_some() {}
    }
}
