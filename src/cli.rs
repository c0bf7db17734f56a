//! The `asynqdeck` command line: `asynqdeck serve` runs the dashboard and
//! the embedded maintenance engine in one process.
//!
//! [`Cli`] is the clap parser (the binary only parses, sets up logging and
//! calls [`main`]); [`ServeArgs::resolve`] turns flags into a
//! [`ServeConfig`] without touching the network, and [`serve`] runs it, so
//! both are testable in-process.
//!
//! Every flag is also an environment variable. asynqmon's flags and
//! variables (`--port`/`PORT`, `--redis-addr`/`REDIS_ADDR`,
//! `--redis-db`/`REDIS_DB`, `--redis-password`/`REDIS_PASSWORD`,
//! `--redis-tls`/`REDIS_TLS`, `--redis-insecure-tls`, `--redis-ca-cert`,
//! `--redis-client-cert`/`--redis-client-key`, `--redis-url`, `--read-only`,
//! `--max-payload-length`, `--max-result-length`,
//! `--enable-metrics-exporter`, `--prometheus-addr`,
//! `--redis-cluster-nodes`) are accepted with asynqmon's meaning, and the
//! flags work without the `serve` word too (`asynqdeck --port 8080`), so
//! asynqdeck replaces asynqmon in an existing deployment. As with asynqmon,
//! a variable set to the empty string counts as unset (the binary drops
//! such variables before parsing; see [`Cli::env_names`]). Differences:
//! `--listen` defaults to 127.0.0.1:8080 (asynqmon binds every interface;
//! `--port N` still does); an invalid value in a variable is an error, where
//! asynqmon silently falls back to the default; Redis Cluster and Sentinel
//! are refused with a message.
//!
//! Exit codes: 0 after SIGINT/SIGTERM, 2 for bad flags (clap's usage
//! errors and [`ServeArgs::resolve`] errors), 1 when Redis does not answer,
//! the listen address cannot be bound, or a TLS file cannot be read.

use std::future::Future;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::builder::BoolishValueParser;
use clap::{Args, CommandFactory, Parser, Subcommand};
use tokio_util::sync::CancellationToken;

use crate::Inspector;
use crate::broker::{Broker, ConnectOptions};
use crate::server::{Maintenance, MaintenanceConfig};
use crate::web::{self, AppState, WebConfig};

/// Default `--listen` address.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 8080);

/// How long shutdown waits for open HTTP requests before giving up on them.
const HTTP_DRAIN: Duration = Duration::from_secs(10);

/// `asynqdeck`: dashboard and worker engine for asynq queues.
#[derive(Debug, Parser)]
#[command(
    name = "asynqdeck",
    version,
    about = "Dashboard for asynq task queues (Go asynq v0.26.0 compatible), with the maintenance engine embedded",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    /// What to run; without one, `serve` with the flags given (as asynqmon).
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `serve` flags given without the `serve` word.
    #[command(
        flatten,
        next_help_heading = "Serve options (also accepted without the word `serve`, as asynqmon)"
    )]
    pub serve: ServeArgs,
}

impl Cli {
    /// Names of every environment variable the flags read.
    pub fn env_names() -> Vec<std::ffi::OsString> {
        let cmd = Cli::command();
        let mut names: Vec<std::ffi::OsString> = cmd
            .get_arguments()
            .chain(cmd.get_subcommands().flat_map(|s| s.get_arguments()))
            .filter_map(|a| a.get_env().map(|e| e.to_os_string()))
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// The `serve` arguments, whether or not the word `serve` was given
    /// (`None` for another subcommand).
    pub fn into_serve_args(self) -> Option<ServeArgs> {
        match self.command {
            Some(Command::Serve(args)) => Some(*args),
            None => Some(self.serve),
            Some(Command::Demo(_)) => None,
        }
    }
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the dashboard (HTML, /api, /metrics) and run the maintenance
    /// engine (forwarder, recoverer, janitor, heartbeat) until SIGINT/SIGTERM.
    Serve(Box<ServeArgs>),
    /// Run the demo: dashboard, embedded engine, workers whose handlers act
    /// out the retry stories (network errors, partner outages, rate limits,
    /// invalid orders, duplicates, panics) and a producer. Uses --redis-url,
    /// else 127.0.0.1:6379 when it answers, else a private redis-server.
    Demo(DemoArgs),
}

/// Flags of `asynqdeck demo`.
#[derive(Clone, Debug, Args)]
pub struct DemoArgs {
    /// Redis URL to use (the demo writes tasks into it) [default: 127.0.0.1:6379
    /// if it answers, else a private redis-server started for the demo].
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,
    /// Address of the dashboard.
    #[arg(long, default_value = "127.0.0.1:8080", value_name = "ADDR")]
    pub listen: SocketAddr,
    /// Dashboard refresh interval.
    #[arg(long, default_value = "2s", value_parser = parse_duration, value_name = "DURATION")]
    pub poll_interval: Duration,
    /// Time between the webhook partner's outages.
    #[arg(long, default_value = "3m", value_parser = parse_duration, value_name = "DURATION")]
    pub outage_every: Duration,
    /// Length of each outage.
    #[arg(long, default_value = "1m", value_parser = parse_duration, value_name = "DURATION")]
    pub outage_for: Duration,
    /// Tasks enqueued per second.
    #[arg(long, default_value_t = 8, value_name = "N")]
    pub rate: u32,
}

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

    /// Redis Cluster node addresses (asynqmon): not supported yet, refused.
    #[arg(long, env = "REDIS_CLUSTER_NODES", value_name = "HOST:PORT,...")]
    pub redis_cluster_nodes: Option<String>,

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

    /// Require HTTP basic auth on every route, as user:password.
    #[arg(
        long,
        env = "ASYNQDECK_BASIC_AUTH",
        value_name = "USER:PASSWORD",
        hide_env_values = true,
        value_parser = parse_basic_auth
    )]
    pub basic_auth: Option<(String, String)>,

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

    /// Forwarder interval of the embedded engine (tests).
    #[arg(long, hide = true, value_parser = parse_duration)]
    pub forwarder_interval: Option<Duration>,

    /// Print the resolved settings (secrets redacted) and exit.
    #[arg(long, hide = true)]
    pub print_config: bool,
}

/// Everything `serve` needs, resolved from [`ServeArgs`].
#[derive(Clone, Debug)]
pub struct ServeConfig {
    /// Address to listen on.
    pub listen: SocketAddr,
    /// Redis connection (TLS files are read by [`serve`]).
    pub redis: ConnectOptions,
    /// CA bundle file for Redis TLS.
    pub redis_tls_ca: Option<PathBuf>,
    /// Client certificate and key files for mutual TLS.
    pub redis_client_cert: Option<(PathBuf, PathBuf)>,
    /// Dashboard settings.
    pub web: WebConfig,
    /// The embedded engine's settings; `None` with `--no-engine`.
    pub engine: Option<MaintenanceConfig>,
    /// Things worth a warning at start (ignored flags).
    pub warnings: Vec<String>,
}

/// Why `serve` could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// Redis did not answer or refused the connection.
    #[error("cannot connect to Redis at {address}: {reason}")]
    Redis {
        /// `host:port/db`, without credentials.
        address: String,
        /// The error, on one line.
        reason: String,
    },
    /// The connection options are unusable (bad URL, unreadable or invalid
    /// TLS files).
    #[error("{0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {address}: {reason}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// The error.
        reason: String,
    },
    /// The HTTP server failed.
    #[error("HTTP server failed: {0}")]
    Http(String),
}

fn one_line(s: impl std::fmt::Display) -> String {
    s.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

impl ServeArgs {
    /// Checks the flags and combines them: url beats addr/db/password (as
    /// asynqmon), `--listen` beats `--port`, TLS is on for `rediss://`,
    /// `--redis-tls`, `--redis-insecure-tls` or a CA/client certificate.
    ///
    /// Errors (a one-line reason; the binary exits 2): Redis Cluster nodes
    /// or a `redis-sentinel://` URL (not supported yet), a malformed
    /// `--redis-addr` or root path, a client certificate without its key,
    /// a poll interval of zero.
    pub fn resolve(&self) -> Result<ServeConfig, String> {
        let mut warnings = Vec::new();
        if let Some(nodes) = non_empty(&self.redis_cluster_nodes) {
            return Err(format!(
                "Redis Cluster is not supported yet (--redis-cluster-nodes / REDIS_CLUSTER_NODES = {nodes:?}); \
                 point --redis-url or --redis-addr at a single Redis server"
            ));
        }
        let url = non_empty(&self.redis_url);
        let mut redis = match url {
            Some(url) => {
                if url.starts_with("redis-sentinel://") {
                    return Err(
                        "Redis Sentinel (redis-sentinel:// URL) is not supported yet".to_string(),
                    );
                }
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
        let engine = (!self.no_engine).then(|| {
            let mut c = MaintenanceConfig {
                sample_interval: Some(self.poll_interval),
                ..MaintenanceConfig::default()
            };
            if let Some(d) = self.forwarder_interval {
                c.forwarder_interval = d;
            }
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
            },
            engine,
            warnings,
        })
    }
}

/// `""`, `"/"` → `""`; `"asynq"`, `"/asynq/"` → `"/asynq"`. Refuses `?`,
/// `#`, `//`, `..` and whitespace.
fn normalize_root_path(raw: &str) -> Result<String, String> {
    let trimmed = raw.trim().trim_matches('/');
    if trimmed.is_empty() {
        return Ok(String::new());
    }
    let bad = trimmed.contains(['?', '#', '\\'])
        || trimmed.contains("//")
        || trimmed.split('/').any(|seg| seg == "..")
        || trimmed.chars().any(|c| c.is_whitespace() || c.is_control());
    if bad {
        return Err(format!(
            "--root-path {raw:?} must be a plain path like /asynq"
        ));
    }
    Ok(format!("/{trimmed}"))
}

/// Parses `5s`, `500ms`, `2m`, `1h`, `1m30s`, `1.5s` or plain seconds (`5`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad =
        || format!("invalid duration {s:?}: use e.g. 5s, 500ms, 2m, 1m30s or a number of seconds");
    let s = s.trim();
    if s.is_empty() {
        return Err(bad());
    }
    if let Ok(secs) = s.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).map_err(|_| bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(value * scale).map_err(|_| bad())?;
    }
    Ok(total)
}

/// One `--allowed-hosts` entry: trimmed, not empty, no spaces, `/` or `@`.
fn parse_host_name(s: &str) -> Result<String, String> {
    let name = s.trim();
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '/' || c == '@') {
        return Err(format!("{s:?} is not a host name"));
    }
    Ok(name.to_string())
}

fn parse_basic_auth(s: &str) -> Result<(String, String), String> {
    match s.split_once(':') {
        Some((user, password)) if !user.is_empty() && !password.is_empty() => {
            Ok((user.to_string(), password.to_string()))
        }
        _ => Err("expected user:password (both non-empty)".to_string()),
    }
}

impl ServeError {
    /// The process exit code for this error: 1.
    pub fn exit_code(&self) -> u8 {
        1
    }
}

/// Reads the TLS files named in `config` into the connection options.
fn connect_options(config: &ServeConfig) -> Result<ConnectOptions, ServeError> {
    let read = |flag: &str, path: &PathBuf| {
        std::fs::read(path).map_err(|e| {
            ServeError::Config(format!("cannot read {flag} file {}: {e}", path.display()))
        })
    };
    let mut opts = config.redis.clone();
    if let Some(ca) = &config.redis_tls_ca {
        opts.ca_cert_pem = Some(read("--redis-tls-ca", ca)?);
    }
    if let Some((cert, key)) = &config.redis_client_cert {
        opts.client_cert_pem = Some((
            read("--redis-client-cert", cert)?,
            read("--redis-client-key", key)?,
        ));
    }
    Ok(opts)
}

/// Connects to Redis, binds `config.listen`, prints the URL it serves at
/// on stdout, serves the dashboard and runs the maintenance engine (unless
/// disabled) until `shutdown` completes; then stops taking requests, lets
/// open ones finish (up to 10 s), stops the engine and removes its server
/// entry. Errors: [`ServeError::Redis`] when Redis does not answer,
/// [`ServeError::Config`] for unusable connection options,
/// [`ServeError::Listen`] when the address cannot be bound.
pub async fn serve(
    config: ServeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    serve_with(config, axum::Router::new(), shutdown).await
}

/// [`serve`] with `extra` routes mounted beside the dashboard's, behind the
/// same security layers (see [`web::router_with`]).
pub async fn serve_with(
    config: ServeConfig,
    extra: axum::Router<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    for w in &config.warnings {
        tracing::warn!("{w}");
    }
    let options = connect_options(&config)?;
    let address = options.display_address();
    let redis_err = |e: crate::Error| match e {
        crate::Error::InvalidArgument(m) => ServeError::Config(m),
        other => ServeError::Redis {
            address: address.clone(),
            reason: one_line(other),
        },
    };
    let broker = Broker::connect_with(&options).await.map_err(redis_err)?;
    broker.ping().await.map_err(redis_err)?;

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| ServeError::Listen {
            address: config.listen,
            reason: e.to_string(),
        })?;
    let local = listener.local_addr().map_err(|e| ServeError::Listen {
        address: config.listen,
        reason: e.to_string(),
    })?;

    let stop = CancellationToken::new();
    let engine = config.engine.clone().map(|c| {
        let m = Maintenance::new(broker.clone(), c);
        tokio::spawn(m.run(stop.clone()))
    });
    let state = AppState::new(Inspector::from_broker(broker), config.web.clone());
    let app = web::router_with(state, extra);

    println!(
        "asynqdeck serving http://{local}{}/ (Redis {address}{}, engine {})",
        config.web.root_path,
        if options.uses_tls() { ", TLS" } else { "" },
        if engine.is_some() { "on" } else { "off" },
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();

    let http_stop = CancellationToken::new();
    let http = tokio::spawn({
        let http_stop = http_stop.clone();
        async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(http_stop.cancelled_owned())
                .await
        }
    });
    tokio::pin!(http);
    let mut result = Ok(());
    tokio::select! {
        _ = shutdown => {
            tracing::info!("shutting down");
            http_stop.cancel();
            match tokio::time::timeout(HTTP_DRAIN, &mut http).await {
                Ok(Ok(Err(e))) => result = Err(ServeError::Http(e.to_string())),
                Ok(_) => {}
                Err(_) => tracing::warn!("open HTTP requests did not finish in {HTTP_DRAIN:?}; closing them"),
            }
        }
        r = &mut http => {
            result = Err(ServeError::Http(match r {
                Ok(Ok(())) => "stopped unexpectedly".to_string(),
                Ok(Err(e)) => e.to_string(),
                Err(e) => e.to_string(),
            }));
        }
    }
    stop.cancel();
    if let Some(engine) = engine {
        let _ = engine.await;
    }
    result
}

pub use crate::server::shutdown_signal;

/// Runs a parsed command line to its end: resolves the flags (exiting 2 with
/// clap's usage message on an error), starts a Tokio runtime and [`serve`]s
/// until SIGINT/SIGTERM. Prints a one-line `error: ...` on stderr and
/// returns exit code 1 when serving fails.
pub fn main(cli: Cli) -> ExitCode {
    if let Some(Command::Demo(d)) = &cli.command {
        let opts = crate::demo::DemoOptions {
            redis_url: d.redis_url.clone(),
            listen: d.listen,
            poll_interval: d.poll_interval,
            workload: crate::demo::DemoConfig {
                outage_every: d.outage_every,
                outage_for: d.outage_for,
                rate_per_sec: d.rate,
            },
        };
        return run_blocking(crate::demo::run(opts, shutdown_signal()));
    }
    let Some(args) = cli.into_serve_args() else {
        unreachable!("only demo has no serve arguments")
    };
    let config = match args.resolve() {
        Ok(c) => c,
        Err(msg) => Cli::command()
            .error(clap::error::ErrorKind::ValueValidation, msg)
            .exit(),
    };
    if args.print_config {
        let mut shown = config.clone();
        if let Some((_, pw)) = &mut shown.web.basic_auth {
            *pw = "<redacted>".to_string();
        }
        println!("{shown:#?}");
        return ExitCode::SUCCESS;
    }
    run_blocking(serve(config, shutdown_signal()))
}

/// Runs `fut` on a new multi-threaded runtime; prints `error: ...` and
/// returns its exit code on failure.
fn run_blocking(fut: impl Future<Output = Result<(), ServeError>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the Tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(fut) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations: units, compounds, plain seconds; garbage is refused.
    #[test]
    fn durations() {
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        for bad in ["", "s", "5x", "-1", "five", "5 s", "1.2.3s", "ms5"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }

    /// Root paths gain a leading slash and lose trailing ones.
    #[test]
    fn root_paths() {
        assert_eq!(normalize_root_path(""), Ok(String::new()));
        assert_eq!(normalize_root_path("/"), Ok(String::new()));
        assert_eq!(normalize_root_path("asynq"), Ok("/asynq".into()));
        assert_eq!(normalize_root_path("/a/b/"), Ok("/a/b".into()));
        for bad in ["/a?b", "/a b", "/a//b", "/../x"] {
            assert!(normalize_root_path(bad).is_err(), "{bad:?}");
        }
    }
}
