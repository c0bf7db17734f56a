//! The fetch loop's outcome writes: successes (without retention) and
//! revokes, which workers hand over as an [`Ack`]. The fetch loop groups
//! them by queue and finishes them with `done`: in the script call that
//! leases the next tasks of their queue (`done_and_dequeue`), or with one
//! `done` call per queue when it is not leasing from it. A success whose
//! lease lapsed is dropped (the recoverer owns it); a failed `done` goes to
//! the syncer. The worker's own writes (retry, archive, complete) are in
//! [`worker`](super::worker).

use std::collections::HashMap;

use futures_util::FutureExt;

use super::lease::may_write_outcome;
use super::syncer::SyncRequest;
use super::worker::{Ack, Shared};
use crate::broker::{Broker, DoneOutcome};

/// Most successes finished in one script call.
pub(super) const ACK_BATCH: usize = 256;

/// Groups `acks` (emptied) by queue, dropping those whose lease lapsed: the
/// recoverer owns those tasks now.
pub(super) fn group_acks(shared: &Shared, acks: &mut Vec<Ack>) -> HashMap<String, Vec<Ack>> {
    let now = shared.broker.now();
    let mut by_queue: HashMap<String, Vec<Ack>> = HashMap::new();
    for ack in acks.drain(..) {
        if !may_write_outcome(&ack.running, now) {
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
pub(super) async fn finish(shared: &Shared, broker: &Broker, acks: &mut Vec<Ack>) {
    if !acks.is_empty() {
        let by_queue = group_acks(shared, acks);
        finish_grouped(shared, broker, by_queue).await;
    }
}

/// Finishes each queue's acks of `by_queue` with one `done` call; those of a
/// call that fails go to the syncer.
pub(super) async fn finish_grouped(
    shared: &Shared,
    broker: &Broker,
    by_queue: HashMap<String, Vec<Ack>>,
) {
    for (queue, acks) in by_queue {
        let msgs: Vec<_> = acks.iter().map(Ack::msg).collect();
        match broker.done(&queue, &msgs).await {
            Ok(outcomes) => {
                report_outcomes(&acks, &outcomes);
                record_finished(shared, &acks, &outcomes);
            }
            Err(err) => {
                tracing::warn!(queue, %err, "done failed; handing to the syncer");
                to_syncer(shared, acks);
            }
        }
    }
}

/// Remembers the successes `done` finished, for a replay after a change
/// of master ([`ack_replay`](super::ack_replay)).
pub(super) fn record_finished(shared: &Shared, acks: &[Ack], outcomes: &[DoneOutcome]) {
    let finished = acks
        .iter()
        .zip(outcomes)
        .filter(|(_, o)| **o == DoneOutcome::Done)
        .map(|(a, _)| &a.running);
    shared
        .replay
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .record(finished);
}

/// Finishes again, on the new master, the successes of the moments before
/// a change of master (behind Sentinel; a no-op elsewhere).
pub(super) async fn replay_if_moved(shared: &Shared, broker: &Broker) {
    let pending = shared
        .replay
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take_if_moved(broker);
    if !pending.is_empty() {
        super::ack_replay::replay(broker, pending, ACK_BATCH).await;
    }
}

/// Logs every task that `done` found already moved (another server
/// recovered it).
pub(super) fn report_outcomes(acks: &[Ack], outcomes: &[DoneOutcome]) {
    for (a, o) in acks.iter().zip(outcomes) {
        if *o != DoneOutcome::Done {
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
