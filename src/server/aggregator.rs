//! The group aggregator (Go `aggregator.go`): every check interval, for each
//! of the server's queues and each group in `asynq:{q}:groups`, run the
//! aggregation check; a new aggregation set is read, handed to the user's
//! [`GroupAggregator`], the result enqueued in the group's queue, and the set
//! deleted (wire spec §6.13, §7.6).

use std::sync::Arc;
use std::time::Duration;

use crate::task::Task;

/// Go's default group grace period (`defaultGroupGracePeriod`, 1 min).
pub const DEFAULT_GROUP_GRACE_PERIOD: Duration = Duration::from_secs(60);
/// Go's `defaultAggregationCheckInterval` (7 s); the interval is the
/// smaller of this and the grace period.
pub const DEFAULT_AGGREGATION_CHECK_INTERVAL: Duration = Duration::from_secs(7);

/// Aggregates the tasks of one group into one task (Go `GroupAggregator`).
/// The returned task is enqueued in the group's queue (its own queue option
/// is overridden, as Go passes `Queue(q)` last).
pub trait GroupAggregator: Send + Sync {
    /// `tasks` in the order they were added to the group (oldest first).
    fn aggregate(&self, group: &str, tasks: Vec<Task>) -> Task;
}

impl<F> GroupAggregator for F
where
    F: Fn(&str, Vec<Task>) -> Task + Send + Sync,
{
    fn aggregate(&self, group: &str, tasks: Vec<Task>) -> Task {
        self(group, tasks)
    }
}

/// A shared aggregator, as [`crate::server::Config::group_aggregator`] holds it.
pub type SharedGroupAggregator = Arc<dyn GroupAggregator>;
