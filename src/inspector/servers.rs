//! Servers with their in-flight tasks, scheduler entries and their enqueue
//! history, and cancellation of a running task.
//!
//! Go: `Inspector.Servers`, `SchedulerEntries`, `ListSchedulerEnqueueEvents`,
//! `CancelProcessing` (`inspector.go`; wire spec §4.2–4.5, §6.18, §9.9–9.10).
//! Servers and schedulers publish their state with a TTL (heartbeat); these
//! readers show only unexpired state and prune the expired registry members.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use super::{Inspector, Page};
use crate::broker::proto;
use crate::error::Result;

/// A running server (Go `asynq.ServerInfo`; stored as protobuf `ServerInfo`,
/// wire spec §4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerInfo {
    /// OS host name of the server's machine.
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// Id generated at each server start (a UUIDv4 for Go servers).
    pub server_id: String,
    /// Maximum number of tasks processed at once.
    pub concurrency: i32,
    /// Queue name → priority, as configured.
    pub queues: BTreeMap<String, i32>,
    /// Whether higher-priority queues are always emptied first.
    pub strict_priority: bool,
    /// `active` while running, `stopped` after Stop (Go's other values pass through).
    pub status: String,
    /// When the server started; `None` when not recorded.
    pub started: Option<DateTime<Utc>>,
    /// Tasks in flight, ordered by start time then task id.
    pub active_workers: Vec<WorkerInfo>,
}

/// One task a server is processing (Go `asynq.WorkerInfo`; stored as
/// protobuf `WorkerInfo`, wire spec §4.3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Task id.
    pub task_id: String,
    /// Task type.
    pub task_type: String,
    /// Task payload.
    pub task_payload: Vec<u8>,
    /// Queue the task came from.
    pub queue: String,
    /// When a worker started it; `None` when not recorded.
    pub started: Option<DateTime<Utc>>,
    /// The task's deadline (from its timeout or deadline); `None` when not recorded.
    pub deadline: Option<DateTime<Utc>>,
}

/// A periodic task registered with a running scheduler (Go
/// `asynq.SchedulerEntry`; stored as protobuf `SchedulerEntry`, wire spec §4.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerEntry {
    /// Entry id (a UUIDv4 for Go schedulers).
    pub id: String,
    /// Cron spec as registered, e.g. `*/5 * * * *` or `@every 30s`.
    pub spec: String,
    /// Type of the task it enqueues.
    pub task_type: String,
    /// Payload of the task it enqueues.
    pub payload: Vec<u8>,
    /// Enqueue options in Go's `String()` form as stored, e.g.
    /// `MaxRetry(5)`, `Queue("critical")`, `Timeout(30m0s)`. Go's inspector
    /// parses them back into options and drops the ones it cannot parse;
    /// these are all kept, unparsed.
    // asynq divergence: COMPATIBILITY.md#q8
    pub options: Vec<String>,
    /// Next time the task will be enqueued.
    pub next_enqueue_at: Option<DateTime<Utc>>,
    /// Last time it was enqueued; `None` when never (Go's zero time).
    pub prev_enqueue_at: Option<DateTime<Utc>>,
}

/// One page of servers ([`Inspector::servers_page`]).
#[derive(Clone, Debug)]
pub struct ServersPage {
    /// The page's servers with their workers.
    pub servers: Vec<ServerInfo>,
    /// Live servers in all.
    pub total: usize,
}

/// One page of scheduler entries ([`Inspector::scheduler_entries_page`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerEntriesPage {
    /// The page's entries (undecodable ones skipped, so it may be shorter).
    pub entries: Vec<SchedulerEntry>,
    /// Entries of all running schedulers.
    pub total: usize,
}

/// One enqueue made by a scheduler entry (Go `asynq.SchedulerEnqueueEvent`;
/// wire spec §4.5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerEnqueueEvent {
    /// Id of the task enqueued.
    pub task_id: String,
    /// When it was enqueued (1970-01-01 when the event has no time, as Go reads it).
    pub enqueued_at: DateTime<Utc>,
}

fn time_of(t: Option<proto::Timestamp>) -> Option<DateTime<Utc>> {
    t.and_then(proto::Timestamp::to_utc)
}

impl From<proto::WorkerInfo> for WorkerInfo {
    fn from(w: proto::WorkerInfo) -> Self {
        WorkerInfo {
            task_id: w.task_id,
            task_type: w.task_type,
            task_payload: w.task_payload,
            queue: w.queue,
            started: time_of(w.start_time),
            deadline: time_of(w.deadline),
        }
    }
}

impl From<proto::SchedulerEntry> for SchedulerEntry {
    fn from(e: proto::SchedulerEntry) -> Self {
        SchedulerEntry {
            id: e.id,
            spec: e.spec,
            task_type: e.task_type,
            payload: e.task_payload,
            options: e.enqueue_options,
            next_enqueue_at: time_of(e.next_enqueue_time),
            prev_enqueue_at: time_of(e.prev_enqueue_time),
        }
    }
}

impl From<proto::SchedulerEnqueueEvent> for SchedulerEnqueueEvent {
    fn from(e: proto::SchedulerEnqueueEvent) -> Self {
        let enqueued_at = e
            .enqueue_time
            .and_then(|t| DateTime::from_timestamp(t.seconds, t.nanos.max(0) as u32))
            .unwrap_or(DateTime::UNIX_EPOCH);
        SchedulerEnqueueEvent {
            task_id: e.task_id,
            enqueued_at,
        }
    }
}

impl Inspector {
    /// Running servers with the tasks they process (Go `Inspector.Servers`;
    /// wire spec §9.9).
    ///
    /// Reads the unexpired members of `asynq:servers` and `asynq:workers`
    /// (pruning expired ones), skips keys that are gone or do not decode,
    /// and joins workers to servers by server id (workers of an unlisted
    /// server are dropped). Sorted by host, pid, server id; Go leaves the
    /// order unspecified.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn servers(&self) -> Result<Vec<ServerInfo>> {
        let (servers, workers) = self.broker.list_servers_and_workers().await?;
        Ok(join_servers(servers, workers))
    }

    /// One page of [`Inspector::servers`] (issue 15): servers ranked
    /// `size·(number−1)` to `size·number − 1` in the same order, with their
    /// workers, and how many servers are live. Only the page's server and
    /// workers keys are read (in pipelines of 100 keys), besides the two
    /// registries. A page past the end is empty.
    ///
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) for
    /// a zero page number or size; [`Error::Redis`](crate::Error::Redis).
    pub async fn servers_page(&self, page: Page) -> Result<ServersPage> {
        let (servers, workers, total) = self.broker.servers_and_workers_page(page).await?;
        Ok(ServersPage {
            servers: join_servers(servers, workers),
            total,
        })
    }

    /// Entries of every running scheduler (Go `Inspector.SchedulerEntries`;
    /// wire spec §9.10): schedulers in registry order, each scheduler's
    /// entries as stored (newest registered first). Expired schedulers are
    /// pruned; entries that do not decode are skipped.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn scheduler_entries(&self) -> Result<Vec<SchedulerEntry>> {
        let entries = self.broker.list_scheduler_entries().await?;
        Ok(entries.into_iter().map(SchedulerEntry::from).collect())
    }

    /// One page of the entries of every running scheduler, in the order of
    /// [`Inspector::scheduler_entries`], with the number of entries in all
    /// (R11; Go has no paging here). Page `page.number` (1-based) of
    /// `page.size` covers ranks `size·(number−1)` to `size·number − 1`; a
    /// page beyond the end is empty. Reads only the entries of the page (and
    /// one length per scheduler), however many entries exist.
    ///
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) when
    /// the page number or size is 0; [`Error::Redis`](crate::Error::Redis).
    // asynq divergence: COMPATIBILITY.md#r11
    pub async fn scheduler_entries_page(&self, page: Page) -> Result<SchedulerEntriesPage> {
        let (entries, total) = self.broker.scheduler_entries_page(page).await?;
        Ok(SchedulerEntriesPage {
            entries: entries.into_iter().map(SchedulerEntry::from).collect(),
            total,
        })
    }

    /// One page of a scheduler entry's enqueue history, newest first (Go
    /// `Inspector.ListSchedulerEnqueueEvents`; wire spec §9.10). Page
    /// `page.number` (1-based) of `page.size` covers ranks
    /// `size·(number−1)` to `size·number − 1` of the history ordered newest
    /// first, as Go's pagination; a page beyond the end is empty. An unknown
    /// entry has no events (no existence check, as Go). Events that do not
    /// decode are skipped (Go fails the call).
    ///
    /// Errors: [`Error::InvalidArgument`](crate::Error::InvalidArgument) when
    /// the page number or size is 0 (Go turns these into odd ranges);
    /// [`Error::Redis`](crate::Error::Redis).
    pub async fn scheduler_enqueue_events(
        &self,
        entry_id: &str,
        page: Page,
    ) -> Result<Vec<SchedulerEnqueueEvent>> {
        let events = self
            .broker
            .list_scheduler_enqueue_events(entry_id, page)
            .await?;
        Ok(events
            .into_iter()
            .map(SchedulerEnqueueEvent::from)
            .collect())
    }

    /// Asks the server running the task to cancel it: `PUBLISH asynq:cancel
    /// <task id>` (Go `Inspector.CancelProcessing`; wire spec §6.18). Best
    /// effort: no queue or task check; a task no server runs is unaffected.
    /// Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn cancel_processing(&self, task_id: &str) -> Result<()> {
        self.broker.publish_cancelation(task_id).await
    }
}

/// Joins workers to servers by server id (workers of an unlisted server
/// are dropped) and sorts: servers by host, pid, server id; each server's
/// workers by start time, then task id. Go leaves both orders unspecified.
fn join_servers(
    servers: Vec<proto::ServerInfo>,
    workers: Vec<proto::WorkerInfo>,
) -> Vec<ServerInfo> {
    let mut by_id: BTreeMap<String, ServerInfo> = BTreeMap::new();
    for s in servers {
        by_id.insert(
            s.server_id.clone(),
            ServerInfo {
                host: s.host,
                pid: s.pid,
                server_id: s.server_id,
                concurrency: s.concurrency,
                queues: s.queues,
                strict_priority: s.strict_priority,
                status: s.status,
                started: time_of(s.start_time),
                active_workers: Vec::new(),
            },
        );
    }
    for w in workers {
        if let Some(server) = by_id.get_mut(&w.server_id) {
            server.active_workers.push(w.into());
        }
    }
    // asynq divergence: COMPATIBILITY.md#q7
    let mut out: Vec<ServerInfo> = by_id.into_values().collect();
    for s in &mut out {
        s.active_workers
            .sort_by(|a, b| (a.started, &a.task_id).cmp(&(b.started, &b.task_id)));
    }
    out.sort_by(|a, b| (&a.host, a.pid, &a.server_id).cmp(&(&b.host, b.pid, &b.server_id)));
    out
}
