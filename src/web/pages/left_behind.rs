//! The left-behind sweep of one queue (R12): `GET /queues/{q}/left_behind`
//! counts the queue's left-behind task hashes (the preview: nothing
//! changes), and its button posts `POST /queues/{q}/left_behind/delete`,
//! which deletes them (with their uniqueness locks) and answers the same
//! fragment with the numbers. Both walk the queue's task keys in bounded
//! steps ([`Inspector::left_behind_step`](crate::Inspector::left_behind_step)).
//! The POST needs the CSRF token and is refused in read-only mode, like
//! every dashboard action (`security.rs`). Go has no such operation.
// asynq divergence: COMPATIBILITY.md#r12

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::queue_tab::{action_error, encode, trigger};
use super::{Layout, is_htmx};
use crate::inspector::SweepCount;
use crate::web::AppState;
use crate::web::error::PageError;

#[derive(Template, WebTemplate)]
#[template(path = "_left_behind.html")]
struct SweepFragment {
    layout: Layout,
    queue: String,
    queue_url: String,
    /// What the count (or the delete) found.
    count: SweepCount,
    /// Whether this answers the delete.
    deleted: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "left_behind.html")]
struct SweepPage {
    layout: Layout,
    fragment: SweepFragment,
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/queues/{queue}/left_behind", get(view_get))
        .route("/queues/{queue}/left_behind/delete", post(delete_post))
}

fn fragment(state: &AppState, queue: &str, count: SweepCount, deleted: bool) -> SweepFragment {
    let root = state.config.root_path.trim_end_matches('/');
    SweepFragment {
        layout: Layout::new(state, format!("Left-behind tasks of {queue}"), "queues"),
        queue: queue.to_string(),
        queue_url: format!("{root}/queues/{}", encode(queue)),
        count,
        deleted,
    }
}

/// `GET /queues/{q}/left_behind`: the count, as a page (or the fragment
/// when htmx asks). Errors: 404 unknown queue, 503 Redis unreachable.
async fn view_get(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    headers: HeaderMap,
) -> Response {
    let root = &state.config.root_path;
    if let Err(e) = state.inspector.queue_info(&queue).await {
        return PageError::from_error(e, root).into_response();
    }
    let count = match state.inspector.count_left_behind(&queue).await {
        Ok(c) => c,
        Err(e) => return PageError::from_error(e, root).into_response(),
    };
    let fragment = fragment(&state, &queue, count, false);
    if is_htmx(&headers) {
        return fragment.into_response();
    }
    SweepPage {
        layout: Layout::new(&state, format!("Left-behind tasks of {queue}"), "queues"),
        fragment,
    }
    .into_response()
}

/// `POST /queues/{q}/left_behind/delete`: deletes them; answers the
/// fragment with what was deleted and a toast.
async fn delete_post(State(state): State<AppState>, Path(queue): Path<String>) -> Response {
    let root = state.config.root_path.trim_end_matches('/').to_string();
    let count = match state.inspector.delete_left_behind(&queue).await {
        Ok(c) => c,
        Err(e) => return action_error(e, &root),
    };
    state.stats.invalidate().await;
    let message = format!(
        "Queue {queue}: {} left-behind tasks deleted.",
        count.deleted
    );
    (
        [trigger(&message, false)],
        fragment(&state, &queue, count, true),
    )
        .into_response()
}
