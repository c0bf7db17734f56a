//! Corrupt data in every state (issue 12; COMPATIBILITY.md A2: no route
//! answers 5xx because of data in Redis).
//!
//! Queue `mixed` holds valid tasks (pending, scheduled due in 2 s, retry
//! due now) beside, in every state (pending, active with a lease,
//! scheduled, retry, archived, completed, aggregating), three bad entries:
//! a task hash whose `msg` is random bytes, a task key of the wrong type
//! (a string), and an id whose task hash is missing; its daily processed
//! counter is `notanumber` (R6). Queue `wrongtype` has every container key
//! of the wrong type (`pending` a string, `active` a hash, `scheduled` a
//! list, ...), its `paused` key a hash and its `groups` a string.
//!
//! Asserts: every read route (`support::routes::reads`) over both queues
//! and the global pages answers below 500; an in-process [`Server`]
//! serving both queues processes every valid task within 60 s; then every
//! mutating route (`support::routes::writes`) answers below 500 too.
//!
//! [`go_peer`] seeds the same data and lets a Go asynq v0.26.0 worker
//! process (the peer, `go_worker.rs`) serve both queues for 60 s instead:
//! it reports how many valid tasks Go processed, where the others are,
//! whether the process is still running and what it logged. The HTTP part
//! has no Go counterpart there (asynqmon is not in the peer).

use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::broker::proto::{TaskMessage, WireTask};
use asynqdeck::server::Server;
use asynqdeck::web::{AppState, WebConfig, router};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use rand::{Rng, SeedableRng};

use super::go_worker::GoWorker;
use super::procs::RedisProc;
use super::record::{Recorder, figure, raw, wait_until};
use super::support::routes::{Subject, TABS, get, reads, send, writes};
use super::worker::chaos_config;

const MIXED: &str = "mixed";
const WRONG: &str = "wrongtype";

/// Where an id of `tab` lives in queue `q` (the group `g` for aggregating).
fn container(q: &str, tab: &str) -> String {
    match tab {
        "aggregating" => keys::group_key(q, "g"),
        other => format!("{}{other}", keys::queue_prefix(q)),
    }
}

/// Adds `id` to the container of `tab` (with a lease for active).
async fn place(c: &mut redis::aio::MultiplexedConnection, q: &str, tab: &str, id: &str) {
    let key = container(q, tab);
    let now = chrono::Utc::now().timestamp();
    let mut p = redis::pipe();
    match tab {
        "pending" | "active" => {
            p.cmd("LPUSH").arg(&key).arg(id);
        }
        _ => {
            p.cmd("ZADD").arg(&key).arg(now).arg(id);
        }
    }
    if tab == "active" {
        p.cmd("ZADD")
            .arg(format!("{}lease", keys::queue_prefix(q)))
            .arg(now + 3600)
            .arg(id);
    }
    if tab == "aggregating" {
        p.cmd("SADD").arg(keys::all_groups_key(q)).arg("g");
    }
    let () = p.query_async(c).await.unwrap();
}

/// A valid task hash of `tab` (Go's fields: msg, state).
async fn valid(c: &mut redis::aio::MultiplexedConnection, q: &str, tab: &str, id: &str) {
    let msg = WireTask {
        msg: TaskMessage {
            r#type: "chaos:task".into(),
            payload: id.as_bytes().to_vec(),
            id: id.into(),
            queue: q.into(),
            retry: 25,
            timeout: 1800,
            ..Default::default()
        },
        unknown: Vec::new(),
    };
    let () = redis::cmd("HSET")
        .arg(keys::task_key(q, id))
        .arg("msg")
        .arg(msg.encode())
        .arg("state")
        .arg(tab)
        .query_async(c)
        .await
        .unwrap();
    place(c, q, tab, id).await;
}

async fn corrupt_subjects(url: &str) -> (Vec<String>, Subject, Subject) {
    let mut c = raw(url).await.unwrap();
    let client = Client::connect(url).await.unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(12);
    let mut valid_ids = Vec::new();
    for i in 0..20 {
        let info = client
            .enqueue(
                &Task::new("chaos:task", format!("p{i}").into_bytes()),
                EnqueueOptions::new().queue(MIXED),
            )
            .await
            .unwrap();
        valid_ids.push(info.id);
    }
    for i in 0..5 {
        let info = client
            .enqueue(
                &Task::new("chaos:task", format!("s{i}").into_bytes()),
                EnqueueOptions::new()
                    .queue(MIXED)
                    .process_in(Duration::from_secs(2)),
            )
            .await
            .unwrap();
        valid_ids.push(info.id);
        let id = format!("valid-retry-{i}");
        valid(&mut c, MIXED, "retry", &id).await;
        valid_ids.push(id);
    }
    let mut tasks = Vec::new();
    for tab in TABS {
        let garbage = format!("garbage-{tab}");
        let len = rng.random_range(1..200);
        let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let () = redis::cmd("HSET")
            .arg(keys::task_key(MIXED, &garbage))
            .arg("msg")
            .arg(bytes)
            .arg("state")
            .arg(tab)
            .query_async(&mut c)
            .await
            .unwrap();
        place(&mut c, MIXED, tab, &garbage).await;
        let wrong = format!("wrongtype-{tab}");
        let () = redis::cmd("SET")
            .arg(keys::task_key(MIXED, &wrong))
            .arg("not a hash")
            .query_async(&mut c)
            .await
            .unwrap();
        place(&mut c, MIXED, tab, &wrong).await;
        let missing = format!("missing-{tab}");
        place(&mut c, MIXED, tab, &missing).await;
        for id in [garbage, wrong, missing] {
            tasks.push((tab.to_string(), id));
        }
    }
    let today = chrono::Utc::now().date_naive();
    let () = redis::cmd("SET")
        .arg(keys::processed_key(MIXED, today))
        .arg("notanumber")
        .query_async(&mut c)
        .await
        .unwrap();
    tasks.push(("pending".into(), valid_ids[0].clone()));

    // `wrongtype`: every container of the wrong type.
    let p = keys::queue_prefix(WRONG);
    let mut pipe = redis::pipe();
    pipe.cmd("SADD").arg("asynq:queues").arg(WRONG).ignore();
    pipe.cmd("SET").arg(format!("{p}pending")).arg("x").ignore();
    pipe.cmd("HSET")
        .arg(format!("{p}active"))
        .arg("a")
        .arg("b")
        .ignore();
    pipe.cmd("RPUSH")
        .arg(format!("{p}scheduled"))
        .arg("x")
        .ignore();
    pipe.cmd("SET").arg(format!("{p}retry")).arg("x").ignore();
    pipe.cmd("SADD")
        .arg(format!("{p}archived"))
        .arg("x")
        .ignore();
    pipe.cmd("RPUSH")
        .arg(format!("{p}completed"))
        .arg("x")
        .ignore();
    pipe.cmd("SET").arg(format!("{p}lease")).arg("x").ignore();
    pipe.cmd("HSET")
        .arg(format!("{p}paused"))
        .arg("a")
        .arg("b")
        .ignore();
    pipe.cmd("SET").arg(format!("{p}groups")).arg("x").ignore();
    pipe.cmd("SET")
        .arg(keys::group_key(WRONG, "g"))
        .arg("x")
        .ignore();
    pipe.cmd("SET")
        .arg(keys::processed_total_key(WRONG))
        .arg("many")
        .ignore();
    let () = pipe.query_async(&mut c).await.unwrap();

    let subject = |queue: &str, tasks| Subject {
        queue: queue.into(),
        group: "g".into(),
        entry: "no-such-entry".into(),
        tasks,
    };
    let wrong_tasks = vec![("pending".to_string(), "x".to_string())];
    (
        valid_ids,
        subject(MIXED, tasks),
        subject(WRONG, wrong_tasks),
    )
}

pub async fn run() {
    let name = "corrupt";
    let redis = RedisProc::start(false);
    let url = redis.url();
    let (valid_ids, mixed, wrong) = corrupt_subjects(&url).await;

    let inspector = Inspector::connect(&url).await.unwrap();
    let state = AppState::new(
        inspector,
        WebConfig {
            poll_interval: Duration::ZERO,
            ..WebConfig::default()
        },
    );
    let csrf = state.csrf_token.to_string();
    let app = router(state);

    let mut failures = Vec::new();
    let mut sent = 0;
    let mut read_routes: Vec<String> = reads(&mixed);
    read_routes.extend(reads(&wrong));
    read_routes.sort();
    read_routes.dedup();
    for uri in &read_routes {
        let (status, body) = send(&app, &get(uri.clone()), &csrf).await;
        sent += 1;
        if status.is_server_error() {
            failures.push(format!("GET {uri} -> {status}: {}", body.trim()));
        }
    }

    let rec = Recorder::default();
    let mut config = chaos_config(MIXED, 10);
    config.queues.insert(WRONG.into(), 1);
    let server = Server::connect(&url, config).await.unwrap();
    let shutdown = server.shutdown_handle();
    let mux = rec.mux(Duration::from_millis(1));
    let worker = tokio::spawn(async move { server.run_until(mux, std::future::pending()).await });
    let (r, ids) = (&rec, &valid_ids);
    let all = wait_until(Duration::from_secs(60), move || async move {
        let snap = r.snapshot();
        ids.iter()
            .all(|id| snap.get(id).is_some_and(|e| e.done > 0))
    })
    .await;
    let snap = rec.snapshot();
    let unprocessed: Vec<&String> = valid_ids
        .iter()
        .filter(|id| snap.get(*id).is_none_or(|e| e.done == 0))
        .collect();
    shutdown.shutdown();
    let _ = worker.await;

    for req in writes(&mixed).iter().chain(writes(&wrong).iter()) {
        let (status, body) = send(&app, req, &csrf).await;
        sent += 1;
        if status.is_server_error() {
            failures.push(format!(
                "{} {} -> {status}: {}",
                req.method,
                req.uri,
                body.trim()
            ));
        }
    }
    drop(redis);

    figure(name, "requests", sent);
    figure(name, "responses_5xx", failures.len());
    figure(name, "valid_tasks", valid_ids.len());
    figure(name, "valid_tasks_unprocessed", unprocessed.len());
    for f in &failures {
        println!("  5xx: {f}");
    }
    if !unprocessed.is_empty() {
        println!("  unprocessed: {unprocessed:?}");
    }
    assert!(
        failures.is_empty(),
        "{} of {sent} requests answered 5xx over corrupt data",
        failures.len()
    );
    assert!(
        all,
        "{} of {} valid tasks not processed within 60 s: {unprocessed:?}",
        unprocessed.len(),
        valid_ids.len()
    );
}

/// The same data served by a Go asynq v0.26.0 worker, for RELIABILITY.md.
/// Fails only when the run did not measure (the peer did not start).
pub async fn go_peer() {
    let name = "go_corrupt";
    let done_key = "chaos:{results}:done";
    let redis = RedisProc::start(false);
    let url = redis.url();
    let (valid_ids, _, _) = corrupt_subjects(&url).await;
    let mut w = GoWorker::start(
        &redis.addr(),
        &format!("{MIXED}=10,{WRONG}=1"),
        10,
        Duration::from_millis(1),
        done_key,
    );
    let done = || async {
        let mut c = raw(&url).await.unwrap();
        let d: std::collections::HashMap<String, u32> = redis::cmd("HGETALL")
            .arg(done_key)
            .query_async(&mut c)
            .await
            .unwrap();
        d
    };
    let started = wait_until(Duration::from_secs(30), || async {
        !w.rec.snapshot().is_empty()
    })
    .await;
    let all = wait_until(Duration::from_secs(60), || async {
        let d = done().await;
        valid_ids.iter().all(|id| d.contains_key(id))
    })
    .await;
    let d = done().await;
    let unprocessed: Vec<&String> = valid_ids.iter().filter(|id| !d.contains_key(*id)).collect();
    let mut c = raw(&url).await.unwrap();
    let mut where_left = Vec::new();
    for id in &unprocessed {
        let mut state = "nowhere";
        for tab in ["pending", "active", "scheduled", "retry", "archived"] {
            let key = container(MIXED, tab);
            let here: bool = if matches!(tab, "pending" | "active") {
                let pos: Option<i64> = redis::cmd("LPOS")
                    .arg(&key)
                    .arg(id.as_str())
                    .query_async(&mut c)
                    .await
                    .unwrap();
                pos.is_some()
            } else {
                let score: Option<f64> = redis::cmd("ZSCORE")
                    .arg(&key)
                    .arg(id.as_str())
                    .query_async(&mut c)
                    .await
                    .unwrap();
                score.is_some()
            };
            if here {
                state = tab;
                break;
            }
        }
        where_left.push(format!("{id}: {state}"));
    }
    let exited = w.exited();
    figure(name, "valid_tasks", valid_ids.len());
    figure(
        name,
        "valid_tasks_processed",
        valid_ids.len() - unprocessed.len(),
    );
    figure(name, "valid_tasks_unprocessed", unprocessed.len());
    figure(name, "all_within_60s", all);
    figure(name, "go_exited", format!("{exited:?}"));
    for l in &where_left {
        println!("  unprocessed: {l}");
    }
    w.report_stderr(name, 12);
    drop(w);
    drop(redis);
    assert!(started, "the Go worker handled no task within 30 s");
}
