//! Server and scheduler routes: `GET /servers`, `GET /scheduler_entries`,
//! `GET /scheduler_entries/{id}/enqueue_events` (asynqmon
//! `server_handlers.go`, `scheduler_entry_handlers.go`).

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::response::IntoResponse;
use serde::Serialize;

use super::model::{EnqueueEventJson, SchedulerEntryJson, ServerJson};
use super::{ApiResult, limits, page_of};
use crate::web::AppState;

#[derive(Serialize)]
struct ServersResponse {
    servers: Vec<ServerJson>,
}

/// `GET /servers?page=&size=`: `{"servers": [...]}`, live servers with
/// their active workers (payloads cut to `--max-payload-length`), sorted by
/// host, pid, id. With `page` or `size` (issue 15; defaults 1 and 20, a
/// page past the end is empty, page 0 or size < 1 is 400) only that page,
/// reading only its servers' keys. Without either, every server, as
/// asynqmon (its UI asks without parameters): no bound is set, the keys
/// are read in pipelines of 100 (COMPATIBILITY.md L12).
// asynqmon divergence: COMPATIBILITY.md#l12
pub async fn servers(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let lim = limits(&state);
    let listed = if query.contains_key("page") || query.contains_key("size") {
        let page = page_of(&query)?;
        state.inspector.servers_page(page).await?.servers
    } else {
        state.inspector.servers().await?
    };
    let servers = listed.iter().map(|s| ServerJson::new(s, lim)).collect();
    Ok(Json(ServersResponse { servers }).into_response())
}

#[derive(Serialize)]
struct EntriesResponse {
    entries: Vec<SchedulerEntryJson>,
}

/// `GET /scheduler_entries?page=&size=`: `{"entries": [...]}` of every
/// running scheduler, in the inspector's order. With `page` or `size` (R11)
/// only that page (size default 20, page default 1, as the other list
/// routes; a page past the end is empty; page 0 or size < 1 is 400).
/// Without either, every entry, as asynqmon (its UI asks without
/// parameters and pages in the browser), read in bounded chunks.
// asynqmon divergence: COMPATIBILITY.md#r11
pub async fn scheduler_entries(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let lim = limits(&state);
    let entries = if query.contains_key("page") || query.contains_key("size") {
        let page = page_of(&query)?;
        state.inspector.scheduler_entries_page(page).await?.entries
    } else {
        state.inspector.scheduler_entries().await?
    };
    let entries = entries
        .iter()
        .map(|e| SchedulerEntryJson::new(e, lim))
        .collect();
    Ok(Json(EntriesResponse { entries }).into_response())
}

#[derive(Serialize)]
struct EventsResponse {
    events: Vec<EnqueueEventJson>,
}

/// `GET /scheduler_entries/{id}/enqueue_events?page=&size=`: `{"events":
/// [{task_id, enqueued_at}]}`, newest first; an unknown entry has none.
pub async fn enqueue_events(
    State(state): State<AppState>,
    Path(entry): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let page = page_of(&query)?;
    let events = state
        .inspector
        .scheduler_enqueue_events(&entry, page)
        .await?
        .iter()
        .map(EnqueueEventJson::from)
        .collect();
    Ok(Json(EventsResponse { events }).into_response())
}
