//! Queues overview: one row per queue with its sizes per state, today's
//! processed and failed, error rate, paused, memory and latency; pause,
//! resume and delete (S14: retry and archived stand apart from scheduled).
//!
//! Paged, sorted and filtered on the server (issue 15 target 3,
//! `queues/order.rs`): a page formats only its own rows (at most
//! [`order::MAX_PAGE_SIZE`]), so its size and cost do not grow with the
//! number of queues; the totals row sums every queue of the snapshot.
//! The "Due soon" column (retries due in the next 1 / 5 / 60 min) is read
//! for the page's rows only, within the Redis budget
//! (`src/web/pressure.rs`).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::{Layout, is_htmx};
use crate::web::error::action_error;
use crate::web::format;
use crate::web::state::Snapshot;
use crate::web::urls::filters;
use crate::web::{AppState, PressureCell};

mod order;
use order::{Column, Overview, OverviewQuery};

/// Most names the "retry set growing fast" banners list (the others are
/// counted).
const MAX_GROWING_LISTED: usize = 10;

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
    /// Retries due in the next 1 / 5 / 60 min (`3 · 40 · 200`, `…` over
    /// the Redis budget before a first read), its tooltip, and whether the
    /// figures are stale.
    pub pressure: String,
    pub pressure_title: String,
    pub pressure_stale: bool,
}

fn rows(queues: &[&crate::web::state::QueueRow], pressure: &[PressureCell]) -> Vec<Row> {
    queues
        .iter()
        .zip(pressure)
        .map(|(q, cell)| match &q.info {
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
                        pressure: cell.text(),
                        pressure_title: cell.title(),
                        pressure_stale: cell.stale(),
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

/// Sums over a set of queues (those whose statistics were read).
#[derive(Default)]
pub struct Totals {
    pub queues: usize,
    pub paused: usize,
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
    /// The largest latency.
    pub latency: String,
}

fn totals<'a>(queues: impl Iterator<Item = &'a crate::web::state::QueueRow>) -> Totals {
    let mut t = Totals::default();
    let (mut memory, mut latency) = (0i64, 0u64);
    for q in queues {
        t.queues += 1;
        let Ok(i) = &q.info else { continue };
        t.paused += usize::from(i.paused);
        t.size += i.size;
        t.active += i.active;
        t.pending += i.pending;
        t.aggregating += i.aggregating;
        t.scheduled += i.scheduled;
        t.retry += i.retry;
        t.archived += i.archived;
        t.completed += i.completed;
        t.processed += i.processed;
        t.failed += i.failed;
        memory += i.memory_usage;
        latency = latency.max(i.latency.as_secs());
    }
    t.error_rate = format::error_rate(t.failed, t.processed);
    t.memory = format::bytes(memory);
    t.latency = format::human_duration(latency);
    t
}

/// A sortable column header.
pub struct Header {
    pub label: &'static str,
    pub title: &'static str,
    pub num: bool,
    pub href: String,
    /// `▲`/`▼` on the current sort column, else empty.
    pub arrow: &'static str,
    pub key: &'static str,
}

/// A pager link (`href` empty: not a link, e.g. "next" on the last page).
pub struct PageLink {
    pub label: &'static str,
    pub href: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "queues.html")]
struct QueuesPage {
    layout: Layout,
    view: Overview,
    table: QueuesTable,
}

#[derive(Template, WebTemplate)]
#[template(path = "_queues_table.html")]
struct QueuesTable {
    layout: Layout,
    /// The attention board (`src/web/attention.rs`), rendered.
    board: String,
    /// Queues whose retry set grows fast (outage banner), at most
    /// [`MAX_GROWING_LISTED`], and how many more there are.
    growing: Vec<String>,
    growing_more: usize,
    rows: Vec<Row>,
    /// The headers: Queue, State, the numbers (Size, …), and the growth
    /// sort link.
    name_header: Header,
    state_header: Header,
    headers: Vec<Header>,
    growth_header: Header,
    /// Every queue of the snapshot, and those matching the filter (when
    /// there is one).
    all: Totals,
    matching: Option<Totals>,
    /// "Rows 51–100 of 5,000" and the pager.
    first_row: usize,
    last_row: usize,
    matched: usize,
    page: usize,
    pages: usize,
    pager: Vec<PageLink>,
    /// This view's query string (`?sort=…`), for the live refresh and the
    /// actions.
    here: String,
    filter: String,
    /// The stale marker ("numbers 42 s old — Redis budget"), or empty.
    stale: String,
    error: String,
    taken_at: String,
    taken_at_iso: String,
}

/// The headers of the table for `view` (labels, tooltips, links).
fn headers(view: &Overview) -> (Header, Vec<Header>, Header) {
    let h = |col: Column, label: &'static str, title: &'static str| Header {
        label,
        title,
        num: !matches!(col, Column::Name | Column::State),
        href: view.header_link(col),
        arrow: match (view.sort == col, view.desc) {
            (false, _) => "",
            (true, false) => "▲",
            (true, true) => "▼",
        },
        key: col.key(),
    };
    let state = h(Column::State, "State", "Paused first when descending");
    let growth = h(
        Column::Growth,
        "Δ",
        "Sort by retry growth over the last 5 minutes",
    );
    let rest = vec![
        h(Column::Size, "Size", ""),
        h(Column::Active, "Active", ""),
        h(Column::Pending, "Pending", ""),
        h(Column::Aggregating, "Aggregating", ""),
        h(Column::Scheduled, "Scheduled", ""),
        h(Column::Retry, "Retry", ""),
        h(Column::Archived, "Archived", ""),
        h(Column::Completed, "Completed", ""),
        h(
            Column::Processed,
            "Processed",
            "Attempts today (UTC), failures included",
        ),
        h(Column::Failed, "Failed", "Failed attempts today (UTC)"),
        h(Column::ErrorRate, "Error rate", ""),
        h(
            Column::Memory,
            "Memory",
            "Estimated by sampling, per queue at most every 5 minutes",
        ),
        h(Column::Latency, "Latency", ""),
    ];
    (state, rest, growth)
}

/// The name column's header link (sorts by name).
fn name_header(view: &Overview) -> Header {
    Header {
        label: "Queue",
        title: "",
        num: false,
        href: view.header_link(Column::Name),
        arrow: match (view.sort == Column::Name, view.desc) {
            (false, _) => "",
            (true, false) => "▲",
            (true, true) => "▼",
        },
        key: "name",
    }
}

pub fn routes() -> axum::Router<AppState> {
    Router::new()
        .route("/", get(view_queues_get))
        .route("/queues/{queue}/pause", post(pause_post))
        .route("/queues/{queue}/resume", post(resume_post))
        .route("/queues/{queue}/delete", post(delete_post))
}

async fn queues_table(state: &AppState, mut view: Overview) -> (Overview, QueuesTable) {
    let snap: std::sync::Arc<Snapshot> = state.stats.get(&state.inspector).await;
    let (matched, page_rows) = view.select(&snap.queues);
    // Retry pressure of the rows shown only (at most one page), in one
    // call within the Redis budget.
    let shown: Vec<String> = page_rows
        .iter()
        .filter(|q| q.info.is_ok())
        .map(|q| q.name.clone())
        .collect();
    let mut read = state
        .pressure
        .get(&state.inspector, &shown)
        .await
        .into_iter();
    let cells: Vec<PressureCell> = page_rows
        .iter()
        .map(|q| match q.info {
            Ok(_) => read.next().unwrap_or(PressureCell::Unknown),
            Err(_) => PressureCell::Unknown,
        })
        .collect();
    let rows = rows(&page_rows, &cells);
    let fast: Vec<&str> = snap
        .queues
        .iter()
        .filter(|q| q.info.is_ok() && q.growth.is_some_and(|g| g.fast))
        .map(|q| q.name.as_str())
        .collect();
    let all = totals(snap.queues.iter());
    let matching = (!view.filter.is_empty())
        .then(|| totals(snap.queues.iter().filter(|q| q.name.contains(&view.filter))));
    let pages = view.pages(matched);
    let link = |label: &'static str, page: usize, on: bool| PageLink {
        label,
        href: if on {
            view.query(page, view.sort, view.desc)
        } else {
            String::new()
        },
    };
    let pager = vec![
        link("« first", 1, view.page > 1),
        link("‹ prev", view.page.saturating_sub(1).max(1), view.page > 1),
        link("next ›", (view.page + 1).min(pages), view.page < pages),
        link("last »", pages, view.page < pages),
    ];
    let (state_header, headers, growth_header) = headers(&view);
    let first_row = if matched == 0 {
        0
    } else {
        (view.page - 1) * view.size + 1
    };
    let layout = Layout::new(state, "Queues", "queues");
    let eval = state.attention.get(&state.inspector, &snap).await;
    let board = crate::web::attention::Board::of(&eval, &layout.root)
        .render()
        .unwrap_or_default();
    let table = QueuesTable {
        layout,
        board,
        growing_more: fast.len().saturating_sub(MAX_GROWING_LISTED),
        growing: fast
            .iter()
            .take(MAX_GROWING_LISTED)
            .map(|s| s.to_string())
            .collect(),
        last_row: first_row + rows.len().saturating_sub(1) * usize::from(!rows.is_empty()),
        rows,
        name_header: name_header(&view),
        state_header,
        headers,
        growth_header,
        all,
        matching,
        first_row,
        matched,
        page: view.page,
        pages,
        pager,
        here: view.here(),
        filter: view.filter.clone(),
        stale: state
            .stats
            .stale_note(&snap, state.inspector.now())
            .unwrap_or_default(),
        error: snap.error.clone().unwrap_or_default(),
        taken_at: format::utc(snap.taken_at),
        taken_at_iso: format::iso(snap.taken_at),
    };
    (view, table)
}

async fn view_queues_get(
    State(state): State<AppState>,
    Query(q): Query<OverviewQuery>,
    headers: HeaderMap,
) -> Response {
    let (view, table) = queues_table(&state, Overview::of(&q)).await;
    if is_htmx(&headers) {
        return table.into_response();
    }
    QueuesPage {
        layout: Layout::new(&state, "Queues", "queues"),
        view,
        table,
    }
    .into_response()
}

async fn pause_post(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<OverviewQuery>,
) -> Response {
    let r = state.inspector.pause_queue(&queue).await;
    after_action(&state, r, &q).await
}

async fn resume_post(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<OverviewQuery>,
) -> Response {
    let r = state.inspector.unpause_queue(&queue).await;
    after_action(&state, r, &q).await
}

#[derive(Deserialize)]
struct DeleteForm {
    #[serde(default)]
    force: Option<String>,
}

async fn delete_post(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<OverviewQuery>,
    Form(form): Form<DeleteForm>,
) -> Response {
    let force = form
        .force
        .is_some_and(|f| f == "on" || f == "true" || f == "1");
    let r = state.inspector.delete_queue(&queue, force).await;
    after_action(&state, r, &q).await
}

/// Answers an action with the refreshed table in the view the action was
/// sent from (its query string; or the error as a text answer,
/// [`action_error`], that htmx shows in the toast area).
async fn after_action(state: &AppState, r: crate::Result<()>, q: &OverviewQuery) -> Response {
    state.stats.invalidate().await;
    match r {
        Ok(()) => queues_table(state, Overview::of(q)).await.1.into_response(),
        Err(e) => action_error(e),
    }
}
