//! Server end to end on a real Redis: success, retry, archive, revoke.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use asynqdeck::server::{Config, RevokeTask, ServeMux, Server, SkipRetry, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};

use crate::support;

/// A handler that always fails with MaxRetry(3) is tried 4 times and ends
/// archived with Retried 3 and the last error (S1, S15); zero delay makes each
/// retry due at the next forwarder poll (S7).
#[tokio::test]
async fn always_failing_task_is_tried_max_retry_plus_one_times() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let calls = Arc::new(AtomicU32::new(0));
    let mut mux = ServeMux::new();
    let c = calls.clone();
    mux.handle_fn("fail", move |ctx: TaskContext, _t: Task| {
        let c = c.clone();
        async move {
            let n = c.fetch_add(1, Ordering::SeqCst);
            assert_eq!(ctx.retry_count(), n, "S26 retry count");
            Err(anyhow::anyhow!("attempt {n} failed"))
        }
    });
    mux.handle_fn("ok", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    mux.handle_fn("skip", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::Error::new(SkipRetry).context("bad payload"))
    });
    mux.handle_fn("revoke", |_ctx: TaskContext, _t: Task| async {
        Err(RevokeTask.into())
    });
    let config = Config {
        concurrency: 4,
        forwarder_interval: Duration::from_millis(100),
        retry_delay_func: Arc::new(|_, _, _| Duration::ZERO),
        ..Config::default()
    };
    let server = Server::connect(&db.url(), config).await.unwrap();
    let handle = server.shutdown_handle();
    let run = tokio::spawn(server.run_until(mux, std::future::pending()));

    let f = client
        .enqueue(
            &Task::new("fail", b"x".to_vec()),
            EnqueueOptions::new().max_retry(3),
        )
        .await
        .unwrap();
    let ok = client
        .enqueue(&Task::new("ok", b"x".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let s = client
        .enqueue(&Task::new("skip", b"x".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let r = client
        .enqueue(&Task::new("revoke", b"x".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();

    let archived = support::eventually(Duration::from_secs(10), || {
        let inspector = inspector.clone();
        let id = f.id.clone();
        async move {
            let t = inspector.get_task_info("default", &id).await.ok()?;
            (t.state == TaskState::Archived).then_some(t)
        }
    })
    .await
    .expect("archived");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    assert_eq!(
        (archived.retried, archived.last_err.as_str()),
        (3, "attempt 3 failed")
    );
    let skipped = inspector.get_task_info("default", &s.id).await.unwrap();
    assert_eq!(
        (skipped.state, skipped.retried, skipped.last_err.as_str()),
        (
            TaskState::Archived,
            0,
            "bad payload: skip retry for the task"
        )
    );
    assert!(
        inspector.get_task_info("default", &ok.id).await.is_err(),
        "done tasks are deleted"
    );
    assert!(
        inspector.get_task_info("default", &r.id).await.is_err(),
        "revoked tasks leave no trace"
    );
    let stats = inspector.queue_info("default").await.unwrap();
    // fail: 4 attempts (3 retries + archive), skip: 1, ok: 1, revoke: 1 → processed 7, failed 5.
    assert_eq!((stats.processed, stats.failed), (7, 5));
    handle.shutdown();
    run.await.unwrap().unwrap();
    assert!(inspector.servers().await.unwrap().is_empty());
}

/// A pending task whose msg cannot be decoded does not stall the server:
/// it is moved to the archive as is (msg untouched, no lease left behind)
/// and the good task next to it is processed (COMPATIBILITY.md#w3).
#[tokio::test]
async fn undecodable_task_is_archived_and_the_rest_runs() {
    use redis::AsyncCommands;
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let good = client
        .enqueue(&Task::new("ok", b"x".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let mut raw = db.raw().await;
    let _: () = raw
        .hset_multiple(
            "asynq:{default}:t:bad",
            &[("msg", "garbage"), ("state", "pending")],
        )
        .await
        .unwrap();
    let _: () = raw.rpush("asynq:{default}:pending", "bad").await.unwrap();
    let mut mux = ServeMux::new();
    mux.handle_fn("ok", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    let server = Server::connect(
        &db.url(),
        Config {
            concurrency: 2,
            ..Config::default()
        },
    )
    .await
    .unwrap();
    let handle = server.shutdown_handle();
    let run = tokio::spawn(server.run_until(mux, std::future::pending()));
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let done = support::eventually(Duration::from_secs(10), || {
        let inspector = inspector.clone();
        async move {
            let q = inspector.queue_info("default").await.ok()?;
            (q.archived == 1 && q.active == 0 && q.pending == 0 && q.processed == 1).then_some(q)
        }
    })
    .await;
    assert!(done.is_some(), "bad archived, good processed");
    assert!(
        inspector.get_task_info("default", &good.id).await.is_err(),
        "good task done"
    );
    let lease: Option<f64> = raw.zscore("asynq:{default}:lease", "bad").await.unwrap();
    assert_eq!(lease, None);
    handle.shutdown();
    run.await.unwrap().unwrap();
}

/// A pending task whose key has the wrong type (a string SET at
/// `asynq:{q}:t:<id>`), in the middle of 40 good tasks, does not stall or
/// spin the server and loses nothing (COMPATIBILITY.md#w13): it is leased,
/// handed back as corrupt and archived with its key untouched within a few
/// seconds; the 40 good tasks are processed; nothing is left pending,
/// active or leased.
#[tokio::test]
async fn a_wrong_type_task_key_is_archived_and_the_rest_runs() {
    use redis::AsyncCommands;
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    for i in 0..40 {
        client
            .enqueue(
                &Task::new("ok", vec![]),
                EnqueueOptions::new().task_id(format!("g{i:02}")),
            )
            .await
            .unwrap();
        if i == 19 {
            client
                .enqueue(
                    &Task::new("ok", vec![]),
                    EnqueueOptions::new().task_id("bad"),
                )
                .await
                .unwrap();
        }
    }
    let mut raw = db.raw().await;
    let _: () = raw.set("asynq:{default}:t:bad", "garbage").await.unwrap();
    let mut mux = ServeMux::new();
    mux.handle_fn("ok", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    let server = Server::connect(
        &db.url(),
        Config {
            concurrency: 50,
            ..Config::default()
        },
    )
    .await
    .unwrap();
    let handle = server.shutdown_handle();
    let run = tokio::spawn(server.run_until(mux, std::future::pending()));
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let done = support::eventually(Duration::from_secs(5), || {
        let inspector = inspector.clone();
        async move {
            let q = inspector.queue_info("default").await.ok()?;
            (q.archived == 1 && q.active == 0 && q.pending == 0 && q.processed == 40).then_some(q)
        }
    })
    .await;
    assert!(done.is_some(), "bad archived, the 40 good processed");
    handle.shutdown();
    run.await.unwrap().unwrap();
    let archived: Vec<String> = raw.zrange("asynq:{default}:archived", 0, -1).await.unwrap();
    assert_eq!(archived, ["bad"]);
    let lease: i64 = raw.zcard("asynq:{default}:lease").await.unwrap();
    assert_eq!(lease, 0);
    let kept: String = raw.get("asynq:{default}:t:bad").await.unwrap();
    assert_eq!(kept, "garbage");
    let failed: Option<i64> = raw.get("asynq:{default}:failed").await.unwrap();
    assert_eq!(failed, None, "no attempt counted");
}

/// At concurrency 64 the fetch loop keeps two lease calls in flight, each
/// with half the permits: 3,000 tasks over two queues are each handled
/// exactly once, never more than 64 at a time, and Redis ends with nothing
/// pending, active or leased and processed = 3,000 (wire spec §7.2; W1).
#[tokio::test]
async fn two_lease_calls_in_flight_keep_every_task_once_and_the_bound() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let seen = Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let running = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let mut mux = ServeMux::new();
    let (s, r, m) = (seen.clone(), running.clone(), most.clone());
    mux.handle_fn("t", move |ctx: TaskContext, _t: Task| {
        let (s, r, m) = (s.clone(), r.clone(), m.clone());
        async move {
            let now = r.fetch_add(1, Ordering::SeqCst) + 1;
            m.fetch_max(now, Ordering::SeqCst);
            assert!(
                s.lock().unwrap().insert(ctx.task_id().to_string()),
                "ran twice"
            );
            // Some tasks wait, so finishes and leases interleave.
            if ctx.task_id().ends_with('7') {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            r.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
    });
    for i in 0..3000 {
        let q = if i % 3 == 0 { "low" } else { "default" };
        client
            .enqueue(
                &Task::new("t", vec![]),
                EnqueueOptions::new().queue(q).task_id(format!("task-{i}")),
            )
            .await
            .unwrap();
    }
    let config = Config {
        concurrency: 64,
        queues: [("default".to_string(), 2), ("low".to_string(), 1)].into(),
        ..Config::default()
    };
    let server = Server::connect(&db.url(), config).await.unwrap();
    let handle = server.shutdown_handle();
    let run = tokio::spawn(server.run_until(mux, std::future::pending()));
    let done = support::eventually(Duration::from_secs(30), || {
        let inspector = inspector.clone();
        async move {
            let d = inspector.queue_info("default").await.ok()?;
            let l = inspector.queue_info("low").await.ok()?;
            (d.processed + l.processed == 3000).then_some((d, l))
        }
    })
    .await
    .expect("all processed");
    handle.shutdown();
    run.await.unwrap().unwrap();
    assert_eq!(seen.lock().unwrap().len(), 3000);
    let most = most.load(Ordering::SeqCst);
    assert!(most <= 64, "at most 64 handlers at once, saw {most}");
    let (d, l) = done;
    assert_eq!((d.processed, l.processed), (2000, 1000));
    for q in ["default", "low"] {
        let s = inspector.queue_info(q).await.unwrap();
        assert_eq!((s.pending, s.active, s.failed), (0, 0, 0), "{q}");
    }
    let mut conn = db.raw().await;
    for q in ["default", "low"] {
        let leases: i64 =
            redis::AsyncCommands::zcard(&mut conn, asynqdeck::broker::keys::lease_key(q))
                .await
                .unwrap();
        assert_eq!(leases, 0, "{q}");
    }
}

/// A queue whose pending key has the wrong type (every lease call on it
/// fails) is left out of fetches for a while instead of stalling the
/// server: the other queue's 500 tasks all run, and the broken key is left
/// as it was (wire spec §7.2).
#[tokio::test]
async fn a_broken_queue_does_not_stall_the_others() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let broken = asynqdeck::broker::keys::pending_key("broken");
    let _: () = redis::AsyncCommands::set(&mut conn, &broken, "not a list")
        .await
        .unwrap();
    for i in 0..500 {
        client
            .enqueue(
                &Task::new("t", vec![]),
                EnqueueOptions::new().queue("fine").task_id(format!("f{i}")),
            )
            .await
            .unwrap();
    }
    let mut mux = ServeMux::new();
    mux.handle_fn("t", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    let config = Config {
        concurrency: 10,
        queues: [("broken".to_string(), 5), ("fine".to_string(), 1)].into(),
        ..Config::default()
    };
    let server = Server::connect(&db.url(), config).await.unwrap();
    let handle = server.shutdown_handle();
    let run = tokio::spawn(server.run_until(mux, std::future::pending()));
    let processed = support::eventually(Duration::from_secs(30), || {
        let inspector = inspector.clone();
        async move {
            let q = inspector.queue_info("fine").await.ok()?;
            (q.processed == 500).then_some(q.processed)
        }
    })
    .await;
    handle.shutdown();
    run.await.unwrap().unwrap();
    assert_eq!(processed, Some(500));
    let kept: String = redis::AsyncCommands::get(&mut conn, &broken).await.unwrap();
    assert_eq!(kept, "not a list");
}

/// Once a task type is learned quick (more than 64 quick first polls), its
/// tasks start inside the fetch loop (src/server/inline_start.rs) and must
/// behave exactly as spawned ones (S25, S15): a panic in the first poll is
/// caught with its location, an error archives at MaxRetry 0, a task that
/// waits is spawned and finishes; every task once, counters exact.
#[tokio::test]
async fn a_type_learned_quick_still_panics_fails_and_waits_like_any_task() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let mut mux = ServeMux::new();
    let r = runs.clone();
    mux.handle_fn("t", move |_ctx: TaskContext, t: Task| {
        r.fetch_add(1, Ordering::SeqCst);
        async move {
            match t.payload() {
                b"panic" => panic!("boom in the first poll"),
                b"err" => Err(anyhow::anyhow!("plain failure")),
                b"wait" => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    Ok(())
                }
                _ => Ok(()),
            }
        }
    });
    let config = Config {
        concurrency: 10,
        ..Config::default()
    };
    let server = Server::connect(&db.url(), config).await.unwrap();
    let handle = server.shutdown_handle();
    let run = tokio::spawn(server.run_until(mux, std::future::pending()));
    let processed = |n: i64| processed_eventually(&inspector, "default", n);
    for _ in 0..200 {
        client
            .enqueue(&Task::new("t", b"ok".to_vec()), EnqueueOptions::new())
            .await
            .unwrap();
    }
    processed(200).await.expect("the quick ones");
    let mut failing = Vec::new();
    for (payload, n) in [("panic", 3), ("err", 3), ("wait", 20)] {
        for _ in 0..n {
            let info = client
                .enqueue(
                    &Task::new("t", payload.as_bytes().to_vec()),
                    EnqueueOptions::new().max_retry(0),
                )
                .await
                .unwrap();
            if payload != "wait" {
                failing.push((payload, info.id));
            }
        }
    }
    let q = processed(226).await.expect("all attempts counted");
    handle.shutdown();
    run.await.unwrap().unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 226, "every task ran once");
    assert_eq!((q.failed, q.archived, q.pending, q.active), (6, 6, 0, 0));
    for (payload, id) in failing {
        let info = inspector.get_task_info("default", &id).await.unwrap();
        assert_eq!(info.state, TaskState::Archived, "{payload}");
        if payload == "panic" {
            assert!(
                info.last_err.starts_with("panic error cause by: panic [")
                    && info.last_err.contains("server_smoke.rs:")
                    && info.last_err.ends_with("]: boom in the first poll"),
                "{}",
                info.last_err
            );
        } else {
            assert_eq!(info.last_err, "plain failure");
        }
    }
}

/// The queue's info once `processed` reaches `n` (30 s at most).
async fn processed_eventually(
    inspector: &Inspector,
    queue: &str,
    n: i64,
) -> Option<asynqdeck::inspector::QueueInfo> {
    support::eventually(Duration::from_secs(30), || async {
        let q = inspector.queue_info(queue).await.ok()?;
        (q.processed == n).then_some(q)
    })
    .await
}

/// The fetch loop runs on a thread of its own (`Config::fetch_spin`,
/// COMPATIBILITY W14), but handlers belong to the caller's runtime: spawned
/// there, and (in release builds, where the type is learned quick and
/// polled inline on the fetch thread) what a handler spawns still goes to
/// the caller's runtime and `block_in_place` still works (W12). The inline
/// case itself: `inline_start::tests::an_inline_poll_belongs_to_the_workers_runtime`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handlers_belong_to_the_callers_runtime_even_when_polled_inline() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let ours = tokio::runtime::Handle::current().id();
    // (runtime of the handler, runtime of what it spawned, its thread's name)
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut mux = ServeMux::new();
    let s = seen.clone();
    mux.handle_fn("t", move |_ctx: TaskContext, t: Task| {
        let here = tokio::runtime::Handle::current().id();
        let thread = std::thread::current().name().unwrap_or("").to_string();
        if t.payload() == b"block" {
            tokio::task::block_in_place(|| std::thread::sleep(Duration::from_millis(1)));
        }
        let spawned = tokio::spawn(async { tokio::runtime::Handle::current().id() });
        let s = s.clone();
        async move {
            let there = spawned.await.unwrap();
            s.lock().unwrap().push((here, there, thread));
            Ok(())
        }
    });
    let config = Config {
        concurrency: 10,
        ..Config::default()
    };
    let server = Server::connect(&db.url(), config).await.unwrap();
    let handle = server.shutdown_handle();
    let run = tokio::spawn(server.run_until(mux, std::future::pending()));
    let processed = |n: i64| processed_eventually(&inspector, "default", n);
    // Enough quick ones for the type to be learned quick (64 in a row).
    for _ in 0..150 {
        client
            .enqueue(&Task::new("t", b"ok".to_vec()), EnqueueOptions::new())
            .await
            .unwrap();
    }
    processed(150).await.expect("the quick ones");
    for _ in 0..5 {
        client
            .enqueue(&Task::new("t", b"block".to_vec()), EnqueueOptions::new())
            .await
            .unwrap();
    }
    let q = processed(155).await.expect("the blocking ones");
    handle.shutdown();
    run.await.unwrap().unwrap();
    assert_eq!((q.failed, q.archived, q.retry), (0, 0, 0));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 155);
    for (here, there, thread) in seen.iter() {
        assert_eq!((here, there), (&ours, &ours), "on thread {thread:?}");
    }
}

/// Dropping the future of `run_until` stops the server at once (W14): no
/// task is taken any more, a running handler is cancelled and its task put
/// back in pending without a retry counted, long before `shutdown_timeout`,
/// and the heartbeat removes the server's state.
#[tokio::test]
async fn dropping_the_run_future_stops_leasing_and_puts_running_tasks_back() {
    let db = support::redis();
    let queue = "drop-run";
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let r = runs.clone();
    let handler = asynqdeck::server::handler_fn(move |_ctx: TaskContext, t: Task| {
        r.fetch_add(1, Ordering::SeqCst);
        async move {
            if t.payload() == b"slow" {
                tokio::time::sleep(Duration::from_secs(60)).await;
            }
            Ok(())
        }
    });
    let config = Config {
        concurrency: 2,
        queues: [(queue.to_string(), 1)].into(),
        shutdown_timeout: Duration::from_secs(60),
        ..Config::default()
    };
    let server = Server::connect(&db.url(), config).await.unwrap();
    let run = tokio::spawn(server.run_until(handler, std::future::pending()));
    let opts = || EnqueueOptions::new().queue(queue);
    let slow = client
        .enqueue(&Task::new("t", b"slow".to_vec()), opts())
        .await
        .unwrap();
    let serving = |n: usize| {
        let inspector = inspector.clone();
        support::eventually(Duration::from_secs(10), move || {
            let inspector = inspector.clone();
            async move {
                let ours = inspector
                    .servers()
                    .await
                    .ok()?
                    .into_iter()
                    .filter(|s| s.queues.contains_key(queue))
                    .count();
                (ours == n).then_some(())
            }
        })
    };
    serving(1).await.expect("server listed");
    support::eventually(Duration::from_secs(10), || async {
        (runs.load(Ordering::SeqCst) == 1).then_some(())
    })
    .await
    .expect("the slow task started");
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    serving(0).await.expect("the heartbeat removed the server");
    let back = support::eventually(Duration::from_secs(5), || async {
        let t = inspector.get_task_info(queue, &slow.id).await.ok()?;
        (t.state == TaskState::Pending).then_some(t)
    })
    .await
    .expect("the running task is back in pending at once, not after 60 s");
    assert_eq!(back.retried, 0, "no retry counted");
    let q = inspector.queue_info(queue).await.unwrap();
    assert_eq!((q.active, q.failed, q.retry), (0, 0, 0));
    let later = client
        .enqueue(&Task::new("t", b"2".to_vec()), opts())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let task = inspector.get_task_info(queue, &later.id).await.unwrap();
    assert_eq!(
        task.state,
        TaskState::Pending,
        "no fetch loop left to take it"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// When the runtime a server runs on is dropped (no shutdown), its fetch
/// loop, on a thread of its own, must not lease tasks it can no longer run:
/// what it leased but could not start goes back to pending without a retry
/// counted; only the tasks whose handlers were running stay active (for the
/// recoverer, as after a crash: `server_seeds::killed_worker_task_…`). The
/// race this guards against showed in about a third of the tries, so the
/// test tries five times.
#[test]
fn a_dropped_runtime_leaves_no_leased_task_unstarted() {
    let db = support::redis();
    for round in 0..5 {
        let queue = format!("dropped-rt-{round}");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let started = Arc::new(AtomicU32::new(0));
        let s = started.clone();
        let inspector = rt.block_on(async {
            let client = Client::connect(&db.url()).await.unwrap();
            let inspector = Inspector::connect(&db.url()).await.unwrap();
            let handler = asynqdeck::server::handler_fn(move |_ctx: TaskContext, _t: Task| {
                s.fetch_add(1, Ordering::SeqCst);
                async {
                    tokio::time::sleep(Duration::from_secs(60)).await;
                    Ok(())
                }
            });
            let config = Config {
                concurrency: 4,
                queues: [(queue.clone(), 1)].into(),
                ..Config::default()
            };
            let server = Server::connect(&db.url(), config).await.unwrap();
            tokio::spawn(server.run_until(handler, std::future::pending()));
            for i in 0..6 {
                client
                    .enqueue(
                        &Task::new("t", vec![i]),
                        EnqueueOptions::new().queue(&queue).max_retry(0),
                    )
                    .await
                    .unwrap();
            }
            let q = queue.clone();
            let i = inspector.clone();
            let started = started.clone();
            support::eventually(Duration::from_secs(10), move || {
                let (i, q, started) = (i.clone(), q.clone(), started.clone());
                async move {
                    let active = i.queue_info(&q).await.ok()?.active;
                    (active == 4 && started.load(Ordering::SeqCst) == 4).then_some(())
                }
            })
            .await
            .expect("four handlers running");
            inspector
        });
        drop(rt);
        drop(inspector);
        let after = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // A connection of this runtime (a cluster connection's driver task
        // died with the dropped one).
        let inspector = after.block_on(Inspector::connect(&db.url())).unwrap();
        let q = after.block_on(async {
            support::eventually(Duration::from_secs(5), || async {
                let q = inspector.queue_info(&queue).await.ok()?;
                (q.pending == 2 && q.active == 4).then_some(q)
            })
            .await
        });
        let q = q.unwrap_or_else(|| {
            let q = after.block_on(inspector.queue_info(&queue)).unwrap();
            panic!(
                "round {round}: pending {} active {} (want 2 and 4)",
                q.pending, q.active
            )
        });
        assert_eq!((q.retry, q.archived, q.failed), (0, 0, 0), "round {round}");
    }
}

/// Start/abort cycles while tasks flow: every task's handler succeeds
/// exactly once and is counted once. (Aborting used to drop a `done` call
/// half-way, losing acked successes that then counted as failures, and to
/// requeue a handler that had just returned Ok, running it twice.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_cycles_finish_every_task_exactly_once() {
    const N: usize = 3000;
    let db = support::redis();
    let queue = "abort-cycles";
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let oks: Arc<Vec<AtomicU32>> = Arc::new((0..N).map(|_| AtomicU32::new(0)).collect());
    for i in 0..N {
        client
            .enqueue(
                &Task::new("t", i.to_string().into_bytes()),
                EnqueueOptions::new().queue(queue),
            )
            .await
            .unwrap();
    }
    let server = || {
        let oks = oks.clone();
        let handler = asynqdeck::server::handler_fn(move |_ctx: TaskContext, t: Task| {
            let i: usize = std::str::from_utf8(t.payload()).unwrap().parse().unwrap();
            let oks = oks.clone();
            async move {
                match i % 10 {
                    0 => tokio::time::sleep(Duration::from_millis(5)).await,
                    1 | 2 => tokio::task::yield_now().await,
                    _ => {}
                }
                oks[i].fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        });
        let config = Config {
            concurrency: 16,
            queues: [(queue.to_string(), 1)].into(),
            shutdown_timeout: Duration::from_secs(1),
            ..Config::default()
        };
        (handler, config)
    };
    for ms in [20u64, 60, 35, 90, 50, 25, 75, 40, 65, 30] {
        let (handler, config) = server();
        let s = Server::connect(&db.url(), config).await.unwrap();
        let run = tokio::spawn(s.run_until(handler, std::future::pending()));
        tokio::time::sleep(Duration::from_millis(ms)).await;
        run.abort();
        let _ = run.await;
    }
    let (handler, config) = server();
    let s = Server::connect(&db.url(), config).await.unwrap();
    let handle = s.shutdown_handle();
    let run = tokio::spawn(s.run_until(handler, std::future::pending()));
    let i = inspector.clone();
    let q = support::eventually(Duration::from_secs(60), move || {
        let i = i.clone();
        async move {
            let q = i.queue_info(queue).await.ok()?;
            (q.pending == 0 && q.active == 0).then_some(q)
        }
    })
    .await
    .expect("queue drained");
    handle.shutdown();
    run.await.unwrap().unwrap();
    let twice: Vec<usize> = (0..N)
        .filter(|&i| oks[i].load(Ordering::SeqCst) != 1)
        .collect();
    assert!(twice.is_empty(), "not exactly once: {twice:?}");
    assert_eq!(
        (q.processed, q.failed, q.retry, q.archived),
        (N as i64, 0, 0, 0)
    );
}
