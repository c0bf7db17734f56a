//! Dequeues tasks, runs their handlers and writes each outcome. Go:
//! `processor.go` (wire spec §7.2–7.4; S5–S7, S15, S19–S27).
//!
//! Shape: one fetch loop, on a thread of its own
//! ([`fetch_thread`](super::fetch_thread): its own runtime and Redis
//! connection, busy-polling for lease replies when Redis is on this host),
//! holds a semaphore of `concurrency` permits. When
//! permits are free it leases up to that many tasks in one script call per
//! queue (in weighted-random or strict order), starts one worker per task
//! (spawned, or for task types learned to be quick polled once in place and
//! spawned only when still pending: [`inline_start`](super::inline_start);
//! workers belong to the caller's runtime either way),
//! and when every queue is empty waits for the idle waker or
//! `task_check_interval` before looking again; a queue whose lease call
//! failed is tried again at once, then with a backoff up to 1 s
//! ([`backoff`](super::backoff), R5). Leasing never runs ahead of
//! a free permit (as Go: active tasks are running tasks). Before it leases,
//! the loop yields once so that workers about to finish do so: one call
//! then carries a whole batch of finishes and leases. At concurrency ≥ 64
//! two such calls are in flight, each with up to half the permits, so Redis
//! and the workers overlap ([`calls_in_flight`]; BENCHMARKS.md). A worker runs the handler under the task's deadline, its
//! cancellation token and a panic guard that also covers building the
//! handler's future ([`panic_guard`](super::panic_guard), R1); a
//! cancellation or a passed deadline takes precedence over the handler's
//! error (R2). Then it decides (Go's decision tree):
//!
//! 1. the error handler runs for every failure;
//! 2. [`RevokeTask`](super::RevokeTask) → done, no retry, no archive (S23);
//! 3. Retried ≥ MaxRetry, or [`SkipRetry`](super::SkipRetry) → archive with
//!    LastErr; the retry delay function is not called (S6, S15, S19, S20);
//! 4. otherwise → retry at now + delay(Retried, err, task); `is_failure`
//!    false retries without counting (S24).
//!
//! Success without retention is handed back to the fetch loop, which
//! finishes the successes it has in hand in the same script call that leases
//! the next tasks of their queue (`done_and_dequeue`), or with one `done`
//! call per queue when it is not leasing from it; with retention the task is
//! kept as completed. No write happens once the local lease has lapsed: the
//! recoverer owns the task then. A failed write goes to the syncer.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::FutureExt;
use futures_util::stream::{FuturesUnordered, StreamExt};
use rand::seq::SliceRandom;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::backoff::FailingQueues;
use super::fetch_thread::ReplySpin;
use super::inflight::{CancelReason, InFlight, Running};
use super::inline_start::{self, InlineStart};
use super::lease::{ContextCanceled, DeadlineExceeded, LeaseExpired};
use super::panic_guard::{HandlerCall, call_user, install_panic_hook, take_panic_location};
use super::syncer::SyncRequest;
use super::{ErrorHandler, Handler, IsFailureFunc, RetryDelayFunc, TaskContext, TaskError};
use crate::broker::proto::WireTask;
use crate::broker::{Broker, LEASE_DURATION};
use crate::task::{DEFAULT_TIMEOUT, Task};

/// Most successes finished in one script call.
const ACK_BATCH: usize = 256;
/// Fewest tasks per lease call for which the fetch loop splits its permits
/// into two calls in flight (see [`calls_in_flight`]).
const MIN_PIPELINED_BATCH: usize = 32;

/// Lease calls the fetch loop keeps in flight at `concurrency`, each taking
/// at most its share of the permits. With two, one call is in Redis while
/// the tasks of the other run, so neither side waits for the other: at
/// C=100 this nearly doubles throughput for the same Redis work. But each
/// call costs Redis a fixed overhead (≈ 40 µs here, BENCHMARKS.md) on top of
/// its per-task work, so halving small batches costs more Redis CPU per task
/// than it saves in time: below 2 × [`MIN_PIPELINED_BATCH`] permits there is
/// one call at a time, carrying every free permit.
fn calls_in_flight(concurrency: usize) -> usize {
    if concurrency >= 2 * MIN_PIPELINED_BATCH {
        2
    } else {
        1
    }
}

/// The order queues are tried in (Go `processor.queues`).
#[derive(Clone, Debug)]
pub(crate) enum QueueOrder {
    /// Highest priority first, fixed (Go StrictPriority).
    Strict(Vec<String>),
    /// A fresh weighted-random order for every fetch: each queue appears
    /// priority/gcd times, shuffled, first occurrences kept.
    Weighted(Vec<(String, u32)>),
}

impl QueueOrder {
    /// Builds the order from queue → priority (priorities ≤ 0 and blank names dropped).
    pub fn new(queues: &std::collections::BTreeMap<String, i32>, strict: bool) -> Self {
        let mut qs: Vec<(String, u32)> = queues
            .iter()
            .filter(|(q, p)| !q.trim().is_empty() && **p > 0)
            .map(|(q, p)| (q.clone(), *p as u32))
            .collect();
        if strict {
            qs.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            QueueOrder::Strict(qs.into_iter().map(|(q, _)| q).collect())
        } else {
            let g = qs.iter().fold(0, |g, (_, p)| gcd(g, *p)).max(1);
            QueueOrder::Weighted(qs.into_iter().map(|(q, p)| (q, p / g)).collect())
        }
    }

    /// The order for one fetch.
    pub fn order(&self) -> Vec<String> {
        match self {
            QueueOrder::Strict(qs) => qs.clone(),
            QueueOrder::Weighted(qs) if qs.len() == 1 => vec![qs[0].0.clone()],
            QueueOrder::Weighted(qs) => {
                let mut slots: Vec<&str> = qs
                    .iter()
                    .flat_map(|(q, p)| std::iter::repeat_n(q.as_str(), *p as usize))
                    .collect();
                slots.shuffle(&mut rand::rng());
                let mut out: Vec<String> = Vec::with_capacity(qs.len());
                for q in slots {
                    if !out.iter().any(|o| o == q) {
                        out.push(q.to_string());
                    }
                }
                out
            }
        }
    }

    /// Every queue name.
    pub fn names(&self) -> Vec<String> {
        match self {
            QueueOrder::Strict(qs) => qs.clone(),
            QueueOrder::Weighted(qs) => qs.iter().map(|(q, _)| q.clone()).collect(),
        }
    }
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
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

/// Everything a worker needs, shared by all workers of a server.
pub(crate) struct Shared {
    pub broker: Broker,
    pub handler: Arc<dyn Handler>,
    pub retry_delay_func: RetryDelayFunc,
    pub is_failure: IsFailureFunc,
    pub error_handler: Option<ErrorHandler>,
    pub inflight: Arc<InFlight>,
    pub syncer: mpsc::UnboundedSender<SyncRequest>,
    /// [`RunControl::abandon`]: a worker starting after it hands its task
    /// back (unstarted) instead of running it.
    pub abandon: CancellationToken,
}

/// The fetch loop and its settings.
pub(crate) struct Processor {
    pub shared: Arc<Shared>,
    /// The fetch loop's own connection: lease and done calls.
    pub broker: Broker,
    /// The runtime workers are spawned on.
    pub workers_rt: tokio::runtime::Handle,
    /// How the loop waits for lease replies.
    pub spin: ReplySpin,
    pub queues: QueueOrder,
    /// Queues whose last lease call failed (a broken connection, a key of
    /// the wrong type), left out of fetches until their next try: at once
    /// after one failure, then backing off up to 1 s (R5). One broken queue
    /// must not hold permits or flood the log while the others have work.
    pub failing: FailingQueues,
    pub concurrency: usize,
    pub task_check_interval: Duration,
    /// Starts quick workers without a spawn.
    pub inline: Arc<InlineStart>,
}

/// How a [`Processor::run`] is stopped.
#[derive(Clone, Debug)]
pub(crate) struct RunControl {
    /// Cancelled: take no new task, wait up to `shutdown_timeout` for the
    /// running ones (Go `processor.shutdown`).
    pub stop: CancellationToken,
    /// Cancelled: take no new task, let the running ones finish (Go
    /// `Server.Stop`).
    pub pause: CancellationToken,
    /// Cancelled (with `stop`): the server was dropped, or the runtime its
    /// workers run on is gone. Take no new task, spawn none; put back what
    /// was leased but not started, and cancel the running ones at once.
    pub abandon: CancellationToken,
    pub shutdown_timeout: Duration,
}

impl Processor {
    /// Fetches and runs tasks until `ctl.stop` is cancelled, then waits for
    /// the running workers: up to `ctl.shutdown_timeout`, after which every
    /// task still running is cancelled and requeued (Go
    /// `processor.shutdown`); with `ctl.abandon` cancelled, no wait. Once
    /// `ctl.pause` is cancelled (Go `Server.Stop`) no new task is taken but
    /// running ones finish normally. A leased task whose worker is dropped
    /// before it starts (its runtime shut down) is put back in pending
    /// without counting a retry.
    pub async fn run(self, ctl: RunControl) {
        let RunControl {
            stop,
            pause,
            abandon,
            shutdown_timeout,
        } = ctl;
        install_panic_hook();
        let sem = Arc::new(Semaphore::new(self.concurrency.max(1)));
        let (ack_tx, mut ack_rx) = mpsc::unbounded_channel();
        let (unstarted_tx, mut unstarted_rx) = mpsc::unbounded_channel();
        let waker = Waker::start(
            &self.broker,
            &self.queues.names(),
            self.task_check_interval,
            &stop,
        )
        .await;
        let mut workers = tokio::task::JoinSet::new();
        let mut acks: Vec<Ack> = Vec::with_capacity(ACK_BATCH);
        // Lease calls in flight, each with the permits it holds.
        let mut calls: FuturesUnordered<_> = FuturesUnordered::new();
        type Leased = (
            Vec<(WireTask, DateTime<Utc>)>,
            OwnedSemaphorePermit,
            Vec<Ack>,
        );
        let calls_in_flight = calls_in_flight(self.concurrency);
        // Set while every queue was found empty: no lease call until the
        // waker fires or this instant passes.
        let mut idle_until: Option<tokio::time::Instant> = None;
        loop {
            let paused = pause.is_cancelled();
            let can_fetch = !paused && idle_until.is_none() && calls.len() < calls_in_flight;
            let idle_sleep = async {
                match idle_until {
                    Some(t) => tokio::time::sleep_until(t).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                // Stopping wins over a free permit: no lease once stopped.
                biased;
                _ = stop.cancelled() => break,
                _ = pause.cancelled(), if !paused => {}
                Some(task) = unstarted_rx.recv() => self.requeue_unstarted(task).await,
                Some((leased, permits, unfinished)) = calls.next(), if !calls.is_empty() => {
                    let (leased, permits, unfinished): Leased = (leased, permits, unfinished);
                    // Successes whose finishing call failed go out again
                    // with the next one (R5).
                    acks.extend(unfinished);
                    if leased.is_empty() && idle_until.is_none() {
                        waker.arm();
                        // A queue whose call failed is tried again at its
                        // next try (at once after one failure, R5), not
                        // after the idle poll interval.
                        let poll = tokio::time::Instant::now() + self.task_check_interval;
                        idle_until = Some(self.failing.next_try().map_or(poll, |t| t.min(poll)));
                    }
                    self.spawn(&mut workers, leased, permits, &ack_tx, &unstarted_tx);
                }
                // A success sends its ack before its worker frees the
                // permit, so waiting for a permit also waits for acks.
                p = sem.clone().acquire_owned(), if can_fetch => {
                    let mut permits = p.expect("semaphore open");
                    // Let workers that are about to finish do so, so one
                    // call carries more finishes and leases; a yield, not a
                    // timer, so nothing waits.
                    tokio::task::yield_now().await;
                    let cap = self.concurrency.max(1).div_ceil(calls_in_flight);
                    let extra = sem.available_permits().min(cap - 1);
                    if extra > 0
                        && let Ok(more) = sem.clone().try_acquire_many_owned(extra as u32)
                    {
                        permits.merge(more);
                    }
                    while acks.len() < ACK_BATCH {
                        match ack_rx.try_recv() {
                            Ok(a) => acks.push(a),
                            Err(_) => break,
                        }
                    }
                    let batch = std::mem::replace(&mut acks, Vec::with_capacity(ACK_BATCH));
                    calls.push(self.lease(permits, batch));
                }
                _ = waker.woken(), if idle_until.is_some() => idle_until = None,
                _ = idle_sleep => idle_until = None,
                // Idle or paused: successes still finish, on their own.
                _ = ack_rx.recv_many(&mut acks, ACK_BATCH), if paused || idle_until.is_some() => {
                    finish(&self.shared, &self.broker, &mut acks).await;
                }
            }
        }
        // Tasks already leased run like the others (and get the same
        // shutdown timeout); abandoned, they go back to pending.
        while let Some((leased, permits, unfinished)) = calls.next().await {
            let (leased, permits, unfinished): Leased = (leased, permits, unfinished);
            acks.extend(unfinished);
            if abandon.is_cancelled() {
                for (task, _) in leased {
                    self.requeue_unstarted(task).await;
                }
            } else {
                self.spawn(&mut workers, leased, permits, &ack_tx, &unstarted_tx);
            }
        }
        // Shutdown: running tasks get `shutdown_timeout` to end (their
        // successes are finished as they come), then the rest are cancelled
        // and requeued by their workers.
        drop(ack_tx);
        drain(
            &self.shared,
            &self.broker,
            &mut workers,
            &mut ack_rx,
            &mut acks,
            tokio::time::Instant::now() + shutdown_timeout,
            &abandon,
        )
        .await;
        while let Ok(a) = ack_rx.try_recv() {
            acks.push(a);
        }
        finish(&self.shared, &self.broker, &mut acks).await;
        // Every worker has ended or been dropped by now, so every unstarted
        // one has reported.
        drop(unstarted_tx);
        while let Some(task) = unstarted_rx.recv().await {
            self.requeue_unstarted(task).await;
        }
        // Workers dropped mid-run (their runtime shut down without a
        // shutdown) leave their tasks active, leased: as after a crash, the
        // recoverer takes them once the lease lapses.
    }

    /// Puts back in pending a leased task whose worker never started (Go
    /// `Requeue`: no retry counted).
    async fn requeue_unstarted(&self, task: WireTask) {
        tracing::warn!(
            id = task.msg.id,
            "leased task not started (server dropped or its runtime shut down); requeueing it"
        );
        if let Err(err) = self.broker.requeue(&task.msg).await {
            tracing::warn!(id = task.msg.id, %err, "requeue of an unstarted task failed");
        }
    }

    /// Leases one task per permit (see [`Processor::fetch`]) and hands the
    /// permits back with the tasks and the successes of `acks` whose
    /// finishing call failed.
    async fn lease(
        &self,
        permits: OwnedSemaphorePermit,
        mut acks: Vec<Ack>,
    ) -> (
        Vec<(WireTask, DateTime<Utc>)>,
        OwnedSemaphorePermit,
        Vec<Ack>,
    ) {
        let leased = self.fetch(permits.num_permits(), &mut acks).await;
        (leased, permits, acks)
    }

    /// Starts one worker per leased task, each holding one of `permits`
    /// (the rest are released). A worker dropped before its first poll
    /// sends its task to `unstarted`.
    fn spawn(
        &self,
        workers: &mut tokio::task::JoinSet<()>,
        leased: Vec<(WireTask, DateTime<Utc>)>,
        mut permits: OwnedSemaphorePermit,
        ack_tx: &mpsc::UnboundedSender<Ack>,
        unstarted: &mpsc::UnboundedSender<WireTask>,
    ) {
        let mut budget = inline_start::BATCH_BUDGET;
        for (task, lease_until) in leased {
            let permit = permits
                .split(1)
                .unwrap_or_else(|| unreachable!("one permit per leased task"));
            let shared = self.shared.clone();
            let ack = ack_tx.clone();
            let task_type = task.msg.r#type.clone();
            let task = Unstarted {
                task: Some(task),
                report: unstarted.clone(),
            };
            let worker = Box::pin(async move {
                // Abandoned: not started; the guard hands the task back to
                // the fetch loop, which requeues it on its own connection
                // (this worker's runtime may be shutting down).
                if shared.abandon.is_cancelled() {
                    return;
                }
                let task = task.start();
                run_task(shared, task, lease_until, ack).await;
                drop(permit);
            });
            self.inline
                .start(workers, &self.workers_rt, &task_type, worker, &mut budget);
        }
        while workers.try_join_next().is_some() {}
    }

    /// Leases up to `max` tasks, trying queues in this fetch's order. The
    /// successes in `acks` of a queue tried here are finished in the same
    /// script call that leases from it; the others in one `done` call per
    /// queue (handed to the syncer if that fails). Afterwards `acks` holds
    /// the successes of the lease calls that failed, for the next call
    /// (which a broken connection gets at once, R5) rather than the
    /// syncer's next round.
    async fn fetch(&self, max: usize, acks: &mut Vec<Ack>) -> Vec<(WireTask, DateTime<Utc>)> {
        let mut by_queue = group_acks(&self.shared, acks);
        let mut out = Vec::new();
        for queue in self.queues.order() {
            if out.len() >= max {
                break;
            }
            if self.failing.is_waiting(&queue, tokio::time::Instant::now()) {
                continue;
            }
            let lease_until =
                self.broker.now() + chrono::Duration::from_std(LEASE_DURATION).expect("30 s");
            let finishing = by_queue.remove(&queue).unwrap_or_default();
            let msgs: Vec<_> = finishing.iter().map(Ack::msg).collect();
            let reply = if msgs.is_empty() {
                self.spin
                    .wait(self.broker.dequeue(&queue, max - out.len(), lease_until))
                    .await
                    .map(|leased| (Vec::new(), leased))
            } else {
                self.spin
                    .wait(
                        self.broker
                            .done_and_dequeue(&queue, &msgs, max - out.len(), lease_until),
                    )
                    .await
            };
            match reply {
                Ok((outcomes, leased)) => {
                    self.failing.succeeded(&queue);
                    report_outcomes(&finishing, &outcomes);
                    for t in leased {
                        match t {
                            Ok(task) => out.push((task, lease_until)),
                            // It cannot run: move it to the archive (msg
                            // untouched) where operators see and delete it.
                            Err((id, err)) => {
                                tracing::error!(queue, id, %err, "dequeued task cannot be decoded; archiving it as is");
                                if let Err(e) = self.broker.archive_undecodable(&queue, &id).await {
                                    tracing::warn!(queue, id, %e, "could not archive the undecodable task");
                                }
                            }
                        }
                    }
                }
                // asynq divergence: COMPATIBILITY.md#r5
                Err(err) => {
                    let (delay, failures) =
                        self.failing.failed(&queue, tokio::time::Instant::now());
                    tracing::warn!(
                        queue,
                        %err,
                        failures,
                        "dequeue failed; trying the other queues, this one again in {delay:?}"
                    );
                    acks.extend(finishing);
                }
            }
        }
        finish_grouped(&self.shared, &self.broker, by_queue).await;
        out
    }
}

/// Waits for every worker, finishing successes as they arrive.
/// Waits for every worker, finishing successes as they arrive; at
/// `cancel_at`, or at once when `abandon` is (or gets) cancelled, cancels
/// the running ones (their workers requeue them). A `done` call under way
/// is never dropped half-way: its successes would be lost.
async fn drain(
    shared: &Shared,
    broker: &Broker,
    workers: &mut tokio::task::JoinSet<()>,
    ack_rx: &mut mpsc::UnboundedReceiver<Ack>,
    acks: &mut Vec<Ack>,
    cancel_at: tokio::time::Instant,
    abandon: &CancellationToken,
) {
    let mut open = true;
    let mut cancelled = false;
    loop {
        tokio::select! {
            biased;
            _ = abandon.cancelled(), if !cancelled => {
                cancel_running(shared);
                cancelled = true;
            }
            _ = tokio::time::sleep_until(cancel_at), if !cancelled => {
                cancel_running(shared);
                cancelled = true;
            }
            joined = workers.join_next() => if joined.is_none() { return },
            n = ack_rx.recv_many(acks, ACK_BATCH), if open => {
                if n == 0 {
                    open = false;
                }
                finish(shared, broker, acks).await;
            }
        }
    }
}

/// Cancels every running task for shutdown: its worker requeues it.
fn cancel_running(shared: &Shared) {
    for running in shared.inflight.snapshot() {
        running.cancel_with(CancelReason::Shutdown);
    }
}

/// Wakes the idle fetch loop as soon as any queue has pending work: one
/// blocking [`PendingWaiter`](crate::broker::PendingWaiter) per queue,
/// armed each time a fetch comes back empty. Without it (Redis < 6.2) the
/// loop polls every `task_check_interval`, as Go does.
///
/// Each waiter has its own `Notify` and is armed with `notify_one`, which
/// stores a permit when the waiter is still blocked in its previous BLMOVE:
/// it re-blocks as soon as that one times out, so no arming is lost between
/// the loop's sleep and the waiter's timeout.
struct Waker {
    arms: Vec<Arc<tokio::sync::Notify>>,
    wake: Arc<tokio::sync::Notify>,
}

impl Waker {
    async fn start(
        broker: &Broker,
        queues: &[String],
        interval: Duration,
        stop: &CancellationToken,
    ) -> Waker {
        let mut waker = Waker {
            arms: Vec::new(),
            wake: Arc::new(tokio::sync::Notify::new()),
        };
        for queue in queues {
            let mut waiter = match broker.pending_waiter(queue).await {
                Ok(Some(w)) => w,
                Ok(None) => {
                    tracing::info!("Redis < 6.2: idle workers poll every {interval:?}");
                    break;
                }
                Err(err) => {
                    tracing::warn!(queue, %err, "no blocking wake-up; polling instead");
                    continue;
                }
            };
            let arm = Arc::new(tokio::sync::Notify::new());
            waker.arms.push(arm.clone());
            let (wake, stop) = (waker.wake.clone(), stop.clone());
            tokio::spawn(async move {
                loop {
                    let round = async {
                        arm.notified().await;
                        match waiter.wait(interval).await {
                            Ok(true) => wake.notify_one(),
                            Ok(false) => {}
                            Err(err) => {
                                tracing::warn!(%err, "pending waiter failed");
                                tokio::time::sleep(interval).await;
                            }
                        }
                    };
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = round => {}
                    }
                }
            });
        }
        waker
    }

    /// Lets every waiter block on its queue once more (now, or right after
    /// its current wait ends).
    fn arm(&self) {
        for arm in &self.arms {
            arm.notify_one();
        }
    }

    /// Completes when a waiter saw pending work.
    async fn woken(&self) {
        self.wake.notified().await;
    }
}

/// A leased task not yet started: dropped so (its worker dropped before
/// its first poll, e.g. spawned onto a runtime shutting down), it reports
/// the task, which would otherwise stay active until its lease lapsed and
/// then be retried as failed.
struct Unstarted {
    task: Option<WireTask>,
    report: mpsc::UnboundedSender<WireTask>,
}

impl Unstarted {
    fn start(mut self) -> WireTask {
        self.task.take().expect("started once")
    }
}

impl Drop for Unstarted {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            let _ = self.report.send(task);
        }
    }
}

/// What a worker hands to the fetch loop: a success to finish with `done`.
struct Ack {
    running: Arc<Running>,
}

impl Ack {
    fn msg(&self) -> &crate::broker::proto::TaskMessage {
        &self.running.task.msg
    }
}

/// The handler's view of a task: type, payload and headers (copied, so the
/// running task keeps the message for its outcome write).
fn user_task(msg: &crate::broker::proto::TaskMessage) -> Task {
    Task::new(msg.r#type.clone(), msg.payload.clone()).with_headers(msg.headers.clone())
}

/// Groups `acks` (emptied) by queue, dropping those whose lease lapsed: the
/// recoverer owns those tasks now.
fn group_acks(shared: &Shared, acks: &mut Vec<Ack>) -> HashMap<String, Vec<Ack>> {
    let now = shared.broker.now();
    let mut by_queue: HashMap<String, Vec<Ack>> = HashMap::new();
    for ack in acks.drain(..) {
        if !ack.running.lease_valid(now) {
            tracing::warn!(
                id = ack.msg().id,
                "lease lapsed; leaving the task to the recoverer"
            );
            continue;
        }
        by_queue
            .entry(ack.msg().queue.clone())
            .or_default()
            .push(ack);
    }
    by_queue
}

/// Finishes `acks` (emptied) with one `done` call per queue.
async fn finish(shared: &Shared, broker: &Broker, acks: &mut Vec<Ack>) {
    if !acks.is_empty() {
        let by_queue = group_acks(shared, acks);
        finish_grouped(shared, broker, by_queue).await;
    }
}

async fn finish_grouped(shared: &Shared, broker: &Broker, by_queue: HashMap<String, Vec<Ack>>) {
    for (queue, acks) in by_queue {
        let msgs: Vec<_> = acks.iter().map(Ack::msg).collect();
        match broker.done(&queue, &msgs).await {
            Ok(outcomes) => report_outcomes(&acks, &outcomes),
            Err(err) => {
                tracing::warn!(queue, %err, "done failed; handing to the syncer");
                to_syncer(shared, acks);
            }
        }
    }
}

/// Logs every task that `done` found already moved (another server
/// recovered it).
fn report_outcomes(acks: &[Ack], outcomes: &[crate::broker::DoneOutcome]) {
    for (a, o) in acks.iter().zip(outcomes) {
        if *o != crate::broker::DoneOutcome::Done {
            tracing::warn!(id = a.msg().id, outcome = ?o, "done found the task moved");
        }
    }
}

/// Hands each success whose `done` failed to the syncer, which retries it
/// until its lease ends.
fn to_syncer(shared: &Shared, acks: Vec<Ack>) {
    for a in acks {
        let broker = shared.broker.clone();
        let msg = a.msg().clone();
        let _ = shared.syncer.send(SyncRequest::new(
            format!("done {}", msg.id),
            a.running.lease_until(),
            move || {
                let broker = broker.clone();
                let msg = msg.clone();
                async move { broker.done(&msg.queue, &[&msg]).await.map(|_| ()) }.boxed()
            },
        ));
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

/// Runs one task to its outcome and writes it.
async fn run_task(
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
    let result: Result<(), TaskError> = if deadline <= now {
        Err(DeadlineExceeded.into())
    } else {
        let until_deadline = (deadline - now).to_std().unwrap_or_default();
        // Built on its first poll, under the panic guard (R1).
        let (handler, hctx, htask) = (shared.handler.clone(), ctx.clone(), user_task(msg));
        let call = HandlerCall::new(move || handler.process_task(hctx, htask));
        let ended = tokio::select! {
            // Fixed order (R2): see `outcome`.
            biased;
            r = call => Ended::Handler(r.unwrap_or_else(|payload| Err(super::panic_error(payload, take_panic_location())))),
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
            // As for every outcome write: a lapsed lease means the recoverer
            // owns the task (another worker may even be running it again).
            if !running.lease_valid(shared.broker.now()) {
                tracing::warn!(
                    id = msg.id,
                    "lease lapsed; leaving the task to the recoverer"
                );
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
    if !running.lease_valid(shared.broker.now()) {
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
    if !running.lease_valid(shared.broker.now()) {
        tracing::warn!(
            id = msg.id,
            "lease lapsed; leaving the task to the recoverer"
        );
        return;
    }
    if super::is_revoke_task(&err) {
        let _ = ack.send(Ack {
            running: running.clone(),
        });
        return;
    }
    let text = super::error_text(&err);
    if msg.retried >= msg.retry || super::is_skip_retry(&err) {
        let w = running.clone();
        write(shared, running, "archive", move |b| {
            let (t, text) = (w.task.clone(), text.clone());
            async move { b.archive(&t, &text).await }.boxed()
        })
        .await;
        return;
    }
    let is_failure = (shared.is_failure)(&err);
    let delay = (shared.retry_delay_func)(msg.retried.max(0) as u32, &err, &task);
    // A delay too large for a date (e.g. Duration::MAX for "never")
    // saturates at the latest representable time instead of panicking.
    let now = shared.broker.now();
    let retry_at = chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC);
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

    /// Weighted order: a queue comes first with probability priority/Σ
    /// (Go's shuffle of priority copies); strict order is fixed.
    #[test]
    fn queue_order() {
        let qs = [
            ("critical".to_string(), 6),
            ("default".to_string(), 3),
            ("low".to_string(), 1),
        ]
        .into();
        let strict = QueueOrder::new(&qs, true);
        assert_eq!(strict.order(), ["critical", "default", "low"]);
        let weighted = QueueOrder::new(&qs, false);
        let mut firsts: HashMap<String, u32> = HashMap::new();
        for _ in 0..10_000 {
            let o = weighted.order();
            assert_eq!(o.len(), 3);
            *firsts.entry(o[0].clone()).or_default() += 1;
        }
        let share = |q: &str| f64::from(firsts[q]) / 10_000.0;
        assert!((share("critical") - 0.6).abs() < 0.03, "{firsts:?}");
        assert!((share("default") - 0.3).abs() < 0.03, "{firsts:?}");
        assert!((share("low") - 0.1).abs() < 0.03, "{firsts:?}");
        let dropped = QueueOrder::new(
            &[
                ("x".to_string(), 0),
                (" ".to_string(), 2),
                ("y".to_string(), 4),
            ]
            .into(),
            false,
        );
        assert_eq!(dropped.names(), ["y"]);
    }
}
