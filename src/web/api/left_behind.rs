//! `/queues/{q}/left_behind_tasks` (asynqdeck only, R12): the left-behind
//! sweep as a job of bounded slices driven by the caller, one slice per
//! request ([`Inspector::left_behind_slice`](crate::Inspector::left_behind_slice),
//! at most 50 `SCAN … COUNT 100` steps or ~200 ms):
//!
//! - `GET …/left_behind_tasks?cursor=N` counts one slice from cursor `N`
//!   (absent: 0, the start): `{"scanned": n, "left_behind": n, "cursor": c}`;
//! - `POST …/left_behind_tasks:delete_all?cursor=N` deletes one slice's
//!   left-behind tasks with their uniqueness locks:
//!   `{"scanned": n, "deleted": n, "cursor": c}`.
//!
//! The numbers are the slice's; `cursor` is the next slice's, 0 when the
//! sweep is done, so a client sums them until the cursor is 0. 400 for a
//! cursor that is not a non-negative integer, 404 for an unknown queue;
//! read-only mode and cross-origin posts are refused by `security.rs` as
//! for every mutation.
// asynq divergence: COMPATIBILITY.md#r12

use std::collections::HashMap;

use axum::Json;
use axum::http::Method;
use axum::response::IntoResponse;
use serde_json::json;

use super::{ApiError, ApiResult};
use crate::web::AppState;

/// The collection name in the path.
pub const COLLECTION: &str = "left_behind_tasks";

/// The `cursor` query parameter; 0 when absent.
fn cursor(query: &HashMap<String, String>) -> ApiResult<u64> {
    match query.get("cursor") {
        None => Ok(0),
        Some(c) => c
            .parse()
            .map_err(|_| ApiError::bad_request("cursor must be a non-negative integer")),
    }
}

/// Answers `GET /queues/{q}/left_behind_tasks` and
/// `POST /queues/{q}/left_behind_tasks:delete_all` (one slice each); other
/// verbs are 404, other methods 405.
pub async fn handle(
    state: &AppState,
    method: Method,
    queue: &str,
    verb: Option<&str>,
    query: &HashMap<String, String>,
) -> ApiResult {
    match (verb, method) {
        (None, Method::GET | Method::HEAD) => {
            let (next, c) = state
                .inspector
                .left_behind_slice(queue, cursor(query)?, false)
                .await?;
            Ok(
                Json(json!({"scanned": c.scanned, "left_behind": c.found, "cursor": next}))
                    .into_response(),
            )
        }
        (Some("delete_all"), Method::POST) => {
            let (next, c) = state
                .inspector
                .left_behind_slice(queue, cursor(query)?, true)
                .await?;
            if c.deleted > 0 {
                state.stats.invalidate().await;
            }
            Ok(
                Json(json!({"scanned": c.scanned, "deleted": c.deleted, "cursor": next}))
                    .into_response(),
            )
        }
        (None | Some("delete_all"), _) => Err(ApiError::method_not_allowed()),
        _ => Err(ApiError::not_found("404 page not found")),
    }
}
