//! Which actions a task state allows, and applying an action to one task,
//! to a list of task ids, or to a whole container.
//!
//! One table ([`TaskAction::allowed_in`]) answers "can this be done to a
//! task in that state" for the pages, `/api` (asynqmon's route table) and
//! the inspector's bulk calls (`run_all`, `archive_all`, `delete_all`).
//! Go: asynq `Inspector.RunTask`, `ArchiveTask`, `DeleteTask`,
//! `CancelProcessing` and their `*All*` forms; asynqmon `task_handlers.go`
//! (which verbs each state's routes have).

use futures_util::StreamExt;

use super::Inspector;
use crate::error::{Error, Result};
use crate::task::TaskState;

/// Actions on a list of ids in flight at once ([`Inspector::act_on_each`]).
pub const BATCH_CONCURRENCY: usize = 16;

/// What can be done to a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaskAction {
    /// Move to pending (Go `RunTask`).
    Run,
    /// Move to the archive (Go `ArchiveTask`).
    Archive,
    /// Delete (Go `DeleteTask`).
    Delete,
    /// Ask the server running it to cancel it (Go `CancelProcessing`).
    Cancel,
}

impl TaskAction {
    /// Every action, in button order.
    pub const ALL: [TaskAction; 4] = [
        TaskAction::Run,
        TaskAction::Archive,
        TaskAction::Delete,
        TaskAction::Cancel,
    ];

    /// `run`, `archive`, `delete` or `cancel`; `None` for anything else.
    pub fn parse(s: &str) -> Option<TaskAction> {
        Some(match s {
            "run" => TaskAction::Run,
            "archive" => TaskAction::Archive,
            "delete" => TaskAction::Delete,
            "cancel" => TaskAction::Cancel,
            _ => return None,
        })
    }

    /// The action's name (`run`, `archive`, `delete`, `cancel`): the last
    /// path segment of the pages' action routes.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskAction::Run => "run",
            TaskAction::Archive => "archive",
            TaskAction::Delete => "delete",
            TaskAction::Cancel => "cancel",
        }
    }

    /// The table: whether a task in `state` allows this action. Active
    /// tasks are only cancelled; everything else can be deleted; pending
    /// tasks cannot be run again, archived and completed ones not archived
    /// (S17: archived tasks run and delete). Matches asynqmon's routes.
    pub const fn allowed_in(self, state: TaskState) -> bool {
        use TaskState::*;
        match self {
            TaskAction::Run => matches!(state, Scheduled | Retry | Archived | Aggregating),
            TaskAction::Archive => matches!(state, Pending | Scheduled | Retry | Aggregating),
            TaskAction::Delete => !matches!(state, Active),
            TaskAction::Cancel => matches!(state, Active),
        }
    }

    /// The actions a task in `state` allows, in [`TaskAction::ALL`] order
    /// (derived from [`TaskAction::allowed_in`], the one table).
    pub fn for_state(state: TaskState) -> Vec<TaskAction> {
        Self::ALL
            .into_iter()
            .filter(|a| a.allowed_in(state))
            .collect()
    }
}

impl Inspector {
    /// Applies `action` to the task `id` of `queue` ([`Inspector::run_task`],
    /// [`Inspector::archive_task`], [`Inspector::delete_task`] or
    /// [`Inspector::cancel_processing`], which ignores the queue). Errors:
    /// those of the call.
    pub async fn act_on(&self, action: TaskAction, queue: &str, id: &str) -> Result<()> {
        match action {
            TaskAction::Run => self.run_task(queue, id).await,
            TaskAction::Archive => self.archive_task(queue, id).await,
            TaskAction::Delete => self.delete_task(queue, id).await,
            TaskAction::Cancel => self.cancel_processing(id).await,
        }
    }

    /// Applies `action` to every id ([`Inspector::act_on`]), at most
    /// [`BATCH_CONCURRENCY`] at once; the results keep the order of `ids`.
    pub async fn act_on_each(
        &self,
        action: TaskAction,
        queue: &str,
        ids: Vec<String>,
    ) -> Vec<(String, Result<()>)> {
        futures_util::stream::iter(ids)
            .map(|id| async move {
                let result = self.act_on(action, queue, &id).await;
                (id, result)
            })
            .buffered(BATCH_CONCURRENCY)
            .collect()
            .await
    }

    /// Applies `action` to every task of the container of `state`, or of
    /// `group`'s aggregating tasks when given; returns how many tasks it
    /// moved or deleted ([`Inspector::run_all`], [`Inspector::archive_all`],
    /// [`Inspector::delete_all`] and their `*_aggregating` forms).
    ///
    /// Errors: [`Error::InvalidArgument`] for [`TaskAction::Cancel`] (no
    /// bulk form) and for a state the action does not allow, and those of
    /// the call.
    pub async fn act_on_all(
        &self,
        action: TaskAction,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
    ) -> Result<u64> {
        match (action, group) {
            (TaskAction::Run, Some(g)) => self.run_all_aggregating(queue, g).await,
            (TaskAction::Archive, Some(g)) => self.archive_all_aggregating(queue, g).await,
            (TaskAction::Delete, Some(g)) => self.delete_all_aggregating(queue, g).await,
            (TaskAction::Run, None) => self.run_all(queue, state).await,
            (TaskAction::Archive, None) => self.archive_all(queue, state).await,
            (TaskAction::Delete, None) => self.delete_all(queue, state).await,
            (TaskAction::Cancel, _) => Err(Error::InvalidArgument(
                "cancel has no bulk form: cancel tasks one by one".into(),
            )),
        }
    }
}

/// Whether the bulk form of `action` applies to a whole container of
/// `state` (not per group): the table, except that aggregating tasks are
/// moved per group.
pub(crate) fn allowed_for_container(action: TaskAction, state: TaskState) -> bool {
    state != TaskState::Aggregating && action.allowed_in(state)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table, state by state (asynqmon's route table; S17).
    #[test]
    fn actions_per_state() {
        use TaskAction::*;
        use TaskState::*;
        let table: Vec<(TaskState, &[TaskAction])> = vec![
            (Active, &[Cancel]),
            (Pending, &[Archive, Delete]),
            (Aggregating, &[Run, Archive, Delete]),
            (Scheduled, &[Run, Archive, Delete]),
            (Retry, &[Run, Archive, Delete]),
            (Archived, &[Run, Delete]),
            (Completed, &[Delete]),
        ];
        for (state, want) in table {
            assert_eq!(TaskAction::for_state(state), want, "{state}");
        }
    }

    /// Names round-trip; anything else is no action.
    #[test]
    fn names() {
        for a in TaskAction::ALL {
            assert_eq!(TaskAction::parse(a.as_str()), Some(a));
        }
        assert_eq!(TaskAction::parse("explode"), None);
    }

    /// Bulk forms on a whole container: the table without aggregating.
    #[test]
    fn container_actions() {
        use TaskState::*;
        let states = |a: TaskAction| -> Vec<TaskState> {
            TaskState::ALL
                .into_iter()
                .filter(|s| allowed_for_container(a, *s))
                .collect()
        };
        assert_eq!(states(TaskAction::Run), [Scheduled, Retry, Archived]);
        assert_eq!(states(TaskAction::Archive), [Pending, Scheduled, Retry]);
        assert_eq!(
            states(TaskAction::Delete),
            [Pending, Scheduled, Retry, Archived, Completed]
        );
    }
}
