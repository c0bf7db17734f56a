//! The fetch loop: leases tasks, starts a worker per task and finishes the
//! successes workers hand back. Go: `processor.go` (`exec`, `shutdown`;
//! wire spec §7.2; S15, S27).
//!
//! Shape: one fetch loop, on a thread of its own
//! ([`fetch_thread`](super::fetch_thread): its own runtime and Redis
//! connection, busy-polling for lease replies when Redis is on this host,
//! [`reply_spin`](super::reply_spin)), holds a semaphore of `concurrency`
//! permits. When permits are free it leases up to that many tasks in one
//! script call per queue (in weighted-random or strict order,
//! [`queue_order`](super::queue_order)), starts one worker per task
//! ([`worker`](super::worker); spawned, or for task types learned to be
//! quick polled once in place and spawned only when still pending:
//! [`inline_start`]; workers belong to the caller's
//! runtime either way), and when every queue is empty waits for the idle
//! waker ([`waker`](super::waker)) or `task_check_interval` before looking
//! again; a queue whose lease call failed is tried again at once, then with
//! a backoff up to 1 s ([`backoff`](super::backoff), R5). Leasing never
//! runs ahead of a free permit (as Go: active tasks are running tasks).
//! Before it leases, the loop yields once so that workers about to finish
//! do so: one call then carries a whole batch of finishes and leases. At
//! concurrency ≥ 64 two such calls are in flight, each with up to half the
//! permits, so Redis and the workers overlap ([`calls_in_flight`];
//! BENCHMARKS.md).
//!
//! Outcomes have two writers. Successes without retention and revokes are
//! finished here, by the fetch loop ([`acks`](super::acks)): in the same
//! script call that leases the next tasks of their queue
//! (`done_and_dequeue`), or with one `done` call per queue when it is not
//! leasing from it. Retry, archive and complete are written by the worker
//! ([`worker`](super::worker)). No write happens once the local lease has
//! lapsed: the recoverer owns the task then. A failed write goes to the
//! syncer.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures_util::stream::{FuturesUnordered, StreamExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::sync::CancellationToken;

use super::acks::{
    ACK_BATCH, finish, finish_grouped, group_acks, record_finished, replay_if_moved,
    report_outcomes,
};
use super::backoff::FailingQueues;
use super::inflight::CancelReason;
use super::inline_start::{self, InlineStart};
use super::panic_guard::install_panic_hook;
use super::queue_order::QueueOrder;
use super::reply_spin::ReplySpin;
use super::waker::Waker;
use super::worker::{Ack, Shared, run_task};
use crate::broker::proto::WireTask;
use crate::broker::{Broker, LEASE_DURATION};

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
        replay_if_moved(&self.shared, &self.broker).await;
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
                    record_finished(&self.shared, &finishing, &outcomes);
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
