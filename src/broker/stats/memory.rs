//! The memory estimate of a queue (Go `rdb.memoryUsage`, guarded form):
//! `MEMORY USAGE` of sampled tasks, groups and the queue's own keys, for one
//! queue or for many, [`QUEUES_PER_MEMORY_CALL`] per script call (on a
//! Redis Cluster, one call per queue on its own master).

use futures_util::stream::{self, StreamExt, TryStreamExt};
use redis::Value;

use super::reply::{caught_error, shape_error, text_of};
use crate::broker::per_key::{CLUSTER_IN_FLIGHT, is_reply_error};
use crate::broker::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// Tasks sampled per list or zset by the memory estimate (Go `taskSampleSize`).
const MEMORY_TASK_SAMPLE: i64 = 20;
/// Groups sampled by the memory estimate (Go `groupSampleSize`).
const MEMORY_GROUP_SAMPLE: i64 = 5;
/// Most queues one `queues_memory_usage` script call estimates (each is
/// about 40 commands inside Redis per non-empty state group, so a call
/// stays well under a millisecond).
pub(crate) const QUEUES_PER_MEMORY_CALL: usize = 10;

/// The part of `key` after the queue's prefix `asynq:{<q>}:`, for the
/// scripts that build a queue's keys from its prefix.
fn suffix_of(queue: &str, key: String) -> Result<String> {
    key.strip_prefix(&keys::queue_prefix(queue))
        .map(str::to_string)
        .ok_or_else(|| Error::Internal(format!("key {key:?} lacks the queue prefix")))
}

/// The 9 key suffixes `queues_memory_usage` takes (see its header).
fn memory_key_suffixes() -> Result<[String; 9]> {
    const Q: &str = "q";
    Ok([
        suffix_of(Q, keys::active_key(Q))?,
        suffix_of(Q, keys::pending_key(Q))?,
        suffix_of(Q, keys::scheduled_key(Q))?,
        suffix_of(Q, keys::retry_key(Q))?,
        suffix_of(Q, keys::archived_key(Q))?,
        suffix_of(Q, keys::completed_key(Q))?,
        suffix_of(Q, keys::all_groups_key(Q))?,
        suffix_of(Q, keys::task_key_prefix(Q))?,
        suffix_of(Q, keys::group_key_prefix(Q))?,
    ])
}

impl Broker {
    /// The sampled estimate in bytes of what the queue takes in Redis (Go
    /// `rdb.memoryUsage`, guarded form; wire spec §9.6): the read-only
    /// `queue_memory_usage` script, which runs `MEMORY USAGE` on up to 20
    /// tasks per state, 20 tasks of each of 5 groups, and the queue's keys.
    /// No existence check (an unknown queue estimates 0).
    ///
    /// Errors: [`Error::Redis`] (also when `MEMORY USAGE` is refused, as some
    /// managed services do).
    pub(crate) async fn queue_memory_usage(&self, queue: &str) -> Result<i64> {
        let bytes: i64 = scripts::QUEUE_MEMORY_USAGE
            .key(keys::active_key(queue))
            .key(keys::pending_key(queue))
            .key(keys::scheduled_key(queue))
            .key(keys::retry_key(queue))
            .key(keys::archived_key(queue))
            .key(keys::completed_key(queue))
            .key(keys::all_groups_key(queue))
            .arg(keys::task_key_prefix(queue))
            .arg(MEMORY_TASK_SAMPLE)
            .arg(MEMORY_GROUP_SAMPLE)
            .arg(keys::group_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        Ok(bytes)
    }

    /// The memory estimate of every queue in `queues` (exactly what
    /// [`Broker::queue_memory_usage`] computes for each), in one
    /// `queues_memory_usage` script call per [`QUEUES_PER_MEMORY_CALL`]
    /// queues, so Redis is never busy with one call for long. One entry per
    /// queue, in the order given; no existence check (an unknown queue
    /// estimates 0). A queue whose estimate fails (a key of the wrong type,
    /// `MEMORY USAGE` refused) gets its error; the others are unaffected.
    /// On a Redis Cluster, [`Broker::queue_memory_usage`] per queue (its
    /// keys declared, so it runs on the queue's master),
    /// [`CLUSTER_IN_FLIGHT`] at once.
    ///
    /// Errors of the whole call: [`Error::Internal`] on a reply of the wrong
    /// shape; [`Error::Redis`] (Redis unreachable).
    pub(crate) async fn queues_memory_usage(
        &self,
        queues: &[String],
    ) -> Result<Vec<(String, Result<i64>)>> {
        let mut conn = self.conn();
        if conn.is_cluster() {
            return self.queues_memory_usage_per_queue(queues).await;
        }
        let suffixes = memory_key_suffixes()?;
        let mut out = Vec::with_capacity(queues.len());
        for chunk in queues.chunks(QUEUES_PER_MEMORY_CALL) {
            let mut inv = scripts::QUEUES_MEMORY_USAGE.arg(MEMORY_TASK_SAMPLE);
            inv.arg(MEMORY_GROUP_SAMPLE);
            for suffix in &suffixes {
                inv.arg(suffix);
            }
            for queue in chunk {
                inv.arg(keys::queue_prefix(queue));
            }
            let reply: Vec<Value> = inv.invoke_async(&mut conn).await?;
            if reply.len() != chunk.len() {
                return Err(Error::Internal(format!(
                    "queues_memory_usage script replied {} entries for {} queues",
                    reply.len(),
                    chunk.len()
                )));
            }
            for (queue, entry) in chunk.iter().zip(reply) {
                let shape = || shape_error("queues_memory_usage", queue, &entry);
                let estimate = match &entry {
                    Value::Array(parts) => match parts.as_slice() {
                        [Value::Int(1), Value::Int(bytes)] => Ok(*bytes),
                        [Value::Int(-1), msg] => {
                            Err(caught_error(&text_of(msg).ok_or_else(shape)?))
                        }
                        _ => return Err(shape()),
                    },
                    _ => return Err(shape()),
                };
                out.push((queue.clone(), estimate));
            }
        }
        Ok(out)
    }

    /// [`Broker::queues_memory_usage`] on a cluster (see there).
    async fn queues_memory_usage_per_queue(
        &self,
        queues: &[String],
    ) -> Result<Vec<(String, Result<i64>)>> {
        stream::iter(queues.iter().cloned())
            .map(|q| async move {
                match self.queue_memory_usage(&q).await {
                    Err(Error::Redis(e)) if !is_reply_error(&e) => Err(Error::Redis(e)),
                    estimate => Ok((q, estimate)),
                }
            })
            .buffered(CLUSTER_IN_FLIGHT)
            .try_collect()
            .await
    }
}
