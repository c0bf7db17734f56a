//! The group aggregator (issue 16 item 4; Go `aggregator.go`, wire spec
//! §6.13, §7.6): Go's readiness rules at their boundaries on a simulated
//! clock, sets left for the recoverer, undecodable members archived, the
//! `Server` running it, and both directions with Go v0.26.0.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use asynqdeck::broker::{AGGREGATION_SET_MAX, Broker, GroupRules};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::server::aggregator::Aggregator;
use asynqdeck::server::{AggregationReport, Config, GroupAggregator, TaskContext, handler_fn};
use asynqdeck::{Client, EnqueueOptions, Error, Task};
use redis::AsyncCommands;

use crate::support::clock::{broker_at, now};
use crate::support::server::{WAIT, start};
use crate::support::{self, TestDb};

/// What the aggregator was given: (group, [(type, payload)]).
type Calls = Arc<Mutex<Vec<(String, Vec<(String, String)>)>>>;

/// An aggregator that records its calls and returns a `digest` task whose
/// payload is the group's payloads joined by `\n`, with a header naming
/// the group and a queue option the aggregator must override.
fn digest(calls: &Calls) -> Arc<dyn GroupAggregator> {
    let calls = calls.clone();
    Arc::new(move |group: &str, tasks: Vec<Task>| {
        let seen = tasks
            .iter()
            .map(|t| {
                (
                    t.type_name().to_string(),
                    String::from_utf8_lossy(t.payload()).into_owned(),
                )
            })
            .collect::<Vec<_>>();
        let payload = seen
            .iter()
            .map(|(_, p)| p.as_str())
            .collect::<Vec<_>>()
            .join("\n");
        calls.lock().unwrap().push((group.to_string(), seen));
        Task::new("digest", payload.into_bytes())
            .with_header("group", group)
            .with_options(EnqueueOptions::new().queue("elsewhere").max_retry(2))
    })
}

fn rules(grace_s: u64, max_delay_s: u64, max_size: usize) -> GroupRules {
    GroupRules {
        grace_period: Duration::from_secs(grace_s),
        max_delay: Duration::from_secs(max_delay_s),
        max_size,
    }
}

fn aggregator(broker: &Broker, rules: GroupRules, calls: &Calls) -> Aggregator {
    Aggregator::new(
        broker.clone(),
        vec!["q".to_string()],
        rules,
        Duration::from_secs(1),
        digest(calls),
    )
    .unwrap()
}

/// Enqueues a grouped task with id `id` and payload `payload` in queue `q`.
async fn add(client: &Client, group: &str, id: &str, payload: &str) {
    client
        .enqueue(
            &Task::new("email", payload.as_bytes().to_vec()),
            EnqueueOptions::new().queue("q").group(group).task_id(id),
        )
        .await
        .unwrap();
}

/// The pending tasks of `q`: (type, payload, headers' group, queue, MaxRetry).
async fn pending(db: &TestDb) -> Vec<(String, String, String, String, i32)> {
    let inspector = asynqdeck::Inspector::connect(&db.url()).await.unwrap();
    inspector
        .list_tasks(
            "q",
            asynqdeck::TaskState::Pending,
            asynqdeck::inspector::Page::default(),
        )
        .await
        .unwrap()
        .into_iter()
        .map(|r| match r {
            asynqdeck::inspector::TaskRow::Task(t) => (
                t.task_type,
                String::from_utf8_lossy(&t.payload).into_owned(),
                t.headers.get("group").cloned().unwrap_or_default(),
                t.queue,
                t.max_retry,
            ),
            other => panic!("corrupt row {other:?}"),
        })
        .collect()
}

fn report(enqueued: u64, tasks: u64, failed: u64) -> AggregationReport {
    AggregationReport {
        enqueued,
        tasks,
        failed,
    }
}

/// Go's grace rule: a group is ready once its newest task waited the grace
/// period (score ≤ t − grace), not a second before; the aggregate is
/// enqueued in the group's queue whatever queue the aggregator asked for,
/// and the set, the group and its tasks are gone.
#[tokio::test]
async fn grace_period_boundary_and_what_is_left() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    for (id, p) in [("t1", "a"), ("t2", "b"), ("t3", "c")] {
        add(&client, "user:1", id, p).await;
    }
    let calls = Calls::default();
    let agg = aggregator(&broker, rules(10, 0, 0), &calls);

    clock.advance(Duration::from_secs(9));
    assert_eq!(agg.tick().await, report(0, 0, 0));
    assert_eq!(broker.list_groups("q").await.unwrap(), vec!["user:1"]);

    clock.advance(Duration::from_secs(1));
    assert_eq!(agg.tick().await, report(1, 3, 0));
    assert_eq!(
        *calls.lock().unwrap(),
        vec![(
            "user:1".to_string(),
            vec![
                ("email".to_string(), "a".to_string()),
                ("email".to_string(), "b".to_string()),
                ("email".to_string(), "c".to_string()),
            ]
        )]
    );
    assert_eq!(
        pending(&db).await,
        vec![(
            "digest".to_string(),
            "a\nb\nc".to_string(),
            "user:1".to_string(),
            "q".to_string(),
            2
        )]
    );
    let mut conn = db.raw().await;
    let left: Vec<String> = db.scan_keys("asynq:{q}:*").await.into_iter().collect();
    let pending_id: Vec<String> = conn.lrange("asynq:{q}:pending", 0, -1).await.unwrap();
    let mut want = vec![
        "asynq:{q}:pending".to_string(),
        format!("asynq:{{q}}:t:{}", pending_id[0]),
    ];
    want.sort();
    assert_eq!(
        left, want,
        "no group, set, groups entry or member hash left"
    );
    assert_eq!(agg.tick().await, report(0, 0, 0));
}

/// Go's max size rule: a group of at least max size is ready at once, one
/// set takes its oldest max size tasks per check, and a group left with
/// fewer waits (grace 1 h here).
#[tokio::test]
async fn max_size_takes_the_oldest_and_the_rest_waits() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    for (i, p) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        add(&client, "g", &format!("t{i}"), p).await;
        clock.advance(Duration::from_secs(1));
    }
    let calls = Calls::default();
    let agg = aggregator(&broker, rules(3600, 0, 2), &calls);
    assert_eq!(agg.tick().await, report(1, 2, 0));
    assert_eq!(agg.tick().await, report(1, 2, 0));
    assert_eq!(agg.tick().await, report(0, 0, 0));
    let payloads: Vec<String> = pending(&db).await.into_iter().map(|p| p.1).collect();
    assert_eq!(payloads, vec!["a\nb", "c\nd"]);
    assert_eq!(broker.list_groups("q").await.unwrap(), vec!["g"]);
    let mut conn = db.raw().await;
    let rest: Vec<String> = conn.zrange("asynq:{q}:g:g", 0, -1).await.unwrap();
    assert_eq!(rest, vec!["t4"]);
}

/// Go's max delay rule: a group that keeps growing (so the grace period
/// never passes) is aggregated once its oldest task waited max delay.
#[tokio::test]
async fn max_delay_aggregates_a_group_that_keeps_growing() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    let calls = Calls::default();
    let agg = aggregator(&broker, rules(10, 30, 0), &calls);
    for i in 0..6 {
        add(&client, "g", &format!("t{i}"), &i.to_string()).await;
        assert_eq!(agg.tick().await, report(0, 0, 0), "at {} s", i * 5);
        clock.advance(Duration::from_secs(5));
    }
    add(&client, "g", "t6", "6").await;
    assert_eq!(agg.tick().await, report(1, 7, 0), "at 30 s");
    let payloads: Vec<String> = pending(&db).await.into_iter().map(|p| p.1).collect();
    assert_eq!(payloads, vec!["0\n1\n2\n3\n4\n5\n6"]);
    assert!(broker.list_groups("q").await.unwrap().is_empty());
}

/// A panicking aggregator loses nothing: the set waits for the recoverer,
/// which gives the tasks back to their group at the set's deadline
/// (Go `aggregationTimeout`, 2 min), and a later check aggregates them.
#[tokio::test]
async fn a_panicking_aggregator_leaves_the_set_for_the_recoverer() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    add(&client, "g", "t1", "a").await;
    add(&client, "g", "t2", "b").await;
    clock.advance(Duration::from_secs(10));
    let panics = Aggregator::new(
        broker.clone(),
        vec!["q".to_string()],
        rules(10, 0, 0),
        Duration::from_secs(1),
        Arc::new(|_: &str, _: Vec<Task>| -> Task { panic!("boom") }),
    )
    .unwrap();
    assert_eq!(panics.tick().await, report(0, 0, 1));

    let mut conn = db.raw().await;
    let sets: Vec<(String, f64)> = conn
        .zrange_withscores("asynq:{q}:aggregation_sets", 0, -1)
        .await
        .unwrap();
    assert_eq!(sets.len(), 1);
    assert!(sets[0].0.starts_with("asynq:{q}:g:g:"), "{sets:?}");
    assert_eq!(sets[0].1 as i64, now().timestamp() + 10 + 120);
    let state: String = conn.hget("asynq:{q}:t:t1", "state").await.unwrap();
    assert_eq!(state, "aggregating");
    assert_eq!(pending(&db).await, vec![]);

    clock.advance(Duration::from_secs(119));
    assert_eq!(broker.reclaim_stale_aggregation_sets("q").await.unwrap(), 0);
    clock.advance(Duration::from_secs(1));
    assert_eq!(broker.reclaim_stale_aggregation_sets("q").await.unwrap(), 1);
    let back: Vec<String> = conn.zrange("asynq:{q}:g:g", 0, -1).await.unwrap();
    assert_eq!(back, vec!["t1", "t2"]);

    let calls = Calls::default();
    assert_eq!(
        aggregator(&broker, rules(10, 0, 0), &calls).tick().await,
        report(1, 2, 0)
    );
    let payloads: Vec<String> = pending(&db).await.into_iter().map(|p| p.1).collect();
    assert_eq!(payloads, vec!["a\nb"]);
}

/// A member whose message does not decode is left out of the aggregate
/// and archived (msg kept as it was), never deleted.
#[tokio::test]
async fn an_undecodable_member_is_archived_not_lost() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    add(&client, "g", "good", "a").await;
    let mut conn = db.raw().await;
    let _: () = redis::pipe()
        .hset_multiple(
            "asynq:{q}:t:bad",
            &[
                ("msg", "\u{ff}not protobuf"),
                ("state", "aggregating"),
                ("group", "g"),
            ],
        )
        .zadd("asynq:{q}:g:g", "bad", now().timestamp())
        .query_async(&mut conn)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(10));
    let calls = Calls::default();
    assert_eq!(
        aggregator(&broker, rules(10, 0, 0), &calls).tick().await,
        report(1, 1, 0)
    );
    let payloads: Vec<String> = pending(&db).await.into_iter().map(|p| p.1).collect();
    assert_eq!(payloads, vec!["a"]);
    let archived: Vec<(String, f64)> = conn
        .zrange_withscores("asynq:{q}:archived", 0, -1)
        .await
        .unwrap();
    assert_eq!(
        archived,
        vec![("bad".to_string(), (now().timestamp() + 10) as f64)]
    );
    let (msg, state, group): (String, String, Option<String>) = redis::cmd("HMGET")
        .arg("asynq:{q}:t:bad")
        .arg("msg")
        .arg("state")
        .arg("group")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        (msg.as_str(), state.as_str(), group),
        ("\u{ff}not protobuf", "archived", None)
    );
    let gone: bool = conn.exists("asynq:{q}:t:good").await.unwrap();
    assert!(!gone);
}

/// A group of more than [`AGGREGATION_SET_MAX`] tasks without a max size
/// is aggregated in sets of at most that many (every Redis call bounded,
/// COMPATIBILITY.md M4): the first set takes the oldest 5,000, the next
/// check the rest.
#[tokio::test]
async fn a_group_past_the_set_bound_is_aggregated_in_bounded_sets() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    let n = AGGREGATION_SET_MAX + 7;
    for i in 0..n {
        add(&client, "big", &format!("t{i:05}"), &i.to_string()).await;
    }
    clock.advance(Duration::from_secs(10));
    let sizes = Arc::new(Mutex::new(Vec::new()));
    let seen = sizes.clone();
    let agg = Aggregator::new(
        broker.clone(),
        vec!["q".to_string()],
        rules(10, 0, 0),
        Duration::from_secs(1),
        Arc::new(move |_: &str, tasks: Vec<Task>| {
            let first = String::from_utf8_lossy(tasks[0].payload()).into_owned();
            seen.lock().unwrap().push((tasks.len(), first));
            Task::new("digest", b"x".to_vec())
        }),
    )
    .unwrap();
    assert_eq!(agg.tick().await, report(1, AGGREGATION_SET_MAX as u64, 0));
    assert_eq!(agg.tick().await, report(1, 7, 0));
    assert_eq!(
        *sizes.lock().unwrap(),
        vec![
            (AGGREGATION_SET_MAX, "0".to_string()),
            (7, AGGREGATION_SET_MAX.to_string())
        ]
    );
    let left: Vec<String> = db.scan_keys("asynq:{q}:t:t*").await.into_iter().collect();
    assert!(left.is_empty(), "{} member hashes left", left.len());
}

/// Our `Server` runs the aggregator with its config (grace 1 s, checks
/// every 100 ms) and its handler gets the aggregate; a grace period under
/// 1 s fails the start, as Go panics.
#[tokio::test]
async fn server_aggregates_and_handles_the_aggregate() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    for (id, p) in [("t1", "a"), ("t2", "b")] {
        add(&client, "user:7", id, p).await;
    }
    let calls = Calls::default();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let config = Config {
        queues: [("q".to_string(), 1)].into(),
        group_aggregator: Some(digest(&calls)),
        group_grace_period: Duration::from_secs(1),
        group_check_interval: Some(Duration::from_millis(100)),
        ..Config::default()
    };
    let running = start(
        &db,
        config.clone(),
        handler_fn(move |ctx: TaskContext, task: Task| {
            let tx = tx.clone();
            async move {
                let _ = tx.send((
                    task.type_name().to_string(),
                    task.payload().to_vec(),
                    ctx.queue().to_string(),
                ));
                Ok(())
            }
        }),
    )
    .await;
    let got = tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("the aggregate is handled")
        .unwrap();
    assert_eq!(
        got,
        ("digest".to_string(), b"a\nb".to_vec(), "q".to_string())
    );
    running.shutdown().await;

    let bad = Config {
        group_grace_period: Duration::from_millis(500),
        ..config
    };
    let err = asynqdeck::server::Server::connect(&db.url(), bad)
        .await
        .unwrap()
        .run_until(handler_fn(|_, _| async { Ok(()) }), std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument(m) if m == "group grace period cannot be less than 1 s"),
        "{err:?}"
    );
}

/// Go v0.26.0 enqueues grouped tasks, our aggregator aggregates them; our
/// client enqueues grouped tasks, Go's aggregator (`work --aggregate`:
/// one `aggregated` task of the payloads joined by `\n`) aggregates them
/// and Go's handler runs the aggregate.
#[tokio::test]
async fn aggregation_is_shared_with_go_both_ways() {
    let db = support::redis();
    for (id, p) in [("g1", "x"), ("g2", "y")] {
        db.peer_ok(&[
            "enqueue",
            "--type",
            "email",
            "--payload",
            p,
            "--queue",
            "q",
            "--group",
            "go",
            "--task-id",
            id,
        ]);
    }
    let clock = SimulatedClock::new(chrono::Utc::now() + chrono::Duration::seconds(10));
    let broker = broker_at(&db, &clock).await;
    let calls = Calls::default();
    assert_eq!(
        aggregator(&broker, rules(5, 0, 0), &calls).tick().await,
        report(1, 2, 0)
    );
    assert_eq!(
        *calls.lock().unwrap(),
        vec![(
            "go".to_string(),
            vec![
                ("email".to_string(), "x".to_string()),
                ("email".to_string(), "y".to_string())
            ]
        )]
    );
    let mut conn = db.raw().await;
    let id: Vec<String> = conn.lrange("asynq:{q}:pending", 0, -1).await.unwrap();
    let _: () = conn.del("asynq:{q}:pending").await.unwrap();
    let _: () = conn.del(format!("asynq:{{q}}:t:{}", id[0])).await.unwrap();

    let client = Client::connect(&db.url()).await.unwrap();
    for (id, p) in [("r1", "1"), ("r2", "2"), ("r3", "3")] {
        add(&client, "ours", id, p).await;
    }
    let lines = db.peer_lines(&[
        "work",
        "--queues",
        "q",
        "--aggregate",
        "--group-grace-period",
        "1s",
        "--count",
        "1",
        "--max-duration",
        "60s",
    ]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["type"], "aggregated");
    assert_eq!(lines[0]["payload"], "1\n2\n3");
    assert_eq!(lines[0]["queue"], "q");
    let left: Vec<String> = db.scan_keys("asynq:{q}:g:*").await.into_iter().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A member whose task key is not a hash (bad data) does not block its
/// group: the good members are aggregated, the bad one is listed in the
/// archive (an error row there) and its key is left as it was.
#[tokio::test]
async fn a_member_key_of_another_type_is_archived_and_the_group_goes_on() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    add(&client, "g", "good", "a").await;
    let mut conn = db.raw().await;
    let _: () = redis::pipe()
        .set("asynq:{q}:t:odd", "str")
        .zadd("asynq:{q}:g:g", "odd", now().timestamp())
        .query_async(&mut conn)
        .await
        .unwrap();
    clock.advance(Duration::from_secs(10));
    let calls = Calls::default();
    assert_eq!(
        aggregator(&broker, rules(10, 0, 0), &calls).tick().await,
        report(1, 1, 0)
    );
    let payloads: Vec<String> = pending(&db).await.into_iter().map(|p| p.1).collect();
    assert_eq!(payloads, vec!["a"]);
    let archived: Vec<String> = conn.zrange("asynq:{q}:archived", 0, -1).await.unwrap();
    assert_eq!(archived, vec!["odd"]);
    let kept: String = conn.get("asynq:{q}:t:odd").await.unwrap();
    assert_eq!(kept, "str");
    let left: Vec<String> = db.scan_keys("asynq:{q}:g:*").await.into_iter().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// A group key of another type (bad data) leaves the queue's other groups
/// and its numbers readable: the bad group is left out of the list and
/// counts 0.
#[tokio::test]
async fn a_group_key_of_another_type_hides_nothing_else() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    add(&client, "ok", "t1", "a").await;
    add(&client, "ok", "t2", "b").await;
    let mut conn = db.raw().await;
    let _: () = redis::pipe()
        .set("asynq:{q}:g:bad", "x")
        .sadd("asynq:{q}:groups", "bad")
        .query_async(&mut conn)
        .await
        .unwrap();
    let inspector = asynqdeck::Inspector::connect(&db.url()).await.unwrap();
    let groups: Vec<(String, i64)> = inspector
        .groups("q")
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.group, g.size))
        .collect();
    assert_eq!(groups, vec![("ok".to_string(), 2)]);
    assert_eq!(inspector.queue_info("q").await.unwrap().aggregating, 2);
}
