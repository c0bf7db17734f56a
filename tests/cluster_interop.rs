//! Both directions against real Go asynq v0.26.0 on a local 3-master Redis
//! Cluster (issue 14 item 6): Go enqueues with `RedisClusterClientOpt` and
//! our Server processes every task once, our Inspector reading what Go's
//! reads; our Client enqueues and Go's server processes, Go's Inspector
//! reading what ours reads; Go's Inspector lists our running server. The
//! queues' keys live on three different masters. One exchange behind
//! Sentinel checks the peer's `RedisFailoverClientOpt` flags. The
//! standalone forms of these checks are `interop.rs` and
//! `server_interop.rs`.
//!
//! The Go peer is a blocking process call: the tests run on a
//! multi-threaded runtime so our server keeps running meanwhile.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::inspector::{Page, QueueInfo, TaskRow};
use asynqdeck::server::heartbeat::hostname;
use asynqdeck::server::{Config, ServeMux, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task, TaskState};
use serde_json::Value;

use crate::interop::assert_same;
use crate::support::cluster::LocalCluster;
use crate::support::server;

/// Queues whose keys hash to the three masters (slots 865, 8090, 15214 of
/// `redis-cli --cluster create`'s ranges 0–5460, 5461–10922, 10923–16383).
pub(crate) const QUEUES: [&str; 3] = ["alpha", "critical", "low"];

/// How long any single wait may take.
const WAIT: Duration = Duration::from_secs(20);

/// A fresh 3-master cluster; checks that [`QUEUES`] are on three masters.
pub(crate) async fn cluster() -> LocalCluster {
    let c = tokio::task::spawn_blocking(|| LocalCluster::start(3))
        .await
        .unwrap();
    let ports: BTreeSet<u16> = QUEUES
        .iter()
        .map(|q| c.port_of(&keys::pending_key(q)))
        .collect();
    assert_eq!(ports.len(), 3, "queues on three masters: {ports:?}");
    c
}

/// Fast loops: forwarder and idle wait every 100 ms, heartbeat every 200 ms.
pub(crate) fn fast(queues: &[&str]) -> Config {
    Config {
        concurrency: 4,
        queues: queues.iter().map(|q| (q.to_string(), 1)).collect(),
        forwarder_interval: Duration::from_millis(100),
        task_check_interval: Duration::from_millis(100),
        heartbeat_interval: Duration::from_millis(200),
        shutdown_timeout: Duration::from_secs(2),
        ..Config::default()
    }
}

/// Asserts that Go's `GetQueueInfo` (asynq-peer JSON) and ours agree on
/// every number (not memory, latency or timestamp, which are read at other
/// moments or estimated otherwise).
pub(crate) fn assert_same_queue(go: &Value, ours: &QueueInfo) {
    let pairs: [(&str, i64); 13] = [
        ("size", ours.size),
        ("groups", ours.groups),
        ("pending", ours.pending),
        ("active", ours.active),
        ("scheduled", ours.scheduled),
        ("retry", ours.retry),
        ("archived", ours.archived),
        ("completed", ours.completed),
        ("aggregating", ours.aggregating),
        ("processed", ours.processed),
        ("failed", ours.failed),
        ("processed_total", ours.processed_total),
        ("failed_total", ours.failed_total),
    ];
    for (field, value) in pairs {
        assert_eq!(go[field], value, "{}: {field}", ours.queue);
    }
    assert_eq!(go["queue"], ours.queue.as_str());
    assert_eq!(go["paused"], ours.paused, "{}: paused", ours.queue);
}

/// Polls `f` (which may call the blocking Go peer) until it returns `Some`.
pub(crate) async fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until our Inspector says every queue processed `n` tasks and holds
/// nothing pending, scheduled or active.
pub(crate) async fn wait_processed(inspector: &Inspector, queues: &[&str], n: i64) {
    for q in queues {
        let q = q.to_string();
        crate::support::eventually(WAIT, || {
            let (inspector, q) = (inspector.clone(), q.clone());
            async move {
                let i = inspector.queue_info(&q).await.ok()?;
                (i.processed_total == n && i.pending == 0 && i.scheduled == 0 && i.active == 0)
                    .then_some(())
            }
        })
        .await
        .unwrap_or_else(|| panic!("queue {q} processed {n} tasks"));
    }
}

/// A mux whose `work` handler counts the calls per task id.
pub(crate) fn counting_mux() -> (ServeMux, Arc<Mutex<HashMap<String, u32>>>) {
    let seen: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let s = seen.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("work", move |ctx: TaskContext, _t: Task| {
        let s = s.clone();
        async move {
            *s.lock()
                .unwrap()
                .entry(ctx.task_id().to_string())
                .or_default() += 1;
            Ok(())
        }
    });
    (mux, seen)
}

fn go_id(v: Value) -> String {
    v["id"].as_str().unwrap().to_string()
}

fn rows(r: Vec<TaskRow>) -> Vec<String> {
    r.into_iter()
        .map(|r| match r {
            TaskRow::Task(t) => t.id,
            other => panic!("corrupt row {other:?}"),
        })
        .collect()
}

fn no_crossslot(cluster: &LocalCluster) {
    let errors = cluster.error_stats();
    assert!(
        !errors.iter().any(|(k, _)| k == "CROSSSLOT"),
        "no CROSSSLOT: {errors:?}"
    );
}

/// Go (`RedisClusterClientOpt`) enqueues pending, scheduled, unique and
/// retained tasks to three queues on three masters; our Inspector reads
/// every task and queue as Go's does, uniqueness holds across both
/// clients, and our Server processes each task exactly once; afterwards
/// Go's Inspector and ours agree again and the unique lock is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_enqueues_on_cluster_and_our_server_processes_each_task_once() {
    let cluster = cluster().await;
    let url = cluster.url();
    let inspector = Inspector::connect(&url).await.unwrap();
    let client = Client::connect(&url).await.unwrap();
    let mut ids: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for q in QUEUES {
        let p1 = format!("{q}-plain");
        let u = format!("{q}-unique");
        let runs: [Vec<&str>; 5] = [
            vec!["--payload", &p1],
            vec![
                "--max-retry",
                "3",
                "--timeout",
                "45s",
                "--header",
                "trace=t1",
            ],
            vec!["--process-in", "1s"],
            vec!["--unique", "1h", "--payload", &u],
            vec!["--retention", "1h"],
        ];
        for extra in runs {
            let mut args = vec!["enqueue", "--type", "work", "--queue", q];
            args.extend(extra);
            ids.entry(q.into())
                .or_default()
                .push(go_id(cluster.peer_ok(&args)));
        }
        // The lock Go took refuses a second unique task, from Go and from us.
        let dup = cluster
            .peer(&[
                "enqueue",
                "--type",
                "work",
                "--queue",
                q,
                "--unique",
                "1h",
                "--payload",
                &u,
            ])
            .unwrap_err();
        assert_eq!(dup["code"], "duplicate_task");
        let ours = client
            .enqueue(
                &Task::new("work", u.as_bytes().to_vec()),
                EnqueueOptions::new()
                    .queue(q)
                    .unique(Duration::from_secs(3600)),
            )
            .await;
        assert!(matches!(ours, Err(Error::DuplicateTask)), "{ours:?}");
    }
    for (q, q_ids) in &ids {
        for id in q_ids {
            let ours = inspector.get_task_info(q, id).await.unwrap();
            let go = cluster.peer_ok(&["inspect", "task", "--queue", q, "--id", id]);
            assert_same(&go, &ours);
        }
        let ours = inspector.queue_info(q).await.unwrap();
        assert_eq!(
            (ours.size, ours.pending, ours.scheduled),
            (5, 4, 1),
            "{q} before"
        );
        assert_same_queue(
            &cluster.peer_ok(&["inspect", "queue-info", "--queue", q]),
            &ours,
        );
        let go_pending: Vec<String> = cluster
            .peer_ok(&["inspect", "list", "--queue", q, "--state", "pending"])
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        let our_pending = rows(
            inspector
                .list_tasks(q, TaskState::Pending, Page::default())
                .await
                .unwrap(),
        );
        assert_eq!(go_pending, our_pending, "{q} pending list");
        assert_eq!(
            our_pending,
            [&q_ids[0], &q_ids[1], &q_ids[3], &q_ids[4]].map(String::clone)
        );
    }

    let (mux, seen) = counting_mux();
    let broker = asynqdeck::broker::Broker::connect(&url).await.unwrap();
    let running = server::start_on(broker, fast(&QUEUES), mux);
    wait_processed(&inspector, &QUEUES, 5).await;
    running.shutdown().await;

    let seen = seen.lock().unwrap().clone();
    let want: HashMap<String, u32> = ids.values().flatten().map(|id| (id.clone(), 1)).collect();
    assert_eq!(seen, want, "every Go task handled exactly once");
    for (q, q_ids) in &ids {
        let ours = inspector.queue_info(q).await.unwrap();
        assert_eq!(
            (ours.size, ours.completed, ours.processed, ours.failed),
            (1, 1, 5, 0),
            "{q} after"
        );
        assert_same_queue(
            &cluster.peer_ok(&["inspect", "queue-info", "--queue", q]),
            &ours,
        );
        let retained = inspector.get_task_info(q, &q_ids[4]).await.unwrap();
        assert_eq!(retained.state, TaskState::Completed);
        assert_eq!(retained.retention, Duration::from_secs(3600));
        let go = cluster.peer_ok(&["inspect", "task", "--queue", q, "--id", &q_ids[4]]);
        assert_same(&go, &retained);
        // Our server released Go's unique lock when the task succeeded.
        let again = cluster.peer_ok(&[
            "enqueue",
            "--type",
            "work",
            "--queue",
            q,
            "--unique",
            "1h",
            "--payload",
            &format!("{q}-unique"),
        ]);
        assert_eq!(again["state"], "pending");
    }
    no_crossslot(&cluster);
}

/// Our Client enqueues pending, scheduled, unique, retained and grouped
/// tasks to three queues on three masters; Go's Inspector lists the queues
/// and reads every task and queue as ours does; Go's server
/// (`RedisClusterClientOpt`) processes each pending task once; then both
/// inspectors agree on the outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn we_enqueue_on_cluster_and_go_processes_and_inspects() {
    let cluster = cluster().await;
    let url = cluster.url();
    let inspector = Inspector::connect(&url).await.unwrap();
    let client = Client::connect(&url).await.unwrap();
    let mut pending_ids: Vec<String> = Vec::new();
    let mut all: Vec<(String, String)> = Vec::new();
    for q in QUEUES {
        let task = Task::new("work", format!("{q}-payload").into_bytes()).with_header("from", "rs");
        let opts = [
            EnqueueOptions::new().max_retry(2),
            EnqueueOptions::new().timeout(Duration::from_secs(42)),
            EnqueueOptions::new().unique(Duration::from_secs(600)),
            EnqueueOptions::new().retention(Duration::from_secs(7200)),
            EnqueueOptions::new().process_in(Duration::from_secs(3600)),
            EnqueueOptions::new().group("batch"),
        ];
        for o in opts {
            let info = client.enqueue(&task, o.queue(q)).await.unwrap();
            if info.state == TaskState::Pending {
                pending_ids.push(info.id.clone());
            }
            all.push((q.to_string(), info.id));
        }
    }
    assert_eq!(pending_ids.len(), 12);
    assert_eq!(
        cluster.peer_ok(&["inspect", "queues"]),
        serde_json::json!(QUEUES)
    );
    for (q, id) in &all {
        let ours = inspector.get_task_info(q, id).await.unwrap();
        let go = cluster.peer_ok(&["inspect", "task", "--queue", q, "--id", id]);
        assert_same(&go, &ours);
    }
    for q in QUEUES {
        let ours = inspector.queue_info(q).await.unwrap();
        assert_eq!(
            (
                ours.size,
                ours.pending,
                ours.scheduled,
                ours.aggregating,
                ours.groups
            ),
            (6, 4, 1, 1, 1),
            "{q} before"
        );
        assert_same_queue(
            &cluster.peer_ok(&["inspect", "queue-info", "--queue", q]),
            &ours,
        );
        assert_eq!(
            cluster.peer_ok(&["inspect", "groups", "--queue", q]),
            serde_json::json!([{"group": "batch", "size": 1}])
        );
        let go_pending = cluster.peer_ok(&["inspect", "list", "--queue", q, "--state", "pending"]);
        let ours_pending = inspector
            .list_tasks(q, TaskState::Pending, Page::default())
            .await
            .unwrap();
        assert_eq!(go_pending.as_array().unwrap().len(), 4);
        for (go, ours) in go_pending.as_array().unwrap().iter().zip(ours_pending) {
            match ours {
                TaskRow::Task(t) => assert_same(go, &t),
                other => panic!("corrupt row {other:?}"),
            }
        }
    }

    let lines = cluster.peer_lines(&[
        "work",
        "--queues",
        &QUEUES.join(","),
        "--count",
        "12",
        "--max-duration",
        "30s",
    ]);
    let mut handled: Vec<String> = lines
        .iter()
        .map(|l| {
            assert_eq!(
                (&l["type"], &l["headers"]["from"]),
                (&"work".into(), &"rs".into())
            );
            l["id"].as_str().unwrap().to_string()
        })
        .collect();
    handled.sort();
    pending_ids.sort();
    assert_eq!(handled, pending_ids, "Go handled each pending task once");

    for q in QUEUES {
        let ours = inspector.queue_info(q).await.unwrap();
        assert_eq!(
            (
                ours.size,
                ours.pending,
                ours.completed,
                ours.processed,
                ours.processed_total
            ),
            (3, 0, 1, 4, 4),
            "{q} after"
        );
        assert_same_queue(
            &cluster.peer_ok(&["inspect", "queue-info", "--queue", q]),
            &ours,
        );
        let completed = cluster.peer_ok(&["inspect", "list", "--queue", q, "--state", "completed"]);
        let ours_completed = rows(
            inspector
                .list_tasks(q, TaskState::Completed, Page::default())
                .await
                .unwrap(),
        );
        assert_eq!(completed.as_array().unwrap().len(), 1);
        assert_eq!(completed[0]["id"], ours_completed[0].as_str());
        assert_eq!(completed[0]["retention_secs"], 7200);
    }
    no_crossslot(&cluster);
}

/// Go's `Inspector.Servers` on the cluster lists our running server (its
/// heartbeat in `asynq:servers` and `asynq:workers`, read node by node by
/// go-redis) with host, pid, concurrency, queues, status and the running
/// task as its worker; after our shutdown the list is empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_lists_our_server_and_worker_on_cluster() {
    let cluster = cluster().await;
    let url = cluster.url();
    let id = go_id(cluster.peer_ok(&[
        "enqueue",
        "--type",
        "slow",
        "--queue",
        "low",
        "--payload",
        "xyz",
        "--timeout",
        "90s",
    ]));
    let release = Arc::new(tokio::sync::Notify::new());
    let r = release.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("slow", move |_c: TaskContext, _t: Task| {
        let r = r.clone();
        async move {
            r.notified().await;
            Ok(())
        }
    });
    let config = Config {
        concurrency: 7,
        queues: [
            ("alpha".to_string(), 1),
            ("critical".to_string(), 6),
            ("low".to_string(), 3),
        ]
        .into(),
        strict_priority: true,
        ..fast(&[])
    };
    let before = chrono::Utc::now().timestamp();
    let broker = asynqdeck::broker::Broker::connect(&url).await.unwrap();
    let running = server::start_on(broker, config, mux);
    let servers = until("Go lists our server with one worker", || {
        let s = cluster.peer_ok(&["inspect", "servers"]);
        (s[0]["active_workers"].as_array().map(Vec::len) == Some(1)).then_some(s)
    })
    .await;
    assert_eq!(servers.as_array().unwrap().len(), 1);
    let s = &servers[0];
    assert_eq!(s["host"], hostname());
    assert_eq!(s["pid"], std::process::id());
    assert_eq!(s["concurrency"], 7);
    assert_eq!(
        s["queues"],
        serde_json::json!({"alpha": 1, "critical": 6, "low": 3})
    );
    assert_eq!(s["strict_priority"], true);
    assert_eq!(s["status"], "active");
    let started = s["started"].as_i64().unwrap();
    assert!(started >= before - 1 && started <= chrono::Utc::now().timestamp());
    let ours = Inspector::connect(&url)
        .await
        .unwrap()
        .servers()
        .await
        .unwrap();
    assert_eq!(ours.len(), 1);
    assert_eq!(s["server_id"], ours[0].server_id.as_str());
    let w = &s["active_workers"][0];
    assert_eq!(
        (
            &w["task_id"],
            &w["task_type"],
            &w["queue"],
            &w["task_payload"]
        ),
        (
            &id.clone().into(),
            &"slow".into(),
            &"low".into(),
            &"xyz".into()
        )
    );
    assert_eq!(
        w["deadline"].as_i64().unwrap() - w["started"].as_i64().unwrap(),
        90
    );
    release.notify_one();
    until("task done", || {
        cluster
            .peer(&["inspect", "task", "--queue", "low", "--id", &id])
            .err()
            .filter(|e| e["code"] == "task_not_found")
    })
    .await;
    running.shutdown_within(WAIT).await;
    assert_eq!(
        cluster.peer_ok(&["inspect", "servers"]),
        Value::Array(vec![])
    );
    no_crossslot(&cluster);
}

/// The peer's `RedisFailoverClientOpt` flags: behind Sentinel, a task Go
/// enqueues is read by our Inspector as Go reads it, and one we enqueue is
/// read by Go's Inspector as ours reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_and_we_share_a_sentinel_master() {
    let set = tokio::task::spawn_blocking(crate::support::cluster::SentinelSet::start)
        .await
        .unwrap();
    let url = set.url();
    let inspector = Inspector::connect(&url).await.unwrap();
    let go = go_enqueue_on_sentinel(&set);
    let ours = inspector.get_task_info("critical", &go).await.unwrap();
    assert_same(
        &set.peer_ok(&["inspect", "task", "--queue", "critical", "--id", &go]),
        &ours,
    );
    let info = Client::connect(&url)
        .await
        .unwrap()
        .enqueue(
            &Task::new("work", b"rs".to_vec()),
            EnqueueOptions::new()
                .queue("critical")
                .process_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let ours = inspector.get_task_info("critical", &info.id).await.unwrap();
    assert_same(
        &set.peer_ok(&["inspect", "task", "--queue", "critical", "--id", &info.id]),
        &ours,
    );
    let q = inspector.queue_info("critical").await.unwrap();
    assert_eq!((q.size, q.pending, q.scheduled), (2, 1, 1));
    assert_same_queue(
        &set.peer_ok(&["inspect", "queue-info", "--queue", "critical"]),
        &q,
    );
}

fn go_enqueue_on_sentinel(set: &crate::support::cluster::SentinelSet) -> String {
    go_id(set.peer_ok(&[
        "enqueue",
        "--type",
        "work",
        "--queue",
        "critical",
        "--payload",
        "go",
        "--max-retry",
        "4",
    ]))
}
