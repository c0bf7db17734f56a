//! `/queues/{q}/left_behind_tasks` (asynqdeck only, R12): `GET` counts the
//! queue's left-behind task hashes, `{"scanned": n, "left_behind": n}`;
//! `POST …:delete_all` deletes them with their uniqueness locks,
//! `{"scanned": n, "deleted": n}`. Both walk the task keys in bounded steps
//! (`SCAN … COUNT 100`). 404 for an unknown queue; read-only mode and
//! cross-origin posts are refused by `security.rs` as for every mutation.
// asynq divergence: COMPATIBILITY.md#r12

use axum::Json;
use axum::http::Method;
use axum::response::IntoResponse;
use serde_json::json;

use super::{ApiError, ApiResult};
use crate::web::AppState;

/// The collection name in the path.
pub const COLLECTION: &str = "left_behind_tasks";

/// Answers `GET /queues/{q}/left_behind_tasks` and
/// `POST /queues/{q}/left_behind_tasks:delete_all`; other verbs are 404,
/// other methods 405.
pub async fn handle(
    state: &AppState,
    method: Method,
    queue: &str,
    verb: Option<&str>,
) -> ApiResult {
    state.inspector.queue_info(queue).await?;
    match (verb, method) {
        (None, Method::GET | Method::HEAD) => {
            let c = state.inspector.count_left_behind(queue).await?;
            Ok(Json(json!({"scanned": c.scanned, "left_behind": c.found})).into_response())
        }
        (Some("delete_all"), Method::POST) => {
            let c = state.inspector.delete_left_behind(queue).await?;
            state.stats.invalidate().await;
            Ok(Json(json!({"scanned": c.scanned, "deleted": c.deleted})).into_response())
        }
        (None | Some("delete_all"), _) => Err(ApiError::method_not_allowed()),
        _ => Err(ApiError::not_found("404 page not found")),
    }
}
