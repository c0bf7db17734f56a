//! The maintenance engine without a processor: the loops Go's `asynq.Server`
//! runs beside its workers, over **every** queue in `asynq:queues`, for a
//! process that maintains queues without processing tasks (the dashboard,
//! `asynqdeck serve`; seed S30).
//!
//! Without it, nothing moves retry and scheduled tasks to pending while no
//! worker runs (S12), lease-expired tasks of a crashed worker stay active,
//! and expired completed tasks are never deleted. [`Maintenance`] runs:
//!
//! - the forwarder (scheduled/retry → pending; Go default every 5 s, first
//!   poll after one interval),
//! - the recoverer (lease-expired active tasks → retry or archived, stale
//!   aggregation sets back to their groups, orphaned active ids; a full
//!   pass every 1 min, first at once, and queues holding leases looked at
//!   when their earliest lease + 30 s comes, at most 5 s apart; R4, R8),
//! - queue discovery (queues holding tasks but missing from
//!   `asynq:queues` listed again, unpaused; bounded `SCAN` steps every 1 s;
//!   R14),
//! - the janitor (expired completed tasks; every 8 s, first sweep after one
//!   interval),
//! - the heartbeat (this process registered as a server; every 5 s, first
//!   beat at once, state removed at shutdown),
//! - the outage sampler (asynqdeck only: each queue's retry and archived
//!   sizes into `asynqdeck:{<queue>}:samples`; every poll interval, first
//!   sample at once; S14, S29),
//! - when [`MaintenanceConfig::archive_export`] is set, the archive
//!   exporter (asynqdeck only: newly archived tasks appended to gzip NDJSON
//!   files, queues whose archive changed; S31, `archive_export`),
//!
//! each reusing the server's component (`forwarder`, `recoverer`, `janitor`,
//! `heartbeat`, `sampler`, `discovery`).
//!
//! # Cost follows change (issue 15; COMPATIBILITY.md L1, L2)
//! The engine does not poll every queue. A [`DueIndex`]
//! (`broker::due`) holds each queue's earliest scheduled, retry, lease,
//! completed and aggregation-set scores and its retry, archived and active
//! sizes in memory, read once and then again only for the queues Redis
//! reports changed (key tracking; on a Redis Cluster, or where tracking is
//! refused, it reads every queue each forwarder interval instead, eight
//! plain commands per queue). From it:
//!
//! - the forwarder sleeps until the earliest scheduled/retry score (and at
//!   least every second compares the index with the broker's clock, no
//!   Redis call), then forwards only the queues with a due task: a task
//!   moves within about a second of its time (Go: up to 5 s). The first
//!   forward still comes one interval after start, as Go's;
//! - the janitor sweeps, every interval, only the queues whose earliest
//!   completed task expired;
//! - the recoverer's full pass (every interval) looks only at queues holding
//!   leases, active ids or aggregation sets, and a queue is looked at as
//!   soon as its earliest lease is recoverable or an aggregation set is past
//!   its deadline;
//! - the sampler samples a queue when its retry or archived size changed (at
//!   most once per interval) and otherwise every 2.5–5 min
//!   ([`KEEPALIVE_SAMPLE`](super::sampler::KEEPALIVE_SAMPLE));
//! - the heartbeat and queue discovery take the queue list from the index
//!   (no `SMEMBERS asynq:queues` every few seconds).
//!
//! A new queue is in the index within about 50 ms of its `SADD` (tracking
//! mode) or one forwarder interval (polling). Idle, the engine costs Redis
//! about 0.3 % of a core at 5,000 queues and 0.6 % at 25,000 (release
//! build; Redis's own idle work and queue discovery's keyspace walk,
//! capped at 2,000 keys a second, are most of it); see BENCHMARKS.md.
//!
//! # The heartbeat
//! The process registers itself as a server with concurrency 0, status
//! `active`, every queue at priority 1 and no workers, so Go's
//! `Inspector.Servers`, asynqmon and our servers page show who maintains the
//! queues when no worker is running (and that this "server" processes
//! nothing). Its entry expires 10 s after the last beat and is deleted at
//! shutdown. Set [`MaintenanceConfig::register_server`] to `false` to stay
//! invisible.
//!
//! # Sharing queues with Go servers
//! Go servers of the same queues run the same loops; every step is one Lua
//! script whose outcome does not depend on who runs it (a task recovered by
//! two recoverers is moved once, the loser gets NOT FOUND), as between two Go
//! servers (S13). A task the recoverer retries waits the default retry delay
//! (Sidekiq curve, S4) — a Go server's own recoverer would use its
//! `RetryDelayFunc`, which this process cannot know.
//!
//! ```no_run
//! use asynqdeck::broker::Broker;
//! use asynqdeck::server::{Maintenance, MaintenanceConfig};
//! use tokio_util::sync::CancellationToken;
//! # async fn demo() -> asynqdeck::Result<()> {
//! let broker = Broker::connect("redis://127.0.0.1:6379/0").await?;
//! let shutdown = CancellationToken::new();
//! let engine = tokio::spawn(
//!     Maintenance::new(broker, MaintenanceConfig::default()).run(shutdown.clone()),
//! );
//! // ... serve the dashboard, then:
//! shutdown.cancel();
//! engine.await.expect("maintenance task");
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::archive_export::{ArchiveExportConfig, ArchiveExporter};
use super::defaults::{
    DEFAULT_DISCOVERY_INTERVAL, DEFAULT_FORWARD_INTERVAL, DEFAULT_HEARTBEAT_INTERVAL,
    DEFAULT_JANITOR_BATCH_SIZE, DEFAULT_JANITOR_INTERVAL, DEFAULT_RECOVER_INTERVAL,
    DEFAULT_SAMPLE_INTERVAL,
};
use super::discovery::QueueDiscovery;
use super::forwarder;
use super::heartbeat::{Heartbeat, HeartbeatConfig, ServerIdentity, ServerStatus};
use super::hooks::IsFailureFunc;
use super::inflight::InFlight;
use super::janitor;
use super::recoverer::Recoverer;
use super::retry::{RetryDelayFunc, default_retry_delay_fn};
use super::sampler::Sampler;
use super::ticker::{FirstTick, Ticker};
use crate::broker::{Broker, DueIndex};

/// Priority each queue gets in the published `ServerInfo.queues`.
const PUBLISHED_PRIORITY: i32 = 1;

/// Settings of [`Maintenance`]. [`MaintenanceConfig::default`] gives Go's
/// intervals (wire spec §7.1).
#[derive(Clone)]
pub struct MaintenanceConfig {
    /// How often due scheduled and retry tasks move to pending (Go
    /// `DelayedTaskCheckInterval`). Default 5 s.
    pub forwarder_interval: Duration,
    /// How often the recoverer passes over every queue. Default 1 min
    /// (Go); queues holding leases are looked at in between, so a crashed
    /// worker's tasks come back within seconds of lease + grace (R8).
    pub recoverer_interval: Duration,
    /// How often queue discovery takes its next `SCAN` steps (finds queues
    /// holding tasks but missing from `asynq:queues`, R14); `None` turns it
    /// off. Default 1 s.
    pub discovery_interval: Option<Duration>,
    /// How often expired completed tasks are deleted (Go `JanitorInterval`).
    /// Default 8 s.
    pub janitor_interval: Duration,
    /// Completed tasks deleted per script call (Go `JanitorBatchSize`).
    /// Default 100.
    pub janitor_batch_size: usize,
    /// How often the server state is written. Default 5 s (Go); the entry
    /// lives twice as long.
    pub heartbeat_interval: Duration,
    /// Register this process as a server (concurrency 0, status `active`).
    /// Default `true`.
    pub register_server: bool,
    /// How often the outage sampler records each queue's retry and archived
    /// sizes (`server::sampler`, S14, S29; under 1 s is taken as 1 s);
    /// `None` turns it off. Default 5 s; `asynqdeck serve` uses its poll
    /// interval.
    pub sample_interval: Option<Duration>,
    /// Delay before the next attempt of a task recovered after its lease
    /// expired: `(Retried, error, task) -> Duration`. Default: the Sidekiq
    /// curve (S4).
    pub retry_delay_func: RetryDelayFunc,
    /// Whether a lease expiry counts as a failure (Retried + 1, failed
    /// counters). Default: always (Go).
    pub is_failure: IsFailureFunc,
    /// The archive exporter (`--archive-export-dir`, S31): archived tasks
    /// appended to gzip NDJSON files within an interval of being archived
    /// ([`super::archive_export`]). Default `None` (off).
    pub archive_export: Option<ArchiveExportConfig>,
}

impl Default for MaintenanceConfig {
    fn default() -> Self {
        MaintenanceConfig {
            forwarder_interval: DEFAULT_FORWARD_INTERVAL,
            recoverer_interval: DEFAULT_RECOVER_INTERVAL,
            discovery_interval: Some(DEFAULT_DISCOVERY_INTERVAL),
            janitor_interval: DEFAULT_JANITOR_INTERVAL,
            janitor_batch_size: DEFAULT_JANITOR_BATCH_SIZE,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            register_server: true,
            sample_interval: Some(DEFAULT_SAMPLE_INTERVAL),
            retry_delay_func: default_retry_delay_fn(),
            is_failure: Arc::new(|_| true),
            archive_export: None,
        }
    }
}

impl std::fmt::Debug for MaintenanceConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MaintenanceConfig")
            .field("forwarder_interval", &self.forwarder_interval)
            .field("recoverer_interval", &self.recoverer_interval)
            .field("discovery_interval", &self.discovery_interval)
            .field("janitor_interval", &self.janitor_interval)
            .field("janitor_batch_size", &self.janitor_batch_size)
            .field("heartbeat_interval", &self.heartbeat_interval)
            .field("register_server", &self.register_server)
            .field("sample_interval", &self.sample_interval)
            .field("archive_export", &self.archive_export)
            .finish_non_exhaustive()
    }
}

/// Forwarder, recoverer, janitor and heartbeat over every queue, without a
/// processor (see the module docs). Build with [`Maintenance::new`], start
/// with [`Maintenance::run`].
pub struct Maintenance {
    broker: Broker,
    config: MaintenanceConfig,
    heartbeat: Heartbeat,
}

impl std::fmt::Debug for Maintenance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Maintenance")
            .field("config", &self.config)
            .field("identity", self.heartbeat.identity())
            .finish_non_exhaustive()
    }
}

impl Maintenance {
    /// An engine on `broker` with `config`. Nothing runs until
    /// [`Maintenance::run`]. The server identity (host, pid, a new UUIDv4)
    /// is fixed here.
    pub fn new(broker: Broker, config: MaintenanceConfig) -> Self {
        let status = Arc::new(Mutex::new(ServerStatus::Active));
        let heartbeat = Heartbeat::new(
            broker.clone(),
            HeartbeatConfig {
                interval: config.heartbeat_interval,
                concurrency: 0,
                queues: BTreeMap::new(),
                strict_priority: false,
            },
            Arc::new(InFlight::default()),
            status,
        );
        Maintenance {
            broker,
            config,
            heartbeat,
        }
    }

    /// Who this engine registers as: the `{host}:{pid}:{server_id}` of its
    /// `asynq:servers:{…}` key (wire spec §2.1, §4.2).
    pub fn identity(&self) -> &ServerIdentity {
        self.heartbeat.identity()
    }

    /// Runs the loops until `shutdown` is cancelled, then waits for the
    /// tick in progress of each to finish and deletes the server state. A
    /// failed tick (Redis down, a queue that fails) is logged and retried at
    /// the next interval; this never returns early and never panics on
    /// Redis errors.
    pub async fn run(self, shutdown: CancellationToken) {
        let Maintenance {
            broker,
            config,
            mut heartbeat,
        } = self;
        tracing::info!(
            server = %format_identity(heartbeat.identity()),
            "maintenance engine started (forwarder, recoverer, janitor, heartbeat, sampler, queue discovery)"
        );
        let mut loops = Vec::new();

        // The due index: every queue's heads in memory, read again only
        // where Redis reports a change (issue 15, COMPATIBILITY.md L1).
        let index = DueIndex::start(broker.clone(), config.forwarder_interval, shutdown.clone());

        loops.push(tokio::spawn(forwarder::run_indexed(
            broker.clone(),
            index.clone(),
            config.forwarder_interval,
            shutdown.clone(),
        )));

        // One recoverer for the engine's life: it keeps its lease schedule
        // and orphan scan between passes (R4, R8); it starts once the index
        // has read every queue.
        let recoverer = Recoverer::for_index(
            broker.clone(),
            index.clone(),
            config.recoverer_interval,
            config.retry_delay_func.clone(),
            config.is_failure.clone(),
        );
        let (ix, stop) = (index.clone(), shutdown.clone());
        loops.push(tokio::spawn(async move {
            if ix.ready(&stop).await {
                recoverer.run(stop).await;
            }
        }));

        if let Some(interval) = config.discovery_interval {
            loops.push(tokio::spawn(
                QueueDiscovery::new(broker.clone())
                    .with_index(index.clone())
                    .run(interval, shutdown.clone()),
            ));
        }

        loops.push(tokio::spawn(janitor::run_indexed(
            broker.clone(),
            index.clone(),
            config.janitor_interval,
            config.janitor_batch_size,
            shutdown.clone(),
        )));

        if let Some(interval) = config.sample_interval {
            loops.push(tokio::spawn(
                Sampler::new(broker.clone(), interval).run_indexed(index.clone(), shutdown.clone()),
            ));
        }

        if let Some(export) = config.archive_export.clone() {
            loops.push(tokio::spawn(
                ArchiveExporter::new(broker.clone(), export)
                    .run_indexed(index.clone(), shutdown.clone()),
            ));
        }

        // The heartbeat runs here, last to stop: the server entry stays
        // visible while the other loops finish their tick.
        if config.register_server {
            let mut ticks = Ticker::new(config.heartbeat_interval, FirstTick::AtOnce, &shutdown);
            while ticks.next().await {
                let listed = match index.queues() {
                    Some(q) => Some(q),
                    None => queues(&broker, "heartbeat").await,
                };
                if let Some(queues) = listed {
                    heartbeat.set_queues(
                        queues
                            .into_iter()
                            .map(|q| (q, PUBLISHED_PRIORITY))
                            .collect(),
                    );
                }
                if let Err(e) = heartbeat.tick().await {
                    tracing::warn!(error = %e, "maintenance: heartbeat failed to write server state");
                }
            }
        } else {
            shutdown.cancelled().await;
        }
        for l in loops {
            let _ = l.await;
        }
        if config.register_server
            && let Err(e) = heartbeat.clear().await
        {
            tracing::warn!(error = %e, "maintenance: failed to clear server state");
        }
        tracing::info!("maintenance engine stopped");
    }
}

fn format_identity(id: &ServerIdentity) -> String {
    format!("{}:{}:{}", id.host, id.pid, id.server_id)
}

/// Every queue name, or `None` (logged) when Redis cannot list them.
async fn queues(broker: &Broker, component: &'static str) -> Option<Vec<String>> {
    match broker.workable_queues().await {
        Ok(q) => Some(q),
        Err(e) => {
            tracing::warn!(component, error = %e, "maintenance: cannot list queues; skipping this tick");
            None
        }
    }
}
