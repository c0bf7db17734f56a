//! The worker side: [`Server`] runs handlers on tasks from Redis, with the
//! maintenance loops Go asynq runs beside them (Go `server.go`,
//! `processor.go`, `servemux.go`, `context.go`; S1–S27).
//!
//! # Public pieces
//! - `mod.rs` (here): [`Server`], [`Config`], [`ShutdownHandle`]: start,
//!   configure, stop; [`defaults`]: every default interval with its Go
//!   source; `hooks`: the [`IsFailureFunc`] and [`ErrorHandler`] aliases.
//! - `handler`: the [`Handler`] trait, [`handler_fn`]; `task_context`:
//!   [`TaskContext`] (task id, retry count, max retry, queue, deadline,
//!   cancellation; S26) and [`ResultWriter`]; `serve_mux`: the routing
//!   [`ServeMux`] (wire spec §7.3). All three are re-exported from
//!   `handler` too.
//! - `task_error`: [`TaskError`] (an [`anyhow::Error`]) and the outcome
//!   markers [`SkipRetry`], [`RevokeTask`], [`RetryAfter`], plus
//!   [`PanicError`] and [`HandlerNotFound`]; [`error_text`] gives the stored
//!   `LastErr` (wire spec §7.4, §12; S19–S25).
//! - `retry`: [`RetryDelayFunc`], [`default_retry_delay`] (Sidekiq curve),
//!   the [`RetryPolicy`] builder (S4–S11), and `retry_at`, the one retry
//!   time computation (worker and recoverer).
//!
//! # Running tasks
//! - `processor`: the fetch loop (lease, start workers, shutdown order);
//!   `fetch_thread` runs it on its own thread and connection, `reply_spin`
//!   busy-polls its lease replies, `queue_order` picks the queue order,
//!   `waker` wakes it when an empty queue gets work, `backoff` spaces the
//!   retries of a queue whose lease call failed, `inline_start` starts
//!   quick task types without a spawn.
//! - `worker`: runs one task (deadline, cancellation, `panic_guard`) and
//!   decides its outcome.
//!
//! **Who writes which outcome.** The *worker* writes retry, archive and
//! complete (success with retention), and the shutdown requeue
//! (`worker.rs`). The *fetch loop* finishes successes without retention
//! and revokes with `done`, mostly in the call that leases the next tasks
//! (`acks.rs`). Both ask `lease::may_write_outcome` first: once the local
//! lease has lapsed nothing is written and the recoverer owns the task. A
//! write that fails on Redis goes to the `syncer`.
//!
//! # Maintenance loops
//! One file each, one skeleton each (`new`, `run` until a shutdown token, a
//! one-step `tick`), paced by `ticker` (the one tick loop): `forwarder`
//! (scheduled/retry → pending, S12), `recoverer` (lapsed leases, orphans;
//! it plans its own next look), `janitor` (expired completed tasks),
//! `heartbeat` (server and worker state, lease extension), `syncer`
//! (retries failed writes), `subscriber` (cancellation channel),
//! `healthcheck`, `aggregator` (grouped tasks, with a
//! [`GroupAggregator`]), and for the dashboard's engine (`maintenance`) also
//! `sampler` and `discovery`. `inflight` is the registry of running tasks
//! they share; `lease` holds the lease rules and the context errors.

pub mod handler;
pub mod retry;
pub mod task_error;

pub use handler::{
    Handler, HandlerFn, Middleware, ResultWriter, ServeMux, TaskContext, handler_fn,
    not_found_handler,
};
pub use retry::{
    Backoff, RetryDelayFunc, RetryPolicy, default_retry_delay, default_retry_delay_bounds,
    default_retry_delay_fn,
};
pub use task_error::{
    HandlerNotFound, MAX_ERROR_TEXT_BYTES, PanicError, RetryAfter, RevokeTask, SkipRetry,
    TaskError, error_text, find_cause, is_panic_error, is_revoke_task, is_skip_retry, panic_error,
    retry_after,
};

mod ack_replay;
mod acks;
#[doc(hidden)]
pub mod aggregator;
pub mod archive_export;
mod backoff;
pub mod defaults;
#[doc(hidden)]
pub mod discovery;
mod fetch_thread;
#[doc(hidden)]
pub mod forwarder;
#[doc(hidden)]
pub mod healthcheck;
#[doc(hidden)]
pub mod heartbeat;
mod hooks;
#[doc(hidden)]
pub mod inflight;
mod inline_start;
#[doc(hidden)]
pub mod janitor;
#[doc(hidden)]
pub mod lease;
#[doc(hidden)]
pub mod maintenance;
mod panic_guard;
mod processor;
mod queue_order;
#[doc(hidden)]
pub mod recoverer;
mod reply_spin;
#[doc(hidden)]
pub mod sampler;
mod serve_mux;
#[doc(hidden)]
pub mod subscriber;
#[doc(hidden)]
pub mod syncer;
mod task_context;
mod ticker;
mod waker;
mod worker;
pub use aggregator::{AggregationReport, GroupAggregator};
pub use archive_export::{ArchiveExportConfig, ArchiveExporter};
pub use healthcheck::HealthCheckFunc;
pub use heartbeat::ServerStatus;
pub use hooks::{ErrorHandler, IsFailureFunc};
pub use lease::{ContextCanceled, DeadlineExceeded, LeaseExpired};
pub use maintenance::{Maintenance, MaintenanceConfig};

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::error::Result;

/// Server settings (Go `asynq.Config`). [`Config::default`] gives Go's defaults.
#[derive(Clone)]
pub struct Config {
    /// Most tasks run at once. Default: number of CPUs.
    pub concurrency: usize,
    /// Queue name → priority (> 0). Default: `{"default": 1}`.
    pub queues: BTreeMap<String, i32>,
    /// Always empty higher-priority queues first instead of weighted random order.
    pub strict_priority: bool,
    /// Delay before the next attempt: `(Retried, error, task) -> Duration`
    /// (S5). Default: [`default_retry_delay`] (S4).
    pub retry_delay_func: RetryDelayFunc,
    /// Whether an error counts as a failure (S24). Default: always.
    pub is_failure: IsFailureFunc,
    /// Called for every failure (S20). Default: none.
    pub error_handler: Option<ErrorHandler>,
    /// How long shutdown waits for running handlers before requeueing their
    /// tasks. Default 8 s (Go).
    pub shutdown_timeout: Duration,
    /// How often scheduled and retry tasks are checked (Go
    /// `DelayedTaskCheckInterval`, the "every few seconds" of S12). Default 5 s.
    pub forwarder_interval: Duration,
    /// Longest wait between dequeue attempts while every queue is empty.
    /// Default 1 s (Go). Work that arrives earlier is picked up at once
    /// through a blocking wake-up (see `waker`).
    pub task_check_interval: Duration,
    /// How often expired completed tasks are deleted. Default 8 s.
    pub janitor_interval: Duration,
    /// Completed tasks deleted per script call. Default 100.
    pub janitor_batch_size: usize,
    /// How often tasks with lapsed leases are recovered. Default 1 min (Go).
    pub recoverer_interval: Duration,
    /// How often server state is written and leases extended. Default 5 s (Go).
    pub heartbeat_interval: Duration,
    /// How often failed Redis writes are retried. Default 5 s (Go).
    pub syncer_interval: Duration,
    /// Redis health check callback. Default: none.
    pub health_check_func: Option<HealthCheckFunc>,
    /// How often the health check runs. Default 15 s.
    pub health_check_interval: Duration,
    /// How long the fetch loop busy-polls for the reply to a lease call
    /// before it sleeps (asynqdeck only). `None` (default): 1 ms when Redis
    /// is on this host (Unix socket, `localhost` or a loopback address),
    /// none otherwise; `Some(Duration::ZERO)`: never. Waking a sleeping
    /// worker costs a Redis on the same host CPU time on every reply
    /// (BENCHMARKS.md); spinning moves that cost to the worker, only while
    /// a lease call is in flight (with the queues idle, that is one call per
    /// `task_check_interval`), and not while replies take longer than the
    /// spin.
    pub fetch_spin: Option<Duration>,
    /// Aggregates grouped tasks (Go `GroupAggregator`); `None` (default):
    /// no aggregator runs and grouped tasks wait (for another server's).
    pub group_aggregator: Option<Arc<dyn GroupAggregator>>,
    /// A group is aggregated once its newest task waited this long (Go
    /// `GroupGracePeriod`; whole seconds; under 1 s makes [`Server::run`]
    /// fail when an aggregator is set). Default 1 min.
    pub group_grace_period: Duration,
    /// A group is aggregated once its oldest task waited this long (Go
    /// `GroupMaxDelay`; whole seconds); zero: no limit (default).
    pub group_max_delay: Duration,
    /// A group is aggregated once it holds this many tasks, and one
    /// aggregate takes at most this many (Go `GroupMaxSize`); 0: no limit
    /// (default), but at most [`AGGREGATION_SET_MAX`](crate::broker::AGGREGATION_SET_MAX)
    /// (COMPATIBILITY.md M4).
    pub group_max_size: usize,
    /// How often groups are checked. `None` (default): Go's rule, 7 s or
    /// the grace period when shorter.
    pub group_check_interval: Option<Duration>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            concurrency: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
            queues: [(crate::task::DEFAULT_QUEUE.to_string(), 1)].into(),
            strict_priority: false,
            retry_delay_func: default_retry_delay_fn(),
            is_failure: Arc::new(|_| true),
            error_handler: None,
            shutdown_timeout: defaults::DEFAULT_SHUTDOWN_TIMEOUT,
            forwarder_interval: defaults::DEFAULT_FORWARD_INTERVAL,
            task_check_interval: defaults::DEFAULT_TASK_CHECK_INTERVAL,
            janitor_interval: defaults::DEFAULT_JANITOR_INTERVAL,
            janitor_batch_size: defaults::DEFAULT_JANITOR_BATCH_SIZE,
            recoverer_interval: defaults::DEFAULT_RECOVER_INTERVAL,
            heartbeat_interval: defaults::DEFAULT_HEARTBEAT_INTERVAL,
            syncer_interval: defaults::DEFAULT_SYNC_INTERVAL,
            health_check_func: None,
            health_check_interval: defaults::DEFAULT_HEALTH_CHECK_INTERVAL,
            fetch_spin: None,
            group_aggregator: None,
            group_grace_period: aggregator::DEFAULT_GROUP_GRACE_PERIOD,
            group_max_delay: Duration::ZERO,
            group_max_size: 0,
            group_check_interval: None,
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("concurrency", &self.concurrency)
            .field("queues", &self.queues)
            .field("strict_priority", &self.strict_priority)
            .field("shutdown_timeout", &self.shutdown_timeout)
            .field("fetch_spin", &self.fetch_spin)
            .field("group_aggregator", &self.group_aggregator.is_some())
            .field("group_grace_period", &self.group_grace_period)
            .field("group_max_delay", &self.group_max_delay)
            .field("group_max_size", &self.group_max_size)
            .finish_non_exhaustive()
    }
}

/// Stops a running [`Server`] from another task (Go `Server.Stop` /
/// `Server.Shutdown`). Cheap to clone.
#[derive(Clone, Debug)]
pub struct ShutdownHandle {
    shutdown: CancellationToken,
    stop: CancellationToken,
    status: heartbeat::SharedStatus,
}

impl ShutdownHandle {
    /// Stops taking new tasks; running ones finish normally and the server
    /// reports status `stopped` (Go `Server.Stop`).
    pub fn stop(&self) {
        *self.status.lock().expect("status lock") = ServerStatus::Stopped;
        self.stop.cancel();
    }

    /// Starts a graceful shutdown: [`Server::run`] returns once it is done
    /// (Go `Server.Shutdown`).
    pub fn shutdown(&self) {
        self.shutdown.cancel();
    }
}

/// Runs handlers on tasks from Redis, with the forwarder, recoverer,
/// janitor, heartbeat, syncer, subscriber and (optional) health check beside
/// them (Go `asynq.Server`).
///
/// ```no_run
/// use asynqdeck::server::{Config, Server, ServeMux, SkipRetry, TaskContext};
/// use asynqdeck::Task;
/// # async fn demo() -> asynqdeck::Result<()> {
/// let mut mux = ServeMux::new();
/// mux.handle_fn("email:send", |_ctx: TaskContext, task: Task| async move {
///     if task.payload().is_empty() {
///         return Err(anyhow::Error::new(SkipRetry).context("empty payload"));
///     }
///     Ok(())
/// });
/// let config = Config { concurrency: 10, ..Config::default() };
/// Server::connect("redis://127.0.0.1:6379/0", config).await?.run(mux).await
/// # }
/// ```
pub struct Server {
    broker: Broker,
    config: Config,
    handle: ShutdownHandle,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Server {
    /// Connects to Redis at `url`. Errors with [`Error::Redis`](crate::Error::Redis)
    /// when Redis cannot be reached.
    pub async fn connect(url: &str, config: Config) -> Result<Self> {
        Ok(Server::new(Broker::connect(url).await?, config))
    }

    /// A server on an existing broker connection.
    pub fn new(broker: Broker, config: Config) -> Self {
        Server {
            broker,
            config,
            handle: ShutdownHandle {
                shutdown: CancellationToken::new(),
                stop: CancellationToken::new(),
                status: Arc::new(std::sync::Mutex::new(ServerStatus::Active)),
            },
        }
    }

    /// A handle that stops or shuts down this server from elsewhere.
    pub fn shutdown_handle(&self) -> ShutdownHandle {
        self.handle.clone()
    }

    /// Runs until SIGINT or SIGTERM, or until [`ShutdownHandle::shutdown`],
    /// then shuts down gracefully (Go `Server.Run`). Errors with
    /// [`Error::Redis`](crate::Error::Redis) when Redis is unreachable at
    /// start, and before starting anything with
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) naming a
    /// configured queue a Redis Cluster cannot hold
    /// ([`Broker::check_queue_name`]; Go starts and logs `Dequeue error:
    /// ... CROSSSLOT ...` at most every 3 s, processing nothing from it).
    pub async fn run(self, handler: impl Handler) -> Result<()> {
        self.run_until(handler, shutdown_signal()).await
    }

    /// Like [`Server::run`], but also shuts down when `signal` completes.
    ///
    /// Shutdown order (Go `Server.Shutdown`): the forwarder stops, the
    /// processor stops taking tasks and waits up to `shutdown_timeout` for
    /// running handlers, then cancels the rest and puts their tasks back at
    /// the front of pending without counting a retry; then the recoverer,
    /// syncer (one last attempt), subscriber, janitor and health check stop;
    /// the heartbeat stops last and removes the server's state from Redis.
    ///
    /// Dropping the returned future before it completes stops every part
    /// at once, without the ordered shutdown, even during a graceful one:
    /// no task is taken any more, running handlers are cancelled and their
    /// tasks put back in pending without counting a retry (as at the end of
    /// `shutdown_timeout`), and the server's state is removed from Redis.
    /// That needs the runtime to go on running: if it is shut down too,
    /// running tasks stay active until the recoverer takes them, as after a
    /// crash (tasks leased but not started are still put back).
    pub async fn run_until(
        self,
        handler: impl Handler,
        signal: impl Future<Output = ()> + Send,
    ) -> Result<()> {
        self.broker.ping().await?;
        let c = &self.config;
        let order = queue_order::QueueOrder::new(&c.queues, c.strict_priority);
        let queues = order.names();
        // Go skips only blank names (its order already has); a name a
        // cluster cannot hold would fail every fetch with CROSSSLOT, so the
        // start fails instead (COMPATIBILITY.md#k2).
        for q in &queues {
            self.broker.check_queue_name(q)?;
        }
        let queue_map: BTreeMap<String, i32> = c
            .queues
            .iter()
            .filter(|(q, _)| queues.contains(q))
            .map(|(q, p)| (q.clone(), *p))
            .collect();
        let aggregator = match &c.group_aggregator {
            Some(a) => Some(aggregator::Aggregator::new(
                self.broker.clone(),
                queues.clone(),
                crate::broker::GroupRules {
                    grace_period: c.group_grace_period,
                    max_delay: c.group_max_delay,
                    max_size: c.group_max_size,
                },
                c.group_check_interval
                    .unwrap_or_else(|| aggregator::check_interval_for(c.group_grace_period)),
                a.clone(),
            )?),
            None => None,
        };
        let inflight = Arc::new(inflight::InFlight::default());
        let (sync_tx, sync_rx) = tokio::sync::mpsc::unbounded_channel();

        let heartbeat_token = CancellationToken::new();
        let _heartbeat_on_drop = heartbeat_token.clone().drop_guard();
        let heartbeat = heartbeat::Heartbeat::new(
            self.broker.clone(),
            heartbeat::HeartbeatConfig {
                interval: c.heartbeat_interval,
                concurrency: c.concurrency as i32,
                queues: queue_map,
                strict_priority: c.strict_priority,
            },
            inflight.clone(),
            self.handle.status.clone(),
        );
        let heartbeat_task = tokio::spawn(heartbeat.run(heartbeat_token.clone()));

        let forwarder_token = CancellationToken::new();
        let _forwarder_on_drop = forwarder_token.clone().drop_guard();
        let forwarder =
            forwarder::Forwarder::new(self.broker.clone(), queues.clone(), c.forwarder_interval);
        let forwarder_task = tokio::spawn(forwarder.run(forwarder_token.clone()));

        // The rest stop together after the processor.
        let rest = CancellationToken::new();
        let _rest_on_drop = rest.clone().drop_guard();
        let mut others = vec![
            tokio::spawn(
                recoverer::Recoverer::new(
                    self.broker.clone(),
                    queues.clone(),
                    c.recoverer_interval,
                    c.retry_delay_func.clone(),
                    c.is_failure.clone(),
                )
                .run(rest.clone()),
            ),
            tokio::spawn(
                syncer::Syncer::new(self.broker.clone(), sync_rx, c.syncer_interval)
                    .run(rest.clone()),
            ),
            tokio::spawn(
                subscriber::Subscriber::new(
                    self.broker.clone(),
                    inflight.clone(),
                    defaults::DEFAULT_RESUBSCRIBE_WAIT,
                )
                .run(rest.clone()),
            ),
            tokio::spawn(
                janitor::Janitor::new(
                    self.broker.clone(),
                    queues.clone(),
                    c.janitor_interval,
                    c.janitor_batch_size,
                )
                .run(rest.clone()),
            ),
        ];
        if let Some(a) = aggregator {
            others.push(tokio::spawn(a.run(rest.clone())));
        }
        if let Some(f) = &c.health_check_func {
            others.push(tokio::spawn(
                healthcheck::HealthChecker::new(
                    self.broker.clone(),
                    c.health_check_interval,
                    f.clone(),
                )
                .run(rest.clone()),
            ));
        }

        let abandon = CancellationToken::new();
        let processor = processor::Processor {
            broker: self.broker.clone(),
            workers_rt: tokio::runtime::Handle::current(),
            spin: reply_spin::ReplySpin::for_broker(c.fetch_spin, &self.broker),
            shared: Arc::new(worker::Shared {
                broker: self.broker.clone(),
                handler: Arc::new(handler),
                retry_delay_func: c.retry_delay_func.clone(),
                is_failure: c.is_failure.clone(),
                error_handler: c.error_handler.clone(),
                inflight: inflight.clone(),
                syncer: sync_tx,
                abandon: abandon.clone(),
                replay: std::sync::Mutex::new(ack_replay::AckReplay::new(&self.broker)),
            }),
            queues: order,
            failing: Default::default(),
            concurrency: c.concurrency.max(1),
            task_check_interval: c.task_check_interval,
            inline: Default::default(),
        };
        let fetch_stop = CancellationToken::new();
        let _fetch_on_drop = fetch_stop.clone().drop_guard();
        // Dropped first: the fetch loop sees it abandoned, not stopped.
        let _abandon_on_drop = abandon.clone().drop_guard();
        let processor_task = tokio::spawn(fetch_thread::run_processor(
            processor,
            processor::RunControl {
                stop: fetch_stop.clone(),
                pause: self.handle.stop.clone(),
                abandon,
                shutdown_timeout: c.shutdown_timeout,
            },
        ));
        tracing::info!(queues = ?queues, concurrency = c.concurrency, "server started");

        tokio::select! {
            _ = signal => {}
            _ = self.handle.shutdown.cancelled() => {}
        }
        tracing::info!("server shutting down");
        forwarder_token.cancel();
        fetch_stop.cancel();
        let _ = processor_task.await;
        let _ = forwarder_task.await;
        rest.cancel();
        for t in others {
            let _ = t.await;
        }
        heartbeat_token.cancel();
        let _ = heartbeat_task.await;
        tracing::info!("server stopped");
        Ok(())
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}
