//! Blocking wake-up for idle workers: return as soon as a queue has pending
//! work, without polling and without taking the work.
//!
//! Go polls: an idle Go processor sleeps up to 1.5 s between dequeue
//! attempts. We block instead on `BLMOVE <pending> <pending> RIGHT RIGHT`,
//! which waits until the list holds an element and then moves its rightmost
//! element to the right end of the same list: the list is left exactly as it
//! was, so Go peers see nothing. Blocking needs a dedicated connection (a
//! blocked command would stall the shared multiplexed one). BLMOVE exists
//! since Redis 6.2; on older servers [`Broker::pending_waiter`] says so and
//! callers fall back to polling.

use std::time::Duration;

use super::{Broker, Conn, keys};
use crate::error::Result;

/// A dedicated connection that waits for pending work in one queue.
// asynq divergence: COMPATIBILITY.md#w10
pub struct PendingWaiter {
    conn: Conn,
    pending_key: String,
    paused_key: String,
}

impl std::fmt::Debug for PendingWaiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingWaiter")
            .field("pending_key", &self.pending_key)
            .finish()
    }
}

impl Broker {
    /// Opens a waiter for `queue`, or `None` when the server lacks BLMOVE
    /// (Redis < 6.2). Errors: [`Error::Redis`](crate::Error::Redis).
    pub async fn pending_waiter(&self, queue: &str) -> Result<Option<PendingWaiter>> {
        let mut conn = self.target.dedicated().await?;
        let (major, minor) = super::version::redis_version(&mut conn).await?;
        if (major, minor) < (6, 2) {
            return Ok(None);
        }
        Ok(Some(PendingWaiter {
            conn,
            pending_key: keys::pending_key(queue),
            paused_key: keys::paused_key(queue),
        }))
    }
}

impl PendingWaiter {
    /// Waits up to `timeout` (rounded up to whole milliseconds) for the queue
    /// to hold pending work. Returns `true` when it does and the queue is not
    /// paused; `false` on timeout or when paused (the caller then waits its
    /// normal interval, so a paused non-empty queue cannot spin).
    pub async fn wait(&mut self, timeout: Duration) -> Result<bool> {
        let paused: bool = redis::cmd("EXISTS")
            .arg(&self.paused_key)
            .query_async(&mut self.conn)
            .await?;
        if paused {
            return Ok(false);
        }
        let secs = (timeout.as_millis().max(1) as f64) / 1000.0;
        let moved: Option<Vec<u8>> = redis::cmd("BLMOVE")
            .arg(&self.pending_key)
            .arg(&self.pending_key)
            .arg("RIGHT")
            .arg("RIGHT")
            .arg(secs)
            .query_async(&mut self.conn)
            .await?;
        Ok(moved.is_some())
    }
}
