//! The task page: every [`TaskInfo`] field, headers and group included, the
//! full payload and result (up to [`DISPLAY_LIMIT`] bytes, with a raw
//! download beyond), the retry facts and the delays the default retry
//! policy implies for the attempts left (S1, S4, S28), and the same actions
//! as the task's row (S17). Also the single-task actions, which answer the
//! re-rendered tab (posted from a row) or this page's fields.
//!
//! Go: asynqmon's `/queues/:q/tasks/:id` page (which shows no actions and
//! cuts the payload to `--max-payload-length`, asynqmon #301) over asynq
//! `Inspector.GetTaskInfo`, `RunTask`, `ArchiveTask`, `DeleteTask`,
//! `CancelProcessing`.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::queue_tab::{
    self, Op, OpText, OpView, TimeView, View, ViewQuery, op_views, parse_state, trigger,
};
use super::{Layout, is_htmx};
use crate::server::default_retry_delay_bounds;
use crate::web::AppState;
use crate::web::error::{PageError, action_error};
use crate::web::format;
use crate::web::urls;
use crate::{Error, TaskInfo, TaskState};

/// Payloads and results are shown up to this many bytes; the rest is in
/// the raw download.
pub const DISPLAY_LIMIT: usize = 64 * 1024;

/// Rows of the retry-delay table at most (max retry can be any number).
const MAX_DELAY_ROWS: usize = 30;

/// A payload or result as shown.
pub struct BlobView {
    /// Size in bytes.
    pub size: usize,
    /// `json`, `text`, `binary` or `empty`.
    pub kind: &'static str,
    pub text: String,
    /// Only the first [`DISPLAY_LIMIT`] bytes are shown.
    pub truncated: bool,
    /// What the copy button copies: the full text when it is all shown.
    pub copy: String,
}

impl BlobView {
    fn of(bytes: &[u8]) -> Self {
        if bytes.len() <= DISPLAY_LIMIT {
            let p = format::preview(bytes, usize::MAX, true);
            return BlobView {
                size: bytes.len(),
                kind: p.kind,
                copy: p.text.clone(),
                text: p.text,
                truncated: false,
            };
        }
        // Cut at a character boundary when the head is UTF-8 text; a cut
        // JSON document is shown as text.
        let cut = match std::str::from_utf8(&bytes[..DISPLAY_LIMIT]) {
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            _ => DISPLAY_LIMIT,
        };
        let p = format::preview(&bytes[..cut], DISPLAY_LIMIT, false);
        BlobView {
            size: bytes.len(),
            kind: p.kind,
            text: p.text,
            truncated: true,
            copy: String::new(),
        }
    }
}

/// One remaining retry under the default policy (S4).
pub struct DelayRow {
    /// Retry number (1-based).
    pub retry: u64,
    /// `n` of the policy (retries made before it).
    pub n: u32,
    pub min: String,
    pub max: String,
    /// Time from the next failure to this retry, summed over the retries before.
    pub total_min: String,
    pub total_max: String,
}

/// The retry facts of the default policy for the attempts left.
fn delay_rows(retried: i32, max_retry: i32) -> (Vec<DelayRow>, usize) {
    let from = retried.max(0) as u32;
    let to = max_retry.max(0) as u32;
    let (mut sum_min, mut sum_max) = (0u64, 0u64);
    let mut rows = Vec::new();
    for n in from..to {
        if rows.len() == MAX_DELAY_ROWS {
            break;
        }
        let (lo, hi) = default_retry_delay_bounds(n);
        sum_min = sum_min.saturating_add(lo.as_secs());
        sum_max = sum_max.saturating_add(hi.as_secs());
        rows.push(DelayRow {
            retry: u64::from(n) + 1,
            n,
            min: format::human_duration(lo.as_secs()),
            max: format::human_duration(hi.as_secs()),
            total_min: format::human_duration(sum_min),
            total_max: format::human_duration(sum_max),
        });
    }
    let left = to.saturating_sub(from) as usize;
    (rows, left.saturating_sub(MAX_DELAY_ROWS))
}

/// A readable task, formatted.
pub struct TaskView {
    pub state: &'static str,
    pub task_type: String,
    pub group: String,
    pub headers: Vec<(String, String)>,
    pub max_retry: i32,
    pub retried: i32,
    pub retries_left: i32,
    pub last_err: String,
    pub last_failed: Option<TimeView>,
    pub next: Option<TimeView>,
    pub timeout: String,
    pub deadline: Option<TimeView>,
    pub retention: String,
    pub completed: Option<TimeView>,
    pub expires: Option<TimeView>,
    pub orphaned: bool,
    pub payload: BlobView,
    pub result: Option<BlobView>,
    pub delays: Vec<DelayRow>,
    /// Remaining retries beyond the table.
    pub delays_more: usize,
}

impl TaskView {
    fn of(t: &TaskInfo, now: chrono::DateTime<chrono::Utc>) -> Self {
        let (delays, delays_more) = delay_rows(t.retried, t.max_retry);
        let expires = t.completed_at.and_then(|c| {
            chrono::Duration::from_std(t.retention)
                .ok()
                .and_then(|r| c.checked_add_signed(r))
        });
        let span = |d: std::time::Duration| {
            if d.is_zero() {
                "none".to_string()
            } else {
                format::human_duration(d.as_secs())
            }
        };
        TaskView {
            state: t.state.as_str(),
            task_type: t.task_type.clone(),
            group: t.group.clone(),
            headers: t
                .headers
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            max_retry: t.max_retry,
            retried: t.retried,
            retries_left: (t.max_retry - t.retried).max(0),
            last_err: t.last_err.clone(),
            last_failed: TimeView::opt(t.last_failed_at, now),
            next: TimeView::opt(t.next_process_at, now),
            timeout: span(t.timeout),
            deadline: TimeView::opt(t.deadline, now),
            retention: span(t.retention),
            completed: TimeView::opt(t.completed_at, now),
            expires: TimeView::opt(expires, now),
            orphaned: t.is_orphaned,
            payload: BlobView::of(&t.payload),
            result: t.result.as_deref().map(BlobView::of),
            delays,
            delays_more,
        }
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "_task_fields.html")]
struct TaskFields {
    layout: Layout,
    queue: String,
    id: String,
    /// `{root}/queues/{queue}/tasks/{id}`, encoded.
    task_url: String,
    queue_url: String,
    /// Why the task cannot be read; empty when it can.
    corrupt: String,
    /// The task is left behind: its hash names a state whose set does not
    /// hold it (R12); it can only be deleted.
    left_behind: bool,
    task: Option<TaskView>,
    ops: Vec<OpView>,
    /// "Clone" (the enqueue form prefilled from this task).
    clone_url: String,
    /// "Edit payload", for pending, scheduled, retry and archived tasks.
    edit_url: Option<String>,
}

#[derive(Template, WebTemplate)]
#[template(path = "task.html")]
struct TaskPage {
    layout: Layout,
    fields: TaskFields,
}

/// `GET /queues/{q}/tasks/{id}` (page or live fragment), `GET …/payload`
/// and `…/result` (raw downloads), `POST …/{op}` (run, archive, delete,
/// cancel).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/queues/{queue}/tasks/{id}", get(view_task_get))
        .route("/queues/{queue}/tasks/{id}/payload", get(payload_get))
        .route("/queues/{queue}/tasks/{id}/result", get(result_get))
        .route("/queues/{queue}/tasks/{id}/{op}", post(action_post))
}

/// Reads the task and formats its fields; a corrupt task is a page that
/// says so (with its id and the decode error), not an error.
async fn task_fields(state: &AppState, queue: &str, id: &str) -> Result<TaskFields, PageError> {
    let root = state.config.root_path.trim_end_matches('/');
    let queue_url = format!("{root}/queues/{}", urls::segment(queue));
    let mut fields = TaskFields {
        layout: Layout::new(state, format!("Task {id}"), "queues"),
        queue: queue.to_string(),
        id: id.to_string(),
        task_url: format!("{queue_url}/tasks/{}", urls::segment(id)),
        queue_url,
        corrupt: String::new(),
        left_behind: false,
        task: None,
        ops: Vec::new(),
        clone_url: format!(
            "{root}/enqueue?clone_queue={}&clone_id={}",
            urls::encode(queue),
            urls::encode(id)
        ),
        edit_url: None,
    };
    match state.inspector.get_task_info(queue, id).await {
        Ok(t) => {
            // Pending and active tasks are never judged left behind.
            // asynq divergence: COMPATIBILITY.md#r12
            fields.left_behind = !matches!(t.state, TaskState::Pending | TaskState::Active)
                && state
                    .inspector
                    .is_left_behind(queue, id)
                    .await
                    .map_err(|e| PageError::from_error(e, root))?;
            let ops = if fields.left_behind {
                vec![Op::Delete]
            } else {
                Op::for_state(t.state)
            };
            fields.ops = op_views(&ops, "this task", false);
            if !fields.left_behind
                && matches!(
                    t.state,
                    TaskState::Pending
                        | TaskState::Scheduled
                        | TaskState::Retry
                        | TaskState::Archived
                )
            {
                fields.edit_url = Some(format!("{}/edit", fields.task_url));
            }
            fields.task = Some(TaskView::of(&t, state.inspector.now()));
        }
        // An undecodable msg, or a state field no version knows.
        Err(e @ (Error::Corrupt { .. } | Error::FailedPrecondition(_))) => {
            fields.corrupt = e.to_string();
            // Deleting works on a hash whose msg does not decode.
            fields.ops = op_views(&[Op::Delete], "this task", false);
        }
        Err(e) => return Err(PageError::from_error(e, root)),
    }
    Ok(fields)
}

async fn view_task_get(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Response {
    let fields = match task_fields(&state, &queue, &id).await {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    if is_htmx(&headers) {
        return fields.into_response();
    }
    TaskPage {
        layout: Layout::new(&state, format!("Task {id}"), "queues"),
        fields,
    }
    .into_response()
}

/// Raw bytes as a download: `application/octet-stream`, attachment named
/// after the task id (characters outside `[A-Za-z0-9._-]` become `_`).
fn download(id: &str, what: &str, bytes: Vec<u8>) -> Response {
    let safe: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = format!("attachment; filename=\"{safe}-{what}.bin\"");
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/octet-stream"),
            ),
            (
                header::CONTENT_DISPOSITION,
                HeaderValue::from_str(&disposition)
                    .unwrap_or_else(|_| HeaderValue::from_static("attachment")),
            ),
        ],
        bytes,
    )
        .into_response()
}

async fn payload_get(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
) -> Response {
    match state.inspector.get_task_info(&queue, &id).await {
        Ok(t) => download(&id, "payload", t.payload),
        Err(e) => PageError::from_error(e, &state.config.root_path).into_response(),
    }
}

async fn result_get(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
) -> Response {
    match state.inspector.get_task_info(&queue, &id).await {
        Ok(t) => match t.result {
            Some(r) => download(&id, "result", r),
            None => {
                PageError::not_found(format!("task {id} has no result"), &state.config.root_path)
                    .into_response()
            }
        },
        Err(e) => PageError::from_error(e, &state.config.root_path).into_response(),
    }
}

/// One action on one task. From a tab (`?tab=<state>&<view>`) it answers
/// the re-rendered tab; from the task page (`?from=task`) the re-rendered
/// fields, or a redirect to the tab once the task is gone.
async fn action_post(
    State(state): State<AppState>,
    Path((queue, id, op)): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
) -> Response {
    let root = state.config.root_path.trim_end_matches('/').to_string();
    let Some(op) = Op::parse(&op) else {
        return PageError::not_found(format!("no action {op:?}"), &root).into_response();
    };
    let result = state.inspector.act_on(op, &queue, &id).await;
    state.stats.invalidate().await;
    if let Err(e) = result {
        return action_error(e);
    }
    let message = format!("Task {id}: {}.", op.past_single());
    let tab = query.tab.as_deref().and_then(parse_state);
    if query.from.as_deref() != Some("task")
        && let Some(tab) = tab
    {
        let view = View::new(tab, &query);
        return queue_tab::respond_tab(&state, &queue, &view, &message, false).await;
    }
    let back = format!(
        "{root}/queues/{}/{}",
        urls::segment(&queue),
        tab.map_or("pending", |t| t.as_str())
    );
    let gone = |message: &str| {
        let redirect =
            HeaderValue::from_str(&back).unwrap_or_else(|_| HeaderValue::from_static("/"));
        (
            StatusCode::OK,
            [
                trigger(message, false),
                (HeaderName::from_static("hx-redirect"), redirect),
            ],
        )
            .into_response()
    };
    if op == Op::Delete {
        return gone(&message);
    }
    match task_fields(&state, &queue, &id).await {
        Ok(fields) => ([trigger(&message, false)], fields).into_response(),
        // Run, then processed and gone before this read: back to the tab.
        Err(e) if e.status == StatusCode::NOT_FOUND => gone(&message),
        Err(e) => e.into_response(),
    }
}
