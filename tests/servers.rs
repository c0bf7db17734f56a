//! Server state, scheduler entries and history, and cancellation on a real
//! Redis: the broker's heartbeat writes (wire spec §6.16–6.18) and the
//! inspector's readers (§9.9, §9.10), with Go's key shapes (§2.1, §4.2–4.5).

use std::time::Duration;

use asynqdeck::Error;
use asynqdeck::broker::keys;
use asynqdeck::broker::proto::{SchedulerEnqueueEvent, SchedulerEntry, Timestamp, WorkerInfo};
use asynqdeck::inspector::{self, Page};
use chrono::{DateTime, Utc};
use futures_util::StreamExt;
use prost::Message;
use redis::AsyncCommands;

use crate::support::clock::{Clocked, clocked_on, now, ts};
use crate::support::seed;
use crate::support::{self};

/// §6.16: write_server_state stores the ServerInfo with SETEX ttl, a
/// workers hash keyed by task id with the same TTL, and both key names in
/// the registries scored now + ttl (unix s).
#[tokio::test]
async fn write_server_state_writes_go_keys() {
    let db = support::redis();
    let Clocked {
        broker, mut conn, ..
    } = clocked_on(db.clone(), now()).await;
    let s = seed::server("host-a", 42, "sid-1", 0);
    let w1 = seed::worker(&s, "t1", b"payload t1".to_vec(), 3, 1800 - 3);
    let w2 = seed::worker(&s, "t2", b"payload t2".to_vec(), 1, 1800 - 1);
    broker
        .write_server_state(&s, &[w1.clone(), w2.clone()], Duration::from_secs(10))
        .await
        .unwrap();
    let skey = "asynq:servers:{host-a:42:sid-1}";
    let wkey = "asynq:workers:{host-a:42:sid-1}";
    let stored: Vec<u8> = conn.get(skey).await.unwrap();
    assert_eq!(stored, s.encode_to_vec());
    let ttl: i64 = conn.ttl(skey).await.unwrap();
    assert!((9..=10).contains(&ttl), "server ttl {ttl}");
    let ttl: i64 = conn.ttl(wkey).await.unwrap();
    assert!((9..=10).contains(&ttl), "workers ttl {ttl}");
    let hash: std::collections::BTreeMap<String, Vec<u8>> = conn.hgetall(wkey).await.unwrap();
    assert_eq!(hash.len(), 2);
    assert_eq!(hash["t1"], w1.encode_to_vec());
    assert_eq!(hash["t2"], w2.encode_to_vec());
    let expiry = now().timestamp() + 10;
    let score: i64 = conn.zscore(keys::ALL_SERVERS, skey).await.unwrap();
    assert_eq!(score, expiry);
    let score: i64 = conn.zscore(keys::ALL_WORKERS, wkey).await.unwrap();
    assert_eq!(score, expiry);

    // A new beat replaces the workers hash; with no workers it is absent.
    broker
        .write_server_state(&s, &[], Duration::from_secs(10))
        .await
        .unwrap();
    let exists: bool = conn.exists(wkey).await.unwrap();
    assert!(!exists, "empty workers hash is absent");

    // Whole seconds only: a TTL under 1 s is refused.
    match broker
        .write_server_state(&s, &[], Duration::from_millis(999))
        .await
    {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

/// §9.9: servers() lists every live server with exact fields, joins workers
/// by server id (ordered by start time), drops workers of unknown servers,
/// skips undecodable values and sorts by host, pid, server id.
#[tokio::test]
async fn servers_lists_live_servers_with_workers() {
    let db = support::redis();
    let Clocked {
        broker,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let a = seed::server("host-b", 7, "sid-a", 0);
    let b = seed::server("host-a", 99, "sid-b", 0);
    let c = seed::server("host-a", 8, "sid-c", 0);
    let ttl = Duration::from_secs(10);
    broker
        .write_server_state(
            &a,
            &[
                seed::worker(&a, "late", b"payload late".to_vec(), 1, 1800 - 1),
                seed::worker(&a, "early", b"payload early".to_vec(), 9, 1800 - 9),
            ],
            ttl,
        )
        .await
        .unwrap();
    broker.write_server_state(&b, &[], ttl).await.unwrap();
    broker
        .write_server_state(
            &c,
            &[seed::worker(&c, "c1", b"payload c1".to_vec(), 2, 1800 - 2)],
            ttl,
        )
        .await
        .unwrap();
    // A worker naming a server that is not listed is dropped.
    let stray = WorkerInfo {
        server_id: "sid-unknown".into(),
        ..seed::worker(&c, "stray", b"payload stray".to_vec(), 2, 1800 - 2)
    };
    let _: () = conn
        .hset(
            "asynq:workers:{host-a:8:sid-c}",
            "stray",
            stray.encode_to_vec(),
        )
        .await
        .unwrap();
    // Undecodable server info and worker values are skipped.
    let bad = "asynq:servers:{bad:1:x}";
    let _: () = conn.set(bad, vec![0xffu8, 0xff, 0xff]).await.unwrap();
    let _: () = conn
        .zadd(keys::ALL_SERVERS, bad, now().timestamp() + 10)
        .await
        .unwrap();
    let _: () = conn
        .hset("asynq:workers:{host-a:8:sid-c}", "junk", vec![0xffu8, 0x01])
        .await
        .unwrap();
    // A live member whose key is gone, and one whose key has the wrong type, are skipped.
    let expiry = now().timestamp() + 10;
    let _: () = conn
        .zadd(keys::ALL_SERVERS, "asynq:servers:{gone:1:x}", expiry)
        .await
        .unwrap();
    let wrong = "asynq:servers:{wrong:1:x}";
    let _: () = conn.hset(wrong, "f", "v").await.unwrap();
    let _: () = conn.zadd(keys::ALL_SERVERS, wrong, expiry).await.unwrap();
    let wrong_w = "asynq:workers:{wrong:1:x}";
    let _: () = conn.set(wrong_w, "not a hash").await.unwrap();
    let _: () = conn.zadd(keys::ALL_WORKERS, wrong_w, expiry).await.unwrap();

    let servers = inspector.servers().await.unwrap();
    let ids: Vec<&str> = servers.iter().map(|s| s.server_id.as_str()).collect();
    assert_eq!(ids, ["sid-c", "sid-b", "sid-a"], "host, then pid");
    let sa = &servers[2];
    assert_eq!(
        *sa,
        inspector::ServerInfo {
            host: "host-b".into(),
            pid: 7,
            server_id: "sid-a".into(),
            concurrency: 10,
            queues: [("critical".to_string(), 6), ("default".to_string(), 3)].into(),
            strict_priority: true,
            status: "active".into(),
            started: Some(now() - chrono::Duration::minutes(5)),
            active_workers: vec![
                inspector::WorkerInfo {
                    task_id: "early".into(),
                    task_type: "email:send".into(),
                    task_payload: b"payload early".to_vec(),
                    queue: "critical".into(),
                    started: Some(now() - chrono::Duration::seconds(9)),
                    deadline: Some(now() + chrono::Duration::seconds(1791)),
                },
                inspector::WorkerInfo {
                    task_id: "late".into(),
                    task_type: "email:send".into(),
                    task_payload: b"payload late".to_vec(),
                    queue: "critical".into(),
                    started: Some(now() - chrono::Duration::seconds(1)),
                    deadline: Some(now() + chrono::Duration::seconds(1799)),
                },
            ],
        }
    );
    assert_eq!(servers[1].active_workers, vec![]);
    let c_tasks: Vec<&str> = servers[0]
        .active_workers
        .iter()
        .map(|w| w.task_id.as_str())
        .collect();
    assert_eq!(c_tasks, ["c1"]);
}

/// §9.9: members whose expiry has passed are not listed and are removed
/// from the registries; a member expiring exactly now is still live.
#[tokio::test]
async fn expired_servers_are_pruned() {
    let db = support::redis();
    let Clocked {
        broker,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let live = seed::server("h", 1, "live", 0);
    let dead = seed::server("h", 2, "dead", 0);
    let edge = seed::server("h", 3, "edge", 0);
    let ttl = Duration::from_secs(30);
    for s in [&live, &dead, &edge] {
        broker
            .write_server_state(
                s,
                &[seed::worker(
                    s,
                    &format!("task-of-{}", s.server_id),
                    format!("payload task-of-{}", s.server_id).into_bytes(),
                    1,
                    1800 - 1,
                )],
                ttl,
            )
            .await
            .unwrap();
    }
    // The dead server's heartbeat expired 5 s ago; the edge one expires now.
    let dead_s = "asynq:servers:{h:2:dead}";
    let dead_w = "asynq:workers:{h:2:dead}";
    let t = now().timestamp();
    let _: () = conn.zadd(keys::ALL_SERVERS, dead_s, t - 5).await.unwrap();
    let _: () = conn.zadd(keys::ALL_WORKERS, dead_w, t - 5).await.unwrap();
    let _: () = conn
        .zadd(keys::ALL_SERVERS, "asynq:servers:{h:3:edge}", t)
        .await
        .unwrap();
    let _: () = conn
        .zadd(keys::ALL_WORKERS, "asynq:workers:{h:3:edge}", t)
        .await
        .unwrap();

    let servers = inspector.servers().await.unwrap();
    let ids: Vec<&str> = servers.iter().map(|s| s.server_id.as_str()).collect();
    assert_eq!(ids, ["live", "edge"]);
    assert_eq!(servers[1].active_workers[0].task_id, "task-of-edge");
    let gone: Option<i64> = conn.zscore(keys::ALL_SERVERS, dead_s).await.unwrap();
    assert_eq!(gone, None, "pruned from asynq:servers");
    let gone: Option<i64> = conn.zscore(keys::ALL_WORKERS, dead_w).await.unwrap();
    assert_eq!(gone, None, "pruned from asynq:workers");
    let left: i64 = conn.zcard(keys::ALL_SERVERS).await.unwrap();
    assert_eq!(left, 2);
}

/// §6.16 ClearServerState: the registry members and both keys are gone.
#[tokio::test]
async fn clear_server_state_removes_everything() {
    let db = support::redis();
    let Clocked {
        broker,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let s = seed::server("h", 5, "sid", 0);
    let other = seed::server("h", 6, "other", 0);
    let ttl = Duration::from_secs(10);
    broker
        .write_server_state(
            &s,
            &[seed::worker(&s, "t", b"payload t".to_vec(), 1, 1800 - 1)],
            ttl,
        )
        .await
        .unwrap();
    broker.write_server_state(&other, &[], ttl).await.unwrap();
    broker.clear_server_state("h", 5, "sid").await.unwrap();
    let found: Vec<String> = conn.keys("asynq:*{h:5:sid}").await.unwrap();
    assert_eq!(found, Vec::<String>::new());
    let servers: Vec<String> = conn.zrange(keys::ALL_SERVERS, 0, -1).await.unwrap();
    assert_eq!(servers, ["asynq:servers:{h:6:other}"]);
    let workers: Vec<String> = conn.zrange(keys::ALL_WORKERS, 0, -1).await.unwrap();
    assert_eq!(workers, ["asynq:workers:{h:6:other}"]);
    let listed = inspector.servers().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].server_id, "other");
}

fn entry(id: &str, prev: Option<DateTime<Utc>>) -> SchedulerEntry {
    SchedulerEntry {
        id: id.into(),
        spec: "@every 30s".into(),
        task_type: format!("type-{id}"),
        task_payload: format!("payload-{id}").into_bytes(),
        enqueue_options: vec![
            "MaxRetry(5)".into(),
            r#"Queue("critical")"#.into(),
            "Timeout(30m0s)".into(),
        ],
        next_enqueue_time: ts(now() + chrono::Duration::seconds(30)),
        prev_enqueue_time: Some(Timestamp::from_utc(prev)),
    }
}

/// §6.17 and §9.10: scheduler entries are LPUSHed (stored newest registered
/// first) with a TTL, listed in that order with options as stored; Go's
/// zero time for "never enqueued" reads as None; an expired scheduler is
/// pruned; ClearSchedulerEntries removes the list and the registry member.
#[tokio::test]
async fn scheduler_entries_round_trip() {
    let db = support::redis();
    let Clocked {
        broker,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let fired = now() - chrono::Duration::seconds(30);
    let entries = [entry("e1", None), entry("e2", Some(fired))];
    broker
        .write_scheduler_entries("host:1:sched", &entries, Duration::from_secs(20))
        .await
        .unwrap();
    let key = "asynq:schedulers:{host:1:sched}";
    let raw: Vec<Vec<u8>> = conn.lrange(key, 0, -1).await.unwrap();
    assert_eq!(
        raw,
        vec![entries[1].encode_to_vec(), entries[0].encode_to_vec()]
    );
    let ttl: i64 = conn.ttl(key).await.unwrap();
    assert!((19..=20).contains(&ttl), "ttl {ttl}");
    let score: i64 = conn.zscore(keys::ALL_SCHEDULERS, key).await.unwrap();
    assert_eq!(score, now().timestamp() + 20);

    let listed = inspector.scheduler_entries().await.unwrap();
    assert_eq!(
        listed,
        vec![
            inspector::SchedulerEntry {
                id: "e2".into(),
                spec: "@every 30s".into(),
                task_type: "type-e2".into(),
                payload: b"payload-e2".to_vec(),
                options: vec![
                    "MaxRetry(5)".into(),
                    r#"Queue("critical")"#.into(),
                    "Timeout(30m0s)".into(),
                ],
                next_enqueue_at: Some(now() + chrono::Duration::seconds(30)),
                prev_enqueue_at: Some(fired),
            },
            inspector::SchedulerEntry {
                id: "e1".into(),
                spec: "@every 30s".into(),
                task_type: "type-e1".into(),
                payload: b"payload-e1".to_vec(),
                options: vec![
                    "MaxRetry(5)".into(),
                    r#"Queue("critical")"#.into(),
                    "Timeout(30m0s)".into(),
                ],
                next_enqueue_at: Some(now() + chrono::Duration::seconds(30)),
                prev_enqueue_at: None,
            },
        ]
    );

    // An expired scheduler is neither listed nor kept in the registry.
    broker
        .write_scheduler_entries("host:2:old", &[entry("e3", None)], Duration::from_secs(20))
        .await
        .unwrap();
    let old = "asynq:schedulers:{host:2:old}";
    let _: () = conn
        .zadd(keys::ALL_SCHEDULERS, old, now().timestamp() - 1)
        .await
        .unwrap();
    let ids: Vec<String> = inspector
        .scheduler_entries()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.id)
        .collect();
    assert_eq!(ids, ["e2", "e1"]);
    let gone: Option<i64> = conn.zscore(keys::ALL_SCHEDULERS, old).await.unwrap();
    assert_eq!(gone, None);

    broker
        .clear_scheduler_entries("host:1:sched")
        .await
        .unwrap();
    let exists: bool = conn.exists(key).await.unwrap();
    assert!(!exists);
    let members: i64 = conn.zcard(keys::ALL_SCHEDULERS).await.unwrap();
    assert_eq!(members, 0);
    assert_eq!(inspector.scheduler_entries().await.unwrap(), vec![]);

    match broker
        .write_scheduler_entries("host:1:sched", &entries, Duration::ZERO)
        .await
    {
        Err(Error::InvalidArgument(_)) => {}
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

fn event(i: i64) -> SchedulerEnqueueEvent {
    SchedulerEnqueueEvent {
        task_id: format!("task-{i}"),
        enqueue_time: ts(now() + chrono::Duration::seconds(i)),
    }
}

/// §6.17 and §9.10: events are scored by enqueue time (unix s) and listed
/// newest first with Go's page arithmetic; a page beyond the end is empty,
/// an unknown entry has none; page number or size 0 is an InvalidArgument;
/// ClearSchedulerHistory deletes the history.
#[tokio::test]
async fn scheduler_enqueue_events_newest_first_with_pages() {
    let db = support::redis();
    let Clocked {
        broker,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    for i in 0..5 {
        broker
            .record_scheduler_enqueue_event("entry", &event(i))
            .await
            .unwrap();
    }
    let key = keys::scheduler_history_key("entry");
    let score: i64 = conn.zscore(&key, event(3).encode_to_vec()).await.unwrap();
    assert_eq!(score, now().timestamp() + 3);

    let page = |number, size| inspector.scheduler_enqueue_events("entry", Page { number, size });
    let ids = |v: Vec<inspector::SchedulerEnqueueEvent>| {
        v.into_iter().map(|e| e.task_id).collect::<Vec<_>>()
    };
    let first = page(1, 2).await.unwrap();
    assert_eq!(
        first[0],
        inspector::SchedulerEnqueueEvent {
            task_id: "task-4".into(),
            enqueued_at: now() + chrono::Duration::seconds(4),
        }
    );
    assert_eq!(ids(first), ["task-4", "task-3"]);
    assert_eq!(ids(page(2, 2).await.unwrap()), ["task-2", "task-1"]);
    assert_eq!(ids(page(3, 2).await.unwrap()), ["task-0"]);
    assert_eq!(ids(page(4, 2).await.unwrap()), Vec::<String>::new());
    assert_eq!(ids(page(1, 30).await.unwrap()).len(), 5);
    assert_eq!(
        inspector
            .scheduler_enqueue_events("unknown", Page::default())
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        ids(page(usize::MAX, usize::MAX).await.unwrap()),
        Vec::<String>::new()
    );
    assert!(matches!(page(0, 2).await, Err(Error::InvalidArgument(_))));
    assert!(matches!(page(1, 0).await, Err(Error::InvalidArgument(_))));

    broker.clear_scheduler_history("entry").await.unwrap();
    let exists: bool = conn.exists(&key).await.unwrap();
    assert!(!exists);
}

/// §6.17: the history keeps at most 1000 events, dropping the oldest.
#[tokio::test]
async fn scheduler_history_is_capped_at_1000() {
    let db = support::redis();
    let Clocked {
        broker,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    for i in 0..1005 {
        broker
            .record_scheduler_enqueue_event("busy", &event(i))
            .await
            .unwrap();
    }
    let key = keys::scheduler_history_key("busy");
    let n: i64 = conn.zcard(&key).await.unwrap();
    assert_eq!(n, 1000);
    let oldest: Vec<(Vec<u8>, i64)> = conn.zrange_withscores(&key, 0, 0).await.unwrap();
    assert_eq!(
        oldest[0].1,
        now().timestamp() + 5,
        "events 0-4 were dropped"
    );
    let last_page = inspector
        .scheduler_enqueue_events(
            "busy",
            Page {
                number: 34,
                size: 30,
            },
        )
        .await
        .unwrap();
    let ids: Vec<String> = last_page.into_iter().map(|e| e.task_id).collect();
    assert_eq!(
        ids,
        [
            "task-14", "task-13", "task-12", "task-11", "task-10", "task-9", "task-8", "task-7",
            "task-6", "task-5"
        ]
    );
}

/// §6.18: cancel_processing publishes the task id on `asynq:cancel`, where a
/// subscribed server receives it.
#[tokio::test]
async fn cancel_processing_publishes_task_id() {
    let db = support::redis();
    let Clocked { inspector, .. } = clocked_on(db.clone(), now()).await;
    let client = redis::Client::open(db.node_url()).unwrap();
    let mut pubsub = client.get_async_pubsub().await.unwrap();
    pubsub.subscribe(keys::CANCEL_CHANNEL).await.unwrap();
    // Channels are server-wide, not per database: other tests may publish too.
    let id = format!("cancel-me-{}", db.db);
    inspector.cancel_processing(&id).await.unwrap();
    let mut messages = pubsub.on_message();
    let received = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(msg) = messages.next().await {
            let payload: String = msg.get_payload().unwrap();
            if payload == id {
                return msg.get_channel_name().to_string();
            }
        }
        panic!("subscription closed");
    })
    .await
    .expect("the cancel message within 5 s");
    assert_eq!(received, "asynq:cancel");
}
