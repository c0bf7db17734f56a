//! The alert signals of one evaluation: the outage signal (a queue's retry
//! set growing fast, `retry_growth`), every critical attention finding
//! (signal: the finding's kind), and an archive at its cap
//! (`archive_evicting`).

use super::super::attention::target_path;
use crate::inspector::{Finding, FindingKind, FindingTarget, Severity};
use crate::web::state::Snapshot;
use crate::web::urls::segment;

/// A condition that holds now.
#[derive(Clone, Debug, PartialEq)]
pub struct Signal {
    /// The queue, or empty (servers, Redis).
    pub queue: String,
    /// `retry_growth`, `archive_evicting` or a finding kind.
    pub signal: String,
    /// The sentence.
    pub text: String,
    /// The figures behind it.
    pub numbers: Vec<(String, i64)>,
    /// The dashboard path (after the base URL) where to act.
    pub path: String,
}

/// The signals holding in `snap` and `findings`.
pub fn signals(snap: &Snapshot, findings: &[Finding]) -> Vec<Signal> {
    let mut out = Vec::new();
    for row in &snap.queues {
        let (Ok(info), Some(g)) = (&row.info, row.growth) else {
            continue;
        };
        if g.fast {
            out.push(Signal {
                queue: row.name.clone(),
                signal: "retry_growth".into(),
                text: format!(
                    "The retry set of queue {} is growing fast ({:+} in 5 minutes): an outage?",
                    row.name,
                    g.last_5m.delta()
                ),
                numbers: vec![
                    ("retry".into(), info.retry),
                    ("retry_growth_5m".into(), g.last_5m.delta()),
                ],
                path: format!("/queues/{}/retry", segment(&row.name)),
            });
        }
    }
    for f in findings {
        let signal = if f.kind == FindingKind::ArchiveFull {
            "archive_evicting"
        } else if f.severity == Severity::Critical {
            f.kind.as_str()
        } else {
            continue;
        };
        let name = match &f.target {
            FindingTarget::Queue(..) => f.kind.as_str(),
            _ => "value",
        };
        out.push(Signal {
            queue: f.queue.clone().unwrap_or_default(),
            signal: signal.into(),
            text: f.text.clone(),
            numbers: vec![(name.to_string(), f.value)],
            path: target_path(&f.target),
        });
    }
    out
}
