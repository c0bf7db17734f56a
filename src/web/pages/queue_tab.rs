//! The queue page: one tab per task state (active, pending, aggregating per
//! group, scheduled, retry, archived, completed), each labelled with its
//! count, with a queue banner, paginated task tables, filters, per-task type
//! counts, LastErr groups, and actions on one task, a selection, every task
//! matching a filter, or the whole tab (S14, S17, S28, S29).
//!
//! Go: asynqmon's `/queues/:q?status=` page and its list and batch routes;
//! asynq `Inspector.List*Tasks`, `RunTask`, `ArchiveTask`, `DeleteTask`,
//! `RunAll*`, `ArchiveAll*`, `DeleteAll*`, `CancelProcessing`.
//!
//! Counts and the banner come from the shared stats snapshot (one
//! computation per poll interval for every viewer). A plain tab view is one
//! page read. Filters (task type, payload substring, LastErr group) and the
//! summary (counts per type, LastErr groups) read the tab in pages of
//! [`SCAN_PAGE`] up to [`SCAN_LIMIT`] tasks and say so on the page: a tab of
//! a million tasks costs a bounded read, not a full one. A filter by id is
//! one exact lookup.

use std::collections::{BTreeMap, HashMap};

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use super::errgroups::{self, ErrGroup};
use super::{Layout, is_htmx};
use crate::inspector::{GroupInfo, Page, QueueInfo, TaskRow};
use crate::web::error::PageError;
use crate::web::format::{self, Preview};
use crate::web::urls::{self, filters};
use crate::web::{AppState, MemoryEstimate};
use crate::{Error, Inspector, TaskInfo, TaskState};

/// Page sizes offered; any other `size` falls back to the first.
pub const PAGE_SIZES: [usize; 3] = [20, 50, 100];
/// Filters and the summary look at no more than this many tasks of a tab.
pub const SCAN_LIMIT: usize = 5_000;
/// Tasks read per call while scanning.
pub const SCAN_PAGE: usize = 500;

// ---------------------------------------------------------------------------
// Templates

/// A time as absolute UTC, RFC 3339 for `<time datetime>`, and relative.
#[derive(Clone, Debug)]
pub struct TimeView {
    pub utc: String,
    pub iso: String,
    pub rel: String,
}

impl TimeView {
    /// `t` as seen at `now`.
    pub fn new(t: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        TimeView {
            utc: format::utc(t),
            iso: format::iso(t),
            rel: format::relative(t, now),
        }
    }

    /// [`TimeView::new`] of a time that may be unset.
    pub fn opt(t: Option<DateTime<Utc>>, now: DateTime<Utc>) -> Option<Self> {
        t.map(|t| TimeView::new(t, now))
    }
}

/// One table row, formatted. A corrupt task has `error` set and nothing else
/// but its id.
pub struct RowView {
    pub id: String,
    pub short_id: String,
    /// Why the task could not be read; empty for a readable task.
    pub error: String,
    pub task_type: String,
    pub payload: Preview,
    pub retried: i32,
    pub max_retry: i32,
    pub last_err: String,
    pub last_failed: Option<TimeView>,
    pub next: Option<TimeView>,
    /// Next attempt − last failure (the retry policy at work, S28).
    pub delay: String,
    pub group: String,
    pub started: Option<TimeView>,
    pub deadline: Option<TimeView>,
    pub orphaned: bool,
    pub completed: Option<TimeView>,
    /// Completed at + retention: when the janitor drops it.
    pub expires: Option<TimeView>,
    pub result: Preview,
}

/// How an id shows in a table: a UUID's first segment (asynqmon's habit),
/// another id whole up to 16 characters, else its first 12 and `…`.
pub fn short_id(id: &str) -> String {
    let is_uuid = id.len() == 36
        && id.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
    if is_uuid {
        return id[..8].to_string();
    }
    if id.chars().count() <= 16 {
        return id.to_string();
    }
    let head: String = id.chars().take(12).collect();
    format!("{head}…")
}

/// A worker's view of an active task: started and deadline.
type WorkerTimes = HashMap<String, (Option<DateTime<Utc>>, Option<DateTime<Utc>>)>;

impl RowView {
    fn of(
        row: &TaskRow,
        cfg: &crate::web::WebConfig,
        workers: &WorkerTimes,
        now: DateTime<Utc>,
    ) -> Self {
        match row {
            TaskRow::Task(t) => Self::task(
                t,
                cfg.max_payload_length,
                cfg.max_result_length,
                workers,
                now,
            ),
            TaskRow::Corrupt { id, error, .. } => Self::corrupt(id, error),
        }
    }

    /// The error row of a task that cannot be read.
    pub fn corrupt(id: &str, error: &str) -> Self {
        RowView {
            id: id.to_string(),
            short_id: short_id(id),
            error: if error.is_empty() {
                "undecodable task".into()
            } else {
                error.to_string()
            },
            task_type: String::new(),
            payload: format::preview(b"", 0, false),
            retried: 0,
            max_retry: 0,
            last_err: String::new(),
            last_failed: None,
            next: None,
            delay: String::new(),
            group: String::new(),
            started: None,
            deadline: None,
            orphaned: false,
            completed: None,
            expires: None,
            result: format::preview(b"", 0, false),
        }
    }

    fn task(
        t: &TaskInfo,
        max_payload: usize,
        max_result: usize,
        workers: &WorkerTimes,
        now: DateTime<Utc>,
    ) -> Self {
        let delay = match (t.last_failed_at, t.next_process_at) {
            (Some(failed), Some(next)) if next >= failed => {
                format::human_duration((next - failed).num_seconds().unsigned_abs())
            }
            _ => String::new(),
        };
        let (started, deadline) = workers.get(&t.id).cloned().unwrap_or((None, None));
        let expires = t.completed_at.and_then(|c| {
            chrono::Duration::from_std(t.retention)
                .ok()
                .and_then(|r| c.checked_add_signed(r))
        });
        RowView {
            id: t.id.clone(),
            short_id: short_id(&t.id),
            error: String::new(),
            task_type: t.task_type.clone(),
            payload: format::preview(&t.payload, max_payload, true),
            retried: t.retried,
            max_retry: t.max_retry,
            last_err: t.last_err.clone(),
            last_failed: TimeView::opt(t.last_failed_at, now),
            next: TimeView::opt(t.next_process_at, now),
            delay,
            group: t.group.clone(),
            started: TimeView::opt(started, now),
            deadline: TimeView::opt(deadline, now),
            orphaned: t.is_orphaned,
            completed: TimeView::opt(t.completed_at, now),
            expires: TimeView::opt(expires, now),
            result: format::preview(t.result.as_deref().unwrap_or_default(), max_result, true),
        }
    }
}

/// The queue banner's numbers.
pub struct Banner {
    pub paused: bool,
    pub size: i64,
    pub groups: i64,
    pub memory: String,
    /// When the memory estimate was taken, or why it is missing.
    pub memory_title: String,
    pub latency: String,
    pub processed: i64,
    pub failed: i64,
    pub error_rate: String,
}

impl Banner {
    fn of(i: &QueueInfo, memory: Option<&MemoryEstimate>) -> Self {
        let (memory, memory_title) = super::memory_cell(memory);
        Banner {
            paused: i.paused,
            size: i.size,
            groups: i.groups,
            memory,
            memory_title,
            latency: format::human_duration(i.latency.as_secs()),
            processed: i.processed,
            failed: i.failed,
            error_rate: format::error_rate(i.failed, i.processed),
        }
    }
}

/// One tab link with its count ("n/a" when the statistics failed).
pub struct TabLink {
    pub state: &'static str,
    pub label: &'static str,
    pub count: String,
    pub current: bool,
}

/// A numbered page link (`n` = 0 for a gap).
pub struct PageLink {
    pub n: usize,
    pub qs: String,
    pub current: bool,
}

/// Pagination facts for the template.
pub struct Pager {
    pub page: usize,
    pub size: usize,
    /// Known total of the tab (or of the filter's matches).
    pub total: Option<usize>,
    pub last: usize,
    pub first_item: usize,
    pub last_item: usize,
    pub links: Vec<PageLink>,
    pub prev_qs: String,
    pub next_qs: String,
    /// The page asked for lies past the end.
    pub beyond: bool,
    pub last_qs: String,
    pub sizes: Vec<SizeLink>,
}

/// A page-size link.
pub struct SizeLink {
    pub size: usize,
    pub qs: String,
    pub current: bool,
}

/// An action button.
pub struct OpView {
    pub op: &'static str,
    pub label: &'static str,
    pub danger: bool,
    /// `hx-confirm` text; empty when none.
    pub confirm: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "_queue_tab.html")]
pub struct QueueTab {
    pub layout: Layout,
    pub queue: String,
    pub state: &'static str,
    /// `{root}/queues/{queue}/{state}`, encoded: the base of every tab link.
    pub tab_url: String,
    /// `{root}/queues/{queue}/tasks/`: task links append the encoded id.
    pub task_base: String,
    /// `{root}/queues/{queue}`.
    pub queue_url: String,
    /// Columns after id: type, payload and the state's own.
    pub data_cols: usize,
    /// The current view's query string (page included), `&`-joined and encoded.
    pub qs: String,
    pub banner: Option<Banner>,
    pub banner_error: String,
    pub tabs: Vec<TabLink>,
    pub groups: Vec<GroupInfo>,
    pub group: String,
    pub rows: Vec<RowView>,
    pub pager: Pager,
    /// Bounded-scan note ("… scanned N of M …"); empty when no scan.
    pub scan_note: String,
    /// Result of a filter by id; empty when none.
    pub id_note: String,
    /// Link to the task page when the id was found in another tab.
    pub id_elsewhere: String,
    pub row_ops: Vec<OpView>,
    pub all_ops: Vec<OpView>,
    /// A filter is active (the "matching" actions apply to it).
    pub filtered: bool,
    pub taken_at: String,
    pub taken_at_iso: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "queue.html")]
struct QueuePage {
    layout: Layout,
    tab: QueueTab,
    types: Vec<String>,
    filter: Filter,
}

/// Counts per type and LastErr groups of a tab's bounded scan.
#[derive(Template, WebTemplate)]
#[template(path = "_queue_summary.html")]
struct QueueSummary {
    layout: Layout,
    tab_url: String,
    qs: String,
    scanned: usize,
    total: usize,
    limit: usize,
    corrupt: usize,
    types: Vec<(String, usize)>,
    show_groups: bool,
    groups: Vec<ErrGroup>,
    /// One-line reading of the groups (S14), empty when too few tasks.
    verdict: String,
    group_ops: Vec<OpView>,
}

// ---------------------------------------------------------------------------
// The view: what the path and the query ask for

/// Query parameters of a tab view (and of the actions, which re-render it).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct ViewQuery {
    pub page: Option<String>,
    pub size: Option<String>,
    pub group: Option<String>,
    #[serde(rename = "type")]
    pub task_type: Option<String>,
    pub id: Option<String>,
    pub q: Option<String>,
    pub err: Option<String>,
    /// asynqmon's `/queues/:q?status=<state>`.
    pub status: Option<String>,
    /// Actions on a single task: the tab to re-render.
    pub tab: Option<String>,
    /// Actions on a single task: `task` when posted from the task page.
    pub from: Option<String>,
}

/// Server-side filters of a tab.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Exact task type.
    pub task_type: String,
    /// Exact task id (one lookup, no scan).
    pub id: String,
    /// Substring of the payload bytes (case-sensitive).
    pub payload: String,
    /// [`errgroups::group_id`] of a normalised LastErr.
    pub err: String,
}

impl Filter {
    /// Whether the filter needs the bounded scan.
    fn scans(&self) -> bool {
        !self.task_type.is_empty() || !self.payload.is_empty() || !self.err.is_empty()
    }

    fn matches(&self, t: &TaskInfo) -> bool {
        (self.task_type.is_empty() || t.task_type == self.task_type)
            && (self.payload.is_empty() || contains(&t.payload, self.payload.as_bytes()))
            && (self.err.is_empty()
                || errgroups::group_id(&errgroups::normalise(&t.last_err)) == self.err)
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// A parsed tab view.
#[derive(Clone, Debug)]
pub struct View {
    pub state: TaskState,
    pub page: usize,
    pub size: usize,
    /// Aggregating tab: the group asked for (else the first group).
    pub group: Option<String>,
    pub filter: Filter,
}

fn nonblank(s: &Option<String>) -> String {
    s.as_deref().map(str::trim).unwrap_or_default().to_string()
}

impl View {
    /// The view of tab `state` with the query's page, size, group and filters.
    pub fn new(state: TaskState, q: &ViewQuery) -> Self {
        let page = q
            .page
            .as_deref()
            .and_then(|p| p.trim().parse::<usize>().ok())
            .filter(|p| *p >= 1)
            .unwrap_or(1);
        let size = q
            .size
            .as_deref()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .filter(|s| PAGE_SIZES.contains(s))
            .unwrap_or(PAGE_SIZES[0]);
        let group = q.group.clone().filter(|g| !g.is_empty());
        View {
            state,
            page,
            size,
            group,
            filter: Filter {
                task_type: nonblank(&q.task_type),
                id: nonblank(&q.id),
                payload: q.q.clone().unwrap_or_default(),
                err: nonblank(&q.err),
            },
        }
    }

    /// Query string of this view at `page` with `size`.
    fn qs_at(&self, page: usize, size: usize) -> String {
        let mut parts = vec![format!("page={page}"), format!("size={size}")];
        parts.extend(self.filter_parts());
        parts.join("&")
    }

    fn filter_parts(&self) -> Vec<String> {
        let mut parts = Vec::new();
        let mut add = |k: &str, v: &str| {
            if !v.is_empty() {
                parts.push(format!("{k}={}", encode(v)));
            }
        };
        add("group", self.group.as_deref().unwrap_or_default());
        add("type", &self.filter.task_type);
        add("id", &self.filter.id);
        add("q", &self.filter.payload);
        add("err", &self.filter.err);
        parts
    }

    /// The view's query string.
    pub fn qs(&self) -> String {
        self.qs_at(self.page, self.size)
    }
}

pub use crate::web::urls::encode;

/// Parses a tab name; `None` for anything but the seven states.
pub fn parse_state(s: &str) -> Option<TaskState> {
    s.parse().ok()
}

fn label(state: TaskState) -> &'static str {
    match state {
        TaskState::Active => "Active",
        TaskState::Pending => "Pending",
        TaskState::Aggregating => "Aggregating",
        TaskState::Scheduled => "Scheduled",
        TaskState::Retry => "Retry",
        TaskState::Archived => "Archived",
        TaskState::Completed => "Completed",
    }
}

// ---------------------------------------------------------------------------
// Actions

/// What can be done to a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Run,
    Archive,
    Delete,
    Cancel,
}

impl Op {
    /// `run`, `archive`, `delete` or `cancel` (the last path segment).
    pub fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "run" => Op::Run,
            "archive" => Op::Archive,
            "delete" => Op::Delete,
            "cancel" => Op::Cancel,
            _ => return None,
        })
    }

    /// The path segment of the action.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Run => "run",
            Op::Archive => "archive",
            Op::Delete => "delete",
            Op::Cancel => "cancel",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Op::Run => "Run",
            Op::Archive => "Archive",
            Op::Delete => "Delete",
            Op::Cancel => "Cancel",
        }
    }

    fn past(self) -> &'static str {
        match self {
            Op::Run => "ran",
            Op::Archive => "archived",
            Op::Delete => "deleted",
            Op::Cancel => "cancel requested for",
        }
    }

    /// What happened to one task, for a toast.
    pub fn past_single(self) -> &'static str {
        match self {
            Op::Run => "moved to pending",
            Op::Archive => "archived",
            Op::Delete => "deleted",
            Op::Cancel => "cancellation requested",
        }
    }

    /// The actions a task in `state` offers (S17: archived tasks run and delete).
    pub fn for_state(state: TaskState) -> &'static [Op] {
        match state {
            TaskState::Active => &[Op::Cancel],
            TaskState::Pending => &[Op::Archive, Op::Delete],
            TaskState::Aggregating | TaskState::Scheduled | TaskState::Retry => {
                &[Op::Run, Op::Archive, Op::Delete]
            }
            TaskState::Archived => &[Op::Run, Op::Delete],
            TaskState::Completed => &[Op::Delete],
        }
    }

    /// One task: the inspector call for this action.
    pub async fn apply(self, insp: &Inspector, queue: &str, id: &str) -> crate::Result<()> {
        match self {
            Op::Run => insp.run_task(queue, id).await,
            Op::Archive => insp.archive_task(queue, id).await,
            Op::Delete => insp.delete_task(queue, id).await,
            Op::Cancel => insp.cancel_processing(id).await,
        }
    }
}

/// Buttons for `ops`; `what` names the target in confirmations.
pub fn op_views(ops: &[Op], what: &str, confirm_all: bool) -> Vec<OpView> {
    ops.iter()
        .map(|op| OpView {
            op: op.as_str(),
            label: op.label(),
            danger: *op == Op::Delete,
            confirm: if confirm_all || *op == Op::Delete {
                format!("{} {what}?", op.label())
            } else {
                String::new()
            },
        })
        .collect()
}

/// `HX-Trigger` carrying a toast (an error toast when `error`) and a
/// refresh of the tab summary. JSON with every non-ASCII character escaped,
/// as header values must be ASCII.
pub fn trigger(message: &str, error: bool) -> (HeaderName, HeaderValue) {
    let event = if error { "toastError" } else { "toast" };
    let json = serde_json::json!({ event: message, "refreshSummary": true }).to_string();
    let mut ascii = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                ascii.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    let value = HeaderValue::from_str(&ascii).unwrap_or_else(|_| HeaderValue::from_static("{}"));
    (HeaderName::from_static("hx-trigger"), value)
}

/// An action's error as a 4xx/503 text answer (htmx shows it as an error toast).
pub fn action_error(err: Error, root: &str) -> Response {
    let page = PageError::from_error(err, root);
    let status = match page.status {
        StatusCode::NOT_FOUND | StatusCode::SERVICE_UNAVAILABLE => page.status,
        _ => StatusCode::BAD_REQUEST,
    };
    (status, page.message).into_response()
}

// ---------------------------------------------------------------------------
// Reading a tab

/// A bounded read of a tab.
pub struct Scan {
    /// Rows in tab order.
    pub rows: Vec<TaskRow>,
    /// How many tasks the tab had by the statistics (at least `rows.len()`).
    pub total: usize,
}

/// Reads up to [`SCAN_LIMIT`] tasks of the tab in pages of [`SCAN_PAGE`].
/// `total` (from the statistics) stops the scan early when known.
pub async fn scan(
    insp: &Inspector,
    queue: &str,
    state: TaskState,
    group: Option<&str>,
    total: Option<usize>,
) -> crate::Result<Scan> {
    let mut rows = Vec::new();
    for number in 1..=SCAN_LIMIT / SCAN_PAGE {
        let page = Page::new(number, SCAN_PAGE)?;
        let batch = match group {
            Some(g) => insp.list_aggregating_tasks(queue, g, page).await?,
            None => insp.list_tasks(queue, state, page).await?,
        };
        let n = batch.len();
        rows.extend(batch);
        // A short page is the end, unless the statistics (a poll interval
        // old at most) say more tasks follow; an empty page always is.
        let done = n < SCAN_PAGE && total.is_none_or(|t| number * SCAN_PAGE >= t);
        if n == 0 || done {
            break;
        }
    }
    let total = total.unwrap_or(0).max(rows.len());
    Ok(Scan { rows, total })
}

fn count_of(info: &QueueInfo, state: TaskState) -> i64 {
    match state {
        TaskState::Active => info.active,
        TaskState::Pending => info.pending,
        TaskState::Aggregating => info.aggregating,
        TaskState::Scheduled => info.scheduled,
        TaskState::Retry => info.retry,
        TaskState::Archived => info.archived,
        TaskState::Completed => info.completed,
    }
}

/// Statistics of `queue` from the shared snapshot, with its memory
/// estimate: `None` when the snapshot does not list it (yet) or they
/// failed (then with the error text).
async fn queue_stats(state: &AppState, queue: &str) -> QueueStats {
    let snap = state.stats.get(&state.inspector).await;
    let mut out = QueueStats {
        info: None,
        memory: None,
        error: String::new(),
        taken_at: snap.taken_at,
    };
    if let Some(e) = &snap.error {
        out.error = e.clone();
        return out;
    }
    if let Some(row) = snap.queues.iter().find(|r| r.name == queue) {
        match &row.info {
            Ok(i) => {
                out.info = Some(i.clone());
                out.memory = row.memory.clone();
            }
            Err(e) => out.error = e.clone(),
        }
    }
    out
}

/// One queue's entry of the shared snapshot, for its pages.
struct QueueStats {
    info: Option<QueueInfo>,
    memory: Option<MemoryEstimate>,
    error: String,
    taken_at: DateTime<Utc>,
}

/// Everything the aggregating tab needs to pick its group.
struct Groups {
    all: Vec<GroupInfo>,
    chosen: Option<String>,
}

async fn groups_of(insp: &Inspector, queue: &str, view: &View) -> crate::Result<Groups> {
    if view.state != TaskState::Aggregating {
        return Ok(Groups {
            all: Vec::new(),
            chosen: None,
        });
    }
    let all = insp.groups(queue).await?;
    let chosen = view
        .group
        .clone()
        .or_else(|| all.first().map(|g| g.group.clone()));
    Ok(Groups { all, chosen })
}

/// The tab's size: the chosen group's size for the aggregating tab (0
/// without groups), else the statistics' count (`None` when unknown).
fn tab_total(info: Option<&QueueInfo>, groups: &Groups, state: TaskState) -> Option<usize> {
    match (state, groups.chosen.as_deref()) {
        (TaskState::Aggregating, Some(g)) => Some(
            groups
                .all
                .iter()
                .find(|x| x.group == g)
                .map_or(0, |x| x.size.max(0) as usize),
        ),
        (TaskState::Aggregating, None) => Some(0),
        (s, _) => info.map(|i| count_of(i, s).max(0) as usize),
    }
}

/// Lists one page of the tab (the aggregating tab without groups lists the
/// empty group "", which still checks that the queue exists).
async fn list_page(
    insp: &Inspector,
    queue: &str,
    state: TaskState,
    group: Option<&str>,
    page: Page,
) -> crate::Result<Vec<TaskRow>> {
    if state == TaskState::Aggregating {
        insp.list_aggregating_tasks(queue, group.unwrap_or(""), page)
            .await
    } else {
        insp.list_tasks(queue, state, page).await
    }
}

/// Reads and formats the tab for `view`. Unknown queue → 404; Redis down →
/// 503. Corrupt tasks are rows.
pub async fn render_tab(state: &AppState, queue: &str, view: &View) -> Result<QueueTab, PageError> {
    let root = state.config.root_path.trim_end_matches('/').to_string();
    let insp = &state.inspector;
    let fail = |e: Error| PageError::from_error(e, &root);
    let QueueStats {
        info,
        memory,
        error: stats_error,
        taken_at,
    } = queue_stats(state, queue).await;
    let groups = groups_of(insp, queue, view).await.map_err(fail)?;
    let group = groups.chosen.as_deref();
    let tab_total = tab_total(info.as_ref(), &groups, view.state);

    let mut rows: Vec<TaskRow> = Vec::new();
    let mut total = tab_total;
    let mut scan_note = String::new();
    let mut id_note = String::new();
    let mut id_elsewhere = String::new();
    let offset = (view.page - 1).saturating_mul(view.size);
    if !view.filter.id.is_empty() {
        let id = &view.filter.id;
        match insp.get_task_info(queue, id).await {
            Ok(t)
                if t.state == view.state
                    && (group.is_none() || t.group == group.unwrap_or_default()) =>
            {
                id_note = format!("Task {id} is in this tab.");
                rows.push(TaskRow::Task(t));
            }
            Ok(t) => {
                id_note = format!("Task {id} not found in this tab: it is {}.", t.state);
                id_elsewhere = format!(
                    "{root}/queues/{}/tasks/{}",
                    urls::segment(queue),
                    urls::segment(id)
                );
            }
            Err(Error::TaskNotFound { .. }) => {
                id_note = format!("Task {id} not found in this tab (nor in queue {queue}).");
            }
            // An undecodable msg, or a state field no version knows.
            Err(e @ (Error::Corrupt { .. } | Error::FailedPrecondition(_))) => {
                id_note = format!("Task {id} exists but cannot be read.");
                rows.push(TaskRow::Corrupt {
                    id: id.clone(),
                    state: view.state,
                    error: e.to_string(),
                });
            }
            Err(e) => return Err(fail(e)),
        }
        total = Some(rows.len());
        if view.page > 1 {
            rows.clear();
        }
    } else if view.filter.scans() {
        let scanned = scan(insp, queue, view.state, group, tab_total)
            .await
            .map_err(fail)?;
        let (count, of) = (scanned.rows.len(), scanned.total);
        let matching: Vec<TaskRow> = scanned
            .rows
            .into_iter()
            .filter(|r| r.task().is_some_and(|t| view.filter.matches(t)))
            .collect();
        scan_note = scan_note_text(matching.len(), count, of);
        total = Some(matching.len());
        rows = matching.into_iter().skip(offset).take(view.size).collect();
    } else {
        let page = Page::new(view.page, view.size).map_err(fail)?;
        rows = list_page(insp, queue, view.state, group, page)
            .await
            .map_err(fail)?;
    }
    // The list call checked the queue; a filter by id did through its lookup.

    let workers: WorkerTimes = if view.state == TaskState::Active && !rows.is_empty() {
        // Started and deadline live in the servers' worker records; a
        // failing read only costs these two columns ("-").
        match insp.servers().await {
            Ok(servers) => servers
                .into_iter()
                .flat_map(|s| s.active_workers)
                .map(|w| (w.task_id, (w.started, w.deadline)))
                .collect(),
            Err(_) => WorkerTimes::new(),
        }
    } else {
        WorkerTimes::new()
    };
    let now = insp.now();
    let row_views: Vec<RowView> = rows
        .iter()
        .map(|r| RowView::of(r, &state.config, &workers, now))
        .collect();

    let view_for_links = View {
        group: group.map(str::to_string),
        ..view.clone()
    };
    let pager = pager(&view_for_links, total, row_views.len());
    let tabs = TaskState::ALL
        .iter()
        .map(|s| TabLink {
            state: s.as_str(),
            label: label(*s),
            count: info
                .as_ref()
                .map_or_else(|| "n/a".to_string(), |i| count_of(i, *s).to_string()),
            current: *s == view.state,
        })
        .collect();
    let all_what = match (view.state, group) {
        (TaskState::Aggregating, Some(g)) => format!("every task of group {g}"),
        (s, _) => format!("every {s} task of queue {queue}"),
    };
    let all_ops: Vec<Op> = match view.state {
        // Cancel applies to the scanned active tasks (there is no script for it).
        TaskState::Active => Vec::new(),
        TaskState::Aggregating if group.is_none() => Vec::new(),
        s => Op::for_state(s).to_vec(),
    };
    let queue_url = format!("{root}/queues/{}", urls::segment(queue));
    Ok(QueueTab {
        layout: Layout::new(state, format!("{queue} · {}", view.state), "queues"),
        queue: queue.to_string(),
        state: view.state.as_str(),
        tab_url: format!("{queue_url}/{}", view.state),
        task_base: format!("{queue_url}/tasks/"),
        queue_url,
        data_cols: 2 + extra_columns(view.state),
        qs: view_for_links.qs(),
        banner: info.as_ref().map(|i| Banner::of(i, memory.as_ref())),
        banner_error: stats_error,
        tabs,
        groups: groups.all,
        group: group.unwrap_or_default().to_string(),
        rows: row_views,
        pager,
        scan_note,
        id_note,
        id_elsewhere,
        row_ops: op_views(Op::for_state(view.state), "this task", false),
        all_ops: op_views(&all_ops, &all_what, true),
        filtered: view.filter.scans(),
        taken_at: format::utc(taken_at),
        taken_at_iso: format::iso(taken_at),
    })
}

/// The page's statement of what a filter looked at.
pub fn scan_note_text(matching: usize, scanned: usize, total: usize) -> String {
    let bound = if total > scanned {
        format!(
            " Filters look at the first {SCAN_LIMIT} tasks of a tab only: later tasks are not searched."
        )
    } else {
        String::new()
    };
    format!("{matching} matching · scanned {scanned} of {total} tasks in this tab.{bound}")
}

/// Columns a tab has beyond id, type and payload.
fn extra_columns(state: TaskState) -> usize {
    match state {
        TaskState::Pending | TaskState::Aggregating | TaskState::Scheduled => 1,
        TaskState::Active | TaskState::Archived | TaskState::Completed => 3,
        TaskState::Retry => 4,
    }
}

fn pager(view: &View, total: Option<usize>, shown: usize) -> Pager {
    let size = view.size;
    let last = match total {
        Some(t) => t.div_ceil(size).max(1),
        None => view.page + usize::from(shown == size),
    };
    let beyond = shown == 0 && view.page > last;
    let first_item = if shown == 0 {
        0
    } else {
        (view.page - 1) * size + 1
    };
    let last_item = if shown == 0 {
        0
    } else {
        first_item + shown - 1
    };
    let mut links = Vec::new();
    let mut prev_n = 0;
    for n in 1..=last {
        let near = n == 1 || n == last || n.abs_diff(view.page) <= 2;
        if !near {
            continue;
        }
        if prev_n != 0 && n > prev_n + 1 {
            links.push(PageLink {
                n: 0,
                qs: String::new(),
                current: false,
            });
        }
        links.push(PageLink {
            n,
            qs: view.qs_at(n, size),
            current: n == view.page,
        });
        prev_n = n;
    }
    let has_next = match total {
        Some(_) => view.page < last,
        None => shown == size,
    };
    Pager {
        page: view.page,
        size,
        total,
        last,
        first_item,
        last_item,
        links,
        prev_qs: if view.page > 1 && !beyond {
            view.qs_at(view.page - 1, size)
        } else {
            String::new()
        },
        next_qs: if has_next {
            view.qs_at(view.page + 1, size)
        } else {
            String::new()
        },
        beyond,
        last_qs: view.qs_at(last, size),
        sizes: PAGE_SIZES
            .iter()
            .map(|s| SizeLink {
                size: *s,
                qs: view.qs_at(1, *s),
                current: *s == size,
            })
            .collect(),
    }
}

// ---------------------------------------------------------------------------
// Handlers

/// `GET /queues/{q}` (active tab, or `?status=`), `GET /queues/{q}/{state}`
/// (page or live fragment), `GET …/summary`, and `POST …/batch/{op}`
/// (selected ids), `…/all/{op}` (the whole tab or group), `…/matching/{op}`
/// (what the filters or an error group match in the bounded scan).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/queues/{queue}", get(view_queue_get))
        .route("/queues/{queue}/{state}", get(view_tab_get))
        .route("/queues/{queue}/{state}/summary", get(view_summary_get))
        .route("/queues/{queue}/{state}/batch/{op}", post(batch_post))
        .route("/queues/{queue}/{state}/all/{op}", post(all_post))
        .route("/queues/{queue}/{state}/matching/{op}", post(matching_post))
}

fn unknown_tab(state: &AppState, name: &str) -> PageError {
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
    let insp = &state.inspector;
    let groups = match groups_of(insp, &queue, &view).await {
        Ok(g) => g,
        Err(e) => return PageError::from_error(e, &root).into_response(),
    };
    let info = queue_stats(&state, &queue).await.info;
    let total = tab_total(info.as_ref(), &groups, tab);
    let scanned = if tab == TaskState::Aggregating && groups.chosen.is_none() {
        Scan {
            rows: Vec::new(),
            total: 0,
        }
    } else {
        match scan(insp, &queue, tab, groups.chosen.as_deref(), total).await {
            Ok(s) => s,
            Err(e) => return PageError::from_error(e, &root).into_response(),
        }
    };
    let mut types: BTreeMap<String, usize> = BTreeMap::new();
    let mut corrupt = 0;
    for row in &scanned.rows {
        match row.task() {
            Some(t) => *types.entry(t.task_type.clone()).or_default() += 1,
            None => corrupt += 1,
        }
    }
    let mut types: Vec<(String, usize)> = types.into_iter().collect();
    types.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let show_groups = matches!(tab, TaskState::Retry | TaskState::Archived);
    let groups_found = if show_groups {
        errgroups::group(
            scanned
                .rows
                .iter()
                .filter_map(TaskRow::task)
                .map(|t| (t.id.as_str(), t.last_err.as_str())),
        )
    } else {
        Vec::new()
    };
    let decoded = scanned.rows.len() - corrupt;
    let verdict = verdict(&groups_found, decoded);
    let group_ops: Vec<Op> = Op::for_state(tab)
        .iter()
        .copied()
        .filter(|o| *o != Op::Cancel)
        .collect();
    let view_base = View {
        group: groups.chosen.clone(),
        ..view
    };
    let root = root.trim_end_matches('/');
    QueueSummary {
        layout: Layout::new(&state, "summary", "queues"),
        tab_url: format!("{root}/queues/{}/{tab}", urls::segment(&queue)),
        qs: view_base.qs(),
        scanned: scanned.rows.len(),
        total: scanned.total,
        limit: SCAN_LIMIT,
        corrupt,
        types,
        show_groups,
        groups: groups_found,
        verdict,
        group_ops: op_views(
            &group_ops,
            "every task with this error (among the scanned ones)",
            true,
        ),
    }
    .into_response()
}

/// S14's reading: one error across most tasks points outside, many
/// different errors point at the handlers.
fn verdict(groups: &[ErrGroup], tasks: usize) -> String {
    if tasks < 5 || groups.is_empty() {
        return String::new();
    }
    let top = groups[0].count;
    // A permanent error (SkipRetry, a panic) shared by many tasks is one
    // cause in the data or the code, not an outage: running them again as
    // they are would only fail again (S18, S21).
    let permanent = groups[0].example.contains("skip retry for the task")
        || groups[0].example.starts_with("panic error cause by");
    if top * 5 >= tasks * 4 && permanent {
        format!(
            "One permanent error accounts for {top} of {tasks} tasks: one cause in the input data or the handler code, not an outage; fix it before running them again."
        )
    } else if top * 5 >= tasks * 4 {
        format!(
            "One error accounts for {top} of {tasks} tasks: most likely an external service is down or refusing; fix or wait for it, then run the tasks."
        )
    } else if groups.len() * 2 >= tasks {
        format!(
            "{} different errors across {tasks} tasks: this points at a bug in the task handlers rather than an outage.",
            groups.len()
        )
    } else {
        String::new()
    }
}

/// Form body of batch actions: repeated `ids`.
type Pairs = Vec<(String, String)>;

fn parse_op(state: &AppState, tab: &str, op: &str) -> Result<(TaskState, Op), PageError> {
    let Some(tab) = parse_state(tab) else {
        return Err(unknown_tab(state, tab));
    };
    match Op::parse(op) {
        Some(op) => Ok((tab, op)),
        None => Err(PageError::not_found(
            format!("no action {op:?}"),
            &state.config.root_path,
        )),
    }
}

/// Applies `op` to each id; answers the re-rendered tab and a toast naming
/// every failure.
async fn apply_each(
    state: &AppState,
    queue: &str,
    view: &View,
    op: Op,
    ids: &[String],
    what: &str,
) -> Response {
    let mut failures: Vec<String> = Vec::new();
    let mut done = 0usize;
    for id in ids {
        match op.apply(&state.inspector, queue, id).await {
            Ok(()) => done += 1,
            Err(e) => failures.push(format!("{id}: {e}")),
        }
    }
    state.stats.invalidate().await;
    let message = if failures.is_empty() {
        format!("{} {done} {what}.", capitalise(op.past()))
    } else {
        format!(
            "{} {done} of {} {what}; {} failed: {}",
            capitalise(op.past()),
            ids.len(),
            failures.len(),
            failures.join("; ")
        )
    };
    respond_tab(state, queue, view, &message, !failures.is_empty()).await
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The re-rendered tab with a toast.
pub async fn respond_tab(
    state: &AppState,
    queue: &str,
    view: &View,
    message: &str,
    error: bool,
) -> Response {
    match render_tab(state, queue, view).await {
        Ok(tab) => ([trigger(message, error)], tab).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn batch_post(
    State(state): State<AppState>,
    Path((queue, tab, op)): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
    Form(body): Form<Pairs>,
) -> Response {
    let (tab, op) = match parse_op(&state, &tab, &op) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let ids: Vec<String> = body
        .into_iter()
        .filter(|(k, v)| k == "ids" && !v.is_empty())
        .map(|(_, v)| v)
        .collect();
    if ids.is_empty() {
        return (StatusCode::BAD_REQUEST, "no task selected").into_response();
    }
    let view = View::new(tab, &query);
    apply_each(&state, &queue, &view, op, &ids, "selected tasks").await
}

async fn all_post(
    State(state): State<AppState>,
    Path((queue, tab, op)): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
) -> Response {
    let (tab, op) = match parse_op(&state, &tab, &op) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let view = View::new(tab, &query);
    let insp = &state.inspector;
    let q = queue.as_str();
    let result = match (tab, &view.group, op) {
        (TaskState::Aggregating, Some(g), Op::Run) => insp.run_all_aggregating(q, g).await,
        (TaskState::Aggregating, Some(g), Op::Archive) => insp.archive_all_aggregating(q, g).await,
        (TaskState::Aggregating, Some(g), Op::Delete) => insp.delete_all_aggregating(q, g).await,
        (TaskState::Aggregating, None, _) => {
            return (StatusCode::BAD_REQUEST, "name the group: ?group=<name>").into_response();
        }
        (_, _, Op::Run) => insp.run_all(q, tab).await,
        (_, _, Op::Archive) => insp.archive_all(q, tab).await,
        (_, _, Op::Delete) => insp.delete_all(q, tab).await,
        (_, _, Op::Cancel) => {
            return (
                StatusCode::BAD_REQUEST,
                "cancel applies to selected or matching tasks",
            )
                .into_response();
        }
    };
    state.stats.invalidate().await;
    match result {
        Ok(n) => {
            let message = format!("{} {n} {tab} tasks.", capitalise(op.past()));
            respond_tab(&state, &queue, &view, &message, false).await
        }
        Err(e) => action_error(e, &state.config.root_path),
    }
}

/// Body of a "matching" action: an error group to act on instead of the
/// view's filters.
#[derive(Debug, Default, Deserialize)]
struct MatchingForm {
    #[serde(default)]
    err: Option<String>,
}

async fn matching_post(
    State(state): State<AppState>,
    Path((queue, tab, op)): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
    body: Result<Form<MatchingForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let body = body.map(|Form(b)| b).unwrap_or_default();
    let (tab, op) = match parse_op(&state, &tab, &op) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let view = View::new(tab, &query);
    // An error group's button names its group in the body: it acts on that
    // group exactly (as its count says), whatever the view filters.
    let filter = match body.err.filter(|e| !e.is_empty()) {
        Some(err) => Filter {
            err,
            ..Filter::default()
        },
        None => view.filter.clone(),
    };
    let insp = &state.inspector;
    let groups = match groups_of(insp, &queue, &view).await {
        Ok(g) => g,
        Err(e) => return action_error(e, &state.config.root_path),
    };
    if tab == TaskState::Aggregating && groups.chosen.is_none() {
        return (StatusCode::BAD_REQUEST, "the queue has no groups").into_response();
    }
    let info = queue_stats(&state, &queue).await.info;
    let total = tab_total(info.as_ref(), &groups, tab);
    let scanned = match scan(insp, &queue, tab, groups.chosen.as_deref(), total).await {
        Ok(s) => s,
        Err(e) => return action_error(e, &state.config.root_path),
    };
    let ids: Vec<String> = scanned
        .rows
        .iter()
        .filter_map(TaskRow::task)
        .filter(|t| filter.matches(t))
        .map(|t| t.id.clone())
        .collect();
    apply_each(&state, &queue, &view, op, &ids, "matching tasks").await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> ViewQuery {
        let mut v = ViewQuery::default();
        for (k, val) in pairs {
            let s = Some(val.to_string());
            match *k {
                "page" => v.page = s,
                "size" => v.size = s,
                "type" => v.task_type = s,
                "q" => v.q = s,
                "group" => v.group = s,
                _ => unreachable!(),
            }
        }
        v
    }

    /// Page and size fall back to 1 and 20 when absent, zero, not a number
    /// or not an offered size; query strings encode filter values.
    #[test]
    fn view_parsing() {
        let v = View::new(TaskState::Retry, &q(&[]));
        assert_eq!((v.page, v.size), (1, 20));
        let v = View::new(TaskState::Retry, &q(&[("page", "0"), ("size", "37")]));
        assert_eq!((v.page, v.size), (1, 20));
        let v = View::new(TaskState::Retry, &q(&[("page", "x"), ("size", "100")]));
        assert_eq!((v.page, v.size), (1, 100));
        let v = View::new(
            TaskState::Retry,
            &q(&[
                ("page", "3"),
                ("size", "50"),
                ("type", "a b"),
                ("q", "x&y=é"),
            ]),
        );
        assert_eq!(v.qs(), "page=3&size=50&type=a%20b&q=x%26y%3D%C3%A9");
    }

    /// Page links: first, last and two around the current page, with gaps.
    #[test]
    fn pager_links() {
        let v = View::new(TaskState::Pending, &q(&[("page", "6")]));
        let p = pager(&v, Some(200), 20);
        let ns: Vec<usize> = p.links.iter().map(|l| l.n).collect();
        assert_eq!(ns, [1, 0, 4, 5, 6, 7, 8, 0, 10]);
        assert_eq!((p.first_item, p.last_item, p.last), (101, 120, 10));
        let v = View::new(TaskState::Pending, &q(&[("page", "11")]));
        let p = pager(&v, Some(200), 0);
        assert!(p.beyond);
        assert_eq!(p.last_qs, "page=10&size=20");
        let p = pager(&View::new(TaskState::Pending, &q(&[])), Some(0), 0);
        assert_eq!((p.last, p.beyond, p.links.len()), (1, false, 1));
    }

    #[test]
    fn short_ids_and_triggers() {
        assert_eq!(short_id("3f0c2a9e-1b2c-4d5e-8f90-0123456789ab"), "3f0c2a9e");
        assert_eq!(short_id("bug-1"), "bug-1");
        assert_eq!(short_id("sixteen-chars-id"), "sixteen-chars-id");
        assert_eq!(short_id("a-much-longer-custom-id"), "a-much-longe…");
        let (name, v) = trigger("Ran 1 «task»", true);
        assert_eq!(name, "hx-trigger");
        let text = v.to_str().unwrap();
        assert!(
            text.contains(r#""toastError":"Ran 1 \u00abtask\u00bb""#),
            "{text}"
        );
        let parsed: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(parsed["toastError"], "Ran 1 «task»");
        assert_eq!(parsed["refreshSummary"], true);
    }
}
