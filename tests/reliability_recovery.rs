//! Issue 12, recovery and queue discovery on a real Redis (and real Go asynq
//! where the wire matters): R4 (active ids without a lease or without a
//! task hash), R8 (a crashed worker's tasks come back within 5 s of lease +
//! grace) and R14 (a deleted queue leaves no key behind; a queue that holds
//! tasks but is missing from `asynq:queues` is found again, unpaused).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::support::redis::RawConn;
use asynqdeck::broker::{Broker, keys, samples_key};
use asynqdeck::inspector::{Page, TaskRow};
use asynqdeck::server::recoverer::{ORPHAN_GRACE, RecoverOutcome, Recoverer};
use asynqdeck::server::{Maintenance, MaintenanceConfig, RetryDelayFunc, TaskError};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};
use chrono::{DateTime, Utc};
use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

use crate::support::clock::{Clocked as Env, clocked, now, secs};
use crate::support::{self};

fn zero_delay() -> RetryDelayFunc {
    Arc::new(|_, _, _| Duration::ZERO)
}

fn always_failure() -> Arc<dyn Fn(&TaskError) -> bool + Send + Sync> {
    Arc::new(|_| true)
}

fn recoverer(env: &Env, queues: &[&str]) -> Recoverer {
    Recoverer::new(
        env.broker.clone(),
        queues.iter().map(|q| q.to_string()).collect(),
        Duration::from_secs(60),
        zero_delay(),
        always_failure(),
    )
}

/// Enqueues one task of type `ty` in `queue` and moves its id from pending
/// to active by hand, without a lease entry (what a crashed non-atomic
/// leaser, a hand edit or a half-applied script leaves behind).
async fn active_without_lease(env: &mut Env, queue: &str, ty: &str) -> String {
    let info = env
        .client
        .enqueue(
            &Task::new(ty, ty.as_bytes().to_vec()),
            EnqueueOptions::new().queue(queue).max_retry(3),
        )
        .await
        .unwrap();
    let moved: Option<String> = env
        .conn
        .rpoplpush(keys::pending_key(queue), keys::active_key(queue))
        .await
        .unwrap();
    assert_eq!(moved.as_deref(), Some(info.id.as_str()));
    let _: i64 = env
        .conn
        .hset(keys::task_key(queue, &info.id), "state", "active")
        .await
        .unwrap();
    info.id
}

async fn active_ids(conn: &mut RawConn, queue: &str) -> Vec<String> {
    conn.lrange(keys::active_key(queue), 0, -1).await.unwrap()
}

async fn lease_score(conn: &mut RawConn, queue: &str, id: &str) -> Option<i64> {
    conn.zscore(keys::lease_key(queue), id).await.unwrap()
}

async fn state_of(env: &Env, queue: &str, id: &str) -> TaskState {
    env.inspector.get_task_info(queue, id).await.unwrap().state
}

// ---------------------------------------------------------------- R4

/// R4: an id in `active` without a lease entry is left alone on the pass
/// that first sees it (it may be being leased right now), and also when it
/// got its lease before the grace ran out; one still lease-less a grace
/// later is recovered like an expired lease: retry with Retried + 1 and
/// `asynq: task lease expired`, out of active, no lease left.
#[tokio::test]
async fn r4_active_id_without_lease_is_retried_after_grace() {
    let mut env = clocked(now()).await;
    let q = "default";
    let orphan = active_without_lease(&mut env, q, "orphan").await;
    let late = active_without_lease(&mut env, q, "late").await;
    let r = recoverer(&env, &[q]);

    assert_eq!(r.tick().await.unwrap(), RecoverOutcome::default());
    assert_eq!(state_of(&env, q, &orphan).await, TaskState::Active);
    assert_eq!(active_ids(&mut env.conn, q).await.len(), 2);

    // `late` gets its lease 10 s later: a slow leaser, not an orphan.
    env.clock.advance(Duration::from_secs(10));
    let late_until = (now() + secs(40)).timestamp();
    let _: i64 = env
        .conn
        .zadd(keys::lease_key(q), &late, late_until)
        .await
        .unwrap();

    env.clock
        .set(now() + chrono::Duration::from_std(ORPHAN_GRACE).unwrap());
    let out = r.tick().await.unwrap();
    assert_eq!(
        out,
        RecoverOutcome {
            retried: 1,
            orphans_leased: 1,
            ..RecoverOutcome::default()
        }
    );
    let info = env.inspector.get_task_info(q, &orphan).await.unwrap();
    assert_eq!(
        info.state,
        TaskState::Retry,
        "lease-less task not recovered"
    );
    assert_eq!(info.retried, 1);
    assert_eq!(info.last_err, "asynq: task lease expired");
    assert_eq!(active_ids(&mut env.conn, q).await, vec![late.clone()]);
    assert_eq!(lease_score(&mut env.conn, q, &orphan).await, None);
    assert_eq!(lease_score(&mut env.conn, q, &late).await, Some(late_until));
    assert_eq!(state_of(&env, q, &late).await, TaskState::Active);
}

/// R4: an id in `active` whose task hash is gone, with no lease or with an
/// expired one, is dropped from active (and lease) after the grace; a live
/// task beside them is untouched.
#[tokio::test]
async fn r4_active_id_without_hash_is_dropped_after_grace() {
    let mut env = clocked(now()).await;
    let q = "default";
    let _: i64 = env
        .conn
        .rpush(keys::active_key(q), &["ghost", "ghost-leased"])
        .await
        .unwrap();
    let _: i64 = env
        .conn
        .zadd(
            keys::lease_key(q),
            "ghost-leased",
            (now() - secs(600)).timestamp(),
        )
        .await
        .unwrap();
    let _: i64 = env.conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    let live = env
        .client
        .enqueue(&Task::new("live", b"l".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let leased = env.broker.dequeue(q, 1, now() + secs(600)).await.unwrap();
    assert_eq!(leased.len(), 1);
    let r = recoverer(&env, &[q]);

    assert_eq!(r.tick().await.unwrap(), RecoverOutcome::default());
    assert_eq!(active_ids(&mut env.conn, q).await.len(), 3);

    env.clock
        .set(now() + chrono::Duration::from_std(ORPHAN_GRACE).unwrap());
    let out = r.tick().await.unwrap();
    assert_eq!(
        out,
        RecoverOutcome {
            orphans_dropped: 2,
            ..RecoverOutcome::default()
        }
    );
    assert_eq!(active_ids(&mut env.conn, q).await, vec![live.id.clone()]);
    let lease: Vec<String> = env.conn.zrange(keys::lease_key(q), 0, -1).await.unwrap();
    assert_eq!(lease, vec![live.id.clone()]);
    let ghost_keys: i64 = redis::cmd("EXISTS")
        .arg(keys::task_key(q, "ghost"))
        .arg(keys::task_key(q, "ghost-leased"))
        .query_async(&mut env.conn)
        .await
        .unwrap();
    assert_eq!(ghost_keys, 0, "dropping must not create a task hash");
}

/// R4: the active tab (inspector listing) and the task page (task info)
/// show a lease-less active task as orphaned, like one whose lease
/// expired; a task with a live lease is not.
#[tokio::test]
async fn r4_lease_less_active_task_shows_orphaned() {
    let mut env = clocked(now()).await;
    let q = "default";
    let lease_less = active_without_lease(&mut env, q, "lease-less").await;
    for (ty, until) in [("expired", now() - secs(5)), ("live", now() + secs(30))] {
        env.client
            .enqueue(&Task::new(ty, b"x".to_vec()), EnqueueOptions::new())
            .await
            .unwrap();
        env.broker.dequeue(q, 1, until).await.unwrap();
    }
    let rows = env
        .inspector
        .list_tasks(q, TaskState::Active, Page::new(1, 20).unwrap())
        .await
        .unwrap();
    let listed: Vec<(String, bool)> = rows
        .iter()
        .map(|r| match r {
            TaskRow::Task(t) => (t.task_type.clone(), t.is_orphaned),
            other => panic!("unexpected row {other:?}"),
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            ("lease-less".to_string(), true),
            ("expired".to_string(), true),
            ("live".to_string(), false),
        ]
    );
    let info = env.inspector.get_task_info(q, &lease_less).await.unwrap();
    assert!(
        info.is_orphaned,
        "task page must show a lease-less task as orphaned"
    );
    let rows_by_type = |ty: &str| {
        rows.iter()
            .filter_map(|r| r.task())
            .find(|t| t.task_type == ty)
            .unwrap()
            .id
            .clone()
    };
    let expired = rows_by_type("expired");
    let live = rows_by_type("live");
    assert!(
        env.inspector
            .get_task_info(q, &expired)
            .await
            .unwrap()
            .is_orphaned
    );
    assert!(
        !env.inspector
            .get_task_info(q, &live)
            .await
            .unwrap()
            .is_orphaned
    );
}

/// R4: the orphan scan reads `active` in bounded chunks: one call reads
/// 100 ids, and one full pass reads 10 chunks per queue, wherever it stands
/// in a long list. With 5,000 hash-less ids in `active`, each pass after
/// the grace drops exactly the 1,000 ids the previous pass saw, and the
/// cursor goes on from where it stopped (ids dropped behind it are allowed
/// for), so five more passes empty the list.
#[tokio::test]
async fn r4_orphan_scan_reads_active_in_bounded_chunks() {
    let mut env = clocked(now()).await;
    let q = "big";
    let _: i64 = env.conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    for chunk in 0..5 {
        let ids: Vec<String> = (0..1000).map(|i| format!("gone-{chunk}-{i:04}")).collect();
        let _: i64 = env.conn.lpush(keys::active_key(q), &ids).await.unwrap();
    }
    let first = env.broker.scan_active(q, 0).await.unwrap();
    assert_eq!(first.len, 5000);
    assert_eq!(first.suspects.len(), 100, "one call reads 100 ids");
    // From the tail: the 100 oldest ids, the first pushed.
    let mut seen: Vec<String> = first.suspects.iter().map(|(id, _)| id.clone()).collect();
    seen.sort();
    let oldest: Vec<String> = (0..100).map(|i| format!("gone-0-{i:04}")).collect();
    assert_eq!(seen, oldest);
    assert!(
        first.suspects.iter().all(|(_, l)| l.lease && l.task),
        "hash-less lease-less ids lack both"
    );

    let r = recoverer(&env, &[q]);
    assert_eq!(r.tick().await.unwrap(), RecoverOutcome::default());
    let mut left = 5000;
    for pass in 1..=5 {
        env.clock
            .set(now() + secs(30 * pass) + chrono::Duration::from_std(ORPHAN_GRACE).unwrap());
        let out = r.tick().await.unwrap();
        assert_eq!(
            out,
            RecoverOutcome {
                orphans_dropped: 1000,
                ..RecoverOutcome::default()
            },
            "pass {pass}"
        );
        left -= 1000;
        let len: usize = env.conn.llen(keys::active_key(q)).await.unwrap();
        assert_eq!(len, left, "pass {pass}");
    }
}

// ---------------------------------------------------------------- R8

/// R8: tasks of a Go worker killed with SIGKILL mid-flight come back (to
/// retry, `asynq: task lease expired`) within 5 s after their lease plus
/// the 30 s grace have passed, not at the next 60 s full pass. The
/// recoverer runs its real `run` loop on a simulated clock that starts at
/// T = 5 s before real time (so every Go lease, taken at real time + 30 s,
/// ends after T + 30 s). Each full pass is seen done when a probe task
/// recoverable by it comes back: probe 1 (lease T − 600 s) at the first
/// pass, probe 2 (lease T + 25 s) at the second, at T + 60 s, which leaves
/// the Go tasks active. Then the clock goes to the last Go lease + 30 s,
/// well before the third full pass (T + 120 s).
#[tokio::test]
async fn r8_killed_worker_tasks_come_back_within_5s_of_lease_and_grace() {
    let t = DateTime::from_timestamp(Utc::now().timestamp() - 5, 0).unwrap();
    let mut env = clocked(t).await;
    let q = "crash";
    const N: usize = 20;
    let mut ids = BTreeSet::new();
    for i in 0..N {
        let task = env
            .client
            .enqueue(
                &Task::new("slow", format!("{i}").into_bytes()),
                EnqueueOptions::new().queue(q).max_retry(5),
            )
            .await
            .unwrap();
        ids.insert(task.id);
    }
    for until in [t - secs(600), t + secs(25)] {
        env.client
            .enqueue(
                &Task::new("probe", b"p".to_vec()),
                EnqueueOptions::new().queue("probe"),
            )
            .await
            .unwrap();
        env.broker.dequeue("probe", 1, until).await.unwrap();
    }
    let probes_back = |n: i64| {
        let inspector = env.inspector.clone();
        support::eventually(Duration::from_secs(20), move || {
            let inspector = inspector.clone();
            async move { (inspector.queue_info("probe").await.ok()?.retry == n).then_some(()) }
        })
    };

    let shutdown = CancellationToken::new();
    let run = tokio::spawn(
        Recoverer::new(
            env.broker.clone(),
            vec![q.into(), "probe".into()],
            Duration::from_secs(60),
            zero_delay(),
            always_failure(),
        )
        .run(shutdown.clone()),
    );
    probes_back(1)
        .await
        .expect("first full pass done (probe 1 recovered)");

    let worker = env.db.peer_spawn(&[
        "work",
        "--queues",
        q,
        "--concurrency",
        &N.to_string(),
        "--behaviour",
        "sleep:10m",
        "--max-duration",
        "10m",
    ]);
    support::eventually(Duration::from_secs(30), || {
        let mut conn = env.conn.clone();
        async move {
            let n: usize = conn.zcard(keys::lease_key(q)).await.ok()?;
            (n == N).then_some(())
        }
    })
    .await
    .expect("Go worker leased every task");
    drop(worker); // SIGKILL
    let leases: Vec<(String, i64)> = env
        .conn
        .zrange_withscores(keys::lease_key(q), 0, -1)
        .await
        .unwrap();
    let last_lease = leases.iter().map(|(_, s)| *s).max().unwrap();
    assert!(leases.iter().all(|(_, s)| *s > (t + secs(30)).timestamp()));
    assert!(last_lease + 30 < (t + secs(120)).timestamp());

    env.clock.set(t + secs(60));
    probes_back(2)
        .await
        .expect("second full pass done at T + 60 s (probe 2 recovered)");
    assert_eq!(env.inspector.queue_info(q).await.unwrap().active, N as i64);

    // Lease + grace passed for every Go task: within 5 s they must be back.
    env.clock
        .set(DateTime::from_timestamp(last_lease + 30, 0).unwrap());
    let back = support::eventually(Duration::from_secs(10), || {
        let inspector = env.inspector.clone();
        async move {
            let n = inspector.queue_info(q).await.ok()?.retry;
            (n == N as i64).then_some(())
        }
    })
    .await;
    shutdown.cancel();
    run.await.unwrap();
    assert!(
        back.is_some(),
        "killed worker's tasks not back in retry within 5 s (+5 s slack) of lease + grace: {:?}",
        env.inspector.queue_info(q).await.unwrap()
    );
    for id in &ids {
        let info = env.inspector.get_task_info(q, id).await.unwrap();
        assert_eq!(info.state, TaskState::Retry);
        assert_eq!(info.last_err, "asynq: task lease expired");
        assert_eq!(info.retried, 1);
    }
    assert!(active_ids(&mut env.conn, q).await.is_empty());
}

/// R8: after a pass, the recoverer's next wake is the earliest lease + 30 s
/// (capped at 5 s ahead), nothing is recovered a second before it, and
/// between full passes only the queues that hold leases are looked at.
#[tokio::test]
async fn r8_next_wake_is_lease_plus_grace_and_only_lease_queues_are_polled() {
    let mut env = clocked(now()).await;
    let mut queues: Vec<String> = (0..30).map(|i| format!("idle{i:02}")).collect();
    for q in &queues {
        let _: i64 = env.conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    }
    queues.push("busy".into());
    env.client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().queue("busy"),
        )
        .await
        .unwrap();
    // Leased at t0 - 27 s: lease until t0 + 3 s, recoverable at t0 + 33 s.
    let leased = env
        .broker
        .dequeue("busy", 1, now() + secs(3))
        .await
        .unwrap()
        .remove(0)
        .unwrap();
    let r = Recoverer::new(
        env.broker.clone(),
        queues.clone(),
        Duration::from_secs(60),
        zero_delay(),
        always_failure(),
    );
    assert_eq!(r.tick().await.unwrap(), RecoverOutcome::default());
    assert_eq!(r.watched_queues(), vec!["busy".to_string()]);
    assert_eq!(r.next_wake(), now() + secs(5), "capped 5 s ahead");

    env.clock.set(now() + secs(30));
    assert_eq!(r.poll().await.unwrap(), RecoverOutcome::default());
    assert_eq!(r.next_wake(), now() + secs(33), "lease + 30 s grace");
    env.clock.set(now() + secs(32));
    assert_eq!(r.poll().await.unwrap(), RecoverOutcome::default());
    assert_eq!(
        state_of(&env, "busy", &leased.msg.id).await,
        TaskState::Active
    );
    env.clock.set(now() + secs(33));
    assert_eq!(
        r.poll().await.unwrap(),
        RecoverOutcome {
            retried: 1,
            ..RecoverOutcome::default()
        }
    );
    assert_eq!(
        state_of(&env, "busy", &leased.msg.id).await,
        TaskState::Retry
    );
    assert!(r.watched_queues().is_empty());
    assert_eq!(r.next_wake(), now() + secs(60), "next full pass");
}

// ---------------------------------------------------------------- R14

/// Every key whose name holds `{<queue>}`, found with SCAN (on every
/// master of a cluster).
async fn keys_of(db: &support::TestDb, queue: &str) -> BTreeSet<String> {
    db.scan_keys(&format!("*{{{queue}}}*")).await
}

/// R14: a forced delete removes every key of the queue: tasks of every
/// state, containers, the paused flag, the all-time and daily counters,
/// the outage samples and the unique locks of deleted tasks. Another
/// queue's keys are untouched.
#[tokio::test]
async fn r14_force_delete_removes_every_key_of_the_queue() {
    let mut env = clocked(now()).await;
    let q = "doomed";
    let opts = || EnqueueOptions::new().queue(q).max_retry(1);
    env.client
        .enqueue(
            &Task::new("p", b"1".to_vec()),
            opts().unique(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    env.client
        .enqueue(
            &Task::new("s", b"2".to_vec()),
            opts().process_in(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    env.client
        .enqueue(&Task::new("g", b"3".to_vec()), opts().group("grp"))
        .await
        .unwrap();
    for ty in ["r", "a", "c"] {
        env.client
            .enqueue(&Task::new(ty, ty.as_bytes().to_vec()), opts())
            .await
            .unwrap();
    }
    // Lease r, a, c (pending is FIFO: p first, so take four and requeue p).
    let leased = env.broker.dequeue(q, 4, now() + secs(30)).await.unwrap();
    for t in leased {
        let t = t.unwrap();
        match t.msg.r#type.as_str() {
            "p" => env.broker.requeue(&t.msg).await.unwrap(),
            "r" => env
                .broker
                .retry(&t, now() + secs(60), "e", true)
                .await
                .unwrap(),
            "a" => env.broker.archive(&t, "e").await.unwrap(),
            "c" => env.broker.mark_as_complete(&t).await.unwrap(),
            other => panic!("unexpected {other}"),
        }
    }
    env.inspector.pause_queue(q).await.unwrap();
    let _: () = env
        .conn
        .zadd(samples_key(q), "sample", now().timestamp())
        .await
        .unwrap();
    // Yesterday's daily counters too (Go writes them with a 90-day TTL).
    let yesterday = (now() - secs(86_400)).date_naive();
    let _: () = env
        .conn
        .set(keys::processed_key(q, yesterday), 7)
        .await
        .unwrap();
    let _: () = env
        .conn
        .set(keys::failed_key(q, yesterday), 3)
        .await
        .unwrap();
    // A neighbour queue that must survive.
    env.client
        .enqueue(
            &Task::new("keep", b"k".to_vec()),
            EnqueueOptions::new().queue("kept"),
        )
        .await
        .unwrap();
    env.inspector.pause_queue("kept").await.unwrap();
    let kept_before = keys_of(&env.db, "kept").await;

    let before = keys_of(&env.db, q).await;
    for must in [
        keys::pending_key(q),
        keys::paused_key(q),
        keys::processed_total_key(q),
        keys::processed_key(q, yesterday),
        samples_key(q),
    ] {
        assert!(before.contains(&must), "setup lacks {must}: {before:?}");
    }
    env.inspector.delete_queue(q, true).await.unwrap();
    assert_eq!(keys_of(&env.db, q).await, BTreeSet::new());
    assert_eq!(keys_of(&env.db, "kept").await, kept_before);
    assert_eq!(
        env.inspector.queues().await.unwrap(),
        vec!["kept".to_string()]
    );
}

/// R14: Go ≥ 0.25 producers cache a queue's registration, so after a queue
/// is force-deleted (here by Go's own Inspector, which leaves the paused
/// flag behind) a running Go scheduler keeps enqueuing into it without
/// `SADD asynq:queues`. The maintenance engine finds it again (bounded SCAN)
/// within a minute, listed and unpaused, with the new tasks in pending.
#[tokio::test]
async fn r14_go_producer_queue_reappears_unpaused_after_force_delete() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let inspector = Inspector::from_broker(broker.clone());
    let mut conn = db.raw().await;
    let q = "reborn";
    let _sched = db.peer_spawn(&[
        "schedule",
        "--spec",
        "@every 1s",
        "--type",
        "tick",
        "--queue",
        q,
        "--for",
        "3m",
    ]);
    support::eventually(Duration::from_secs(20), || {
        let inspector = inspector.clone();
        async move { (inspector.queue_info(q).await.ok()?.pending >= 1).then_some(()) }
    })
    .await
    .expect("Go scheduler enqueues into the queue");
    inspector.pause_queue(q).await.unwrap();
    // Go's forced delete, then wait for a task enqueued after it.
    db.peer_ok(&["inspect", "delete-queue", "--queue", q, "--force"]);
    assert!(!inspector.queues().await.unwrap().contains(&q.to_string()));
    support::eventually(Duration::from_secs(20), || {
        let mut conn = conn.clone();
        async move {
            let n: i64 = conn.llen(keys::pending_key(q)).await.ok()?;
            (n >= 1).then_some(())
        }
    })
    .await
    .expect("the Go producer keeps enqueuing");
    let listed: bool = conn.sismember(keys::ALL_QUEUES, q).await.unwrap();
    assert!(
        !listed,
        "Go producer re-registered the queue: the test proves nothing"
    );

    let shutdown = CancellationToken::new();
    let engine = tokio::spawn(
        Maintenance::new(
            broker.clone(),
            MaintenanceConfig {
                register_server: false,
                sample_interval: None,
                ..MaintenanceConfig::default()
            },
        )
        .run(shutdown.clone()),
    );
    let back = support::eventually(Duration::from_secs(60), || {
        let inspector = inspector.clone();
        async move {
            inspector
                .queues()
                .await
                .ok()?
                .contains(&q.to_string())
                .then_some(())
        }
    })
    .await;
    shutdown.cancel();
    engine.await.unwrap();
    assert!(
        back.is_some(),
        "queue with tasks not listed again within a minute"
    );
    let info = inspector.queue_info(q).await.unwrap();
    assert!(!info.paused, "rediscovered queue is still paused");
    assert!(info.pending >= 1);
}

/// R14: a queue force-deleted by our inspector while a Go scheduler keeps
/// enqueuing into it is found again by the discovery step alone, which
/// walks the keyspace with SCAN COUNT 100 a few steps per tick: with
/// 3,000 unrelated keys, one full cycle restores it, unpaused.
#[tokio::test]
async fn r14_discovery_restores_a_queue_missing_from_the_registry() {
    use asynqdeck::server::discovery::QueueDiscovery;
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let inspector = Inspector::from_broker(broker.clone());
    let client = Client::from_broker(broker.clone());
    let mut conn = db.raw().await;
    support::redis::fill(&mut conn, "other:", 3000).await;
    for q in ["listed", "lost"] {
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    // `lost` leaves the registry as after a Go producer's cached enqueue,
    // and carries a leftover paused flag.
    let _: i64 = conn.srem(keys::ALL_QUEUES, "lost").await.unwrap();
    let _: () = conn.set(keys::paused_key("lost"), 1).await.unwrap();
    let mut discovery = QueueDiscovery::new(broker.clone());
    let mut restored = Vec::new();
    let mut ticks = 0;
    loop {
        let out = discovery.tick().await.unwrap();
        restored.extend(out.restored);
        ticks += 1;
        if out.cycle_done {
            break;
        }
        assert!(ticks < 100, "a discovery cycle over 3,000 keys never ends");
    }
    assert_eq!(restored, vec!["lost".to_string()]);
    assert_eq!(
        inspector.queues().await.unwrap(),
        vec!["listed".to_string(), "lost".to_string()]
    );
    assert!(!inspector.queue_info("lost").await.unwrap().paused);
    // A queue left with only counters (no task) is not brought back.
    let _: i64 = conn.srem(keys::ALL_QUEUES, "listed").await.unwrap();
    let _: () = conn.del(keys::pending_key("listed")).await.unwrap();
    let _: () = conn
        .set(keys::processed_total_key("listed"), 5)
        .await
        .unwrap();
    loop {
        let out = discovery.tick().await.unwrap();
        assert!(out.restored.is_empty(), "restored {:?}", out.restored);
        if out.cycle_done {
            break;
        }
    }
    assert_eq!(inspector.queues().await.unwrap(), vec!["lost".to_string()]);
}

/// R14: a queue this discovery saw listed, deleted and then given a new
/// task by a producer that does not register it (Go ≥ 0.25's cached
/// registration) is listed again at the next read of the queue list
/// (every `LIST_EVERY_TICKS` ticks), long before the keyspace walk, capped
/// at 2,000 keys a tick, would reach it.
///
/// Where SCAN returns the queue's key depends on its hash bucket and on
/// Redis's incremental rehashing: in about one run in eight the walk's
/// first 5 ticks (500 keys each) reach it before the list is read again.
/// Such an attempt proves nothing, so it is repeated with another queue
/// name (another bucket), up to 6 times; every attempt's tick is reported.
#[tokio::test]
async fn r14_a_watched_queue_comes_back_before_the_keyspace_walk_reaches_it() {
    use asynqdeck::server::discovery::{LIST_EVERY_TICKS, QueueDiscovery};
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let inspector = Inspector::from_broker(broker.clone());
    let client = Client::from_broker(broker.clone());
    let mut conn = db.raw().await;
    support::redis::fill(&mut conn, "other:", 20_000).await;
    let task = Task::new("t", b"x".to_vec());
    let mut attempts = Vec::new();
    for attempt in 0..6 {
        let queue = format!("doomed{attempt}");
        client
            .enqueue(&task, EnqueueOptions::new().queue(&queue))
            .await
            .unwrap();
        let mut discovery = QueueDiscovery::new(broker.clone());
        // First tick: the list is read with the queue in it.
        let first = discovery.tick().await.unwrap();
        assert_eq!(first.restored, Vec::<String>::new());
        inspector.delete_queue(&queue, true).await.unwrap();
        assert!(!inspector.queues().await.unwrap().contains(&queue));
        // A producer with a cached registration: the task, no SADD.
        let _: i64 = conn
            .lpush(keys::pending_key(&queue), "new-id")
            .await
            .unwrap();
        let mut ticks = 1;
        let restored_at = loop {
            let out = discovery.tick().await.unwrap();
            ticks += 1;
            assert!(
                !out.cycle_done,
                "the keyspace walk ended before the watched queue came back"
            );
            if out.restored == vec![queue.clone()] {
                break ticks;
            }
            assert!(out.restored.is_empty(), "restored {:?}", out.restored);
            assert!(
                ticks <= 2 * LIST_EVERY_TICKS,
                "not restored after {ticks} ticks"
            );
        };
        assert!(inspector.queues().await.unwrap().contains(&queue));
        attempts.push(restored_at);
        if restored_at as u64 == LIST_EVERY_TICKS + 1 {
            return;
        }
        // Restored earlier: the walk reached the key first; try again.
        assert!((restored_at as u64) < LIST_EVERY_TICKS + 1, "{attempts:?}");
    }
    panic!(
        "never restored by the list read at tick {} (restored at ticks {attempts:?})",
        LIST_EVERY_TICKS + 1
    );
}
