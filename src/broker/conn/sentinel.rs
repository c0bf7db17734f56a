//! Following the Sentinel-elected master (Go `RedisFailoverClientOpt`,
//! go-redis `FailoverClient`).
//!
//! [`SentinelResolver`] asks the sentinels (redis-rs `SentinelClient`,
//! which also checks that the server it names says it is a master) for the
//! current master, and counts the changes of master it has seen: its
//! *generation*. [`SentinelConn`] is a reconnecting connection to the
//! master that changes server when the master changes:
//! - before each command it compares its generation with the resolver's
//!   and, when the resolver has seen a failover since, moves to the new
//!   master first. The watcher (`sentinel_watch.rs`), subscribed to the
//!   sentinels' `+switch-master`, makes the resolver see a failover as soon
//!   as the sentinels announce it, so every connection moves at its next
//!   command (on the runtime of the caller: the fetch loop's connection
//!   stays driven by its own thread);
//! - a `READONLY` reply (a write that reached a demoted master) or a
//!   `NOREPLICAS` one (a master with `min-replicas-to-write` whose replica
//!   left, as a promoted replica does) re-resolves the master at once and
//!   sends the command again on the new one. Redis refused the write, so
//!   nothing was applied and sending it again is safe. asynq #854 and #959
//!   report Go failing on this until its connections are recycled;
//! - a dropped or timed-out connection re-resolves too (the command is not
//!   sent again: it may have been applied).
//!
//! Connections of their own (the idle worker's blocking wait, pub/sub, the
//! dashboard's tracked statistics connection) are plain connections to the
//! master of their time; their owners compare [`SentinelResolver::generation`]
//! with the one they opened at and reopen when it changed
//! (`Target::generation`, `Target::changes`).
//!
//! The last failover seen (when, from, to) is kept for the Redis page.

use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use redis::aio::{ConnectionLike, ConnectionManager};
use redis::sentinel::SentinelClient;
use redis::{Cmd, ErrorKind, Pipeline, RedisFuture, ServerErrorKind, Value};
use tokio::sync::watch;

use super::SentinelOptions;
use super::target::NodeClients;
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

/// What the broker knows about the Sentinel-elected master, for the Redis
/// page (no Redis call: the resolver's view, which the `+switch-master`
/// watcher and the connections keep current).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelStatus {
    /// The monitored master's name.
    pub master_name: String,
    /// The sentinels, `host:port`, as configured.
    pub sentinels: Vec<String>,
    /// The master in use, `host:port`; `None` before the first lookup.
    pub master: Option<String>,
    /// The last change of master this process saw.
    pub last_failover: Option<Failover>,
    /// How many changes of master this process saw.
    pub failovers: u64,
}

/// How long after a failover a lookup naming the former master is taken
/// for a sentinel that has not adopted the new configuration yet
/// (sentinels spread it every 2 s; Sentinel converts the old master within
/// about 10 s).
const STALE_WINDOW: Duration = Duration::from_secs(30);

/// Shortest time between two lookups of the master made because of lost
/// connections (many commands fail at once when a master dies).
const MIN_LOOKUP_GAP: Duration = Duration::from_millis(200);

/// Asks the sentinels for the master; shared by every connection of a
/// broker.
pub(crate) struct SentinelResolver {
    client: tokio::sync::Mutex<SentinelClient>,
    options: SentinelOptions,
    /// Clients of each sentinel itself (credentials and TLS of the
    /// sentinels), for the `+switch-master` watcher.
    sentinels: Vec<redis::Client>,
    /// The master as last resolved.
    master: RwLock<Option<(String, u16)>>,
    /// Clients of a master by address (its credentials, database, TLS).
    masters: NodeClients,
    /// How many changes of master were seen; receivers wake on each.
    generation: watch::Sender<u64>,
    last_failover: Mutex<Option<Failover>>,
    /// Stops the watcher when the resolver (the broker's last clone) is
    /// dropped.
    watcher: Mutex<Option<tokio_util::sync::DropGuard>>,
}

impl SentinelResolver {
    pub fn new(
        client: SentinelClient,
        options: SentinelOptions,
        sentinels: Vec<redis::Client>,
        masters: NodeClients,
    ) -> Self {
        SentinelResolver {
            client: tokio::sync::Mutex::new(client),
            options,
            sentinels,
            masters,
            master: RwLock::new(None),
            generation: watch::Sender::new(0),
            last_failover: Mutex::new(None),
            watcher: Mutex::new(None),
        }
    }

    /// The sentinels and master name.
    pub fn options(&self) -> &SentinelOptions {
        &self.options
    }

    /// The clients of a master by address (unit tests).
    #[cfg(test)]
    pub fn masters_for_tests(&self) -> &NodeClients {
        &self.masters
    }

    /// Clients of the sentinels themselves.
    pub fn sentinel_clients(&self) -> &[redis::Client] {
        &self.sentinels
    }

    /// Starts the `+switch-master` watcher (once; needs a Tokio runtime).
    /// It ends when this resolver is dropped.
    pub fn start_watcher(self: &Arc<Self>) {
        let mut w = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_none() {
            *w = Some(super::sentinel_watch::spawn(self));
        }
    }

    /// A client of the current master, asking the sentinels. Errors with
    /// [`crate::Error::Redis`] when no sentinel answers or none names a
    /// reachable master.
    ///
    /// redis-rs takes the first sentinel (in the order given) that names a
    /// server saying it is a master; right after a failover that can be a
    /// sentinel that has not adopted the new configuration yet, naming the
    /// old master (which says it is a master until Sentinel converts it,
    /// seconds later). So a lookup naming the master we moved away from in
    /// the last [`STALE_WINDOW`] is not followed: the master announced by
    /// `+switch-master` stands.
    ///
    /// During a failover, `SENTINEL MASTERS` (what redis-rs reads) names
    /// the old master until the failover ends, while
    /// `SENTINEL GET-MASTER-ADDR-BY-NAME` names the promoted replica as soon
    /// as its promotion is confirmed: when the first names the master in
    /// use, the second is asked too, and a promoted replica it names is
    /// followed.
    pub async fn master_client(&self) -> Result<redis::Client> {
        let client = self.client.lock().await.async_get_client().await?;
        if let Some(hp) = host_port(client.get_connection_info().addr()) {
            if self.is_stale(&hp) || self.current_master().as_ref() == Some(&hp) {
                if let Some(promoted) = self.addr_by_name().await
                    && promoted != hp
                    && !self.is_stale(&promoted)
                {
                    self.note_master(promoted.clone());
                    return self.masters.client(&promoted.0, promoted.1);
                }
                if self.is_stale(&hp)
                    && let Some(c) = self.known_master_client()
                {
                    return Ok(c);
                }
            }
            self.note_master(hp);
        }
        Ok(client)
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME` from the first sentinel that
    /// answers.
    async fn addr_by_name(&self) -> Option<(String, u16)> {
        for client in &self.sentinels {
            let ask = async {
                let mut conn = client.get_multiplexed_async_connection().await?;
                redis::cmd("SENTINEL")
                    .arg("GET-MASTER-ADDR-BY-NAME")
                    .arg(&self.options.master)
                    .query_async::<Option<(String, u16)>>(&mut conn)
                    .await
            };
            if let Ok(Ok(Some(hp))) = tokio::time::timeout(Duration::from_secs(2), ask).await {
                return Some(hp);
            }
        }
        None
    }

    /// Whether `hp` is the master of before the last failover, seen within
    /// [`STALE_WINDOW`] of it.
    fn is_stale(&self, hp: &(String, u16)) -> bool {
        let last = self.last_failover.lock().unwrap_or_else(|p| p.into_inner());
        last.as_ref().is_some_and(|f| {
            f.from == format!("{}:{}", hp.0, hp.1)
                && (Utc::now() - f.at).to_std().unwrap_or_default() < STALE_WINDOW
        })
    }

    /// Adopts the master a sentinel announced (`+switch-master`) and
    /// returns whether it is another than the one in use.
    pub fn adopt(&self, hp: (String, u16)) -> bool {
        let changed = self.current_master().as_ref() != Some(&hp);
        self.note_master(hp);
        changed
    }

    /// A client of the master as last resolved or announced.
    pub fn known_master_client(&self) -> Option<redis::Client> {
        let (h, p) = self.current_master()?;
        self.masters.client(&h, p).ok()
    }

    /// Records `hp` as the master; a change from another one is a failover
    /// (a new generation).
    fn note_master(&self, hp: (String, u16)) {
        let mut m = self.master.write().unwrap_or_else(|p| p.into_inner());
        if m.as_ref() == Some(&hp) {
            return;
        }
        if let Some(old) = m.as_ref() {
            let (from, to) = (format!("{}:{}", old.0, old.1), format!("{}:{}", hp.0, hp.1));
            tracing::warn!(%from, %to, "Sentinel: the master changed");
            *self.last_failover.lock().unwrap_or_else(|p| p.into_inner()) = Some(Failover {
                at: Utc::now(),
                from,
                to,
            });
            self.generation.send_modify(|g| *g += 1);
        }
        *m = Some(hp);
    }

    /// How many changes of master this resolver has seen.
    pub fn generation(&self) -> u64 {
        *self.generation.borrow()
    }

    /// Wakes at each change of master.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }

    /// The master as last resolved, `(host, port)`.
    pub fn current_master(&self) -> Option<(String, u16)> {
        self.master
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The resolver's view, for the Redis page.
    pub fn status(&self) -> SentinelStatus {
        SentinelStatus {
            master_name: self.options.master.clone(),
            sentinels: self.options.addrs.clone(),
            master: self.current_master().map(|(h, p)| format!("{h}:{p}")),
            last_failover: self.last_failover(),
            failovers: self.generation(),
        }
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

/// The connection in use and the resolver's generation it was adopted at.
struct Current {
    conn: ConnectionManager,
    addr: Option<(String, u16)>,
    generation: u64,
}

impl Current {
    async fn open(resolver: &SentinelResolver) -> Result<Current> {
        let client = resolver.master_client().await?;
        let generation = resolver.generation();
        let addr = host_port(client.get_connection_info().addr());
        let conn =
            ConnectionManager::new_with_config(client, super::super::manager_config()).await?;
        Ok(Current {
            conn,
            addr,
            generation,
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

/// Whether `e` is a write Redis refused without applying it because this
/// server cannot take writes now: `READONLY` (a replica: the demoted
/// master) or `NOREPLICAS` (`min-replicas-to-write` not met: its replica
/// left, as one does when it is promoted). Inside a script the refusal
/// comes at its first write, whose error aborts the script.
pub(crate) fn is_refused_write(e: &redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly)
        || matches!(e.code(), Some("READONLY" | "NOREPLICAS"))
        || e.to_string().contains("READONLY")
        || e.to_string().contains("NOREPLICAS")
}

/// Whether `e` says the server is gone, unreachable or not answering.
fn is_lost(e: &redis::RedisError) -> bool {
    e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() || e.is_timeout()
}

impl SentinelConn {
    fn current(&self) -> Arc<Current> {
        self.state
            .current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The connection to use now: the current one, after moving to the new
    /// master when the resolver has seen a failover since it was adopted.
    async fn up_to_date(&self) -> Arc<Current> {
        let cur = self.current();
        if cur.generation == self.resolver.generation() {
            return cur;
        }
        self.follow(&cur, true).await;
        self.current()
    }

    /// Asks the sentinels for the master and moves to it when it is
    /// another server than `seen`'s. Returns whether the connection now
    /// points elsewhere than `seen` did. Unless `forced`, looks up at most
    /// once per [`MIN_LOOKUP_GAP`].
    async fn follow(&self, seen: &Arc<Current>, forced: bool) -> bool {
        let mut last = self.state.switching.lock().await;
        if !Arc::ptr_eq(&self.current(), seen) {
            return true;
        }
        let known_change = self.resolver.generation() != seen.generation;
        if !forced && !known_change && last.is_some_and(|t| t.elapsed() < MIN_LOOKUP_GAP) {
            return false;
        }
        *last = Some(Instant::now());
        let known = known_change
            .then(|| self.resolver.known_master_client())
            .flatten();
        let looked_up = match known {
            Some(c) => Ok(c),
            None => self.resolver.master_client().await,
        };
        let client = match looked_up {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("Sentinel: looking up the master failed: {e}");
                return false;
            }
        };
        let generation = self.resolver.generation();
        let addr = host_port(client.get_connection_info().addr());
        let replace = |next: Current| {
            *self
                .state
                .current
                .write()
                .unwrap_or_else(|p| p.into_inner()) = Arc::new(next);
        };
        if addr == seen.addr {
            if generation != seen.generation {
                replace(Current {
                    conn: seen.conn.clone(),
                    addr,
                    generation,
                });
            }
            return false;
        }
        match ConnectionManager::new_with_config(client, super::super::manager_config()).await {
            Ok(conn) => {
                replace(Current {
                    conn,
                    addr,
                    generation,
                });
                true
            }
            Err(e) => {
                tracing::warn!("Sentinel: connecting to the new master failed: {e}");
                false
            }
        }
    }

    /// The master this connection talks to, `host:port`.
    pub fn master(&self) -> Option<String> {
        self.current()
            .addr
            .as_ref()
            .map(|(h, p)| format!("{h}:{p}"))
    }
}

/// Whether a pipeline was refused as a whole: an error, or a first reply
/// that is a refused write (`READONLY`, `NOREPLICAS`). A pipeline whose
/// first command went through is not sent again, even if later ones were
/// refused: what went through may be applied twice.
fn refused_pipeline(r: &redis::RedisResult<Vec<Value>>) -> bool {
    match r {
        Err(e) => is_refused_write(e),
        Ok(values) => values.first().is_some_and(is_refusal_value),
    }
}

/// Whether a reply is a refused write (`READONLY`, `NOREPLICAS`), as
/// redis-rs hands error replies over: a value.
fn is_refusal_value(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if matches!(e.code(), "READONLY" | "NOREPLICAS"))
}

impl ConnectionLike for SentinelConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let cur = self.up_to_date().await;
            let mut conn = cur.conn.clone();
            match conn.req_packed_command(cmd).await {
                // redis-rs hands a server's error reply over as a value.
                Ok(v) if is_refusal_value(&v) => {
                    if self.follow(&cur, true).await {
                        let mut conn = self.current().conn.clone();
                        return conn.req_packed_command(cmd).await;
                    }
                    Ok(v)
                }
                Err(e) if is_refused_write(&e) => {
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
            let cur = self.up_to_date().await;
            let mut conn = cur.conn.clone();
            let r = conn.req_packed_commands(pipeline, offset, count).await;
            if refused_pipeline(&r) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_recognised() {
        let readonly = redis::RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "You can't write against a read only replica.",
        ));
        assert!(is_refused_write(&readonly));
        let io = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(!is_refused_write(&io));
        assert!(is_lost(&io));
        let noreplicas =
            redis::parse_redis_value(b"-NOREPLICAS Not enough good replicas to write.\r\n")
                .unwrap();
        assert!(is_refusal_value(&noreplicas));
        assert!(!is_refusal_value(&Value::Okay));
        assert!(refused_pipeline(&Ok(vec![noreplicas.clone(), Value::Okay])));
        assert!(!refused_pipeline(&Ok(vec![Value::Okay, noreplicas])));
        assert!(refused_pipeline(&Err(readonly)));
        assert!(!refused_pipeline(&Err(io)));
    }
}
