//! The lease a worker holds on a running task (Go `base.Lease`, wire spec
//! §6.15, §7.5): 30 s from dequeue, extended by every heartbeat while the
//! handler runs. A worker whose lease lapsed writes nothing; the recoverer of
//! some server retries or archives the task with [`LeaseExpired`].

/// The failure recorded for a task whose lease expired (Go `ErrLeaseExpired`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, thiserror::Error)]
#[error("asynq: task lease expired")]
pub struct LeaseExpired;

/// How far behind now a lease must be before the recoverer takes the task:
/// 30 s, so clock skew between servers cannot steal a live task (Go recoverer).
pub const RECOVER_CUTOFF: std::time::Duration = std::time::Duration::from_secs(30);

/// The failure recorded when a task's context was cancelled through
/// `asynq:cancel` (Go `context.Canceled`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, thiserror::Error)]
#[error("context canceled")]
pub struct ContextCanceled;

/// The failure recorded when a task ran past its deadline or timeout
/// (Go `context.DeadlineExceeded`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, thiserror::Error)]
#[error("context deadline exceeded")]
pub struct DeadlineExceeded;

/// Whether the worker of `running` still holds its lease at `now`, so that
/// it may write the task's outcome (Go `Lease.IsValid` before every write).
/// When it does not, logs that the task is left to the recoverer, which owns
/// it now (another worker may even be running it again), and the caller
/// writes nothing. Every outcome write, whoever makes it, asks here first.
pub(crate) fn may_write_outcome(
    running: &super::inflight::Running,
    now: chrono::DateTime<chrono::Utc>,
) -> bool {
    let held = running.lease_valid(now);
    if !held {
        tracing::warn!(
            id = running.task.msg.id,
            "lease lapsed; leaving the task to the recoverer"
        );
    }
    held
}
