//! Rendering a tab: the shared stats snapshot for the counts and the
//! banner, one [`Inspector::read_tab`](crate::Inspector::read_tab) call for
//! what the tab shows, and the formatting of both into [`QueueTab`].

use chrono::{DateTime, Utc};

use super::actions::{Op, op_views};
use super::query::View;
use super::view::{Banner, QueueTab, RowView, TabLink, extra_columns, label, pager};
use crate::TaskState;
use crate::inspector::{IdLookup, QueueInfo, SCAN_LIMIT, ScanCount, state_count};
use crate::web::error::PageError;
use crate::web::format;
use crate::web::pages::Layout;
use crate::web::urls;
use crate::web::{AppState, MemoryEstimate};

/// One queue's entry of the shared snapshot, for its pages.
pub(super) struct QueueStats {
    pub info: Option<QueueInfo>,
    pub memory: Option<MemoryEstimate>,
    pub error: String,
    pub taken_at: DateTime<Utc>,
    /// The budget's stale marker, or empty (`StatsCache::stale_note`).
    pub stale: String,
}

/// Statistics of `queue` from the shared snapshot, with its memory
/// estimate: `None` when the snapshot does not list it (yet) or they
/// failed (then with the error text).
pub(super) async fn queue_stats(state: &AppState, queue: &str) -> QueueStats {
    let snap = state.stats.get(&state.inspector).await;
    let mut out = QueueStats {
        info: None,
        memory: None,
        error: String::new(),
        taken_at: snap.taken_at,
        stale: (state.stats)
            .stale_note(&snap, state.inspector.now())
            .unwrap_or_default(),
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

/// Reads and formats the tab for `view`. Unknown queue → 404; Redis down →
/// 503. Corrupt tasks are rows.
pub async fn render_tab(state: &AppState, queue: &str, view: &View) -> Result<QueueTab, PageError> {
    let root = state.config.root_path.trim_end_matches('/').to_string();
    let insp = &state.inspector;
    let QueueStats {
        info,
        memory,
        error: stats_error,
        taken_at,
        stale,
    } = queue_stats(state, queue).await;
    let read = insp
        .read_tab(&view.request(queue, info.as_ref()))
        .await
        .map_err(|e| PageError::from_error(e, &root))?;
    let group = read.group.as_deref();
    let now = insp.now();
    let row_views: Vec<RowView> = read
        .rows
        .iter()
        .map(|r| RowView::of(r, &state.config, &read.workers, now))
        .collect();
    let (id_note, id_elsewhere) = match read.lookup {
        Some(found) => id_note_text(&root, queue, &view.filter.id, found),
        None => (String::new(), String::new()),
    };

    let view_for_links = View {
        group: group.map(str::to_string),
        ..view.clone()
    };
    let pager = pager(&view_for_links, read.total, row_views.len());
    let tabs = TaskState::ALL
        .iter()
        .map(|s| TabLink {
            state: s.as_str(),
            label: label(*s),
            count: info
                .as_ref()
                .map_or_else(|| "n/a".to_string(), |i| state_count(i, *s).to_string()),
            current: *s == view.state,
        })
        .collect();
    let all_what = match (view.state, group) {
        (TaskState::Aggregating, Some(g)) => format!("every task of group {g}"),
        (s, _) => format!("every {s} task of queue {queue}"),
    };
    let all_ops: Vec<Op> = match view.state {
        // The active tab's only bulk action is "Cancel all" (`cancel_all`).
        TaskState::Active => Vec::new(),
        TaskState::Aggregating if group.is_none() => Vec::new(),
        s => Op::for_state(s),
    };
    let cancel_all = Op::Cancel.allowed_in(view.state) && !row_views.is_empty();
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
        group: group.unwrap_or_default().to_string(),
        groups: read.groups,
        rows: row_views,
        pager,
        scan_note: read.scan.map(scan_note_text).unwrap_or_default(),
        id_note,
        id_elsewhere,
        row_ops: op_views(&Op::for_state(view.state), "this task", false),
        all_ops: op_views(&all_ops, &all_what, true),
        filtered: view.filter.scans(),
        cancel_all,
        taken_at: format::utc(taken_at),
        taken_at_iso: format::iso(taken_at),
        stale,
    })
}

/// What a filter by id found, as the note above the table, and the link
/// to the task page when it is in another tab.
fn id_note_text(root: &str, queue: &str, id: &str, found: IdLookup) -> (String, String) {
    match found {
        IdLookup::InTab => (format!("Task {id} is in this tab."), String::new()),
        IdLookup::Elsewhere(state) => (
            format!("Task {id} not found in this tab: it is {state}."),
            format!(
                "{root}/queues/{}/tasks/{}",
                urls::segment(queue),
                urls::segment(id)
            ),
        ),
        IdLookup::Missing => (
            format!("Task {id} not found in this tab (nor in queue {queue})."),
            String::new(),
        ),
        IdLookup::Unreadable => (
            format!("Task {id} exists but cannot be read."),
            String::new(),
        ),
    }
}

/// The page's statement of what a filter looked at.
pub fn scan_note_text(scan: ScanCount) -> String {
    let ScanCount {
        matching,
        scanned,
        total,
    } = scan;
    let bound = if total > scanned {
        format!(
            " Filters look at the first {SCAN_LIMIT} tasks of a tab only: later tasks are not searched."
        )
    } else {
        String::new()
    };
    format!("{matching} matching · scanned {scanned} of {total} tasks in this tab.{bound}")
}
