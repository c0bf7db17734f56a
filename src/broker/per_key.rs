//! One command per key over many keys, on every deployment: one pipeline
//! per chunk on a single server; on a cluster (which refuses a pipeline
//! whose keys hash to different slots) the commands themselves,
//! [`CLUSTER_IN_FLIGHT`] at a time. redis-rs keeps one multiplexed
//! connection per node, so the commands bound for one node travel
//! pipelined on it all the same.
// asynq divergence: COMPATIBILITY.md#k9

use futures_util::stream::{self, StreamExt, TryStreamExt};
use redis::Value;

use super::Broker;
use crate::error::Result;

/// Most commands (or per-queue reads) in flight at once on a cluster.
pub(crate) const CLUSTER_IN_FLIGHT: usize = 64;

/// Whether `e` is an error reply of Redis (a key of the wrong type), as
/// opposed to Redis being unreachable or slow.
pub(crate) fn is_reply_error(e: &redis::RedisError) -> bool {
    !(e.is_io_error() || e.is_timeout() || e.is_connection_dropped() || e.is_connection_refusal())
}

impl Broker {
    /// Sends every command of `cmds` (each touching keys of one slot) and
    /// returns their replies in the same order; a command answered with an
    /// error reply (a key of the wrong type) gives [`Value::Nil`]. On one
    /// server the commands go `chunk` per pipeline, one chunk after the
    /// other; on a cluster [`CLUSTER_IN_FLIGHT`] at a time.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis) when Redis cannot be
    /// reached.
    pub(crate) async fn each_command(
        &self,
        cmds: Vec<redis::Cmd>,
        chunk: usize,
    ) -> Result<Vec<Value>> {
        let conn = self.conn();
        if conn.is_cluster() {
            let replies: Vec<Value> = stream::iter(cmds)
                .map(|cmd| {
                    let mut conn = conn.clone();
                    async move {
                        match cmd.query_async::<Value>(&mut conn).await {
                            Ok(v) => Ok(v),
                            Err(e) if is_reply_error(&e) => Ok(Value::Nil),
                            Err(e) => Err(crate::Error::Redis(e)),
                        }
                    }
                })
                .buffered(CLUSTER_IN_FLIGHT)
                .try_collect()
                .await?;
            return Ok(replies);
        }
        let mut conn = conn;
        let mut out = Vec::with_capacity(cmds.len());
        for part in cmds.chunks(chunk.max(1)) {
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for cmd in part {
                pipe.add_command(cmd.clone());
            }
            let replies: Vec<Value> = pipe.query_async(&mut conn).await?;
            out.extend(replies.into_iter().map(|v| match v {
                Value::ServerError(_) => Value::Nil,
                v => v,
            }));
        }
        Ok(out)
    }
}
