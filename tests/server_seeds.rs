//! The seed behaviours S1–S27 (`seed-facts.md`) that the worker side owns,
//! proven through a running [`Server`] on a real Redis, plus the server
//! semantics of wire spec §7 (timeouts, cancellation, graceful shutdown,
//! retention, lease recovery after a crash, heartbeat, queue priority).
//!
//! Every test runs its own server on a fresh database with fast loops
//! (forwarder and idle dequeue every 100 ms) and a zero or fixed retry delay,
//! reads the outcome back through the Inspector and raw Redis, and stops the
//! server with a graceful shutdown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::redis::RawConn;
use asynqdeck::broker::{Broker, keys};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::server::heartbeat::hostname;
use asynqdeck::server::{
    Backoff, Config, ContextCanceled, DeadlineExceeded, Handler, PanicError, RetryAfter,
    RetryDelayFunc, RetryPolicy, RevokeTask, ServeMux, Server, SkipRetry, TaskContext, TaskError,
    find_cause, handler_fn, is_panic_error, is_skip_retry,
};
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task, TaskState};
use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use tokio::sync::mpsc;

use crate::support::server::{WAIT, start, start_on, wait_gone, wait_state, wait_until};
use crate::support::{self, TestDb};

const Q: &str = "default";

struct Env {
    db: TestDb,
    client: Client,
    inspector: Inspector,
    conn: RawConn,
}

async fn env() -> Env {
    let db = support::redis();
    Env {
        client: Client::connect(&db.url()).await.unwrap(),
        inspector: Inspector::connect(&db.url()).await.unwrap(),
        conn: db.raw().await,
        db,
    }
}

fn constant(d: Duration) -> RetryDelayFunc {
    Arc::new(move |_, _, _| d)
}

/// A config with fast loops: concurrency 2, forwarder and idle dequeue every
/// 100 ms, shutdown timeout 2 s, zero retry delay (due at the next poll).
fn fast() -> Config {
    Config {
        concurrency: 2,
        forwarder_interval: Duration::from_millis(100),
        task_check_interval: Duration::from_millis(100),
        shutdown_timeout: Duration::from_secs(2),
        retry_delay_func: constant(Duration::ZERO),
        ..Config::default()
    }
}

/// The retry-set score of `id` minus its LastFailedAt, in seconds; also
/// checks that NextProcessAt is the score (S12, S28).
async fn retry_gap(env: &Env, queue: &str, id: &str) -> i64 {
    let mut conn = env.conn.clone();
    let score: i64 = conn.zscore(keys::retry_key(queue), id).await.unwrap();
    let info = env.inspector.get_task_info(queue, id).await.unwrap();
    assert_eq!(info.state, TaskState::Retry);
    assert_eq!(info.next_process_at.map(|t| t.timestamp()), Some(score));
    score - info.last_failed_at.expect("last_failed_at set").timestamp()
}

/// The containers (lists and sorted sets) of `queue` that hold `id`.
async fn containers(env: &Env, queue: &str, id: &str) -> Vec<&'static str> {
    let mut conn = env.conn.clone();
    let mut out = Vec::new();
    for (name, key) in [
        ("pending", keys::pending_key(queue)),
        ("active", keys::active_key(queue)),
    ] {
        let ids: Vec<String> = conn.lrange(key, 0, -1).await.unwrap();
        if ids.iter().any(|i| i == id) {
            out.push(name);
        }
    }
    for (name, key) in [
        ("lease", keys::lease_key(queue)),
        ("scheduled", keys::scheduled_key(queue)),
        ("retry", keys::retry_key(queue)),
        ("archived", keys::archived_key(queue)),
        ("completed", keys::completed_key(queue)),
    ] {
        let score: Option<f64> = conn.zscore(key, id).await.unwrap();
        if score.is_some() {
            out.push(name);
        }
    }
    out
}

/// (processed today, failed today, processed total, failed total).
async fn counts(env: &Env, queue: &str) -> (i64, i64, i64, i64) {
    let q = env.inspector.queue_info(queue).await.unwrap();
    (q.processed, q.failed, q.processed_total, q.failed_total)
}

/// Records every call of a retry delay function: (n, error text), and
/// returns `delay`.
/// The calls a [`recording_delay`] function saw: (n, error text).
type DelayCalls = Arc<Mutex<Vec<(u32, String)>>>;

fn recording_delay(delay: Duration) -> (RetryDelayFunc, DelayCalls) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let c = calls.clone();
    let f: RetryDelayFunc = Arc::new(move |n, err: &TaskError, _task: &Task| {
        c.lock().unwrap().push((n, format!("{err:#}")));
        delay
    });
    (f, calls)
}

/// Enqueues `type_name` with `opts` and returns its id.
async fn enqueue(env: &Env, type_name: &str, opts: EnqueueOptions) -> String {
    env.client
        .enqueue(&Task::new(type_name, b"payload".to_vec()), opts)
        .await
        .unwrap()
        .id
}

/// A handler that always fails with `text`, whatever the task type.
fn failing(text: &'static str) -> impl Handler {
    handler_fn(move |_ctx: TaskContext, _t: Task| async move { Err(anyhow::anyhow!(text)) })
}

// ------------------------------------------------------------ retry counts

/// S1, S3: an enqueue without the option stores the ceiling 25 once; the
/// worker keeps the count: the second attempt sees retry count 1 and max
/// retry 25, and the stored task shows Retried 1, MaxRetry 25 in between.
#[tokio::test]
async fn s1_s3_default_ceiling_is_25_and_the_worker_keeps_the_count() {
    let env = env().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let s = s.clone();
        async move {
            s.lock().unwrap().push((ctx.retry_count(), ctx.max_retry()));
            if ctx.retry_count() == 0 {
                Err(anyhow::anyhow!("first attempt fails"))
            } else {
                Ok(())
            }
        }
    });
    let id = enqueue(&env, "job", EnqueueOptions::new()).await;
    let stored = env.inspector.get_task_info(Q, &id).await.unwrap();
    assert_eq!((stored.max_retry, stored.retried), (25, 0));
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(3600)),
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!((info.max_retry, info.retried), (25, 1));
    assert_eq!(info.last_err, "first attempt fails");
    env.inspector.run_task(Q, &id).await.unwrap();
    wait_gone(&env.inspector, Q, &id).await;
    assert_eq!(*seen.lock().unwrap(), vec![(0, 25), (1, 25)]);
    assert_eq!(counts(&env, Q).await, (2, 1, 2, 1));
    server.shutdown().await;
}

/// S2: an enqueue option beats the task's default option; the server honours
/// the stored ceiling: MaxRetry(0) at enqueue over a task default of
/// MaxRetry(1) archives on the first failure, while the same task enqueued
/// without the option gets its default 1 and is retried once.
#[tokio::test]
async fn s2_enqueue_option_beats_task_default_ceiling() {
    let env = env().await;
    let task = Task::new("job", b"p".to_vec()).with_options(EnqueueOptions::new().max_retry(1));
    let overridden = env
        .client
        .enqueue(&task, EnqueueOptions::new().max_retry(0))
        .await
        .unwrap()
        .id;
    let defaulted = env
        .client
        .enqueue(&task, EnqueueOptions::new())
        .await
        .unwrap()
        .id;
    let server = start(&env.db, fast(), failing("down")).await;
    let a = wait_state(&env.inspector, Q, &overridden, TaskState::Archived).await;
    assert_eq!(
        (a.max_retry, a.retried, a.last_err.as_str()),
        (0, 0, "down")
    );
    let b = wait_state(&env.inspector, Q, &defaulted, TaskState::Archived).await;
    assert_eq!(
        (b.max_retry, b.retried, b.last_err.as_str()),
        (1, 1, "down")
    );
    // 1 attempt + 2 attempts, all failures.
    assert_eq!(counts(&env, Q).await, (3, 3, 3, 3));
    server.shutdown().await;
}

/// S1, S15, S6: a handler that always fails with MaxRetry(3) is tried 4
/// times and ends archived with Retried 3, the last error and LastFailedAt;
/// the delay function is called exactly 3 times (n = 0, 1, 2) and never for
/// the attempt that archives. The error handler sees all 4 failures.
#[tokio::test]
async fn s1_s15_s6_max_retry_3_tries_4_times_then_archives() {
    let env = env().await;
    let attempts = Arc::new(AtomicU32::new(0));
    let a = attempts.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let a = a.clone();
        async move {
            let n = a.fetch_add(1, Ordering::SeqCst);
            assert_eq!(ctx.retry_count(), n);
            Err(anyhow::anyhow!("attempt {n} failed"))
        }
    });
    let (delay, calls) = recording_delay(Duration::ZERO);
    let handled = Arc::new(AtomicU32::new(0));
    let h = handled.clone();
    let config = Config {
        retry_delay_func: delay,
        error_handler: Some(Arc::new(move |_, _, _| {
            h.fetch_add(1, Ordering::SeqCst);
        })),
        ..fast()
    };
    let before = Utc::now().timestamp();
    let id = enqueue(&env, "job", EnqueueOptions::new().max_retry(3)).await;
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Archived).await;
    assert_eq!(attempts.load(Ordering::SeqCst), 4);
    assert_eq!((info.max_retry, info.retried), (3, 3));
    assert_eq!(info.last_err, "attempt 3 failed");
    let failed_at = info.last_failed_at.unwrap().timestamp();
    assert!(failed_at >= before && failed_at <= Utc::now().timestamp());
    assert_eq!(containers(&env, Q, &id).await, vec!["archived"]);
    assert_eq!(
        *calls.lock().unwrap(),
        vec![
            (0, "attempt 0 failed".to_string()),
            (1, "attempt 1 failed".to_string()),
            (2, "attempt 2 failed".to_string()),
        ]
    );
    assert_eq!(handled.load(Ordering::SeqCst), 4);
    assert_eq!(counts(&env, Q).await, (4, 4, 4, 4));
    server.shutdown().await;
}

// ------------------------------------------------------------- retry delay

/// S4, S12: with the default policy a first failure puts the task in state
/// retry, in the retry sorted set, with score − LastFailedAt in [15, 44] s
/// (n = 0 of the Sidekiq curve) and NextProcessAt = score; Retried 1. The
/// forwarder does not move it before it is due.
#[tokio::test]
async fn s4_s12_first_failure_with_default_policy_waits_15_to_44_s() {
    let env = env().await;
    let mut config = fast();
    config.retry_delay_func = Config::default().retry_delay_func;
    let ids = [
        enqueue(&env, "job", EnqueueOptions::new()).await,
        enqueue(&env, "job", EnqueueOptions::new()).await,
        enqueue(&env, "job", EnqueueOptions::new()).await,
    ];
    let server = start(&env.db, config, failing("timeout talking to smtp")).await;
    for id in &ids {
        let info = wait_state(&env.inspector, Q, id, TaskState::Retry).await;
        assert_eq!((info.retried, info.max_retry), (1, 25));
        assert_eq!(info.last_err, "timeout talking to smtp");
        let gap = retry_gap(&env, Q, id).await;
        assert!((15..=44).contains(&gap), "first default delay {gap} s");
        assert_eq!(containers(&env, Q, id).await, vec!["retry"]);
    }
    // Several forwarder polls later nothing has moved.
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in &ids {
        assert_eq!(containers(&env, Q, id).await, vec!["retry"]);
    }
    assert_eq!(counts(&env, Q).await, (3, 3, 3, 3));
    server.shutdown().await;
}

/// S5: the delay function receives n, the error (its own error type found by
/// downcasting along the chain under added context), and the task (type and
/// payload); its answer is used as is: payload "77" → 77 s.
#[tokio::test]
async fn s5_delay_function_sees_error_type_task_type_and_payload() {
    #[derive(Debug, thiserror::Error)]
    #[error("quota exceeded for {0}")]
    struct QuotaExceeded(String);

    let env = env().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let delay: RetryDelayFunc = Arc::new(move |n, err: &TaskError, task: &Task| {
        let quota = find_cause::<QuotaExceeded>(err).map(|q| q.0.clone());
        let payload = String::from_utf8(task.payload().to_vec()).unwrap();
        s.lock()
            .unwrap()
            .push((n, quota, task.type_name().to_string(), payload.clone()));
        Duration::from_secs(payload.parse().unwrap())
    });
    let mut mux = ServeMux::new();
    mux.handle_fn("api:call", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::Error::new(QuotaExceeded("acme".into())).context("call api"))
    });
    let id = env
        .client
        .enqueue(
            &Task::new("api:call", b"77".to_vec()),
            EnqueueOptions::new(),
        )
        .await
        .unwrap()
        .id;
    let server = start(
        &env.db,
        Config {
            retry_delay_func: delay,
            ..fast()
        },
        mux,
    )
    .await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!(info.last_err, "call api: quota exceeded for acme");
    assert_eq!(retry_gap(&env, Q, &id).await, 77);
    assert_eq!(
        *seen.lock().unwrap(),
        vec![(
            0,
            Some("acme".to_string()),
            "api:call".to_string(),
            "77".to_string()
        )]
    );
    server.shutdown().await;
}

/// S7, S12: a zero delay is taken literally: the retry score equals
/// LastFailedAt, so the next forwarder poll moves the task to pending, where
/// it runs again. (The failing server polls only hourly, so the retry state
/// can be read; a second server's poll 100 ms later forwards it.)
#[tokio::test]
async fn s7_zero_delay_is_due_at_the_next_forwarder_poll() {
    let env = env().await;
    let attempts = Arc::new(AtomicU32::new(0));
    let mux = || {
        let a = attempts.clone();
        let mut mux = ServeMux::new();
        mux.handle_fn("job", move |_ctx: TaskContext, _t: Task| {
            let a = a.clone();
            async move {
                if a.fetch_add(1, Ordering::SeqCst) == 0 {
                    Err(anyhow::anyhow!("flaky"))
                } else {
                    Ok(())
                }
            }
        });
        mux
    };
    let slow_poll = Config {
        forwarder_interval: Duration::from_secs(3600),
        ..fast()
    };
    let id = enqueue(&env, "job", EnqueueOptions::new()).await;
    let first = start(&env.db, slow_poll, mux()).await;
    wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!(retry_gap(&env, Q, &id).await, 0);
    let second = start(&env.db, fast(), mux()).await;
    wait_gone(&env.inspector, Q, &id).await;
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    assert_eq!(counts(&env, Q).await, (2, 1, 2, 1));
    first.shutdown().await;
    second.shutdown().await;
}

/// S8: a policy that caps the default curve at 20 s keeps the default's
/// spread below the cap (n = 0: 15–20 s) and returns exactly the cap once
/// the curve passes it (n = 2: the default is at least 31 s).
#[tokio::test]
async fn s8_capped_default_policy_bounds_the_delay() {
    let env = env().await;
    let policy: RetryDelayFunc = RetryPolicy::new(Backoff::Capped(Duration::from_secs(20))).into();
    let id = enqueue(&env, "job", EnqueueOptions::new()).await;
    let config = Config {
        retry_delay_func: policy,
        ..fast()
    };
    let server = start(&env.db, config, failing("down")).await;
    let mut gaps = Vec::new();
    for attempt in 1..=3 {
        wait_until(&env.inspector, Q, &id, "retried again", |t| {
            t.state == TaskState::Retry && t.retried == attempt
        })
        .await;
        gaps.push(retry_gap(&env, Q, &id).await);
        env.inspector.run_task(Q, &id).await.unwrap();
    }
    assert!((15..=20).contains(&gaps[0]), "n=0: {gaps:?}");
    assert!((16..=20).contains(&gaps[1]), "n=1: {gaps:?}");
    assert_eq!(gaps[2], 20, "n=2: {gaps:?}");
    server.shutdown().await;
}

/// S9: a rate-limit error carrying RetryAfter(30 s), wrapped in context, is
/// honoured exactly by a policy whose own curve says 500 s; LastErr keeps the
/// whole chain.
#[tokio::test]
async fn s9_retry_after_hint_is_honoured_exactly() {
    let env = env().await;
    let policy: RetryDelayFunc =
        RetryPolicy::new(Backoff::Constant(Duration::from_secs(500))).into();
    let mut mux = ServeMux::new();
    mux.handle_fn("api:call", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::Error::new(RetryAfter(Duration::from_secs(30)))
            .context("429 Too Many Requests")
            .context("call api"))
    });
    mux.handle_fn("other", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::anyhow!("plain failure"))
    });
    let hinted = enqueue(&env, "api:call", EnqueueOptions::new()).await;
    let plain = enqueue(&env, "other", EnqueueOptions::new()).await;
    let config = Config {
        retry_delay_func: policy,
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &hinted, TaskState::Retry).await;
    assert_eq!(
        info.last_err,
        "call api: 429 Too Many Requests: retry after 30s"
    );
    assert_eq!(retry_gap(&env, Q, &hinted).await, 30);
    wait_state(&env.inspector, Q, &plain, TaskState::Retry).await;
    assert_eq!(retry_gap(&env, Q, &plain).await, 500);
    server.shutdown().await;
}

/// S10: the linear policy `2 min * (n + 1)` schedules the first three
/// retries exactly 120, 240 and 360 s after each failure (the task is moved
/// back to pending with `run_task` between attempts).
#[tokio::test]
async fn s10_linear_two_minutes_gives_120_240_360_s() {
    let env = env().await;
    let policy: RetryDelayFunc = RetryPolicy::new(Backoff::Linear(Duration::from_secs(120))).into();
    let id = enqueue(&env, "job", EnqueueOptions::new()).await;
    let config = Config {
        retry_delay_func: policy,
        ..fast()
    };
    let server = start(&env.db, config, failing("upstream 503")).await;
    let mut gaps = Vec::new();
    for attempt in 1..=3 {
        wait_until(&env.inspector, Q, &id, "retried again", |t| {
            t.state == TaskState::Retry && t.retried == attempt
        })
        .await;
        gaps.push(retry_gap(&env, Q, &id).await);
        if attempt < 3 {
            env.inspector.run_task(Q, &id).await.unwrap();
        }
    }
    assert_eq!(gaps, vec![120, 240, 360]);
    assert_eq!(counts(&env, Q).await, (3, 3, 3, 3));
    server.shutdown().await;
}

/// S11: one server branches on the task type (prefix rules of one policy);
/// different policies per queue need separate servers, each with its own
/// config, on the same Redis.
#[tokio::test]
async fn s11_policies_per_task_type_and_per_server() {
    let env = env().await;
    let by_type: RetryDelayFunc = RetryPolicy::new(Backoff::Constant(Duration::from_secs(7)))
        .rule("email:", Backoff::Constant(Duration::from_secs(100)))
        .into();
    let email = enqueue(&env, "email:send", EnqueueOptions::new()).await;
    let sms = enqueue(&env, "sms:send", EnqueueOptions::new()).await;
    let slow_q = enqueue(&env, "job", EnqueueOptions::new().queue("slow")).await;
    let a = start(
        &env.db,
        Config {
            retry_delay_func: by_type,
            ..fast()
        },
        failing("down"),
    )
    .await;
    let b = start(
        &env.db,
        Config {
            queues: [("slow".to_string(), 1)].into(),
            retry_delay_func: constant(Duration::from_secs(900)),
            ..fast()
        },
        failing("down"),
    )
    .await;
    wait_state(&env.inspector, Q, &email, TaskState::Retry).await;
    wait_state(&env.inspector, Q, &sms, TaskState::Retry).await;
    wait_state(&env.inspector, "slow", &slow_q, TaskState::Retry).await;
    assert_eq!(retry_gap(&env, Q, &email).await, 100);
    assert_eq!(retry_gap(&env, Q, &sms).await, 7);
    assert_eq!(retry_gap(&env, "slow", &slow_q).await, 900);
    a.shutdown().await;
    b.shutdown().await;
}

// ------------------------------------------------- where retries live

/// S13: the retry schedule lives in Redis: a task retried by one server
/// (which then shuts down) is run by servers started later; two replicas
/// sharing the queue run that retry exactly once.
#[tokio::test]
async fn s13_retries_survive_a_server_restart_and_run_once_across_replicas() {
    let env = env().await;
    let id = enqueue(&env, "job", EnqueueOptions::new()).await;
    let first = start(
        &env.db,
        Config {
            retry_delay_func: constant(Duration::from_secs(1)),
            ..fast()
        },
        failing("down"),
    )
    .await;
    wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    first.shutdown().await;
    assert_eq!(containers(&env, Q, &id).await, vec!["retry"]);

    let runs = Arc::new(AtomicU32::new(0));
    let replica = || {
        let runs = runs.clone();
        let mut mux = ServeMux::new();
        mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
            let runs = runs.clone();
            async move {
                assert_eq!(ctx.retry_count(), 1);
                runs.fetch_add(1, Ordering::SeqCst);
                Ok(())
            }
        });
        mux
    };
    let r1 = start(&env.db, fast(), replica()).await;
    let r2 = start(&env.db, fast(), replica()).await;
    wait_gone(&env.inspector, Q, &id).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(counts(&env, Q).await, (2, 1, 2, 1));
    r1.shutdown().await;
    r2.shutdown().await;
}

// ---------------------------------------------------------------- archive

/// S16: the archive is trimmed by the server's own archive write (no
/// background cleaner): with one entry older than 90 days and 10,000 recent
/// ones, archiving one more task drops the stale entry and the oldest recent
/// one, deleting their hashes, and leaves 10,000 entries.
#[tokio::test]
async fn s16_server_archive_write_trims_age_and_size() {
    let env = env().await;
    let mut conn = env.conn.clone();
    let now = Utc::now().timestamp();
    let seed = redis::Script::new(
        r#"for i = 1, tonumber(ARGV[1]) do
             local id = "seed-" .. i
             redis.call("ZADD", KEYS[1], tonumber(ARGV[2]) + i, id)
             redis.call("HSET", KEYS[2] .. id, "msg", "x", "state", "archived")
           end"#,
    );
    let _: () = seed
        .key(keys::archived_key(Q))
        .key(keys::task_key_prefix(Q))
        .arg(10_000)
        .arg(now - 86_400)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    let stale_score = now - 91 * 86_400;
    let _: () = conn
        .zadd(keys::archived_key(Q), "stale", stale_score)
        .await
        .unwrap();
    let _: () = conn
        .hset(keys::task_key(Q, "stale"), "msg", "x")
        .await
        .unwrap();
    let id = enqueue(&env, "job", EnqueueOptions::new().max_retry(0)).await;
    let server = start(&env.db, fast(), failing("broken")).await;
    wait_state(&env.inspector, Q, &id, TaskState::Archived).await;
    let card: usize = conn.zcard(keys::archived_key(Q)).await.unwrap();
    assert_eq!(card, 10_000);
    for gone in ["stale", "seed-1"] {
        let score: Option<f64> = conn.zscore(keys::archived_key(Q), gone).await.unwrap();
        assert_eq!(score, None, "{gone} left the archive");
        let exists: bool = conn.exists(keys::task_key(Q, gone)).await.unwrap();
        assert!(!exists, "{gone}'s hash deleted");
    }
    let kept: Option<f64> = conn.zscore(keys::archived_key(Q), "seed-2").await.unwrap();
    assert!(kept.is_some());
    server.shutdown().await;
}

/// S17, S18: the operator loop on archived tasks: fix the cause, run the
/// archived task (it goes to pending and a server completes it), and delete
/// another archived task (it leaves no trace).
#[tokio::test]
async fn s17_s18_archived_task_run_again_or_deleted() {
    let env = env().await;
    let broken = Arc::new(AtomicBool::new(true));
    let b = broken.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |_ctx: TaskContext, _t: Task| {
        let b = b.clone();
        async move {
            if b.load(Ordering::SeqCst) {
                Err(anyhow::anyhow!("config missing"))
            } else {
                Ok(())
            }
        }
    });
    let run_me = enqueue(&env, "job", EnqueueOptions::new().max_retry(0)).await;
    let delete_me = enqueue(&env, "job", EnqueueOptions::new().max_retry(0)).await;
    let server = start(&env.db, fast(), mux).await;
    wait_state(&env.inspector, Q, &run_me, TaskState::Archived).await;
    wait_state(&env.inspector, Q, &delete_me, TaskState::Archived).await;

    broken.store(false, Ordering::SeqCst);
    env.inspector.run_task(Q, &run_me).await.unwrap();
    wait_gone(&env.inspector, Q, &run_me).await;
    env.inspector.delete_task(Q, &delete_me).await.unwrap();
    assert!(matches!(
        env.inspector.get_task_info(Q, &delete_me).await,
        Err(Error::TaskNotFound { .. })
    ));
    assert!(containers(&env, Q, &run_me).await.is_empty());
    assert!(containers(&env, Q, &delete_me).await.is_empty());
    assert_eq!(counts(&env, Q).await, (3, 2, 3, 2));
    server.shutdown().await;
}

// ---------------------------------------------------------- handler errors

/// S19, S20, S6: SkipRetry wrapped in two contexts archives at once (Retried
/// 0 with 25 retries left) with the whole text as LastErr; it is still a
/// failure: the error handler is called (and sees the marker) and the failed
/// counters grow by one. The delay function is not called.
#[tokio::test]
async fn s19_s20_wrapped_skip_retry_archives_at_once_and_counts_a_failure() {
    let env = env().await;
    let mut mux = ServeMux::new();
    mux.handle_fn("order", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::Error::new(SkipRetry)
            .context("amount is negative")
            .context("order 42"))
    });
    let (delay, calls) = recording_delay(Duration::ZERO);
    let handled = Arc::new(Mutex::new(Vec::new()));
    let h = handled.clone();
    let config = Config {
        retry_delay_func: delay,
        error_handler: Some(Arc::new(move |ctx: &TaskContext, task: &Task, err| {
            h.lock().unwrap().push((
                ctx.task_id().to_string(),
                task.type_name().to_string(),
                is_skip_retry(err),
            ));
        })),
        ..fast()
    };
    let id = enqueue(&env, "order", EnqueueOptions::new()).await;
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Archived).await;
    assert_eq!((info.retried, info.max_retry), (0, 25));
    assert_eq!(
        info.last_err,
        "order 42: amount is negative: skip retry for the task"
    );
    assert_eq!(
        *handled.lock().unwrap(),
        vec![(id.clone(), "order".to_string(), true)]
    );
    assert!(calls.lock().unwrap().is_empty(), "S6: no delay computed");
    assert_eq!(counts(&env, Q).await, (1, 1, 1, 1));
    server.shutdown().await;
}

/// S22: an application error with a `permanent` flag, mapped to SkipRetry in
/// one adapter that adds the task id and retry count, gives a
/// self-explanatory LastErr; a non-permanent one is retried.
#[tokio::test]
async fn s22_permanent_flag_adapter_maps_to_skip_retry_with_context() {
    #[derive(Debug, thiserror::Error)]
    #[error("{message}")]
    struct AppError {
        message: String,
        permanent: bool,
    }
    fn adapt(ctx: &TaskContext, err: AppError) -> TaskError {
        let where_ = format!(
            "task {} (retry {}/{})",
            ctx.task_id(),
            ctx.retry_count(),
            ctx.max_retry()
        );
        if err.permanent {
            anyhow::Error::new(SkipRetry).context(err).context(where_)
        } else {
            anyhow::Error::new(err).context(where_)
        }
    }

    let env = env().await;
    let mut mux = ServeMux::new();
    mux.handle_fn("user:sync", |ctx: TaskContext, t: Task| async move {
        let permanent = t.payload() == b"gone";
        Err(adapt(
            &ctx,
            AppError {
                message: if permanent {
                    "user 7 does not exist".into()
                } else {
                    "directory unavailable".into()
                },
                permanent,
            },
        ))
    });
    let gone = env
        .client
        .enqueue(
            &Task::new("user:sync", b"gone".to_vec()),
            EnqueueOptions::new().max_retry(5),
        )
        .await
        .unwrap()
        .id;
    let flaky = env
        .client
        .enqueue(
            &Task::new("user:sync", b"flaky".to_vec()),
            EnqueueOptions::new().max_retry(5),
        )
        .await
        .unwrap()
        .id;
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(3600)),
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    let archived = wait_state(&env.inspector, Q, &gone, TaskState::Archived).await;
    assert_eq!(
        archived.last_err,
        format!("task {gone} (retry 0/5): user 7 does not exist: skip retry for the task")
    );
    let retried = wait_state(&env.inspector, Q, &flaky, TaskState::Retry).await;
    assert_eq!(
        retried.last_err,
        format!("task {flaky} (retry 0/5): directory unavailable")
    );
    server.shutdown().await;
}

/// S23: RevokeTask leaves no trace: no hash, in no container, the unique
/// lock released; processed +1, failed +0. The error handler still runs; the
/// delay function does not.
#[tokio::test]
async fn s23_revoke_task_leaves_no_trace() {
    let env = env().await;
    let mut mux = ServeMux::new();
    mux.handle_fn("dup", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::Error::new(RevokeTask).context("duplicate of order 41"))
    });
    let (delay, calls) = recording_delay(Duration::ZERO);
    let handled = Arc::new(AtomicU32::new(0));
    let h = handled.clone();
    let config = Config {
        retry_delay_func: delay,
        error_handler: Some(Arc::new(move |_, _, _| {
            h.fetch_add(1, Ordering::SeqCst);
        })),
        ..fast()
    };
    let id = enqueue(
        &env,
        "dup",
        EnqueueOptions::new()
            .unique(Duration::from_secs(3600))
            .retention(Duration::from_secs(3600)),
    )
    .await;
    let lock = keys::unique_key(Q, "dup", Some(b"payload"));
    let mut conn = env.conn.clone();
    assert!(conn.exists::<_, bool>(&lock).await.unwrap());
    let server = start(&env.db, config, mux).await;
    wait_gone(&env.inspector, Q, &id).await;
    // The done write is batched: wait for the counter, then check the rest.
    support::eventually(WAIT, || async {
        (counts(&env, Q).await.0 == 1).then_some(())
    })
    .await
    .expect("processed +1");
    assert!(containers(&env, Q, &id).await.is_empty());
    assert!(!conn.exists::<_, bool>(&lock).await.unwrap());
    assert!(
        !conn
            .exists::<_, bool>(keys::task_key(Q, &id))
            .await
            .unwrap()
    );
    assert_eq!(counts(&env, Q).await, (1, 0, 1, 0));
    assert_eq!(handled.load(Ordering::SeqCst), 1);
    assert!(calls.lock().unwrap().is_empty());
    server.shutdown().await;
}

/// S24: when `is_failure` says false the task is retried with Retried
/// unchanged and no counter moves, while LastErr and LastFailedAt are still
/// written.
#[tokio::test]
async fn s24_not_a_failure_retries_without_counting() {
    let env = env().await;
    let mut mux = ServeMux::new();
    mux.handle_fn("render", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::anyhow!("no resource available"))
    });
    mux.handle_fn("other", |_ctx: TaskContext, _t: Task| async {
        Err(anyhow::anyhow!("real failure"))
    });
    let config = Config {
        is_failure: Arc::new(|e: &TaskError| !e.to_string().starts_with("no resource")),
        retry_delay_func: constant(Duration::from_secs(60)),
        ..fast()
    };
    let id = enqueue(&env, "render", EnqueueOptions::new().max_retry(3)).await;
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!((info.retried, info.max_retry), (0, 3));
    assert_eq!(info.last_err, "no resource available");
    assert!(info.last_failed_at.is_some());
    assert_eq!(retry_gap(&env, Q, &id).await, 60);
    assert_eq!(counts(&env, Q).await, (0, 0, 0, 0));
    // A real failure next to it counts as usual.
    let other = enqueue(&env, "other", EnqueueOptions::new()).await;
    let info = wait_state(&env.inspector, Q, &other, TaskState::Retry).await;
    assert_eq!(info.retried, 1);
    assert_eq!(counts(&env, Q).await, (1, 1, 1, 1));
    server.shutdown().await;
}

// ------------------------------------------------------------------ panics

/// S25: a panicking handler fails the attempt like an error: the error
/// handler and the retry delay function both recognise it by type
/// (`is_panic_error`), and LastErr is
/// `panic error cause by: panic [<file>:<line>]: <message>`.
#[tokio::test]
async fn s25_panic_is_an_error_recognised_by_type() {
    let env = env().await;
    let mut mux = ServeMux::new();
    mux.handle_fn("job", |_ctx: TaskContext, t: Task| async move {
        if t.payload() == b"payload" {
            panic!("index out of range");
        }
        Ok(())
    });
    let in_delay = Arc::new(Mutex::new(Vec::new()));
    let d = in_delay.clone();
    let in_handler = Arc::new(Mutex::new(Vec::new()));
    let h = in_handler.clone();
    let config = Config {
        retry_delay_func: Arc::new(move |_, err: &TaskError, _| {
            d.lock().unwrap().push(is_panic_error(err));
            Duration::from_secs(3600)
        }),
        error_handler: Some(Arc::new(move |_, _, err: &TaskError| {
            let message = find_cause::<PanicError>(err).map(|p| p.message.clone());
            h.lock().unwrap().push((is_panic_error(err), message));
        })),
        ..fast()
    };
    let id = enqueue(&env, "job", EnqueueOptions::new()).await;
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert!(
        info.last_err.starts_with("panic error cause by: panic ["),
        "{}",
        info.last_err
    );
    assert!(
        info.last_err.contains("server_seeds.rs:")
            && info.last_err.ends_with("]: index out of range"),
        "{}",
        info.last_err
    );
    assert_eq!(info.retried, 1);
    assert_eq!(*in_delay.lock().unwrap(), vec![true]);
    assert_eq!(
        *in_handler.lock().unwrap(),
        vec![(true, Some("index out of range".to_string()))]
    );
    assert_eq!(counts(&env, Q).await, (1, 1, 1, 1));
    server.shutdown().await;
}

// ----------------------------------------------------------------- context

/// S26, wire spec §7.3: the handler reads its task id, retry count, max
/// retry, queue and deadline: now + Timeout for a timeout, the Deadline
/// second for a deadline, the earlier of the two (whole seconds) for both.
#[tokio::test]
async fn s26_task_context_gives_id_retry_count_max_retry_queue_deadline() {
    let env = env().await;
    type Seen = (String, u32, u32, String, DateTime<Utc>, DateTime<Utc>);
    let seen: Arc<Mutex<BTreeMap<String, Seen>>> = Arc::default();
    let s = seen.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, t: Task| {
        let s = s.clone();
        async move {
            let name = String::from_utf8(t.payload().to_vec()).unwrap();
            s.lock().unwrap().insert(
                name,
                (
                    ctx.task_id().to_string(),
                    ctx.retry_count(),
                    ctx.max_retry(),
                    ctx.queue().to_string(),
                    ctx.deadline(),
                    Utc::now(),
                ),
            );
            Ok(())
        }
    });
    let far = DateTime::from_timestamp(Utc::now().timestamp() + 7200, 0).unwrap();
    let near = DateTime::from_timestamp(Utc::now().timestamp() + 20, 0).unwrap();
    let q = "critical";
    let mk = |name: &str| Task::new("job", name.as_bytes().to_vec());
    let before = Utc::now();
    let timeout = env
        .client
        .enqueue(
            &mk("timeout"),
            EnqueueOptions::new()
                .queue(q)
                .max_retry(7)
                .timeout(Duration::from_secs(60)),
        )
        .await
        .unwrap()
        .id;
    let deadline = env
        .client
        .enqueue(
            &mk("deadline"),
            EnqueueOptions::new().queue(q).deadline(far),
        )
        .await
        .unwrap()
        .id;
    let both = env
        .client
        .enqueue(
            &mk("both"),
            EnqueueOptions::new()
                .queue(q)
                .timeout(Duration::from_secs(3600))
                .deadline(near),
        )
        .await
        .unwrap()
        .id;
    let config = Config {
        queues: [(q.to_string(), 1)].into(),
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    support::eventually(WAIT, || async {
        (seen.lock().unwrap().len() == 3).then_some(())
    })
    .await
    .expect("three tasks handled");
    let seen = seen.lock().unwrap().clone();

    let (id, retry, max, queue, dl, at) = &seen["timeout"];
    assert_eq!((id, *retry, *max, queue.as_str()), (&timeout, 0, 7, q));
    let sixty = chrono::Duration::seconds(60);
    assert!(*dl >= before + sixty && *dl <= *at + sixty, "{dl} vs {at}");

    let (id, retry, max, queue, dl, _) = &seen["deadline"];
    assert_eq!((id, *retry, *max, queue.as_str()), (&deadline, 0, 25, q));
    assert_eq!(*dl, far);

    let (id, _, _, _, dl, _) = &seen["both"];
    assert_eq!(id, &both);
    assert_eq!(*dl, near);
    server.shutdown().await;
}

// --------------------------------------------------- timeouts, cancellation

/// Wire spec §7.4, §12: a handler running past its Timeout(1 s) fails with
/// `context deadline exceeded` and is retried (Retried 1), about one second
/// after it started.
#[tokio::test]
async fn timeout_on_a_slow_handler_retries_with_deadline_exceeded() {
    let env = env().await;
    let started = Arc::new(Mutex::new(None));
    let s = started.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("slow", move |_ctx: TaskContext, _t: Task| {
        let s = s.clone();
        async move {
            *s.lock().unwrap() = Some(Utc::now());
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        }
    });
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e = errors.clone();
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(3600)),
        error_handler: Some(Arc::new(move |_, _, err: &TaskError| {
            e.lock()
                .unwrap()
                .push(find_cause::<DeadlineExceeded>(err).is_some());
        })),
        ..fast()
    };
    let id = enqueue(
        &env,
        "slow",
        EnqueueOptions::new().timeout(Duration::from_secs(1)),
    )
    .await;
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!(info.last_err, "context deadline exceeded");
    assert_eq!(info.retried, 1);
    let started = started.lock().unwrap().unwrap().timestamp();
    let failed = info.last_failed_at.unwrap().timestamp();
    assert!(
        (1..=3).contains(&(failed - started)),
        "{started} → {failed}"
    );
    assert_eq!(*errors.lock().unwrap(), vec![true]);
    server.shutdown().await;
}

/// Wire spec §6.18, §7.4: `Inspector::cancel_processing` of a running task
/// cancels its context (the handler sees it) and the task is retried with
/// `context canceled`.
#[tokio::test]
async fn cancel_processing_of_a_running_task_retries_with_context_canceled() {
    let env = env().await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let saw_cancel = Arc::new(AtomicBool::new(false));
    let c = saw_cancel.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("slow", move |ctx: TaskContext, _t: Task| {
        let (tx, c) = (tx.clone(), c.clone());
        async move {
            let _ = tx.send(ctx.task_id().to_string());
            // A helper task of the handler holding the context sees the
            // cancellation even though the handler itself is dropped.
            let watcher = ctx.clone();
            tokio::spawn(async move {
                watcher.cancelled().await;
                c.store(true, Ordering::SeqCst);
            });
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok(())
        }
    });
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e = errors.clone();
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(3600)),
        error_handler: Some(Arc::new(move |_, _, err: &TaskError| {
            e.lock()
                .unwrap()
                .push(find_cause::<ContextCanceled>(err).is_some());
        })),
        ..fast()
    };
    let id = enqueue(&env, "slow", EnqueueOptions::new()).await;
    let server = start(&env.db, config, mux).await;
    assert_eq!(rx.recv().await.unwrap(), id);
    // The subscriber may not be subscribed yet: publish until it lands.
    let info = support::eventually(WAIT, || async {
        env.inspector.cancel_processing(&id).await.unwrap();
        let info = env.inspector.get_task_info(Q, &id).await.unwrap();
        (info.state == TaskState::Retry).then_some(info)
    })
    .await
    .expect("cancelled task retried");
    assert_eq!(info.last_err, "context canceled");
    assert_eq!(info.retried, 1);
    assert!(saw_cancel.load(Ordering::SeqCst));
    assert_eq!(*errors.lock().unwrap(), vec![true]);
    assert_eq!(counts(&env, Q).await, (1, 1, 1, 1));
    server.shutdown().await;
}

/// Wire spec §7.7, §6.8, §16 check 16: a handler still running when the
/// shutdown timeout ends is abandoned and its task goes back to the
/// consuming (right) end of pending, ahead of older pending work: state
/// pending, Retried unchanged, no `pending_since`, no counter moved.
#[tokio::test]
async fn shutdown_timeout_requeues_the_running_task_next_in_line() {
    let env = env().await;
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
    let config = Config {
        concurrency: 1,
        shutdown_timeout: Duration::from_millis(300),
        ..fast()
    };
    let running = enqueue(&env, "slow", EnqueueOptions::new().max_retry(4)).await;
    let waiting = enqueue(&env, "slow", EnqueueOptions::new()).await;
    let server = start(&env.db, config, mux).await;
    assert_eq!(rx.recv().await.unwrap(), running);
    let t0 = std::time::Instant::now();
    server.shutdown().await;
    assert!(t0.elapsed() < Duration::from_secs(3), "{:?}", t0.elapsed());

    let mut conn = env.conn.clone();
    let pending: Vec<String> = conn.lrange(keys::pending_key(Q), 0, -1).await.unwrap();
    assert_eq!(pending, vec![waiting.clone(), running.clone()]);
    assert_eq!(containers(&env, Q, &running).await, vec!["pending"]);
    let info = env.inspector.get_task_info(Q, &running).await.unwrap();
    assert_eq!(info.state, TaskState::Pending);
    assert_eq!((info.retried, info.max_retry), (0, 4));
    assert_eq!(info.last_err, "");
    let has_since: bool = conn
        .hexists(keys::task_key(Q, &running), "pending_since")
        .await
        .unwrap();
    assert!(!has_since);
    assert_eq!(counts(&env, Q).await, (0, 0, 0, 0));
    assert!(env.inspector.servers().await.unwrap().is_empty());
}

/// Wire spec §6.7, §6.18, §16 check 11: with a retention the task is kept as
/// completed with the result its handler wrote through `ctx.result_writer()`;
/// completed score = CompletedAt + retention; processed +1.
#[tokio::test]
async fn retention_keeps_the_completed_task_with_its_result() {
    let env = env().await;
    let mut mux = ServeMux::new();
    mux.handle_fn("report", |ctx: TaskContext, _t: Task| async move {
        let n = ctx.result_writer().write(b"rows=42").await?;
        anyhow::ensure!(n == 7, "wrote {n} bytes");
        Ok(())
    });
    let id = enqueue(
        &env,
        "report",
        EnqueueOptions::new().retention(Duration::from_secs(3600)),
    )
    .await;
    let server = start(&env.db, fast(), mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Completed).await;
    assert_eq!(info.result.as_deref(), Some(&b"rows=42"[..]));
    assert_eq!(info.retention, Duration::from_secs(3600));
    let completed_at = info.completed_at.expect("completed_at").timestamp();
    let mut conn = env.conn.clone();
    let score: i64 = conn.zscore(keys::completed_key(Q), &id).await.unwrap();
    assert_eq!(score, completed_at + 3600);
    assert_eq!(containers(&env, Q, &id).await, vec!["completed"]);
    assert_eq!(counts(&env, Q).await, (1, 0, 1, 0));
    server.shutdown().await;
}

// ----------------------------------------------------- crash and recovery

/// Wire spec §7.5, S13: a worker killed mid-task (its runtime shut down in
/// the background: no cleanup runs, like SIGKILL) leaves the task active
/// with a lease; once the lease is 30 s past, another server's recoverer
/// (on a clock 61 s ahead) moves it to retry with `asynq: task lease
/// expired`, Retried 1, due at its own now + the retry delay.
#[tokio::test]
async fn killed_worker_task_is_recovered_after_the_lease_expires() {
    let env = env().await;
    let id = enqueue(&env, "work", EnqueueOptions::new().max_retry(3)).await;

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let url = env.db.url();
    rt.spawn(async move {
        let tx = Arc::new(Mutex::new(Some(tx)));
        let mut mux = ServeMux::new();
        mux.handle_fn("work", move |_ctx: TaskContext, _t: Task| {
            let tx = tx.clone();
            async move {
                if let Some(tx) = tx.lock().unwrap().take() {
                    let _ = tx.send(());
                }
                std::future::pending::<()>().await;
                Ok(())
            }
        });
        let server = Server::connect(&url, fast()).await.unwrap();
        server.run_until(mux, std::future::pending()).await
    });
    tokio::time::timeout(WAIT, rx).await.unwrap().unwrap();
    rt.shutdown_background();

    let mut conn = env.conn.clone();
    let lease: i64 = conn.zscore(keys::lease_key(Q), &id).await.unwrap();
    assert_eq!(containers(&env, Q, &id).await, vec!["active", "lease"]);
    let killed = env.inspector.servers().await.unwrap();
    assert_eq!(
        killed.len(),
        1,
        "no cleanup ran: the dead server is still listed"
    );

    let later = Utc::now() + chrono::Duration::seconds(61);
    let clock = SimulatedClock::new(later);
    let broker = Broker::connect(&env.db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(clock));
    assert!(lease < later.timestamp() - 30);
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(3600)),
        ..fast()
    };
    let rescuer = start_on(broker, config, failing("must not run"));
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!(info.last_err, "asynq: task lease expired");
    assert_eq!((info.retried, info.max_retry), (1, 3));
    assert_eq!(info.last_failed_at.unwrap().timestamp(), later.timestamp());
    assert_eq!(
        info.next_process_at.unwrap().timestamp(),
        later.timestamp() + 3600
    );
    assert_eq!(containers(&env, Q, &id).await, vec!["retry"]);
    rescuer.shutdown().await;
}

// -------------------------------------------------------- heartbeat, queues

/// Wire spec §7.5, §9.9, §16 check 17: while a handler runs, the heartbeat
/// makes `Inspector::servers` list this server (host, pid, concurrency,
/// queues, strict flag, status active, start time) with the task as its
/// active worker; after a graceful shutdown the server is gone.
#[tokio::test]
async fn heartbeat_lists_our_server_with_its_active_worker() {
    let env = env().await;
    let release = Arc::new(tokio::sync::Notify::new());
    let r = release.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("slow", move |_ctx: TaskContext, _t: Task| {
        let r = r.clone();
        async move {
            r.notified().await;
            Ok(())
        }
    });
    let config = Config {
        concurrency: 3,
        queues: [("default".to_string(), 2), ("low".to_string(), 1)].into(),
        heartbeat_interval: Duration::from_millis(200),
        ..fast()
    };
    let before = Utc::now().timestamp();
    let id = env
        .client
        .enqueue(
            &Task::new("slow", b"abc".to_vec()),
            EnqueueOptions::new().timeout(Duration::from_secs(120)),
        )
        .await
        .unwrap()
        .id;
    let server = start(&env.db, config, mux).await;
    let servers = support::eventually(WAIT, || async {
        let s = env.inspector.servers().await.unwrap();
        (s.len() == 1 && s[0].active_workers.len() == 1).then_some(s)
    })
    .await
    .expect("server listed with one active worker");
    let s = &servers[0];
    assert_eq!(s.host, hostname());
    assert_eq!(s.pid as u32, std::process::id());
    assert_eq!(s.concurrency, 3);
    assert_eq!(
        s.queues,
        BTreeMap::from([("default".to_string(), 2), ("low".to_string(), 1)])
    );
    assert!(!s.strict_priority);
    assert_eq!(s.status, "active");
    let started = s.started.unwrap().timestamp();
    assert!(started >= before - 1 && started <= Utc::now().timestamp());
    let w = &s.active_workers[0];
    assert_eq!(
        (w.task_id.as_str(), w.task_type.as_str(), w.queue.as_str()),
        (id.as_str(), "slow", "default")
    );
    assert_eq!(w.task_payload, b"abc");
    let began = w.started.unwrap().timestamp();
    assert_eq!(w.deadline.unwrap().timestamp() - began, 120);
    release.notify_one();
    wait_gone(&env.inspector, Q, &id).await;
    server.shutdown().await;
    assert!(env.inspector.servers().await.unwrap().is_empty());
}

/// Wire spec §7.2: with strict priority the high queue is drained before
/// the low one is touched (concurrency 1, both queues full from the start).
#[tokio::test]
async fn strict_priority_drains_the_high_queue_first() {
    let env = env().await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let o = o.clone();
        async move {
            o.lock().unwrap().push(ctx.queue().to_string());
            Ok(())
        }
    });
    for _ in 0..5 {
        enqueue(&env, "job", EnqueueOptions::new().queue("low")).await;
    }
    for _ in 0..5 {
        enqueue(&env, "job", EnqueueOptions::new().queue("high")).await;
    }
    let config = Config {
        concurrency: 1,
        strict_priority: true,
        queues: [("high".to_string(), 6), ("low".to_string(), 1)].into(),
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    support::eventually(WAIT, || async {
        (order.lock().unwrap().len() == 10).then_some(())
    })
    .await
    .expect("all ten handled");
    let order = order.lock().unwrap().clone();
    assert_eq!(&order[..5], ["high"; 5]);
    assert_eq!(&order[5..], ["low"; 5]);
    server.shutdown().await;
}

/// Wire spec §7.2: weighted (non-strict) queues with concurrency 1 take
/// tasks from both queues, not one queue after the other: among the first
/// 20 of 2 × 20 tasks both queues appear (failure odds ≈ 2^-19).
#[tokio::test]
async fn weighted_queues_with_concurrency_1_serve_both_queues() {
    let env = env().await;
    let order = Arc::new(Mutex::new(Vec::new()));
    let o = order.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let o = o.clone();
        async move {
            o.lock().unwrap().push(ctx.queue().to_string());
            Ok(())
        }
    });
    for q in ["a", "b"] {
        for _ in 0..20 {
            enqueue(&env, "job", EnqueueOptions::new().queue(q)).await;
        }
    }
    let config = Config {
        concurrency: 1,
        queues: [("a".to_string(), 1), ("b".to_string(), 1)].into(),
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    support::eventually(WAIT, || async {
        (order.lock().unwrap().len() == 40).then_some(())
    })
    .await
    .expect("all forty handled");
    let order = order.lock().unwrap().clone();
    let first: Vec<&String> = order[..20].iter().collect();
    assert!(first.iter().any(|q| *q == "a") && first.iter().any(|q| *q == "b"));
    assert_eq!(order.iter().filter(|q| *q == "a").count(), 20);
    server.shutdown().await;
}

/// S27: retries share the worker pool with fresh tasks: with concurrency 1,
/// a failed task's retry (zero delay) waits in pending behind the fresh
/// tasks already there, and the one worker runs them all, never two at once.
#[tokio::test]
async fn s27_retries_share_the_worker_pool_with_fresh_tasks() {
    let env = env().await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (l, f, p) = (log.clone(), in_flight.clone(), peak.clone());
    let handler = handler_fn(move |ctx: TaskContext, t: Task| {
        let (l, f, p) = (l.clone(), f.clone(), p.clone());
        async move {
            let now = f.fetch_add(1, Ordering::SeqCst) + 1;
            p.fetch_max(now, Ordering::SeqCst);
            l.lock()
                .unwrap()
                .push(format!("{}#{}", t.type_name(), ctx.retry_count()));
            tokio::time::sleep(Duration::from_millis(50)).await;
            f.fetch_sub(1, Ordering::SeqCst);
            if t.type_name() == "flaky" && ctx.retry_count() == 0 {
                return Err(anyhow::anyhow!("flaky"));
            }
            Ok(())
        }
    });
    let flaky = enqueue(&env, "flaky", EnqueueOptions::new()).await;
    for i in 0..5 {
        enqueue(&env, &format!("fresh{i}"), EnqueueOptions::new()).await;
    }
    let config = Config {
        concurrency: 1,
        ..fast()
    };
    let server = start(&env.db, config, handler).await;
    wait_gone(&env.inspector, Q, &flaky).await;
    let log = log.lock().unwrap().clone();
    assert_eq!(
        log,
        [
            "flaky#0", "fresh0#0", "fresh1#0", "fresh2#0", "fresh3#0", "fresh4#0", "flaky#1"
        ]
    );
    assert_eq!(peak.load(Ordering::SeqCst), 1);
    support::eventually(WAIT, || async {
        (counts(&env, Q).await.0 == 7).then_some(())
    })
    .await
    .expect("all attempts counted");
    assert_eq!(counts(&env, Q).await, (7, 1, 7, 1));
    server.shutdown().await;
}

/// Wire spec §7.4, §7.5: a live server whose lease lapsed (its clock jumps
/// 61 s while the handler runs) cancels the handler, calls the error handler
/// with `asynq: task lease expired`, writes nothing itself, and its
/// recoverer then retries the task with that error (Retried 1).
#[tokio::test]
async fn lapsed_lease_cancels_the_handler_and_the_recoverer_retries() {
    let env = env().await;
    let clock = SimulatedClock::new(Utc::now());
    let broker = Broker::connect(&env.db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(clock.clone()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let finished = Arc::new(AtomicBool::new(false));
    let f = finished.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("slow", move |ctx: TaskContext, _t: Task| {
        let (tx, f) = (tx.clone(), f.clone());
        async move {
            let _ = tx.send(ctx.task_id().to_string());
            tokio::time::sleep(Duration::from_secs(30)).await;
            f.store(true, Ordering::SeqCst);
            Ok(())
        }
    });
    let errors = Arc::new(Mutex::new(Vec::new()));
    let e = errors.clone();
    let config = Config {
        heartbeat_interval: Duration::from_millis(100),
        recoverer_interval: Duration::from_millis(200),
        retry_delay_func: constant(Duration::from_secs(3600)),
        error_handler: Some(Arc::new(move |_, _, err: &TaskError| {
            e.lock().unwrap().push(format!("{err:#}"));
        })),
        ..fast()
    };
    let id = enqueue(&env, "slow", EnqueueOptions::new().max_retry(2)).await;
    let server = start_on(broker, config, mux);
    assert_eq!(rx.recv().await.unwrap(), id);
    let t0 = asynqdeck::clock::Clock::now(&clock);
    clock.advance(Duration::from_secs(61));
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!(info.last_err, "asynq: task lease expired");
    assert_eq!((info.retried, info.max_retry), (1, 2));
    assert_eq!(
        info.next_process_at.unwrap().timestamp(),
        (t0 + chrono::Duration::seconds(61 + 3600)).timestamp()
    );
    // The heartbeat's cancel and the recoverer's retry race (both follow
    // the same clock jump): wait for the error handler, not for a duration.
    let seen = support::eventually(WAIT, || async {
        let seen = errors.lock().unwrap().clone();
        (!seen.is_empty()).then_some(seen)
    })
    .await
    .expect("the error handler ran");
    assert_eq!(seen, vec!["asynq: task lease expired"]);
    assert!(!finished.load(Ordering::SeqCst));
    let q = env.inspector.queue_info(Q).await.unwrap();
    assert_eq!((q.processed_total, q.failed_total), (1, 1));
    server.shutdown().await;
}

/// Wire spec §7.4: a task whose deadline has already passed when it is
/// dequeued is not handed to the handler; it fails at once with `context
/// deadline exceeded`.
#[tokio::test]
async fn past_deadline_fails_without_calling_the_handler() {
    let env = env().await;
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |_ctx: TaskContext, _t: Task| {
        let c = c.clone();
        async move {
            c.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
    });
    let past = DateTime::from_timestamp(Utc::now().timestamp() - 60, 0).unwrap();
    let id = enqueue(&env, "job", EnqueueOptions::new().deadline(past)).await;
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(3600)),
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!(info.last_err, "context deadline exceeded");
    assert_eq!(info.retried, 1);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    server.shutdown().await;
}

/// Wire spec §7.3, §12: a task type without a handler fails with `handler
/// not found for task "<type>"` and takes the normal retry path.
#[tokio::test]
async fn unknown_task_type_fails_with_handler_not_found() {
    let env = env().await;
    let mut mux = ServeMux::new();
    mux.handle_fn("known", |_ctx: TaskContext, _t: Task| async { Ok(()) });
    let id = enqueue(&env, "unknown:type", EnqueueOptions::new()).await;
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(3600)),
        ..fast()
    };
    let server = start(&env.db, config, mux).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!(
        info.last_err,
        r#"handler not found for task "unknown:type""#
    );
    assert_eq!(info.retried, 1);
    server.shutdown().await;
}

/// Wire spec §7.4 step 3, S24: a task out of retries is archived and counted
/// as a failure even when `is_failure` says the error is not one.
#[tokio::test]
async fn exhausted_task_is_archived_even_when_not_a_failure() {
    let env = env().await;
    let config = Config {
        is_failure: Arc::new(|_| false),
        ..fast()
    };
    let id = enqueue(&env, "job", EnqueueOptions::new().max_retry(0)).await;
    let server = start(&env.db, config, failing("no resource available")).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Archived).await;
    assert_eq!(
        (info.retried, info.last_err.as_str()),
        (0, "no resource available")
    );
    assert_eq!(counts(&env, Q).await, (1, 1, 1, 1));
    server.shutdown().await;
}

/// Wire spec §7.7: `ShutdownHandle::stop` makes the server report status
/// `stopped` and take no new task, while the running one finishes normally.
#[tokio::test]
async fn stop_finishes_running_tasks_but_takes_no_new_ones() {
    let env = env().await;
    let release = Arc::new(tokio::sync::Notify::new());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let r = release.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let (r, tx) = (r.clone(), tx.clone());
        async move {
            let _ = tx.send(ctx.task_id().to_string());
            r.notified().await;
            Ok(())
        }
    });
    let config = Config {
        heartbeat_interval: Duration::from_millis(100),
        ..fast()
    };
    let first = enqueue(&env, "job", EnqueueOptions::new()).await;
    let server = start(&env.db, config, mux).await;
    assert_eq!(rx.recv().await.unwrap(), first);
    server.handle.stop();
    support::eventually(WAIT, || async {
        let s = env.inspector.servers().await.unwrap();
        (s.len() == 1 && s[0].status == "stopped").then_some(())
    })
    .await
    .expect("status stopped");
    let second = enqueue(&env, "job", EnqueueOptions::new()).await;
    release.notify_one();
    wait_gone(&env.inspector, Q, &first).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(containers(&env, Q, &second).await, vec!["pending"]);
    assert!(rx.try_recv().is_err(), "no new task was handed out");
    server.shutdown().await;
}

/// Wire spec §7.4 ("all five Redis writes are skipped when the local lease
/// is no longer valid"): a handler that succeeds after its lease lapsed
/// (the clock jumps 61 s and no heartbeat noticed) writes nothing — neither
/// done nor, with a retention, completed — and leaves both tasks active for
/// the recoverer, which then retries them with `asynq: task lease expired`.
/// Regression: the completed write used to ignore the lease.
#[tokio::test]
async fn success_after_the_lease_lapsed_writes_nothing() {
    let env = env().await;
    let clock = SimulatedClock::new(Utc::now());
    let broker = Broker::connect(&env.db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(clock.clone()));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let r = release.clone();
    let mut mux = ServeMux::new();
    mux.handle_fn("job", move |ctx: TaskContext, _t: Task| {
        let (tx, r) = (tx.clone(), r.clone());
        async move {
            let notified = r.notified();
            let _ = tx.send(ctx.task_id().to_string());
            notified.await;
            Ok(())
        }
    });
    let config = Config {
        // Only the beat and the recoverer pass at start: nothing notices the lapse.
        heartbeat_interval: Duration::from_secs(3600),
        recoverer_interval: Duration::from_secs(3600),
        ..fast()
    };
    let kept = enqueue(
        &env,
        "job",
        EnqueueOptions::new().retention(Duration::from_secs(3600)),
    )
    .await;
    let plain = enqueue(&env, "job", EnqueueOptions::new()).await;
    let server = start_on(broker.clone(), config, mux);
    let mut started = vec![rx.recv().await.unwrap(), rx.recv().await.unwrap()];
    started.sort();
    let mut both = vec![kept.clone(), plain.clone()];
    both.sort();
    assert_eq!(started, both);
    clock.advance(Duration::from_secs(61));
    release.notify_waiters();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for id in [&kept, &plain] {
        assert_eq!(
            containers(&env, Q, id).await,
            vec!["active", "lease"],
            "{id}"
        );
    }
    assert_eq!(counts(&env, Q).await, (0, 0, 0, 0));

    let recoverer = asynqdeck::server::recoverer::Recoverer::new(
        broker,
        vec![Q.to_string()],
        Duration::from_secs(60),
        constant(Duration::from_secs(3600)),
        Arc::new(|_| true),
    );
    assert_eq!(recoverer.tick().await.unwrap().retried, 2);
    for id in [&kept, &plain] {
        let info = env.inspector.get_task_info(Q, id).await.unwrap();
        assert_eq!(
            (info.state, info.retried, info.last_err.as_str()),
            (TaskState::Retry, 1, "asynq: task lease expired")
        );
    }
    server.shutdown().await;
}

/// S7, wire spec §7.4: the delay is taken literally even when it is huge:
/// a delay function returning `Duration::MAX` ("never") puts the task in
/// retry at the latest representable time instead of crashing the worker
/// (which left the task active until its lease expired). Regression test.
#[tokio::test]
async fn huge_retry_delay_saturates_instead_of_crashing_the_worker() {
    let env = env().await;
    let config = Config {
        retry_delay_func: constant(Duration::MAX),
        ..fast()
    };
    let id = enqueue(&env, "job", EnqueueOptions::new()).await;
    let server = start(&env.db, config, failing("down")).await;
    let info = wait_state(&env.inspector, Q, &id, TaskState::Retry).await;
    assert_eq!((info.retried, info.last_err.as_str()), (1, "down"));
    let latest = DateTime::<Utc>::MAX_UTC.timestamp();
    assert_eq!(info.next_process_at.map(|t| t.timestamp()), Some(latest));
    server.shutdown().await;
}

/// S12: retry and scheduled are twins: the same forwarder poll moves a due
/// scheduled task and a due retry task to pending, and the server runs both.
#[tokio::test]
async fn s12_scheduled_and_retry_tasks_are_forwarded_by_the_same_poll() {
    let env = env().await;
    let runs = Arc::new(Mutex::new(Vec::new()));
    let r = runs.clone();
    let handler = handler_fn(move |ctx: TaskContext, t: Task| {
        let r = r.clone();
        async move {
            r.lock()
                .unwrap()
                .push(format!("{}#{}", t.type_name(), ctx.retry_count()));
            if t.type_name() == "flaky" && ctx.retry_count() == 0 {
                return Err(anyhow::anyhow!("flaky"));
            }
            Ok(())
        }
    });
    let flaky = enqueue(&env, "flaky", EnqueueOptions::new()).await;
    let later = enqueue(
        &env,
        "later",
        EnqueueOptions::new().process_in(Duration::from_secs(1)),
    )
    .await;
    assert_eq!(containers(&env, Q, &later).await, vec!["scheduled"]);
    let config = Config {
        retry_delay_func: constant(Duration::from_secs(1)),
        ..fast()
    };
    let server = start(&env.db, config, handler).await;
    wait_gone(&env.inspector, Q, &flaky).await;
    wait_gone(&env.inspector, Q, &later).await;
    let mut runs = runs.lock().unwrap().clone();
    runs.sort();
    assert_eq!(runs, ["flaky#0", "flaky#1", "later#0"]);
    server.shutdown().await;
}
