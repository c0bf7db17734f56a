//! Task route paths (asynqmon `task_handlers.go`'s route table): which
//! state a collection segment names, which verbs a collection and a task
//! have, and how a task-id segment splits into an id and a verb.
//!
//! Which verbs a state has is the inspector's action table
//! ([`TaskAction::allowed_in`]), which matches asynqmon's routes exactly; a
//! known path with the wrong method is 405, anything else 404.

use axum::http::Method;

use super::{ApiError, ApiResult};
use crate::inspector::TaskAction;
use crate::task::TaskState;

/// The state a collection segment names (`pending_tasks` → pending).
/// Aggregating tasks live only under `/groups/{g}/aggregating_tasks`.
pub(super) fn collection_state(name: &str) -> Option<TaskState> {
    Some(match name {
        "active_tasks" => TaskState::Active,
        "pending_tasks" => TaskState::Pending,
        "scheduled_tasks" => TaskState::Scheduled,
        "retry_tasks" => TaskState::Retry,
        "archived_tasks" => TaskState::Archived,
        "completed_tasks" => TaskState::Completed,
        _ => return None,
    })
}

/// A verb on a whole collection.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum AllVerb {
    DeleteAll,
    BatchDelete,
    RunAll,
    BatchRun,
    ArchiveAll,
    BatchArchive,
    CancelAll,
    BatchCancel,
}

impl AllVerb {
    pub(super) fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "delete_all" => AllVerb::DeleteAll,
            "batch_delete" => AllVerb::BatchDelete,
            "run_all" => AllVerb::RunAll,
            "batch_run" => AllVerb::BatchRun,
            "archive_all" => AllVerb::ArchiveAll,
            "batch_archive" => AllVerb::BatchArchive,
            "cancel_all" => AllVerb::CancelAll,
            "batch_cancel" => AllVerb::BatchCancel,
            _ => return None,
        })
    }

    /// Only `delete_all` is a DELETE; every other verb is a POST.
    pub(super) fn method(self) -> Method {
        if self == AllVerb::DeleteAll {
            Method::DELETE
        } else {
            Method::POST
        }
    }

    /// The action the verb applies.
    pub(super) fn action(self) -> TaskAction {
        match self {
            AllVerb::DeleteAll | AllVerb::BatchDelete => TaskAction::Delete,
            AllVerb::RunAll | AllVerb::BatchRun => TaskAction::Run,
            AllVerb::ArchiveAll | AllVerb::BatchArchive => TaskAction::Archive,
            AllVerb::CancelAll | AllVerb::BatchCancel => TaskAction::Cancel,
        }
    }

    /// Whether asynqmon has this verb for `state` (the action table).
    pub(super) fn allowed(self, state: TaskState) -> bool {
        self.action().allowed_in(state)
    }
}

/// The task route `method` selects for a task-id segment, and the id: a
/// DELETE takes the whole segment as the id; a POST splits the verb off
/// at the last `:`.
pub(super) fn item_route(
    method: &Method,
    state: TaskState,
    segment: &str,
) -> Option<(TaskAction, String)> {
    let (verb, id) = match *method {
        Method::DELETE => (TaskAction::Delete, segment),
        Method::POST => {
            let (id, verb) = segment.rsplit_once(':')?;
            let verb = match verb {
                "run" => TaskAction::Run,
                "archive" => TaskAction::Archive,
                "cancel" => TaskAction::Cancel,
                _ => return None,
            };
            (verb, id)
        }
        _ => return None,
    };
    verb.allowed_in(state).then(|| (verb, id.to_string()))
}

/// [`item_route`], or 405 when another method has a route there, else 404.
pub(super) fn resolve_item(
    method: &Method,
    state: TaskState,
    segment: &str,
) -> ApiResult<(TaskAction, String)> {
    if let Some(found) = item_route(method, state, segment) {
        return Ok(found);
    }
    let other = [Method::DELETE, Method::POST]
        .iter()
        .any(|m| m != method && item_route(m, state, segment).is_some());
    Err(if other {
        ApiError::method_not_allowed()
    } else {
        ApiError::not_found("404 page not found")
    })
}

/// The tasks a route addresses: one state's container of a queue, or one
/// group's aggregating tasks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Target<'a> {
    pub queue: &'a str,
    pub state: TaskState,
    pub group: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// asynqmon's route table: which verbs each state has.
    #[test]
    fn verbs_per_state() {
        use TaskState::*;
        let all = |v: &str| {
            [
                Active,
                Pending,
                Scheduled,
                Retry,
                Archived,
                Completed,
                Aggregating,
            ]
            .into_iter()
            .filter(|s| AllVerb::parse(v).unwrap().allowed(*s))
            .collect::<Vec<_>>()
        };
        assert_eq!(
            all("delete_all"),
            [Pending, Scheduled, Retry, Archived, Completed, Aggregating]
        );
        assert_eq!(all("run_all"), [Scheduled, Retry, Archived, Aggregating]);
        assert_eq!(all("archive_all"), [Pending, Scheduled, Retry, Aggregating]);
        assert_eq!(all("cancel_all"), [Active]);
        assert_eq!(AllVerb::parse("nope"), None);
    }

    /// A DELETE takes the whole segment as the id; a POST splits at the
    /// last `:`; the other method of a known path is 405, else 404.
    #[test]
    fn task_segments() {
        let post = Method::POST;
        let delete = Method::DELETE;
        assert_eq!(
            item_route(&delete, TaskState::Pending, "a:b"),
            Some((TaskAction::Delete, "a:b".to_string()))
        );
        assert_eq!(
            item_route(&post, TaskState::Retry, "a:b:run"),
            Some((TaskAction::Run, "a:b".to_string()))
        );
        assert_eq!(item_route(&post, TaskState::Completed, "a:run"), None);
        assert_eq!(
            resolve_item(&post, TaskState::Completed, "a")
                .unwrap_err()
                .status,
            axum::http::StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            resolve_item(&delete, TaskState::Active, "a")
                .unwrap_err()
                .status,
            axum::http::StatusCode::NOT_FOUND
        );
        assert_eq!(
            resolve_item(&delete, TaskState::Active, "a:cancel")
                .unwrap_err()
                .status,
            axum::http::StatusCode::METHOD_NOT_ALLOWED
        );
    }
}
