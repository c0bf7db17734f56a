//! `/search`: search across queues and states (issue 17 item 1). One
//! search box ([`SearchQuery`](crate::inspector::SearchQuery)'s syntax),
//! one bounded step of the scan per request ("scanned N of M", "Scan more"
//! with the cursor), the matches linked to their task pages, and the bulk
//! actions on exactly the matches (`web/search.rs`: one tab's job pages, or
//! `/search/bulk/{op}` across tabs). A bad query is 400 with the parse
//! error on the page.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::Layout;
use crate::inspector::{SEARCH_BUDGET, SearchHit, TaskRow};
use crate::web::AppState;
use crate::web::error::status_of;
use crate::web::format;
use crate::web::search::{BulkLink, SearchParams, bulk_links, run};
use crate::web::urls::{encode, filters};

/// One result row, formatted.
pub struct Row {
    pub queue: String,
    pub state: &'static str,
    pub id: String,
    pub task_type: String,
    pub last_err: String,
    pub retried: String,
    /// When it entered its state (UTC), or empty.
    pub since: String,
    /// Why it could not be read (corrupt row), else empty.
    pub error: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "search.html")]
struct SearchView {
    layout: Layout,
    /// The search box's text.
    q: String,
    /// The parse error, or a failed scan's error; empty when fine.
    error: String,
    /// Whether a search ran (else only the box and the help).
    searched: bool,
    rows: Vec<Row>,
    scanned: String,
    scanned_now: String,
    total: String,
    /// Query string of "Scan more", empty when the scan is complete.
    more: String,
    bulk: Vec<BulkLink>,
    bulk_note: String,
    /// How many tasks the bulk actions would act on, when this step scanned
    /// the whole tab (else empty: the confirmation page counts them).
    bulk_count: String,
    /// States skipped because they could not be read.
    skipped: Vec<String>,
    budget: usize,
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/search", get(view_search_get))
}

fn row_of(h: SearchHit) -> Row {
    let since = h.since.map(format::utc).unwrap_or_default();
    let state = h.state.as_str();
    match h.row {
        TaskRow::Task(t) => Row {
            queue: h.queue,
            state,
            id: t.id,
            task_type: t.task_type,
            last_err: format::clip(&t.last_err, format::LIST_ERROR_CHARS),
            retried: format!("{} / {}", t.retried, t.max_retry),
            since,
            error: String::new(),
        },
        TaskRow::Corrupt { id, error, .. } => Row {
            queue: h.queue,
            state,
            id,
            task_type: String::new(),
            last_err: String::new(),
            retried: String::new(),
            since,
            error,
        },
    }
}

async fn view_search_get(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let params = SearchParams::from_pairs(pairs);
    let mut view = SearchView {
        layout: Layout::new(&state, "Search", "search"),
        q: String::new(),
        error: String::new(),
        searched: false,
        rows: Vec::new(),
        scanned: String::new(),
        scanned_now: String::new(),
        total: String::new(),
        more: String::new(),
        bulk: Vec::new(),
        bulk_note: String::new(),
        bulk_count: String::new(),
        skipped: Vec::new(),
        budget: SEARCH_BUDGET,
    };
    // The box shows the whole query, the separate parameters included.
    view.q = match params.query() {
        Ok(query) => query.to_text(),
        Err(_) => params.q.clone().unwrap_or_default(),
    };
    let blank = view.q.trim().is_empty() && params.cursor.is_none();
    if blank && params.query().is_ok() {
        return view.into_response();
    }
    view.searched = true;
    match run(&state, &params).await {
        Ok((query, page)) => {
            view.scanned = crate::web::pages::jobs::thousands(page.scanned as u64);
            view.scanned_now = crate::web::pages::jobs::thousands(page.scanned_now as u64);
            view.total = crate::web::pages::jobs::thousands(page.total as u64);
            if let Some(c) = &page.cursor {
                let mut qs = format!("q={}&cursor={}", encode(&query.to_text()), c.encode());
                if let Some(l) = &params.limit {
                    qs.push_str(&format!("&limit={}", encode(l)));
                }
                view.more = qs;
            }
            match bulk_links(&query) {
                Ok(links) => {
                    view.bulk = links;
                    let one_tab = query.queues.len() == 1 && query.scope_states().len() == 1;
                    if one_tab && page.cursor.is_none() && page.scanned == page.scanned_now {
                        // The whole tab in this step: the count is exact. A
                        // filtered job skips corrupt rows; "all" takes them.
                        let n = page
                            .hits
                            .iter()
                            .filter(|h| query.is_unfiltered() || h.row.task().is_some())
                            .count();
                        let s = if n == 1 { "" } else { "s" };
                        view.bulk_count = format!("{n} task{s}");
                    }
                }
                Err(why) => view.bulk_note = why,
            }
            view.skipped = page.errors;
            view.rows = page.hits.into_iter().map(row_of).collect();
            view.into_response()
        }
        Err(e) => {
            let status = status_of(&e);
            view.error = e.to_string();
            let status = if status == StatusCode::NOT_FOUND {
                StatusCode::BAD_REQUEST
            } else {
                status
            };
            (status, view).into_response()
        }
    }
}
