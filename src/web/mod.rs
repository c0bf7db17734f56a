//! The dashboard: server-rendered HTML pages (askama + htmx) and an
//! asynqmon-compatible JSON API under `/api`, both thin over the
//! [`Inspector`](crate::Inspector).
//!
//! [`router`] returns an axum [`Router`] that a library user mounts in their
//! own app (beside their [`Server`](crate::Server)); `asynqdeck serve` mounts
//! it under `--root-path`.
//!
//! Files: `state.rs` (shared handles and the per-interval stats cache),
//! `urls.rs` (path segments of links), `search.rs` (what `/search`
//! and `/api/search` share), `audit.rs` (the audit log's
//! recording layer and actor), `security.rs` (basic auth, CSRF and same-origin checks, read-only guard,
//! security headers), `hosts.rs` (the `Host` check against DNS rebinding), `error.rs` (one error type for pages, one for the
//! API), `assets.rs` (embedded `static/`), `format.rs` (payload and time
//! formatting), `chart.rs` (server-rendered SVG charts), `pages/` (one file
//! per page area), `api/` (asynqmon routes).

pub mod alerts;
mod api;
mod assets;
pub mod attention;
pub(crate) mod audit;
mod chart;
mod error;
pub mod format;
mod hosts;
mod metrics;
pub(crate) mod pages;
mod pressure;
mod search;
mod security;
mod state;
pub(crate) mod urls;

use std::time::Duration;

use axum::Router;

pub use audit::{AuditCount, TrustedProxies};
pub use hosts::AllowedHosts;
pub use pages::MAX_FORM_BODY;
pub use pressure::{PressureCache, PressureCell};
pub use state::{
    AppState, GROWTH_REFRESH, MEMORY_REFRESH, MemoryEstimate, QueueRow, Snapshot, StatsCache,
};

/// Dashboard settings (flags of `asynqdeck serve`).
#[derive(Clone, Debug)]
pub struct WebConfig {
    /// Alert webhooks (`--alert-webhook`, `--alert-cooldown`,
    /// `--dashboard-url`; `src/web/alerts/`). Default: none.
    pub alerts: alerts::AlertConfig,
    /// Hide action buttons and refuse every mutation with 403.
    pub read_only: bool,
    /// Path prefix the dashboard is served under (e.g. `/asynq`), no trailing
    /// slash; empty for the root. Links and forms are built with it.
    pub root_path: String,
    /// How often pages refresh their live fragments, and how long queue
    /// statistics are shared between viewers. Default 5 s.
    pub poll_interval: Duration,
    /// `user:password` required on every route when set (HTTP basic auth).
    pub basic_auth: Option<(String, String)>,
    /// Characters of payload shown in task lists (the task page shows more).
    pub max_payload_length: usize,
    /// Characters of result shown in task lists.
    pub max_result_length: usize,
    /// The `Host` names answered; others get 421 (R15, DNS rebinding).
    /// Default: loopback names only. `asynqdeck serve` derives it from
    /// `--listen` and `--allowed-hosts` ([`AllowedHosts::for_listener`]).
    pub allowed_hosts: AllowedHosts,
    /// The Redis budget of the statistics reader: commands per second (0 =
    /// unlimited). `WebConfig::default()`: 0 (an embedding app opts in);
    /// `asynqdeck serve`: 2,000. See `src/broker/stats/budget.rs`.
    pub redis_budget_commands: u64,
    /// The Redis budget of the statistics reader: Redis milliseconds per
    /// second, measured as the round-trip time of its calls (an upper
    /// bound); 0 = unlimited. `WebConfig::default()`: 0; `asynqdeck
    /// serve`: 20.
    pub redis_budget_ms: u64,
    /// asynqmon's synchronous bulk routes (`…:delete_all`, `…:run_all`,
    /// `…:archive_all`) wait for their job when the set holds at most this
    /// many tasks and answer at once (202, with the job) above it
    /// (COMPATIBILITY.md L5). Default 10,000.
    pub sync_job_limit: u64,
    /// A request header naming the user, set by a reverse proxy that
    /// authenticated them (`--auth-header`, e.g. `X-Forwarded-User`): the
    /// audit log's actor. Believed only from [`WebConfig::trusted_proxies`];
    /// from any other peer the request is refused (403). Default: none.
    pub auth_header: Option<String>,
    /// The peers whose [`WebConfig::auth_header`] is believed
    /// (`--trusted-proxies`). Needs the peer address: serve the router with
    /// `into_make_service_with_connect_info::<SocketAddr>()` (as `asynqdeck
    /// serve` does); without it no peer is trusted. Default: none.
    pub trusted_proxies: TrustedProxies,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            read_only: false,
            root_path: String::new(),
            poll_interval: Duration::from_secs(5),
            basic_auth: None,
            max_payload_length: 200,
            max_result_length: 200,
            allowed_hosts: AllowedHosts::default(),
            redis_budget_commands: 0,
            redis_budget_ms: 0,
            sync_job_limit: 10_000,
            auth_header: None,
            trusted_proxies: TrustedProxies::default(),
            alerts: alerts::AlertConfig::default(),
        }
    }
}

/// The whole dashboard as an axum router: HTML pages, fragments, actions,
/// `/api` and `/static`. Mount it with `Router::nest` (or use
/// [`WebConfig::root_path`] and merge it at the top level).
pub fn router(state: AppState) -> Router {
    router_with(state, Router::new())
}

/// [`router`] plus `extra` routes of the embedding app, served under the
/// same root path and behind the same security layers (basic auth, CSRF,
/// read-only). The demo adds its control page this way.
pub fn router_with(state: AppState, extra: Router<AppState>) -> Router {
    let routes = Router::new()
        .merge(extra)
        .merge(pages::routes())
        .merge(api::routes())
        .merge(metrics::routes())
        .merge(assets::routes());
    let routes = security::layers(routes, state.clone()).with_state(state.clone());
    let root = state.config.root_path.trim_end_matches('/').to_string();
    // `/prefix/` is the same page as `/prefix` (links and the printed URL
    // use the slash); axum's nest only matches the bare prefix, so the path
    // is rewritten before routing. Dot-only names in links carry a `~`
    // (urls.rs, R9) that is removed here, before routing too.
    let inner = if root.is_empty() {
        routes
    } else {
        Router::new().nest(&root, routes)
    };
    let with_slash = format!("{root}/");
    let svc = tower::ServiceBuilder::new()
        .map_request(move |mut req: axum::extract::Request| {
            if !root.is_empty() && req.uri().path() == with_slash {
                let pq = match req.uri().query() {
                    Some(q) => format!("{root}?{q}"),
                    None => root.clone(),
                };
                if let Ok(uri) = pq.parse() {
                    *req.uri_mut() = uri;
                }
            }
            urls::unescape_request(&root, &mut req);
            req
        })
        .service(inner);
    Router::new().fallback_service(svc)
}
