//! Batch enqueue: many tasks in pipelined round trips. Go master (after
//! v0.26.0): `Client.BatchEnqueueContext` (wire spec §6.20).

use super::{Client, NewTask};
use crate::error::{Error, Result};
use crate::task::{EnqueueOptions, Task, TaskInfo};

/// The outcome of one task of [`Client::enqueue_batch`]: its [`TaskInfo`]
/// as [`Client::enqueue`] returns it, or why it was not enqueued.
pub type BatchResult = Result<TaskInfo>;

impl Client {
    /// Enqueues many tasks, each with its own options, as
    /// [`Client::enqueue`] would one by one, in a few pipelined round trips
    /// (Go master `Client.BatchEnqueueContext`, after v0.26.0). Not atomic
    /// (no `MULTI`): each task is written or refused on its own, and a
    /// refusal never stops the others.
    ///
    /// Sends one `SADD asynq:queues` with every distinct queue, then the
    /// same Enqueue (pending) and Schedule (scheduled) scripts as single
    /// enqueue, [`BATCH_CHUNK`](crate::broker::BATCH_CHUNK) tasks (1,000) per pipeline; on a Redis
    /// Cluster one pipeline per queue slot and chunk. Each stored task
    /// (hash fields, message, list or zset score) is what
    /// [`Client::enqueue`] stores for the same task and options.
    ///
    /// Returns one [`BatchResult`] per task, in input order:
    /// - `Ok(info)`: written, `info.state` pending or scheduled;
    /// - the validation errors of [`Client::enqueue`]
    ///   ([`Error::EmptyTaskType`], [`Error::InvalidQueueName`],
    ///   [`Error::EmptyTaskId`], [`Error::UniqueTtlTooShort`],
    ///   [`Error::EmptyGroup`], ...), nothing written for that task;
    /// - [`Error::InvalidArgument`] for a unique task or one with a group
    ///   (refused client-side, as Go: enqueue those with
    ///   [`Client::enqueue`]), nothing written;
    /// - [`Error::TaskIdConflict`] when a task with its id already exists
    ///   (Go skips it silently; the existing task is untouched);
    /// - [`Error::Redis`] for an error reply to its script, or for each task
    ///   of a round trip that failed (Redis unreachable: those tasks may or
    ///   may not be written) and of the round trips not sent after it.
    ///
    /// Errors (nothing written): [`Error::Redis`] when the `SADD` fails.
    // asynq divergence: COMPATIBILITY.md#c6
    pub async fn enqueue_batch(
        &self,
        tasks: &[(Task, EnqueueOptions)],
    ) -> Result<Vec<BatchResult>> {
        let mut out: Vec<Option<BatchResult>> = Vec::with_capacity(tasks.len());
        let mut ready: Vec<NewTask> = Vec::with_capacity(tasks.len());
        let mut ready_at: Vec<usize> = Vec::with_capacity(tasks.len());
        for (i, (task, options)) in tasks.iter().enumerate() {
            match self.prepare(task, options.clone()).and_then(batchable) {
                Ok(new) => {
                    ready.push(new);
                    ready_at.push(i);
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        let writes: Vec<_> = ready
            .iter()
            .map(|new| (new.msg.clone(), new.target.clone()))
            .collect();
        let written = self.broker.enqueue_batch(&writes).await?;
        for ((new, at), result) in ready.into_iter().zip(ready_at).zip(written) {
            out[at] = Some(result.map(|()| new.into_info()));
        }
        Ok(out
            .into_iter()
            .map(|r| r.expect("every task has a result"))
            .collect())
    }
}

/// Refuses what a batch does not take: a uniqueness lock or a group (Go
/// master refuses both in `BatchEnqueueContext`).
fn batchable(new: NewTask) -> Result<NewTask> {
    if new.unique.is_some() {
        return Err(Error::InvalidArgument(format!(
            "task {} ({}): batch enqueue takes no unique task; enqueue it with Client::enqueue",
            new.msg.id, new.msg.r#type
        )));
    }
    if !new.msg.group_key.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "task {} ({}): batch enqueue takes no group task; enqueue it with Client::enqueue",
            new.msg.id, new.msg.r#type
        )));
    }
    Ok(new)
}
