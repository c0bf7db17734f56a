//! Queue discovery's Redis steps (issue 12 R14): find queues that hold
//! tasks but are missing from `asynq:queues` with `SCAN` (a small `COUNT`,
//! never `KEYS`), and add such a queue back.
//!
//! Go ≥ 0.25 clients remember that they registered a queue and stop sending
//! `SADD asynq:queues`; after the queue is deleted, their new tasks land in
//! a queue nobody lists. Every step here is O(`COUNT`) in Redis.

use std::collections::BTreeSet;

use super::{Broker, keys, scripts};
use crate::error::Result;

/// Keys `SCAN` examines per call (its `COUNT`).
pub const DISCOVERY_SCAN_COUNT: usize = 100;

/// The container suffixes whose presence means a queue holds tasks: a
/// Redis container key exists only while it is non-empty.
const CONTAINERS: [&str; 7] = [
    "pending",
    "active",
    "scheduled",
    "retry",
    "archived",
    "completed",
    "groups",
];

/// The queue named by a container key `asynq:{<queue>}:<container>`, if
/// `key` has that form. A task hash whose id ends in `}:pending` parses
/// too; [`Broker::restore_queue`] checks each key's type before it acts.
pub fn queue_of_container_key(key: &str) -> Option<&str> {
    let rest = key.strip_prefix("asynq:{")?;
    CONTAINERS.iter().find_map(|c| {
        let name = rest.strip_suffix(c)?.strip_suffix("}:")?;
        (!name.is_empty()).then_some(name)
    })
}

impl Broker {
    /// One `SCAN <cursor> MATCH asynq:{* COUNT 100` step: the next cursor
    /// (0 when the walk over the keyspace is complete) and the queues named
    /// by the container keys it returned. On a cluster the walk goes over
    /// every master in turn ([`Broker::scan_each_master`]; the cursor is
    /// opaque). Errors: [`Error::Redis`](crate::Error::Redis),
    /// [`Error::Internal`](crate::Error::Internal) (a node's cursor too
    /// large).
    pub async fn scan_queue_keys(&self, cursor: u64) -> Result<(u64, BTreeSet<String>)> {
        let (next, found) = self
            .scan_each_master(cursor, "asynq:{*", DISCOVERY_SCAN_COUNT)
            .await?;
        let queues = found
            .iter()
            .filter_map(|k| std::str::from_utf8(k).ok())
            .filter_map(queue_of_container_key)
            .map(str::to_string)
            .collect();
        Ok((next, queues))
    }

    /// Which of `queues` are missing from `asynq:queues`: one pipelined
    /// `SISMEMBER` each (O(found), not O(all queues) as `SMEMBERS` would
    /// be at every tick). Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn unlisted_queues(&self, queues: &BTreeSet<String>) -> Result<Vec<String>> {
        if queues.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for q in queues {
            pipe.cmd("SISMEMBER").arg(keys::ALL_QUEUES).arg(q);
        }
        let listed: Vec<bool> = pipe.query_async(&mut self.conn()).await?;
        Ok(queues
            .iter()
            .zip(listed)
            .filter(|(_, listed)| !listed)
            .map(|(q, _)| q.clone())
            .collect())
    }

    /// Number of keys in the database (`DBSIZE`; on a cluster redis-rs
    /// sends it to every master and sums the replies), to size a discovery
    /// cycle. Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn key_count(&self) -> Result<u64> {
        Ok(redis::cmd("DBSIZE").query_async(&mut self.conn()).await?)
    }

    /// Adds `queue` back to `asynq:queues` if it holds tasks (a container
    /// key of its own type exists), first deleting a `paused` flag left over
    /// from its deletion (script `restore_queue`, then `SADD`). Returns
    /// whether it was added. Call it only for a queue found missing from
    /// `asynq:queues`. Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn restore_queue(&self, queue: &str) -> Result<bool> {
        let mut conn = self.conn();
        let holds: i64 = scripts::RESTORE_QUEUE
            .key(keys::pending_key(queue))
            .key(keys::active_key(queue))
            .key(keys::scheduled_key(queue))
            .key(keys::retry_key(queue))
            .key(keys::archived_key(queue))
            .key(keys::completed_key(queue))
            .key(keys::all_groups_key(queue))
            .key(keys::paused_key(queue))
            .invoke_async(&mut conn)
            .await?;
        if holds != 1 {
            return Ok(false);
        }
        let _: i64 = redis::cmd("SADD")
            .arg(keys::ALL_QUEUES)
            .arg(queue)
            .query_async(&mut conn)
            .await?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::queue_of_container_key;

    #[test]
    fn container_keys_name_their_queue() {
        assert_eq!(queue_of_container_key("asynq:{q}:pending"), Some("q"));
        assert_eq!(queue_of_container_key("asynq:{a:b}:groups"), Some("a:b"));
        assert_eq!(queue_of_container_key("asynq:{..}:retry"), Some(".."));
        assert_eq!(queue_of_container_key("asynq:{q}:t:abc"), None);
        assert_eq!(queue_of_container_key("asynq:{q}:paused"), None);
        assert_eq!(queue_of_container_key("asynq:{q}:processed"), None);
        assert_eq!(queue_of_container_key("asynq:{}:pending"), None);
        assert_eq!(queue_of_container_key("asynq:queues"), None);
    }
}
