//! Behind Sentinel, successes finished just before a change of master are
//! finished again on the new master (issue 14 §4, COMPATIBILITY.md K15).
//!
//! Redis replicates asynchronously: a `done` the old master acknowledged in
//! the moment before its replica was promoted may never reach the new
//! master, where the task is still active under its lease. Left alone, the
//! recoverer would run it a second time once that lease expires. The fetch
//! loop keeps the successes it finished in the last [`REPLAY_WINDOW`]
//! (at most [`REPLAY_MAX`]) and, when the broker's master generation
//! changes, sends `done` for them again on the new master. `done` skips a
//! task that is no longer active (its first `done` did arrive), so only
//! the lost ones are finished. Nothing is kept on other deployments.
//!
//! A lease lost the same way (the old master leased the task, the new one
//! never heard of it) leaves the task pending on the new master, where it
//! is leased again. The ids replayed at a change of master are therefore
//! kept for [`RERUN_GUARD`]: a task of this process leased again under one
//! of them is finished without calling its handler a second time.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::inflight::Running;
use crate::broker::{Broker, DoneOutcome, Topology};

/// How long a finished success is kept for a replay: well past the
/// replication lag a failover loses (sub-second on a healthy replica; a
/// replica lagging more is not promoted by Sentinel's default checks).
pub(super) const REPLAY_WINDOW: Duration = Duration::from_secs(10);
/// Most successes kept (the oldest go first).
pub(super) const REPLAY_MAX: usize = 50_000;
/// How long, after a change of master, a success of the moments before it
/// is not run again when its task is leased again (its lease had not
/// reached the new master either).
pub(super) const RERUN_GUARD: Duration = Duration::from_secs(60);

/// The recent successes and the master generation they were finished at.
pub(super) struct AckReplay {
    enabled: bool,
    generation: u64,
    recent: VecDeque<(Instant, Arc<Running>)>,
    /// Ids replayed at the last change of master, and when.
    replayed: HashMap<String, Instant>,
}

impl AckReplay {
    /// Kept only behind Sentinel (the only deployment whose master changes).
    pub(super) fn new(broker: &Broker) -> Self {
        AckReplay {
            enabled: broker.topology() == Topology::Sentinel,
            generation: broker.master_generation(),
            recent: VecDeque::new(),
            replayed: HashMap::new(),
        }
    }

    /// Remembers successes `done` just finished.
    pub(super) fn record<'a>(&mut self, finished: impl IntoIterator<Item = &'a Arc<Running>>) {
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        for r in finished {
            self.recent.push_back((now, r.clone()));
        }
        while self.recent.len() > REPLAY_MAX
            || self
                .recent
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > REPLAY_WINDOW)
        {
            self.recent.pop_front();
        }
    }

    /// The successes to finish again when the master changed since the
    /// last call, grouped by queue (emptied from the memory).
    pub(super) fn take_if_moved(&mut self, broker: &Broker) -> HashMap<String, Vec<Arc<Running>>> {
        let mut out: HashMap<String, Vec<Arc<Running>>> = HashMap::new();
        let g = broker.master_generation();
        if !self.enabled || g == self.generation {
            return out;
        }
        self.generation = g;
        let now = Instant::now();
        self.replayed
            .retain(|_, at| now.duration_since(*at) < RERUN_GUARD);
        for (_, r) in self.recent.drain(..) {
            self.replayed.insert(r.task.msg.id.clone(), now);
            out.entry(r.task.msg.queue.clone()).or_default().push(r);
        }
        out
    }

    /// Whether the task `id` succeeded here just before the last change of
    /// master (within [`RERUN_GUARD`] of it): leased again on the new
    /// master, it is finished without running. Forgets the id.
    pub(super) fn succeeded_before_move(&mut self, id: &str) -> bool {
        if self.replayed.is_empty() {
            return false;
        }
        match self.replayed.remove(id) {
            Some(at) => at.elapsed() < RERUN_GUARD,
            None => false,
        }
    }
}

/// Sends `done` again for `replay` (from [`AckReplay::take_if_moved`]) in
/// batches of `batch`; logs how many were lost and are now finished.
pub(super) async fn replay(
    broker: &Broker,
    replay: HashMap<String, Vec<Arc<Running>>>,
    batch: usize,
) {
    for (queue, runs) in replay {
        let mut refinished = 0usize;
        for chunk in runs.chunks(batch) {
            let msgs: Vec<_> = chunk.iter().map(|r| &r.task.msg).collect();
            match broker.done(&queue, &msgs).await {
                Ok(outcomes) => {
                    refinished += outcomes.iter().filter(|o| **o == DoneOutcome::Done).count();
                }
                Err(err) => {
                    tracing::warn!(queue, %err, "replaying successes on the new master failed");
                }
            }
        }
        if refinished > 0 {
            tracing::warn!(
                queue,
                refinished,
                "after the change of master, finished again successes the former master had not replicated"
            );
        }
    }
}
