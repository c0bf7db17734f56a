//! The server's background components on a real Redis: forwarder (wire spec
//! §6.11, S12, S7), janitor (§6.14), recoverer (§6.15, §7.5, §12, S13),
//! heartbeat (§6.16, §7.5, §4.2–4.3), subscriber (§6.18, §7.6), syncer
//! (§7.4) and health checker (§7.6). Each is driven one `tick` at a time on
//! a simulated clock, and its `run` loop is checked to stop on shutdown.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::support::redis::RawConn;
use asynqdeck::broker::keys;
use asynqdeck::broker::proto::WireTask;
use asynqdeck::server::forwarder::Forwarder;
use asynqdeck::server::healthcheck::HealthChecker;
use asynqdeck::server::heartbeat::{
    BeatOutcome, Heartbeat, HeartbeatConfig, ServerStatus, hostname,
};
use asynqdeck::server::inflight::{CancelReason, InFlight, Running};
use asynqdeck::server::janitor::Janitor;
use asynqdeck::server::lease::LeaseExpired;
use asynqdeck::server::recoverer::{RecoverOutcome, Recoverer};
use asynqdeck::server::subscriber::Subscriber;
use asynqdeck::server::syncer::{SyncOutcome, SyncRequest, Syncer};
use asynqdeck::server::{RetryDelayFunc, TaskError};
use asynqdeck::{EnqueueOptions, Error, Inspector, Task, TaskState};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

use crate::support::clock::{Clocked as Env, clocked, now, secs};
use crate::support::{self};

/// Enqueues one task per type in `queue` and leases them all until `lease_until`.
async fn lease(
    env: &Env,
    queue: &str,
    types: &[&str],
    retry: i32,
    lease_until: DateTime<Utc>,
) -> Vec<WireTask> {
    for t in types {
        let opts = EnqueueOptions::new().queue(queue).max_retry(retry);
        env.client
            .enqueue(&Task::new(*t, t.as_bytes().to_vec()), opts)
            .await
            .unwrap();
    }
    let got = env
        .broker
        .dequeue(queue, types.len(), lease_until)
        .await
        .unwrap();
    assert_eq!(got.len(), types.len());
    got.into_iter().map(|r| r.unwrap()).collect()
}

async fn lease_score(conn: &mut RawConn, queue: &str, id: &str) -> Option<i64> {
    conn.zscore(keys::lease_key(queue), id).await.unwrap()
}

/// Waits for a spawned `run` to end after its shutdown token was cancelled.
async fn joins_promptly(handle: tokio::task::JoinHandle<()>) {
    tokio::time::timeout(Duration::from_secs(2), handle)
        .await
        .expect("run must stop promptly after shutdown")
        .unwrap();
}

/// One call of a retry delay function: (n, error text, task type, error is LeaseExpired).
type DelayCall = (u32, String, String, bool);

fn constant_delay(d: Duration) -> RetryDelayFunc {
    Arc::new(move |_, _, _| d)
}

fn always_failure() -> Arc<dyn Fn(&TaskError) -> bool + Send + Sync> {
    Arc::new(|_| true)
}

// ---------------------------------------------------------------- forwarder

/// S12, S7, wire spec §6.11: one forwarder tick moves a retry task due now
/// (zero delay) to pending and leaves one due in 60 s; scheduled tasks are
/// polled the same way once due. Exact states, order and scores.
#[tokio::test]
async fn forwarder_tick_moves_due_retry_and_scheduled_tasks_only() {
    let mut env = clocked(now()).await;
    let q = "default";
    let leased = lease(&env, q, &["r0", "r1"], 25, now() + secs(30)).await;
    let (r0, r1) = (&leased[0], &leased[1]);
    env.broker.retry(r0, now(), "boom", true).await.unwrap();
    env.broker
        .retry(r1, now() + secs(60), "boom", true)
        .await
        .unwrap();
    let s0 = env
        .client
        .enqueue(
            &Task::new("s0", b"".to_vec()),
            EnqueueOptions::new().process_at(now() + secs(5)),
        )
        .await
        .unwrap();
    let s1 = env
        .client
        .enqueue(
            &Task::new("s1", b"".to_vec()),
            EnqueueOptions::new().process_at(now() + secs(100)),
        )
        .await
        .unwrap();

    let forwarder = Forwarder::new(
        env.broker.clone(),
        vec![q.to_string(), "low".to_string()],
        Duration::from_secs(5),
    );
    assert_eq!(forwarder.tick().await.unwrap(), 1);
    let pending: Vec<String> = env.conn.lrange(keys::pending_key(q), 0, -1).await.unwrap();
    assert_eq!(pending, vec![r0.msg.id.clone()]);
    let info = env.inspector.get_task_info(q, &r0.msg.id).await.unwrap();
    assert_eq!(info.state, TaskState::Pending);
    assert_eq!(info.retried, 1);
    let info = env.inspector.get_task_info(q, &r1.msg.id).await.unwrap();
    assert_eq!(info.state, TaskState::Retry);
    assert_eq!(info.next_process_at, Some(now() + secs(60)));

    env.clock.advance(Duration::from_secs(5));
    assert_eq!(forwarder.tick().await.unwrap(), 1);
    let pending: Vec<String> = env.conn.lrange(keys::pending_key(q), 0, -1).await.unwrap();
    assert_eq!(pending, vec![s0.id.clone(), r0.msg.id.clone()]);
    assert_eq!(
        env.inspector.get_task_info(q, &s0.id).await.unwrap().state,
        TaskState::Pending
    );
    let info = env.inspector.get_task_info(q, &s1.id).await.unwrap();
    assert_eq!(info.state, TaskState::Scheduled);
    assert_eq!(info.next_process_at, Some(now() + secs(100)));
    assert_eq!(
        env.inspector
            .get_task_info(q, &r1.msg.id)
            .await
            .unwrap()
            .state,
        TaskState::Retry
    );

    assert_eq!(forwarder.tick().await.unwrap(), 0);
}

/// Wire spec §7.6: the forwarder's first poll comes one interval after
/// start, and `run` ends promptly once shutdown is cancelled.
#[tokio::test]
async fn forwarder_run_polls_after_one_interval_and_stops_on_shutdown() {
    let env = clocked(now()).await;
    let leased = lease(&env, "default", &["r"], 25, now() + secs(30)).await;
    env.broker
        .retry(&leased[0], now(), "boom", true)
        .await
        .unwrap();
    let forwarder = Forwarder::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_millis(300),
    );
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(forwarder.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let id = leased[0].msg.id.clone();
    let info = env.inspector.get_task_info("default", &id).await.unwrap();
    assert_eq!(info.state, TaskState::Retry, "no poll before one interval");
    let moved = support::eventually(Duration::from_secs(3), || async {
        let info = env.inspector.get_task_info("default", &id).await.unwrap();
        (info.state == TaskState::Pending).then_some(())
    })
    .await;
    assert!(moved.is_some(), "the due retry task was never forwarded");
    shutdown.cancel();
    joins_promptly(handle).await;
}

// ---------------------------------------------------------------- janitor

/// Wire spec §6.14: a janitor tick deletes the completed tasks whose
/// retention ended (score <= now, boundary included) in every server queue,
/// hash and zset member both, and leaves the others.
#[tokio::test]
async fn janitor_tick_deletes_only_expired_completed_tasks() {
    let mut env = clocked(now()).await;
    let mut ids = Vec::new();
    for (queue, retention) in [("default", 10), ("default", 3600), ("low", 10)] {
        let opts = EnqueueOptions::new()
            .queue(queue)
            .retention(Duration::from_secs(retention));
        env.client
            .enqueue(&Task::new("t", b"".to_vec()), opts)
            .await
            .unwrap();
        let task = env
            .broker
            .dequeue(queue, 1, now() + secs(30))
            .await
            .unwrap()
            .remove(0)
            .unwrap();
        env.broker.mark_as_complete(&task).await.unwrap();
        ids.push((queue, task.msg.id.clone()));
    }
    let janitor = Janitor::new(
        env.broker.clone(),
        vec!["default".into(), "low".into()],
        Duration::from_secs(8),
        100,
    );

    env.clock.advance(Duration::from_secs(9));
    assert_eq!(janitor.tick().await.unwrap(), 0);
    env.clock.advance(Duration::from_secs(1));
    assert_eq!(janitor.tick().await.unwrap(), 2);

    for (i, (queue, id)) in ids.iter().enumerate() {
        let exists: bool = env.conn.exists(keys::task_key(queue, id)).await.unwrap();
        let score: Option<i64> = env
            .conn
            .zscore(keys::completed_key(queue), id)
            .await
            .unwrap();
        if i == 1 {
            assert!(exists);
            assert_eq!(score, Some((now() + secs(3600)).timestamp()));
        } else {
            assert!(!exists, "expired completed task {id} must be deleted");
            assert_eq!(score, None);
        }
    }
    assert_eq!(janitor.tick().await.unwrap(), 0);
}

/// A batch size smaller than the backlog still deletes everything in one
/// tick (the broker loops until a batch comes back short).
#[tokio::test]
async fn janitor_tick_with_small_batches_deletes_the_whole_backlog() {
    let mut env = clocked(now()).await;
    for _ in 0..5 {
        let opts = EnqueueOptions::new().retention(Duration::from_secs(1));
        env.client
            .enqueue(&Task::new("t", b"".to_vec()), opts)
            .await
            .unwrap();
    }
    for task in env
        .broker
        .dequeue("default", 5, now() + secs(30))
        .await
        .unwrap()
    {
        env.broker.mark_as_complete(&task.unwrap()).await.unwrap();
    }
    env.clock.advance(Duration::from_secs(1));
    let janitor = Janitor::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_secs(8),
        2,
    );
    assert_eq!(janitor.tick().await.unwrap(), 5);
    let left: i64 = env
        .conn
        .zcard(keys::completed_key("default"))
        .await
        .unwrap();
    assert_eq!(left, 0);
}

/// The janitor's `run` makes no sweep before one interval and stops
/// promptly on shutdown.
#[tokio::test]
async fn janitor_run_stops_on_shutdown() {
    let env = clocked(now()).await;
    let janitor = Janitor::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_secs(3600),
        100,
    );
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(janitor.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    shutdown.cancel();
    joins_promptly(handle).await;
}

// ---------------------------------------------------------------- recoverer

/// Wire spec §7.5, §12, S13: a task whose lease score is 2 min in the past
/// and whose retries are not used up goes to `retry` with Retried + 1,
/// LastErr `asynq: task lease expired`, due at now + the delay function's
/// answer (called with n = Retried and the LeaseExpired error); a lease
/// only 10 s old (inside the 30 s cutoff) is left alone.
#[tokio::test]
async fn recoverer_retries_a_task_whose_lease_expired_two_minutes_ago() {
    let mut env = clocked(now()).await;
    let old = lease(&env, "default", &["email"], 3, now() - secs(120))
        .await
        .remove(0);
    let recent = lease(&env, "default", &["recent"], 3, now() - secs(10))
        .await
        .remove(0);

    // (n, error text, task type, error is LeaseExpired) per call.
    let calls: Arc<Mutex<Vec<DelayCall>>> = Arc::default();
    let seen = calls.clone();
    let delay: RetryDelayFunc = Arc::new(move |n, err, task| {
        seen.lock().unwrap().push((
            n,
            err.to_string(),
            task.type_name().to_string(),
            err.is::<LeaseExpired>(),
        ));
        Duration::from_secs(42)
    });
    let recoverer = Recoverer::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_secs(60),
        delay,
        always_failure(),
    );
    let out = recoverer.tick().await.unwrap();
    assert_eq!(
        out,
        RecoverOutcome {
            retried: 1,
            ..RecoverOutcome::default()
        }
    );
    assert_eq!(
        *calls.lock().unwrap(),
        vec![(
            0,
            "asynq: task lease expired".to_string(),
            "email".to_string(),
            true
        )]
    );

    let info = env
        .inspector
        .get_task_info("default", &old.msg.id)
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Retry);
    assert_eq!(info.retried, 1);
    assert_eq!(info.last_err, "asynq: task lease expired");
    assert_eq!(info.last_failed_at, Some(now()));
    assert_eq!(info.next_process_at, Some(now() + secs(42)));
    assert_eq!(
        lease_score(&mut env.conn, "default", &old.msg.id).await,
        None
    );
    let failed: i64 = env
        .conn
        .get(keys::failed_total_key("default"))
        .await
        .unwrap();
    assert_eq!(failed, 1);

    let info = env
        .inspector
        .get_task_info("default", &recent.msg.id)
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Active);
    assert_eq!(info.retried, 0);
    assert_eq!(info.last_err, "");
    assert_eq!(
        lease_score(&mut env.conn, "default", &recent.msg.id).await,
        Some((now() - secs(10)).timestamp())
    );

    // The boundary: a lease exactly 30 s old is taken.
    env.clock.advance(Duration::from_secs(20));
    let out = recoverer.tick().await.unwrap();
    assert_eq!(out.retried, 1);
    assert_eq!(
        env.inspector
            .get_task_info("default", &recent.msg.id)
            .await
            .unwrap()
            .state,
        TaskState::Retry
    );
}

/// Wire spec §7.5: with Retried == MaxRetry the lease-expired task is
/// archived (Retried unchanged, LastErr set) and the delay function is not
/// called (S6).
#[tokio::test]
async fn recoverer_archives_a_task_out_of_retries() {
    let mut env = clocked(now()).await;
    let task = lease(&env, "default", &["t"], 0, now() - secs(120))
        .await
        .remove(0);
    let called = Arc::new(AtomicUsize::new(0));
    let c = called.clone();
    let delay: RetryDelayFunc = Arc::new(move |_, _, _| {
        c.fetch_add(1, Ordering::SeqCst);
        Duration::from_secs(1)
    });
    let recoverer = Recoverer::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_secs(60),
        delay,
        always_failure(),
    );
    let out = recoverer.tick().await.unwrap();
    assert_eq!(
        out,
        RecoverOutcome {
            archived: 1,
            ..RecoverOutcome::default()
        }
    );
    assert_eq!(called.load(Ordering::SeqCst), 0);
    let info = env
        .inspector
        .get_task_info("default", &task.msg.id)
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Archived);
    assert_eq!(info.retried, 0);
    assert_eq!(info.max_retry, 0);
    assert_eq!(info.last_err, "asynq: task lease expired");
    assert_eq!(info.last_failed_at, Some(now()));
    let score: Option<i64> = env
        .conn
        .zscore(keys::archived_key("default"), &task.msg.id)
        .await
        .unwrap();
    assert_eq!(score, Some(now().timestamp()));
}

/// S24, wire spec §7.5: when `is_failure(LeaseExpired)` is false the task is
/// still retried, but Retried and the failed counter do not grow.
#[tokio::test]
async fn recoverer_respects_is_failure() {
    let mut env = clocked(now()).await;
    let task = lease(&env, "default", &["t"], 5, now() - secs(120))
        .await
        .remove(0);
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    let is_failure: Arc<dyn Fn(&TaskError) -> bool + Send + Sync> = Arc::new(move |e| {
        s.lock().unwrap().push(format!("{e:#}"));
        false
    });
    let recoverer = Recoverer::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_secs(60),
        constant_delay(Duration::ZERO),
        is_failure,
    );
    assert_eq!(recoverer.tick().await.unwrap().retried, 1);
    assert_eq!(
        *seen.lock().unwrap(),
        vec!["asynq: task lease expired".to_string()]
    );
    let info = env
        .inspector
        .get_task_info("default", &task.msg.id)
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Retry);
    assert_eq!(info.retried, 0);
    assert_eq!(info.last_err, "asynq: task lease expired");
    assert_eq!(info.next_process_at, Some(now()));
    let failed: Option<i64> = env
        .conn
        .get(keys::failed_total_key("default"))
        .await
        .unwrap();
    assert_eq!(failed, None);
}

/// A lease entry whose message does not decode is counted and moved to the
/// archive with its msg untouched (it can never run); the valid task of the
/// same pass is still recovered (never a panic, never a failed pass).
#[tokio::test]
async fn recoverer_skips_a_corrupt_entry_and_recovers_the_rest() {
    let mut env = clocked(now()).await;
    let task = lease(&env, "default", &["t"], 5, now() - secs(120))
        .await
        .remove(0);
    let _: () = env
        .conn
        .hset(keys::task_key("default", "bad"), "msg", b"garbage".to_vec())
        .await
        .unwrap();
    let _: () = env
        .conn
        .zadd(
            keys::lease_key("default"),
            "bad",
            (now() - secs(120)).timestamp(),
        )
        .await
        .unwrap();
    let recoverer = Recoverer::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_secs(60),
        constant_delay(Duration::from_secs(5)),
        always_failure(),
    );
    let out = recoverer.tick().await.unwrap();
    assert_eq!(
        out,
        RecoverOutcome {
            retried: 1,
            corrupt: 1,
            ..RecoverOutcome::default()
        }
    );
    assert_eq!(
        env.inspector
            .get_task_info("default", &task.msg.id)
            .await
            .unwrap()
            .state,
        TaskState::Retry
    );
    assert_eq!(lease_score(&mut env.conn, "default", "bad").await, None);
    let archived: Option<f64> = env
        .conn
        .zscore(keys::archived_key("default"), "bad")
        .await
        .unwrap();
    assert!(archived.is_some(), "moved to the archive");
    let fields: std::collections::HashMap<String, Vec<u8>> = env
        .conn
        .hgetall(keys::task_key("default", "bad"))
        .await
        .unwrap();
    assert_eq!(fields["state"], b"archived");
    assert_eq!(fields["msg"], b"garbage", "msg untouched");
}

/// Wire spec §7.5: two recoverers racing on the same expired task move it
/// exactly once (the loser sees NOT FOUND or no longer lists it).
#[tokio::test]
async fn concurrent_recoverers_move_a_task_once() {
    let env = clocked(now()).await;
    let task = lease(&env, "default", &["t"], 5, now() - secs(120))
        .await
        .remove(0);
    let make = || {
        Recoverer::new(
            env.broker.clone(),
            vec!["default".into()],
            Duration::from_secs(60),
            constant_delay(Duration::from_secs(5)),
            always_failure(),
        )
    };
    let (a, b) = (make(), make());
    let (ra, rb) = tokio::join!(a.tick(), b.tick());
    let (ra, rb) = (ra.unwrap(), rb.unwrap());
    assert_eq!(ra.retried + rb.retried, 1);
    assert_eq!(ra.archived + rb.archived, 0);
    let info = env
        .inspector
        .get_task_info("default", &task.msg.id)
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Retry);
    assert_eq!(info.retried, 1);
}

/// Wire spec §7.5: the recoverer's first pass runs at start (no interval
/// wait), and `run` stops promptly on shutdown.
#[tokio::test]
async fn recoverer_run_passes_at_start_and_stops_on_shutdown() {
    let env = clocked(now()).await;
    let task = lease(&env, "default", &["t"], 5, now() - secs(120))
        .await
        .remove(0);
    let recoverer = Recoverer::new(
        env.broker.clone(),
        vec!["default".into()],
        Duration::from_secs(3600),
        constant_delay(Duration::from_secs(5)),
        always_failure(),
    );
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(recoverer.run(shutdown.clone()));
    let recovered = support::eventually(Duration::from_secs(3), || async {
        let info = env
            .inspector
            .get_task_info("default", &task.msg.id)
            .await
            .unwrap();
        (info.state == TaskState::Retry).then_some(())
    })
    .await;
    assert!(recovered.is_some(), "the first pass must run at start");
    shutdown.cancel();
    joins_promptly(handle).await;
}

// ---------------------------------------------------------------- heartbeat

fn running(task: &WireTask, started: DateTime<Utc>, lease_until: DateTime<Utc>) -> Arc<Running> {
    Arc::new(Running::new(
        task.clone(),
        started,
        started + secs(1800),
        lease_until,
    ))
}

fn heartbeat_config(interval: Duration) -> HeartbeatConfig {
    HeartbeatConfig {
        interval,
        concurrency: 4,
        queues: BTreeMap::from([("default".to_string(), 2), ("low".to_string(), 1)]),
        strict_priority: true,
    }
}

/// Wire spec §6.16, §7.5, §4.2–4.3: one beat writes a ServerInfo that
/// `Inspector::servers()` returns with this host, pid, concurrency, queues,
/// strict flag, status and start time, plus one WorkerInfo per running
/// task; it extends a valid lease to now + 30 s (in Redis and locally) and
/// cancels, without extending, a task whose local lease lapsed.
#[tokio::test]
async fn heartbeat_tick_publishes_state_extends_leases_and_cancels_lapsed() {
    let mut env = clocked(now()).await;
    let tasks = lease(&env, "default", &["live", "lapsed"], 25, now() + secs(30)).await;
    let inflight = Arc::new(InFlight::default());
    let live = running(&tasks[0], now() - secs(3), now() + secs(5));
    let lapsed = running(&tasks[1], now() - secs(2), now() - secs(1));
    inflight.insert(live.clone());
    inflight.insert(lapsed.clone());
    let status = Arc::new(Mutex::new(ServerStatus::Active));
    let hb = Heartbeat::new(
        env.broker.clone(),
        heartbeat_config(Duration::from_secs(5)),
        inflight.clone(),
        status.clone(),
    );
    assert_eq!(hb.ttl(), Duration::from_secs(10));

    let out = hb.tick().await.unwrap();
    assert_eq!(
        out,
        BeatOutcome {
            workers: 2,
            extended: 1,
            lease_expired: 1
        }
    );

    let servers = env.inspector.servers().await.unwrap();
    assert_eq!(servers.len(), 1);
    let s = &servers[0];
    let id = hb.identity();
    assert_eq!(s.host, hostname());
    assert_eq!(s.host, id.host);
    assert_eq!(s.pid, std::process::id() as i32);
    assert_eq!(s.server_id, id.server_id);
    assert_eq!(
        uuid::Uuid::parse_str(&s.server_id)
            .unwrap()
            .get_version_num(),
        4
    );
    assert_eq!(s.concurrency, 4);
    assert_eq!(
        s.queues,
        BTreeMap::from([("default".to_string(), 2), ("low".to_string(), 1)])
    );
    assert!(s.strict_priority);
    assert_eq!(s.status, "active");
    assert_eq!(s.started, Some(now()));
    assert_eq!(s.active_workers.len(), 2);
    let w = &s.active_workers[0];
    assert_eq!(w.task_id, tasks[0].msg.id);
    assert_eq!(w.task_type, "live");
    assert_eq!(w.task_payload, b"live".to_vec());
    assert_eq!(w.queue, "default");
    assert_eq!(w.started, Some(now() - secs(3)));
    assert_eq!(w.deadline, Some(now() - secs(3) + secs(1800)));
    assert_eq!(s.active_workers[1].task_id, tasks[1].msg.id);

    let server_key = keys::server_info_key(&id.host, id.pid, &id.server_id);
    let ttl: i64 = env.conn.ttl(&server_key).await.unwrap();
    assert!((1..=10).contains(&ttl), "server key TTL {ttl}");
    let score: Option<i64> = env
        .conn
        .zscore(keys::ALL_SERVERS, &server_key)
        .await
        .unwrap();
    assert_eq!(score, Some((now() + secs(10)).timestamp()));

    assert_eq!(
        lease_score(&mut env.conn, "default", &tasks[0].msg.id).await,
        Some((now() + secs(30)).timestamp())
    );
    assert_eq!(live.lease_until(), now() + secs(30));
    assert!(!live.cancel.is_cancelled());
    assert_eq!(live.cancel_reason(), None);

    assert_eq!(
        lease_score(&mut env.conn, "default", &tasks[1].msg.id).await,
        Some((now() + secs(30)).timestamp())
    );
    assert_eq!(lapsed.lease_until(), now() - secs(1));
    assert!(lapsed.cancel.is_cancelled());
    assert_eq!(lapsed.cancel_reason(), Some(CancelReason::LeaseExpired));

    // The status the server sets shows in the next beat; a finished task
    // leaves the worker list.
    *status.lock().unwrap() = ServerStatus::Stopped;
    inflight.remove(&tasks[1].msg.id);
    let out = hb.tick().await.unwrap();
    assert_eq!(
        out,
        BeatOutcome {
            workers: 1,
            extended: 1,
            lease_expired: 0
        }
    );
    let s = env.inspector.servers().await.unwrap().remove(0);
    assert_eq!(s.status, "stopped");
    assert_eq!(s.active_workers.len(), 1);
}

/// Wire spec §7.5, §7.7: `run` beats at once and every interval, and on
/// shutdown clears the server's info key, workers hash and registry entries.
#[tokio::test]
async fn heartbeat_run_beats_then_clears_state_on_shutdown() {
    let mut env = clocked(now()).await;
    let task = lease(&env, "default", &["t"], 25, now() + secs(30))
        .await
        .remove(0);
    let inflight = Arc::new(InFlight::default());
    inflight.insert(running(&task, now(), now() + secs(30)));
    let status = Arc::new(Mutex::new(ServerStatus::Active));
    let hb = Heartbeat::new(
        env.broker.clone(),
        heartbeat_config(Duration::from_millis(200)),
        inflight,
        status.clone(),
    );
    assert_eq!(hb.ttl(), Duration::from_secs(1));
    let id = hb.identity().clone();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(hb.run(shutdown.clone()));

    let first = support::eventually(Duration::from_secs(3), || async {
        let servers = env.inspector.servers().await.unwrap();
        servers
            .into_iter()
            .next()
            .filter(|s| s.server_id == id.server_id)
    })
    .await
    .expect("the first beat is at start");
    assert_eq!(first.status, "active");
    assert_eq!(first.active_workers.len(), 1);
    *status.lock().unwrap() = ServerStatus::Stopped;
    let later = support::eventually(Duration::from_secs(3), || async {
        let servers = env.inspector.servers().await.unwrap();
        servers.into_iter().next().filter(|s| s.status == "stopped")
    })
    .await;
    assert!(later.is_some(), "later beats publish the current status");

    shutdown.cancel();
    joins_promptly(handle).await;
    assert!(env.inspector.servers().await.unwrap().is_empty());
    let server_key = keys::server_info_key(&id.host, id.pid, &id.server_id);
    let workers_key = keys::workers_key(&id.host, id.pid, &id.server_id);
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&server_key)
        .arg(&workers_key)
        .query_async(&mut env.conn)
        .await
        .unwrap();
    assert_eq!(exists, 0);
    let servers: i64 = env.conn.zcard(keys::ALL_SERVERS).await.unwrap();
    let workers: i64 = env.conn.zcard(keys::ALL_WORKERS).await.unwrap();
    assert_eq!((servers, workers), (0, 0));
}

// ---------------------------------------------------------------- subscriber

/// Wire spec §6.18: the broker's subscription yields each published id
/// (ids of other tests may pass by: pub/sub ignores the database).
#[tokio::test]
async fn broker_subscription_yields_published_ids() {
    let env = clocked(now()).await;
    let mut ids = env.broker.subscribe_cancellations().await.unwrap();
    let want = uuid::Uuid::new_v4().to_string();
    env.broker.publish_cancelation(&want).await.unwrap();
    let got = tokio::time::timeout(Duration::from_secs(3), async {
        while let Some(id) = ids.next().await {
            if id == want {
                return id;
            }
        }
        panic!("subscription ended");
    })
    .await
    .expect("the published id arrives");
    assert_eq!(got, want);
}

/// Publishes a cancellation for `id` until `running` is cancelled (a publish
/// made before the subscription is confirmed is lost, as in Go).
async fn cancel_until_cancelled(inspector: &Inspector, id: &str, running: &Running) -> bool {
    support::eventually(Duration::from_secs(4), || async {
        inspector.cancel_processing(id).await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        running.cancel.is_cancelled().then_some(())
    })
    .await
    .is_some()
}

/// A plain connection to the server on `port`, database `db`.
async fn node_conn(port: u16, db: u32) -> redis::aio::MultiplexedConnection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/{db}"))
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap()
}

/// The server (port) and id of this database's subscribed connection,
/// from `CLIENT LIST` on each server holding it (a cluster's subscriber is
/// on one of its masters).
async fn pubsub_client(db: &support::TestDb) -> Option<(u16, String)> {
    for port in db.node_ports() {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query_async(&mut node_conn(port, db.db).await)
            .await
            .unwrap();
        let found = list.lines().find_map(|line| {
            let fields: BTreeMap<&str, &str> =
                line.split(' ').filter_map(|f| f.split_once('=')).collect();
            let subscribed = fields.get("sub").is_some_and(|s| *s != "0");
            let same_db = fields.get("db") == Some(&db.db.to_string().as_str());
            (subscribed && same_db).then(|| fields["id"].to_string())
        });
        if let Some(id) = found {
            return Some((port, id));
        }
    }
    None
}

/// Wire spec §6.18, §7.6: `Inspector::cancel_processing(id)` reaches the
/// subscriber, which cancels that running task with reason Canceled and
/// leaves the others; after the connection is killed it subscribes again
/// and keeps cancelling; `run` stops promptly on shutdown.
#[tokio::test]
async fn subscriber_cancels_the_named_running_task_and_resubscribes() {
    let env = clocked(now()).await;
    let tasks = lease(&env, "default", &["a", "b", "c"], 25, now() + secs(30)).await;
    let inflight = Arc::new(InFlight::default());
    let runs: Vec<Arc<Running>> = tasks
        .iter()
        .map(|t| running(t, now(), now() + secs(30)))
        .collect();
    for r in &runs {
        inflight.insert(r.clone());
    }
    let subscriber = Subscriber::new(
        env.broker.clone(),
        inflight.clone(),
        Duration::from_millis(100),
    );
    assert!(!subscriber.handle("no-such-task"));
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(subscriber.run(shutdown.clone()));

    assert!(cancel_until_cancelled(&env.inspector, &tasks[0].msg.id, &runs[0]).await);
    assert_eq!(runs[0].cancel_reason(), Some(CancelReason::Canceled));
    assert!(!runs[1].cancel.is_cancelled());
    assert!(!runs[2].cancel.is_cancelled());

    let (port, client_id) = support::eventually(Duration::from_secs(2), || async {
        pubsub_client(&env.db).await
    })
    .await
    .expect("the subscriber's connection is listed");
    let _: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&client_id)
        .query_async(&mut node_conn(port, env.db.db).await)
        .await
        .unwrap();
    assert!(
        cancel_until_cancelled(&env.inspector, &tasks[1].msg.id, &runs[1]).await,
        "resubscribed after the connection was killed"
    );
    assert_eq!(runs[1].cancel_reason(), Some(CancelReason::Canceled));
    assert!(!runs[2].cancel.is_cancelled());
    let (_, new_id) = pubsub_client(&env.db).await.expect("subscribed again");
    assert_ne!(new_id, client_id);

    shutdown.cancel();
    joins_promptly(handle).await;
}

// ---------------------------------------------------------------- syncer

/// An `Error::Redis` as a dropped connection gives.
fn redis_down(what: &str) -> Error {
    Error::Redis(redis::RedisError::from((
        redis::ErrorKind::Io,
        "connection refused",
        what.to_string(),
    )))
}

/// An op counting its calls that fails with `redis_down` `fail_first` times.
fn counting_op(
    calls: Arc<AtomicUsize>,
    fail_first: usize,
) -> impl Fn() -> futures_util::future::BoxFuture<'static, asynqdeck::Result<()>> + Send + Sync + 'static
{
    move || {
        let calls = calls.clone();
        Box::pin(async move {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n < fail_first {
                Err(redis_down(&format!("attempt {n}")))
            } else {
                Ok(())
            }
        })
    }
}

fn outcome(succeeded: usize, pending: usize, dropped: usize, refused: usize) -> SyncOutcome {
    SyncOutcome {
        succeeded,
        pending,
        dropped,
        refused,
    }
}

/// Wire spec §7.4: a write failing with a Redis error is tried once per tick
/// until it succeeds, then forgotten; a request whose deadline has passed is
/// dropped untried; one that expires while still failing is dropped at the
/// next tick (deadline == now is still tried).
#[tokio::test]
async fn syncer_retries_until_success_and_drops_expired_requests() {
    let env = clocked(now()).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let syncer = Syncer::new(env.broker.clone(), rx, Duration::from_secs(5));

    let flaky = Arc::new(AtomicUsize::new(0));
    tx.send(SyncRequest::new(
        "retry flaky",
        now() + secs(30),
        counting_op(flaky.clone(), 2),
    ))
    .unwrap();
    let stale = Arc::new(AtomicUsize::new(0));
    tx.send(SyncRequest::new(
        "done stale",
        now() - secs(1),
        counting_op(stale.clone(), 0),
    ))
    .unwrap();
    assert_eq!(syncer.pending_len(), 2);

    assert_eq!(syncer.tick().await, outcome(0, 1, 1, 0));
    assert_eq!(syncer.tick().await, outcome(0, 1, 0, 0));
    assert_eq!(syncer.tick().await, outcome(1, 0, 0, 0));
    assert_eq!(syncer.tick().await, SyncOutcome::default());
    assert_eq!(flaky.load(Ordering::SeqCst), 3);
    assert_eq!(stale.load(Ordering::SeqCst), 0);

    let doomed = Arc::new(AtomicUsize::new(0));
    tx.send(SyncRequest::from_fn("archive doomed", now() + secs(10), {
        let doomed = doomed.clone();
        move || {
            let doomed = doomed.clone();
            async move {
                doomed.fetch_add(1, Ordering::SeqCst);
                Err(redis_down("still down"))
            }
        }
    }))
    .unwrap();
    assert_eq!(syncer.tick().await, outcome(0, 1, 0, 0));
    env.clock.advance(Duration::from_secs(10));
    assert_eq!(
        syncer.tick().await,
        outcome(0, 1, 0, 0),
        "deadline == now is still tried"
    );
    env.clock.advance(Duration::from_secs(1));
    assert_eq!(syncer.tick().await, outcome(0, 0, 1, 0));
    assert_eq!(doomed.load(Ordering::SeqCst), 2);
    assert_eq!(syncer.pending_len(), 0);
}

/// A write Redis refuses (NOT FOUND: another server recovered the task) is
/// dropped after that one attempt, not retried until its deadline.
#[tokio::test]
async fn syncer_drops_a_refused_write() {
    let env = clocked(now()).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let syncer = Syncer::new(env.broker.clone(), rx, Duration::from_secs(5));
    let calls = Arc::new(AtomicUsize::new(0));
    tx.send(SyncRequest::from_fn("retry gone", now() + secs(30), {
        let calls = calls.clone();
        move || {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Err(Error::TaskNotFound {
                    queue: "default".into(),
                    id: "gone".into(),
                })
            }
        }
    }))
    .unwrap();
    assert_eq!(syncer.tick().await, outcome(0, 0, 0, 1));
    assert_eq!(syncer.tick().await, SyncOutcome::default());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

/// Wire spec §7.7: at shutdown every pending request gets one last attempt,
/// even when the interval never elapsed, and `run` then ends.
#[tokio::test]
async fn syncer_makes_one_last_attempt_on_shutdown() {
    let env = clocked(now()).await;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let syncer = Syncer::new(env.broker.clone(), rx, Duration::from_secs(3600));
    let ok = Arc::new(AtomicUsize::new(0));
    let failing = Arc::new(AtomicUsize::new(0));
    tx.send(SyncRequest::new(
        "ok",
        now() + secs(30),
        counting_op(ok.clone(), 0),
    ))
    .unwrap();
    tx.send(SyncRequest::new(
        "failing",
        now() + secs(30),
        counting_op(failing.clone(), usize::MAX),
    ))
    .unwrap();
    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(syncer.run(shutdown.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        (ok.load(Ordering::SeqCst), failing.load(Ordering::SeqCst)),
        (0, 0)
    );
    shutdown.cancel();
    joins_promptly(handle).await;
    assert_eq!(
        (ok.load(Ordering::SeqCst), failing.load(Ordering::SeqCst)),
        (1, 1)
    );
}

// ---------------------------------------------------------------- healthcheck

/// Wire spec §7.6: each check PINGs Redis and passes `None` to the callback
/// when it answers; `run` checks every interval and stops on shutdown.
#[tokio::test]
async fn healthcheck_reports_a_healthy_redis() {
    let env = clocked(now()).await;
    let seen: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
    let s = seen.clone();
    let callback =
        Arc::new(move |e: Option<&Error>| s.lock().unwrap().push(e.map(|e| e.to_string())));
    let checker = HealthChecker::new(env.broker.clone(), Duration::from_millis(100), callback);
    checker.tick().await.unwrap();
    assert_eq!(*seen.lock().unwrap(), vec![None]);

    let shutdown = CancellationToken::new();
    let handle = tokio::spawn(checker.run(shutdown.clone()));
    let more = support::eventually(Duration::from_secs(3), || async {
        (seen.lock().unwrap().len() >= 3).then_some(())
    })
    .await;
    assert!(more.is_some(), "the checker runs every interval");
    shutdown.cancel();
    joins_promptly(handle).await;
    assert!(seen.lock().unwrap().iter().all(Option::is_none));
}
