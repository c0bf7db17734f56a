//! Scheduler replica groups (issue 16, beyond Go): which replica of each
//! group holds the lease and enqueues ([`Inspector::scheduler_replica_groups`]).

use super::Inspector;
use crate::broker::SchedulerReplica;
use crate::error::Result;

/// One replica group and its live replicas, the active one first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaGroup {
    /// The group name (`SchedulerOpts::replica_group`).
    pub name: String,
    /// Its live replicas; the lease holder first (`active`).
    pub replicas: Vec<SchedulerReplica>,
}

impl Inspector {
    /// Every replica group in use (at most
    /// [`crate::broker::SCHEDULER_GROUPS_MAX`]) with its replicas; groups
    /// with no live replica and no lease holder are left out. One call for
    /// the group names, then one transaction per group.
    /// Errors: [`crate::Error::Redis`].
    pub async fn scheduler_replica_groups(&self) -> Result<Vec<ReplicaGroup>> {
        let mut out = Vec::new();
        for name in self.broker.scheduler_groups().await? {
            let replicas = self.broker.scheduler_replicas(&name).await?;
            if !replicas.is_empty() {
                out.push(ReplicaGroup { name, replicas });
            }
        }
        Ok(out)
    }
}
