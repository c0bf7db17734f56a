//! Issue 12, worker engine (R1, R2, R3, R5, R6, R7): each test names its
//! item and failed before that item's fix. Real Redis per test database;
//! every wait is for a state, with a generous deadline.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::server::{
    Config, ErrorHandler, Handler, ServeMux, SkipRetry, TaskContext, TaskError, handler_fn,
};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};
use futures_util::future::BoxFuture;
use redis::AsyncCommands;

use crate::support;
use crate::support::server::start;

/// The task's info once `ok` holds for it (30 s at most).
async fn task_when(
    inspector: &Inspector,
    queue: &str,
    id: &str,
    ok: impl Fn(&asynqdeck::TaskInfo) -> bool,
) -> Option<asynqdeck::TaskInfo> {
    support::eventually(Duration::from_secs(30), || async {
        let t = inspector.get_task_info(queue, id).await.ok()?;
        ok(&t).then_some(t)
    })
    .await
}

/// A handler whose `process_task` panics before it returns a future.
struct PanicsWhileBuilding;

impl Handler for PanicsWhileBuilding {
    fn process_task(
        &self,
        _ctx: TaskContext,
        _task: Task,
    ) -> BoxFuture<'static, Result<(), TaskError>> {
        panic!("building the future");
    }
}

/// R1: a panic in handler code in any phase — while the handler builds its
/// future, while a middleware builds its wrapper, while the future is
/// polled, in a type learned quick (whose first poll may run inline in the
/// fetch loop) — ends as a PanicError failure (S25): the error handler
/// runs, the task is archived at MaxRetry 0 with the panic's location, and
/// nothing is left active.
#[tokio::test]
async fn r1_a_panic_in_any_phase_of_handler_code_is_a_panic_error_failure() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let mut mux = ServeMux::new();
    mux.handle("build", PanicsWhileBuilding);
    mux.handle_fn("poll", |_ctx: TaskContext, _t: Task| async {
        panic!("polling the future");
    });
    // A quick type: plain tasks teach it quick, then one panics while
    // its future is built.
    mux.handle_fn("quick", |_ctx: TaskContext, t: Task| {
        if t.payload() == b"panic" {
            panic!("building a quick future");
        }
        async { Ok(()) }
    });
    mux.handle_fn("mw", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    // A middleware that panics while it wraps tasks of type "mw".
    mux.use_middleware(|next: Arc<dyn Handler>| {
        Arc::new(handler_fn(move |ctx, task: Task| {
            if task.type_name() == "mw" {
                panic!("middleware building its wrapper");
            }
            next.process_task(ctx, task)
        })) as Arc<dyn Handler>
    });
    let seen: Arc<Mutex<Vec<(String, bool)>>> = Arc::default();
    let s = seen.clone();
    let error_handler: ErrorHandler = Arc::new(move |ctx, _task, err| {
        s.lock().unwrap().push((
            ctx.task_id().to_string(),
            asynqdeck::server::is_panic_error(err),
        ));
    });
    let config = Config {
        concurrency: 4,
        error_handler: Some(error_handler),
        ..Config::default()
    };
    let server = start(&db, config, mux).await;
    for _ in 0..100 {
        client
            .enqueue(&Task::new("quick", b"ok".to_vec()), EnqueueOptions::new())
            .await
            .unwrap();
    }
    let mut ids = Vec::new();
    for (t, payload, message) in [
        ("build", "x", "building the future"),
        ("mw", "x", "middleware building its wrapper"),
        ("poll", "x", "polling the future"),
        ("quick", "panic", "building a quick future"),
    ] {
        let info = client
            .enqueue(
                &Task::new(t, payload.as_bytes().to_vec()),
                EnqueueOptions::new().max_retry(0),
            )
            .await
            .unwrap();
        ids.push((t, info.id, message));
    }
    for (t, id, message) in &ids {
        let info = task_when(&inspector, "default", id, |t| {
            t.state == TaskState::Archived
        })
        .await
        .unwrap_or_else(|| panic!("the {t} task was never archived"));
        assert!(
            info.last_err.starts_with("panic error cause by: panic [")
                && info.last_err.contains("reliability_engine.rs:")
                && info.last_err.ends_with(&format!("]: {message}")),
            "{t}: {}",
            info.last_err
        );
    }
    let q = inspector.queue_info("default").await.unwrap();
    server.stop().await;
    assert_eq!(
        (q.active, q.pending, q.archived, q.processed, q.failed),
        (0, 0, 4, 104, 4)
    );
    let mut got = seen.lock().unwrap().clone();
    got.sort();
    let mut want: Vec<(String, bool)> = ids.iter().map(|(_, id, _)| (id.clone(), true)).collect();
    want.sort();
    assert_eq!(
        got, want,
        "the error handler ran once per panic, with a PanicError"
    );
}

/// Waits until `n` handlers have started and the server listens on
/// `asynq:cancel`.
async fn started_and_subscribed(db: &support::TestDb, started: &AtomicU32, n: u32) {
    let conn = db.raw().await;
    let ready = support::eventually(Duration::from_secs(30), || {
        let mut conn = conn.clone();
        async move {
            let subs: Vec<(String, i64)> = redis::cmd("PUBSUB")
                .arg("NUMSUB")
                .arg("asynq:cancel")
                .query_async(&mut conn)
                .await
                .ok()?;
            (started.load(Ordering::SeqCst) == n && subs[0].1 > 0).then_some(())
        }
    })
    .await;
    assert!(ready.is_some(), "{n} handlers running and subscribed");
}

/// R2: a running task cancelled (`asynq:cancel`) whose handler then returns
/// a SkipRetry error is retried with `context canceled`, never archived:
/// the cancellation is taken first, as Go's worker does. 40 tasks at once,
/// each cancelled; the unfixed, unbiased choice archived about one in
/// three.
#[tokio::test]
async fn r2_cancel_then_skip_retry_is_always_an_ordinary_retry() {
    const N: u32 = 40;
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let started = Arc::new(AtomicU32::new(0));
    let mut mux = ServeMux::new();
    let s = started.clone();
    mux.handle_fn("t", move |ctx: TaskContext, _t: Task| {
        let s = s.clone();
        async move {
            s.fetch_add(1, Ordering::SeqCst);
            ctx.cancelled().await;
            Err(anyhow::Error::new(SkipRetry).context("gave up"))
        }
    });
    let config = Config {
        concurrency: N as usize,
        retry_delay_func: Arc::new(|_, _, _| Duration::from_secs(3600)),
        ..Config::default()
    };
    let server = start(&db, config, mux).await;
    let mut ids = Vec::new();
    for _ in 0..N {
        let info = client
            .enqueue(&Task::new("t", vec![]), EnqueueOptions::new().max_retry(5))
            .await
            .unwrap();
        ids.push(info.id);
    }
    started_and_subscribed(&db, &started, N).await;
    for id in &ids {
        inspector.cancel_processing(id).await.unwrap();
    }
    let mut outcomes = Vec::new();
    for id in &ids {
        let info = task_when(&inspector, "default", id, |t| t.state != TaskState::Active)
            .await
            .expect("the task left active");
        outcomes.push((info.state, info.retried, info.last_err));
    }
    server.stop().await;
    let archived = outcomes
        .iter()
        .filter(|o| o.0 == TaskState::Archived)
        .count();
    assert_eq!(archived, 0, "archived {archived} of {N}: {outcomes:?}");
    for o in outcomes {
        assert_eq!(o, (TaskState::Retry, 1, "context canceled".to_string()));
    }
}

/// R3: a health-check callback that panics does not end the health check:
/// it is called again at the next interval, and again.
#[tokio::test]
async fn r3_a_panicking_health_check_keeps_checking() {
    let db = support::redis();
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("t", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    let config = Config {
        concurrency: 1,
        health_check_interval: Duration::from_millis(20),
        health_check_func: Some(Arc::new(move |err| {
            let n = c.fetch_add(1, Ordering::SeqCst);
            assert!(err.is_none(), "Redis is up");
            if n < 3 {
                panic!("health check callback panicked ({n})");
            }
        })),
        ..Config::default()
    };
    let server = start(&db, config, mux).await;
    let checked = support::eventually(Duration::from_secs(30), || async {
        (calls.load(Ordering::SeqCst) >= 5).then_some(())
    })
    .await;
    server.stop().await;
    assert!(
        checked.is_some(),
        "the health check stopped after {} calls",
        calls.load(Ordering::SeqCst)
    );
}

/// R7: a result written after the task's hash was deleted (the task was
/// deleted while it ran) creates no hash: the handler's write fails with
/// `Error::TaskNotFound`, and no key holding only `result` appears.
#[tokio::test]
async fn r7_a_result_written_after_the_task_was_deleted_creates_no_hash() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let (go_tx, go_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let go_rx = Arc::new(tokio::sync::Mutex::new(go_rx));
    let (res_tx, mut res_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let started = Arc::new(AtomicU32::new(0));
    let mut mux = ServeMux::new();
    let s = started.clone();
    mux.handle_fn("t", move |ctx: TaskContext, _t: Task| {
        let (go_rx, res_tx, s) = (go_rx.clone(), res_tx.clone(), s.clone());
        async move {
            let first = ctx.result_writer().write(b"while present").await;
            s.fetch_add(1, Ordering::SeqCst);
            go_rx.lock().await.recv().await;
            let late = ctx.result_writer().write(b"after delete").await;
            let _ = res_tx.send(format!("{first:?} / {late:?}"));
            // Still running while the test looks at the key.
            go_rx.lock().await.recv().await;
            Ok(())
        }
    });
    let config = Config {
        concurrency: 1,
        ..Config::default()
    };
    let server = start(&db, config, mux).await;
    let info = client
        .enqueue(&Task::new("t", vec![]), EnqueueOptions::new())
        .await
        .unwrap();
    let key = keys::task_key("default", &info.id);
    let running = support::eventually(Duration::from_secs(30), || async {
        (started.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    assert!(running.is_some(), "the handler started");
    let mut conn = db.raw().await;
    let result: Vec<u8> = conn.hget(&key, "result").await.unwrap();
    assert_eq!(result, b"while present");
    let _: () = conn.del(&key).await.unwrap();
    go_tx.send(()).unwrap();
    let outcome = tokio::time::timeout(Duration::from_secs(30), res_rx.recv())
        .await
        .expect("the handler wrote")
        .unwrap();
    let exists: bool = conn.exists(&key).await.unwrap();
    go_tx.send(()).unwrap();
    server.stop().await;
    assert_eq!(
        (outcome.as_str(), exists),
        (
            format!(
                "Ok(13) / Err(TaskNotFound {{ queue: \"default\", id: \"{}\" }})",
                info.id
            )
            .as_str(),
            false
        )
    );
}

/// R6: daily counters that are not integers (`notanumber`) and an all-time
/// counter of the wrong type never stop processing: 200 tasks through
/// every finishing path (done, completed with retention, retry, archive)
/// all reach their state; the bad counters are left as they are and
/// reported (once each); the good all-time failed counter counts exactly.
#[tokio::test]
async fn r6_bad_daily_counter_never_stops_processing() {
    let db = support::redis();
    let q = "r6-bad-counters";
    let client = Client::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let today = chrono::Utc::now().date_naive();
    let mut bad_strings = Vec::new();
    for day in [today, today.succ_opt().unwrap()] {
        bad_strings.push(keys::processed_key(q, day));
        bad_strings.push(keys::failed_key(q, day));
    }
    for k in &bad_strings {
        let _: () = conn.set(k, "notanumber").await.unwrap();
    }
    let total = keys::processed_total_key(q);
    let _: () = conn.rpush(&total, "a list").await.unwrap();
    let mut mux = ServeMux::new();
    mux.handle_fn("ok", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    mux.handle_fn("fail", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::anyhow!("failed"))
    });
    let config = Config {
        concurrency: 10,
        queues: [(q.to_string(), 1)].into(),
        // A failed lease call must not cost a wait of this (R5 aside).
        task_check_interval: Duration::from_secs(20),
        retry_delay_func: Arc::new(|_, _, _| Duration::from_secs(3600)),
        ..Config::default()
    };
    let server = start(&db, config, mux).await;
    for i in 0..200 {
        let (t, opts) = match i % 4 {
            0 => ("ok", EnqueueOptions::new()),
            1 => (
                "ok",
                EnqueueOptions::new().retention(Duration::from_secs(3600)),
            ),
            2 => ("fail", EnqueueOptions::new().max_retry(0)),
            _ => ("fail", EnqueueOptions::new().max_retry(5)),
        };
        client
            .enqueue(
                &Task::new(t, vec![]),
                opts.queue(q).task_id(format!("t{i}")),
            )
            .await
            .unwrap();
    }
    let sizes = |conn: crate::support::redis::RawConn| async move {
        let mut conn = conn;
        let p: i64 = conn.llen(keys::pending_key(q)).await.unwrap();
        let a: i64 = conn.llen(keys::active_key(q)).await.unwrap();
        let c: i64 = conn.zcard(keys::completed_key(q)).await.unwrap();
        let r: i64 = conn.zcard(keys::retry_key(q)).await.unwrap();
        let x: i64 = conn.zcard(keys::archived_key(q)).await.unwrap();
        let mut done = 0;
        for i in (0..200).step_by(4) {
            let gone: bool = conn
                .exists(keys::task_key(q, &format!("t{i}")))
                .await
                .unwrap();
            done += i64::from(!gone);
        }
        (p, a, c, r, x, done)
    };
    let finished = support::eventually(Duration::from_secs(30), || {
        let conn = conn.clone();
        async move {
            let s = sizes(conn).await;
            (s == (0, 0, 50, 50, 50, 50)).then_some(s)
        }
    })
    .await;
    let last = sizes(conn.clone()).await;
    server.stop().await;
    assert_eq!(
        finished,
        Some((0, 0, 50, 50, 50, 50)),
        "(pending, active, completed, retry, archived, done) = {last:?}"
    );
    for k in &bad_strings {
        let v: String = conn.get(k).await.unwrap();
        assert_eq!(v, "notanumber", "{k} left as it was");
    }
    let list: Vec<String> = conn.lrange(&total, 0, -1).await.unwrap();
    assert_eq!(list, ["a list"]);
    let failed: i64 = conn.get(keys::failed_total_key(q)).await.unwrap();
    assert_eq!(failed, 100, "the good counter counts every failure");
    let mut reported: Vec<String> = asynqdeck::broker::bad_counters()
        .into_iter()
        .filter(|k| k.contains(q))
        .collect();
    reported.sort();
    let mut want = vec![
        keys::processed_key(q, today),
        keys::failed_key(q, today),
        total.clone(),
    ];
    want.sort();
    // A run across midnight UTC also reports the next day's keys.
    reported.retain(|k| want.contains(k));
    assert_eq!(reported, want);
}

/// R5: a lease call that fails because Redis killed the connection is
/// retried at once. With a poll interval of 30 s (the old code left a
/// queue alone for that long after a failed call, and went idle as long),
/// the task after the kill still runs within seconds.
#[tokio::test]
async fn r5_a_killed_connection_is_retried_at_once_not_after_a_pause() {
    // A server of its own: CLIENT KILL reaches every client of a server.
    let db = support::private_redis();
    let client = Client::connect(&db.url()).await.unwrap();
    // Both pending before the server starts: no idle wake-up is involved.
    for id in ["a", "b"] {
        client
            .enqueue(&Task::new(id, vec![]), EnqueueOptions::new().task_id(id))
            .await
            .unwrap();
    }
    let (go_tx, go_rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let go_rx = Arc::new(tokio::sync::Mutex::new(go_rx));
    let started: Arc<Mutex<Vec<String>>> = Arc::default();
    let mut mux = ServeMux::new();
    let s = started.clone();
    mux.handle_fn("a", move |ctx: TaskContext, _t: Task| {
        let (go_rx, s) = (go_rx.clone(), s.clone());
        async move {
            s.lock().unwrap().push(ctx.task_id().to_string());
            go_rx.lock().await.recv().await;
            Ok(())
        }
    });
    let s = started.clone();
    mux.handle_fn("b", move |ctx: TaskContext, _t: Task| {
        s.lock().unwrap().push(ctx.task_id().to_string());
        async { Ok(()) }
    });
    let config = Config {
        concurrency: 1,
        task_check_interval: Duration::from_secs(30),
        ..Config::default()
    };
    let server = start(&db, config, mux).await;
    let running = support::eventually(Duration::from_secs(30), || async {
        (*started.lock().unwrap() == ["a"]).then_some(())
    })
    .await;
    assert!(running.is_some(), "a started; b waits for its permit");
    // Every normal connection but this one: the fetch loop's, the server's,
    // the waiters'.
    let mut conn = db.raw().await;
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("normal")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(killed >= 2, "killed {killed}");
    // a ends: its done and the next lease go out on the dead connection.
    go_tx.send(()).unwrap();
    let next = support::eventually(Duration::from_secs(10), || async {
        (started.lock().unwrap().len() == 2).then_some(())
    })
    .await;
    let seen = started.lock().unwrap().clone();
    server.stop().await;
    assert_eq!(
        (next, seen),
        (Some(()), vec!["a".to_string(), "b".to_string()])
    );
}
