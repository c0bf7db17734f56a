//! The heartbeat: publishes this server's state and keeps the leases of its
//! running tasks (Go `heartbeat.go`; wire spec §4.2, §4.3, §6.15, §6.16,
//! §7.5; seed S13).
//!
//! Each beat writes a `ServerInfo` and one `WorkerInfo` per running task
//! with a TTL of twice the interval, so a server that dies vanishes from
//! `asynq:servers` within seconds. In the same beat the leases of running
//! tasks are extended to now + 30 s, queue by queue; a task whose local lease
//! already lapsed is not extended (the recoverer may own it by now) and its
//! handler is cancelled with [`CancelReason::LeaseExpired`]. The first beat
//! is at start; at shutdown the server's keys are deleted.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use super::inflight::{CancelReason, InFlight, Running};
use super::ticker::{FirstTick, Ticker};
use crate::broker::Broker;
use crate::broker::proto::{ServerInfo, Timestamp, WorkerInfo};
use crate::error::Result;

pub use super::defaults::DEFAULT_HEARTBEAT_INTERVAL;

/// Ids per `ZADD XX` lease extension.
const EXTEND_CHUNK: usize = 100;

/// A server's lifecycle state as written to `ServerInfo.status` (Go
/// `serverStateValue`; wire spec §4.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ServerStatus {
    /// Built, not started: `new`.
    #[default]
    New,
    /// Processing: `active`.
    Active,
    /// Stopped taking new tasks, running ones go on: `stopped`.
    Stopped,
    /// Shut down: `closed`.
    Closed,
}

impl ServerStatus {
    /// Go's text for the state: `new`, `active`, `stopped`, `closed`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerStatus::New => "new",
            ServerStatus::Active => "active",
            ServerStatus::Stopped => "stopped",
            ServerStatus::Closed => "closed",
        }
    }
}

impl std::fmt::Display for ServerStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The status shared by the server (writer) and the heartbeat (reader).
pub type SharedStatus = Arc<Mutex<ServerStatus>>;

/// Who this server is in Redis: the `{host:pid:server_id}` of its keys
/// (wire spec §2.1, §4.2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerIdentity {
    /// OS host name; `unknown-host` when it cannot be read (as Go).
    pub host: String,
    /// Process id.
    pub pid: i32,
    /// A fresh UUIDv4 per server.
    pub server_id: String,
}

impl ServerIdentity {
    /// This process: [`hostname`], its pid and a new UUIDv4 (Go
    /// `newHeartbeater`).
    pub fn detect() -> Self {
        ServerIdentity {
            host: hostname(),
            pid: i32::try_from(std::process::id()).unwrap_or(i32::MAX),
            server_id: uuid::Uuid::new_v4().to_string(),
        }
    }
}

/// The OS host name (Go `os.Hostname`): `/proc/sys/kernel/hostname`, else
/// the `HOSTNAME` environment variable, else `unknown-host`.
pub fn hostname() -> String {
    let from_proc = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string());
    let from_env = || std::env::var("HOSTNAME").ok().map(|s| s.trim().to_string());
    from_proc
        .filter(|s| !s.is_empty())
        .or_else(|| from_env().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown-host".to_string())
}

/// The server settings the heartbeat publishes.
#[derive(Clone, Debug)]
pub struct HeartbeatConfig {
    /// Time between beats (Go: 5 s, [`DEFAULT_HEARTBEAT_INTERVAL`]).
    pub interval: Duration,
    /// Maximum number of tasks processed at once.
    pub concurrency: i32,
    /// Queue name → priority, as configured.
    pub queues: BTreeMap<String, i32>,
    /// Whether queues are served in strict priority order.
    pub strict_priority: bool,
}

/// What one beat did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BeatOutcome {
    /// `WorkerInfo` entries written (= running tasks).
    pub workers: usize,
    /// Leases extended.
    pub extended: usize,
    /// Running tasks whose local lease had lapsed: not extended, cancelled.
    pub lease_expired: usize,
}

/// Publishes the server's state and extends the leases of its running tasks.
#[derive(Debug)]
pub struct Heartbeat {
    broker: Broker,
    config: HeartbeatConfig,
    identity: ServerIdentity,
    started: DateTime<Utc>,
    status: SharedStatus,
    inflight: Arc<InFlight>,
}

impl Heartbeat {
    /// A heartbeat for a new server identity ([`ServerIdentity::detect`]),
    /// started now (the `start_time` it publishes), reading the status from
    /// `status` and the running tasks from `inflight`. Go `newHeartbeater`.
    pub fn new(
        broker: Broker,
        config: HeartbeatConfig,
        inflight: Arc<InFlight>,
        status: SharedStatus,
    ) -> Self {
        let started = broker.now();
        Heartbeat {
            broker,
            config,
            identity: ServerIdentity::detect(),
            started,
            status,
            inflight,
        }
    }

    /// The server's host, pid and server id.
    pub fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    /// The published start time.
    pub fn started(&self) -> DateTime<Utc> {
        self.started
    }

    /// Replaces the queue → priority map published from the next beat on.
    /// The dashboard's maintenance engine ([`super::maintenance`]) serves
    /// every queue in `asynq:queues` and re-lists them before each beat.
    pub fn set_queues(&mut self, queues: BTreeMap<String, i32>) {
        self.config.queues = queues;
    }

    /// How long each beat's keys live: twice the interval in whole seconds
    /// (rounded up), at least 1 s (Go: 10 s).
    pub fn ttl(&self) -> Duration {
        let doubled = self.config.interval.saturating_mul(2);
        let secs = doubled.as_secs() + u64::from(doubled.subsec_nanos() > 0);
        Duration::from_secs(secs.max(1))
    }

    /// Beats at once, then every interval, until `shutdown` is cancelled;
    /// then deletes the server's keys ([`Heartbeat::clear`]). Failures are
    /// logged and the loop goes on. Go `heartbeater.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = Ticker::new(self.config.interval, FirstTick::AtOnce, &shutdown);
        while ticks.next().await {
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "heartbeat: failed to write server state");
            }
        }
        if let Err(e) = self.clear().await {
            tracing::warn!(error = %e, "heartbeat: failed to clear server state");
        }
        tracing::debug!("heartbeat done");
    }

    /// One beat: writes `ServerInfo` + one `WorkerInfo` per running task
    /// with TTL [`Heartbeat::ttl`], then extends the leases of the running
    /// tasks whose local lease is still valid (one `ZADD XX` per queue, new
    /// expiry now + 30 s, recorded locally) and cancels the others with
    /// [`CancelReason::LeaseExpired`]. Leases are extended even when the
    /// state write fails; that failure is then returned. A failed extension
    /// is logged (the tasks' local leases then run out). Go `heartbeater.beat`.
    pub async fn tick(&self) -> Result<BeatOutcome> {
        let mut running = self.inflight.snapshot();
        running.sort_by(|a, b| (a.started, &a.task.msg.id).cmp(&(b.started, &b.task.msg.id)));
        let now = self.broker.now();
        let status = *self.status.lock().expect("status lock");
        let id = &self.identity;
        let info = ServerInfo {
            host: id.host.clone(),
            pid: id.pid,
            server_id: id.server_id.clone(),
            concurrency: self.config.concurrency,
            queues: self.config.queues.clone(),
            strict_priority: self.config.strict_priority,
            status: status.as_str().to_string(),
            start_time: Some(Timestamp::from_utc(Some(self.started))),
            active_worker_count: i32::try_from(running.len()).unwrap_or(i32::MAX),
        };
        let workers: Vec<WorkerInfo> = running.iter().map(|r| self.worker_info(r)).collect();

        let mut outcome = BeatOutcome {
            workers: workers.len(),
            ..BeatOutcome::default()
        };
        let mut by_queue: BTreeMap<&str, Vec<&Arc<Running>>> = BTreeMap::new();
        for r in &running {
            if r.lease_valid(now) {
                by_queue
                    .entry(r.task.msg.queue.as_str())
                    .or_default()
                    .push(r);
            } else {
                tracing::warn!(id = %r.task.msg.id, "heartbeat: lease lapsed; cancelling the task");
                r.cancel_with(CancelReason::LeaseExpired);
                outcome.lease_expired += 1;
            }
        }

        let written = self
            .broker
            .write_server_state(&info, &workers, self.ttl())
            .await;

        for (queue, tasks) in by_queue {
            for chunk in tasks.chunks(EXTEND_CHUNK) {
                let ids: Vec<&str> = chunk.iter().map(|r| r.task.msg.id.as_str()).collect();
                match self.broker.extend_lease(queue, &ids).await {
                    Ok(until) => {
                        let now = self.broker.now();
                        for r in chunk {
                            if r.lease_valid(now) {
                                r.extend_lease(until);
                                outcome.extended += 1;
                            } else {
                                tracing::warn!(id = %r.task.msg.id, "heartbeat: lease lapsed during extension");
                            }
                        }
                    }
                    Err(e) => {
                        tracing::warn!(queue = %queue, ?ids, error = %e, "heartbeat: failed to extend leases");
                    }
                }
            }
        }
        written.map(|()| outcome)
    }

    /// Deletes the server's info and workers keys and their registry entries
    /// (Go `ClearServerState`, at heartbeat shutdown).
    pub async fn clear(&self) -> Result<()> {
        let id = &self.identity;
        self.broker
            .clear_server_state(&id.host, id.pid, &id.server_id)
            .await
    }

    fn worker_info(&self, r: &Running) -> WorkerInfo {
        let id = &self.identity;
        let msg = &r.task.msg;
        WorkerInfo {
            host: id.host.clone(),
            pid: id.pid,
            server_id: id.server_id.clone(),
            task_id: msg.id.clone(),
            task_type: msg.r#type.clone(),
            task_payload: msg.payload.clone(),
            queue: msg.queue.clone(),
            start_time: Some(Timestamp::from_utc(Some(r.started))),
            deadline: Some(Timestamp::from_utc(Some(r.deadline))),
        }
    }
}
