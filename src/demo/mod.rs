//! `asynqdeck demo`: the dashboard, the embedded engine, workers running the
//! demo handlers, and a producer, on one Redis (issue 5).
//!
//! It runs unchanged on a standalone Redis, a Redis Cluster
//! (`--redis-cluster-nodes`, `redis-cluster://`) and behind Sentinel
//! (`redis-sentinel://`, `--redis-sentinel-*`): the same queues (on a
//! 3-master cluster made by `redis-cli --cluster create`, `critical` and
//! `default` hash to the second master, `low` to the third), the same
//! handlers and producer. With no Redis named it uses the Redis on 127.0.0.1:6379 when one
//! answers there and holds no asynq queue yet (so it never runs its fake
//! handlers on real work), else starts a private `redis-server` child on a
//! free port (gone when the demo stops). Within two minutes every tab has rows; a
//! webhook partner outage every few minutes makes the retry tab grow and the
//! outage banner fire. Grouped `email:digest` tasks are aggregated into
//! digests by the workers' group aggregator, and a periodic `report:daily`
//! entry (every 30 s) runs on the demo's scheduler. Files: `workload.rs` (handlers, policies, producer),
//! `redis_child.rs` (private redis-server), `web.rs` (the `/demo` control page).

mod redis_child;
mod web;
pub mod workload;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

pub use workload::{DemoConfig, Partner};

use crate::Client;
use crate::app::{ServeConfig, ServeError};
use crate::broker::{Broker, ConnectOptions};
use crate::server::{MaintenanceConfig, Server};
use crate::web::WebConfig;

/// Settings of `asynqdeck demo`.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Redis to use (a standalone server, a Cluster or a Sentinel-managed
    /// master); `None`: 127.0.0.1:6379 if it answers, else a private server.
    pub redis: Option<ConnectOptions>,
    /// Address of the dashboard.
    pub listen: SocketAddr,
    /// Dashboard poll interval (also the outage sampler's).
    pub poll_interval: Duration,
    /// The workload's settings.
    pub workload: DemoConfig,
}

/// Runs the demo until `shutdown`. Errors: no usable Redis (with the install
/// command when redis-server is missing), or the address cannot be bound.
pub async fn run(
    opts: DemoOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let mut _child = None;
    let redis = match &opts.redis {
        Some(redis) => redis.clone(),
        None if default_redis_answers().await => {
            println!(
                "demo: using the Redis at 127.0.0.1:6379 (pass --redis-url to choose another)"
            );
            ConnectOptions::new(crate::broker::DEFAULT_REDIS_URL)
        }
        None => {
            let child = redis_child::RedisChild::start().map_err(ServeError::Config)?;
            let url = child.url();
            println!("demo: started a private redis-server at {url} (stopped with the demo)");
            _child = Some(child);
            ConnectOptions::new(url)
        }
    };
    let broker = Broker::connect_with(&redis).await.map_err(|e| match e {
        crate::Error::InvalidArgument(m) => ServeError::Config(m),
        other => ServeError::Redis {
            address: redis.display_address(),
            reason: other.to_string(),
        },
    })?;
    println!(
        "demo: Redis {} ({:?})",
        redis.display_address(),
        broker.topology()
    );
    let partner = Arc::new(Partner::default());
    let stop = CancellationToken::new();

    let server = Server::new(broker.clone(), workload::config());
    let worker = tokio::spawn({
        let stop = stop.clone();
        server.run_until(workload::mux(partner.clone()), stop.cancelled_owned())
    });
    // A periodic entry, fired by the demo's own scheduler (`/schedulers`).
    let scheduler = crate::scheduler::Scheduler::new(
        broker.clone(),
        crate::scheduler::SchedulerOpts::default(),
    );
    let (spec, task, options) = workload::report_entry();
    scheduler
        .register(spec, task, options)
        .map_err(|e| ServeError::Config(e.to_string()))?;
    scheduler
        .start()
        .await
        .map_err(|e| ServeError::Config(e.to_string()))?;
    let producer = tokio::spawn(workload::produce(
        Client::from_broker(broker.clone()),
        partner.clone(),
        opts.workload.clone(),
        stop.clone(),
    ));

    let config = ServeConfig {
        listen: opts.listen,
        redis,
        redis_tls_ca: None,
        redis_client_cert: None,
        web: WebConfig {
            poll_interval: opts.poll_interval,
            allowed_hosts: crate::web::AllowedHosts::for_listener(opts.listen, Vec::new()),
            ..WebConfig::default()
        },
        engine: Some(MaintenanceConfig {
            sample_interval: Some(opts.poll_interval),
            ..MaintenanceConfig::default()
        }),
        warnings: Vec::new(),
        schedule: None,
    };
    println!(
        "demo: workers and producer running; partner outages every {:?} for {:?}; controls at http://{}/demo",
        opts.workload.outage_every, opts.workload.outage_for, opts.listen
    );
    let result = crate::app::serve_with(config, web::routes(partner), shutdown).await;
    stop.cancel();
    scheduler.shutdown().await;
    let _ = producer.await;
    match worker.await {
        Ok(Err(e)) => tracing::warn!(%e, "demo workers stopped with an error"),
        Err(e) => tracing::warn!(%e, "demo workers panicked"),
        Ok(Ok(())) => {}
    }
    result
}

async fn default_redis_answers() -> bool {
    let connect = tokio::net::TcpStream::connect("127.0.0.1:6379");
    if !matches!(
        tokio::time::timeout(Duration::from_millis(300), connect).await,
        Ok(Ok(_))
    ) {
        return false;
    }
    match tokio::time::timeout(
        Duration::from_secs(2),
        Broker::connect(crate::broker::DEFAULT_REDIS_URL),
    )
    .await
    {
        Ok(Ok(b)) => b.ping().await.is_ok(),
        _ => false,
    }
}
