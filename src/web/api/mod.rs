//! The asynqmon-compatible JSON API under `/api`: asynqmon v0.7.2's routes,
//! field names and status codes, so scripts written for asynqmon work
//! unchanged. Thin over the [`Inspector`](crate::Inspector): the HTML
//! actions and these routes call the same methods.
//!
//! Files: `model.rs` (JSON shapes), `go_format.rs` (Go-style time,
//! duration and payload formatting), `queues.rs` (queues, pause/resume, delete, daily stats,
//! groups), `tasks.rs` (task lists per state, single-task actions, task
//! detail), `task_paths.rs` (the task routes' segments and verbs, from the
//! inspector's action table), `task_actions.rs` (batch and "all" verbs), `left_behind.rs` (count and sweep of left-behind task
//! hashes, asynqdeck only), `servers.rs` (servers, scheduler entries, enqueue events),
//! `redis_info.rs` (Redis `INFO` and cluster facts; the unsupported
//! `/metrics` proxy), `cluster.rs` (a queue's hash slot and nodes, Go's
//! `ClusterKeySlot`/`ClusterNodes`; asynqdeck only), `jobs.rs` (background
//! bulk jobs: start, list, read, cancel, preview; asynqdeck only).
//!
//! Paths keep asynqmon's Google-style `:verb` suffixes
//! (`/queues/{q}:pause`, `/queues/{q}/pending_tasks:delete_all`,
//! `/queues/{q}/retry_tasks/{id}:run`). axum's router cannot split a
//! segment into a parameter and a literal, so each such segment is one
//! parameter split here: queue and collection segments at the last `:`
//! for POST (a queue or task id may itself contain `:`), and a DELETE's
//! task-id segment is taken whole, as asynqmon's router does.
//!
//! Responses: JSON with asynqmon's shapes; errors are plain text with a
//! 4xx/5xx status: 404 unknown queue or task, 400 refused change or bad
//! request, 405 wrong method, 422 a task that cannot be decoded, 503 Redis
//! unreachable. Queue numbers come from the shared per-interval snapshot
//! ([`StatsCache`](super::state::StatsCache)), so polling the API costs
//! Redis no more than the pages do. Read-only mode and cross-origin
//! mutations are refused with 403 by `security.rs`.
// asynqmon divergence: COMPATIBILITY.md#a1, COMPATIBILITY.md#a2

mod audit;
mod cluster;
mod go_format;
mod jobs;
mod left_behind;
mod model;
mod queues;
mod redis_info;
mod search;
mod servers;
mod task_actions;
mod task_paths;
mod tasks;

use std::collections::HashMap;

use axum::Router;
use axum::body::Body;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde::Deserialize;

use super::AppState;
use super::error::status_of;
use crate::Error;
use crate::inspector::Page;

pub use model::{Limits, QueueSnapshot};

/// Largest batch request body read, in bytes (asynqmon `maxRequestBodySize`).
pub const MAX_BATCH_BODY: usize = 1_000_000;

/// Page size when `?size=` is absent or not a number (asynqmon's default).
pub const DEFAULT_PAGE_SIZE: usize = 20;

/// Every `/api` route, to be merged into the dashboard router.
pub fn routes() -> Router<AppState> {
    let api = Router::new()
        .route("/queues", get(queues::list))
        .route("/queues/{segment}", any(queues::queue_segment))
        .route("/queue_stats", get(queues::daily_stats))
        .route("/queues/{queue}/groups", get(queues::groups))
        .route("/queues/{queue}/cluster_key_slot", get(cluster::key_slot))
        .route("/queues/{queue}/cluster_nodes", get(cluster::nodes))
        .route("/queues/{queue}/{segment}", any(tasks::collection))
        .route("/queues/{queue}/{collection}/{segment}", any(tasks::item))
        .route(
            "/queues/{queue}/groups/{group}/{segment}",
            any(tasks::group_collection),
        )
        .route(
            "/queues/{queue}/groups/{group}/{collection}/{segment}",
            any(tasks::group_item),
        )
        .route("/servers", get(servers::servers))
        .route("/scheduler_entries", get(servers::scheduler_entries))
        .route(
            "/scheduler_entries/{entry}/enqueue_events",
            get(servers::enqueue_events),
        )
        .route("/jobs", get(jobs::list).post(jobs::create))
        .route("/jobs:preview", get(jobs::preview))
        .route("/jobs/{segment}", any(jobs::item))
        .route("/redis_info", get(redis_info::redis_info))
        .route("/audit", get(audit::audit))
        .route("/search", get(search::search))
        .route("/metrics", any(redis_info::metrics))
        .route("/{*rest}", any(no_route));
    Router::new().nest("/api", api)
}

/// An API error: a status and a plain-text body (asynqmon's `http.Error`).
#[derive(Debug)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The body, without the trailing newline.
    pub message: String,
}

impl ApiError {
    /// An error with `status` and `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// 404 with `message`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// 400 with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// 405 for a path that exists with another method.
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "method not allowed")
    }
}

impl From<Error> for ApiError {
    fn from(err: Error) -> Self {
        ApiError::new(status_of(&err), err.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{}\n", self.message),
        )
            .into_response()
    }
}

/// Result of an API handler.
pub type ApiResult<T = Response> = std::result::Result<T, ApiError>;

/// 204 No Content (pause, resume, delete, run, archive, cancel).
fn no_content() -> Response {
    StatusCode::NO_CONTENT.into_response()
}

/// Any `/api` path that is no route: 404.
async fn no_route() -> ApiError {
    ApiError::not_found("404 page not found")
}

/// `?page=` (default 1) and `?size=` (default 20) as asynqmon reads them: a
/// value that is not an integer is ignored, a negative page is page 1.
/// Page 0 and a size below 1 are refused with 400 (asynq turns them into
/// odd rank ranges, a size of 0 even into "everything").
// asynqmon divergence: COMPATIBILITY.md#a8
fn page_of(query: &HashMap<String, String>) -> ApiResult<Page> {
    let int = |name: &str| query.get(name).and_then(|v| v.trim().parse::<i64>().ok());
    let number = match int("page") {
        None => 1,
        Some(n) if n < 0 => 1,
        Some(n) => n,
    };
    let size = int("size").unwrap_or(DEFAULT_PAGE_SIZE as i64);
    let number = usize::try_from(number).unwrap_or(usize::MAX);
    let size = usize::try_from(size).unwrap_or(0);
    Page::new(number, size).map_err(|e| ApiError::bad_request(e.to_string()))
}

/// The body of every batch route: `{"task_ids": [...]}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchRequest {
    #[serde(default)]
    task_ids: Option<Vec<String>>,
}

/// Reads a batch body as asynqmon does: at most [`MAX_BATCH_BODY`] bytes,
/// one JSON object with only `task_ids` (unknown fields are refused),
/// anything after the object ignored. Errors: 400.
async fn batch_ids(body: Body) -> ApiResult<Vec<String>> {
    let bytes = axum::body::to_bytes(body, MAX_BATCH_BODY)
        .await
        .map_err(|_| {
            ApiError::bad_request(format!(
                "request body too large or unreadable (limit {MAX_BATCH_BODY} bytes)"
            ))
        })?;
    let mut values = serde_json::Deserializer::from_slice(&bytes).into_iter::<BatchRequest>();
    match values.next() {
        Some(Ok(req)) => Ok(req.task_ids.unwrap_or_default()),
        Some(Err(e)) => Err(ApiError::bad_request(e.to_string())),
        None => Err(ApiError::bad_request(
            "empty request body: expected {\"task_ids\": [...]}",
        )),
    }
}

/// Statistics of `queue` from the shared snapshot; read directly when the
/// queue is not in it (created since it was taken). `None` when its
/// statistics could not be read (the snapshot holds the error).
///
/// Errors: 404 for an unknown queue, 503 when Redis is unreachable.
async fn queue_snapshot(state: &AppState, queue: &str) -> ApiResult<Option<QueueSnapshot>> {
    let snap = state.stats.get(&state.inspector).await;
    if let Some(row) = snap.queues.iter().find(|r| r.name == queue) {
        return Ok(row.info.as_ref().ok().map(QueueSnapshot::from));
    }
    let info = state.inspector.queue_info(queue).await?;
    Ok(Some(QueueSnapshot::from(&info)))
}

/// Preview limits from the dashboard settings.
fn limits(state: &AppState) -> Limits {
    Limits {
        payload: state.config.max_payload_length,
        result: state.config.max_result_length,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// asynqmon's `getPageOptions` defaults and asynq's negative-page rule;
    /// page 0 and size < 1 are 400.
    #[test]
    fn page_parameters() {
        assert_eq!(page_of(&query(&[])).unwrap(), Page::new(1, 20).unwrap());
        assert_eq!(
            page_of(&query(&[("page", "3"), ("size", "5")])).unwrap(),
            Page::new(3, 5).unwrap()
        );
        assert_eq!(
            page_of(&query(&[("page", "x"), ("size", "y")])).unwrap(),
            Page::new(1, 20).unwrap()
        );
        assert_eq!(
            page_of(&query(&[("page", "-2")])).unwrap(),
            Page::new(1, 20).unwrap()
        );
        for bad in [[("page", "0")], [("size", "0")]] {
            let err = page_of(&query(&bad)).unwrap_err();
            assert_eq!(err.status, StatusCode::BAD_REQUEST);
        }
        let err = page_of(&query(&[("size", "-1")])).unwrap_err();
        assert_eq!(err.status, StatusCode::BAD_REQUEST);
    }
}
