//! Task routes (asynqmon `task_handlers.go`): per-state lists, single,
//! batch and "all" actions, and the task detail.
//!
//! Path shapes, each one axum route whose last segment is split here:
//! - `/queues/{q}/{state}_tasks` (GET list) and
//!   `/queues/{q}/{state}_tasks:{verb}` (`delete_all` is DELETE; `batch_*`,
//!   `run_all`, `archive_all`, `cancel_all` are POST);
//! - `/queues/{q}/{state}_tasks/{id}` (DELETE) and
//!   `/queues/{q}/{state}_tasks/{id}:{run|archive|cancel}` (POST), and
//!   `/queues/{q}/tasks/{id}` (GET detail);
//! - the same two under `/queues/{q}/groups/{g}/aggregating_tasks`.
//!
//! Which verbs a state has follows asynqmon's route table exactly; a known
//! path with the wrong method is 405, anything else 404. As in asynqmon, a
//! single-task action acts on the task whatever state the path names.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Serialize;

use super::model::{GroupJson, QueueSnapshot, TaskDetail, TaskRowJson, rfc3339, task_row};
use super::{ApiError, ApiResult, batch_ids, limits, no_content, page_of, queue_snapshot};
use crate::Inspector;
use crate::inspector::{Page, TaskRow};
use crate::task::TaskState;
use crate::web::AppState;

/// Batch actions in flight at once (results keep the request's order).
const BATCH_CONCURRENCY: usize = 16;
/// Active tasks read per page by `cancel_all` (asynqmon's batch of 100).
const CANCEL_ALL_PAGE: usize = 100;

/// The state a collection segment names (`pending_tasks` → pending).
/// Aggregating tasks live only under `/groups/{g}/aggregating_tasks`.
fn collection_state(name: &str) -> Option<TaskState> {
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
enum AllVerb {
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
    fn parse(s: &str) -> Option<Self> {
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
    fn method(self) -> Method {
        if self == AllVerb::DeleteAll {
            Method::DELETE
        } else {
            Method::POST
        }
    }

    /// Whether asynqmon has this verb for `state`.
    fn allowed(self, state: TaskState) -> bool {
        use TaskState::*;
        match self {
            AllVerb::DeleteAll | AllVerb::BatchDelete => state != Active,
            AllVerb::RunAll | AllVerb::BatchRun => {
                matches!(state, Scheduled | Retry | Archived | Aggregating)
            }
            AllVerb::ArchiveAll | AllVerb::BatchArchive => {
                matches!(state, Pending | Scheduled | Retry | Aggregating)
            }
            AllVerb::CancelAll | AllVerb::BatchCancel => state == Active,
        }
    }
}

/// A verb on one task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ItemVerb {
    Delete,
    Run,
    Archive,
    Cancel,
}

impl ItemVerb {
    /// Whether asynqmon has this route for `state`.
    fn allowed(self, state: TaskState) -> bool {
        use TaskState::*;
        match self {
            ItemVerb::Delete => state != Active,
            ItemVerb::Run => matches!(state, Scheduled | Retry | Archived | Aggregating),
            ItemVerb::Archive => matches!(state, Pending | Scheduled | Retry | Aggregating),
            ItemVerb::Cancel => state == Active,
        }
    }
}

/// The task route `method` selects for a task-id segment, and the id: a
/// DELETE takes the whole segment as the id; a POST splits the verb off
/// at the last `:`.
fn item_route(method: &Method, state: TaskState, segment: &str) -> Option<(ItemVerb, String)> {
    let (verb, id) = match *method {
        Method::DELETE => (ItemVerb::Delete, segment),
        Method::POST => {
            let (id, verb) = segment.rsplit_once(':')?;
            let verb = match verb {
                "run" => ItemVerb::Run,
                "archive" => ItemVerb::Archive,
                "cancel" => ItemVerb::Cancel,
                _ => return None,
            };
            (verb, id)
        }
        _ => return None,
    };
    verb.allowed(state).then(|| (verb, id.to_string()))
}

/// [`item_route`], or 405 when another method has a route there, else 404.
fn resolve_item(method: &Method, state: TaskState, segment: &str) -> ApiResult<(ItemVerb, String)> {
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
struct Target<'a> {
    queue: &'a str,
    state: TaskState,
    group: Option<&'a str>,
}

/// `/queues/{q}/{segment}`: a list (GET `{state}_tasks`) or a collection
/// verb (`{state}_tasks:{verb}`).
pub async fn collection(
    State(state): State<AppState>,
    method: Method,
    Path((queue, segment)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Body,
) -> ApiResult {
    let (name, verb) = match segment.split_once(':') {
        Some((name, verb)) => (name, Some(verb)),
        None => (segment.as_str(), None),
    };
    if name == super::left_behind::COLLECTION {
        return super::left_behind::handle(&state, method, &queue, verb, &query).await;
    }
    let Some(task_state) = collection_state(name) else {
        return Err(ApiError::not_found("404 page not found"));
    };
    let target = Target {
        queue: &queue,
        state: task_state,
        group: None,
    };
    on_collection(&state, method, target, verb, &query, body).await
}

/// `/queues/{q}/groups/{g}/{segment}`: the group's list
/// (`aggregating_tasks`) or a verb on it (`aggregating_tasks:{verb}`).
pub async fn group_collection(
    State(state): State<AppState>,
    method: Method,
    Path((queue, group, segment)): Path<(String, String, String)>,
    Query(query): Query<HashMap<String, String>>,
    body: Body,
) -> ApiResult {
    let (name, verb) = match segment.split_once(':') {
        Some((name, verb)) => (name, Some(verb)),
        None => (segment.as_str(), None),
    };
    if name != "aggregating_tasks" {
        return Err(ApiError::not_found("404 page not found"));
    }
    let target = Target {
        queue: &queue,
        state: TaskState::Aggregating,
        group: Some(&group),
    };
    on_collection(&state, method, target, verb, &query, body).await
}

async fn on_collection(
    state: &AppState,
    method: Method,
    target: Target<'_>,
    verb: Option<&str>,
    query: &HashMap<String, String>,
    body: Body,
) -> ApiResult {
    let Some(verb) = verb else {
        return match method {
            Method::GET | Method::HEAD => list(state, target, query).await,
            _ => Err(ApiError::method_not_allowed()),
        };
    };
    let Some(verb) = AllVerb::parse(verb).filter(|v| v.allowed(target.state)) else {
        return Err(ApiError::not_found("404 page not found"));
    };
    if method != verb.method() {
        return Err(ApiError::method_not_allowed());
    }
    let result = collection_action(state, target, verb, body).await;
    if verb != AllVerb::BatchCancel {
        state.stats.invalidate().await;
    }
    result
}

/// `/queues/{q}/{collection}/{segment}`: the task detail
/// (`GET /tasks/{id}`) or a single-task action.
pub async fn item(
    State(state): State<AppState>,
    method: Method,
    Path((queue, collection, segment)): Path<(String, String, String)>,
) -> ApiResult {
    if collection == "tasks" {
        return match method {
            Method::GET | Method::HEAD => detail(&state, &queue, &segment).await,
            _ => Err(ApiError::method_not_allowed()),
        };
    }
    let Some(task_state) = collection_state(&collection) else {
        return Err(ApiError::not_found("404 page not found"));
    };
    let target = Target {
        queue: &queue,
        state: task_state,
        group: None,
    };
    on_item(&state, &method, target, &segment).await
}

/// `/queues/{q}/groups/{g}/aggregating_tasks/{segment}`: a single-task
/// action on an aggregating task.
pub async fn group_item(
    State(state): State<AppState>,
    method: Method,
    Path((queue, group, collection, segment)): Path<(String, String, String, String)>,
) -> ApiResult {
    if collection != "aggregating_tasks" {
        return Err(ApiError::not_found("404 page not found"));
    }
    let target = Target {
        queue: &queue,
        state: TaskState::Aggregating,
        group: Some(&group),
    };
    on_item(&state, &method, target, &segment).await
}

/// Runs one single-task action: 204 on success.
async fn on_item(
    state: &AppState,
    method: &Method,
    target: Target<'_>,
    segment: &str,
) -> ApiResult {
    let (verb, id) = resolve_item(method, target.state, segment)?;
    if id.is_empty() {
        return Err(ApiError::bad_request(
            "route parameters should not be empty",
        ));
    }
    let inspector = &state.inspector;
    let result = match verb {
        ItemVerb::Delete => inspector.delete_task(target.queue, &id).await,
        ItemVerb::Run => inspector.run_task(target.queue, &id).await,
        ItemVerb::Archive => inspector.archive_task(target.queue, &id).await,
        ItemVerb::Cancel => inspector.cancel_processing(&id).await,
    };
    if verb != ItemVerb::Cancel {
        state.stats.invalidate().await;
    }
    result?;
    Ok(no_content())
}

/// Task lists: `{"stats", "tasks"}`, plus `groups` for aggregating.
#[derive(Serialize)]
struct ListResponse {
    #[serde(skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<GroupJson>>,
    /// `null` when the queue's statistics could not be read.
    stats: Option<QueueSnapshot>,
    tasks: Vec<TaskRowJson>,
}

/// One page of the target's tasks with the queue's statistics. Active
/// rows get `start_time`/`deadline` from the worker running them (any
/// server), `-` when no server reports the task.
async fn list(state: &AppState, target: Target<'_>, query: &HashMap<String, String>) -> ApiResult {
    let page = page_of(query)?;
    let inspector = &state.inspector;
    let rows = match target.group {
        Some(group) => {
            inspector
                .list_aggregating_tasks(target.queue, group, page)
                .await?
        }
        None => {
            inspector
                .list_tasks(target.queue, target.state, page)
                .await?
        }
    };
    let stats = queue_snapshot(state, target.queue).await?;
    let now = inspector.now();
    let lim = limits(state);
    let mut tasks: Vec<TaskRowJson> = rows
        .iter()
        .map(|row| task_row(row, target.state, lim, now))
        .collect();
    if target.state == TaskState::Active && !tasks.is_empty() {
        let workers: HashMap<String, _> = inspector
            .servers()
            .await?
            .into_iter()
            .flat_map(|s| s.active_workers)
            .filter(|w| w.queue == target.queue)
            .map(|w| (w.task_id.clone(), (w.started, w.deadline)))
            .collect();
        for task in &mut tasks {
            if let TaskRowJson::Active {
                base,
                start_time,
                deadline,
                ..
            } = task
                && let Some((started, until)) = workers.get(&base.id)
            {
                *start_time = rfc3339(*started);
                *deadline = rfc3339(*until);
            }
        }
    }
    let groups = match target.group {
        Some(_) => Some(
            inspector
                .groups(target.queue)
                .await?
                .iter()
                .map(GroupJson::from)
                .collect(),
        ),
        None => None,
    };
    Ok(Json(ListResponse {
        groups,
        stats,
        tasks,
    })
    .into_response())
}

/// `GET /queues/{q}/tasks/{id}`: asynqmon's `taskInfo`; 404 for an unknown
/// queue or task, 422 for a task that does not decode.
async fn detail(state: &AppState, queue: &str, id: &str) -> ApiResult {
    if id.is_empty() {
        return Err(ApiError::bad_request("task_id cannot be empty"));
    }
    let info = state.inspector.get_task_info(queue, id).await?;
    let now = state.inspector.now();
    Ok(Json(TaskDetail::new(&info, now)).into_response())
}

#[derive(Serialize)]
struct Deleted {
    deleted: u64,
}

#[derive(Serialize)]
struct Scheduled {
    scheduled: u64,
}

#[derive(Serialize)]
struct Archived {
    archived: u64,
}

#[derive(Serialize)]
struct BatchDeleted {
    deleted_ids: Vec<String>,
    failed_ids: Vec<String>,
}

#[derive(Serialize)]
struct BatchRan {
    pending_ids: Vec<String>,
    error_ids: Vec<String>,
}

#[derive(Serialize)]
struct BatchArchived {
    archived_ids: Vec<String>,
    error_ids: Vec<String>,
}

#[derive(Serialize)]
struct BatchCanceled {
    canceled_ids: Vec<String>,
    error_ids: Vec<String>,
}

/// Runs `op` on every id (at most [`BATCH_CONCURRENCY`] at once) and splits
/// the ids, in request order, into those that succeeded and those that
/// failed.
async fn run_batch<F, Fut>(ids: Vec<String>, what: &str, op: F) -> (Vec<String>, Vec<String>)
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = crate::Result<()>>,
{
    let results: Vec<(String, crate::Result<()>)> = futures_util::stream::iter(ids)
        .map(|id| {
            let fut = op(id.clone());
            async move { (id, fut.await) }
        })
        .buffered(BATCH_CONCURRENCY)
        .collect()
        .await;
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for (id, result) in results {
        match result {
            Ok(()) => ok.push(id),
            Err(e) => {
                tracing::debug!(task_id = %id, error = %e, "api: could not {what} task");
                failed.push(id);
            }
        }
    }
    (ok, failed)
}

/// Cancels every active task of the queue, reading the active list 100 at
/// a time (asynqmon `cancel_all`). Cancelation is a best-effort message,
/// so tasks stay listed while this pages through them.
async fn cancel_all(inspector: &Inspector, queue: &str) -> crate::Result<()> {
    let mut number = 1;
    loop {
        let page = Page::new(number, CANCEL_ALL_PAGE)?;
        let rows = inspector.list_tasks(queue, TaskState::Active, page).await?;
        for row in &rows {
            inspector.cancel_processing(TaskRow::id(row)).await?;
        }
        if rows.len() < CANCEL_ALL_PAGE {
            return Ok(());
        }
        number += 1;
    }
}

/// Runs a collection verb: counts for the "all" verbs, id lists for the
/// batch verbs, 204 for `cancel_all`.
async fn collection_action(
    state: &AppState,
    target: Target<'_>,
    verb: AllVerb,
    body: Body,
) -> ApiResult {
    let inspector = &state.inspector;
    let (queue, task_state, group) = (target.queue, target.state, target.group);
    let response: Response = match verb {
        AllVerb::DeleteAll => {
            let deleted = match group {
                Some(g) => inspector.delete_all_aggregating(queue, g).await?,
                None => inspector.delete_all(queue, task_state).await?,
            };
            Json(Deleted { deleted }).into_response()
        }
        AllVerb::RunAll => {
            let scheduled = match group {
                Some(g) => inspector.run_all_aggregating(queue, g).await?,
                None => inspector.run_all(queue, task_state).await?,
            };
            Json(Scheduled { scheduled }).into_response()
        }
        AllVerb::ArchiveAll => {
            let archived = match group {
                Some(g) => inspector.archive_all_aggregating(queue, g).await?,
                None => inspector.archive_all(queue, task_state).await?,
            };
            Json(Archived { archived }).into_response()
        }
        AllVerb::CancelAll => {
            cancel_all(inspector, queue).await?;
            no_content()
        }
        AllVerb::BatchDelete => {
            let ids = batch_ids(body).await?;
            let (deleted_ids, failed_ids) = run_batch(ids, "delete", |id| async move {
                inspector.delete_task(queue, &id).await
            })
            .await;
            Json(BatchDeleted {
                deleted_ids,
                failed_ids,
            })
            .into_response()
        }
        AllVerb::BatchRun => {
            let ids = batch_ids(body).await?;
            let (pending_ids, error_ids) = run_batch(ids, "run", |id| async move {
                inspector.run_task(queue, &id).await
            })
            .await;
            Json(BatchRan {
                pending_ids,
                error_ids,
            })
            .into_response()
        }
        AllVerb::BatchArchive => {
            let ids = batch_ids(body).await?;
            let (archived_ids, error_ids) = run_batch(ids, "archive", |id| async move {
                inspector.archive_task(queue, &id).await
            })
            .await;
            Json(BatchArchived {
                archived_ids,
                error_ids,
            })
            .into_response()
        }
        AllVerb::BatchCancel => {
            let ids = batch_ids(body).await?;
            let (canceled_ids, error_ids) = run_batch(ids, "cancel", |id| async move {
                inspector.cancel_processing(&id).await
            })
            .await;
            Json(BatchCanceled {
                canceled_ids,
                error_ids,
            })
            .into_response()
        }
    };
    Ok(response)
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
            Some((ItemVerb::Delete, "a:b".to_string()))
        );
        assert_eq!(
            item_route(&post, TaskState::Retry, "a:b:run"),
            Some((ItemVerb::Run, "a:b".to_string()))
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
