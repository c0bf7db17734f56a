//! Issue 15 target 1: the embedded maintenance engine works from its due
//! index (`broker::due`), so its Redis cost follows change, not the number
//! of queues. On a cluster the index polls (no key tracking there); the
//! tests that read server-wide figures (`INFO commandstats`, `CLIENT
//! LIST`) use a private redis-server and do not run in the cluster pass.

use std::time::Duration;

use asynqdeck::broker::{DUE_INDEX_CLIENT_NAME, keys, samples_key};
use asynqdeck::server::{Maintenance, MaintenanceConfig};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};
use redis::AsyncCommands;
use tokio_util::sync::CancellationToken;

use crate::support::redis::RawConn;
use crate::support::{self, TestDb};

fn config() -> MaintenanceConfig {
    MaintenanceConfig {
        forwarder_interval: Duration::from_millis(200),
        janitor_interval: Duration::from_millis(200),
        heartbeat_interval: Duration::from_millis(500),
        discovery_interval: None,
        register_server: false,
        sample_interval: Some(Duration::from_secs(1)),
        ..MaintenanceConfig::default()
    }
}

struct Engine {
    shutdown: CancellationToken,
    run: tokio::task::JoinHandle<()>,
}

async fn start(db: &TestDb, config: MaintenanceConfig) -> Engine {
    let broker = asynqdeck::broker::Broker::connect(&db.url()).await.unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(Maintenance::new(broker, config).run(shutdown.clone()));
    Engine { shutdown, run }
}

impl Engine {
    async fn stop(self) {
        self.shutdown.cancel();
        self.run.await.unwrap();
    }
}

async fn wait_pending(inspector: &Inspector, queue: &str, id: &str) {
    let reached = support::eventually(Duration::from_secs(30), || async {
        let t = inspector.get_task_info(queue, id).await.ok()?;
        (t.state == TaskState::Pending).then_some(())
    })
    .await;
    assert!(reached.is_some(), "task {queue}/{id} never forwarded");
}

/// Waits until the sampler has sampled every one of `queues` (so the index
/// had read them all).
async fn wait_sampled(conn: &RawConn, queues: &[String]) {
    let done = support::eventually(Duration::from_secs(60), || {
        let mut conn = conn.clone();
        async move {
            for q in queues {
                let n: i64 = conn.zcard(samples_key(q)).await.ok()?;
                if n == 0 {
                    return None;
                }
            }
            Some(())
        }
    })
    .await;
    assert!(done.is_some(), "the sampler never sampled every queue");
}

/// A scheduled task due about now, enqueued by our client and by the Go
/// peer, before and after the engine started (a queue created after
/// start), is forwarded by the index-driven engine.
#[tokio::test]
async fn indexed_engine_forwards_scheduled_tasks_of_old_and_new_queues() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let soon = || chrono::Utc::now() + chrono::Duration::seconds(1);
    let early = client
        .enqueue(
            &Task::new("t", b"a".to_vec()),
            EnqueueOptions::new().queue("early").process_at(soon()),
        )
        .await
        .unwrap();
    let engine = start(&db, config()).await;
    wait_pending(&inspector, "early", &early.id).await;

    let late = client
        .enqueue(
            &Task::new("t", b"b".to_vec()),
            EnqueueOptions::new().queue("late").process_at(soon()),
        )
        .await
        .unwrap();
    wait_pending(&inspector, "late", &late.id).await;

    let at = soon().timestamp().to_string();
    let go = db.peer_ok(&[
        "enqueue",
        "--type",
        "t",
        "--queue",
        "go_late",
        "--process-at",
        &at,
    ]);
    wait_pending(&inspector, "go_late", go["id"].as_str().unwrap()).await;
    engine.stop().await;
}

/// Commands Redis ran since the last reset (scripts' inner commands
/// included), by name, then resets the counts.
async fn commands_since(conn: &mut RawConn) -> std::collections::BTreeMap<String, u64> {
    support::commandstats::since_last(conn).await
}

/// Cost follows change: with 300 idle queues, once the index has read them
/// (every queue sampled once), the engine runs no script at all while its
/// forwarder, janitor and sampler tick for several seconds, except the one
/// forward of the one queue given a due task (two scripts: its scheduled
/// and retry sets; the test's enqueue is the third).
#[tokio::test]
async fn idle_queues_cost_no_scripts_and_a_due_queue_exactly_one_forward() {
    if support::redis::cluster_mode() {
        return;
    }
    let db = support::private_redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let queues: Vec<String> = (0..300).map(|i| format!("idle{i:03}")).collect();
    for q in &queues {
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    let engine = start(&db, config()).await;
    wait_sampled(&conn, &queues).await;
    // Warm up: the forward script is loaded (a first EVALSHA would fail
    // with NOSCRIPT and be sent again).
    let warm = client
        .enqueue(
            &Task::new("t", b"w".to_vec()),
            EnqueueOptions::new()
                .queue("idle000")
                .process_at(chrono::Utc::now() + chrono::Duration::seconds(1)),
        )
        .await
        .unwrap();
    wait_pending(&inspector, "idle000", &warm.id).await;

    // A task due in 3 s: until then the engine ticks ~15 times (forwarder,
    // janitor) and ~3 times (sampler) over 300 queues. Counted from before
    // its enqueue (one script).
    commands_since(&mut conn).await;
    let due = client
        .enqueue(
            &Task::new("t", b"d".to_vec()),
            EnqueueOptions::new()
                .queue("idle150")
                .process_at(chrono::Utc::now() + chrono::Duration::seconds(3)),
        )
        .await
        .unwrap();
    let forwarded = support::eventually(Duration::from_secs(30), || {
        let mut conn = conn.clone();
        async move {
            let n: i64 = conn.llen(keys::pending_key("idle150")).await.ok()?;
            (n == 2).then_some(())
        }
    })
    .await;
    assert!(forwarded.is_some(), "the due task was never forwarded");
    let ran = commands_since(&mut conn).await;
    engine.stop().await;
    // The enqueue, then the forward of the scheduled and the retry set.
    assert_eq!(ran.get("evalsha").copied().unwrap_or(0), 3, "{ran:?}");
    assert_eq!(ran.get("eval").copied().unwrap_or(0), 0, "{ran:?}");
    let state = inspector.get_task_info("idle150", &due.id).await.unwrap();
    assert_eq!(state.state, TaskState::Pending);
}

/// The tracked connection's id in `CLIENT LIST` (by its name).
async fn index_client(conn: &mut RawConn) -> Option<String> {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query_async(conn)
        .await
        .unwrap();
    list.lines()
        .find(|l| {
            l.split(' ')
                .any(|f| f == format!("name={DUE_INDEX_CLIENT_NAME}"))
        })
        .and_then(|l| l.split(' ').next()?.strip_prefix("id=").map(str::to_string))
}

/// Tracking lost: the index's connection killed, a task made due while it
/// is gone (written straight into the scheduled set after the kill) is
/// still forwarded, and a new tracked connection is opened.
#[tokio::test]
async fn a_killed_tracking_connection_is_replaced_and_nothing_is_missed() {
    if support::redis::cluster_mode() {
        return;
    }
    let db = support::private_redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let queues: Vec<String> = vec!["k1".into(), "k2".into()];
    for q in &queues {
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    // A task scheduled far ahead, made due by hand later.
    let far = client
        .enqueue(
            &Task::new("t", b"f".to_vec()),
            EnqueueOptions::new()
                .queue("k2")
                .process_at(chrono::Utc::now() + chrono::Duration::days(1)),
        )
        .await
        .unwrap();
    let engine = start(&db, config()).await;
    wait_sampled(&conn, &queues).await;
    let first = support::eventually(Duration::from_secs(10), || {
        let mut conn = conn.clone();
        async move { index_client(&mut conn).await }
    })
    .await
    .expect("the due index opens its tracked connection");
    let _: () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&first)
        .query_async(&mut conn)
        .await
        .map(|_: i64| ())
        .unwrap();
    let _: i64 = conn
        .zadd(keys::scheduled_key("k2"), &far.id, 1)
        .await
        .unwrap();
    wait_pending(&inspector, "k2", &far.id).await;
    let second = support::eventually(Duration::from_secs(10), || {
        let mut conn = conn.clone();
        async move { index_client(&mut conn).await }
    })
    .await
    .expect("a new tracked connection");
    assert_ne!(first, second);
    engine.stop().await;
}

/// The sampler samples on change: a queue's retry size changing is in a
/// new sample, with the right sizes; the growth figures read from them are
/// exact.
#[tokio::test]
async fn the_indexed_sampler_records_a_change_of_sizes() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let queues = vec!["sampled".to_string()];
    client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().queue("sampled"),
        )
        .await
        .unwrap();
    let engine = start(&db, config()).await;
    wait_sampled(&conn, &queues).await;
    let first = inspector.queue_samples("sampled").await.unwrap();
    assert_eq!(
        first
            .iter()
            .map(|s| (s.retry, s.archived))
            .collect::<Vec<_>>()[..1],
        [(0, 0)]
    );
    // Two retry entries appear (ids only: the sampler counts members).
    let _: i64 = conn
        .zadd_multiple(keys::retry_key("sampled"), &[(4e9, "r1"), (4e9, "r2")])
        .await
        .unwrap();
    let seen = support::eventually(Duration::from_secs(30), || async {
        let s = inspector.queue_samples("sampled").await.ok()?;
        s.iter().any(|s| s.retry == 2).then_some(s)
    })
    .await
    .expect("a sample with the new retry size");
    let latest = seen.last().unwrap();
    assert_eq!((latest.retry, latest.archived), (2, 0));
    let growth = asynqdeck::inspector::retry_growth(&seen, latest.at).unwrap();
    assert_eq!(growth.last_5m.delta(), 2);
    engine.stop().await;
}

/// Tracking refused (an ACL user without `CLIENT`): the index falls back to
/// polling, opens no tracked connection, and a scheduled task of a queue
/// created after start is still forwarded.
#[tokio::test]
async fn refused_tracking_falls_back_to_polling() {
    if support::redis::cluster_mode() {
        return;
    }
    let db = support::private_redis();
    let mut conn = db.raw().await;
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("notrack")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("&*")
        .arg("+@all")
        .arg("-client")
        .query_async(&mut conn)
        .await
        .unwrap();
    let url = db.url_as("notrack", "pw");
    let broker = asynqdeck::broker::Broker::connect(&url).await.unwrap();
    let shutdown = CancellationToken::new();
    let run = tokio::spawn(Maintenance::new(broker, config()).run(shutdown.clone()));
    let engine = Engine { shutdown, run };
    let client = Client::connect(&url).await.unwrap();
    let inspector = Inspector::connect(&url).await.unwrap();
    let task = client
        .enqueue(
            &Task::new("t", b"p".to_vec()),
            EnqueueOptions::new()
                .queue("polled")
                .process_at(chrono::Utc::now() + chrono::Duration::seconds(1)),
        )
        .await
        .unwrap();
    wait_pending(&inspector, "polled", &task.id).await;
    assert_eq!(index_client(&mut conn).await, None);
    engine.stop().await;
}

/// The index-driven recoverer: a task whose worker vanished (lease ended
/// over 30 s ago) is retried, and one in a queue created after start too.
#[tokio::test]
async fn indexed_recoverer_takes_back_lease_expired_tasks() {
    let db = support::redis();
    let broker = asynqdeck::broker::Broker::connect(&db.url()).await.unwrap();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let lease_lapsed = |queue: &'static str| {
        let (broker, client) = (broker.clone(), client.clone());
        async move {
            let info = client
                .enqueue(
                    &Task::new("t", b"l".to_vec()),
                    EnqueueOptions::new().queue(queue),
                )
                .await
                .unwrap();
            let ended = chrono::Utc::now() - chrono::Duration::seconds(60);
            let leased = broker.dequeue(queue, 1, ended).await.unwrap();
            assert_eq!(leased.len(), 1);
            info.id
        }
    };
    let first = lease_lapsed("crashed").await;
    let engine = start(&db, config()).await;
    let retried = |queue: &'static str, id: String| {
        let inspector = inspector.clone();
        async move {
            let back = support::eventually(Duration::from_secs(30), || async {
                let t = inspector.get_task_info(queue, &id).await.ok()?;
                (t.state == TaskState::Retry).then_some(())
            })
            .await;
            assert!(back.is_some(), "{queue}/{id} never recovered");
        }
    };
    retried("crashed", first).await;
    let second = lease_lapsed("crashed_later").await;
    retried("crashed_later", second).await;
    engine.stop().await;
}
