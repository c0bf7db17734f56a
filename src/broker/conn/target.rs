//! Which deployment a set of [`ConnectOptions`] names — one Redis server, a
//! Redis Cluster, or a master elected by Sentinel — and how to open the
//! connections the broker needs on it: the shared one ([`Conn`]), dedicated
//! ones (the idle worker's blocking wait), and plain clients of one server
//! (pub/sub, key tracking, per-node reads).
//!
//! Cluster and Sentinel are redis-rs's own (`cluster-async`, `sentinel`).

use std::sync::Arc;
use std::time::Duration;

use redis::cluster::{ClusterClient, ClusterClientBuilder};
use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
use redis::{ConnectionAddr, ConnectionInfo, IntoConnectionInfo, TlsCertificates, TlsMode};

use super::sentinel::SentinelResolver;
use super::{Conn, ConnectOptions, SentinelOptions, install_crypto_provider, urls};
use crate::error::{Error, Result};

/// The kind of Redis deployment a broker talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// One Redis server (`redis://`, `rediss://`, `redis+unix://`).
    Standalone,
    /// A Redis Cluster (`--redis-cluster-nodes`, `redis-cluster://`).
    Cluster,
    /// The master a set of sentinels elects (`redis-sentinel://`,
    /// `--redis-sentinel-addrs`).
    Sentinel,
}

/// An opened description of the deployment, kept by the broker (one per
/// connected broker, behind an `Arc`: the variants' sizes do not matter).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Target {
    Single(redis::Client),
    Cluster(Box<ClusterTarget>),
    Sentinel(Arc<SentinelResolver>),
}

/// A cluster: redis-rs's client, one with no reply timeout (blocking
/// commands), and what is needed to reach one node by address.
pub(crate) struct ClusterTarget {
    pub client: ClusterClient,
    pub blocking: ClusterClient,
    /// The seed nodes, as given.
    pub seeds: Vec<(String, u16)>,
    /// Credentials, database 0 and TLS of every node.
    nodes: NodeClients,
}

fn host_port(addr: &str) -> Result<(String, u16)> {
    let (h, p) = addr
        .rsplit_once(':')
        .ok_or_else(|| Error::InvalidArgument(format!("{addr:?} is not host:port")))?;
    let port = p
        .parse::<u16>()
        .map_err(|_| Error::InvalidArgument(format!("{addr:?}: bad port")))?;
    let host = h.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return Err(Error::InvalidArgument(format!("{addr:?}: no host")));
    }
    Ok((host.to_string(), port))
}

impl ConnectOptions {
    /// The deployment these options name, and for Sentinel the sentinels
    /// (URL and fields merged). Errors with [`Error::InvalidArgument`] for
    /// a malformed `redis-sentinel://` or `redis-cluster://` URL, or for
    /// both cluster nodes and sentinels.
    pub fn topology(&self) -> Result<(Topology, Option<SentinelOptions>)> {
        let url = self.url_or_default();
        let mut sentinel = self.sentinel.clone();
        if url.starts_with("redis-sentinel://") {
            let u = urls::parse_sentinel_url(url)?;
            let s = sentinel.get_or_insert_with(SentinelOptions::default);
            if s.addrs.is_empty() {
                s.addrs = u.addrs;
            }
            if s.master.is_empty() {
                s.master = u.master;
            }
            if s.password.is_none() {
                s.password = u.password;
            }
            if s.username.is_none() {
                s.username = u.username;
            }
        }
        let cluster = !self.cluster_nodes.is_empty() || urls::is_cluster_url(url);
        match (cluster, sentinel) {
            (true, Some(_)) => Err(Error::InvalidArgument(
                "give either Redis Cluster nodes or sentinels, not both".into(),
            )),
            (true, None) => Ok((Topology::Cluster, None)),
            (false, Some(s)) => {
                if s.addrs.is_empty() || s.master.is_empty() {
                    return Err(Error::InvalidArgument(
                        "Sentinel needs the sentinels' addresses and the master's name".into(),
                    ));
                }
                Ok((Topology::Sentinel, Some(s)))
            }
            (false, None) => Ok((Topology::Standalone, None)),
        }
    }

    /// The cluster's seed nodes: `cluster_nodes`, else the URL's hosts.
    pub(crate) fn cluster_seeds(&self) -> Result<Vec<String>> {
        if !self.cluster_nodes.is_empty() {
            return Ok(self.cluster_nodes.clone());
        }
        Ok(urls::parse_cluster_url(self.url_or_default())?.nodes)
    }

    /// Username, password and database of the server(s) holding the data:
    /// the separate fields over what the URL says.
    fn data_credentials(&self) -> (Option<String>, Option<String>, i64) {
        let url = self.url_or_default();
        let (mut user, mut pw, mut db) = (None, None, 0);
        if urls::is_cluster_url(url) {
            if let Ok(u) = urls::parse_cluster_url(url) {
                (user, pw) = (u.username, u.password);
            }
        } else if url.starts_with("redis-sentinel://") {
            if let Ok(u) = urls::parse_sentinel_url(url) {
                db = u.db.unwrap_or(0);
            }
        } else if let Ok(info) = url.into_connection_info() {
            let s = info.redis_settings();
            user = s.username().map(str::to_string);
            pw = s.password().map(str::to_string);
            db = s.db();
        }
        (
            self.username.clone().or(user),
            self.password.clone().or(pw),
            self.db.unwrap_or(db),
        )
    }

    fn tls_mode(&self) -> Option<TlsMode> {
        if !self.uses_tls() {
            None
        } else if self.insecure {
            Some(TlsMode::Insecure)
        } else {
            Some(TlsMode::Secure)
        }
    }

    fn certificates(&self) -> Option<TlsCertificates> {
        if self.ca_cert_pem.is_none() && self.client_cert_pem.is_none() {
            return None;
        }
        Some(TlsCertificates {
            client_tls: self
                .client_cert_pem
                .as_ref()
                .map(|(cert, key)| redis::ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca_cert_pem.clone(),
        })
    }

    /// Opens the description of the deployment (no connection yet).
    /// Errors with [`Error::InvalidArgument`] for options that cannot make
    /// a connection.
    pub(crate) fn target(&self) -> Result<Target> {
        let (topology, sentinel) = self.topology()?;
        match topology {
            Topology::Standalone => Ok(Target::Single(self.client()?)),
            Topology::Cluster => self.cluster_target().map(|c| Target::Cluster(Box::new(c))),
            Topology::Sentinel => {
                let s = sentinel.expect("topology gives the sentinels");
                self.sentinel_resolver(&s)
                    .map(|r| Target::Sentinel(Arc::new(r)))
            }
        }
    }

    fn cluster_target(&self) -> Result<ClusterTarget> {
        let (user, pw, db) = self.data_credentials();
        if db != 0 {
            return Err(Error::InvalidArgument(format!(
                "a Redis Cluster has only database 0, not {db}"
            )));
        }
        let seeds = self
            .cluster_seeds()?
            .iter()
            .map(|a| host_port(a))
            .collect::<Result<Vec<_>>>()?;
        let tls = self.tls_mode();
        if tls.is_some() {
            install_crypto_provider();
        }
        let certs = self.certificates();
        let build = |timeout: Option<Duration>| {
            let nodes: Vec<ConnectionInfo> = seeds
                .iter()
                .map(|(h, p)| ConnectionAddr::Tcp(h.clone(), *p).into_connection_info())
                .collect::<redis::RedisResult<_>>()?;
            let mut b = ClusterClientBuilder::new(nodes)
                .connection_timeout(Duration::from_secs(5))
                .retries(4);
            if let Some(t) = timeout {
                b = b.response_timeout(t);
            } else {
                b = b.response_timeout(Duration::from_secs(365 * 24 * 3600));
            }
            if let Some(u) = &user {
                b = b.username(u);
            }
            if let Some(p) = &pw {
                b = b.password(p);
            }
            if let Some(t) = tls {
                b = b.tls(t);
            }
            if let Some(c) = &certs {
                b = b.certs(c.clone());
            }
            b.build()
        };
        let invalid =
            |e: redis::RedisError| Error::InvalidArgument(format!("Redis Cluster options: {e}"));
        let mut redis_info = redis::RedisConnectionInfo::default();
        if let Some(u) = &user {
            redis_info = redis_info.set_username(u);
        }
        if let Some(p) = &pw {
            redis_info = redis_info.set_password(p);
        }
        Ok(ClusterTarget {
            client: build(Some(super::super::REPLY_TIMEOUT)).map_err(invalid)?,
            blocking: build(None).map_err(invalid)?,
            seeds,
            nodes: NodeClients {
                redis: redis_info,
                tls,
                certs,
            },
        })
    }

    fn sentinel_resolver(&self, s: &SentinelOptions) -> Result<SentinelResolver> {
        let (user, pw, db) = self.data_credentials();
        let tls = self.tls_mode();
        if tls.is_some() {
            install_crypto_provider();
        }
        let sentinels = s
            .addrs
            .iter()
            .map(|a| {
                // redis-rs refuses a TLS mode for plain TCP sentinel
                // addresses: TLS ones are TcpTls (the mode then sets
                // `insecure`).
                host_port(a).map(|(host, port)| match tls {
                    None => ConnectionAddr::Tcp(host, port),
                    Some(mode) => ConnectionAddr::TcpTls {
                        host,
                        port,
                        insecure: mode == TlsMode::Insecure,
                        tls_params: None,
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let mut b =
            SentinelClientBuilder::new(sentinels.clone(), &s.master, SentinelServerType::Master)
                .map_err(|e| Error::InvalidArgument(format!("Sentinel options: {e}")))?
                .set_client_to_redis_db(db);
        if let Some(u) = &user {
            b = b.set_client_to_redis_username(u);
        }
        if let Some(p) = &pw {
            b = b.set_client_to_redis_password(p);
        }
        if let Some(u) = &s.username {
            b = b.set_client_to_sentinel_username(u);
        }
        if let Some(p) = &s.password {
            b = b.set_client_to_sentinel_password(p);
        }
        if let Some(t) = tls {
            b = b
                .set_client_to_redis_tls_mode(t)
                .set_client_to_sentinel_tls_mode(t);
        }
        if let Some(c) = self.certificates() {
            b = b
                .set_client_to_redis_certificates(c.clone())
                .set_client_to_sentinel_certificates(c);
        }
        let client = b
            .build()
            .map_err(|e| Error::InvalidArgument(format!("Sentinel options: {e}")))?;
        let sentinel_clients = sentinels
            .into_iter()
            .map(|addr| self.sentinel_client(addr, s, tls))
            .collect::<Result<Vec<_>>>()?;
        let mut redis_info = redis::RedisConnectionInfo::default().set_db(db);
        if let Some(u) = &user {
            redis_info = redis_info.set_username(u);
        }
        if let Some(p) = &pw {
            redis_info = redis_info.set_password(p);
        }
        let masters = NodeClients {
            redis: redis_info,
            tls,
            certs: self.certificates(),
        };
        Ok(SentinelResolver::new(
            client,
            s.clone(),
            sentinel_clients,
            masters,
        ))
    }

    /// A client of one sentinel itself (the `+switch-master` watcher's),
    /// with the sentinels' credentials and TLS.
    fn sentinel_client(
        &self,
        addr: ConnectionAddr,
        s: &SentinelOptions,
        tls: Option<TlsMode>,
    ) -> Result<redis::Client> {
        let addr = match (addr, tls) {
            (ConnectionAddr::Tcp(host, port), Some(mode)) => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: mode == TlsMode::Insecure,
                tls_params: None,
            },
            (addr, _) => addr,
        };
        let mut settings = redis::RedisConnectionInfo::default();
        if let Some(u) = &s.username {
            settings = settings.set_username(u);
        }
        if let Some(p) = &s.password {
            settings = settings.set_password(p);
        }
        let invalid =
            |e: redis::RedisError| Error::InvalidArgument(format!("Sentinel options: {e}"));
        let info = addr
            .into_connection_info()
            .map_err(invalid)?
            .set_redis_settings(settings);
        match self.certificates() {
            Some(c) => redis::Client::build_with_tls(info, c).map_err(invalid),
            None => redis::Client::open(info).map_err(invalid),
        }
    }
}

/// Credentials, database and TLS of the servers Sentinel elects: a client
/// of the master at a given address.
pub(crate) struct NodeClients {
    redis: redis::RedisConnectionInfo,
    tls: Option<TlsMode>,
    certs: Option<TlsCertificates>,
}

impl NodeClients {
    /// A client of the server at `host:port`.
    pub fn client(&self, host: &str, port: u16) -> Result<redis::Client> {
        let addr = match self.tls {
            None => ConnectionAddr::Tcp(host.to_string(), port),
            Some(mode) => ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: mode == TlsMode::Insecure,
                tls_params: None,
            },
        };
        let info = addr
            .into_connection_info()?
            .set_redis_settings(self.redis.clone());
        Ok(match &self.certs {
            Some(c) => redis::Client::build_with_tls(info, c.clone())?,
            None => redis::Client::open(info)?,
        })
    }
}

impl ClusterTarget {
    /// A plain client of the node at `host:port`, with the cluster's
    /// credentials and TLS.
    pub fn node_client(&self, host: &str, port: u16) -> Result<redis::Client> {
        self.nodes.client(host, port)
    }
}

impl Target {
    /// The kind of deployment.
    pub fn topology(&self) -> Topology {
        match self {
            Target::Single(_) => Topology::Standalone,
            Target::Cluster(_) => Topology::Cluster,
            Target::Sentinel(_) => Topology::Sentinel,
        }
    }

    /// Opens the shared, reconnecting connection the broker multiplexes.
    pub async fn shared(&self) -> Result<Conn> {
        match self {
            Target::Single(client) => Ok(Conn::Single(
                redis::aio::ConnectionManager::new_with_config(
                    client.clone(),
                    super::super::manager_config(),
                )
                .await?,
            )),
            Target::Cluster(c) => Ok(Conn::Cluster(c.client.get_async_connection().await?)),
            Target::Sentinel(r) => Ok(Conn::Sentinel(r.connect().await?)),
        }
    }

    /// A connection of its own whose replies wait without a timeout (a
    /// blocking command would stall the shared one).
    pub async fn dedicated(&self) -> Result<Conn> {
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        match self {
            Target::Single(client) => Ok(Conn::Plain(
                client
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?,
            )),
            Target::Cluster(c) => Ok(Conn::Cluster(c.blocking.get_async_connection().await?)),
            Target::Sentinel(r) => Ok(Conn::Plain(
                r.master_client()
                    .await?
                    .get_multiplexed_async_connection_with_config(&config)
                    .await?,
            )),
        }
    }

    /// Plain clients of one server each, to try in order, for what needs
    /// a server's own connection (pub/sub: a cluster delivers `PUBLISH` to
    /// every node's subscribers).
    pub async fn server_clients(&self) -> Result<Vec<redis::Client>> {
        match self {
            Target::Single(client) => Ok(vec![client.clone()]),
            Target::Cluster(c) => c.seeds.iter().map(|(h, p)| c.node_client(h, *p)).collect(),
            Target::Sentinel(r) => Ok(vec![r.master_client().await?]),
        }
    }

    /// The client of the one server holding every key, for key tracking;
    /// `None` on a cluster (tracking is per node; COMPATIBILITY.md C4).
    pub async fn tracking_client(&self) -> Result<Option<redis::Client>> {
        match self {
            Target::Single(client) => Ok(Some(client.clone())),
            Target::Cluster(_) => Ok(None),
            Target::Sentinel(r) => Ok(Some(r.master_client().await?)),
        }
    }

    /// How many changes of master the broker has seen behind Sentinel
    /// (always 0 elsewhere). A connection of its own opened at another
    /// generation talks to a former master: its owner reopens it.
    pub fn generation(&self) -> u64 {
        match self {
            Target::Sentinel(r) => r.generation(),
            _ => 0,
        }
    }

    /// Wakes at each change of master behind Sentinel; `None` elsewhere.
    pub fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            Target::Sentinel(r) => Some(r.changes()),
            _ => None,
        }
    }

    /// Starts what the deployment needs running beside the connections:
    /// behind Sentinel, the `+switch-master` watcher (stopped when this
    /// target is dropped). Needs a Tokio runtime.
    pub fn start_background(&self) {
        if let Target::Sentinel(r) = self {
            r.start_watcher();
        }
    }

    /// Whether every server is on this host (see `is_local_addr`); the
    /// Sentinel master as last resolved.
    pub fn is_local(&self) -> bool {
        match self {
            Target::Single(client) => super::is_local_addr(client.get_connection_info().addr()),
            Target::Cluster(c) => c
                .seeds
                .iter()
                .all(|(h, p)| super::is_local_addr(&ConnectionAddr::Tcp(h.clone(), *p))),
            Target::Sentinel(r) => r
                .current_master()
                .is_some_and(|(h, p)| super::is_local_addr(&ConnectionAddr::Tcp(h, p))),
        }
    }

    /// `host:port` of the server (the first seed of a cluster, the current
    /// master behind Sentinel), for the Redis page.
    pub fn address(&self) -> String {
        match self {
            Target::Single(client) => client.get_connection_info().addr().to_string(),
            Target::Cluster(c) => c
                .seeds
                .first()
                .map(|(h, p)| format!("{h}:{p}"))
                .unwrap_or_default(),
            Target::Sentinel(r) => r
                .current_master()
                .map(|(h, p)| format!("{h}:{p}"))
                .unwrap_or_default(),
        }
    }
}

#[cfg(test)]
#[path = "target_tests.rs"]
mod tests;
