//! The only module that speaks Redis (Go: `internal/rdb`).
//!
//! [`Broker`] owns a multiplexed, auto-reconnecting connection (to one
//! server, a Redis Cluster or the Sentinel-elected master: [`Topology`]) and runs one
//! Lua script per multi-key change (scripts live in `scripts/*.lua`, one file
//! per operation, registered in `scripts.rs`). Script reply codes become typed
//! [`Error`]s in the wrapper that sends the script. Where asynqdeck
//! deliberately differs from Go, `COMPATIBILITY.md` at the repository root
//! says how and why (code comments point to its entries).
//!
//! Files:
//! - connection and names: `conn/` (connection options: URL,
//!   credentials, TLS, cluster nodes, sentinels), `keys.rs` (every key name), `proto.rs` (protobuf
//!   messages), `scripts.rs` (the Lua scripts, `scripts/*.lua`);
//! - the engine and the client: `enqueue.rs` (client writes),
//!   `enqueue_batch.rs` (client batch writes, pipelined), `engine.rs`
//!   (worker-side writes: lease, finish, retry, archive, extend the lease)
//!   and `engine/maintenance.rs` (forward, recover, janitor, stale
//!   aggregation sets), `aggregation.rs` (the aggregator's steps: list
//!   groups, check a group, read and delete a set), `audit.rs` (the
//!   dashboard's audit log stream),
//!   `waiter.rs` (idle workers' blocking wake-up), `version.rs` (the
//!   server's version), `slot_errors.rs` (errors saying keys crossed
//!   slots, counted), `results.rs` (task
//!   results), `bad_counters.rs` (counters that could not be incremented,
//!   R6), `recovery.rs` (the recoverer's orphan scan and lease schedule,
//!   issue 12 R4/R8), `scan.rs` (`SCAN` over every master of a cluster,
//!   or over one slot's master), `discovery.rs` (finding queues missing from
//!   `asynq:queues`, R14), `pubsub.rs` (the `asynq:cancel` subscription);
//! - inspecting: `stats/` (queue statistics: one queue's and many queues'
//!   numbers in one transaction, per queue on a cluster (`per_queue.rs`), memory estimates, Redis key tracking, and
//!   the public data types [`QueueInfo`], [`DailyStats`], [`GroupInfo`]),
//!   `queues.rs` (queue list, history, groups, pause, queue deletion),
//!   `page.rs` ([`Page`]: a listing's page and its Redis ranges, decided
//!   here), `tasks.rs` (task listing and lookup), `task_actions.rs` (the
//!   inspector's task changes: run, archive, delete, update payload),
//!   `left_behind.rs` (the sweep of left-behind task hashes), `servers.rs`
//!   (servers, workers, scheduler entries, cancel), `info.rs` (`INFO` and
//!   cluster facts for the Redis page), `samples.rs` (asynqdeck's own
//!   outage-signal series, `asynqdeck:{<queue>}:samples`), `jobs.rs` and
//!   `jobs_chunks.rs` (background bulk jobs: their keys, lease, index and
//!   bounded chunk scripts, issue 15);
//! - deployments: `conn/` (standalone, Cluster, Sentinel), `cluster.rs`
//!   (a cluster's nodes, a key's hash slot, a command to one node),
//!   `scan.rs` (`SCAN` walks over every master), `per_key.rs` (one
//!   command per key: a pipeline on one server, concurrent on a cluster).
//!
//! Nothing here imports from the layers above (inspector, server, web,
//! cli, demo, client): they call into the broker.

pub mod keys;
pub mod proto;
pub(crate) mod scripts;

mod aggregation;
mod alert_claims;
mod attention;
mod audit;
mod bad_counters;
mod cluster;
mod conn;
mod discovery;
mod due;
mod engine;
mod enqueue;
mod enqueue_batch;
mod export;
mod export_cursor;
mod info;
mod jobs;
mod jobs_chunks;
mod left_behind;
mod page;
mod per_key;
mod pubsub;
mod queues;
mod recovery;
mod results;
mod retry_pressure;
mod samples;
mod scan;
mod scheduler_lease;
mod scheduler_replicas;
mod search;
mod servers;
mod slot_errors;
mod stats;
mod task_actions;
mod tasks;
mod version;
mod waiter;

/// Arbitrary Redis replies for the reply parsers' property tests.
#[cfg(test)]
mod test_values;

pub use aggregation::{
    AGGREGATION_CHUNK, AGGREGATION_SET_MAX, AGGREGATION_SET_TIMEOUT, AggregationSet, GroupRules,
    SetMember,
};
pub use alert_claims::{AlertClaim, CLAIM_CHUNK, ClaimRequest};
pub use attention::{AttentionHeads, LateServer, QUEUE_HEADS_COMMANDS};
pub use audit::StoredAuditEntry;
pub use bad_counters::bad_counters;
pub use cluster::{CLUSTER_SLOTS, ClusterNode, key_slot};
pub(crate) use conn::{Conn, Target};
pub use conn::{
    ConnectOptions, DEFAULT_REDIS_URL, Failover, SentinelOptions, SentinelStatus, Topology,
};
pub use discovery::{DISCOVERY_SCAN_COUNT, queue_of_container_key};
pub use due::CLIENT_NAME as DUE_INDEX_CLIENT_NAME;
pub use due::{
    CHUNK_QUEUES as DUE_CHUNK_QUEUES, COALESCE as DUE_COALESCE, DueIndex, DueMode, DueStats,
    MAX_INDEX_AGE, QueueHeads, score_time,
};
pub use engine::{
    DoneAndDequeued, DoneOutcome, FORWARD_BATCH, LEASE_BATCH_MAX, LEASE_DURATION, Leased,
    RECOVER_BATCH, STATS_TTL,
};
pub use enqueue::EnqueueTarget;
pub use enqueue_batch::BATCH_CHUNK;
pub use export_cursor::{EXPORT_CURSOR_TTL_SECS, export_cursor_key};
pub(crate) use jobs::{Claim, StoredJob};
pub use jobs::{
    JOBS_INDEX_KEY, JOBS_OPEN_KEY, JOBS_QUEUES_KEY, job_failed_key, job_key, job_skipped_key,
    queue_jobs_key,
};
pub(crate) use jobs_chunks::{ChunkLease, ChunkOutcome, ChunkStep};
pub use left_behind::{SWEEP_SCAN_COUNT, SweepCount};
pub use page::Page;
pub use recovery::{ActiveChunk, Adopted, Lacks, ORPHAN_SCAN_CHUNK};
pub use retry_pressure::{RETRY_PRESSURE_COMMANDS, RETRY_PRESSURE_HORIZONS, RetryPressure};
pub use samples::{MAX_SAMPLES, SAMPLE_WINDOW, samples_key};
pub use scan::ScanCursor;
pub use scheduler_replicas::{SCHEDULER_GROUPS_MAX, SchedulerReplica};
pub use scripts::{strict_form, strict_hashes};
pub(crate) use slot_errors::note_slot_error;
pub use slot_errors::slot_errors;
pub use stats::{BURST, BudgetUsage, DailyStats, GroupInfo, QueueInfo, RedisBudget};
pub(crate) use stats::{KeyKinds, QUEUES_PER_MEMORY_CALL, StatsRequest, StatsTracking};
pub use task_actions::{ARCHIVE_RETENTION, MAX_ARCHIVE_SIZE};
pub use tasks::PAGE_READ_BYTES;
pub use waiter::PendingWaiter;

use chrono::{DateTime, Utc};

use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};

/// A handle on the Redis holding asynq data: one server's database, a Redis
/// Cluster, or the master Sentinel elects ([`Topology`]). Cheap to clone;
/// clones share the connection.
#[derive(Clone)]
pub struct Broker {
    conn: Conn,
    /// Opens dedicated connections (pub/sub and blocking waits cannot share
    /// the multiplexed one). Shared: brokers are embedded by value in many
    /// structs.
    target: std::sync::Arc<Target>,
    clock: SharedClock,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").finish_non_exhaustive()
    }
}

impl Broker {
    /// Connects to `url` (`redis://[user:password@]host:port/db`, `rediss://`
    /// for TLS, `redis-sentinel://` and `redis-cluster://` as
    /// [`ConnectOptions`] reads them). Errors with [`Error::Redis`] when
    /// Redis cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        Broker::connect_with(&ConnectOptions::new(url)).await
    }

    /// Connects as `options` say (URL plus separate credentials, database
    /// and TLS material; see [`ConnectOptions`]). Errors with
    /// [`Error::InvalidArgument`] for options that do not make a connection
    /// (bad URL, PEM that does not parse) and [`Error::Redis`] when Redis
    /// cannot be reached or refuses the credentials.
    pub async fn connect_with(options: &ConnectOptions) -> Result<Self> {
        let target = options.target()?;
        let mut conn = target.shared().await?;
        // Scripts in their strict form on a cluster that checks it
        // (scripts.rs, COMPATIBILITY.md K10).
        if conn.is_cluster() && version::redis_version(&mut conn).await? >= (7, 0) {
            scripts::use_strict_form();
        }
        target.start_background();
        Ok(Broker {
            conn,
            target: std::sync::Arc::new(target),
            clock: std::sync::Arc::new(SystemClock),
        })
    }

    /// The same Redis and clock on a connection of its own, whose I/O is
    /// driven by the runtime this is called on (the fetch loop's thread uses
    /// one so that waiting for its replies wakes no other thread). Errors
    /// with [`Error::Redis`] when Redis cannot be reached.
    pub async fn own_connection(&self) -> Result<Self> {
        let conn = self.target.shared().await?;
        Ok(Broker {
            conn,
            target: self.target.clone(),
            clock: self.clock.clone(),
        })
    }

    /// The kind of deployment this broker talks to.
    pub fn topology(&self) -> Topology {
        self.target.topology()
    }

    /// Checks that `queue` can be used on this deployment: not blank
    /// ([`Error::InvalidQueueName`], Go `base.ValidateQueueName`) and, on
    /// a Redis Cluster, with keys that share one slot
    /// ([`keys::cluster_safe_queue_name`]; a name starting with `}` has
    /// none). On one server every non-blank name passes, as in Go. The one
    /// check the client, the server's start and the inspector make.
    ///
    /// Errors: [`Error::InvalidQueueName`]; [`Error::InvalidArgument`]
    /// naming the queue for a name a cluster cannot hold (Go asynq
    /// v0.26.0 sends it and fails with `CROSSSLOT Keys in request don't
    /// hash to the same slot`).
    // asynq divergence: COMPATIBILITY.md#q1 (blank names everywhere), COMPATIBILITY.md#k2
    pub fn check_queue_name(&self, queue: &str) -> Result<()> {
        keys::validate_queue_name(queue).map_err(|_| Error::InvalidQueueName)?;
        if self.topology() == Topology::Cluster && !keys::cluster_safe_queue_name(queue) {
            return Err(Error::InvalidArgument(format!(
                "queue {queue:?} cannot be used on a Redis Cluster: a name starting with '}}' \
                 leaves its keys (asynq:{{{queue}}}:...) without a hash tag, so they hash to \
                 different slots and every script on them fails with CROSSSLOT"
            )));
        }
        Ok(())
    }

    /// How many changes of master this broker has followed behind Sentinel
    /// (always 0 elsewhere); a change means writes acknowledged by the
    /// former master just before may be lost.
    pub fn master_generation(&self) -> u64 {
        self.target.generation()
    }

    /// The last change of master seen behind Sentinel; `None` elsewhere
    /// or when none was seen.
    pub fn last_failover(&self) -> Option<Failover> {
        match &*self.target {
            Target::Sentinel(r) => r.last_failover(),
            _ => None,
        }
    }

    /// Behind Sentinel: the master name, sentinels, master in use and last
    /// failover ([`SentinelStatus`]); `None` elsewhere.
    pub fn sentinel_status(&self) -> Option<SentinelStatus> {
        match &*self.target {
            Target::Sentinel(r) => Some(r.status()),
            _ => None,
        }
    }

    /// The master in use behind Sentinel, `host:port`.
    pub fn sentinel_master(&self) -> Option<String> {
        match &self.conn {
            Conn::Sentinel(c) => c.master(),
            _ => None,
        }
    }

    /// Whether Redis is reached on this host: a Unix socket, `localhost`, or
    /// a loopback address (`127.0.0.0/8`, `::1`). Another address may still
    /// be this host; it counts as remote.
    pub fn is_local(&self) -> bool {
        self.target.is_local()
    }

    /// The same broker reading time from `clock` (for tests).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The current time, UTC, from the broker's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// A connection handle (multiplexed; cloning is cheap).
    pub(crate) fn conn(&self) -> Conn {
        self.conn.clone()
    }

    /// Sends `PING`; errors when Redis is unreachable.
    pub async fn ping(&self) -> Result<()> {
        let _: String = redis::cmd("PING").query_async(&mut self.conn()).await?;
        Ok(())
    }
}

/// How long a command on the broker's connections (and the dashboard's
/// tracked statistics connection) waits for its reply before it fails with
/// a timeout: 3 s, go-redis's default `ReadTimeout` that Go asynq keeps
/// (`RedisClientOpt.ReadTimeout`). redis-rs's default, 500 ms, fails plain
/// commands on a loaded machine. The idle worker's blocking wait
/// ([`PendingWaiter`]) has none: its command blocks on purpose.
// asynq divergence: COMPATIBILITY.md#x3
pub const REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Fail fast when Redis is down at start (the default retries for ~6 s);
/// later drops are reconnected by the manager, its attempts at most 250 ms
/// apart (the default backoff can wait about a second, which delays the
/// dashboard's recovery after an outage past RELIABILITY.md's 1 s).
/// Replies wait up to [`REPLY_TIMEOUT`].
fn manager_config() -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_number_of_retries(1)
        .set_max_delay(std::time::Duration::from_millis(250))
        .set_connection_timeout(Some(std::time::Duration::from_secs(5)))
        .set_response_timeout(Some(REPLY_TIMEOUT))
}

/// Decodes a task message read from `key`, mapping failure to [`Error::Corrupt`].
pub(crate) fn decode_task(key: &str, bytes: &[u8]) -> Result<proto::WireTask> {
    proto::WireTask::decode(bytes).map_err(|e| Error::Corrupt {
        key: format!("{key} msg"),
        reason: e,
    })
}

/// Unix seconds to UTC; 0 means "unset" on the wire and becomes `None`.
pub(crate) fn from_unix_s(s: i64) -> Option<DateTime<Utc>> {
    if s == 0 {
        None
    } else {
        DateTime::from_timestamp(s, 0)
    }
}
