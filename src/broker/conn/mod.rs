//! How to reach Redis: [`ConnectOptions`] (a URL plus the parts asynqmon
//! takes as separate flags: username, password, database, TLS material,
//! cluster nodes, sentinels), used by
//! [`Broker::connect_with`](super::Broker::connect_with).
//!
//! Files: this one (the options, and the standalone client), `urls.rs`
//! (the `redis-sentinel://` and `redis-cluster://` URL forms), `target.rs`
//! (which deployment the options name: standalone, Cluster or Sentinel, and
//! how to open connections to it), `link.rs` (the broker's shared
//! connection, one type for the three), `sentinel.rs` (following the
//! master across failovers), `sentinel_watch.rs` (the `+switch-master`
//! watcher).
//!
//! TLS is rustls with the system trust store (`/etc/ssl/certs`, as Go's
//! `crypto/tls` uses), or only the CA bundle given in
//! [`ConnectOptions::ca_cert_pem`]; the crypto provider is ring.

use redis::{ClientTlsConfig, ConnectionAddr, IntoConnectionInfo, TlsCertificates};

use crate::error::{Error, Result};

mod link;
mod sentinel;
mod sentinel_watch;
mod target;
mod urls;

pub(crate) use link::Conn;
pub use sentinel::{Failover, SentinelStatus};
pub(crate) use target::Target;
pub use target::Topology;

/// Where and how to connect to Redis.
///
/// [`ConnectOptions::new`] takes a URL (`redis://[user[:password]@]host[:port][/db]`,
/// `rediss://` for TLS, `redis+unix:///path?db=N` for a socket); the other
/// fields override or add to what the URL says. `Debug` hides the password
/// and key material.
#[derive(Clone, Default)]
pub struct ConnectOptions {
    /// The Redis URL. Default (empty): `redis://127.0.0.1:6379/0`.
    pub url: String,
    /// ACL user name; overrides the URL's.
    pub username: Option<String>,
    /// Password; overrides the URL's.
    pub password: Option<String>,
    /// Database index; overrides the URL's.
    pub db: Option<i64>,
    /// Use TLS even though the URL says `redis://` (asynqmon `--redis-tls`).
    pub tls: bool,
    /// Skip certificate verification (asynqmon `--redis-insecure-tls`,
    /// Go `InsecureSkipVerify`). Implies TLS.
    pub insecure: bool,
    /// PEM CA certificates to trust instead of the system store. Implies TLS.
    pub ca_cert_pem: Option<Vec<u8>>,
    /// PEM client certificate chain and private key for mutual TLS. Implies TLS.
    pub client_cert_pem: Option<(Vec<u8>, Vec<u8>)>,
    /// Seed nodes of a Redis Cluster (`host:port`; asynqmon
    /// `--redis-cluster-nodes`, Go `RedisClusterClientOpt.Addrs`). Non-empty
    /// means a cluster: the URL's host is then not used, its credentials
    /// and TLS are. A `redis-cluster://` URL sets these too.
    pub cluster_nodes: Vec<String>,
    /// Sentinels that elect the master (Go `RedisFailoverClientOpt`). A
    /// `redis-sentinel://` URL sets this too; fields given here win.
    pub sentinel: Option<SentinelOptions>,
}

/// Where the sentinels are and which master they monitor (Go
/// `RedisFailoverClientOpt`: `SentinelAddrs`, `MasterName`,
/// `SentinelPassword`). The master's own credentials, database and TLS are
/// those of [`ConnectOptions`].
#[derive(Clone, Default, PartialEq, Eq)]
pub struct SentinelOptions {
    /// Sentinel addresses, `host:port` (asynqdeck `--redis-sentinel-addrs`).
    pub addrs: Vec<String>,
    /// The monitored master's name (`--redis-sentinel-master`).
    pub master: String,
    /// Password of the sentinels themselves (`--redis-sentinel-password`;
    /// the password of a `redis-sentinel://` URL, as asynq reads it).
    pub password: Option<String>,
    /// ACL user of the sentinels (the user of a `redis-sentinel://` URL).
    pub username: Option<String>,
}

impl std::fmt::Debug for SentinelOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SentinelOptions")
            .field("addrs", &self.addrs)
            .field("master", &self.master)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("address", &self.display_address())
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("db", &self.db)
            .field("tls", &self.uses_tls())
            .field("insecure", &self.insecure)
            .field("ca_cert_pem", &self.ca_cert_pem.as_ref().map(|_| "<set>"))
            .field(
                "client_cert_pem",
                &self.client_cert_pem.as_ref().map(|_| "<redacted>"),
            )
            .field("cluster_nodes", &self.cluster_nodes)
            .field("sentinel", &self.sentinel)
            .finish()
    }
}

/// Whether `addr` is on this host: a Unix socket, `localhost`, or a
/// loopback address (`127.0.0.0/8`, `::1`).
pub(crate) fn is_local_addr(addr: &ConnectionAddr) -> bool {
    match addr {
        ConnectionAddr::Tcp(host, _) | ConnectionAddr::TcpTls { host, .. } => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.eq_ignore_ascii_case("localhost")
                || host
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
        ConnectionAddr::Unix(_) => true,
        _ => false,
    }
}

/// The URL used when none is given.
pub const DEFAULT_REDIS_URL: &str = "redis://127.0.0.1:6379/0";

impl ConnectOptions {
    /// Options for `url`, nothing else set.
    pub fn new(url: impl Into<String>) -> Self {
        ConnectOptions {
            url: url.into(),
            ..ConnectOptions::default()
        }
    }

    /// Options for `host:port` (asynqmon `--redis-addr`), database `db`.
    /// Errors with [`Error::InvalidArgument`] when `addr` is not `host:port`
    /// (an IPv6 host goes in brackets: `[::1]:6379`).
    pub fn from_addr(addr: &str, db: i64) -> Result<Self> {
        let bad = addr.is_empty()
            || addr.contains(['/', '@', '?', '#'])
            || addr.chars().any(char::is_whitespace)
            || addr.contains("://");
        if bad {
            return Err(Error::InvalidArgument(format!(
                "redis address {addr:?} is not host:port"
            )));
        }
        let mut opts = ConnectOptions::new(format!("redis://{addr}"));
        opts.db = Some(db);
        Ok(opts)
    }

    fn url_or_default(&self) -> &str {
        if self.url.is_empty() {
            DEFAULT_REDIS_URL
        } else {
            &self.url
        }
    }

    /// Whether the connection will use TLS: a `rediss://` URL, or any of
    /// `tls`, `insecure`, a CA or a client certificate set.
    pub fn uses_tls(&self) -> bool {
        let url = self.url_or_default();
        url.starts_with("rediss://")
            || url.starts_with("valkeys://")
            || url.starts_with("rediss-cluster://")
            || self.tls
            || self.insecure
            || self.ca_cert_pem.is_some()
            || self.client_cert_pem.is_some()
    }

    /// `host:port/db` (or `unix:path/db`) for messages, without credentials;
    /// `cluster h1:p1,h2:p2` for a cluster, `sentinel h1:p1,... master NAME`
    /// behind Sentinel; the URL with its credentials cut when it does not
    /// parse.
    pub fn display_address(&self) -> String {
        match self.topology() {
            Ok((Topology::Cluster, _)) => {
                return format!(
                    "cluster {}",
                    self.cluster_seeds().unwrap_or_default().join(",")
                );
            }
            Ok((Topology::Sentinel, Some(s))) => {
                return format!("sentinel {} master {}", s.addrs.join(","), s.master);
            }
            _ => {}
        }
        match self.url_or_default().into_connection_info() {
            Ok(info) => {
                let db = self.db.unwrap_or(info.redis_settings().db());
                let addr = match info.addr() {
                    ConnectionAddr::Tcp(h, p)
                    | ConnectionAddr::TcpTls {
                        host: h, port: p, ..
                    } => {
                        format!("{h}:{p}")
                    }
                    ConnectionAddr::Unix(path) => format!("unix:{}", path.display()),
                    other => other.to_string(),
                };
                format!("{addr}/{db}")
            }
            Err(_) => {
                let url = self.url_or_default();
                match (url.find("://"), url.rfind('@')) {
                    (Some(s), Some(at)) if at > s => format!("{}{}", &url[..s + 3], &url[at + 1..]),
                    _ => url.to_string(),
                }
            }
        }
    }

    /// The redis-rs client these options describe. Errors with
    /// [`Error::InvalidArgument`] for a URL redis-rs does not accept, TLS
    /// options on a socket address, or PEM that does not parse.
    pub(crate) fn client(&self) -> Result<redis::Client> {
        let url = self.url_or_default();
        if url.starts_with("redis-sentinel://") || urls::is_cluster_url(url) {
            return Err(Error::InvalidArgument(format!(
                "{} is not a single Redis server",
                self.display_address()
            )));
        }
        let invalid = |e: redis::RedisError| {
            Error::InvalidArgument(format!(
                "invalid redis URL {:?}: {e}",
                self.display_address()
            ))
        };
        let mut info = url.into_connection_info().map_err(invalid)?;
        let mut settings = info.redis_settings().clone();
        if let Some(user) = &self.username {
            settings = settings.set_username(user);
        }
        if let Some(pw) = &self.password {
            settings = settings.set_password(pw);
        }
        if let Some(db) = self.db {
            settings = settings.set_db(db);
        }
        info = info.set_redis_settings(settings);
        if !self.uses_tls() {
            return redis::Client::open(info).map_err(invalid);
        }
        install_crypto_provider();
        let addr = match info.addr().clone() {
            ConnectionAddr::Tcp(host, port) => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: self.insecure,
                tls_params: None,
            },
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            } => ConnectionAddr::TcpTls {
                host,
                port,
                insecure: insecure || self.insecure,
                tls_params,
            },
            _ => {
                return Err(Error::InvalidArgument(
                    "TLS options need a TCP address, not a unix socket".to_string(),
                ));
            }
        };
        info = info.set_addr(addr);
        if self.ca_cert_pem.is_none() && self.client_cert_pem.is_none() {
            return redis::Client::open(info).map_err(invalid);
        }
        let certs = TlsCertificates {
            client_tls: self
                .client_cert_pem
                .as_ref()
                .map(|(cert, key)| ClientTlsConfig {
                    client_cert: cert.clone(),
                    client_key: key.clone(),
                }),
            root_cert: self.ca_cert_pem.clone(),
        };
        redis::Client::build_with_tls(info, certs)
            .map_err(|e| Error::InvalidArgument(format!("TLS certificates: {e}")))
    }
}

/// Makes ring the process-wide rustls crypto provider unless one is set.
pub(crate) fn install_crypto_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread installing one is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fetch loop spins for replies only when Redis is on this host
    /// (`Config::fetch_spin`): loopback names and addresses, Unix sockets.
    #[test]
    fn local_addresses() {
        let local = |url: &str| {
            is_local_addr(
                ConnectOptions::new(url)
                    .client()
                    .unwrap()
                    .get_connection_info()
                    .addr(),
            )
        };
        for url in [
            "redis://127.0.0.1:6379",
            "redis://127.3.2.1:1/2",
            "redis://localhost",
            "redis://LOCALHOST:7000",
            "redis://[::1]:6379",
            "rediss://127.0.0.1:6380",
            "redis+unix:///tmp/redis.sock",
        ] {
            assert!(local(url), "{url}");
        }
        for url in [
            "redis://10.0.0.5:6379",
            "redis://redis.internal:6379",
            "redis://[2001:db8::1]:6379",
            "rediss://cache.example.com",
        ] {
            assert!(!local(url), "{url}");
        }
    }

    /// Separate parts override the URL; TLS follows rediss:// or any TLS option.
    #[test]
    fn parts_and_tls() {
        let o = ConnectOptions::from_addr("10.0.0.5:6380", 3).unwrap();
        assert_eq!(o.display_address(), "10.0.0.5:6380/3");
        assert!(!o.uses_tls());
        let c = o.client().unwrap();
        assert_eq!(c.get_connection_info().redis_settings().db(), 3);

        let mut o = ConnectOptions::new("redis://u:secret@h:1/2");
        o.password = Some("other".into());
        let c = o.client().unwrap();
        let s = c.get_connection_info().redis_settings();
        assert_eq!(
            (s.username(), s.password(), s.db()),
            (Some("u"), Some("other"), 2)
        );
        assert_eq!(o.display_address(), "h:1/2");
        assert!(!format!("{o:?}").contains("other"));

        let mut o = ConnectOptions::new("redis://h:1/0");
        o.tls = true;
        let c = o.client().unwrap();
        assert!(matches!(
            c.get_connection_info().addr(),
            ConnectionAddr::TcpTls {
                insecure: false,
                ..
            }
        ));
        assert!(ConnectOptions::new("rediss://h:1").uses_tls());

        assert!(ConnectOptions::from_addr("redis://h:1", 0).is_err());
        assert!(ConnectOptions::from_addr("a@b:1", 0).is_err());
        let err = ConnectOptions::new("redis-sentinel://h:1?master=m")
            .client()
            .unwrap_err();
        assert!(
            err.to_string().contains("not a single Redis server"),
            "{err}"
        );
        assert_eq!(
            ConnectOptions::new("redis-sentinel://:pw@h:1,g:2/3?master=m").display_address(),
            "sentinel h:1,g:2 master m"
        );
        assert_eq!(
            ConnectOptions::new("redis-cluster://a:1,b:2").display_address(),
            "cluster a:1,b:2"
        );
        assert_eq!(
            ConnectOptions::new("").display_address(),
            "127.0.0.1:6379/0"
        );
    }
}
