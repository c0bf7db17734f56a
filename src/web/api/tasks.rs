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
//! Which verbs a state has follows asynqmon's route table exactly (the
//! inspector's action table; paths are parsed in `task_paths.rs`); a known
//! path with the wrong method is 405, anything else 404. As in asynqmon, a
//! single-task action acts on the task whatever state the path names.
//! Collection verbs are in `task_actions.rs`.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::IntoResponse;
use serde::Serialize;

use super::model::{GroupJson, QueueSnapshot, TaskDetail, TaskRowJson, rfc3339, task_row};
use super::task_actions::collection_action;
use super::task_paths::{AllVerb, Target, collection_state, resolve_item};
use super::{ApiError, ApiResult, limits, no_content, page_of, queue_snapshot};
use crate::inspector::TaskAction;
use crate::task::TaskState;
use crate::web::AppState;

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
    let result = state.inspector.act_on(verb, target.queue, &id).await;
    if verb != TaskAction::Cancel {
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
        let workers = inspector.active_worker_times(Some(target.queue)).await?;
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
