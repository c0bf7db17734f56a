//! Schedulers page: the periodic tasks registered by running schedulers
//! (id, cron spec, task type, payload, options, next and previous enqueue;
//! Go `Inspector.SchedulerEntries`), and one entry's enqueue history, newest
//! first and paginated (Go `Inspector.ListSchedulerEnqueueEvents`; asynqmon
//! `/schedulers`). The entries table is a live fragment, paged (R11:
//! `?page=&size=`, 20 per page by default) so that neither a view nor its
//! refresh reads or sends more than one page, however many entries exist.
//! Each entry has a "Run now" button (asynqdeck only): one enqueue of the
//! entry's task as a fire would make it, recorded in its history.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;

use super::servers::When;
use super::{Layout, is_htmx};
use crate::inspector::{Page, SchedulerEntry};
use crate::web::AppState;
use crate::web::error::{PageError, action_error};
use crate::web::format::{self, Preview};
use crate::web::urls::filters;

/// Default number of events per history page.
const DEFAULT_EVENTS_PAGE_SIZE: usize = 20;
/// Largest history page (a scheduler keeps at most 1,000 events per entry).
const MAX_EVENTS_PAGE_SIZE: usize = 1000;
/// Default number of entries per page (R11).
const DEFAULT_ENTRIES_PAGE_SIZE: usize = 20;
/// Largest entries page.
const MAX_ENTRIES_PAGE_SIZE: usize = 500;
/// The page sizes the entries pager offers.
const ENTRIES_PAGE_SIZES: [usize; 4] = [20, 50, 100, 500];

/// One scheduler entry, formatted.
pub struct EntryRow {
    pub id: String,
    pub spec: String,
    pub task_type: String,
    pub payload: Preview,
    pub options: Vec<String>,
    pub next: Option<When>,
    /// `None`: never enqueued yet.
    pub prev: Option<When>,
    /// Option strings that cannot be read back: when any, "Run now" is
    /// disabled and names them.
    pub unreadable: Vec<String>,
}

fn rows(
    entries: Vec<SchedulerEntry>,
    now: chrono::DateTime<chrono::Utc>,
    max_payload: usize,
) -> Vec<EntryRow> {
    entries
        .into_iter()
        .map(|e| EntryRow {
            unreadable: e.unreadable_options(),
            payload: format::preview(&e.payload, max_payload, false),
            id: e.id,
            spec: e.spec,
            task_type: e.task_type,
            options: e.options,
            next: When::opt(e.next_enqueue_at, now),
            prev: When::opt(e.prev_enqueue_at, now),
        })
        .collect()
}

#[derive(Template, WebTemplate)]
#[template(path = "schedulers.html")]
struct SchedulersPage {
    layout: Layout,
    list: SchedulersList,
}

#[derive(Template, WebTemplate)]
#[template(path = "schedulers_list.html")]
struct SchedulersList {
    layout: Layout,
    entries: Vec<EntryRow>,
    taken_at: When,
    page: usize,
    size: usize,
    /// Entries of all schedulers.
    total: usize,
    /// Rank of the first entry shown, 1-based; 0 when the page is empty.
    first: usize,
    /// Rank of the last entry shown.
    last: usize,
    /// Whether a further page exists.
    more: bool,
    /// Page sizes to offer.
    sizes: Vec<usize>,
    /// asynqdeck's scheduler replica groups: which replica is active.
    groups: Vec<crate::inspector::ReplicaGroup>,
}

/// One enqueue of an entry.
pub struct EventRow {
    pub task_id: String,
    pub enqueued_at: When,
}

#[derive(Template, WebTemplate)]
#[template(path = "schedulers_events.html")]
struct EventsPage {
    layout: Layout,
    events: EventsList,
}

#[derive(Template, WebTemplate)]
#[template(path = "schedulers_events_list.html")]
struct EventsList {
    layout: Layout,
    entry_id: String,
    events: Vec<EventRow>,
    page: usize,
    size: usize,
    /// Rank of the first event shown, 1-based (for "events 21–40").
    first: usize,
    /// Whether a further (older) page may exist: this page is full.
    more: bool,
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/schedulers", get(view_schedulers_get))
        .route("/schedulers/{entry_id}/events", get(view_events_get))
        .route("/schedulers/{entry_id}/run", post(run_now_post))
}

/// The answer to "Run now": which task the entry's enqueue made.
#[derive(Template, WebTemplate)]
#[template(path = "_run_now.html")]
struct RunNowDone {
    root: String,
    entry_id: String,
    task_id: String,
    task_type: String,
    queue: String,
    state: String,
}

/// `POST /schedulers/{entry_id}/run` ("Run now"; CSRF token and read-only
/// mode checked by the mutation guard): enqueues the entry's task now
/// ([`Inspector::run_scheduler_entry`](crate::Inspector::run_scheduler_entry))
/// and answers a fragment naming the new task. Errors are text answers
/// (htmx shows them as an error toast): 404 for an entry no scheduler
/// publishes, 400 for options that cannot be read or a refused enqueue,
/// 503 when Redis is unreachable.
async fn run_now_post(State(state): State<AppState>, Path(entry_id): Path<String>) -> Response {
    match state.inspector.run_scheduler_entry(&entry_id).await {
        Ok(info) => {
            state.stats.invalidate().await;
            RunNowDone {
                root: state.config.root_path.clone(),
                entry_id,
                task_id: info.id,
                task_type: info.task_type,
                queue: info.queue,
                state: info.state.to_string(),
            }
            .into_response()
        }
        Err(e) => action_error(e),
    }
}

#[derive(Deserialize)]
struct EntriesQuery {
    page: Option<String>,
    size: Option<String>,
}

/// `GET /schedulers?page=&size=`: one page of the entries (20 by default,
/// at most 500), or its live list when htmx asks. A page beyond the end is
/// empty; a bad page or size is a 400.
async fn view_schedulers_get(
    State(state): State<AppState>,
    Query(q): Query<EntriesQuery>,
    headers: HeaderMap,
) -> Response {
    let root = &state.config.root_path;
    let (page, size) = match paging(
        &q.page,
        &q.size,
        DEFAULT_ENTRIES_PAGE_SIZE,
        MAX_ENTRIES_PAGE_SIZE,
        root,
    ) {
        Ok(paged) => paged,
        Err(refused) => return refused.into_response(),
    };
    let listed = match state
        .inspector
        .scheduler_entries_page(Page { number: page, size })
        .await
    {
        Ok(e) => e,
        Err(e) => return PageError::from_error(e, root).into_response(),
    };
    let groups = match state.inspector.scheduler_replica_groups().await {
        Ok(g) => g,
        Err(e) => return PageError::from_error(e, root).into_response(),
    };
    let now = state.inspector.now();
    let skip = (page - 1).saturating_mul(size);
    let shown = listed.entries.len();
    let list = SchedulersList {
        layout: Layout::new(&state, "Schedulers", "schedulers"),
        entries: rows(listed.entries, now, state.config.max_payload_length),
        taken_at: When::new(now, now),
        page,
        size,
        total: listed.total,
        first: if shown == 0 { 0 } else { skip + 1 },
        last: skip + shown,
        more: skip.saturating_add(size) < listed.total,
        sizes: ENTRIES_PAGE_SIZES.to_vec(),
        groups,
    };
    if is_htmx(&headers) {
        return list.into_response();
    }
    SchedulersPage {
        layout: Layout::new(&state, "Schedulers", "schedulers"),
        list,
    }
    .into_response()
}

#[derive(Deserialize)]
struct EventsQuery {
    page: Option<String>,
    size: Option<String>,
}

/// The 1-based page (default 1) and the size (default `default`, at most
/// `max`) of a `?page=&size=` query; a 400 page for a value that is not a
/// whole number of at least 1.
pub(super) fn paging(
    page: &Option<String>,
    size: &Option<String>,
    default: usize,
    max: usize,
    root: &str,
) -> Result<(usize, usize), PageError> {
    let parsed = number(page.as_deref(), "page").and_then(|page| {
        number(size.as_deref(), "size")
            .map(|size| (page.unwrap_or(1), size.unwrap_or(default).min(max)))
    });
    parsed.map_err(|message| PageError {
        status: StatusCode::BAD_REQUEST,
        message,
        root: root.to_string(),
    })
}

/// Parses an optional positive number from the query string; `None` for a
/// missing or empty value.
fn number(value: Option<&str>, name: &str) -> Result<Option<usize>, String> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Some(n)),
            _ => Err(format!(
                "{name} must be a whole number of at least 1, got {v:?}"
            )),
        },
    }
}

/// `GET /schedulers/{entry_id}/events?page=&size=`: one page of the entry's
/// enqueue history (newest first); the list alone when htmx asks. A page
/// beyond the end is empty; a bad page or size is a 400.
async fn view_events_get(
    State(state): State<AppState>,
    Path(entry_id): Path<String>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Response {
    let root = &state.config.root_path;
    let (page, size) = match paging(
        &q.page,
        &q.size,
        DEFAULT_EVENTS_PAGE_SIZE,
        MAX_EVENTS_PAGE_SIZE,
        root,
    ) {
        Ok(paged) => paged,
        Err(refused) => return refused.into_response(),
    };
    let events = match state
        .inspector
        .scheduler_enqueue_events(&entry_id, Page { number: page, size })
        .await
    {
        Ok(e) => e,
        Err(e) => return PageError::from_error(e, root).into_response(),
    };
    let now = state.inspector.now();
    let title = format!("Enqueue history of {entry_id}");
    let list = EventsList {
        layout: Layout::new(&state, title.clone(), "schedulers"),
        more: events.len() == size,
        events: events
            .into_iter()
            .map(|e| EventRow {
                task_id: e.task_id,
                enqueued_at: When::new(e.enqueued_at, now),
            })
            .collect(),
        entry_id,
        page,
        size,
        first: (page - 1).saturating_mul(size).saturating_add(1),
    };
    if is_htmx(&headers) {
        return list.into_response();
    }
    EventsPage {
        layout: Layout::new(&state, title, "schedulers"),
        events: list,
    }
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::number;

    #[test]
    fn query_numbers() {
        assert_eq!(number(None, "page"), Ok(None));
        assert_eq!(number(Some(""), "page"), Ok(None));
        assert_eq!(number(Some("3"), "page"), Ok(Some(3)));
        assert!(number(Some("0"), "page").is_err());
        assert!(number(Some("x"), "size").is_err());
    }
}
