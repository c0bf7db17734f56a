//! A worker: runs one leased task's handler and writes the outcomes the
//! worker owns. Go: `processor.go` (`perform`, `handleFailedMessage`,
//! `retry`, `archive`, `markAsComplete`; wire spec §7.3–7.4; S5–S7, S15,
//! S19–S27).
//!
//! The handler runs under the task's deadline ([`compute_deadline`]), its
//! cancellation token and a panic guard that also covers building the
//! handler's future ([`panic_guard`](super::panic_guard), R1); a
//! cancellation or a passed deadline takes precedence over the handler's
//! error (R2, `outcome`). Then it decides (Go's decision tree):
//!
//! 1. the error handler runs for every failure;
//! 2. [`RevokeTask`](super::RevokeTask) → done, no retry, no archive (S23);
//! 3. Retried ≥ MaxRetry, or [`SkipRetry`](super::SkipRetry) → archive with
//!    LastErr; the retry delay function is not called (S6, S15, S19, S20);
//! 4. otherwise → retry at now + delay(Retried, err, task); `is_failure`
//!    false retries without counting (S24).
//!
//! **Who writes which outcome.** The worker writes *retry*, *archive* and
//! *complete* (a success with retention) itself, and the shutdown requeue.
//! A *success* without retention and a *revoke* are handed to the fetch
//! loop as an [`Ack`]: it finishes them with `done`, in the script call that
//! leases its next tasks ([`acks`](super::acks)). Either way nothing is
//! written once the local lease has lapsed
//! ([`may_write_outcome`]): the recoverer owns the task then. A write that
//! fails on Redis goes to the syncer.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::handler::{Handler, user_task};
use super::hooks::{ErrorHandler, IsFailureFunc};
use super::inflight::{CancelReason, InFlight, Running};
use super::lease::{ContextCanceled, DeadlineExceeded, LeaseExpired, may_write_outcome};
use super::panic_guard::{HandlerCall, call_user, take_panic_location};
use super::retry::{RetryDelayFunc, retry_at};
use super::syncer::SyncRequest;
use super::task_context::TaskContext;
use super::task_error::{TaskError, error_text, is_revoke_task, is_skip_retry, panic_error};
use crate::broker::Broker;
use crate::broker::proto::{TaskMessage, WireTask};
use crate::task::{DEFAULT_TIMEOUT, Task};

/// Everything a worker needs, shared by all workers of a server.
pub(crate) struct Shared {
    pub broker: Broker,
    pub handler: Arc<dyn Handler>,
    pub retry_delay_func: RetryDelayFunc,
    pub is_failure: IsFailureFunc,
    pub error_handler: Option<ErrorHandler>,
    pub inflight: Arc<InFlight>,
    pub syncer: mpsc::UnboundedSender<SyncRequest>,
    /// [`RunControl::abandon`](super::processor::RunControl::abandon): a worker starting after it hands its task
    /// back (unstarted) instead of running it.
    pub abandon: CancellationToken,
    /// Successes finished recently, finished again after a change of
    /// master behind Sentinel ([`ack_replay`](super::ack_replay)).
    pub replay: std::sync::Mutex<super::ack_replay::AckReplay>,
}

/// What a worker hands to the fetch loop: a success (without retention)
/// or a revoke, which the fetch loop finishes with `done` ([`acks`](super::acks)).
pub(super) struct Ack {
    pub(super) running: Arc<Running>,
}

impl Ack {
    pub(super) fn msg(&self) -> &TaskMessage {
        &self.running.task.msg
    }
}

/// The context deadline of a task dequeued at `now` (Go `computeDeadline`,
/// wire spec §7.3): timeout and deadline both unset → now + 30 min; both set
/// → the earlier of now + timeout and the deadline, in whole seconds; only a
/// timeout → now + timeout; only a deadline → that second.
pub(crate) fn compute_deadline(
    timeout_s: i64,
    deadline_s: i64,
    now: DateTime<Utc>,
) -> DateTime<Utc> {
    let secs = |s: i64| chrono::Duration::seconds(s);
    match (timeout_s, deadline_s) {
        (0, 0) => now + chrono::Duration::from_std(DEFAULT_TIMEOUT).expect("30 min"),
        (t, 0) => now + secs(t),
        (0, d) => DateTime::from_timestamp(d, 0).unwrap_or(now),
        (t, d) => {
            let s = (now.timestamp() + t).min(d);
            DateTime::from_timestamp(s, 0).unwrap_or(now)
        }
    }
}

/// What ended a handler's run: the handler itself (its result, or its
/// panic as a PanicError), its cancellation token, or its deadline.
enum Ended {
    Handler(Result<(), TaskError>),
    Cancelled,
    Deadline,
}

/// The attempt's result, in Go's order (R2, COMPATIBILITY.md#r2): a
/// cancellation (`asynq:cancel`, lost lease, shutdown) or a passed
/// deadline is the failure, whatever error the handler returned as it
/// stopped (a SkipRetry returned after a cancel is an ordinary retry with
/// `context canceled`, never an archive); only an `Ok` returned by then
/// stands (the work was done; W14). The handler is polled first, so this
/// does not depend on which of them tokio happened to see first.
// asynq divergence: COMPATIBILITY.md#r2
fn outcome(ended: Ended, running: &Running, now: DateTime<Utc>) -> Result<(), TaskError> {
    let cancelled = || match running.cancel_reason() {
        Some(CancelReason::LeaseExpired) => LeaseExpired.into(),
        _ => ContextCanceled.into(),
    };
    match ended {
        Ended::Handler(Ok(())) => Ok(()),
        Ended::Handler(Err(_)) | Ended::Cancelled if running.cancel_reason().is_some() => {
            Err(cancelled())
        }
        Ended::Handler(Err(_)) | Ended::Deadline if now >= running.deadline => {
            Err(DeadlineExceeded.into())
        }
        Ended::Handler(Err(err)) => Err(err),
        Ended::Cancelled => Err(cancelled()),
        Ended::Deadline => Err(DeadlineExceeded.into()),
    }
}

/// Runs one task to its outcome and writes it: retry, archive and
/// complete here; a success without retention and a revoke go to the fetch
/// loop as an [`Ack`].
pub(super) async fn run_task(
    shared: Arc<Shared>,
    task: WireTask,
    lease_until: DateTime<Utc>,
    ack: mpsc::UnboundedSender<Ack>,
) {
    let now = shared.broker.now();
    let deadline = compute_deadline(task.msg.timeout, task.msg.deadline, now);
    let running = Arc::new(Running::new(task, now, deadline, lease_until));
    shared.inflight.insert(running.clone());
    let msg = &running.task.msg;
    let ctx = TaskContext::new(
        msg.id.clone(),
        msg.queue.clone(),
        msg.retried.max(0) as u32,
        msg.retry.max(0) as u32,
        deadline,
        running.cancel.clone(),
        shared.broker.clone(),
    );
    let already_done = shared
        .replay
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .succeeded_before_move(&msg.id);
    let result: Result<(), TaskError> = if already_done {
        // Its success and its lease were both lost in a change of master
        // (ack_replay.rs): finish it again, never run it twice.
        tracing::warn!(queue = %msg.queue, id = %msg.id, "leased again after the change of master; it succeeded here before it: finishing it without running it again");
        Ok(())
    } else if deadline <= now {
        Err(DeadlineExceeded.into())
    } else {
        let until_deadline = (deadline - now).to_std().unwrap_or_default();
        // Built on its first poll, under the panic guard (R1).
        let (handler, hctx, htask) = (shared.handler.clone(), ctx.clone(), user_task(msg));
        let call = HandlerCall::new(move || handler.process_task(hctx, htask));
        let ended = tokio::select! {
            // Fixed order (R2): see `outcome`.
            biased;
            r = call => Ended::Handler(r.unwrap_or_else(|payload| Err(panic_error(payload, take_panic_location())))),
            _ = running.cancel.cancelled() => Ended::Cancelled,
            _ = tokio::time::sleep(until_deadline) => Ended::Deadline,
        };
        outcome(ended, &running, shared.broker.now())
    };
    // Handler code listening on the token stops with the task.
    running.cancel.cancel();
    shared.inflight.remove(&msg.id);

    // A handler that returned Ok as shutdown cancelled it is done, not
    // requeued (else it would run twice).
    if running.cancel_reason() == Some(CancelReason::Shutdown) && result.is_err() {
        requeue(&shared, &running).await;
        return;
    }
    match result {
        Ok(()) if msg.retention > 0 => {
            if !may_write_outcome(&running, shared.broker.now()) {
                return;
            }
            let w = running.clone();
            write(&shared, &running, "mark_as_complete", move |b| {
                let t = w.task.clone();
                async move { b.mark_as_complete(&t).await }.boxed()
            })
            .await;
        }
        Ok(()) => {
            let _ = ack.send(Ack { running });
        }
        Err(err) => fail(&shared, &running, &ctx, user_task(msg), err, ack).await,
    }
}

async fn requeue(shared: &Shared, running: &Arc<Running>) {
    if !may_write_outcome(running, shared.broker.now()) {
        return;
    }
    if let Err(err) = shared.broker.requeue(&running.task.msg).await {
        tracing::warn!(id = running.task.msg.id, %err, "requeue at shutdown failed");
    }
}

/// The failure path (wire spec §7.4 decision tree).
async fn fail(
    shared: &Shared,
    running: &Arc<Running>,
    ctx: &TaskContext,
    task: Task,
    err: TaskError,
    ack: mpsc::UnboundedSender<Ack>,
) {
    if let Some(h) = &shared.error_handler {
        // A panic in it is logged (by the hook) and the failure goes on.
        // asynq divergence: COMPATIBILITY.md#r1
        let _ = call_user("error handler", || h(ctx, &task, &err));
    }
    let msg = &running.task.msg;
    if !may_write_outcome(running, shared.broker.now()) {
        return;
    }
    if is_revoke_task(&err) {
        let _ = ack.send(Ack {
            running: running.clone(),
        });
        return;
    }
    let text = error_text(&err);
    if msg.retried >= msg.retry || is_skip_retry(&err) {
        let w = running.clone();
        write(shared, running, "archive", move |b| {
            let (t, text) = (w.task.clone(), text.clone());
            async move { b.archive(&t, &text).await }.boxed()
        })
        .await;
        return;
    }
    let is_failure = (shared.is_failure)(&err);
    let retry_at = retry_at(&shared.retry_delay_func, msg.retried, &err, &task, || {
        shared.broker.now()
    });
    let w = running.clone();
    write(shared, running, "retry", move |b| {
        let (t, text) = (w.task.clone(), text.clone());
        async move { b.retry(&t, retry_at, &text, is_failure).await }.boxed()
    })
    .await;
}

/// Runs one outcome write; on a Redis error hands it to the syncer, which
/// retries until the lease ends. A NOT FOUND means another server already
/// recovered the task and is only logged.
async fn write<F>(shared: &Shared, running: &Arc<Running>, what: &str, op: F)
where
    F: Fn(Broker) -> futures_util::future::BoxFuture<'static, crate::Result<()>>
        + Send
        + Sync
        + 'static,
{
    match op(shared.broker.clone()).await {
        Ok(()) => {}
        Err(crate::Error::Redis(err)) => {
            tracing::warn!(id = running.task.msg.id, %err, "{what} failed; handing to the syncer");
            let broker = shared.broker.clone();
            let _ = shared.syncer.send(SyncRequest::new(
                format!("{what} {}", running.task.msg.id),
                running.lease_until(),
                move || op(broker.clone()),
            ));
        }
        Err(err) => tracing::warn!(id = running.task.msg.id, %err, "{what} skipped"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(s, 500_000_000).unwrap()
    }

    /// Go computeDeadline (wire spec §7.3), each branch.
    #[test]
    fn deadline_rules() {
        let now = at(1_000);
        assert_eq!(
            compute_deadline(0, 0, now),
            now + chrono::Duration::minutes(30)
        );
        assert_eq!(
            compute_deadline(60, 0, now),
            now + chrono::Duration::seconds(60)
        );
        assert_eq!(compute_deadline(0, 5_000, now).timestamp(), 5_000);
        assert_eq!(
            compute_deadline(60, 5_000, now),
            DateTime::from_timestamp(1_060, 0).unwrap()
        );
        assert_eq!(
            compute_deadline(60, 1_010, now),
            DateTime::from_timestamp(1_010, 0).unwrap()
        );
    }

    /// R2: a cancellation or a passed deadline is the failure whatever
    /// error the handler returned, in that order; an Ok stands.
    #[test]
    fn r2_outcome_takes_cancellation_then_deadline_before_the_handlers_error() {
        let now = at(1_000);
        let running = |deadline: DateTime<Utc>, reason: Option<CancelReason>| {
            let r = Running::new(WireTask::default(), now, deadline, now);
            if let Some(reason) = reason {
                r.cancel_with(reason);
            }
            r
        };
        let skip = || Ended::Handler(Err(TaskError::new(super::super::SkipRetry)));
        let text = |r: Result<(), TaskError>| r.map_err(|e| super::super::error_text(&e));
        let later = now + chrono::Duration::seconds(60);
        let cancelled = running(later, Some(CancelReason::Canceled));
        assert_eq!(
            text(outcome(skip(), &cancelled, now)),
            Err("context canceled".into())
        );
        assert_eq!(
            text(outcome(Ended::Cancelled, &cancelled, now)),
            Err("context canceled".into())
        );
        assert_eq!(
            text(outcome(Ended::Handler(Ok(())), &cancelled, now)),
            Ok(())
        );
        let lost = running(later, Some(CancelReason::LeaseExpired));
        assert_eq!(
            text(outcome(skip(), &lost, now)),
            Err("asynq: task lease expired".into())
        );
        // Cancelled after its deadline: the cancellation is named.
        let both = running(now, Some(CancelReason::Canceled));
        assert_eq!(
            text(outcome(skip(), &both, now)),
            Err("context canceled".into())
        );
        let past = running(now, None);
        assert_eq!(
            text(outcome(skip(), &past, now)),
            Err("context deadline exceeded".into())
        );
        assert_eq!(
            text(outcome(Ended::Deadline, &past, now)),
            Err("context deadline exceeded".into())
        );
        let live = running(later, None);
        assert_eq!(
            text(outcome(skip(), &live, now)),
            Err("skip retry for the task".into())
        );
    }
}
