//! HTML pages, one file per page area (the queue page, with its tabs and
//! actions, is the folder `queue_tab/`). Each handler extracts its inputs,
//! makes one Inspector call (or reads the shared stats snapshot), and
//! renders: the full page, or only its live fragment when htmx asks
//! (`HX-Request`), so every view has a real URL.

mod alerts;
mod audit;
mod enqueue;
pub use enqueue::MAX_FORM_BODY;
mod enqueue_form;
mod history;
pub(crate) mod jobs;
mod left_behind;
mod outage;
mod queue_tab;
mod queues;
mod redis_info;
mod schedulers;
mod search;
mod search_bulk;
mod servers;
mod task;

use axum::Router;
use axum::http::HeaderMap;

use super::AppState;

/// What every page's frame needs.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Root path prefix for links ("" or "/prefix").
    pub root: String,
    /// CSRF token, put in `hx-headers` on `<body>`.
    pub csrf_token: String,
    /// Read-only mode: no action buttons.
    pub read_only: bool,
    /// Poll interval in seconds, for `hx-trigger="every Ns"`.
    pub poll_secs: u64,
    /// Page title.
    pub title: String,
    /// Which nav entry is current: `queues`, `servers`, `schedulers`, `redis`, `jobs`, `audit`, `enqueue`, `search`.
    pub nav: &'static str,
}

impl Layout {
    /// The frame for a page titled `title` under nav entry `nav`.
    pub fn new(state: &AppState, title: impl Into<String>, nav: &'static str) -> Self {
        Layout {
            root: state.config.root_path.trim_end_matches('/').to_string(),
            csrf_token: state.csrf_token.to_string(),
            read_only: state.config.read_only,
            poll_secs: state.config.poll_interval.as_secs().max(1),
            title: title.into(),
            nav,
        }
    }
}

/// A memory estimate as its cell shows it: `(text, title)`. `12.30 MB` with
/// when it was estimated; `n/a` with the reason when the estimate failed;
/// `…` before the first estimate of the queue (computed in the background).
pub fn memory_cell(m: Option<&super::MemoryEstimate>) -> (String, String) {
    match m {
        Some(super::MemoryEstimate { bytes: Ok(b), at }) => (
            super::format::bytes(*b),
            format!(
                "Estimated by sampling at {}; refreshed at most every 5 minutes",
                super::format::utc(*at)
            ),
        ),
        Some(super::MemoryEstimate { bytes: Err(e), at }) => (
            "n/a".to_string(),
            format!("Memory estimate failed at {}: {e}", super::format::utc(*at)),
        ),
        None => (
            "…".to_string(),
            "Being estimated in the background; shown at the next refresh".to_string(),
        ),
    }
}

/// Whether the request came from htmx (then only the fragment is rendered).
pub fn is_htmx(headers: &HeaderMap) -> bool {
    headers.contains_key("hx-request")
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .merge(queues::routes())
        .merge(servers::routes())
        .merge(schedulers::routes())
        .merge(history::routes())
        .merge(outage::routes())
        .merge(redis_info::routes())
        .merge(queue_tab::routes())
        .merge(task::routes())
        .merge(left_behind::routes())
        .merge(jobs::routes())
        .merge(audit::routes())
        .merge(enqueue::routes())
        .merge(search::routes())
        .merge(search_bulk::routes())
        .merge(alerts::routes())
        .fallback(not_found)
}

async fn not_found(
    axum::extract::State(state): axum::extract::State<AppState>,
    uri: axum::http::Uri,
) -> super::error::PageError {
    super::error::PageError::not_found(
        format!("no page at {}", uri.path()),
        &state.config.root_path,
    )
}
