//! The registry of tasks this server is running right now.
//!
//! A worker (`worker.rs`) inserts a task when it starts it and removes it
//! once the handler has ended, before the outcome is written. The heartbeat reads it (WorkerInfo, lease
//! extension), the subscriber cancels by id, shutdown cancels what is left.
//! A std `Mutex` is right here: every critical section is a map operation
//! with no `.await` inside.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::broker::proto::WireTask;

/// Why a running task's context was cancelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelReason {
    /// `asynq:cancel` named it (Go `Inspector.CancelProcessing`): `context canceled`.
    Canceled,
    /// Its lease could not be kept: `asynq: task lease expired`.
    LeaseExpired,
    /// Shutdown timeout elapsed: the task is requeued, not failed.
    Shutdown,
}

/// One running task.
#[derive(Debug)]
pub struct Running {
    /// The task as dequeued (unknown protobuf fields kept).
    pub task: WireTask,
    /// When a worker started it.
    pub started: DateTime<Utc>,
    /// Its context deadline (wire spec §7.3).
    pub deadline: DateTime<Utc>,
    /// Cancels the handler's context.
    pub cancel: CancellationToken,
    lease_until: Mutex<DateTime<Utc>>,
    reason: Mutex<Option<CancelReason>>,
}

impl Running {
    pub fn new(
        task: WireTask,
        started: DateTime<Utc>,
        deadline: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Self {
        Running {
            task,
            started,
            deadline,
            cancel: CancellationToken::new(),
            lease_until: Mutex::new(lease_until),
            reason: Mutex::new(None),
        }
    }

    /// The local lease expiry (full precision).
    pub fn lease_until(&self) -> DateTime<Utc> {
        *self.lease_until.lock().expect("lease lock")
    }

    /// Records a lease extension.
    pub fn extend_lease(&self, until: DateTime<Utc>) {
        *self.lease_until.lock().expect("lease lock") = until;
    }

    /// Whether the lease still holds at `now`: writes are skipped otherwise
    /// and the recoverer takes over (Go `Lease.IsValid`).
    pub fn lease_valid(&self, now: DateTime<Utc>) -> bool {
        self.lease_until() >= now
    }

    /// Cancels the handler's context, remembering the first reason given.
    pub fn cancel_with(&self, reason: CancelReason) {
        self.reason
            .lock()
            .expect("reason lock")
            .get_or_insert(reason);
        self.cancel.cancel();
    }

    /// The reason of the cancellation, if any.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        *self.reason.lock().expect("reason lock")
    }
}

/// Task id -> running task.
#[derive(Debug, Default)]
pub struct InFlight {
    map: Mutex<HashMap<String, Arc<Running>>>,
}

impl InFlight {
    pub fn insert(&self, running: Arc<Running>) {
        let id = running.task.msg.id.clone();
        self.map.lock().expect("inflight lock").insert(id, running);
    }

    pub fn remove(&self, id: &str) {
        self.map.lock().expect("inflight lock").remove(id);
    }

    pub fn get(&self, id: &str) -> Option<Arc<Running>> {
        self.map.lock().expect("inflight lock").get(id).cloned()
    }

    /// A copy of every running task, for the heartbeat and shutdown.
    pub fn snapshot(&self) -> Vec<Arc<Running>> {
        self.map
            .lock()
            .expect("inflight lock")
            .values()
            .cloned()
            .collect()
    }

    pub fn len(&self) -> usize {
        self.map.lock().expect("inflight lock").len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
