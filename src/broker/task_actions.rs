//! The inspector's task changes: run, archive or delete one task or every
//! task of a container, and replace a scheduled task's payload.
//!
//! Go: `internal/rdb/inspect.go` (`RunTask`, `ArchiveTask`, `DeleteTask`,
//! `RunAll*`, `ArchiveAll*`, `DeleteAll*`, `UpdateTaskPayload`; wire spec
//! §9.3, §9.4). Every change is one Lua script; bulk scripts work in chunks
//! of at most 100 ids per command. Every script that writes to the archive
//! runs `scripts/lib/trim_archive.lua` in the same call (wire spec §10,
//! S16).
//!
//! Each method first checks `SISMEMBER asynq:queues <queue>` (a separate
//! command, as Go: global and per-queue keys never meet in one script).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::tasks::{Container, ensure_queue, score_of};
use super::{Broker, decode_task, keys, proto::TaskMessage, scripts};
use crate::error::{Error, Result};
use crate::task::TaskState;

/// The most tasks a queue's archive keeps (Go `maxArchiveSize`). Every write
/// to the archive drops the lowest-scored (oldest) excess and deletes those
/// tasks' hashes. Go's rank arithmetic keeps one fewer (9,999); we keep
/// exactly this many.
// asynq divergence: COMPATIBILITY.md#g3
pub const MAX_ARCHIVE_SIZE: usize = 10_000;

/// How long an archived task is kept: 90 days (Go `archivedExpirationInDays`).
/// Every write to the archive drops, with their hashes, the tasks archived at
/// or before now minus this span (counted as 90 × 86,400 s; Go subtracts 90
/// calendar days in local time, which differs by an hour across DST).
// asynq divergence: COMPATIBILITY.md#g3
pub const ARCHIVE_RETENTION: Duration = Duration::from_secs(90 * 24 * 60 * 60);

/// Unix seconds of `now - ARCHIVE_RETENTION`: archived tasks scored at or
/// below it are trimmed.
fn archive_cutoff(now: DateTime<Utc>) -> i64 {
    now.timestamp() - ARCHIVE_RETENTION.as_secs() as i64
}

/// Maps the codes shared by the single-task scripts that name no specific
/// refusal: 0 missing ([`Error::TaskNotFound`]), -3 container mismatch (a
/// left-behind task, [`Error::FailedPrecondition`]), -4 unknown state
/// ([`Error::Corrupt`]).
// asynq divergence: COMPATIBILITY.md#t3
fn task_script_error(script: &str, code: i64, queue: &str, id: &str) -> Error {
    match code {
        0 => Error::TaskNotFound {
            queue: queue.to_string(),
            id: id.to_string(),
        },
        // A hash left behind (Go's archive trim keeps the hashes of the
        // tasks it drops): data in Redis, never a 500; delete it instead.
        // asynq divergence: COMPATIBILITY.md#r12
        -3 => Error::FailedPrecondition(format!(
            "task {id} is left behind: its hash names a state whose set does not hold it \
             (queue {queue:?}); it can only be deleted"
        )),
        -4 => Error::Corrupt {
            key: format!("{} state", keys::task_key(queue, id)),
            reason: "missing or unknown task state".to_string(),
        },
        other => Error::Internal(format!("{script} script replied {other}")),
    }
}

impl Broker {
    /// Moves one task to pending (Go `rdb.RunTask`; wire spec §9.3).
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::TaskNotFound`],
    /// [`Error::FailedPrecondition`] (`task is already running`, `task is
    /// already in pending state`, and for a left-behind task: its hash
    /// names a state whose container does not hold it, R12),
    /// [`Error::Corrupt`] (unknown state), [`Error::Redis`].
    pub(crate) async fn run_task(&self, queue: &str, id: &str) -> Result<()> {
        ensure_queue(self, queue).await?;
        let code: i64 = scripts::RUN_TASK
            .key(keys::task_key(queue, id))
            .key(keys::pending_key(queue))
            .key(keys::all_groups_key(queue))
            .arg(id)
            .arg(keys::queue_prefix(queue))
            .arg(keys::group_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        match code {
            1 => Ok(()),
            -1 => Err(Error::FailedPrecondition("task is already running".into())),
            -2 => Err(Error::FailedPrecondition(
                "task is already in pending state".into(),
            )),
            other => Err(task_script_error("run_task", other, queue, id)),
        }
    }

    /// Moves one task to the archive and trims the archive, deleting the
    /// trimmed tasks' hashes (Go `rdb.ArchiveTask`; wire spec §9.3, §10).
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::TaskNotFound`],
    /// [`Error::TaskAlreadyArchived`], [`Error::FailedPrecondition`] for an
    /// active task and for a left-behind task (R12), [`Error::Corrupt`]
    /// (unknown state), [`Error::Redis`].
    pub(crate) async fn archive_task(&self, queue: &str, id: &str) -> Result<()> {
        ensure_queue(self, queue).await?;
        let now = self.now();
        let code: i64 = scripts::ARCHIVE_TASK
            .key(keys::task_key(queue, id))
            .key(keys::archived_key(queue))
            .key(keys::all_groups_key(queue))
            .arg(id)
            .arg(now.timestamp())
            .arg(archive_cutoff(now))
            .arg(MAX_ARCHIVE_SIZE)
            .arg(keys::queue_prefix(queue))
            .arg(keys::group_key_prefix(queue))
            .arg(keys::task_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        match code {
            1 => Ok(()),
            -1 => Err(Error::TaskAlreadyArchived {
                queue: queue.to_string(),
                id: id.to_string(),
            }),
            -2 => Err(Error::FailedPrecondition(
                "cannot archive task in active state. use CancelProcessing instead.".into(),
            )),
            other => Err(task_script_error("archive_task", other, queue, id)),
        }
    }

    /// Deletes one task and releases its uniqueness lock while the lock still
    /// holds the task's id (Go `rdb.DeleteTask`; wire spec §9.3). The lock
    /// is named by the hash field `unique_key` or, for a Go-enqueued group
    /// task, inside msg (R13). A left-behind task (its hash names a state
    /// whose container does not hold it, as Go's archive trim leaves them)
    /// is deleted too (R12; Go fails).
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::TaskNotFound`],
    /// [`Error::FailedPrecondition`] for an active task and for an
    /// aggregating task held by an aggregation set, [`Error::Corrupt`]
    /// (unknown state), [`Error::Redis`].
    // asynq divergence: COMPATIBILITY.md#r12, COMPATIBILITY.md#r13
    pub(crate) async fn delete_task(&self, queue: &str, id: &str) -> Result<()> {
        ensure_queue(self, queue).await?;
        let code: i64 = scripts::DELETE_TASK
            .key(keys::task_key(queue, id))
            .key(keys::all_groups_key(queue))
            .key(keys::all_aggregation_sets_key(queue))
            .arg(id)
            .arg(keys::queue_prefix(queue))
            .arg(keys::group_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        match code {
            1 | 2 => Ok(()),
            -1 => Err(Error::FailedPrecondition(
                "cannot delete task in active state. use CancelProcessing instead.".into(),
            )),
            -3 => Err(Error::FailedPrecondition(format!(
                "task {id} is being aggregated (it is in an aggregation set); try again later"
            ))),
            other => Err(task_script_error("delete_task", other, queue, id)),
        }
    }

    /// Moves every task of the zset of `state` (scheduled, retry, archived)
    /// or of `group` to pending; returns how many moved (Go
    /// `rdb.RunAll*Tasks`; wire spec §9.4). The caller picks an allowed state.
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::InvalidArgument`] for
    /// pending, active and aggregating without a group, [`Error::Redis`].
    pub(crate) async fn run_all_tasks(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
    ) -> Result<u64> {
        let container = Container::of(state, group);
        let key = container.key(queue)?;
        if container.kind() != "zset" {
            return Err(Error::InvalidArgument(format!(
                "cannot run all {} tasks",
                container.state()
            )));
        }
        ensure_queue(self, queue).await?;
        let mut inv = scripts::RUN_ALL.prepare_invoke();
        inv.key(&key).key(keys::pending_key(queue));
        if let Container::Group(_) = container {
            inv.key(keys::all_groups_key(queue));
        }
        inv.arg(keys::task_key_prefix(queue));
        if let Container::Group(group) = container {
            inv.arg(group);
        }
        let n: i64 = inv.invoke_async(&mut self.conn()).await?;
        count_of("run_all", n)
    }

    /// Moves every task of the container of `state` (pending, scheduled,
    /// retry) or of `group` to the archive, then trims the archive deleting
    /// the trimmed tasks' hashes; returns how many were archived (Go
    /// `rdb.ArchiveAll*Tasks`; wire spec §9.4, §10). The caller picks an
    /// allowed state.
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::InvalidArgument`] for
    /// aggregating without a group, [`Error::Redis`].
    pub(crate) async fn archive_all_tasks(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
    ) -> Result<u64> {
        let container = Container::of(state, group);
        let key = container.key(queue)?;
        ensure_queue(self, queue).await?;
        let now = self.now();
        let mut inv = scripts::ARCHIVE_ALL.prepare_invoke();
        inv.key(&key).key(keys::archived_key(queue));
        if let Container::Group(_) = container {
            inv.key(keys::all_groups_key(queue));
        }
        inv.arg(container.kind())
            .arg(now.timestamp())
            .arg(archive_cutoff(now))
            .arg(MAX_ARCHIVE_SIZE)
            .arg(keys::task_key_prefix(queue));
        if let Container::Group(group) = container {
            inv.arg(group);
        }
        let n: i64 = inv.invoke_async(&mut self.conn()).await?;
        count_of("archive_all", n)
    }

    /// Deletes every task of the container of `state` or of `group`,
    /// releasing each task's lock (named by its hash or inside its msg, R13)
    /// while it still holds the task's id;
    /// returns how many ids were removed (Go `rdb.DeleteAll*Tasks`; wire spec
    /// §9.4). The caller picks an allowed state.
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::InvalidArgument`] for
    /// aggregating without a group, [`Error::Redis`].
    pub(crate) async fn delete_all_tasks(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
    ) -> Result<u64> {
        let container = Container::of(state, group);
        let key = container.key(queue)?;
        ensure_queue(self, queue).await?;
        let mut inv = scripts::DELETE_ALL.prepare_invoke();
        inv.key(&key);
        if let Container::Group(_) = container {
            inv.key(keys::all_groups_key(queue));
        }
        inv.arg(container.kind())
            .arg(keys::task_key_prefix(queue))
            .arg(keys::unique_key_prefix(queue));
        if let Container::Group(group) = container {
            inv.arg(group);
        }
        let n: i64 = inv.invoke_async(&mut self.conn()).await?;
        count_of("delete_all", n)
    }

    /// Replaces the payload of a scheduled task, keeping every other field
    /// of msg, including fields this version does not know (Go
    /// `rdb.UpdateTaskPayload`; wire spec §9.3). The write is a
    /// compare-and-set on the msg read, retried when msg changed meanwhile.
    /// Returns the new message, the process-at score (whole unix seconds)
    /// and the hash's `result`.
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::TaskNotFound`],
    /// [`Error::FailedPrecondition`] `cannot update task that is not in
    /// scheduled state.`, or `task <id> changed 5 times while its payload
    /// was being updated; try again` when msg keeps changing under us,
    /// [`Error::Corrupt`], [`Error::Redis`].
    pub(crate) async fn update_task_payload(
        &self,
        queue: &str,
        id: &str,
        payload: &[u8],
    ) -> Result<(TaskMessage, Option<i64>, Option<Vec<u8>>)> {
        let (msg, _, score, result) = self
            .replace_payload(queue, id, payload, &["scheduled"], || {
                Error::FailedPrecondition(
                    "cannot update task that is not in scheduled state.".into(),
                )
            })
            .await?;
        Ok((msg, score, result))
    }

    /// Replaces the payload of a pending, scheduled, retry or archived task
    /// (the dashboard's payload edit, issue 17; beyond Go, which edits only
    /// scheduled tasks: COMPATIBILITY.md N4), as [`Broker::update_task_payload`]
    /// does. Returns the new message, the state and the score (whole unix
    /// seconds; `None` for pending) and the hash's `result`.
    ///
    /// Errors: as [`Broker::update_task_payload`], the precondition being
    /// `cannot edit the payload of a task in state <state>: only pending,
    /// scheduled, retry and archived tasks can be edited`.
    pub(crate) async fn edit_task_payload(
        &self,
        queue: &str,
        id: &str,
        payload: &[u8],
    ) -> Result<(TaskMessage, String, Option<i64>, Option<Vec<u8>>)> {
        self.replace_payload(
            queue,
            id,
            payload,
            &["pending", "scheduled", "retry", "archived"],
            || {
                Error::FailedPrecondition(
                    "cannot edit the payload of a task in this state: only pending, scheduled, retry and archived tasks can be edited".into(),
                )
            },
        )
        .await
    }

    /// The read, compare-and-set loop of both payload changes: the task
    /// must be in one of `editable` states (else `refused()`).
    async fn replace_payload(
        &self,
        queue: &str,
        id: &str,
        payload: &[u8],
        editable: &[&str],
        refused: impl Fn() -> Error,
    ) -> Result<(TaskMessage, String, Option<i64>, Option<Vec<u8>>)> {
        // Compare-and-set with retries; Go overwrites concurrent changes.
        // asynq divergence: COMPATIBILITY.md#t7
        const ATTEMPTS: usize = 5;
        ensure_queue(self, queue).await?;
        let task_key = keys::task_key(queue, id);
        let not_found = || Error::TaskNotFound {
            queue: queue.to_string(),
            id: id.to_string(),
        };
        let mut conn = self.conn();
        for _ in 0..ATTEMPTS {
            let (old, state, result): (Option<Vec<u8>>, Option<String>, Option<Vec<u8>>) =
                redis::cmd("HMGET")
                    .arg(&task_key)
                    .arg("msg")
                    .arg("state")
                    .arg("result")
                    .query_async(&mut conn)
                    .await?;
            let state = match (&old, state) {
                (None, None) => return Err(not_found()),
                (_, Some(s)) if editable.contains(&s.as_str()) => s,
                _ => return Err(refused()),
            };
            let old = old.ok_or_else(|| Error::Corrupt {
                key: format!("{task_key} msg"),
                reason: "the task hash has no msg".to_string(),
            })?;
            let mut wire = decode_task(&task_key, &old)?;
            wire.msg.payload = payload.to_vec();
            let container = match state.as_str() {
                "pending" => keys::pending_key(queue),
                "scheduled" => keys::scheduled_key(queue),
                "retry" => keys::retry_key(queue),
                _ => keys::archived_key(queue),
            };
            let (code, score): (i64, Option<Vec<u8>>) = scripts::UPDATE_TASK_PAYLOAD
                .key(&task_key)
                .key(container)
                .arg(wire.encode())
                .arg(&old[..])
                .arg(id)
                .arg(&state)
                .invoke_async(&mut conn)
                .await?;
            match code {
                1 => {
                    let score = score.as_deref().and_then(score_of);
                    return Ok((wire.msg, state, score, result.filter(|r| !r.is_empty())));
                }
                0 => return Err(not_found()),
                -1 | -2 => continue, // state or msg changed since it was read: read again
                other => {
                    return Err(Error::Internal(format!(
                        "update_task_payload script replied {other}"
                    )));
                }
            }
        }
        Err(Error::FailedPrecondition(format!(
            "task {id} changed {ATTEMPTS} times while its payload was being updated; try again"
        )))
    }
}

/// A bulk script's count as `u64`; a negative reply is a bug.
fn count_of(script: &str, n: i64) -> Result<u64> {
    u64::try_from(n).map_err(|_| Error::Internal(format!("{script} script replied {n}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_limits_match_go() {
        assert_eq!(MAX_ARCHIVE_SIZE, 10_000);
        assert_eq!(ARCHIVE_RETENTION.as_secs(), 7_776_000);
        let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        assert_eq!(archive_cutoff(now), 1_700_000_000 - 7_776_000);
    }
}
