//! The only module that speaks Redis (Go: `internal/rdb`).
//!
//! [`Broker`] owns a multiplexed, auto-reconnecting connection and runs one
//! Lua script per multi-key change (scripts live in `scripts/*.lua`, one file
//! per operation, registered in [`scripts`]). Script reply codes become typed
//! [`Error`](crate::Error)s in the wrapper that sends the script.
//!
//! Files: `keys.rs` (every key name), `proto.rs` (protobuf messages),
//! `enqueue.rs` (client writes), `queues.rs` (queue stats, history, pause,
//! queue deletion), `tasks.rs` (task listing, lookup and inspector
//! mutations), `servers.rs` (servers, workers, scheduler entries, cancel).

pub mod keys;
pub mod proto;
pub(crate) mod scripts;

mod enqueue;
mod queues;
mod servers;
mod tasks;

pub use enqueue::EnqueueTarget;

use chrono::{DateTime, Utc};
use redis::aio::ConnectionManager;

use crate::clock::{SharedClock, SystemClock};
use crate::error::{Error, Result};

/// A handle on one Redis database holding asynq data. Cheap to clone; clones
/// share the connection.
#[derive(Clone)]
pub struct Broker {
    conn: ConnectionManager,
    clock: SharedClock,
}

impl std::fmt::Debug for Broker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Broker").finish_non_exhaustive()
    }
}

impl Broker {
    /// Connects to `url` (`redis://[user:password@]host:port/db`, `rediss://`
    /// for TLS). Errors with [`Error::Redis`] when Redis cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let conn = ConnectionManager::new(client).await?;
        Ok(Broker {
            conn,
            clock: std::sync::Arc::new(SystemClock),
        })
    }

    /// The same broker reading time from `clock` (for tests).
    pub fn with_clock(mut self, clock: SharedClock) -> Self {
        self.clock = clock;
        self
    }

    /// The current time, UTC, from the broker's clock.
    pub fn now(&self) -> DateTime<Utc> {
        self.clock.now()
    }

    /// A connection handle (multiplexed; cloning is cheap).
    pub(crate) fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// Sends `PING`; errors when Redis is unreachable.
    pub async fn ping(&self) -> Result<()> {
        let _: String = redis::cmd("PING").query_async(&mut self.conn()).await?;
        Ok(())
    }
}

/// Decodes a task message read from `key`, mapping failure to [`Error::Corrupt`].
pub(crate) fn decode_task(key: &str, bytes: &[u8]) -> Result<proto::WireTask> {
    proto::WireTask::decode(bytes).map_err(|e| Error::Corrupt {
        key: format!("{key} msg"),
        reason: e,
    })
}

/// Unix seconds to UTC; 0 means "unset" on the wire and becomes `None`.
pub(crate) fn from_unix_s(s: i64) -> Option<DateTime<Utc>> {
    if s == 0 {
        None
    } else {
        DateTime::from_timestamp(s, 0)
    }
}
