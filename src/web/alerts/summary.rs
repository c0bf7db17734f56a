//! Aggregating the alerts of one evaluation (COMPATIBILITY.md N6): when
//! more than [`SUMMARY_FROM`] alerts share a (signal, state), one summary
//! post stands for them ("3,004 queues: no server consumes their pending
//! tasks (q1, q2, q3, … and 3,001 more)"), and one evaluation posts at
//! most [`MAX_POSTS`] messages to each webhook: Slack takes about one
//! message per second, and an outage of every worker is when it matters.

use std::collections::BTreeMap;

use super::{Alert, AlertState};
use crate::inspector::{FindingKind, Severity};
use crate::web::pages::jobs::thousands;

/// Alerts of one (signal, state) above this many go out as one summary.
pub const SUMMARY_FROM: usize = 5;
/// Most posts of one evaluation to each webhook.
pub const MAX_POSTS: usize = 10;
/// Most queue names a summary carries (in its structured part).
pub const SUMMARY_QUEUES: usize = 20;
/// Queue names a summary's sentence names.
const TEXT_QUEUES: usize = 3;

/// The alerts one summary post stands for.
#[derive(Clone, Debug, PartialEq)]
pub struct AlertGroup {
    /// How many (queue, signal) alerts it stands for.
    pub count: usize,
    /// Their first [`SUMMARY_QUEUES`] queue names, sorted.
    pub queues: Vec<String>,
}

/// What a signal holding on many queues means, as a clause about them.
fn clause(signal: &str) -> String {
    match signal {
        "retry_growth" => "their retry set is growing fast: an outage?".into(),
        "archive_evicting" => {
            "their archive is at asynq's 10,000-task cap: each new archived task evicts the oldest"
                .into()
        }
        "no_consumer" => "no server consumes their pending tasks".into(),
        "oldest_pending" => "their oldest pending task has waited over 30 minutes".into(),
        "past_due" => {
            "scheduled or retry tasks due over a minute ago still wait: is the forwarder running?"
                .into()
        }
        "several" => "several signals".into(),
        other => {
            let kind = [
                FindingKind::Orphaned,
                FindingKind::RetryWave,
                FindingKind::PausedLong,
                FindingKind::StaleServer,
                FindingKind::Failover,
            ]
            .into_iter()
            .find(|k| k.as_str() == other);
            kind.map_or_else(
                || format!("signal {other}"),
                |k| k.many(Severity::Critical).to_string(),
            )
        }
    }
}

/// One summary post for `alerts` (at least one) of `signal` and `state`,
/// linking to the overview of `dashboard_url`.
pub fn summarize(signal: &str, state: AlertState, alerts: &[Alert], dashboard_url: &str) -> Alert {
    let names = alerts.iter().map(|a| a.queue.as_str()).collect();
    summary(signal, state, alerts.len(), names, dashboard_url)
}

fn summary(
    signal: &str,
    state: AlertState,
    count: usize,
    mut names: Vec<&str>,
    dashboard_url: &str,
) -> Alert {
    names.retain(|n| !n.is_empty());
    names.sort_unstable();
    names.dedup();
    let shown = TEXT_QUEUES.min(names.len());
    let mut listed = names[..shown].join(", ");
    if count > shown && shown > 0 {
        listed.push_str(&format!(
            ", … and {} more",
            thousands((count - shown) as u64)
        ));
    }
    let listed = if listed.is_empty() {
        String::new()
    } else {
        format!(" ({listed})")
    };
    let about = format!(
        "{} {}: {}{listed}",
        thousands(count as u64),
        if signal == "several" {
            "alerts"
        } else {
            "queues"
        },
        clause(signal)
    );
    Alert {
        queue: String::new(),
        signal: signal.to_string(),
        state,
        text: match state {
            AlertState::Resolved => format!("Cleared on {about}"),
            _ => about,
        },
        numbers: vec![("count".into(), count as i64)],
        link: format!("{dashboard_url}/"),
        group: Some(AlertGroup {
            count,
            queues: names
                .iter()
                .take(SUMMARY_QUEUES)
                .map(|s| s.to_string())
                .collect(),
        }),
    }
}

/// The posts for the claimed `alerts` of one evaluation (sorted by queue
/// and signal, as [`super::Alerter::transitions`] returns them): each
/// (signal, state) with more than [`SUMMARY_FROM`] alerts as one summary;
/// past [`MAX_POSTS`] posts, the largest remaining groups summarized too,
/// and if that is not enough, the posts past the [`MAX_POSTS`]th folded
/// into one "several" summary. Summaries first, then the single alerts in
/// their order.
pub fn fold(alerts: Vec<Alert>, dashboard_url: &str) -> Vec<Alert> {
    let mut groups: BTreeMap<(String, &'static str), Vec<Alert>> = BTreeMap::new();
    for a in alerts {
        groups
            .entry((a.signal.clone(), a.state.as_str()))
            .or_default()
            .push(a);
    }
    let mut summarized: Vec<bool> = groups.values().map(|g| g.len() > SUMMARY_FROM).collect();
    let posts = |summarized: &[bool]| -> usize {
        groups
            .values()
            .zip(summarized)
            .map(|(g, s)| if *s { 1 } else { g.len() })
            .sum()
    };
    while posts(&summarized) > MAX_POSTS {
        let largest = groups
            .values()
            .zip(&summarized)
            .enumerate()
            .filter(|(_, (g, s))| !**s && g.len() > 1)
            .max_by_key(|(i, (g, _))| (g.len(), std::cmp::Reverse(*i)))
            .map(|(i, _)| i);
        match largest {
            Some(i) => summarized[i] = true,
            None => break,
        }
    }
    let mut out = Vec::new();
    let mut singles = Vec::new();
    for (((signal, _), g), s) in groups.into_iter().zip(summarized) {
        if s {
            out.push(summarize(&signal, g[0].state, &g, dashboard_url));
        } else {
            singles.extend(g);
        }
    }
    singles.sort_by(|a, b| (&a.queue, &a.signal).cmp(&(&b.queue, &b.signal)));
    out.extend(singles);
    if out.len() > MAX_POSTS {
        let rest = out.split_off(MAX_POSTS - 1);
        let state = if rest.iter().any(|a| a.state == AlertState::Firing) {
            AlertState::Firing
        } else {
            AlertState::Resolved
        };
        let count = rest
            .iter()
            .map(|a| a.group.as_ref().map_or(1, |g| g.count))
            .sum();
        let names = rest
            .iter()
            .flat_map(|a| match &a.group {
                Some(g) => g.queues.iter().map(String::as_str).collect(),
                None => vec![a.queue.as_str()],
            })
            .collect();
        out.push(summary("several", state, count, names, dashboard_url));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert(queue: &str, signal: &str, state: AlertState) -> Alert {
        Alert {
            queue: queue.into(),
            signal: signal.into(),
            state,
            text: format!("{signal} on {queue}"),
            numbers: vec![],
            link: format!("http://dash/queues/{queue}"),
            group: None,
        }
    }

    /// Up to 5 alerts of a (signal, state) go out one by one; 6 make one
    /// summary naming them sorted.
    #[test]
    fn six_of_one_signal_make_a_summary() {
        let five: Vec<Alert> = (0..5)
            .map(|i| alert(&format!("q{i}"), "no_consumer", AlertState::Firing))
            .collect();
        assert_eq!(fold(five.clone(), "http://dash"), five);
        let mut six = five.clone();
        six.insert(0, alert("z", "no_consumer", AlertState::Firing));
        let got = fold(six, "http://dash");
        assert_eq!(got.len(), 1);
        assert_eq!(
            got[0].text,
            "6 queues: no server consumes their pending tasks (q0, q1, q2, … and 3 more)"
        );
        assert_eq!(got[0].link, "http://dash/");
        assert_eq!(
            got[0].group,
            Some(AlertGroup {
                count: 6,
                queues: vec!["q0", "q1", "q2", "q3", "q4", "z"]
                    .into_iter()
                    .map(String::from)
                    .collect()
            })
        );
    }

    /// Past 10 posts the largest groups are summarized; with more groups
    /// than posts, the last posts fold into one "several" summary: never
    /// more than 10.
    #[test]
    fn never_more_than_ten_posts() {
        // 4 groups of 4 alerts: 16 posts; summarizing two gives 10.
        let mut alerts = Vec::new();
        for s in ["a", "b", "c", "d"] {
            for q in 0..4 {
                alerts.push(alert(&format!("q{q}"), s, AlertState::Firing));
            }
        }
        let got = fold(alerts, "http://dash");
        assert_eq!(got.len(), 10);
        let summaries: Vec<(&str, usize)> = got
            .iter()
            .filter_map(|a| Some((a.signal.as_str(), a.group.as_ref()?.count)))
            .collect();
        assert_eq!(summaries, vec![("a", 4), ("b", 4)]);
        // 12 signals, each firing on 2 queues and resolved on 1: 24 groups.
        let mut alerts = Vec::new();
        for s in 0..12 {
            let s = format!("s{s:02}");
            alerts.push(alert("x", &s, AlertState::Firing));
            alerts.push(alert("y", &s, AlertState::Firing));
            alerts.push(alert("z", &s, AlertState::Resolved));
        }
        let got = fold(alerts, "http://dash");
        assert_eq!(got.len(), 10);
        let last = got.last().unwrap();
        assert_eq!(
            (last.signal.as_str(), last.state),
            ("several", AlertState::Firing)
        );
        // 9 posts stand for 9 groups' alerts; the last for the other 36 - 9·k.
        let shown: usize = got[..9]
            .iter()
            .map(|a| a.group.as_ref().map_or(1, |g| g.count))
            .sum();
        assert_eq!(shown + last.group.as_ref().unwrap().count, 36);
    }
}
