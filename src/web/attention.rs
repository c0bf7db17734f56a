//! The attention board on the overview (issue 17 item 4,
//! COMPATIBILITY.md N5): [`AttentionCache`] evaluates
//! [`Inspector::attention`] at most once per statistics snapshot, within
//! the dashboard's Redis budget (over budget it keeps the last findings),
//! and [`Board`] renders them, most urgent first, each with a link to where
//! the on-call engineer acts.

use std::sync::{Arc, Mutex};

use askama::Template;
use chrono::{DateTime, Utc};

use super::state::{RedisBudget, Snapshot};
use super::urls::segment;
use crate::Inspector;
use crate::inspector::{Finding, FindingTarget};

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

/// One finding, formatted for the board.
pub struct BoardItem {
    /// `critical`, `warning` or `info`.
    pub severity: &'static str,
    /// The kind's stable name.
    pub kind: &'static str,
    /// The queue concerned, or empty.
    pub queue: String,
    /// The sentence (escaped by the template).
    pub text: String,
    /// The link's path after the root prefix.
    pub href: String,
    /// The link's label.
    pub label: &'static str,
}

/// The board fragment (`templates/_attention.html`).
#[derive(Template)]
#[template(path = "_attention.html")]
pub struct Board {
    /// The root path prefix.
    pub root: String,
    /// The findings, most urgent first.
    pub items: Vec<BoardItem>,
    /// Why the last read failed, or empty.
    pub error: String,
}

impl Board {
    /// The board for `eval` under `root`.
    pub fn of(eval: &Evaluation, root: &str) -> Self {
        Board {
            root: root.to_string(),
            items: eval
                .findings
                .iter()
                .map(|f| BoardItem {
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
                })
                .collect(),
            error: eval.error.clone().unwrap_or_default(),
        }
    }
}
