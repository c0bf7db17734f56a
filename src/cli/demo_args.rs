//! The flags of `asynqdeck demo` ([`DemoArgs`]) and
//! [`DemoArgs::redis_options`], which turns its Redis flags into
//! [`ConnectOptions`] without touching the network.

use std::net::SocketAddr;
use std::time::Duration;

use clap::Args;

use super::values::parse_duration;
use crate::broker::{ConnectOptions, SentinelOptions};

/// Flags of `asynqdeck demo`.
#[derive(Clone, Debug, Args)]
pub struct DemoArgs {
    /// Redis URL to use (the demo writes tasks into it): redis://, rediss://,
    /// redis-sentinel://[:password@]h:p,h:p[/db]?master=NAME or
    /// redis-cluster://h:p,h:p [default: 127.0.0.1:6379 if it answers, else
    /// a private redis-server started for the demo].
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,
    /// Redis Cluster seed nodes, comma-separated host:port (as `serve`).
    #[arg(long, value_name = "HOST:PORT,...")]
    pub redis_cluster_nodes: Option<String>,
    /// Sentinel addresses, comma-separated host:port (as `serve`); needs
    /// --redis-sentinel-master.
    #[arg(long, value_name = "HOST:PORT,...")]
    pub redis_sentinel_addrs: Option<String>,
    /// Name of the master the sentinels monitor.
    #[arg(long, value_name = "NAME")]
    pub redis_sentinel_master: Option<String>,
    /// Password of the sentinels themselves.
    #[arg(long, value_name = "PASSWORD")]
    pub redis_sentinel_password: Option<String>,
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

/// `a:1, b:2,` → `["a:1", "b:2"]`.
fn addr_list(v: &Option<String>) -> Vec<String> {
    v.as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_string)
        .collect()
}

impl DemoArgs {
    /// The Redis the flags name: `None` when none does (the demo then
    /// looks for one on 127.0.0.1:6379 or starts its own). Errors (a
    /// one-line reason; the binary exits 2) when more than one of
    /// `--redis-url`, `--redis-cluster-nodes` and `--redis-sentinel-addrs`
    /// is given, or sentinels without a master name (or a master name or
    /// sentinel password without sentinels).
    pub fn redis_options(&self) -> Result<Option<ConnectOptions>, String> {
        let url = self
            .redis_url
            .as_deref()
            .map(str::trim)
            .filter(|u| !u.is_empty());
        let nodes = addr_list(&self.redis_cluster_nodes);
        let sentinels = addr_list(&self.redis_sentinel_addrs);
        let given = [url.is_some(), !nodes.is_empty(), !sentinels.is_empty()];
        if given.iter().filter(|g| **g).count() > 1 {
            return Err(
                "give one of --redis-url, --redis-cluster-nodes and --redis-sentinel-addrs"
                    .to_string(),
            );
        }
        let master = self
            .redis_sentinel_master
            .as_deref()
            .map(str::trim)
            .filter(|m| !m.is_empty());
        if sentinels.is_empty() && (master.is_some() || self.redis_sentinel_password.is_some()) {
            return Err(
                "--redis-sentinel-master and --redis-sentinel-password need --redis-sentinel-addrs"
                    .to_string(),
            );
        }
        if let Some(url) = url {
            return Ok(Some(ConnectOptions::new(url)));
        }
        if !nodes.is_empty() {
            return Ok(Some(ConnectOptions {
                cluster_nodes: nodes,
                ..ConnectOptions::default()
            }));
        }
        if sentinels.is_empty() {
            return Ok(None);
        }
        let Some(master) = master else {
            return Err("--redis-sentinel-addrs needs --redis-sentinel-master".to_string());
        };
        Ok(Some(ConnectOptions {
            sentinel: Some(SentinelOptions {
                addrs: sentinels,
                master: master.to_string(),
                password: self
                    .redis_sentinel_password
                    .clone()
                    .filter(|p| !p.is_empty()),
                username: None,
            }),
            ..ConnectOptions::default()
        }))
    }
}
