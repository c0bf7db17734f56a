//! The thinnest slice on each deployment (issue 14): a task enqueued by our
//! Client on a local Redis Cluster and behind Sentinel is listed by the
//! Inspector and processed by our Server, on queues whose keys live on
//! different masters.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use asynqdeck::broker::Topology;
use asynqdeck::server::{Config, ServeMux, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};

use crate::support::cluster::{LocalCluster, SentinelSet};
use crate::support::{self, server};

async fn enqueue_and_process(url: &str, queues: &[&str]) {
    let client = Client::connect(url).await.unwrap();
    let inspector = Inspector::connect(url).await.unwrap();
    let mut ids = Vec::new();
    for q in queues {
        let info = client
            .enqueue(
                &Task::new("ok", b"x".to_vec()),
                EnqueueOptions::new().queue(*q),
            )
            .await
            .unwrap();
        assert_eq!(info.state, TaskState::Pending);
        ids.push((q.to_string(), info.id));
    }
    let mut listed = inspector.queues().await.unwrap();
    listed.sort();
    let mut want: Vec<String> = queues.iter().map(|q| q.to_string()).collect();
    want.sort();
    assert_eq!(listed, want);
    for (q, id) in &ids {
        let t = inspector.get_task_info(q, id).await.unwrap();
        assert_eq!(t.state, TaskState::Pending);
    }
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
    let config = Config {
        queues: queues.iter().map(|q| (q.to_string(), 1)).collect(),
        ..Config::default()
    };
    let db_broker = asynqdeck::broker::Broker::connect(url).await.unwrap();
    let running = server::start_on(db_broker, config, mux);
    for (q, _) in &ids {
        let inspector = inspector.clone();
        let q = q.clone();
        support::eventually(server::WAIT, || {
            let inspector = inspector.clone();
            let q = q.clone();
            async move {
                let i = inspector.queue_info(&q).await.ok()?;
                (i.processed_total == 1 && i.pending == 0 && i.active == 0).then_some(())
            }
        })
        .await
        .unwrap_or_else(|| panic!("queue {q} processed its task"));
    }
    running.shutdown().await;
    assert_eq!(runs.load(Ordering::SeqCst), queues.len());
}

/// Client, Inspector and Server on a 3-master cluster; the queues' keys
/// hash to three different masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_enqueue_inspect_process() {
    let cluster = tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap();
    let queues = ["default", "critical", "low"];
    let mut masters: Vec<u16> = queues
        .iter()
        .map(|q| cluster.port_of(&format!("asynq:{{{q}}}:pending")))
        .collect();
    masters.sort();
    masters.dedup();
    assert!(
        masters.len() >= 2,
        "queues spread over masters: {masters:?}"
    );
    let b = asynqdeck::broker::Broker::connect(&cluster.url())
        .await
        .unwrap();
    assert_eq!(b.topology(), Topology::Cluster);
    enqueue_and_process(&cluster.url(), &queues).await;
    let errors = cluster.error_stats();
    assert!(
        !errors.iter().any(|(k, _)| k == "CROSSSLOT"),
        "no CROSSSLOT: {errors:?}"
    );
}

/// Client, Inspector and Server behind Sentinel.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_enqueue_inspect_process() {
    let set = tokio::task::spawn_blocking(SentinelSet::start)
        .await
        .unwrap();
    let b = asynqdeck::broker::Broker::connect(&set.url())
        .await
        .unwrap();
    assert_eq!(b.topology(), Topology::Sentinel);
    assert_eq!(
        b.sentinel_master(),
        Some(format!("127.0.0.1:{}", set.master_port))
    );
    enqueue_and_process(&set.url(), &["default", "critical"]).await;
    let _ = Duration::ZERO;
}
