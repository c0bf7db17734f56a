//! The queue page's routes and its GET handlers: the page (or its live
//! fragment) and the summary of a tab's bounded scan.

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::actions::{Op, batch_post, op_views};
use super::bulk::{all_get, all_post, matching_get, matching_post};
use super::export::export_get;
use super::query::{View, ViewQuery, parse_state};
use super::render::{queue_stats, render_tab};
use super::signatures::SignatureView;
use super::view::{QueuePage, QueueSummary};
use crate::TaskState;
use crate::inspector::{SCAN_LIMIT, errgroups};
use crate::web::AppState;
use crate::web::error::PageError;
use crate::web::pages::{Layout, is_htmx};
use crate::web::urls;

/// `GET /queues/{q}` (active tab, or `?status=`), `GET /queues/{q}/{state}`
/// (page or live fragment), `GET …/summary`, `GET …/export` (the tab's
/// tasks as a download, `export.rs`), `POST …/batch/{op}` (selected
/// ids), and the bulk jobs (`bulk.rs`): `GET` (confirmation with the
/// preview count) and `POST` (start the job) of `…/all/{op}` (the whole
/// tab or group) and `…/matching/{op}` (what the filters or an error group
/// match, over the whole tab).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/queues/{queue}", get(view_queue_get))
        .route("/queues/{queue}/{state}", get(view_tab_get))
        .route("/queues/{queue}/{state}/summary", get(view_summary_get))
        .route("/queues/{queue}/{state}/export", get(export_get))
        .route("/queues/{queue}/{state}/batch/{op}", post(batch_post))
        .route(
            "/queues/{queue}/{state}/all/{op}",
            get(all_get).post(all_post),
        )
        .route(
            "/queues/{queue}/{state}/matching/{op}",
            get(matching_get).post(matching_post),
        )
}

/// 404 for a tab name that is no task state.
pub(super) fn unknown_tab(state: &AppState, name: &str) -> PageError {
    PageError::not_found(
        format!(
            "no tab named {name:?}: the tabs are active, pending, aggregating, scheduled, retry, archived and completed"
        ),
        &state.config.root_path,
    )
}

async fn view_queue_get(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(query): Query<ViewQuery>,
    headers: HeaderMap,
) -> Response {
    let tab = query
        .status
        .as_deref()
        .and_then(parse_state)
        .unwrap_or(TaskState::Active);
    show_tab(&state, &queue, View::new(tab, &query), &headers).await
}

async fn view_tab_get(
    State(state): State<AppState>,
    Path((queue, tab)): Path<(String, String)>,
    Query(query): Query<ViewQuery>,
    headers: HeaderMap,
) -> Response {
    let Some(tab) = parse_state(&tab) else {
        return unknown_tab(&state, &tab).into_response();
    };
    show_tab(&state, &queue, View::new(tab, &query), &headers).await
}

async fn show_tab(state: &AppState, queue: &str, view: View, headers: &HeaderMap) -> Response {
    let tab = match render_tab(state, queue, &view).await {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    if is_htmx(headers) {
        return tab.into_response();
    }
    // The type picker offers the types on the current page plus the one
    // filtered on; the summary lists every type of the scanned tab.
    let mut types: Vec<String> = tab
        .rows
        .iter()
        .filter(|r| r.error.is_empty())
        .map(|r| r.task_type.clone())
        .collect();
    if !view.filter.task_type.is_empty() {
        types.push(view.filter.task_type.clone());
    }
    types.sort();
    types.dedup();
    QueuePage {
        layout: Layout::new(state, format!("{queue} · {}", view.state), "queues"),
        tab,
        types,
        filter: view.filter,
    }
    .into_response()
}

async fn view_summary_get(
    State(state): State<AppState>,
    Path((queue, tab)): Path<(String, String)>,
    Query(query): Query<ViewQuery>,
) -> Response {
    let Some(tab) = parse_state(&tab) else {
        return unknown_tab(&state, &tab).into_response();
    };
    let view = View::new(tab, &query);
    let root = state.config.root_path.clone();
    let info = queue_stats(&state, &queue).await.info;
    let summary = match state
        .inspector
        .tab_summary(&view.request(&queue, info.as_ref()))
        .await
    {
        Ok(s) => s,
        Err(e) => return PageError::from_error(e, &root).into_response(),
    };
    let group_ops: Vec<Op> = Op::for_state(tab)
        .iter()
        .copied()
        .filter(|o| *o != Op::Cancel)
        .collect();
    let group_qs = match (tab, &summary.group) {
        (TaskState::Aggregating, Some(g)) => format!("&group={}", urls::encode(g)),
        _ => String::new(),
    };
    let root = root.trim_end_matches('/');
    let now = state.inspector.now();
    QueueSummary {
        layout: Layout::new(&state, "summary", "queues"),
        tab_url: format!("{root}/queues/{}/{tab}", urls::segment(&queue)),
        group_qs,
        scanned: summary.scanned,
        total: summary.total,
        limit: SCAN_LIMIT,
        corrupt: summary.corrupt,
        types: summary.types,
        show_groups: errgroups::shown_for(tab),
        signatures: summary
            .signatures
            .iter()
            .map(|s| SignatureView::of(s, now))
            .collect(),
        verdict: summary.verdict,
        group_ops: op_views(&group_ops, "every task of this type with this error", true),
    }
    .into_response()
}
