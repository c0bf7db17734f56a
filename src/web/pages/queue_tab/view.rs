//! What a queue tab shows, as the templates see it: times, rows, the
//! queue banner, tab and page links, action buttons, and the three
//! templates (the tab fragment, the full queue page, the summary).

use askama::Template;
use askama_web::WebTemplate;
use chrono::{DateTime, Utc};

use super::query::{Filter, PAGE_SIZES, View};
use crate::inspector::{GroupInfo, QueueInfo, TaskRow, WorkerTimes};
use crate::web::MemoryEstimate;
use crate::web::format::{self, Preview};
use crate::web::pages::Layout;
use crate::web::urls::filters;
use crate::{TaskInfo, TaskState};

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
impl RowView {
    pub(super) fn of(
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
            last_err: format::clip(&t.last_err, format::LIST_ERROR_CHARS),
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
    pub(super) fn of(i: &QueueInfo, memory: Option<&MemoryEstimate>) -> Self {
        let (memory, memory_title) = crate::web::pages::memory_cell(memory);
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
    /// Offer "Cancel all" (cancel every listed active task): the tab's
    /// tasks allow cancelling and the page is not empty.
    pub cancel_all: bool,
    pub taken_at: String,
    pub taken_at_iso: String,
    /// The Redis budget's stale marker ("numbers 42 s old — Redis
    /// budget"), or empty.
    pub stale: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "queue.html")]
pub(super) struct QueuePage {
    pub layout: Layout,
    pub tab: QueueTab,
    pub types: Vec<String>,
    pub filter: Filter,
}

/// Counts per type and LastErr groups of a tab's bounded scan.
#[derive(Template, WebTemplate)]
#[template(path = "_queue_summary.html")]
pub(super) struct QueueSummary {
    pub layout: Layout,
    pub tab_url: String,
    /// `&group=<name>` on the aggregating tab (error-group links keep it).
    pub group_qs: String,
    pub scanned: usize,
    pub total: usize,
    pub limit: usize,
    pub corrupt: usize,
    pub types: Vec<(String, usize)>,
    pub show_groups: bool,
    /// Error signatures (type + normalised LastErr), most tasks first.
    pub signatures: Vec<super::signatures::SignatureView>,
    /// One-line reading of the groups (S14), empty when too few tasks.
    pub verdict: String,
    pub group_ops: Vec<OpView>,
}

pub(super) fn label(state: TaskState) -> &'static str {
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

/// Columns a tab has beyond id, type and payload.
pub(super) fn extra_columns(state: TaskState) -> usize {
    match state {
        TaskState::Pending | TaskState::Aggregating | TaskState::Scheduled => 1,
        TaskState::Active | TaskState::Archived | TaskState::Completed => 3,
        TaskState::Retry => 4,
    }
}

pub(super) fn pager(view: &View, total: Option<usize>, shown: usize) -> Pager {
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

#[cfg(test)]
mod tests {
    use super::super::query::tests::q;
    use super::*;

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
    fn short_ids() {
        assert_eq!(short_id("3f0c2a9e-1b2c-4d5e-8f90-0123456789ab"), "3f0c2a9e");
        assert_eq!(short_id("bug-1"), "bug-1");
        assert_eq!(short_id("sixteen-chars-id"), "sixteen-chars-id");
        assert_eq!(short_id("a-much-longer-custom-id"), "a-much-longe…");
    }
}
