//! Task listing, lookup and task mutations of the [`Inspector`].
//!
//! Go: `inspector.go` (`List*Tasks`, `GetTaskInfo`, `RunTask`,
//! `ArchiveTask`, `DeleteTask`, `RunAll*`, `ArchiveAll*`, `DeleteAll*`,
//! `UpdateTaskPayload`; wire spec §9.1–9.4, §10, §11). Each method validates
//! its arguments, calls one broker method and maps the result.
//!
//! Deviations from Go (`COMPATIBILITY.md`, entries G3 and T1–T7): archive
//! writes delete the hashes of the tasks they trim and keep at most
//! [`MAX_ARCHIVE_SIZE`] tasks (Go leaves the hashes and keeps 9,999); bulk
//! deletes of pending and aggregating tasks release the tasks' unique locks;
//! a corrupt msg is listed as [`TaskRow::Corrupt`] instead of being dropped
//! silently; a zero page number or size is refused.
//!
//! [`MAX_ARCHIVE_SIZE`]: crate::broker::MAX_ARCHIVE_SIZE

use chrono::{DateTime, Utc};

use super::Inspector;
use super::actions::{TaskAction, allowed_for_container};
use crate::broker::Page;
use crate::broker::proto::TaskMessage;
use crate::error::{Error, Result};
use crate::task::{EnqueueOptions, Task, TaskInfo, TaskState};

pub use crate::task::TaskRow;

/// A listed task as a row (wire spec §9.1, §11): `NextProcessAt` is `now`
/// for pending, the score for scheduled and retry, `None` otherwise;
/// `is_orphaned`: see [`is_orphaned`].
pub(super) fn row_of(
    id: String,
    msg: Result<TaskMessage>,
    result: Option<Vec<u8>>,
    score: Option<i64>,
    state: TaskState,
    now: DateTime<Utc>,
) -> TaskRow {
    let msg = match msg {
        Ok(msg) => msg,
        Err(e) => {
            return TaskRow::Corrupt {
                id,
                state,
                error: e.to_string(),
            };
        }
    };
    let next = match state {
        TaskState::Pending => Some(now),
        TaskState::Scheduled | TaskState::Retry => {
            score.and_then(|s| DateTime::from_timestamp(s, 0))
        }
        _ => None,
    };
    let orphaned = is_orphaned(state, score, now);
    TaskRow::Task(TaskInfo::from_message(msg, state, next, result, orphaned))
}

/// An active task is orphaned when its lease expired (expiry ≤ now, as Go's
/// `ListActiveTasks`) or when it has no lease entry at all (issue 12 R4: Go
/// shows those as running forever). `lease` is the expiry, unix s.
// asynq divergence: COMPATIBILITY.md#r4
fn is_orphaned(state: TaskState, lease: Option<i64>, now: DateTime<Utc>) -> bool {
    state == TaskState::Active && lease.is_none_or(|s| s <= now.timestamp())
}

impl Inspector {
    /// One page of the tasks of `queue` in `state` (Go `ListPendingTasks`,
    /// `ListActiveTasks`, `ListScheduledTasks`, `ListRetryTasks`,
    /// `ListArchivedTasks`, `ListCompletedTasks`; wire spec §9.1).
    ///
    /// Order: pending and active from the next-to-run (oldest) end of the
    /// list; scheduled, retry, archived and completed by ascending score
    /// (archived: oldest first, as Go's code does). `next_process_at`: now
    /// for pending, the score (whole seconds) for scheduled and retry, `None`
    /// otherwise. Active rows are `is_orphaned` when their lease expired
    /// (expiry ≤ now) or is missing (issue 12 R4). A task
    /// whose hash is missing is skipped; one whose msg does not decode is a
    /// [`TaskRow::Corrupt`]. A page past the end is empty.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::InvalidArgument`] for a
    /// zero page number or size and for [`TaskState::Aggregating`] (use
    /// [`Inspector::list_aggregating_tasks`]), [`Error::QueueNotFound`],
    /// [`Error::Redis`].
    pub async fn list_tasks(
        &self,
        queue: &str,
        state: TaskState,
        page: Page,
    ) -> Result<Vec<TaskRow>> {
        self.broker.check_queue_name(queue)?;
        // A bad page is reported before a bad state (the broker checks it
        // again where it computes the ranges).
        page.validate()?;
        if state == TaskState::Aggregating {
            return Err(Error::InvalidArgument(
                "aggregating tasks are listed per group: use list_aggregating_tasks".into(),
            ));
        }
        self.list_container(queue, state, None, page).await
    }

    /// One page of the aggregating tasks of `group`, by ascending time added
    /// (Go `ListAggregatingTasks`; wire spec §9.1). `next_process_at` is
    /// `None`. Rows as in [`Inspector::list_tasks`].
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::InvalidArgument`] for a
    /// zero page number or size, [`Error::QueueNotFound`], [`Error::Redis`].
    pub async fn list_aggregating_tasks(
        &self,
        queue: &str,
        group: &str,
        page: Page,
    ) -> Result<Vec<TaskRow>> {
        self.broker.check_queue_name(queue)?;
        self.list_container(queue, TaskState::Aggregating, Some(group), page)
            .await
    }

    /// Up to `count` tasks of `queue`'s `state` (of `group`, aggregating)
    /// from position `offset` (in
    /// tab order), one Redis call reading at most `max_bytes` of task data
    /// (at least one task), as rows; the ids read (rows plus ids whose hash
    /// is gone); and whether the byte budget stopped the read before
    /// `count` (read on from `offset` plus the ids read). A missing queue
    /// reads empty.
    ///
    /// Errors: [`Error::InvalidArgument`] for aggregating without a group,
    /// [`Error::Redis`].
    pub(crate) async fn read_tasks_from(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        offset: usize,
        count: usize,
        max_bytes: u64,
    ) -> Result<(Vec<TaskRow>, usize, bool)> {
        let r = self
            .broker
            .read_chunk(queue, state, group, offset as u64, count as u64, max_bytes)
            .await?;
        let now = self.broker.now();
        let rows = r
            .rows
            .into_iter()
            .map(|t| row_of(t.id, t.msg, t.result, t.score, state, now))
            .collect();
        Ok((rows, r.read, r.stopped))
    }

    /// One page of the container of `state`, or of `group` when given (the
    /// broker decides the ranges and the order).
    async fn list_container(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        page: Page,
    ) -> Result<Vec<TaskRow>> {
        let tasks = self
            .broker
            .list_task_page(queue, state, group, page)
            .await?;
        let now = self.broker.now();
        Ok(tasks
            .into_iter()
            .map(|t| row_of(t.id, t.msg, t.result, t.score, state, now))
            .collect())
    }

    /// Everything about one task (Go `Inspector.GetTaskInfo`; wire spec §9.2,
    /// §11). `next_process_at`: the score for scheduled and retry, now
    /// truncated to whole seconds for pending (as Go), `None` otherwise;
    /// `is_orphaned` is set for an active task whose lease expired or is
    /// missing (Go: always false; issue 12 R4).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::TaskNotFound`], [`Error::FailedPrecondition`] for an unknown
    /// state string, [`Error::Corrupt`] when msg does not decode,
    /// [`Error::Redis`].
    pub async fn get_task_info(&self, queue: &str, id: &str) -> Result<TaskInfo> {
        self.broker.check_queue_name(queue)?;
        let found = self.broker.task_info(queue, id).await?;
        let now = self.broker.now();
        let next = match found.state {
            TaskState::Pending => DateTime::from_timestamp(now.timestamp(), 0),
            TaskState::Scheduled | TaskState::Retry => {
                found.score.and_then(|s| DateTime::from_timestamp(s, 0))
            }
            _ => None,
        };
        let orphaned = is_orphaned(found.state, found.score, now);
        Ok(TaskInfo::from_message(
            found.msg,
            found.state,
            next,
            found.result,
            orphaned,
        ))
    }

    /// Moves a scheduled, retry, archived, completed or aggregating task to
    /// pending (Go `Inspector.RunTask`; wire spec §9.3). An aggregating task
    /// leaves its group (and the group leaves the queue's group set when
    /// empty). The hash gets `state=pending` only: no `pending_since`, no
    /// counters, as Go.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::TaskNotFound`], [`Error::FailedPrecondition`] `task is
    /// already running` (active) or `task is already in pending state`,
    /// [`Error::FailedPrecondition`] for a left-behind task (its hash names
    /// a state whose container does not hold it; R12, delete it instead),
    /// [`Error::Corrupt`] (unknown state), [`Error::Redis`].
    pub async fn run_task(&self, queue: &str, id: &str) -> Result<()> {
        self.broker.check_queue_name(queue)?;
        self.broker.run_task(queue, id).await
    }

    /// Moves a pending, scheduled, retry, completed or aggregating task to
    /// the archive, scored now (Go `Inspector.ArchiveTask`; wire spec §9.3,
    /// §10). msg is not modified (no error text, no last-failed time) and no
    /// counter moves, as Go. The same script trims the archive to
    /// [`MAX_ARCHIVE_SIZE`](crate::broker::MAX_ARCHIVE_SIZE) tasks and drops
    /// those archived [`ARCHIVE_RETENTION`](crate::broker::ARCHIVE_RETENTION)
    /// ago or earlier, deleting the trimmed tasks' hashes (S16).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::TaskNotFound`], [`Error::TaskAlreadyArchived`],
    /// [`Error::FailedPrecondition`] `cannot archive task in active state.
    /// use CancelProcessing instead.` and for a left-behind task (R12),
    /// [`Error::Corrupt`] (unknown state), [`Error::Redis`].
    pub async fn archive_task(&self, queue: &str, id: &str) -> Result<()> {
        self.broker.check_queue_name(queue)?;
        self.broker.archive_task(queue, id).await
    }

    /// Deletes a task in any state but active, releasing its uniqueness lock
    /// while the lock still holds its id (Go `Inspector.DeleteTask`; wire
    /// spec §9.3). The lock is found by the hash field `unique_key` or, for a
    /// Go-enqueued group task (Go writes no such field), inside msg (R13). A
    /// left-behind task (its hash names a state whose container does not
    /// hold it, as Go's archive trim leaves them) is deleted too (R12; Go
    /// fails and can never remove it).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::TaskNotFound`], [`Error::FailedPrecondition`] `cannot delete
    /// task in active state. use CancelProcessing instead.`, or for an
    /// aggregating task an aggregation set holds, [`Error::Corrupt`]
    /// (unknown state), [`Error::Redis`].
    pub async fn delete_task(&self, queue: &str, id: &str) -> Result<()> {
        self.broker.check_queue_name(queue)?;
        self.broker.delete_task(queue, id).await
    }

    /// Moves every scheduled, retry or archived task of `queue` to pending,
    /// lowest score first; returns how many moved (Go
    /// `RunAllScheduledTasks`, `RunAllRetryTasks`, `RunAllArchivedTasks`;
    /// wire spec §9.4). Ids whose hash is missing are dropped, not counted.
    ///
    /// One script over the whole set, as Go's: on a set of many thousands
    /// of tasks it blocks Redis for as long (about 4 s per 1,000,000). For
    /// a set of any size use a job ([`Inspector::start_job`]), which works
    /// in bounded chunks; the dashboard and `/api` do.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::InvalidArgument`] for
    /// any other state, [`Error::QueueNotFound`], [`Error::Redis`].
    pub async fn run_all(&self, queue: &str, state: TaskState) -> Result<u64> {
        self.broker.check_queue_name(queue)?;
        if !allowed_for_container(TaskAction::Run, state) {
            return Err(Error::InvalidArgument(format!(
                "cannot run all {state} tasks: only scheduled, retry and archived"
            )));
        }
        self.broker.run_all_tasks(queue, state, None).await
    }

    /// Moves every aggregating task of `group` to pending and removes the
    /// group from the queue's group set; returns how many moved (Go
    /// `RunAllAggregatingTasks`; wire spec §9.4).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::Redis`].
    pub async fn run_all_aggregating(&self, queue: &str, group: &str) -> Result<u64> {
        self.broker.check_queue_name(queue)?;
        self.broker
            .run_all_tasks(queue, TaskState::Aggregating, Some(group))
            .await
    }

    /// Archives every pending, scheduled or retry task of `queue`; returns
    /// how many were archived (Go `ArchiveAllPendingTasks`,
    /// `ArchiveAllScheduledTasks`, `ArchiveAllRetryTasks`; wire spec §9.4,
    /// §10). The archive is trimmed in the same script as in
    /// [`Inspector::archive_task`].
    ///
    /// One script over the whole set, as Go's: on a set of many thousands
    /// of tasks it blocks Redis for as long (about 4 s per 1,000,000). For
    /// a set of any size use a job ([`Inspector::start_job`]), which works
    /// in bounded chunks; the dashboard and `/api` do.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::InvalidArgument`] for
    /// any other state, [`Error::QueueNotFound`], [`Error::Redis`].
    pub async fn archive_all(&self, queue: &str, state: TaskState) -> Result<u64> {
        self.broker.check_queue_name(queue)?;
        if !allowed_for_container(TaskAction::Archive, state) {
            return Err(Error::InvalidArgument(format!(
                "cannot archive all {state} tasks: only pending, scheduled and retry"
            )));
        }
        self.broker.archive_all_tasks(queue, state, None).await
    }

    /// Archives every aggregating task of `group` and removes the group from
    /// the queue's group set; returns how many were archived (Go
    /// `ArchiveAllAggregatingTasks`; wire spec §9.4, §10). The archive is
    /// trimmed as in [`Inspector::archive_task`].
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::Redis`].
    pub async fn archive_all_aggregating(&self, queue: &str, group: &str) -> Result<u64> {
        self.broker.check_queue_name(queue)?;
        self.broker
            .archive_all_tasks(queue, TaskState::Aggregating, Some(group))
            .await
    }

    /// Deletes every pending, scheduled, retry, archived or completed task of
    /// `queue`, releasing each task's lock while it holds the task's id;
    /// returns how many were deleted (Go `DeleteAll*Tasks`; wire spec §9.4).
    ///
    /// One script over the whole set, as Go's: on a set of many thousands
    /// of tasks it blocks Redis for as long (about 4 s per 1,000,000). For
    /// a set of any size use a job ([`Inspector::start_job`]), which works
    /// in bounded chunks; the dashboard and `/api` do.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::InvalidArgument`] for
    /// active and aggregating, [`Error::QueueNotFound`], [`Error::Redis`].
    pub async fn delete_all(&self, queue: &str, state: TaskState) -> Result<u64> {
        self.broker.check_queue_name(queue)?;
        if !allowed_for_container(TaskAction::Delete, state) {
            return Err(Error::InvalidArgument(format!(
                "cannot delete all {state} tasks: only pending, scheduled, retry, archived and completed"
            )));
        }
        self.broker.delete_all_tasks(queue, state, None).await
    }

    /// Deletes every aggregating task of `group`, releasing their locks, and
    /// removes the group from the queue's group set; returns how many were
    /// deleted (Go `DeleteAllAggregatingTasks`; wire spec §9.4).
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::Redis`].
    pub async fn delete_all_aggregating(&self, queue: &str, group: &str) -> Result<u64> {
        self.broker.check_queue_name(queue)?;
        self.broker
            .delete_all_tasks(queue, TaskState::Aggregating, Some(group))
            .await
    }

    /// Replaces the payload of a scheduled task and returns the updated task
    /// (Go `Inspector.UpdateTaskPayload`, asynq 0.26; wire spec §9.3). Every
    /// other msg field is kept, including fields this version does not know;
    /// `unique_key` and the lock are not recomputed, as Go.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::TaskNotFound`], [`Error::FailedPrecondition`] `cannot update
    /// task that is not in scheduled state.`, [`Error::Corrupt`] when msg
    /// does not decode, [`Error::Redis`].
    pub async fn update_task_payload(
        &self,
        queue: &str,
        id: &str,
        payload: Vec<u8>,
    ) -> Result<TaskInfo> {
        self.broker.check_queue_name(queue)?;
        let (msg, score, result) = self.broker.update_task_payload(queue, id, &payload).await?;
        let next = score.and_then(|s| DateTime::from_timestamp(s, 0));
        Ok(TaskInfo::from_message(
            msg,
            TaskState::Scheduled,
            next,
            result,
            false,
        ))
    }

    /// Replaces the payload of a pending, scheduled, retry or archived task
    /// and returns the updated task (the dashboard's payload edit, issue 17;
    /// Go edits only scheduled tasks: COMPATIBILITY.md N4). Every other msg
    /// field is kept (Retried, LastErr, unknown fields); the task stays
    /// where it is; `unique_key` and the lock are not recomputed.
    ///
    /// Errors: [`Error::InvalidQueueName`], [`Error::QueueNotFound`],
    /// [`Error::TaskNotFound`], [`Error::FailedPrecondition`] for an active,
    /// aggregating or completed task, [`Error::Corrupt`] when msg does not
    /// decode, [`Error::Redis`].
    pub async fn edit_task_payload(
        &self,
        queue: &str,
        id: &str,
        payload: Vec<u8>,
    ) -> Result<TaskInfo> {
        self.broker.check_queue_name(queue)?;
        let (msg, state, score, result) =
            self.broker.edit_task_payload(queue, id, &payload).await?;
        let state: TaskState = state
            .parse()
            .map_err(|_| Error::Internal(format!("unexpected state {state}")))?;
        let next = match state {
            TaskState::Pending => Some(self.broker.now()),
            _ if state == TaskState::Scheduled || state == TaskState::Retry => {
                score.and_then(|s| DateTime::from_timestamp(s, 0))
            }
            _ => None,
        };
        Ok(TaskInfo::from_message(msg, state, next, result, false))
    }

    /// Enqueues `task` with `options`, as [`Client::enqueue`](crate::Client::enqueue)
    /// does (the dashboard's enqueue form, issue 17). Errors: as
    /// `Client::enqueue`.
    pub async fn enqueue(&self, task: &Task, options: EnqueueOptions) -> Result<TaskInfo> {
        crate::Client::from_broker(self.broker.clone())
            .enqueue(task, options)
            .await
    }
}
