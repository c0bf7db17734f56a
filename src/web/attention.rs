//! The attention board on the overview (issue 17 item 4,
//! COMPATIBILITY.md N5): [`AttentionCache`] evaluates
//! [`Inspector::attention`] at most once per statistics snapshot, within
//! the dashboard's Redis budget (over budget it keeps the last findings),
//! and [`Board`] renders them, most urgent first, each with a link to where
//! the on-call engineer acts: at most [`BOARD_PER_GROUP`] per kind and
//! severity, the rest counted on one line, so the board holds at most
//! [`BOARD_MAX_LINES`] lines whatever the number of queues.

use std::sync::{Arc, Mutex};

use askama::Template;
use chrono::{DateTime, Utc};

use super::state::{RedisBudget, Snapshot};
use super::urls::segment;
use crate::Inspector;
use crate::inspector::{Finding, FindingKind, FindingTarget};
use crate::web::pages::jobs::thousands;

/// The findings of one snapshot, or why they could not be read.
#[derive(Clone, Debug)]
pub struct Evaluation {
    /// The snapshot's time.
    pub taken_at: DateTime<Utc>,
    /// Most urgent first.
    pub findings: Arc<Vec<Finding>>,
    /// The read error, when the bounded reads failed (the findings are then
    /// the last good ones).
    pub error: Option<String>,
}

/// Findings per statistics snapshot, shared by every view and the alerter.
#[derive(Debug)]
pub struct AttentionCache {
    budget: Arc<RedisBudget>,
    last: Mutex<Option<Evaluation>>,
    compute: tokio::sync::Mutex<()>,
}

impl AttentionCache {
    /// A cache metered by `budget` (the statistics reader's).
    pub fn new(budget: Arc<RedisBudget>) -> Self {
        AttentionCache {
            budget,
            last: Mutex::new(None),
            compute: tokio::sync::Mutex::new(()),
        }
    }

    fn cached(&self, snap: &Snapshot) -> Option<Evaluation> {
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        last.as_ref()
            .filter(|e| e.taken_at == snap.taken_at)
            .cloned()
    }

    /// The findings for `snap`: the cached evaluation of that snapshot,
    /// else a new one (one at a time), else, over the Redis budget, the
    /// last one.
    pub async fn get(&self, inspector: &Inspector, snap: &Snapshot) -> Evaluation {
        if let Some(e) = self.cached(snap) {
            return e;
        }
        let _one = self.compute.lock().await;
        if let Some(e) = self.cached(snap) {
            return e;
        }
        let previous = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if snap.error.is_some() {
            return previous.unwrap_or(Evaluation {
                taken_at: snap.taken_at,
                findings: Arc::default(),
                error: snap.error.clone(),
            });
        }
        if self.budget.over()
            && let Some(p) = previous.clone()
        {
            return p;
        }
        // Metered up front for what is known, then for the server records
        // the read found (one `GET` each).
        let cost = inspector.attention_commands(snap);
        let read = self
            .budget
            .metered(cost, inspector.attention_counted(snap))
            .await;
        if let Ok((_, sent)) = &read {
            self.budget.spend(sent.saturating_sub(cost)).await;
        }
        let eval = match read.map(|(f, _)| f) {
            Ok(findings) => Evaluation {
                taken_at: snap.taken_at,
                findings: Arc::new(findings),
                error: None,
            },
            Err(e) => Evaluation {
                taken_at: snap.taken_at,
                findings: previous.map(|p| p.findings).unwrap_or_default(),
                error: Some(e.to_string()),
            },
        };
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(eval.clone());
        eval
    }
}

/// The path (after the root prefix) a finding's link leads to.
pub fn target_path(target: &FindingTarget) -> String {
    match target {
        FindingTarget::Queue(q, Some(tab)) => format!("/queues/{}/{tab}", segment(q)),
        FindingTarget::Queue(q, None) => format!("/queues/{}", segment(q)),
        FindingTarget::Servers => "/servers".into(),
        FindingTarget::Redis => "/redis".into(),
    }
}

/// Most findings of one kind and severity the board lists; the others
/// fold into one "and N more" line (COMPATIBILITY.md N5).
pub const BOARD_PER_GROUP: usize = 5;

/// Most lines the board holds whatever the number of queues: one group
/// per kind and severity (9 kinds, "oldest pending" in two severities),
/// each [`BOARD_PER_GROUP`] findings and one "and N more" line.
pub const BOARD_MAX_LINES: usize = 10 * (BOARD_PER_GROUP + 1);

/// One line of the board: a finding, or the count of the findings of its
/// group left out.
pub struct BoardItem {
    /// `critical`, `warning` or `info`.
    pub severity: &'static str,
    /// The kind's stable name.
    pub kind: &'static str,
    /// The queue concerned, or empty.
    pub queue: String,
    /// The sentence (escaped by the template).
    pub text: String,
    /// The link's path after the root prefix, or empty for none.
    pub href: String,
    /// The link's label.
    pub label: &'static str,
    /// For an "and N more" line, N (the findings it stands for); else 0.
    pub more: usize,
}

/// The board fragment (`templates/_attention.html`).
#[derive(Template)]
#[template(path = "_attention.html")]
pub struct Board {
    /// The root path prefix.
    pub root: String,
    /// Every finding (the title's count).
    pub total: usize,
    /// The lines, most urgent first: at most [`BOARD_PER_GROUP`]
    /// findings per kind and severity, then its "and N more" line.
    pub items: Vec<BoardItem>,
    /// Why the last read failed, or empty.
    pub error: String,
}

fn item(f: &Finding) -> BoardItem {
    BoardItem {
        severity: f.severity.as_str(),
        kind: f.kind.as_str(),
        queue: f.queue.clone().unwrap_or_default(),
        text: f.text.clone(),
        href: target_path(&f.target),
        label: match &f.target {
            FindingTarget::Queue(_, Some(tab)) => match *tab {
                "pending" => "Pending tab",
                "scheduled" => "Scheduled tab",
                "retry" => "Retry tab",
                "active" => "Active tab",
                "archived" => "Archived tab",
                _ => "Open",
            },
            FindingTarget::Queue(_, None) => "Queue",
            FindingTarget::Servers => "Servers",
            FindingTarget::Redis => "Redis",
        },
        more: 0,
    }
}

/// Where an "and N more" line of `kind` leads (after the root prefix) and
/// its label: the overview sorted by the column that shows the trouble,
/// the servers or Redis page; none for past-due tasks (no column shows
/// their due time).
fn more_link(kind: FindingKind) -> (&'static str, &'static str) {
    match kind {
        FindingKind::NoConsumer => ("/?sort=pending&dir=desc", "By pending"),
        FindingKind::OldestPending => ("/?sort=latency&dir=desc", "By latency"),
        FindingKind::PastDue => ("", ""),
        FindingKind::Orphaned => ("/?sort=active&dir=desc", "By active"),
        FindingKind::RetryWave => ("/?sort=retry&dir=desc", "By retry"),
        FindingKind::PausedLong => ("/?sort=state&dir=desc", "By state"),
        FindingKind::ArchiveFull => ("/?sort=archived&dir=desc", "By archived"),
        FindingKind::StaleServer => ("/servers", "Servers"),
        FindingKind::Failover => ("/redis", "Redis"),
    }
}

/// The board's lines for `findings` (most urgent first, as
/// [`Inspector::attention`] sorts them): each run of one kind and
/// severity keeps its first [`BOARD_PER_GROUP`] findings and ends with
/// an "and N more" line for the rest.
pub fn board_items(findings: &[Finding]) -> Vec<BoardItem> {
    let mut out = Vec::new();
    for group in findings.chunk_by(|a, b| (a.kind, a.severity) == (b.kind, b.severity)) {
        out.extend(group.iter().take(BOARD_PER_GROUP).map(item));
        let rest = group.len().saturating_sub(BOARD_PER_GROUP);
        if rest > 0 {
            let f = &group[0];
            let (href, label) = more_link(f.kind);
            out.push(BoardItem {
                severity: f.severity.as_str(),
                kind: f.kind.as_str(),
                queue: String::new(),
                text: format!(
                    "and {} more {}: {}.",
                    thousands(rest as u64),
                    f.kind.subject(),
                    f.kind.many(f.severity)
                ),
                href: href.into(),
                label,
                more: rest,
            });
        }
    }
    out
}

impl Board {
    /// The board for `eval` under `root`.
    pub fn of(eval: &Evaluation, root: &str) -> Self {
        Board {
            root: root.to_string(),
            total: eval.findings.len(),
            items: board_items(&eval.findings),
            error: eval.error.clone().unwrap_or_default(),
        }
    }
}
