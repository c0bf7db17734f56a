//! Every default interval and size of the server and the maintenance
//! engine, in one place, each with its Go source (asynq v0.26.0
//! `server.go` unless named otherwise; wire spec §7.1). [`Config::default`]
//! and [`MaintenanceConfig::default`] read them, and each component's module
//! re-exports the ones it documents (e.g. `forwarder::DEFAULT_FORWARD_INTERVAL`).
//!
//! [`Config::default`]: super::Config
//! [`MaintenanceConfig::default`]: super::MaintenanceConfig

use std::time::Duration;

/// How long shutdown waits for running handlers before requeueing their
/// tasks: 8 s (Go `defaultShutdownTimeout`).
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(8);

/// Longest wait between dequeue attempts while every queue is empty: 1 s
/// (Go `defaultTaskCheckInterval`).
pub const DEFAULT_TASK_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// How often due scheduled and retry tasks move to pending: 5 s (Go
/// `defaultDelayedTaskCheckInterval`, `Config.DelayedTaskCheckInterval`).
pub const DEFAULT_FORWARD_INTERVAL: Duration = Duration::from_secs(5);

/// How often expired completed tasks are deleted: 8 s (Go
/// `defaultJanitorInterval`).
pub const DEFAULT_JANITOR_INTERVAL: Duration = Duration::from_secs(8);

/// Completed tasks deleted per janitor script call: 100 tasks (Go
/// `defaultJanitorBatchSize`).
pub const DEFAULT_JANITOR_BATCH_SIZE: usize = 100;

/// How often the recoverer makes a full pass: 1 min (Go `NewServer`, the
/// recoverer's hard-coded `interval: 1 * time.Minute`).
pub const DEFAULT_RECOVER_INTERVAL: Duration = Duration::from_secs(60);

/// How often server state is written and leases extended: 5 s (Go
/// `NewServer`, the heartbeater's hard-coded `interval: 5 * time.Second`).
/// Its keys live twice as long.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);

/// How often failed outcome writes are retried: 5 s (Go `NewServer`, the
/// syncer's hard-coded `interval: 5 * time.Second`).
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_secs(5);

/// How often the health check runs: 15 s (Go `defaultHealthCheckInterval`).
pub const DEFAULT_HEALTH_CHECK_INTERVAL: Duration = Duration::from_secs(15);

/// The wait before subscribing to `asynq:cancel` again after a failure: 5 s
/// (Go `subscriber.go`, `retryTimeout: 5 * time.Second`).
pub const DEFAULT_RESUBSCRIBE_WAIT: Duration = Duration::from_secs(5);

/// The maintenance engine's queue discovery tick: 1 s (asynqdeck only, R14).
pub const DEFAULT_DISCOVERY_INTERVAL: Duration = Duration::from_secs(1);

/// The maintenance engine's outage sampler interval: 5 s (asynqdeck only,
/// S14, S29; `asynqdeck serve` uses its poll interval instead).
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(5);

/// The fetch loop's busy-poll for a lease reply when
/// [`Config::fetch_spin`](super::Config::fetch_spin) is `None` and Redis is
/// on this host: 1 ms, longer than a lease call of up to a few hundred
/// tasks takes on an idle Redis (asynqdeck only; BENCHMARKS.md).
pub const DEFAULT_FETCH_SPIN: Duration = Duration::from_millis(1);
