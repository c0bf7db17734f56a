//! Queues overview: one row per queue with its sizes per state, today's
//! processed and failed, error rate, paused, memory and latency; pause,
//! resume and delete (S14: retry and archived stand apart from scheduled).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Form, Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::{Layout, is_htmx};
use crate::web::AppState;
use crate::web::error::action_error;
use crate::web::format;
use crate::web::state::Snapshot;
use crate::web::urls::filters;

/// One row of the queues table, formatted.
pub struct Row {
    pub name: String,
    /// `None` when the queue's statistics could not be read ("n/a" cells).
    pub stats: Option<RowStats>,
    pub error: String,
}

pub struct RowStats {
    pub paused: bool,
    pub size: i64,
    pub active: i64,
    pub pending: i64,
    pub aggregating: i64,
    pub scheduled: i64,
    pub retry: i64,
    pub archived: i64,
    pub completed: i64,
    pub processed: i64,
    pub failed: i64,
    pub error_rate: String,
    pub memory: String,
    /// When the memory estimate was taken, or why it is missing.
    pub memory_title: String,
    pub latency: String,
    /// Retry growth over the last 5 minutes, e.g. `+42`; empty without samples.
    pub retry_trend: String,
    /// The retry set grows fast: an outage signal (S14, S29).
    pub retry_fast: bool,
}

fn rows(snap: &Snapshot) -> Vec<Row> {
    snap.queues
        .iter()
        .map(|q| match &q.info {
            Ok(i) => {
                let (memory, memory_title) = super::memory_cell(q.memory.as_ref());
                Row {
                    name: q.name.clone(),
                    stats: Some(RowStats {
                        paused: i.paused,
                        size: i.size,
                        active: i.active,
                        pending: i.pending,
                        aggregating: i.aggregating,
                        scheduled: i.scheduled,
                        retry: i.retry,
                        archived: i.archived,
                        completed: i.completed,
                        processed: i.processed,
                        failed: i.failed,
                        error_rate: format::error_rate(i.failed, i.processed),
                        memory,
                        memory_title,
                        latency: format::human_duration(i.latency.as_secs()),
                        retry_trend: q
                            .growth
                            .map(|g| {
                                format!(
                                    "{:+} in {}",
                                    g.last_5m.delta(),
                                    format::human_duration(g.last_5m.span.as_secs())
                                )
                            })
                            .unwrap_or_default(),
                        retry_fast: q.growth.is_some_and(|g| g.fast),
                    }),
                    error: String::new(),
                }
            }
            Err(e) => Row {
                name: q.name.clone(),
                stats: None,
                error: e.clone(),
            },
        })
        .collect()
}

#[derive(Template, WebTemplate)]
#[template(path = "queues.html")]
struct QueuesPage {
    layout: Layout,
    table: QueuesTable,
}

#[derive(Template, WebTemplate)]
#[template(path = "_queues_table.html")]
struct QueuesTable {
    layout: Layout,
    /// Queues whose retry set grows fast (outage banner).
    growing: Vec<String>,
    rows: Vec<Row>,
    error: String,
    taken_at: String,
    taken_at_iso: String,
}

pub fn routes() -> axum::Router<AppState> {
    Router::new()
        .route("/", get(view_queues_get))
        .route("/queues/{queue}/pause", post(pause_post))
        .route("/queues/{queue}/resume", post(resume_post))
        .route("/queues/{queue}/delete", post(delete_post))
}

async fn queues_table(state: &AppState) -> QueuesTable {
    let snap = state.stats.get(&state.inspector).await;
    let rows = rows(&snap);
    QueuesTable {
        layout: Layout::new(state, "Queues", "queues"),
        growing: rows
            .iter()
            .filter(|r| r.stats.as_ref().is_some_and(|s| s.retry_fast))
            .map(|r| r.name.clone())
            .collect(),
        rows,
        error: snap.error.clone().unwrap_or_default(),
        taken_at: format::utc(snap.taken_at),
        taken_at_iso: format::iso(snap.taken_at),
    }
}

async fn view_queues_get(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let table = queues_table(&state).await;
    if is_htmx(&headers) {
        return table.into_response();
    }
    QueuesPage {
        layout: Layout::new(&state, "Queues", "queues"),
        table,
    }
    .into_response()
}

async fn pause_post(State(state): State<AppState>, Path(queue): Path<String>) -> Response {
    let r = state.inspector.pause_queue(&queue).await;
    after_action(&state, r).await
}

async fn resume_post(State(state): State<AppState>, Path(queue): Path<String>) -> Response {
    let r = state.inspector.unpause_queue(&queue).await;
    after_action(&state, r).await
}

#[derive(Deserialize)]
struct DeleteForm {
    #[serde(default)]
    force: Option<String>,
}

async fn delete_post(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Form(form): Form<DeleteForm>,
) -> Response {
    let force = form
        .force
        .is_some_and(|f| f == "on" || f == "true" || f == "1");
    let r = state.inspector.delete_queue(&queue, force).await;
    after_action(&state, r).await
}

/// Answers an action with the refreshed table (or the error as a text
/// answer, [`action_error`], that htmx shows in the toast area).
async fn after_action(state: &AppState, r: crate::Result<()>) -> Response {
    state.stats.invalidate().await;
    match r {
        Ok(()) => queues_table(state).await.into_response(),
        Err(e) => action_error(e),
    }
}
