//! Our [`Server`] against real Go asynq v0.26.0 (`interop/`, the
//! `asynq-peer` CLI) on one Redis (issue 3 interop criteria, wire spec §16
//! checks 6–17 and 20): Go enqueues, we process, and Go's Inspector sees
//! exactly what Go's own server leaves behind; Go's server and ours share a
//! queue without losing or repeating a task; Go's Inspector lists our
//! server; Go's pause, cancel and recoverer act on our server's tasks.
//!
//! Tests that run our server while calling the (blocking) Go peer use a
//! multi-threaded runtime so the server keeps running meanwhile.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::server::heartbeat::hostname;
use asynqdeck::server::{
    Config, RetryDelayFunc, RevokeTask, ServeMux, Server, SkipRetry, TaskContext,
};
use asynqdeck::{Client, EnqueueOptions, Task};
use redis::AsyncCommands;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::support::server::start;
use crate::support::{self, TestDb};

/// How long any single wait in these tests may take before it fails.
const WAIT: Duration = Duration::from_secs(15);

/// The fixed retry delay both servers use, so NextProcessAt − LastFailedAt
/// is deterministic: one hour (Go peer `--retry-delay 1h`).
const RETRY_DELAY: Duration = Duration::from_secs(3600);

fn fixed_delay() -> RetryDelayFunc {
    Arc::new(|_, _, _| RETRY_DELAY)
}

/// Fast loops: forwarder and idle dequeue every 100 ms, heartbeat every
/// 200 ms, the fixed retry delay.
fn fast(queues: &[&str]) -> Config {
    Config {
        concurrency: 4,
        queues: queues.iter().map(|q| (q.to_string(), 1)).collect(),
        forwarder_interval: Duration::from_millis(100),
        task_check_interval: Duration::from_millis(100),
        heartbeat_interval: Duration::from_millis(200),
        shutdown_timeout: Duration::from_secs(2),
        retry_delay_func: fixed_delay(),
        ..Config::default()
    }
}

/// Go's view of a task (`inspect task`), `None` when Go says it does not exist.
fn go_task(db: &TestDb, queue: &str, id: &str) -> Option<Value> {
    match db.peer(&["inspect", "task", "--queue", queue, "--id", id]) {
        Ok(v) => Some(v),
        Err(e) if e["code"] == "task_not_found" => None,
        Err(e) => panic!("inspect task failed: {e}"),
    }
}

/// Go's queue-info without the fields that depend on timing or memory.
fn go_queue(db: &TestDb, queue: &str) -> Value {
    let mut v = db.peer_ok(&["inspect", "queue-info", "--queue", queue]);
    let m = v.as_object_mut().unwrap();
    for k in ["memory_usage", "latency_ms", "timestamp"] {
        m.remove(k);
    }
    v
}

/// Go enqueues one task and returns its id.
fn go_enqueue(db: &TestDb, args: &[&str]) -> String {
    let mut full = vec!["enqueue"];
    full.extend_from_slice(args);
    db.peer_ok(&full)["id"].as_str().unwrap().to_string()
}

/// Polls `f` (which may call the blocking Go peer) until it returns `Some`.
async fn until<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Go-visible fields of a task that do not depend on who ran it or
/// when: everything but the id and the times, with the panic location cut
/// out of LastErr and NextProcessAt replaced by NextProcessAt − LastFailedAt.
fn comparable(task: &Value) -> Value {
    let mut v = task.clone();
    let m = v.as_object_mut().unwrap();
    let next = m["next_process_at"].as_i64().unwrap();
    let failed = m["last_failed_at"].as_i64().unwrap();
    assert!(failed > 0, "failed tasks have LastFailedAt: {task}");
    let gap = if next == 0 { 0 } else { next - failed };
    m.insert("next_process_at".into(), gap.into());
    for k in ["id", "last_failed_at"] {
        m.remove(k);
    }
    let err = m["last_err"].as_str().unwrap().to_string();
    if let Some(rest) = err.strip_prefix("panic error cause by: panic [") {
        let (_location, message) = rest
            .split_once("]: ")
            .unwrap_or_else(|| panic!("panic text {err:?}"));
        m.insert(
            "last_err".into(),
            format!("panic error cause by: panic [..]: {message}").into(),
        );
    }
    v
}

/// Our handlers for the scenarios, failing with the same texts as the Go
/// peer's behaviours (`interop/cmd/asynq-peer/work.go`).
fn scenario_mux() -> ServeMux {
    let mut mux = ServeMux::new();
    mux.handle_fn("success", |_c: TaskContext, _t: Task| async { Ok(()) });
    mux.handle_fn("retry", |_c: TaskContext, _t: Task| async {
        Err(anyhow::anyhow!("peer failure"))
    });
    mux.handle_fn("exhausted", |_c: TaskContext, _t: Task| async {
        Err(anyhow::anyhow!("peer failure"))
    });
    mux.handle_fn("skip", |_c: TaskContext, _t: Task| async {
        Err(anyhow::Error::new(SkipRetry).context("peer skip"))
    });
    mux.handle_fn("revoke", |_c: TaskContext, _t: Task| async {
        Err(RevokeTask.into())
    });
    mux.handle_fn("panic", |_c: TaskContext, _t: Task| async {
        panic!("peer panic");
    });
    mux
}

/// Wire spec §16 checks 6, 7, 9, 12: Go enqueues one task per scenario
/// (success, retry, exhausted retries, wrapped SkipRetry, RevokeTask, panic)
/// on two fresh databases; our server processes one set, Go's server the
/// other. Go's Inspector sees the same outcome on both: state, Retried,
/// MaxRetry, LastErr (panic: up to the location), payload, headers,
/// NextProcessAt − LastFailedAt (the fixed 1 h delay), a task that is gone
/// for success and revoke, and the same queue statistics (pending … archived,
/// processed and failed today and in total).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_sees_the_same_outcomes_from_our_server_as_from_go_server() {
    // (queue = task type, Go behaviour, max retry)
    let scenarios = [
        ("success", "ok", "3"),
        ("retry", "fail", "3"),
        ("exhausted", "fail", "0"),
        ("skip", "skip", "3"),
        ("revoke", "revoke", "3"),
        ("panic", "panic", "3"),
    ];
    let ours = support::redis();
    let theirs = support::redis();
    let mut ids: Vec<(String, String)> = Vec::new();
    for (q, _, max) in scenarios {
        let args = [
            "--type",
            q,
            "--queue",
            q,
            "--payload",
            "p",
            "--max-retry",
            max,
            "--header",
            "trace=1",
        ];
        ids.push((go_enqueue(&ours, &args), go_enqueue(&theirs, &args)));
    }

    // Go's server: one run per scenario, each handling exactly its one task.
    let go_runs: Vec<_> = scenarios
        .iter()
        .map(|(q, behaviour, _)| {
            let db = theirs.clone();
            let (q, behaviour) = (q.to_string(), behaviour.to_string());
            std::thread::spawn(move || {
                db.peer_lines(&[
                    "work",
                    "--queues",
                    &q,
                    "--behaviour",
                    &behaviour,
                    "--count",
                    "1",
                    "--retry-delay",
                    "1h",
                    "--max-duration",
                    "10s",
                ])
            })
        })
        .collect();

    let queues: Vec<&str> = scenarios.iter().map(|s| s.0).collect();
    let server = start(&ours, fast(&queues), scenario_mux()).await;
    for (q, _, _) in scenarios {
        until(&format!("our server settles {q}"), || {
            let v = go_queue(&ours, q);
            (v["processed_total"] == 1 && v["pending"] == 0 && v["active"] == 0).then_some(())
        })
        .await;
    }
    server.shutdown_within(WAIT).await;
    for run in go_runs {
        assert_eq!(run.join().unwrap().len(), 1, "Go handled its one task");
    }

    for ((q, _, _), (our_id, go_id)) in scenarios.iter().zip(&ids) {
        assert_eq!(go_queue(&ours, q), go_queue(&theirs, q), "queue {q}");
        let mine = go_task(&ours, q, our_id);
        let go = go_task(&theirs, q, go_id);
        match (q, &mine, &go) {
            (&"success" | &"revoke", None, None) => {}
            (_, Some(mine), Some(go)) => {
                assert_eq!(comparable(mine), comparable(go), "task of {q}");
            }
            _ => panic!("{q}: ours {mine:?}, Go {go:?}"),
        }
    }
    // Spot checks of the values both sides agree on.
    let v = go_task(&ours, "retry", &ids[1].0).unwrap();
    assert_eq!(
        (&v["state"], &v["retried"], &v["last_err"]),
        (&"retry".into(), &1.into(), &"peer failure".into())
    );
    assert_eq!(
        v["next_process_at"].as_i64().unwrap() - v["last_failed_at"].as_i64().unwrap(),
        3600
    );
    let v = go_task(&ours, "skip", &ids[3].0).unwrap();
    assert_eq!(
        (&v["state"], &v["retried"], &v["last_err"]),
        (
            &"archived".into(),
            &0.into(),
            &"peer skip: skip retry for the task".into()
        )
    );
    let v = go_task(&ours, "panic", &ids[5].0).unwrap();
    assert!(
        v["last_err"]
            .as_str()
            .unwrap()
            .starts_with("panic error cause by: panic ["),
        "{v}"
    );
    // Check 6: the daily counter our server wrote expires after 90 days.
    let mut conn = ours.raw().await;
    let day = chrono::Utc::now().date_naive();
    let ttl: i64 = conn.ttl(keys::processed_key("success", day)).await.unwrap();
    assert!((7_775_990..=7_776_000).contains(&ttl), "ttl {ttl}");
    let revoke = go_queue(&ours, "revoke");
    assert_eq!(
        (&revoke["processed"], &revoke["failed"]),
        (&1.into(), &0.into())
    );
}

/// Go's server and ours consume one queue together: 400 tasks, both with
/// concurrency 4; every task is handled exactly once across the two (Go
/// prints one line per task it handles, we record ours), both take part,
/// processed total is 400 and nothing is left in the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_and_our_server_share_one_queue_without_loss_or_duplicates() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let go = db.peer_spawn(&[
        "work",
        "--concurrency",
        "4",
        "--count",
        "400",
        "--behaviour",
        "sleep:10ms",
        "--task-check-interval",
        "100ms",
        "--max-duration",
        "60s",
    ]);
    let seen: Arc<Mutex<HashSet<String>>> = Arc::default();
    let dups = Arc::new(AtomicU32::new(0));
    let (s, d) = (seen.clone(), dups.clone());
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let (s, d) = (s.clone(), d.clone());
        async move {
            if !s.lock().unwrap().insert(ctx.task_id().to_string()) {
                d.fetch_add(1, Ordering::SeqCst);
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(())
        }
    });
    let server = start(&db, fast(&["default"]), mux).await;
    // Let the Go server start before the work arrives.
    until("Go server up", || {
        let s = db.peer_ok(&["inspect", "servers"]);
        (s.as_array().unwrap().len() == 2).then_some(())
    })
    .await;
    let mut all = HashSet::new();
    for i in 0..400 {
        let info = client
            .enqueue(
                &Task::new("job", format!("{i}").into_bytes()),
                EnqueueOptions::new(),
            )
            .await
            .unwrap();
        all.insert(info.id);
    }
    until("all 400 processed", || {
        let q = go_queue(&db, "default");
        (q["processed_total"] == 400 && q["size"] == 0).then_some(())
    })
    .await;
    server.shutdown_within(WAIT).await;
    let out = go.terminate();
    assert!(out.status.success());
    let mut go_ids = HashSet::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(
            go_ids.insert(v["id"].as_str().unwrap().to_string()),
            "Go ran {line} twice"
        );
    }
    let ours = seen.lock().unwrap().clone();
    assert_eq!(dups.load(Ordering::SeqCst), 0, "we ran a task twice");
    assert!(ours.is_disjoint(&go_ids), "a task ran on both servers");
    assert_eq!(ours.len() + go_ids.len(), 400);
    let union: HashSet<String> = ours.union(&go_ids).cloned().collect();
    assert_eq!(union, all);
    assert!(!ours.is_empty() && !go_ids.is_empty(), "both took part");
    let q = go_queue(&db, "default");
    assert_eq!(
        (
            &q["processed_total"],
            &q["failed_total"],
            &q["pending"],
            &q["active"]
        ),
        (&400.into(), &0.into(), &0.into(), &0.into())
    );
}

/// Wire spec §16 check 17: Go's `Inspector.Servers` lists our running
/// server with host, pid, concurrency, queues, strict flag, status active,
/// start time and the running task as its active worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_lists_our_running_server_and_its_active_worker() {
    let db = support::redis();
    let id = go_enqueue(
        &db,
        &[
            "--type",
            "slow",
            "--queue",
            "critical",
            "--payload",
            "xyz",
            "--timeout",
            "90s",
        ],
    );
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
        queues: [("critical".to_string(), 6), ("default".to_string(), 3)].into(),
        strict_priority: true,
        ..fast(&[])
    };
    let before = chrono::Utc::now().timestamp();
    let server = start(&db, config, mux).await;
    let servers = until("Go lists our server with one worker", || {
        let s = db.peer_ok(&["inspect", "servers"]);
        (s[0]["active_workers"].as_array().map(Vec::len) == Some(1)).then_some(s)
    })
    .await;
    assert_eq!(servers.as_array().unwrap().len(), 1);
    let s = &servers[0];
    assert_eq!(s["host"], hostname());
    assert_eq!(s["pid"], std::process::id());
    assert_eq!(s["concurrency"], 7);
    assert_eq!(
        serde_json::from_value::<BTreeMap<String, i32>>(s["queues"].clone()).unwrap(),
        BTreeMap::from([("critical".to_string(), 6), ("default".to_string(), 3)])
    );
    assert_eq!(s["strict_priority"], true);
    assert_eq!(s["status"], "active");
    let started = s["started"].as_i64().unwrap();
    assert!(started >= before - 1 && started <= chrono::Utc::now().timestamp());
    assert!(!s["server_id"].as_str().unwrap().is_empty());
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
            &"critical".into(),
            &"xyz".into()
        )
    );
    assert_eq!(
        w["deadline"].as_i64().unwrap() - w["started"].as_i64().unwrap(),
        90
    );
    release.notify_one();
    until("task done", || {
        go_task(&db, "critical", &id).is_none().then_some(())
    })
    .await;
    server.shutdown_within(WAIT).await;
    assert_eq!(db.peer_ok(&["inspect", "servers"]), Value::Array(vec![]));
}

/// Wire spec §16 check 20: headers set by Go's `NewTaskWithHeaders` reach
/// our handler; after our retry Go still sees them (and so does our handler
/// on the next attempt).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_headers_reach_our_handler_and_survive_our_retry() {
    let db = support::redis();
    let id = go_enqueue(
        &db,
        &[
            "--type",
            "traced",
            "--payload",
            "p",
            "--header",
            "trace=1",
            "--header",
            "tenant=acme",
        ],
    );
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("traced", move |ctx: TaskContext, t: Task| {
        let s = s.clone();
        async move {
            s.lock()
                .unwrap()
                .push((ctx.retry_count(), t.headers().clone()));
            if ctx.retry_count() == 0 {
                Err(anyhow::anyhow!("peer failure"))
            } else {
                Ok(())
            }
        }
    });
    let server = start(&db, fast(&["default"]), mux).await;
    let v = until("Go sees the retry", || {
        go_task(&db, "default", &id).filter(|v| v["state"] == "retry")
    })
    .await;
    let expected = BTreeMap::from([
        ("tenant".to_string(), "acme".to_string()),
        ("trace".to_string(), "1".to_string()),
    ]);
    assert_eq!(
        serde_json::from_value::<BTreeMap<String, String>>(v["headers"].clone()).unwrap(),
        expected
    );
    assert_eq!(
        (&v["retried"], &v["last_err"]),
        (&1.into(), &"peer failure".into())
    );
    db.peer_ok(&["inspect", "run", "--queue", "default", "--id", &id]);
    until("second attempt done", || {
        go_task(&db, "default", &id).is_none().then_some(())
    })
    .await;
    server.shutdown_within(WAIT).await;
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(0, expected.clone()), (1, expected)]
    );
}

/// Wire spec §16 check 15: Go's `CancelProcessing` of a task running in our
/// server cancels its context; the task goes to retry with `context
/// canceled`, as Go's Inspector shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_cancel_processing_reaches_our_running_handler() {
    let db = support::redis();
    let id = go_enqueue(&db, &["--type", "slow", "--payload", "p"]);
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut mux = ServeMux::new();
    mux.handle_fn("slow", move |ctx: TaskContext, _t: Task| {
        let tx = tx.clone();
        async move {
            let _ = tx.send(ctx.task_id().to_string());
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(())
        }
    });
    let server = start(&db, fast(&["default"]), mux).await;
    assert_eq!(rx.recv().await.unwrap(), id);
    // Our subscriber may not be listening yet: cancel until it lands.
    let v = until("cancelled task in retry", || {
        db.peer_ok(&["inspect", "cancel", "--id", &id]);
        go_task(&db, "default", &id).filter(|v| v["state"] == "retry")
    })
    .await;
    assert_eq!(
        (&v["last_err"], &v["retried"]),
        (&"context canceled".into(), &1.into())
    );
    assert_eq!(
        v["next_process_at"].as_i64().unwrap() - v["last_failed_at"].as_i64().unwrap(),
        3600
    );
    server.shutdown_within(WAIT).await;
}

/// Wire spec §16 check 14: after Go's `PauseQueue` our server dequeues
/// nothing from that queue (while it keeps serving another); after Go's
/// `UnpauseQueue` it processes the waiting tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_pause_stops_our_server_and_unpause_resumes_it() {
    let db = support::redis();
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c = calls.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let c = c.clone();
        async move {
            c.lock().unwrap().push(ctx.queue().to_string());
            Ok(())
        }
    });
    let first = go_enqueue(&db, &["--type", "job", "--payload", "0"]);
    db.peer_ok(&["inspect", "pause", "--queue", "default"]);
    let server = start(&db, fast(&["default", "other"]), mux).await;
    let paused: Vec<String> = (1..3)
        .map(|i| go_enqueue(&db, &["--type", "job", "--payload", &i.to_string()]))
        .collect();
    let other = go_enqueue(&db, &["--type", "job", "--queue", "other"]);
    until("the unpaused queue is served", || {
        go_task(&db, "other", &other).is_none().then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let q = go_queue(&db, "default");
    assert_eq!(
        (&q["paused"], &q["pending"], &q["processed_total"]),
        (&true.into(), &3.into(), &0.into())
    );
    assert_eq!(*calls.lock().unwrap(), vec!["other"]);

    db.peer_ok(&["inspect", "unpause", "--queue", "default"]);
    until("paused tasks processed", || {
        let q = go_queue(&db, "default");
        (q["processed_total"] == 3 && q["size"] == 0).then_some(())
    })
    .await;
    for id in paused.iter().chain([&first]) {
        assert!(go_task(&db, "default", id).is_none());
    }
    server.shutdown_within(WAIT).await;
    assert_eq!(calls.lock().unwrap().len(), 4);
}

/// Wire spec §16 check 13: a task our server leased, whose worker then
/// died (runtime shut down in the background: no cleanup, like SIGKILL) and
/// whose lease score is moved 2 minutes into the past, shows as orphaned to
/// Go's Inspector and is recovered by Go's server into retry with `asynq:
/// task lease expired` and Retried 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn go_recovers_a_task_our_dead_server_leased() {
    let db = support::redis();
    let id = go_enqueue(
        &db,
        &["--type", "work", "--payload", "p", "--max-retry", "2"],
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let url = db.url();
    rt.spawn(async move {
        let tx = Arc::new(Mutex::new(Some(tx)));
        let mut mux = ServeMux::new();
        mux.handle_fn("work", move |_c: TaskContext, _t: Task| {
            let tx = tx.clone();
            async move {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                std::future::pending::<()>().await;
                Ok(())
            }
        });
        let server = Server::connect(&url, fast(&["default"])).await.unwrap();
        server.run_until(mux, std::future::pending()).await
    });
    tokio::time::timeout(WAIT, rx).await.unwrap().unwrap();
    rt.shutdown_background();

    let mut conn = db.raw().await;
    let past = chrono::Utc::now().timestamp() - 120;
    let _: () = conn
        .zadd(keys::lease_key("default"), &id, past)
        .await
        .unwrap();
    let active = db.peer_ok(&["inspect", "list", "--queue", "default", "--state", "active"]);
    assert_eq!(active[0]["id"], id);
    assert_eq!(active[0]["is_orphaned"], true);

    let handled = db.peer_lines(&["work", "--retry-delay", "1h", "--max-duration", "1s"]);
    assert!(handled.is_empty(), "Go ran nothing: {handled:?}");
    let v = go_task(&db, "default", &id).unwrap();
    assert_eq!(
        (&v["state"], &v["retried"], &v["max_retry"], &v["last_err"]),
        (
            &"retry".into(),
            &1.into(),
            &2.into(),
            &"asynq: task lease expired".into()
        )
    );
    assert_eq!(
        v["next_process_at"].as_i64().unwrap() - v["last_failed_at"].as_i64().unwrap(),
        3600
    );
    let q = go_queue(&db, "default");
    assert_eq!(
        (
            &q["active"],
            &q["retry"],
            &q["processed_total"],
            &q["failed_total"]
        ),
        (&0.into(), &1.into(), &1.into(), &1.into())
    );
}
