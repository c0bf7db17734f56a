//! What the cross-queue search reads besides the listing pages: the
//! `pending_since` field of pending tasks (their age). One `HGET` per task,
//! pipelined ([`Broker::each_command`]); the keys of one call all belong
//! to one queue.

use redis::Value;

use super::{Broker, keys};
use crate::error::Result;

/// Tasks per pipeline.
const CHUNK: usize = 500;

impl Broker {
    /// The `pending_since` field (unix nanoseconds) of each task of
    /// `queue` named in `ids`, in order; `None` where it is absent, not an
    /// integer, or the key is not a hash.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis) when Redis cannot be
    /// reached.
    pub(crate) async fn pending_since(
        &self,
        queue: &str,
        ids: &[&str],
    ) -> Result<Vec<Option<i64>>> {
        let cmds = ids
            .iter()
            .map(|id| {
                let mut c = redis::cmd("HGET");
                c.arg(keys::task_key(queue, id)).arg("pending_since");
                c
            })
            .collect();
        let replies = self.each_command(cmds, CHUNK).await?;
        Ok(replies
            .into_iter()
            .map(|v| match v {
                Value::BulkString(b) => std::str::from_utf8(&b).ok()?.trim().parse().ok(),
                Value::Int(i) => Some(i),
                _ => None,
            })
            .collect())
    }
}
