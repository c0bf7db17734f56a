//! The flags of `asynqdeck serve` ([`ServeArgs`]) and
//! [`ServeArgs::resolve`], which checks and combines them into an
//! [`app::ServeConfig`](crate::app::ServeConfig) without touching the network.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use clap::builder::BoolishValueParser;

use super::DEFAULT_LISTEN;
use super::values::{normalize_root_path, parse_basic_auth, parse_duration, parse_host_name};

/// `--trusted-proxies`: see [`web::TrustedProxies`].
fn parse_trusted_proxies(s: &str) -> Result<web::TrustedProxies, String> {
    s.parse()
}
use crate::app::ServeConfig;
use crate::broker::ConnectOptions;
use crate::server::MaintenanceConfig;
use crate::web::{self, WebConfig};

/// Flags of `asynqdeck serve`.
#[derive(Clone, Debug, Args)]
pub struct ServeArgs {
    /// Redis URL: redis://user:password@host:port/db (all but the host
    /// optional), rediss:// for TLS [default: redis://127.0.0.1:6379/0].
    /// Beats --redis-addr, --redis-db, --redis-password and --redis-username.
    #[arg(long, env = "REDIS_URL", value_name = "URL", hide_env_values = true)]
    pub redis_url: Option<String>,

    /// Redis host:port (asynqmon) [default: 127.0.0.1:6379].
    #[arg(long, env = "REDIS_ADDR", value_name = "HOST:PORT")]
    pub redis_addr: Option<String>,

    /// Redis database number (asynqmon) [default: 0].
    #[arg(long, env = "REDIS_DB", value_name = "N")]
    pub redis_db: Option<i64>,

    /// Redis ACL user name.
    #[arg(long, env = "REDIS_USERNAME", value_name = "USER")]
    pub redis_username: Option<String>,

    /// Redis password (asynqmon).
    #[arg(
        long,
        env = "REDIS_PASSWORD",
        value_name = "PASSWORD",
        hide_env_values = true
    )]
    pub redis_password: Option<String>,

    /// Use TLS; the value is the server name asynqmon validates against
    /// (asynqdeck validates the certificate against the host being
    /// connected to and warns when they differ).
    #[arg(long, env = "REDIS_TLS", value_name = "SERVER_NAME")]
    pub redis_tls: Option<String>,

    /// PEM file of CA certificates to trust for Redis TLS instead of the
    /// system store (enables TLS). Alias: --redis-ca-cert (asynqmon).
    #[arg(
        long,
        env = "REDIS_TLS_CA",
        value_name = "FILE",
        visible_alias = "redis-ca-cert"
    )]
    pub redis_tls_ca: Option<PathBuf>,

    /// asynqmon's variable for --redis-tls-ca.
    #[arg(long = "redis-ca-cert-env", env = "REDIS_CA_CERT", hide = true)]
    pub redis_ca_cert_env: Option<PathBuf>,

    /// PEM client certificate for mutual TLS (asynqmon; needs --redis-client-key).
    #[arg(long, env = "REDIS_CLIENT_CERT", value_name = "FILE")]
    pub redis_client_cert: Option<PathBuf>,

    /// PEM private key of --redis-client-cert (asynqmon).
    #[arg(long, env = "REDIS_CLIENT_KEY", value_name = "FILE")]
    pub redis_client_key: Option<PathBuf>,

    /// Use TLS without verifying the server certificate (asynqmon).
    #[arg(long, env = "REDIS_INSECURE_TLS", value_name = "BOOL", hide_possible_values = true, value_parser = BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub redis_insecure_tls: bool,

    /// Redis Cluster seed nodes (asynqmon): comma-separated host:port. Beats
    /// --redis-url and --redis-addr; --redis-password, --redis-username and
    /// the TLS flags apply to every node.
    #[arg(long, env = "REDIS_CLUSTER_NODES", value_name = "HOST:PORT,...")]
    pub redis_cluster_nodes: Option<String>,

    /// Sentinel addresses, comma-separated host:port (Go
    /// RedisFailoverClientOpt.SentinelAddrs); needs --redis-sentinel-master.
    /// The master's credentials and database are --redis-password,
    /// --redis-username and --redis-db.
    #[arg(long, env = "REDIS_SENTINEL_ADDRS", value_name = "HOST:PORT,...")]
    pub redis_sentinel_addrs: Option<String>,

    /// Name of the master the sentinels monitor (Go MasterName).
    #[arg(long, env = "REDIS_SENTINEL_MASTER", value_name = "NAME")]
    pub redis_sentinel_master: Option<String>,

    /// Password of the sentinels themselves (Go SentinelPassword).
    #[arg(long, env = "REDIS_SENTINEL_PASSWORD", value_name = "PASSWORD")]
    pub redis_sentinel_password: Option<String>,

    /// Address to listen on [default: 127.0.0.1:8080]. Beats --port.
    #[arg(long, env = "ASYNQDECK_LISTEN", value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,

    /// Listen on 0.0.0.0:PORT, every interface, as asynqmon does.
    #[arg(long, env = "PORT", value_name = "PORT")]
    pub port: Option<u16>,

    /// Path prefix to serve under behind a reverse proxy, e.g. /asynq.
    #[arg(
        long,
        env = "ASYNQDECK_ROOT_PATH",
        value_name = "PATH",
        default_value = ""
    )]
    pub root_path: String,

    /// Host names (comma list, no port) the dashboard answers besides
    /// loopback names; any other Host gets 421 (DNS rebinding protection).
    /// Without it, a loopback listener answers only loopback names and any
    /// other listener answers every Host. `*` allows every name.
    #[arg(
        long,
        env = "ASYNQDECK_ALLOWED_HOSTS",
        value_name = "NAME,...",
        value_delimiter = ',',
        value_parser = parse_host_name
    )]
    pub allowed_hosts: Vec<String>,

    /// Hide action buttons and refuse every change with 403.
    #[arg(long, env = "READ_ONLY", value_name = "BOOL", hide_possible_values = true, value_parser = BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub read_only: bool,

    /// How often pages refresh and queue statistics are recomputed, e.g.
    /// 5s, 500ms, 2m, 1m30s or plain seconds.
    #[arg(long, env = "ASYNQDECK_POLL_INTERVAL", value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub poll_interval: Duration,

    /// Redis budget of the dashboard's statistics: most commands per second
    /// they send (snapshots, growth samples, memory estimates; a script
    /// call counts one). Over budget, refreshes wait and the numbers show
    /// their age. 0 = unlimited.
    #[arg(
        long,
        env = "ASYNQDECK_REDIS_BUDGET_COMMANDS",
        value_name = "N",
        default_value_t = 2000
    )]
    pub redis_budget_commands: u64,

    /// Redis budget of the dashboard's statistics: most Redis milliseconds
    /// per second, measured as the round-trip time of their calls (an
    /// upper bound of the Redis time). 0 = unlimited.
    #[arg(
        long,
        env = "ASYNQDECK_REDIS_BUDGET_MS",
        value_name = "N",
        default_value_t = 20
    )]
    pub redis_budget_ms: u64,

    /// Require HTTP basic auth on every route, as user:password.
    #[arg(
        long,
        env = "ASYNQDECK_BASIC_AUTH",
        value_name = "USER:PASSWORD",
        hide_env_values = true,
        value_parser = parse_basic_auth
    )]
    pub basic_auth: Option<(String, String)>,

    /// A request header that names the user, set by an authenticating
    /// reverse proxy (e.g. X-Forwarded-User): the actor in the audit log.
    /// Believed only from --trusted-proxies; from any other peer a request
    /// carrying it is refused (403).
    #[arg(
        long,
        env = "ASYNQDECK_AUTH_HEADER",
        value_name = "NAME",
        requires = "trusted_proxies"
    )]
    pub auth_header: Option<String>,

    /// Peers whose --auth-header is believed: addresses and CIDR prefixes,
    /// comma-separated (e.g. 127.0.0.1,10.0.0.0/8).
    #[arg(long, env = "ASYNQDECK_TRUSTED_PROXIES", value_name = "IP[/LEN],...", value_parser = parse_trusted_proxies)]
    pub trusted_proxies: Option<web::TrustedProxies>,

    /// Characters of payload shown in task lists.
    #[arg(
        long,
        env = "MAX_PAYLOAD_LENGTH",
        value_name = "N",
        default_value_t = 200
    )]
    pub max_payload_length: usize,

    /// Characters of result shown in task lists.
    #[arg(
        long,
        env = "MAX_RESULT_LENGTH",
        value_name = "N",
        default_value_t = 200
    )]
    pub max_result_length: usize,

    /// Do not run the maintenance engine (forwarder, recoverer, janitor,
    /// heartbeat, outage sampler) in this process.
    #[arg(long, env = "ASYNQDECK_NO_ENGINE", value_name = "BOOL", hide_possible_values = true, value_parser = BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub no_engine: bool,

    /// Accepted for asynqmon compatibility: /metrics is always served.
    #[arg(long, env = "ENABLE_METRICS_EXPORTER", value_name = "BOOL", hide_possible_values = true, value_parser = BoolishValueParser::new(), default_value_t = false, num_args = 0..=1, default_missing_value = "true")]
    pub enable_metrics_exporter: bool,

    /// Accepted for asynqmon compatibility and ignored (with a warning):
    /// asynqdeck has no page that queries a Prometheus server.
    #[arg(long, env = "PROMETHEUS_ADDR", value_name = "URL")]
    pub prometheus_addr: Option<String>,

    /// YAML schedule file of periodic tasks (`configs:` list of cronspec,
    /// task_type, payload, options), enqueued by a scheduler in this
    /// process; re-read when it changes and on SIGHUP.
    #[arg(long, env = "ASYNQDECK_SCHEDULE", value_name = "FILE")]
    pub schedule: Option<std::path::PathBuf>,

    /// Directory where the embedded engine appends newly archived tasks as
    /// gzip NDJSON files, one per queue and UTC hour (S31).
    #[arg(long, env = "ASYNQDECK_ARCHIVE_EXPORT_DIR", value_name = "DIR")]
    pub archive_export_dir: Option<std::path::PathBuf>,

    /// Webhook URL to post Slack-compatible JSON alerts to (repeatable;
    /// the environment variable takes a comma-separated list).
    #[arg(
        long = "alert-webhook",
        env = "ASYNQDECK_ALERT_WEBHOOKS",
        value_name = "URL",
        value_delimiter = ','
    )]
    pub alert_webhook: Vec<String>,

    /// Least time between two "firing" alerts of one queue and signal.
    #[arg(long, env = "ASYNQDECK_ALERT_COOLDOWN", value_name = "DURATION", default_value = "15m", value_parser = parse_duration)]
    pub alert_cooldown: Duration,

    /// The dashboard's URL as users reach it, for the links in alerts
    /// (default: `http://<listen address><root path>`).
    #[arg(long, env = "ASYNQDECK_DASHBOARD_URL", value_name = "URL")]
    pub dashboard_url: Option<String>,

    /// Forwarder interval of the embedded engine (tests).
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub forwarder_interval: Option<Duration>,

    /// Print the resolved settings (secrets redacted) and exit.
    #[arg(long, hide = true)]
    pub print_config: bool,
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl ServeArgs {
    /// Checks the flags and combines them: url beats addr/db/password (as
    /// asynqmon), `--listen` beats `--port`, TLS is on for `rediss://`,
    /// `--redis-tls`, `--redis-insecure-tls` or a CA/client certificate.
    ///
    /// Errors (a one-line reason; the binary exits 2): both cluster nodes
    /// and sentinels, sentinels without a master name, a malformed
    /// `--redis-addr` or root path, a client certificate without its key,
    /// a poll interval of zero.
    pub fn resolve(&self) -> Result<ServeConfig, String> {
        let mut warnings = Vec::new();
        let cluster_nodes: Vec<String> = non_empty(&self.redis_cluster_nodes)
            .map(|n| {
                n.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        let sentinel_addrs: Vec<String> = non_empty(&self.redis_sentinel_addrs)
            .map(|n| {
                n.split(',')
                    .map(str::trim)
                    .filter(|a| !a.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        if !cluster_nodes.is_empty() && !sentinel_addrs.is_empty() {
            return Err(
                "give --redis-cluster-nodes or --redis-sentinel-addrs, not both".to_string(),
            );
        }
        if !sentinel_addrs.is_empty() && non_empty(&self.redis_sentinel_master).is_none() {
            return Err("--redis-sentinel-addrs needs --redis-sentinel-master".to_string());
        }
        if !cluster_nodes.is_empty() || !sentinel_addrs.is_empty() {
            let mut opts = ConnectOptions {
                password: self.redis_password.clone().filter(|p| !p.is_empty()),
                username: non_empty(&self.redis_username).map(str::to_string),
                ..ConnectOptions::default()
            };
            if !cluster_nodes.is_empty() {
                if self.redis_url.is_some() || self.redis_addr.is_some() {
                    warnings.push(
                        "--redis-url/--redis-addr ignored: --redis-cluster-nodes is set and takes precedence"
                            .to_string(),
                    );
                }
                opts.cluster_nodes = cluster_nodes;
            } else {
                let db = self.redis_db.unwrap_or(0);
                if db < 0 {
                    return Err(format!("--redis-db must be 0 or more, got {db}"));
                }
                opts.db = Some(db);
                opts.sentinel = Some(crate::broker::SentinelOptions {
                    addrs: sentinel_addrs,
                    master: non_empty(&self.redis_sentinel_master)
                        .unwrap_or_default()
                        .to_string(),
                    password: self
                        .redis_sentinel_password
                        .clone()
                        .filter(|p| !p.is_empty()),
                    username: None,
                });
            }
            return self.finish(opts, warnings);
        }
        let url = non_empty(&self.redis_url);
        let redis = match url {
            Some(url) => {
                let ignored: Vec<&str> = [
                    ("--redis-addr", self.redis_addr.is_some()),
                    ("--redis-db", self.redis_db.is_some()),
                    ("--redis-password", self.redis_password.is_some()),
                    ("--redis-username", self.redis_username.is_some()),
                ]
                .into_iter()
                .filter(|(_, set)| *set)
                .map(|(name, _)| name)
                .collect();
                if !ignored.is_empty() {
                    warnings.push(format!(
                        "{} ignored: --redis-url is set and takes precedence",
                        ignored.join(", ")
                    ));
                }
                ConnectOptions::new(url)
            }
            None => {
                let addr = non_empty(&self.redis_addr).unwrap_or("127.0.0.1:6379");
                let db = self.redis_db.unwrap_or(0);
                if db < 0 {
                    return Err(format!("--redis-db must be 0 or more, got {db}"));
                }
                let mut opts = ConnectOptions::from_addr(addr, db).map_err(|e| match e {
                    crate::Error::InvalidArgument(m) => format!("--redis-addr: {m}"),
                    other => other.to_string(),
                })?;
                opts.password = self.redis_password.clone().filter(|p| !p.is_empty());
                opts.username = non_empty(&self.redis_username).map(str::to_string);
                opts
            }
        };
        self.finish(redis, warnings)
    }

    /// The rest of [`ServeArgs::resolve`] once the Redis address is known:
    /// TLS, listener, root path, engine.
    fn finish(
        &self,
        mut redis: ConnectOptions,
        mut warnings: Vec<String>,
    ) -> Result<ServeConfig, String> {
        // Options naming no one deployment (a `redis-sentinel://` URL
        // without `master=`, say) are refused here, not at connect.
        if let Err(e) = redis.topology() {
            return Err(match e {
                crate::Error::InvalidArgument(m) => m,
                other => other.to_string(),
            });
        }
        if let Some(name) = non_empty(&self.redis_tls) {
            redis.tls = true;
            let host = redis.display_address();
            let host = host.rsplit_once(':').map_or(host.as_str(), |(h, _)| h);
            if !name.eq_ignore_ascii_case(host.trim_start_matches('[').trim_end_matches(']')) {
                warnings.push(format!(
                    "--redis-tls {name:?}: the certificate is checked against the host connected to ({host}), not this name"
                ));
            }
        }
        redis.insecure = self.redis_insecure_tls;
        let redis_tls_ca = self
            .redis_tls_ca
            .clone()
            .or_else(|| self.redis_ca_cert_env.clone());
        let redis_client_cert = match (&self.redis_client_cert, &self.redis_client_key) {
            (Some(c), Some(k)) => Some((c.clone(), k.clone())),
            (None, None) => None,
            (Some(_), None) => return Err("--redis-client-cert needs --redis-client-key".into()),
            (None, Some(_)) => return Err("--redis-client-key needs --redis-client-cert".into()),
        };

        let listen = match (self.listen, self.port) {
            (Some(l), Some(p)) => {
                warnings.push(format!("--port {p} ignored: --listen {l} takes precedence"));
                l
            }
            (Some(l), None) => l,
            (None, Some(p)) => SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), p),
            (None, None) => DEFAULT_LISTEN,
        };
        let root_path = normalize_root_path(&self.root_path)?;
        if self.poll_interval.is_zero() {
            return Err("--poll-interval must be more than zero".into());
        }
        if let Some(p) = non_empty(&self.prometheus_addr) {
            warnings.push(format!(
                "--prometheus-addr {p:?} ignored: asynqdeck has no page that queries Prometheus (its own /metrics is always served)"
            ));
        }
        if let Some(d) = self.forwarder_interval
            && d.is_zero()
        {
            return Err("--forwarder-interval must be more than zero".into());
        }
        if self.no_engine && self.archive_export_dir.is_some() {
            warnings.push(
                "--archive-export-dir ignored: the archive exporter runs in the engine, and --no-engine is set"
                    .to_string(),
            );
        }
        let webhooks: Vec<String> = self
            .alert_webhook
            .iter()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect();
        for u in &webhooks {
            if !(u.starts_with("http://") || u.starts_with("https://"))
                || u.parse::<axum::http::Uri>().is_err()
            {
                return Err(format!(
                    "--alert-webhook {}: not an http:// or https:// URL",
                    web::alerts::host_of(u)
                ));
            }
        }
        let alerts = web::alerts::AlertConfig {
            webhooks,
            cooldown: self.alert_cooldown,
            dashboard_url: self
                .dashboard_url
                .clone()
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_string(),
        };
        let engine = (!self.no_engine).then(|| {
            let mut c = MaintenanceConfig {
                sample_interval: Some(self.poll_interval),
                ..MaintenanceConfig::default()
            };
            if let Some(d) = self.forwarder_interval {
                c.forwarder_interval = d;
            }
            c.archive_export = self
                .archive_export_dir
                .clone()
                .map(crate::server::ArchiveExportConfig::new);
            c
        });
        Ok(ServeConfig {
            listen,
            redis,
            redis_tls_ca,
            redis_client_cert,
            web: WebConfig {
                read_only: self.read_only,
                root_path,
                poll_interval: self.poll_interval,
                basic_auth: self.basic_auth.clone(),
                max_payload_length: self.max_payload_length,
                max_result_length: self.max_result_length,
                allowed_hosts: web::AllowedHosts::for_listener(listen, self.allowed_hosts.clone()),
                redis_budget_commands: self.redis_budget_commands,
                redis_budget_ms: self.redis_budget_ms,
                auth_header: self.auth_header.clone(),
                trusted_proxies: self.trusted_proxies.clone().unwrap_or_default(),
                alerts,
                ..WebConfig::default()
            },
            engine,
            warnings,
            schedule: self.schedule.clone(),
        })
    }
}
