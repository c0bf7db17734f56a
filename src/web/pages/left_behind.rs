//! The left-behind sweep of one queue (R12), a job of bounded slices that
//! the browser drives, one slice per request
//! ([`Inspector::left_behind_slice`](crate::Inspector::left_behind_slice)):
//!
//! - `GET /queues/{q}/left_behind[?cursor=N&scanned=S&found=F]` is the
//!   preview (nothing changes): it counts one slice from cursor `N` and adds
//!   it to the totals so far (`S`, `F`, carried by the URL). While the
//!   cursor is not 0 the fragment re-requests itself with the next cursor
//!   (`hx-get`, `hx-trigger="load"`) and shows "scanned N keys so far, M
//!   left behind", with a no-JS "Continue counting" link to the same URL
//!   and a Cancel link (to the queue page: not continuing stops the job).
//!   Once done it shows the count and the Delete button.
//! - `POST /queues/{q}/left_behind/delete` (form `cursor`, `scanned`,
//!   `deleted`; cursor 0 starts) deletes one slice's left-behind tasks, with
//!   their uniqueness locks, and answers the progress line with a form
//!   that posts the next cursor and totals (hidden inputs, the CSRF token
//!   among them) on load, a Continue button and a Cancel link; once done,
//!   the report and a toast.
//!
//! A page (not htmx) request answers the whole page, else the fragment.
//! The POST needs the CSRF token and is refused in read-only mode, like
//! every dashboard action (`security.rs`). Go has no such operation.
// asynq divergence: COMPATIBILITY.md#r12

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;

use super::queue_tab::trigger;
use super::{Layout, is_htmx};
use crate::inspector::SweepCount;
use crate::web::AppState;
use crate::web::error::{PageError, action_error};
use crate::web::urls;

#[derive(Template, WebTemplate)]
#[template(path = "_left_behind.html")]
struct SweepFragment {
    layout: Layout,
    queue: String,
    queue_url: String,
    /// The totals so far (the preview's `scanned`, `found`; the delete's
    /// `scanned`, `deleted`).
    count: SweepCount,
    /// Whether this is the delete job (else the preview).
    deleted: bool,
    /// The cursor of the next slice; 0 when the job is done.
    cursor: u64,
    /// The preview's next slice, with the totals (`GET`).
    next_url: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "left_behind.html")]
struct SweepPage {
    layout: Layout,
    fragment: SweepFragment,
}

/// Where a preview slice starts and the totals before it.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct PreviewQuery {
    cursor: u64,
    scanned: u64,
    found: u64,
}

/// Where a delete slice starts and the totals before it (the CSRF token
/// the form also carries is checked by `security.rs`, from the header).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct DeleteForm {
    cursor: u64,
    scanned: u64,
    deleted: u64,
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/queues/{queue}/left_behind", get(view_get))
        .route("/queues/{queue}/left_behind/delete", post(delete_post))
}

fn title(queue: &str) -> String {
    format!("Left-behind tasks of {queue}")
}

fn fragment(
    state: &AppState,
    queue: &str,
    count: SweepCount,
    deleted: bool,
    cursor: u64,
) -> SweepFragment {
    let root = state.config.root_path.trim_end_matches('/');
    let queue_url = format!("{root}/queues/{}", urls::segment(queue));
    let next_url = format!(
        "{queue_url}/left_behind?cursor={cursor}&scanned={}&found={}",
        count.scanned, count.found
    );
    SweepFragment {
        layout: Layout::new(state, title(queue), "queues"),
        queue: queue.to_string(),
        queue_url,
        count,
        deleted,
        cursor,
        next_url,
    }
}

/// The fragment for htmx, else the page around it.
fn answer(state: &AppState, headers: &HeaderMap, fragment: SweepFragment) -> Response {
    if is_htmx(headers) {
        return fragment.into_response();
    }
    SweepPage {
        layout: Layout::new(state, title(&fragment.queue), "queues"),
        fragment,
    }
    .into_response()
}

/// `GET /queues/{q}/left_behind`: one preview slice. Errors: 404 unknown
/// queue, 400 malformed query, 503 Redis unreachable.
async fn view_get(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<PreviewQuery>,
    headers: HeaderMap,
) -> Response {
    let root = &state.config.root_path;
    let mut count = if q.cursor == 0 {
        SweepCount::default()
    } else {
        SweepCount {
            scanned: q.scanned,
            found: q.found,
            deleted: 0,
        }
    };
    let (next, slice) = match state
        .inspector
        .left_behind_slice(&queue, q.cursor, false)
        .await
    {
        Ok(r) => r,
        Err(e) => return PageError::from_error(e, root).into_response(),
    };
    count.add(slice);
    let fragment = fragment(&state, &queue, count, false, next);
    answer(&state, &headers, fragment)
}

/// `POST /queues/{q}/left_behind/delete`: one delete slice; the last one
/// adds a toast with the total.
async fn delete_post(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    Form(f): Form<DeleteForm>,
) -> Response {
    let mut count = if f.cursor == 0 {
        SweepCount::default()
    } else {
        SweepCount {
            scanned: f.scanned,
            found: f.deleted,
            deleted: f.deleted,
        }
    };
    let (next, slice) = match state
        .inspector
        .left_behind_slice(&queue, f.cursor, true)
        .await
    {
        Ok(r) => r,
        Err(e) => return action_error(e),
    };
    if slice.deleted > 0 {
        state.stats.invalidate().await;
    }
    count.add(slice);
    let fragment = fragment(&state, &queue, count, true, next);
    if next != 0 {
        return answer(&state, &headers, fragment);
    }
    let message = format!(
        "Queue {queue}: {} left-behind tasks deleted.",
        count.deleted
    );
    (
        [trigger(&message, false)],
        answer(&state, &headers, fragment),
    )
        .into_response()
}
