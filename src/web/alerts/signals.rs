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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspector::{QueueInfo, QueueRow, QueueSample, retry_growth};
    use chrono::{Duration, TimeZone, Utc};

    fn row(name: &str, retry: i64, growth: Option<crate::inspector::RetryGrowth>) -> QueueRow {
        QueueRow {
            name: name.into(),
            info: Ok(QueueInfo {
                queue: name.into(),
                memory_usage: 0,
                latency: std::time::Duration::ZERO,
                size: retry,
                groups: 0,
                pending: 0,
                active: 0,
                scheduled: 0,
                retry,
                archived: 0,
                completed: 0,
                aggregating: 0,
                processed: 0,
                failed: 0,
                processed_total: 0,
                failed_total: 0,
                paused: false,
                timestamp: chrono::DateTime::UNIX_EPOCH,
            }),
            memory: None,
            growth,
        }
    }

    fn finding(severity: Severity, kind: FindingKind, q: &str) -> Finding {
        Finding {
            severity,
            kind,
            queue: Some(q.into()),
            text: format!("{} on {q}", kind.as_str()),
            target: FindingTarget::Queue(q.into(), Some("pending")),
            value: 7,
        }
    }

    /// A fast-growing retry set, a critical finding and an evicting
    /// archive are signals; a warning finding and a slow retry set are not.
    #[test]
    fn signals_of_a_snapshot() {
        let now = Utc.with_ymd_and_hms(2026, 3, 10, 12, 0, 0).unwrap();
        let sample = |secs: i64, retry: i64| QueueSample {
            at: now - Duration::seconds(secs),
            retry,
            archived: 0,
        };
        let fast = retry_growth(&[sample(300, 10), sample(0, 60)], now);
        let slow = retry_growth(&[sample(300, 10), sample(0, 11)], now);
        assert!(fast.is_some_and(|g| g.fast) && slow.is_some_and(|g| !g.fast));
        let snap = Snapshot {
            taken_at: now,
            queues: vec![row("a/b", 60, fast), row("calm", 11, slow)],
            error: None,
        };
        let findings = [
            finding(Severity::Critical, FindingKind::NoConsumer, "x"),
            finding(Severity::Warning, FindingKind::OldestPending, "x"),
            finding(Severity::Warning, FindingKind::ArchiveFull, "y"),
        ];
        type Seen = (String, String, Vec<(String, i64)>, String);
        let got: Vec<Seen> = signals(&snap, &findings)
            .into_iter()
            .map(|s| (s.queue, s.signal, s.numbers, s.path))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "a/b".into(),
                    "retry_growth".into(),
                    vec![("retry".into(), 60), ("retry_growth_5m".into(), 50)],
                    "/queues/a%2Fb/retry".into()
                ),
                (
                    "x".into(),
                    "no_consumer".into(),
                    vec![("no_consumer".into(), 7)],
                    "/queues/x/pending".into()
                ),
                (
                    "y".into(),
                    "archive_evicting".into(),
                    vec![("archive_full".into(), 7)],
                    "/queues/y/pending".into()
                ),
            ]
        );
    }
}
