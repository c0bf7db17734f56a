//! Test support, one file a concern, shared by the integration tests
//! (`tests/integration.rs`), the browser tests (`tests/browser/main.rs`)
//! and the chaos suite (`tests/chaos/main.rs`), each of which mounts this
//! folder with `#[path = "../support/mod.rs"] mod support` or `mod support`:
//!
//! - `redis`: the private redis-server and a fresh database per test;
//! - `cluster`: local Redis Clusters and Sentinel sets;
//! - `peer`: the Go asynq peer (`interop/`);
//! - `clock`: the tests' fixed "now", protobuf timestamps, a broker on a
//!   simulated clock;
//! - `http`: requests to the dashboard, in-process (`oneshot`) or to the
//!   `asynqdeck serve` binary over TCP, with one reply type;
//! - `seed`: tasks written into Redis the way Go leaves them;
//! - `server`: our `Server` run in a test, and waits for a task's state;
//! - `export`: the archive exporter's files;
//! - `htmx`, `routes`, `restartable`: htmx fragments, every dashboard route,
//!   redis-servers that can be killed and started again;
//! - `webhook`: a loopback HTTP server recording the alert webhooks' posts.
//!
//! The common names are re-exported here (`support::redis()`,
//! `support::TestDb`, `support::go_peer()`, `support::eventually`).
#![allow(dead_code)]

pub mod clock;
pub mod cluster;
pub mod commandstats;
pub mod export;
pub mod htmx;
pub mod http;
pub mod jobs;
pub mod peer;
pub mod redis;
pub mod restartable;
pub mod routes;
pub mod seed;
pub mod server;
pub mod webhook;

use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub use self::peer::{PeerProcess, go_peer};
#[allow(unused_imports)]
pub use self::redis::{TestDb, private_redis, redis};

/// Polls `f` every 50 ms until it returns `Some` or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
