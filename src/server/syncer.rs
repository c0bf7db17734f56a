//! The syncer: retries outcome writes that failed because Redis was
//! unreachable (Go `syncer.go`; wire spec §7.4, §7.7).
//!
//! The fetch loop (`acks.rs`: done) and the workers (`worker.rs`: complete,
//! retry, archive) send a [`SyncRequest`] when they could not write a
//! task's outcome. The syncer tries it again every
//! interval until it succeeds or its deadline (the task's lease end) passes;
//! after that the recoverer owns the task and the request is dropped with a
//! warning. A write Redis refuses (NOT FOUND: another server recovered the
//! task) is dropped at once. At shutdown each pending request gets one last
//! attempt.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::broker::Broker;
use crate::error::Result;

pub use super::defaults::DEFAULT_SYNC_INTERVAL;

/// A write to retry (Go `syncRequest`).
pub struct SyncRequest {
    /// What the write is, for logs (e.g. `retry <task id>`).
    pub what: String,
    /// Dropped once this passes (UTC): the task's lease end.
    pub deadline: DateTime<Utc>,
    /// Makes one attempt; called once per try.
    pub op: Box<dyn Fn() -> BoxFuture<'static, Result<()>> + Send + Sync>,
}

impl std::fmt::Debug for SyncRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SyncRequest")
            .field("what", &self.what)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}

impl SyncRequest {
    /// A request named `what`, tried until `deadline`, each try running `op`.
    pub fn new<F>(what: impl Into<String>, deadline: DateTime<Utc>, op: F) -> Self
    where
        F: Fn() -> BoxFuture<'static, Result<()>> + Send + Sync + 'static,
    {
        SyncRequest {
            what: what.into(),
            deadline,
            op: Box::new(op),
        }
    }

    /// Like [`SyncRequest::new`] for an `op` returning any `Send` future.
    pub fn from_fn<F, Fut>(what: impl Into<String>, deadline: DateTime<Utc>, op: F) -> Self
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send + 'static,
    {
        Self::new(what, deadline, move || op().boxed())
    }
}

/// What one syncer pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SyncOutcome {
    /// Requests whose write succeeded (and are gone).
    pub succeeded: usize,
    /// Requests that failed again and are kept for the next pass.
    pub pending: usize,
    /// Requests dropped because their deadline had passed (not tried).
    pub dropped: usize,
    /// Requests dropped because Redis refused the write (any error but
    /// [`Error::Redis`](crate::Error::Redis), e.g.
    /// [`Error::TaskNotFound`](crate::Error::TaskNotFound) once another
    /// server recovered the task): trying again cannot help.
    pub refused: usize,
}

/// Retries failed writes until they succeed or expire.
pub struct Syncer {
    broker: Broker,
    interval: Duration,
    requests: Mutex<UnboundedReceiver<SyncRequest>>,
    pending: Mutex<Vec<SyncRequest>>,
}

impl std::fmt::Debug for Syncer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Syncer")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl Syncer {
    /// A syncer taking requests from `requests` and retrying them every
    /// `interval` (Go: 5 s, [`DEFAULT_SYNC_INTERVAL`]); `broker` gives the
    /// time deadlines are checked against. Go `newSyncer`.
    pub fn new(
        broker: Broker,
        requests: UnboundedReceiver<SyncRequest>,
        interval: Duration,
    ) -> Self {
        Syncer {
            broker,
            interval,
            requests: Mutex::new(requests),
            pending: Mutex::new(Vec::new()),
        }
    }

    /// A pass every `interval` until `shutdown` is cancelled, then
    /// [`Syncer::finish`]. Go `syncer.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = Ticker::new(self.interval, FirstTick::AfterInterval, &shutdown);
        while ticks.next().await {
            self.tick().await;
        }
        self.finish().await;
        tracing::debug!("syncer done");
    }

    /// One pass: takes the newly sent requests, drops (with a warning) those
    /// whose deadline is before now, tries each other one once, keeps the
    /// ones that fail with [`Error::Redis`](crate::Error::Redis) and drops
    /// (with a warning) the ones refused with any other error.
    pub async fn tick(&self) -> SyncOutcome {
        self.attempt(false).await
    }

    /// The last pass at shutdown: like [`Syncer::tick`], but a request that
    /// fails is dropped with a warning (`pending` counts those). Go tries
    /// the expired ones too; they are dropped here, since past the lease end
    /// the recoverer owns the task.
    pub async fn finish(&self) -> SyncOutcome {
        let out = self.attempt(true).await;
        self.pending.lock().expect("syncer lock").clear();
        out
    }

    /// Requests waiting for the next pass (sent but not yet taken included).
    pub fn pending_len(&self) -> usize {
        self.take_new();
        self.pending.lock().expect("syncer lock").len()
    }

    /// Moves the requests sent since the last pass to `pending`.
    fn take_new(&self) {
        let mut rx = self.requests.lock().expect("syncer lock");
        let mut pending = self.pending.lock().expect("syncer lock");
        while let Ok(req) = rx.try_recv() {
            pending.push(req);
        }
    }

    async fn attempt(&self, last: bool) -> SyncOutcome {
        self.take_new();
        let batch = std::mem::take(&mut *self.pending.lock().expect("syncer lock"));
        let mut out = SyncOutcome::default();
        let mut keep = Vec::new();
        for req in batch {
            if req.deadline < self.broker.now() {
                tracing::warn!(what = %req.what, deadline = %req.deadline, "syncer: dropping a write past its deadline");
                out.dropped += 1;
                continue;
            }
            match (req.op)().await {
                Ok(()) => out.succeeded += 1,
                Err(e) if !e.is_redis_unavailable() => {
                    tracing::warn!(what = %req.what, error = %e, "syncer: write refused; dropping it");
                    out.refused += 1;
                }
                Err(e) => {
                    if last {
                        tracing::warn!(what = %req.what, error = %e, "syncer: last attempt failed; dropping the write");
                    } else {
                        tracing::warn!(what = %req.what, error = %e, "syncer: write failed again; will retry");
                    }
                    keep.push(req);
                }
            }
        }
        out.pending = keep.len();
        self.pending.lock().expect("syncer lock").extend(keep);
        out
    }
}
