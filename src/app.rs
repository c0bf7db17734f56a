//! Serving: what `asynqdeck serve` (and `asynqdeck demo`) run once the
//! command line is parsed.
//!
//! [`ServeConfig`] is everything serving needs (the command line builds it
//! with `cli::ServeArgs::resolve`, the demo builds its own); [`serve`] and
//! [`serve_with`] connect to Redis, bind the listener, run the dashboard and
//! the embedded maintenance engine until shutdown, and answer
//! [`ServeError`] when they cannot start or stop with an error. Both `cli`
//! and `demo` use this module; it imports neither.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::Inspector;
use crate::broker::{Broker, ConnectOptions};
use crate::server::{Maintenance, MaintenanceConfig};
use crate::web::{self, AppState, WebConfig};

/// How long shutdown waits for open HTTP requests before giving up on them.
const HTTP_DRAIN: Duration = Duration::from_secs(10);

/// Everything `serve` needs, resolved from the command line
/// (`cli::ServeArgs::resolve`) or built by the demo.
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
    /// The YAML schedule file (`--schedule`, `ASYNQDECK_SCHEDULE`): its
    /// periodic tasks are enqueued by a [`crate::scheduler::Scheduler`] in
    /// this process, re-read when the file changes and on SIGHUP.
    pub schedule: Option<PathBuf>,
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

impl ServeError {
    /// The process exit code for this error: 1.
    pub fn exit_code(&self) -> u8 {
        1
    }
}

/// Reads the TLS files named in `config` into the connection options.
pub(crate) fn connect_options(config: &ServeConfig) -> Result<ConnectOptions, ServeError> {
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
    let schedule = match &config.schedule {
        Some(path) => {
            Some(crate::app_schedule::start(broker.clone(), path.clone(), stop.clone()).await?)
        }
        None => None,
    };
    let inspector = Inspector::from_broker(broker);
    // Background bulk jobs (issue 15): queued ones and those a dead
    // dashboard left are run here, engine on or off; not in read-only mode.
    let jobs = (!config.web.read_only).then(|| {
        let runner = crate::inspector::jobs::JobRunner::new(inspector.clone());
        tokio::spawn(runner.run(stop.clone()))
    });
    let mut web_config = config.web.clone();
    if web_config.alerts.dashboard_url.is_empty() {
        web_config.alerts.dashboard_url = format!("http://{local}{}", web_config.root_path);
    }
    let state = AppState::new(inspector, web_config);
    // Alert webhooks (issue 17 item 6): only while some are configured.
    let alerter = state
        .alerts
        .active()
        .then(|| tokio::spawn(web::alerts::run(state.clone(), stop.clone())));
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
            // The peer address feeds the trusted-proxy check of the audit
            // layer (`--trusted-proxies`).
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
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
    if let Some(jobs) = jobs {
        let _ = jobs.await;
    }
    if let Some(alerter) = alerter {
        let _ = alerter.await;
    }
    if let Some(manager) = schedule {
        manager.shutdown().await;
    }
    result
}
