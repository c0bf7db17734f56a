//! The attention board (issue 17 item 4, COMPATIBILITY.md N5): what needs
//! an on-call engineer now, as [`Finding`]s with a severity and a link to
//! where to act, computed from the statistics snapshot the overview
//! already read plus a few bounded reads ([`Inspector::attention`]).
//!
//! The findings and their thresholds:
//!
//! | Kind | When | Severity |
//! | --- | --- | --- |
//! | [`Kind::NoConsumer`] | pending > 0 and no live server with concurrency > 0 lists the queue | critical |
//! | [`Kind::OldestPending`] | the oldest pending task waits over [`OLDEST_PENDING_WARN`] | warning (critical over [`OLDEST_PENDING_CRITICAL`]) |
//! | [`Kind::PastDue`] | the earliest scheduled or retry task is due over [`PAST_DUE_AFTER`] ago (a stalled forwarder) | critical |
//! | [`Kind::Orphaned`] | more active tasks than leases, or a lease expired over [`ORPHAN_GRACE`] ago | warning |
//! | [`Kind::RetryWave`] | at least [`RETRY_WAVE_MIN`] retries due in the next 5 minutes | warning |
//! | [`Kind::PausedLong`] | paused for over [`PAUSED_LONG`] | warning |
//! | [`Kind::ArchiveFull`] | the archive holds [`ARCHIVE_CAP`] tasks: asynq evicts the oldest (S31) | warning |
//! | [`Kind::StaleServer`] | a server's heartbeat expiry is within [`STALE_HEARTBEAT_MARGIN`] (a beat missed) or past | warning |
//! | [`Kind::Failover`] | this process saw a Sentinel failover in the last [`FAILOVER_WINDOW`] | warning |
//!
//! Cost: [`QUEUE_HEADS_COMMANDS`] commands for each of at most
//! [`MAX_QUEUES_READ`] queues holding scheduled, retry or active tasks or
//! paused (the largest first), three `ZCOUNT`s for each of at most
//! [`MAX_QUEUES_READ`] queues holding [`RETRY_WAVE_MIN`] retries, one
//! `ZRANGEBYSCORE … LIMIT`, the live-server registry and up to
//! [`MAX_SERVERS_READ`] server records (`GET`, no workers);
//! every command is O(log n) or bounded ([`Inspector::attention_commands`]
//! tells the caller's Redis budget).

use std::collections::HashSet;
use std::time::Duration;

use super::{Inspector, Snapshot};
use crate::broker::{QUEUE_HEADS_COMMANDS, RETRY_PRESSURE_COMMANDS};
use crate::error::Result;

/// The oldest pending task older than this is a warning.
pub const OLDEST_PENDING_WARN: Duration = Duration::from_secs(5 * 60);
/// The oldest pending task older than this is critical.
pub const OLDEST_PENDING_CRITICAL: Duration = Duration::from_secs(30 * 60);
/// A scheduled or retry task due longer ago than this means the forwarder
/// stalled (the engine forwards within about a second, Go within 5 s).
pub const PAST_DUE_AFTER: Duration = Duration::from_secs(60);
/// A lease expired longer ago than this means the recoverer has not run
/// (Go's recoverer waits 30 s past the lease).
pub const ORPHAN_GRACE: Duration = Duration::from_secs(90);
/// Retries due in the next 5 minutes from which a wave is announced.
pub const RETRY_WAVE_MIN: i64 = 100;
/// A queue paused longer than this is a warning.
pub const PAUSED_LONG: Duration = Duration::from_secs(3600);
/// asynq's archive size limit per queue (Go `maxArchiveSize`): at it, each
/// new archived task evicts the oldest.
pub const ARCHIVE_CAP: i64 = 10_000;
/// A server whose registry expiry is this close (or past) missed a beat
/// (servers beat every 5 s with a 10 s expiry).
pub const STALE_HEARTBEAT_MARGIN: Duration = Duration::from_secs(2);
/// How long a Sentinel failover stays on the board.
pub const FAILOVER_WINDOW: Duration = Duration::from_secs(3600);
/// Most queues whose heads (and whose retry pressure) one evaluation reads.
pub const MAX_QUEUES_READ: usize = 150;
/// Most servers read to learn which queues are consumed; with more live
/// servers the "no consumer" finding is not computed.
pub const MAX_SERVERS_READ: usize = 500;
/// Most late servers listed.
pub const MAX_LATE_SERVERS: usize = 20;

/// How urgent a finding is; ordered, most urgent last.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Look soon.
    Warning,
    /// Act now.
    Critical,
}

impl Severity {
    /// `info`, `warning` or `critical`.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// What a finding is about (see the module docs for the rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Pending tasks and no server consuming the queue.
    NoConsumer,
    /// The oldest pending task is old.
    OldestPending,
    /// Scheduled or retry tasks past due: the forwarder stalled.
    PastDue,
    /// Active tasks without a (live) lease.
    Orphaned,
    /// Many retries due in the next 5 minutes.
    RetryWave,
    /// Paused for long.
    PausedLong,
    /// The archive is at asynq's cap and evicts.
    ArchiveFull,
    /// A server's heartbeat is late.
    StaleServer,
    /// A Sentinel failover happened recently.
    Failover,
}

impl Kind {
    /// A stable name (`no_consumer`, `past_due`, …), used as the alert
    /// signal name and in the page's `data-kind`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::NoConsumer => "no_consumer",
            Kind::OldestPending => "oldest_pending",
            Kind::PastDue => "past_due",
            Kind::Orphaned => "orphaned",
            Kind::RetryWave => "retry_wave",
            Kind::PausedLong => "paused_long",
            Kind::ArchiveFull => "archive_full",
            Kind::StaleServer => "stale_server",
            Kind::Failover => "failover",
        }
    }

    /// What its findings are about, in the plural: `queues`, `servers` or
    /// `failovers` (for "and 2,995 more queues").
    pub fn subject(self) -> &'static str {
        match self {
            Kind::StaleServer => "servers",
            Kind::Failover => "failovers",
            _ => "queues",
        }
    }

    /// What many findings of this kind and `severity` say, as one clause
    /// about their [`Kind::subject`] (plain text): "pending tasks and no
    /// server consumes them".
    pub fn many(self, severity: Severity) -> &'static str {
        match self {
            Kind::NoConsumer => "pending tasks and no server consumes them",
            Kind::OldestPending if severity == Severity::Critical => {
                "the oldest pending task has waited over 30 minutes"
            }
            Kind::OldestPending => "the oldest pending task has waited over 5 minutes",
            Kind::PastDue => {
                "scheduled or retry tasks due over a minute ago still wait: is the forwarder running?"
            }
            Kind::Orphaned => "active tasks without a live lease (orphaned)",
            Kind::RetryWave => "a retry wave is coming (100 or more retries due in 5 minutes)",
            Kind::PausedLong => "paused for over an hour",
            Kind::ArchiveFull => {
                "the archive is at asynq's 10,000-task cap: each new archived task evicts the oldest"
            }
            Kind::StaleServer => "a heartbeat is late",
            Kind::Failover => "Sentinel failed over in the last hour",
        }
    }
}

/// Where a finding's link leads (the web layer makes it a URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A queue's page, optionally on one tab (`pending`, `retry`, …).
    Queue(String, Option<&'static str>),
    /// The servers page.
    Servers,
    /// The Redis page.
    Redis,
}

/// One item of the attention board.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// How urgent.
    pub severity: Severity,
    /// What about.
    pub kind: Kind,
    /// The queue concerned, if any.
    pub queue: Option<String>,
    /// What happens, in a sentence (plain text: escape it).
    pub text: String,
    /// Where to act.
    pub target: Target,
    /// The figure behind it (tasks, seconds, servers), for alerts.
    pub value: i64,
}

/// Whole seconds as `42s`, `5m 3s`, `2h 10m`.
fn ago(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        _ => format!("{}h {}m", s / 3600, (s % 3600) / 60),
    }
}

/// The queues whose heads an evaluation reads, largest first, at most
/// [`MAX_QUEUES_READ`].
fn head_queues(snap: &Snapshot) -> Vec<String> {
    let mut qs: Vec<(i64, &str)> = snap
        .queues
        .iter()
        .filter_map(|r| {
            let i = r.info.as_ref().ok()?;
            let weight = i.scheduled + i.retry + i.active;
            (weight > 0 || i.paused).then_some((weight, r.name.as_str()))
        })
        .collect();
    qs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    qs.into_iter()
        .take(MAX_QUEUES_READ)
        .map(|(_, q)| q.to_string())
        .collect()
}

/// The queues whose retry pressure an evaluation reads.
fn wave_queues(snap: &Snapshot) -> Vec<String> {
    let mut qs: Vec<(i64, &str)> = snap
        .queues
        .iter()
        .filter_map(|r| {
            let i = r.info.as_ref().ok()?;
            (i.retry >= RETRY_WAVE_MIN).then_some((i.retry, r.name.as_str()))
        })
        .collect();
    qs.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    qs.into_iter()
        .take(MAX_QUEUES_READ)
        .map(|(_, q)| q.to_string())
        .collect()
}

impl Finding {
    /// How pressing it is within its kind and severity, larger first: the
    /// figure behind it (more pending tasks, an older task, a longer
    /// pause), except for a late server (fewer seconds left is worse) and
    /// a failover (a more recent one first).
    pub fn urgency(&self) -> i64 {
        match self.kind {
            Kind::StaleServer | Kind::Failover => self.value.saturating_neg(),
            _ => self.value,
        }
    }
}

/// Sorts findings most urgent first: by severity, then kind, then
/// [`Finding::urgency`], then queue.
pub fn sort_findings(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.kind.cmp(&b.kind))
            .then(b.urgency().cmp(&a.urgency()))
            .then(a.queue.cmp(&b.queue))
            .then(a.text.cmp(&b.text))
    });
}

impl Inspector {
    /// Redis commands [`Inspector::attention`] sends for `snap` besides
    /// one `GET` per live server (at most [`MAX_SERVERS_READ`], which
    /// [`Inspector::attention_counted`] reports): at most about 1,500.
    pub fn attention_commands(&self, snap: &Snapshot) -> u64 {
        head_queues(snap).len() as u64 * QUEUE_HEADS_COMMANDS
            + wave_queues(snap).len() as u64 * RETRY_PRESSURE_COMMANDS
            + 2
    }

    /// [`Inspector::attention`] and the Redis commands it sent
    /// ([`Inspector::attention_commands`] plus the server records read),
    /// for a caller that meters them.
    ///
    /// Errors: as [`Inspector::attention`].
    pub async fn attention_counted(&self, snap: &Snapshot) -> Result<(Vec<Finding>, u64)> {
        let mut records = 0;
        let findings = self.attention_with(snap, &mut records).await?;
        Ok((findings, self.attention_commands(snap) + records))
    }

    /// The attention board for `snap`: every finding of the module docs'
    /// table, most urgent first. The snapshot's numbers plus the bounded
    /// reads of the module docs. Queues whose statistics failed are
    /// skipped.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis) when Redis cannot be
    /// reached.
    pub async fn attention(&self, snap: &Snapshot) -> Result<Vec<Finding>> {
        self.attention_with(snap, &mut 0).await
    }

    async fn attention_with(&self, snap: &Snapshot, records: &mut u64) -> Result<Vec<Finding>> {
        let now = self.now();
        let now_s = now.timestamp();
        let mut out = Vec::new();

        // Late servers first: listing the live servers prunes expired ones.
        let late = self
            .broker
            .late_servers(
                now_s + STALE_HEARTBEAT_MARGIN.as_secs() as i64,
                MAX_LATE_SERVERS,
            )
            .await?;
        for s in &late {
            let name = s.key.strip_prefix("asynq:servers:").unwrap_or(&s.key);
            let name = name.trim_start_matches('{').trim_end_matches('}');
            let left = s.expires_at as i64 - now_s;
            let text = if left >= 0 {
                format!("Server {name} missed its heartbeat: its registration expires in {left}s.")
            } else {
                format!(
                    "Server {name} stopped its heartbeat: its registration expired {} ago.",
                    ago(-left)
                )
            };
            out.push(Finding {
                severity: Severity::Warning,
                kind: Kind::StaleServer,
                queue: None,
                text,
                target: Target::Servers,
                value: left,
            });
        }

        let (servers, live) = self.broker.live_server_records(MAX_SERVERS_READ).await?;
        *records = if live <= MAX_SERVERS_READ {
            live as u64
        } else {
            0
        };
        let consumed: Option<HashSet<String>> = (live <= MAX_SERVERS_READ).then(|| {
            servers
                .iter()
                .filter(|s| s.concurrency > 0 && s.status != "stopped" && s.status != "closed")
                .flat_map(|s| s.queues.keys().cloned())
                .collect()
        });

        for row in &snap.queues {
            let Ok(i) = &row.info else { continue };
            let q = &row.name;
            if i.pending > 0 && consumed.as_ref().is_some_and(|c| !c.contains(q)) {
                out.push(Finding {
                    severity: Severity::Critical,
                    kind: Kind::NoConsumer,
                    queue: Some(q.clone()),
                    text: format!(
                        "Queue {q} has {} pending tasks and no server consumes it.",
                        i.pending
                    ),
                    target: Target::Queue(q.clone(), Some("pending")),
                    value: i.pending,
                });
            }
            if i.pending > 0 && i.latency > OLDEST_PENDING_WARN {
                let secs = i.latency.as_secs() as i64;
                out.push(Finding {
                    severity: if i.latency > OLDEST_PENDING_CRITICAL {
                        Severity::Critical
                    } else {
                        Severity::Warning
                    },
                    kind: Kind::OldestPending,
                    queue: Some(q.clone()),
                    text: format!(
                        "The oldest pending task of queue {q} has waited {}.",
                        ago(secs)
                    ),
                    target: Target::Queue(q.clone(), Some("pending")),
                    value: secs,
                });
            }
            if i.archived >= ARCHIVE_CAP {
                out.push(Finding {
                    severity: Severity::Warning,
                    kind: Kind::ArchiveFull,
                    queue: Some(q.clone()),
                    text: format!(
                        "The archive of queue {q} holds {} tasks, asynq's cap: each new archived task evicts the oldest (export them to keep them).",
                        i.archived
                    ),
                    target: Target::Queue(q.clone(), Some("archived")),
                    value: i.archived,
                });
            }
        }

        let heads_of = head_queues(snap);
        let heads = self.broker.queue_heads(&heads_of).await?;
        let past = PAST_DUE_AFTER.as_secs() as i64;
        let infos: std::collections::HashMap<&str, &super::QueueInfo> = snap
            .queues
            .iter()
            .filter_map(|r| Some((r.name.as_str(), r.info.as_ref().ok()?)))
            .collect();
        for (q, h) in heads_of.iter().zip(&heads) {
            let Some(i) = infos.get(q.as_str()) else {
                continue;
            };
            for (tab, score) in [("scheduled", h.scheduled_head), ("retry", h.retry_head)] {
                if let Some(s) = score.map(|s| s as i64)
                    && now_s - s > past
                {
                    out.push(Finding {
                        severity: Severity::Critical,
                        kind: Kind::PastDue,
                        queue: Some(q.clone()),
                        text: format!(
                            "A {tab} task of queue {q} was due {} ago and is still waiting: is the forwarder running?",
                            ago(now_s - s)
                        ),
                        target: Target::Queue(q.clone(), Some(tab)),
                        value: now_s - s,
                    });
                }
            }
            let unleased = h.active - h.leases;
            let expired = h
                .lease_head
                .map(|s| s as i64)
                .filter(|s| now_s - s > ORPHAN_GRACE.as_secs() as i64);
            if unleased > 0 || expired.is_some() {
                let text = if unleased > 0 {
                    format!("{unleased} active tasks of queue {q} hold no lease (orphaned).")
                } else {
                    format!(
                        "A lease of queue {q} expired {} ago and its task is still active (orphaned).",
                        ago(now_s - expired.unwrap_or(now_s))
                    )
                };
                out.push(Finding {
                    severity: Severity::Warning,
                    kind: Kind::Orphaned,
                    queue: Some(q.clone()),
                    text,
                    target: Target::Queue(q.clone(), Some("active")),
                    value: unleased.max(1),
                });
            }
            if i.paused
                && let Some(since) = h.paused_since
                && now_s - since > PAUSED_LONG.as_secs() as i64
            {
                out.push(Finding {
                    severity: Severity::Warning,
                    kind: Kind::PausedLong,
                    queue: Some(q.clone()),
                    text: format!("Queue {q} has been paused for {}.", ago(now_s - since)),
                    target: Target::Queue(q.clone(), None),
                    value: now_s - since,
                });
            }
        }

        let wave_of = wave_queues(snap);
        if !wave_of.is_empty() {
            let pressures = self.retry_pressures(&wave_of).await?;
            for (q, p) in wave_of.iter().zip(pressures) {
                let Ok(p) = p else { continue };
                if p.next_5m >= RETRY_WAVE_MIN {
                    out.push(Finding {
                        severity: Severity::Warning,
                        kind: Kind::RetryWave,
                        queue: Some(q.clone()),
                        text: format!(
                            "A retry wave is coming on queue {q}: {} retries due in the next 5 minutes ({} in the next minute).",
                            p.next_5m, p.next_1m
                        ),
                        target: Target::Queue(q.clone(), Some("retry")),
                        value: p.next_5m,
                    });
                }
            }
        }

        if let Some(f) = self
            .broker
            .sentinel_status()
            .and_then(|s| s.last_failover)
            .filter(|f| (now - f.at).num_seconds() < FAILOVER_WINDOW.as_secs() as i64)
        {
            out.push(Finding {
                severity: Severity::Warning,
                kind: Kind::Failover,
                queue: None,
                text: format!(
                    "Sentinel failed over from {} to {} {} ago.",
                    f.from,
                    f.to,
                    ago((now - f.at).num_seconds())
                ),
                target: Target::Redis,
                value: (now - f.at).num_seconds(),
            });
        }
        sort_findings(&mut out);
        Ok(out)
    }
}
