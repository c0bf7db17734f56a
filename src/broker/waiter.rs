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
//!
//! The connection is a plain one (no reconnect): after an error it is
//! dropped and the next wait opens a new one. Behind Sentinel it talks to
//! the master of its time: a wait started before a change of master ends at
//! once when the broker sees the change, and the next wait reopens on the
//! new master. A wait whose reply does not come within its timeout plus
//! [`REPLY_TIMEOUT`](super::REPLY_TIMEOUT) (a server that vanished from the
//! network) fails and reopens too.

use std::sync::Arc;
use std::time::Duration;

use super::{Broker, Conn, Target, keys};
use crate::error::{Error, Result};

/// A dedicated connection that waits for pending work in one queue.
// asynq divergence: COMPATIBILITY.md#w10
pub struct PendingWaiter {
    /// `None` after an error: the next wait reopens.
    conn: Option<Conn>,
    /// The target's generation when `conn` was opened.
    generation: u64,
    target: Arc<Target>,
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
        let generation = self.target.generation();
        let mut conn = self.target.dedicated().await?;
        let (major, minor) = super::version::redis_version(&mut conn).await?;
        if (major, minor) < (6, 2) {
            return Ok(None);
        }
        Ok(Some(PendingWaiter {
            conn: Some(conn),
            generation,
            target: self.target.clone(),
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
    ///
    /// Errors: [`Error::Redis`] when a command fails or the server is
    /// gone, or the wait outlived its timeout by [`super::REPLY_TIMEOUT`];
    /// the connection is then dropped and the next call opens another.
    pub async fn wait(&mut self, timeout: Duration) -> Result<bool> {
        let r = self.wait_on_current(timeout).await;
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    async fn wait_on_current(&mut self, timeout: Duration) -> Result<bool> {
        if self.generation != self.target.generation() {
            self.conn = None;
        }
        if self.conn.is_none() {
            self.generation = self.target.generation();
            self.conn = Some(self.target.dedicated().await?);
        }
        let mut changes = self.target.changes();
        let generation = self.generation;
        let conn = self.conn.as_mut().expect("opened above");
        let paused: bool = redis::cmd("EXISTS")
            .arg(&self.paused_key)
            .query_async(conn)
            .await?;
        if paused {
            return Ok(false);
        }
        let secs = (timeout.as_millis().max(1) as f64) / 1000.0;
        let mut cmd = redis::cmd("BLMOVE");
        cmd.arg(&self.pending_key)
            .arg(&self.pending_key)
            .arg("RIGHT")
            .arg("RIGHT")
            .arg(secs);
        let blmove = cmd.query_async::<Option<Vec<u8>>>(conn);
        let master_changed = async {
            match changes.as_mut() {
                Some(rx) => {
                    let _ = rx.wait_for(|g| *g != generation).await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            moved = tokio::time::timeout(timeout + super::REPLY_TIMEOUT, blmove) => match moved {
                Ok(moved) => Ok(moved?.is_some()),
                Err(_) => Err(Error::Redis(redis::RedisError::from((
                    redis::ErrorKind::Io,
                    "the blocking wait for pending work got no reply",
                )))),
            },
            _ = master_changed => {
                // The new master may hold work already: say so, the caller
                // fetches (an empty fetch costs one call).
                self.conn = None;
                Ok(true)
            }
        }
    }
}
