//! Worker-side writes: lease, finish, retry, archive, extend the lease
//! (the maintenance loops' writes, forward and recover among them:
//! `engine/maintenance.rs`).
//!
//! Go: `rdb.Dequeue`, `Done`, `MarkAsComplete`, `Requeue`, `Retry`,
//! `Archive`, `ForwardIfReady`, `ExtendLease`, `ListLeaseExpired`,
//! `DeleteExpiredCompletedTasks`, `ReclaimStaleAggregationSets` (wire spec
//! §6.4–6.15). Dequeue and Done take several tasks per script call; each
//! task still moves exactly as Go's single-task script moves it.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::bad_counters::unwrap_counted;
use super::proto::{TaskMessage, WireTask};
use super::{Broker, decode_task, keys, scripts};
use crate::error::{Error, Result};

/// How long a lease lasts, at dequeue and at each extension (Go `base.LeaseDuration`).
pub const LEASE_DURATION: Duration = Duration::from_secs(30);
/// How long daily counters live after their day's first increment (Go `statsTTL`, 90 days).
pub const STATS_TTL: Duration = Duration::from_secs(90 * 24 * 3600);

const MAX_I64: i64 = i64::MAX;

/// The maintenance loops' writes (forwarder, recoverer, janitor, stale
/// aggregation sets).
mod maintenance;
pub use maintenance::{FORWARD_BATCH, RECOVER_BATCH};

/// Leased tasks as [`Broker::dequeue`] returns them: each decoded, or its id
/// with the decode error.
pub type Leased = Vec<std::result::Result<WireTask, (String, Error)>>;

/// What [`Broker::done_and_dequeue`] returns: one outcome per finished task,
/// in order, and the newly leased tasks.
pub type DoneAndDequeued = (Vec<DoneOutcome>, Leased);

/// A lease reply as Redis sends it: n ids, then their n msgs (nil when none,
/// the integer 0 when the task key could not be read or written).
type LeaseReply = Vec<redis::Value>;

/// Decodes a lease reply `{id_1..id_n, msg_1..msg_n}` (see
/// `lib/lease_tasks.lua`): ids leftmost first, taken from the last; an id
/// whose msg is nil was not leased; an id whose msg is an integer was leased
/// although its key is not a readable task hash (e.g. a string someone SET
/// there) and comes back as an [`Error::Corrupt`] entry, for the caller to
/// archive as undecodable.
// asynq divergence: COMPATIBILITY.md#w13
fn decode_leased(queue: &str, mut reply: LeaseReply) -> Result<Leased> {
    if !reply.len().is_multiple_of(2) {
        return Err(Error::Internal(format!(
            "lease script replied {} values, not ids and their msgs",
            reply.len()
        )));
    }
    let msgs = reply.split_off(reply.len() / 2);
    let mut out = Vec::with_capacity(msgs.len());
    for (id, msg) in reply.into_iter().zip(msgs).rev() {
        let id = match id {
            redis::Value::BulkString(id) => String::from_utf8_lossy(&id).into_owned(),
            other => {
                return Err(Error::Internal(format!(
                    "lease script replied {other:?} for an id"
                )));
            }
        };
        match msg {
            redis::Value::Nil => {}
            redis::Value::BulkString(msg) => {
                out.push(decode_task(&keys::task_key(queue, &id), &msg).map_err(|e| (id, e)))
            }
            redis::Value::Int(_) => {
                let e = unreadable_key(queue, &id);
                out.push(Err((id, e)))
            }
            other => {
                return Err(Error::Internal(format!(
                    "lease script replied {other:?} for a msg"
                )));
            }
        }
    }
    Ok(out)
}

/// The error for a task whose key a script could not read or write (it
/// replied 0 for its msg): a key of another type, most likely.
fn unreadable_key(queue: &str, id: &str) -> Error {
    Error::Corrupt {
        key: keys::task_key(queue, id),
        reason: "not a readable task hash (a key of another type?)".into(),
    }
}

/// Maps a done reply (see `lib/finish_tasks.lua`: 1 when all finished, else
/// one code per task) to outcomes; exactly one per task.
fn done_outcomes(reply: redis::Value, tasks: usize) -> Result<Vec<DoneOutcome>> {
    let codes: Vec<i64> = match reply {
        redis::Value::Int(1) => return Ok(vec![DoneOutcome::Done; tasks]),
        other => redis::from_redis_value(other)
            .map_err(|e| Error::Internal(format!("done script reply: {e}")))?,
    };
    if codes.len() != tasks {
        return Err(Error::Internal(format!(
            "done script replied {} codes for {tasks} tasks",
            codes.len()
        )));
    }
    codes
        .into_iter()
        .map(|c| match c {
            1 => Ok(DoneOutcome::Done),
            0 => Ok(DoneOutcome::NotActive),
            -1 => Ok(DoneOutcome::NoLease),
            -2 => Ok(DoneOutcome::NoHash),
            other => Err(Error::Internal(format!("done script replied {other}"))),
        })
        .collect()
}

/// The integer code of a counting script's reply (see
/// [`unwrap_counted`]): bad counters it names are reported, not failed.
// asynq divergence: COMPATIBILITY.md#r6
fn counted_code(reply: redis::Value) -> Result<i64> {
    redis::from_redis_value(unwrap_counted(reply))
        .map_err(|e| Error::Internal(format!("script reply: {e}")))
}

/// Appends the finishing part of a done call's arguments (see
/// `lib/finish_tasks.lua`): n, the ids, then (position, lock) for the tasks
/// holding a unique lock.
fn finish_args(inv: &mut redis::ScriptInvocation<'_>, tasks: &[&TaskMessage]) {
    inv.arg(tasks.len());
    for t in tasks {
        inv.arg(&t.id);
    }
    for (k, t) in tasks.iter().enumerate() {
        if !t.unique_key.is_empty() {
            inv.arg(k + 1).arg(&t.unique_key);
        }
    }
}

/// Most tasks one dequeue call leases (`LEASE_MAX` of `lib/lease_tasks.lua`).
pub const LEASE_BATCH_MAX: usize = 1000;

/// Appends a lease call's `max, "-max", "-(max+1)"` (see `lib/lease_tasks.lua`),
/// `max` capped at [`LEASE_BATCH_MAX`].
fn lease_args(inv: &mut redis::ScriptInvocation<'_>, max: usize) {
    let max = max.min(LEASE_BATCH_MAX);
    inv.arg(max)
        .arg(format!("-{max}"))
        .arg(format!("-{}", max + 1));
}

/// Outcome of finishing one task in a batched [`Broker::done`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DoneOutcome {
    /// Removed from active and lease, hash deleted, counted as processed.
    Done,
    /// Not in the active list (another server recovered it first).
    NotActive,
    /// In active but without a lease.
    NoLease,
    /// Its hash was already gone.
    NoHash,
}

impl Broker {
    fn stats_expiry(&self, now: DateTime<Utc>) -> i64 {
        now.timestamp() + STATS_TTL.as_secs() as i64
    }

    /// Leases up to `max` (at most [`LEASE_BATCH_MAX`] per call) pending
    /// tasks of `queue` until `lease_until` (whole unix s on the wire). Returns nothing when the queue is paused
    /// or empty. A task whose msg does not decode is returned as an error
    /// entry with its id (the caller moves it aside with
    /// [`Broker::archive_undecodable`]).
    // asynq divergence: COMPATIBILITY.md#w1, COMPATIBILITY.md#w3
    pub async fn dequeue(
        &self,
        queue: &str,
        max: usize,
        lease_until: DateTime<Utc>,
    ) -> Result<Leased> {
        let mut inv = scripts::DEQUEUE.prepare_invoke();
        inv.key(keys::pending_key(queue))
            .key(keys::paused_key(queue))
            .key(keys::active_key(queue))
            .key(keys::lease_key(queue))
            .arg(lease_until.timestamp())
            .arg(keys::task_key_prefix(queue));
        lease_args(&mut inv, max.max(1));
        let reply: LeaseReply = inv.invoke_async(&mut self.conn()).await?;
        decode_leased(queue, reply)
    }

    /// Finishes successful tasks of one queue (no retention): removes each
    /// from active and lease, deletes its hash, releases its unique lock if it
    /// still holds it, and counts the finished ones as processed. One script
    /// call for the whole batch. Returns one outcome per task, in order.
    // asynq divergence: COMPATIBILITY.md#w1
    pub async fn done(&self, queue: &str, tasks: &[&TaskMessage]) -> Result<Vec<DoneOutcome>> {
        if tasks.is_empty() {
            return Ok(Vec::new());
        }
        let now = self.now();
        let mut inv = scripts::DONE.prepare_invoke();
        inv.key(keys::active_key(queue))
            .key(keys::lease_key(queue))
            .key(keys::processed_key(queue, now.date_naive()))
            .key(keys::processed_total_key(queue))
            .arg(self.stats_expiry(now))
            .arg(MAX_I64)
            .arg(keys::task_key_prefix(queue));
        finish_args(&mut inv, tasks);
        let reply: redis::Value = inv.invoke_async(&mut self.conn()).await?;
        done_outcomes(unwrap_counted(reply), tasks.len())
    }

    /// [`Broker::done`] for `tasks`, then [`Broker::dequeue`] of up to `max`
    /// tasks (none when `max` is 0) with a lease until `lease_until` (unix s
    /// precision), in one script call on one queue: the worker's steady state
    /// costs one round trip per batch instead of two. Returns the done
    /// outcomes (one per task, in order) and the leased tasks (as
    /// `dequeue`). Errors: Redis errors; `Error::Internal` on a reply of
    /// the wrong shape.
    // asynq divergence: COMPATIBILITY.md#w1
    pub async fn done_and_dequeue(
        &self,
        queue: &str,
        tasks: &[&TaskMessage],
        max: usize,
        lease_until: DateTime<Utc>,
    ) -> Result<DoneAndDequeued> {
        let now = self.now();
        let mut inv = scripts::DONE_AND_DEQUEUE.prepare_invoke();
        inv.key(keys::active_key(queue))
            .key(keys::lease_key(queue))
            .key(keys::processed_key(queue, now.date_naive()))
            .key(keys::processed_total_key(queue))
            .key(keys::pending_key(queue))
            .key(keys::paused_key(queue))
            .arg(self.stats_expiry(now))
            .arg(MAX_I64)
            .arg(keys::task_key_prefix(queue))
            .arg(lease_until.timestamp());
        lease_args(&mut inv, max);
        finish_args(&mut inv, tasks);
        // The lease reply with the done reply appended.
        let mut reply: LeaseReply = inv.invoke_async(&mut self.conn()).await?;
        let codes = reply
            .pop()
            .ok_or_else(|| Error::Internal("done_and_dequeue replied nothing".into()))?;
        Ok((
            done_outcomes(unwrap_counted(codes), tasks.len())?,
            decode_leased(queue, reply)?,
        ))
    }

    /// Keeps a successful task as `completed` until now + its retention
    /// (Go `MarkAsComplete`): sets completed_at = now (unix s) in the message,
    /// counts it as processed and releases its lock. Errors:
    /// [`Error::TaskNotFound`] when it is no longer active/leased.
    pub async fn mark_as_complete(&self, task: &WireTask) -> Result<()> {
        let now = self.now();
        let mut task = task.clone();
        task.msg.completed_at = now.timestamp();
        let msg = &task.msg;
        let mut inv = scripts::MARK_COMPLETE.prepare_invoke();
        inv.key(keys::active_key(&msg.queue))
            .key(keys::lease_key(&msg.queue))
            .key(keys::completed_key(&msg.queue))
            .key(keys::task_key(&msg.queue, &msg.id))
            .key(keys::processed_key(&msg.queue, now.date_naive()))
            .key(keys::processed_total_key(&msg.queue));
        if !msg.unique_key.is_empty() {
            inv.key(&msg.unique_key);
        }
        inv.arg(&msg.id)
            .arg(self.stats_expiry(now))
            .arg(now.timestamp() + msg.retention)
            .arg(task.encode())
            .arg(MAX_I64);
        let reply: redis::Value = inv.invoke_async(&mut self.conn()).await?;
        self.lease_reply("mark_complete", counted_code(reply)?, msg)
    }

    /// Puts an unfinished task back at the consuming end of pending at
    /// shutdown, without counting a retry (Go `Requeue`). Errors:
    /// [`Error::TaskNotFound`] when it is no longer active/leased.
    pub async fn requeue(&self, msg: &TaskMessage) -> Result<()> {
        let code: i64 = scripts::REQUEUE
            .key(keys::active_key(&msg.queue))
            .key(keys::lease_key(&msg.queue))
            .key(keys::pending_key(&msg.queue))
            .key(keys::task_key(&msg.queue, &msg.id))
            .arg(&msg.id)
            .invoke_async(&mut self.conn())
            .await?;
        self.lease_reply("requeue", code, msg)
    }

    /// Moves a failed task to `retry`, due at `retry_at` (whole unix s), with
    /// `error_msg` and last_failed_at = now; when `is_failure` it increments
    /// Retried and counts a failure, else neither (S24; Go `Retry`). Unknown
    /// protobuf fields are kept. Errors: [`Error::TaskNotFound`].
    pub async fn retry(
        &self,
        task: &WireTask,
        retry_at: DateTime<Utc>,
        error_msg: &str,
        is_failure: bool,
    ) -> Result<()> {
        let now = self.now();
        let mut task = task.clone();
        if is_failure {
            task.msg.retried = task.msg.retried.saturating_add(1);
        }
        task.msg.error_msg = error_msg.to_string();
        task.msg.last_failed_at = now.timestamp();
        let msg = &task.msg;
        let q = &msg.queue;
        let day = now.date_naive();
        let reply: redis::Value = scripts::RETRY
            .key(keys::task_key(q, &msg.id))
            .key(keys::active_key(q))
            .key(keys::lease_key(q))
            .key(keys::retry_key(q))
            .key(keys::processed_key(q, day))
            .key(keys::failed_key(q, day))
            .key(keys::processed_total_key(q))
            .key(keys::failed_total_key(q))
            .arg(&msg.id)
            .arg(task.encode())
            .arg(retry_at.timestamp())
            .arg(self.stats_expiry(now))
            .arg(i64::from(is_failure))
            .arg(MAX_I64)
            .invoke_async(&mut self.conn())
            .await?;
        self.lease_reply("retry", counted_code(reply)?, msg)
    }

    /// Archives a failed task with `error_msg` and last_failed_at = now
    /// (Retried unchanged, as Go), counts a failure, and trims the archive to
    /// [`MAX_ARCHIVE_SIZE`](super::MAX_ARCHIVE_SIZE) tasks and
    /// [`ARCHIVE_RETENTION`](super::ARCHIVE_RETENTION), deleting trimmed
    /// hashes, in the same script (S15, S16; Go `Archive`). Errors:
    /// [`Error::TaskNotFound`].
    pub async fn archive(&self, task: &WireTask, error_msg: &str) -> Result<()> {
        let now = self.now();
        let mut task = task.clone();
        task.msg.error_msg = error_msg.to_string();
        task.msg.last_failed_at = now.timestamp();
        let msg = &task.msg;
        let q = &msg.queue;
        let day = now.date_naive();
        let cutoff = now.timestamp() - super::ARCHIVE_RETENTION.as_secs() as i64;
        let reply: redis::Value = scripts::ARCHIVE
            .key(keys::task_key(q, &msg.id))
            .key(keys::active_key(q))
            .key(keys::lease_key(q))
            .key(keys::archived_key(q))
            .key(keys::processed_key(q, day))
            .key(keys::failed_key(q, day))
            .key(keys::processed_total_key(q))
            .key(keys::failed_total_key(q))
            .arg(&msg.id)
            .arg(task.encode())
            .arg(now.timestamp())
            .arg(cutoff)
            .arg(super::MAX_ARCHIVE_SIZE)
            .arg(self.stats_expiry(now))
            .arg(MAX_I64)
            .arg(keys::task_key_prefix(q))
            .invoke_async(&mut self.conn())
            .await?;
        self.lease_reply("archive", counted_code(reply)?, msg)
    }

    fn lease_reply(&self, op: &str, code: i64, msg: &TaskMessage) -> Result<()> {
        // -2 is mark_complete's "already completed" (Go: INTERNAL).
        // asynq divergence: COMPATIBILITY.md#w7
        match code {
            1 => Ok(()),
            -2..=0 => Err(Error::TaskNotFound {
                queue: msg.queue.clone(),
                id: msg.id.clone(),
            }),
            other => Err(Error::Internal(format!("{op} script replied {other}"))),
        }
    }

    /// Extends the leases of `ids` (only those still leased) to now + 30 s
    /// (Go `ExtendLease`: `ZADD XX`). Returns the new expiry.
    pub async fn extend_lease(&self, queue: &str, ids: &[&str]) -> Result<DateTime<Utc>> {
        let until = self.now() + chrono::Duration::from_std(LEASE_DURATION).expect("30 s");
        if ids.is_empty() {
            return Ok(until);
        }
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(keys::lease_key(queue)).arg("XX");
        for id in ids {
            cmd.arg(until.timestamp()).arg(*id);
        }
        let _: i64 = cmd.query_async(&mut self.conn()).await?;
        Ok(until)
    }
}

/// Property tests of the script reply parsers (issue 12).
#[cfg(test)]
mod reply_props;
