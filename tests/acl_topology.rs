//! The Redis permissions README.md documents ("Redis Cluster and Sentinel"),
//! checked as written (issue 14): an ACL user with exactly [`DATA_ACL`] on
//! every cluster master (and on the master and replica behind Sentinel,
//! with [`SENTINEL_ACL`] on the sentinels) runs `asynqdeck serve` with its
//! engine, a Client and a Server: every page answers 200, tasks of queues
//! on different masters are processed, a failing one is retried and moved
//! back by the forwarder, and no node's `ACL LOG` records a refused
//! command or key.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use asynqdeck::broker::{Broker, ConnectOptions};
use asynqdeck::server::{Config, ServeMux, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};

use crate::support::cluster::{LocalCluster, SentinelSet};
use crate::support::http::ServeBin;
use crate::support::{self, server};

/// The rules README.md gives the dashboard's and the engine's user on every
/// data node (standalone, cluster master, Sentinel-managed master and
/// replicas), after `ACL SETUSER deck on >PASSWORD`.
pub const DATA_ACL: &str = "resetkeys ~asynq:* ~asynqdeck:* resetchannels &asynq:cancel &__redis__:invalidate -@all +@read +@write +@keyspace +@scripting +@transaction +@pubsub +@connection +@blocking -@dangerous +info +role +cluster|slots +cluster|shards +cluster|nodes +cluster|info +cluster|keyslot";

/// The rules README.md gives the same client's user on the sentinels.
pub const SENTINEL_ACL: &str = "resetchannels &* -@all +@connection +role +subscribe +psubscribe +unsubscribe +punsubscribe +sentinel|masters +sentinel|get-master-addr-by-name +sentinel|slaves +sentinel|replicas";

async fn node(port: u16) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://127.0.0.1:{port}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// `ACL SETUSER user on >password <rules>` on `port` (as the default user).
async fn set_user(port: u16, user: &str, password: &str, rules: &str) {
    let mut c = node(port).await;
    let mut cmd = redis::cmd("ACL");
    cmd.arg("SETUSER")
        .arg(user)
        .arg("reset")
        .arg("on")
        .arg(format!(">{password}"));
    for r in rules.split_whitespace() {
        cmd.arg(r);
    }
    let () = cmd.query_async(&mut c).await.unwrap();
}

/// `ACL LOG` of `port`: every refused command, key or channel, as text.
async fn acl_log(port: u16) -> Vec<String> {
    let mut c = node(port).await;
    let v: redis::Value = redis::cmd("ACL")
        .arg("LOG")
        .query_async(&mut c)
        .await
        .unwrap();
    match v {
        redis::Value::Array(entries) => entries.iter().map(|e| format!("{e:?}")).collect(),
        other => vec![format!("{other:?}")],
    }
}

/// Enqueues one task per queue plus one that fails once, runs a Server on
/// `opts` until all are done (the failing one through retry and the
/// forwarder), reads the pages of `serve`, stops the Server; returns the
/// pages that did not answer 200.
async fn work_as_user(opts: &ConnectOptions, serve: &ServeBin, queues: &[&str]) -> Vec<String> {
    let broker = Broker::connect_with(opts).await.unwrap();
    let client = Client::from_broker(broker.clone());
    let inspector = Inspector::from_broker(broker.clone());
    for q in queues {
        client
            .enqueue(
                &Task::new("ok", b"x".to_vec()),
                EnqueueOptions::new().queue(*q),
            )
            .await
            .unwrap();
    }
    client
        .enqueue(
            &Task::new("flaky", b"x".to_vec()),
            EnqueueOptions::new().queue(queues[0]).max_retry(3),
        )
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let mut mux = ServeMux::new();
    let r = runs.clone();
    mux.handle_fn("ok", move |_ctx: TaskContext, _t: Task| {
        let r = r.clone();
        async move {
            r.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    mux.handle_fn("flaky", |ctx: TaskContext, _t: Task| async move {
        if ctx.retry_count() == 0 {
            anyhow::bail!("first attempt fails");
        }
        Ok(())
    });
    let config = Config {
        queues: queues.iter().map(|q| (q.to_string(), 1)).collect(),
        retry_delay_func: Arc::new(|_, _, _| Duration::from_secs(1)),
        forwarder_interval: Duration::from_millis(500),
        ..Config::default()
    };
    let running = server::start_on(broker.clone(), config, mux);
    let first = queues[0].to_string();
    support::eventually(Duration::from_secs(30), || {
        let inspector = inspector.clone();
        let queues = queues.to_vec();
        let first = first.clone();
        async move {
            let mut done = 0;
            for q in &queues {
                let i = inspector.queue_info(q).await.ok()?;
                let want = if *q == first { 2 } else { 1 };
                if i.processed_total == want && i.failed_total == i64::from(*q == first) {
                    done += 1;
                }
            }
            (done == queues.len()).then_some(())
        }
    })
    .await
    .expect("every task processed, the flaky one after a retry");
    assert_eq!(runs.load(Ordering::SeqCst), queues.len());

    let mut failing = Vec::new();
    let mut paths = vec![
        "/".to_string(),
        "/api/queues".to_string(),
        "/servers".to_string(),
        "/api/servers".to_string(),
        "/redis".to_string(),
        "/api/redis_info".to_string(),
        "/metrics".to_string(),
    ];
    for q in queues {
        paths.push(format!("/queues/{q}"));
        paths.push(format!("/queues/{q}/completed"));
        paths.push(format!("/api/queues/{q}"));
    }
    for p in &paths {
        let reply = serve.get(p).await;
        if reply.status != 200 {
            let body: String = reply.body.chars().take(200).collect();
            failing.push(format!("GET {p}: {} {body}", reply.status));
        }
    }
    running.shutdown().await;
    failing
}

/// A 3-master cluster whose masters know only the `deck` user with
/// [`DATA_ACL`] (besides the default user the test administers with).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_user_on_cluster() {
    let cluster = tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap();
    for &p in &cluster.ports {
        set_user(p, "deck", "deckpw", DATA_ACL).await;
    }
    let serve = ServeBin::spawn(
        &[
            "--redis-cluster-nodes",
            &cluster.nodes(),
            "--redis-username",
            "deck",
            "--redis-password",
            "deckpw",
            "--listen",
            "127.0.0.1:0",
            "--poll-interval",
            "1s",
            "--forwarder-interval",
            "1s",
        ],
        &[],
    )
    .await;
    let opts = ConnectOptions {
        cluster_nodes: cluster.nodes().split(',').map(str::to_string).collect(),
        username: Some("deck".into()),
        password: Some("deckpw".into()),
        ..ConnectOptions::default()
    };
    let failing = work_as_user(&opts, &serve, &["default", "critical", "low"]).await;
    assert_eq!(serve.terminate().await, Some(0));
    for &p in &cluster.ports {
        assert_eq!(acl_log(p).await, Vec::<String>::new(), "ACL LOG of {p}");
    }
    assert!(failing.is_empty(), "pages not 200:\n{}", failing.join("\n"));
}

/// Behind Sentinel: `deck` with [`DATA_ACL`] on the master and its
/// replica; `sdeck` with [`SENTINEL_ACL`] on the sentinels. `serve` names
/// the sentinels by flags (sentinels without auth, the common set-up);
/// the Client and Server by a `redis-sentinel://sdeck:...@` URL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acl_user_behind_sentinel() {
    let set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap();
    for p in [set.master_port, set.replica_port] {
        set_user(p, "deck", "deckpw", DATA_ACL).await;
    }
    for &p in &set.sentinel_ports {
        set_user(p, "sdeck", "sentinelpw", SENTINEL_ACL).await;
    }
    let serve = ServeBin::spawn(
        &[
            "--redis-sentinel-addrs",
            &set.addrs(),
            "--redis-sentinel-master",
            SentinelSet::MASTER,
            "--redis-username",
            "deck",
            "--redis-password",
            "deckpw",
            "--listen",
            "127.0.0.1:0",
            "--poll-interval",
            "1s",
            "--forwarder-interval",
            "1s",
        ],
        &[],
    )
    .await;
    let mut opts = ConnectOptions::new(format!(
        "redis-sentinel://sdeck:sentinelpw@{}?master={}",
        set.addrs(),
        SentinelSet::MASTER
    ));
    opts.username = Some("deck".into());
    opts.password = Some("deckpw".into());
    let failing = work_as_user(&opts, &serve, &["default", "critical"]).await;
    assert_eq!(serve.terminate().await, Some(0));
    for p in [set.master_port, set.replica_port] {
        assert_eq!(acl_log(p).await, Vec::<String>::new(), "ACL LOG of {p}");
    }
    for &p in &set.sentinel_ports {
        assert_eq!(
            acl_log(p).await,
            Vec::<String>::new(),
            "ACL LOG of sentinel {p}"
        );
    }
    assert!(failing.is_empty(), "pages not 200:\n{}", failing.join("\n"));
}
