//! The only module that speaks Redis (Go: `internal/rdb`).
//!
//! [`Broker`] owns a multiplexed, auto-reconnecting connection and runs one
//! Lua script per multi-key change (scripts live in `scripts/*.lua`, one file
//! per operation, registered in `scripts.rs`). Script reply codes become typed
//! [`Error`]s in the wrapper that sends the script. Where asynqdeck
//! deliberately differs from Go, `COMPATIBILITY.md` at the repository root
//! says how and why (code comments point to its entries).
//!
//! Files:
//! - connection and names: `conn.rs` (connection options: URL,
//!   credentials, TLS), `keys.rs` (every key name), `proto.rs` (protobuf
//!   messages), `scripts.rs` (the Lua scripts, `scripts/*.lua`);
//! - the engine and the client: `enqueue.rs` (client writes), `engine.rs`
//!   (worker-side writes: lease, finish, retry, archive, extend the lease)
//!   and `engine/maintenance.rs` (forward, recover, janitor, stale
//!   aggregation sets),
//!   `waiter.rs` (idle workers' blocking wake-up), `results.rs` (task
//!   results), `bad_counters.rs` (counters that could not be incremented,
//!   R6), `recovery.rs` (the recoverer's orphan scan and lease schedule,
//!   issue 12 R4/R8), `discovery.rs` (finding queues missing from
//!   `asynq:queues`, R14), `pubsub.rs` (the `asynq:cancel` subscription);
//! - inspecting: `stats/` (queue statistics: one queue's and many queues'
//!   numbers in one transaction, memory estimates, Redis key tracking, and
//!   the public data types [`QueueInfo`], [`DailyStats`], [`GroupInfo`]),
//!   `queues.rs` (queue list, history, groups, pause, queue deletion),
//!   `page.rs` ([`Page`]: a listing's page and its Redis ranges, decided
//!   here), `tasks.rs` (task listing and lookup), `task_actions.rs` (the
//!   inspector's task changes: run, archive, delete, update payload),
//!   `left_behind.rs` (the sweep of left-behind task hashes), `servers.rs`
//!   (servers, workers, scheduler entries, cancel), `info.rs` (`INFO` and
//!   cluster facts for the Redis page), `samples.rs` (asynqdeck's own
//!   outage-signal series, `asynqdeck:{<queue>}:samples`).
//!
//! Nothing here imports from the layers above (inspector, server, web,
//! cli, demo, client): they call into the broker.

pub mod keys;
pub mod proto;
pub(crate) mod scripts;

mod bad_counters;
mod conn;
mod discovery;
mod engine;
mod enqueue;
mod info;
mod left_behind;
mod page;
mod pubsub;
mod queues;
mod recovery;
mod results;
mod samples;
mod servers;
mod stats;
mod task_actions;
mod tasks;
mod waiter;

/// Arbitrary Redis replies for the reply parsers' property tests.
#[cfg(test)]
mod test_values;

pub use bad_counters::bad_counters;
pub(crate) use conn::{Conn, Target};
pub use conn::{
    ConnectOptions, DEFAULT_REDIS_URL, Failover, SentinelOptions, SentinelStatus, Topology,
};
pub use discovery::{DISCOVERY_SCAN_COUNT, queue_of_container_key};
pub use engine::{
    DoneAndDequeued, DoneOutcome, FORWARD_BATCH, LEASE_BATCH_MAX, LEASE_DURATION, Leased,
    RECOVER_BATCH, STATS_TTL,
};
pub use enqueue::EnqueueTarget;
pub use left_behind::{SWEEP_SCAN_COUNT, SweepCount};
pub use page::Page;
pub use recovery::{ActiveChunk, Adopted, Lacks, ORPHAN_SCAN_CHUNK};
pub use samples::{MAX_SAMPLES, SAMPLE_WINDOW, samples_key};
pub use stats::{DailyStats, GroupInfo, QueueInfo};
pub(crate) use stats::{KeyKinds, StatsRequest, StatsTracking};
pub use task_actions::{ARCHIVE_RETENTION, MAX_ARCHIVE_SIZE};
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
        let conn = target.shared().await?;
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

    pub(crate) fn target(&self) -> &Target {
        &self.target
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
/// later drops are reconnected by the manager. Replies wait up to
/// [`REPLY_TIMEOUT`].
fn manager_config() -> redis::aio::ConnectionManagerConfig {
    redis::aio::ConnectionManagerConfig::new()
        .set_number_of_retries(1)
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
