//! The cluster calls of Go asynq's Inspector: the hash slot of a queue
//! (`Inspector.ClusterKeySlot`) and the nodes serving it
//! (`Inspector.ClusterNodes`), behind `/api/queues/{q}/cluster_key_slot`
//! and `/api/queues/{q}/cluster_nodes` (asynqmon has no such routes; it
//! shows the same facts in `/api/redis_info`'s `queue_locations`).

use super::Inspector;
use crate::broker::keys;
use crate::error::{Error, Result};

/// A node of a Redis Cluster (Go `asynq.ClusterNode`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterNode {
    /// Node id.
    pub id: String,
    /// `host:port`.
    pub addr: String,
}

impl Inspector {
    /// The hash slot (0–16383) `queue`'s keys hash to: `CLUSTER KEYSLOT
    /// asynq:{<queue>}:pending` (Go `Inspector.ClusterKeySlot`). No
    /// existence check, as Go.
    ///
    /// Errors: [`Error::InvalidQueueName`] for a blank name (Go sends it
    /// on); [`Error::FailedPrecondition`] when Redis is not in cluster mode
    /// (Go: Redis's `ERR This instance has cluster support disabled`);
    /// [`Error::Redis`].
    pub async fn cluster_key_slot(&self, queue: &str) -> Result<i64> {
        keys::validate_queue_name(queue).map_err(|_| Error::InvalidQueueName)?;
        self.broker.cluster_key_slot(queue).await
    }

    /// The nodes serving `queue`'s slot, master first, then its replicas
    /// (Go `Inspector.ClusterNodes`). No existence check, as Go.
    ///
    /// Errors: as [`Inspector::cluster_key_slot`], and
    /// [`Error::FailedPrecondition`] when no node serves the slot (Go:
    /// `nodes not found`).
    pub async fn cluster_nodes(&self, queue: &str) -> Result<Vec<ClusterNode>> {
        keys::validate_queue_name(queue).map_err(|_| Error::InvalidQueueName)?;
        Ok(self
            .broker
            .cluster_nodes_of(queue)
            .await?
            .into_iter()
            .map(|n| ClusterNode {
                addr: n.addr(),
                id: n.id,
            })
            .collect())
    }
}
