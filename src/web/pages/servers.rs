//! Servers page: every running server (Go or asynqdeck) with its host, pid,
//! queues and their weights, strict priority, concurrency, status, start
//! time, and the tasks its workers run now (Go `Inspector.Servers`; asynqmon
//! `/servers`). The table is a live fragment refreshed every poll interval,
//! paged (issue 15: `?page=&size=`, 20 servers by default, at most 500), and
//! each server lists at most [`WORKERS_SHOWN`] of its running tasks, so a
//! view reads and sends one page however many servers and workers exist.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::schedulers::paging;
use super::{Layout, is_htmx};
use crate::inspector::{Page, ServerInfo};
use crate::web::AppState;
use crate::web::error::PageError;
use crate::web::format::{self, Preview};
use crate::web::urls::filters;

/// A time shown three ways: UTC text, ISO for `<time datetime>` (the
/// browser adds the local time) and relative to now.
#[derive(Clone, Debug)]
pub struct When {
    /// `2026-11-29 19:50:01 UTC`.
    pub utc: String,
    /// RFC 3339.
    pub iso: String,
    /// `3m 2s ago`, `in 5s`.
    pub relative: String,
}

impl When {
    /// `t` as seen at `now`.
    pub fn new(t: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        When {
            utc: format::utc(t),
            iso: format::iso(t),
            relative: format::relative(t, now),
        }
    }

    /// `t` (if any) as seen at `now`.
    pub fn opt(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<Self> {
        t.map(|t| When::new(t, now))
    }
}

/// One queue a server serves, with its weight.
pub struct QueueWeight {
    pub name: String,
    pub weight: i32,
}

/// One task a server runs.
pub struct WorkerRow {
    pub task_id: String,
    pub task_type: String,
    pub queue: String,
    pub payload: Preview,
    pub started: Option<When>,
    pub deadline: Option<When>,
}

/// Default number of servers per page.
const DEFAULT_SERVERS_PAGE_SIZE: usize = 20;
/// Largest servers page.
const MAX_SERVERS_PAGE_SIZE: usize = 500;
/// The page sizes the servers pager offers.
const SERVERS_PAGE_SIZES: [usize; 4] = [20, 50, 100, 500];
/// Running tasks listed per server at most (the count shows them all).
pub const WORKERS_SHOWN: usize = 50;

/// One server, formatted.
pub struct ServerRow {
    pub host: String,
    pub pid: i32,
    pub server_id: String,
    pub concurrency: i32,
    /// Highest weight first, then by name.
    pub queues: Vec<QueueWeight>,
    pub strict_priority: bool,
    pub status: String,
    pub started: Option<When>,
    /// The first [`WORKERS_SHOWN`] running tasks.
    pub workers: Vec<WorkerRow>,
    /// Running tasks in all.
    pub active: usize,
}

fn rows(servers: Vec<ServerInfo>, now: DateTime<Utc>, max_payload: usize) -> Vec<ServerRow> {
    servers
        .into_iter()
        .map(|s| {
            let mut queues: Vec<QueueWeight> = s
                .queues
                .into_iter()
                .map(|(name, weight)| QueueWeight { name, weight })
                .collect();
            queues.sort_by(|a, b| b.weight.cmp(&a.weight).then_with(|| a.name.cmp(&b.name)));
            ServerRow {
                host: s.host,
                pid: s.pid,
                server_id: s.server_id,
                concurrency: s.concurrency,
                queues,
                strict_priority: s.strict_priority,
                status: s.status,
                started: When::opt(s.started, now),
                active: s.active_workers.len(),
                workers: s
                    .active_workers
                    .into_iter()
                    .take(WORKERS_SHOWN)
                    .map(|w| WorkerRow {
                        payload: format::preview(&w.task_payload, max_payload, false),
                        task_id: w.task_id,
                        task_type: w.task_type,
                        queue: w.queue,
                        started: When::opt(w.started, now),
                        deadline: When::opt(w.deadline, now),
                    })
                    .collect(),
            }
        })
        .collect()
}

#[derive(Template, WebTemplate)]
#[template(path = "servers.html")]
struct ServersPage {
    layout: Layout,
    list: ServersList,
}

#[derive(Template, WebTemplate)]
#[template(path = "servers_list.html")]
struct ServersList {
    layout: Layout,
    servers: Vec<ServerRow>,
    taken_at: When,
    page: usize,
    size: usize,
    /// Live servers in all.
    total: usize,
    /// Rank of the first server shown, 1-based; 0 when the page is empty.
    first: usize,
    /// Rank of the last server shown.
    last: usize,
    /// Whether a further page exists.
    more: bool,
    /// Page sizes to offer.
    sizes: Vec<usize>,
    /// The default page size (the first page at it refreshes from
    /// `/servers` alone).
    default_size: usize,
}

#[derive(Deserialize)]
struct ServersQuery {
    page: Option<String>,
    size: Option<String>,
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/servers", get(view_servers_get))
}

/// `GET /servers?page=&size=`: one page of the servers (20 by default, at
/// most 500), or its live list when htmx asks. A page beyond the end is
/// empty; a bad page or size is a 400.
async fn view_servers_get(
    State(state): State<AppState>,
    Query(q): Query<ServersQuery>,
    headers: HeaderMap,
) -> Response {
    let root = &state.config.root_path;
    let (page, size) = match paging(
        &q.page,
        &q.size,
        DEFAULT_SERVERS_PAGE_SIZE,
        MAX_SERVERS_PAGE_SIZE,
        root,
    ) {
        Ok(paged) => paged,
        Err(refused) => return refused.into_response(),
    };
    let listed = match state
        .inspector
        .servers_page(Page { number: page, size })
        .await
    {
        Ok(s) => s,
        Err(e) => return PageError::from_error(e, root).into_response(),
    };
    let now = state.inspector.now();
    let skip = (page - 1).saturating_mul(size);
    let shown = listed.servers.len();
    let list = ServersList {
        layout: Layout::new(&state, "Servers", "servers"),
        servers: rows(listed.servers, now, state.config.max_payload_length),
        taken_at: When::new(now, now),
        page,
        size,
        total: listed.total,
        first: if shown == 0 { 0 } else { skip + 1 },
        last: skip + shown,
        more: skip.saturating_add(size) < listed.total,
        sizes: SERVERS_PAGE_SIZES.to_vec(),
        default_size: DEFAULT_SERVERS_PAGE_SIZE,
    };
    if is_htmx(&headers) {
        return list.into_response();
    }
    ServersPage {
        layout: Layout::new(&state, "Servers", "servers"),
        list,
    }
    .into_response()
}
