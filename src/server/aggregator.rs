//! The group aggregator (Go `aggregator.go`; wire spec §6.13, §7.6): every
//! check interval, for each of the server's queues and each of its groups,
//! moves a ready group's tasks into an aggregation set, hands them to the
//! user's [`GroupAggregator`], enqueues the task it returns in that queue,
//! and deletes the set.
//!
//! A group is ready when it holds [`Config::group_max_size`] tasks, its
//! oldest task waited [`Config::group_max_delay`], or its newest waited
//! [`Config::group_grace_period`]. When the aggregator panics or the
//! enqueue fails, the set is left as it is and the recoverer gives its
//! tasks back to the group once its deadline (2 min) passes, as in Go.
//!
//! [`Config::group_max_size`]: super::Config::group_max_size
//! [`Config::group_max_delay`]: super::Config::group_max_delay
//! [`Config::group_grace_period`]: super::Config::group_grace_period

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::broker::{Broker, GroupRules, SetMember};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::task::{EnqueueOptions, Task};

/// Longest check interval (Go `defaultAggregationCheckInterval`, 7 s); a
/// shorter grace period is used instead.
pub const DEFAULT_AGGREGATION_CHECK_INTERVAL: Duration = Duration::from_secs(7);

/// Default grace period (Go `defaultGroupGracePeriod`, 1 min).
pub const DEFAULT_GROUP_GRACE_PERIOD: Duration = Duration::from_secs(60);

/// Turns the tasks of one group into one task (Go `GroupAggregator`).
///
/// `tasks` come oldest first, with their type, payload and headers. The
/// returned task is enqueued in the group's queue with its own options
/// (its queue option is overridden by the group's queue, as in Go).
/// A panic is caught and logged; the tasks go back to their group after
/// 2 min.
///
/// Any `Fn(&str, Vec<Task>) -> Task + Send + Sync` is a `GroupAggregator`:
///
/// ```
/// use asynqdeck::Task;
/// use asynqdeck::server::GroupAggregator;
/// let digest = |group: &str, tasks: Vec<Task>| {
///     let lines: Vec<&[u8]> = tasks.iter().map(|t| t.payload()).collect();
///     Task::new(format!("digest:{group}"), lines.join(&b'\n'))
/// };
/// let task = digest.aggregate("user:42", vec![Task::new("email", b"a".to_vec()), Task::new("email", b"b".to_vec())]);
/// assert_eq!(task.type_name(), "digest:user:42");
/// assert_eq!(task.payload(), b"a\nb");
/// ```
pub trait GroupAggregator: Send + Sync + 'static {
    /// One task made of `tasks`, the members of `group`.
    fn aggregate(&self, group: &str, tasks: Vec<Task>) -> Task;
}

impl<F> GroupAggregator for F
where
    F: Fn(&str, Vec<Task>) -> Task + Send + Sync + 'static,
{
    fn aggregate(&self, group: &str, tasks: Vec<Task>) -> Task {
        self(group, tasks)
    }
}

/// What one aggregator pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AggregationReport {
    /// Aggregated tasks enqueued (one per set).
    pub enqueued: u64,
    /// Group tasks that went into them.
    pub tasks: u64,
    /// Sets left for the recoverer (the aggregator panicked, or the enqueue
    /// or a Redis step failed).
    pub failed: u64,
}

/// The aggregator loop of a [`Server`](super::Server).
pub struct Aggregator {
    broker: Broker,
    client: Client,
    queues: Vec<String>,
    rules: GroupRules,
    interval: Duration,
    aggregator: Arc<dyn GroupAggregator>,
}

impl std::fmt::Debug for Aggregator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Aggregator")
            .field("queues", &self.queues)
            .field("rules", &self.rules)
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

/// The check interval Go uses for `grace_period`: 7 s, or the grace period
/// when shorter.
pub fn check_interval_for(grace_period: Duration) -> Duration {
    grace_period.min(DEFAULT_AGGREGATION_CHECK_INTERVAL)
}

impl Aggregator {
    /// An aggregator over `queues`. Errors with [`Error::InvalidArgument`]
    /// when the grace period is under 1 s (Go panics) or `interval` is zero.
    pub fn new(
        broker: Broker,
        queues: Vec<String>,
        rules: GroupRules,
        interval: Duration,
        aggregator: Arc<dyn GroupAggregator>,
    ) -> Result<Self> {
        if rules.grace_period < Duration::from_secs(1) {
            return Err(Error::InvalidArgument(
                "group grace period cannot be less than 1 s".to_string(),
            ));
        }
        if interval.is_zero() {
            return Err(Error::InvalidArgument(
                "aggregation check interval cannot be zero".to_string(),
            ));
        }
        Ok(Aggregator {
            client: Client::from_broker(broker.clone()),
            broker,
            queues,
            rules,
            interval,
            aggregator,
        })
    }

    /// Checks every interval (first check after one interval, as Go) until
    /// `shutdown`; the pass in progress finishes first. Failures are
    /// logged and the loop goes on.
    pub async fn run(self, shutdown: CancellationToken) {
        let mut ticks = Ticker::new(self.interval, FirstTick::AfterInterval, &shutdown);
        while ticks.next().await {
            self.tick().await;
        }
        tracing::debug!("aggregator done");
    }

    /// One pass over every queue and group at the broker's current time
    /// (Go `aggregator.aggregate`). A queue or group that fails is logged
    /// and the others go on.
    pub async fn tick(&self) -> AggregationReport {
        let mut report = AggregationReport::default();
        let at = self.broker.now();
        for queue in &self.queues {
            let groups = match self.broker.list_groups(queue).await {
                Ok(g) => g,
                Err(e) => {
                    tracing::warn!(queue = %queue, error = %e, "aggregator: cannot list groups");
                    continue;
                }
            };
            for group in groups {
                let set_id = match self
                    .broker
                    .aggregation_check(queue, &group, at, self.rules)
                    .await
                {
                    Ok(Some(id)) => id,
                    Ok(None) => continue,
                    Err(e) => {
                        tracing::warn!(queue = %queue, group = %group, error = %e, "aggregator: check failed");
                        continue;
                    }
                };
                match self.aggregate_set(queue, &group, &set_id).await {
                    Ok(n) => {
                        report.enqueued += u64::from(n > 0);
                        report.tasks += n;
                    }
                    Err(e) => {
                        report.failed += 1;
                        tracing::warn!(queue = %queue, group = %group, set = %set_id, error = %e,
                            "aggregator: set left for the recoverer");
                    }
                }
            }
        }
        report
    }

    /// Reads set `set_id`, aggregates, enqueues and deletes it. Returns how
    /// many tasks went into the aggregated task (0: none was readable, the
    /// set is deleted without an enqueue).
    async fn aggregate_set(&self, queue: &str, group: &str, set_id: &str) -> Result<u64> {
        let set = self
            .broker
            .read_aggregation_set(queue, group, set_id)
            .await?;
        let mut tasks = Vec::with_capacity(set.members.len());
        let mut undecodable = Vec::new();
        for member in set.members {
            match member {
                SetMember::Task(m) => {
                    tasks.push(Task::new(m.r#type, m.payload).with_headers(m.headers))
                }
                SetMember::Undecodable { id, reason } => {
                    tracing::warn!(queue = %queue, group = %group, id = %id, reason = %reason,
                        "aggregator: task message does not decode; archived, left out of the aggregate");
                    undecodable.push(id);
                }
            }
        }
        let n = tasks.len() as u64;
        if n > 0 {
            let aggregator = &self.aggregator;
            super::panic_guard::install_panic_hook();
            let task = super::panic_guard::call_user("group aggregator", || {
                aggregator.aggregate(group, tasks)
            })
            .map_err(|p| {
                Error::Internal(format!(
                    "the group aggregator panicked: {}",
                    super::panic_guard::payload_text(&*p)
                ))
            })?;
            // Go runs the enqueue under a context ending at the set's deadline.
            let left = set
                .deadline
                .and_then(|d| (d - self.broker.now()).to_std().ok())
                .unwrap_or(Duration::ZERO);
            let enqueue = self
                .client
                .enqueue(&task, EnqueueOptions::new().queue(queue));
            match tokio::time::timeout(left, enqueue).await {
                Ok(r) => r?,
                Err(_) => {
                    return Err(Error::Internal(
                        "the set's deadline passed before the enqueue finished".to_string(),
                    ));
                }
            };
        }
        self.broker
            .delete_aggregation_set(queue, group, set_id, &undecodable)
            .await?;
        Ok(n)
    }
}
