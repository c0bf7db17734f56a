//! Following the Sentinel-elected master (Go `RedisFailoverClientOpt`,
//! go-redis `FailoverClient`).
//!
//! [`SentinelResolver`] asks the sentinels (redis-rs `SentinelClient`,
//! which also checks that the server it names says it is a master) for the
//! current master. [`SentinelConn`] is a reconnecting connection to it that
//! changes server when the master changes:
//! - a `READONLY` reply (a write that reached a demoted master: the old
//!   master turned replica after a failover) re-resolves the master at once
//!   and sends the command again on the new one. Redis refused the write,
//!   so nothing was applied and sending it again is safe. asynq #854 and
//!   #959 report Go failing on this until its connections are recycled;
//! - a dropped or refused connection re-resolves too (the command is not
//!   sent again: it may have been applied);
//! - a watcher subscribed to the sentinels' `+switch-master` moves every
//!   connection as soon as a failover is announced.
//!
//! The last failover seen (when, from, to) is kept for the Redis page.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::SentinelClient;
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, ServerErrorKind, Value};

use super::SentinelOptions;
use crate::error::Result;

/// A change of master seen by this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failover {
    /// When it was seen, UTC.
    pub at: DateTime<Utc>,
    /// The master before, `host:port`.
    pub from: String,
    /// The master after, `host:port`.
    pub to: String,
}

/// Shortest time between two lookups of the master made because of errors
/// (many commands fail at once when a master dies).
const MIN_LOOKUP_GAP: Duration = Duration::from_millis(200);

/// Asks the sentinels for the master; shared by every connection of a
/// broker.
pub(crate) struct SentinelResolver {
    client: tokio::sync::Mutex<SentinelClient>,
    options: SentinelOptions,
    /// The master as last resolved.
    master: RwLock<Option<(String, u16)>>,
    last_failover: Mutex<Option<Failover>>,
}

impl SentinelResolver {
    pub fn new(client: SentinelClient, options: SentinelOptions) -> Self {
        SentinelResolver {
            client: tokio::sync::Mutex::new(client),
            options,
            master: RwLock::new(None),
            last_failover: Mutex::new(None),
        }
    }

    /// The sentinels and master name.
    pub fn options(&self) -> &SentinelOptions {
        &self.options
    }

    /// A client of the current master, asking the sentinels. Errors with
    /// [`crate::Error::Redis`] when no sentinel answers or none names a
    /// reachable master.
    pub async fn master_client(&self) -> Result<redis::Client> {
        let client = self.client.lock().await.async_get_client().await?;
        if let Some(hp) = host_port(client.get_connection_info().addr()) {
            let mut m = self.master.write().unwrap_or_else(|p| p.into_inner());
            if let Some(old) = m.as_ref()
                && *old != hp
            {
                *self.last_failover.lock().unwrap_or_else(|p| p.into_inner()) = Some(Failover {
                    at: Utc::now(),
                    from: format!("{}:{}", old.0, old.1),
                    to: format!("{}:{}", hp.0, hp.1),
                });
                tracing::warn!(from = %format!("{}:{}", old.0, old.1), to = %format!("{}:{}", hp.0, hp.1), "Sentinel: the master changed");
            }
            *m = Some(hp);
        }
        Ok(client)
    }

    /// The master as last resolved, `(host, port)`.
    pub fn current_master(&self) -> Option<(String, u16)> {
        self.master
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The last change of master this process saw.
    pub fn last_failover(&self) -> Option<Failover> {
        self.last_failover
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// A connection that follows the master.
    pub async fn connect(self: &Arc<Self>) -> Result<SentinelConn> {
        let current = Current::open(self).await?;
        Ok(SentinelConn {
            resolver: self.clone(),
            state: Arc::new(State {
                current: RwLock::new(Arc::new(current)),
                switching: tokio::sync::Mutex::new(None),
            }),
        })
    }
}

fn host_port(addr: &redis::ConnectionAddr) -> Option<(String, u16)> {
    match addr {
        redis::ConnectionAddr::Tcp(h, p)
        | redis::ConnectionAddr::TcpTls {
            host: h, port: p, ..
        } => Some((h.clone(), *p)),
        _ => None,
    }
}

struct Current {
    conn: ConnectionManager,
    addr: Option<(String, u16)>,
    generation: u64,
}

impl Current {
    async fn open(resolver: &SentinelResolver) -> Result<Current> {
        let client = resolver.master_client().await?;
        let addr = host_port(client.get_connection_info().addr());
        let conn =
            ConnectionManager::new_with_config(client, super::super::manager_config()).await?;
        Ok(Current {
            conn,
            addr,
            generation: 0,
        })
    }
}

struct State {
    current: RwLock<Arc<Current>>,
    /// Held while the master is looked up; the time of the last lookup.
    switching: tokio::sync::Mutex<Option<Instant>>,
}

/// A reconnecting connection to the Sentinel-elected master; cheap to
/// clone (clones share the connection).
#[derive(Clone)]
pub(crate) struct SentinelConn {
    resolver: Arc<SentinelResolver>,
    state: Arc<State>,
}

/// Whether `e` is a write refused by a replica.
fn is_readonly(e: &redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
        || e.code() == Some("READONLY")
        || e.to_string().contains("READONLY")
}

/// Whether `e` says the server is gone or unreachable.
fn is_lost(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal()
}

impl SentinelConn {
    fn current(&self) -> Arc<Current> {
        self.state
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Asks the sentinels for the master and moves to it when it is
    /// another server than `seen`'s. Returns whether the connection now
    /// points elsewhere than `seen` did.
    async fn follow(&self, seen: &Current, forced: bool) -> bool {
        let mut last = self.state.switching.lock().await;
        if self.current().generation != seen.generation {
            return true;
        }
        if !forced && last.is_some_and(|t| t.elapsed() < MIN_LOOKUP_GAP) {
            return false;
        }
        *last = Some(Instant::now());
        let client = match self.resolver.master_client().await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("Sentinel: looking up the master failed: {e}");
                return false;
            }
        };
        let addr = host_port(client.get_connection_info().addr());
        if addr == seen.addr {
            return false;
        }
        match ConnectionManager::new_with_config(client, super::super::manager_config()).await {
            Ok(conn) => {
                let next = Arc::new(Current {
                    conn,
                    addr,
                    generation: seen.generation + 1,
                });
                *self
                    .state
                    .current
                    .write()
                    .unwrap_or_else(|p| p.into_inner()) = next;
                true
            }
            Err(e) => {
                tracing::warn!("Sentinel: connecting to the new master failed: {e}");
                false
            }
        }
    }

    /// Moves to the master the sentinels name now, if it changed (the
    /// `+switch-master` watcher, and tests).
    pub async fn refresh(&self) -> bool {
        let seen = self.current();
        self.follow(&seen, true).await
    }

    /// The master this connection talks to, `host:port`.
    pub fn master(&self) -> Option<String> {
        self.current()
            .addr
            .as_ref()
            .map(|(h, p)| format!("{h}:{p}"))
    }

    /// The resolver behind this connection.
    pub fn resolver(&self) -> &Arc<SentinelResolver> {
        &self.resolver
    }

    /// A connection to the current master of its own (the fetch loop's).
    pub async fn own(&self) -> Result<SentinelConn> {
        self.resolver.connect().await
    }
}

/// Whether a pipeline reply holds a `READONLY` refusal.
fn refused_readonly(r: &redis::RedisResult<Vec<Value>>) -> bool {
    match r {
        Err(e) => is_readonly(e),
        Ok(values) => values
            .iter()
            .any(|v| matches!(v, Value::ServerError(e) if e.code() == "READONLY")),
    }
}

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let cur = self.current();
            let mut conn = cur.conn.clone();
            match conn.req_packed_command(cmd).await {
                Err(e) if is_readonly(&e) => {
                    if self.follow(&cur, true).await {
                        let mut conn = self.current().conn.clone();
                        return conn.req_packed_command(cmd).await;
                    }
                    Err(e)
                }
                Err(e) if is_lost(&e) => {
                    self.follow(&cur, false).await;
                    Err(e)
                }
                other => other,
            }
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let cur = self.current();
            let mut conn = cur.conn.clone();
            let r = conn.req_packed_commands(pipeline, offset, count).await;
            if refused_readonly(&r) {
                if self.follow(&cur, true).await {
                    let mut conn = self.current().conn.clone();
                    return conn.req_packed_commands(pipeline, offset, count).await;
                }
            } else if let Err(e) = &r
                && is_lost(e)
            {
                self.follow(&cur, false).await;
            }
            r
        })
    }

    fn get_db(&self) -> i64 {
        self.current().conn.get_db()
    }
}
