//! Inspector task listing, lookup and mutations on a real Redis (wire spec
//! §3, §9.1–9.4, §10, §11, §14; S16, S17).
//!
//! State is seeded through `Client::enqueue` or raw commands; effects are
//! checked key by key.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::redis::RawConn as Conn;
use asynqdeck::broker::proto::TaskMessage;
use asynqdeck::broker::{ARCHIVE_RETENTION, Broker, MAX_ARCHIVE_SIZE, keys};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::{Page, TaskRow};
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task, TaskState};
use prost::Message;
use redis::AsyncCommands;

use crate::support::clock::at;
use crate::support::seed::{self, GROUP, msg_bytes};
use crate::support::{self, TestDb};

/// The fixed "now" of inspectors built with [`inspector_at`].
const NOW: i64 = 1_800_000_000;

/// An inspector whose clock is fixed at `now` (unix s).
async fn inspector_at(db: &TestDb, now: i64) -> Inspector {
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(at(now))));
    Inspector::from_broker(broker)
}

async fn state_of(conn: &mut Conn, q: &str, id: &str) -> Option<String> {
    conn.hget(keys::task_key(q, id), "state").await.unwrap()
}

async fn exists(conn: &mut Conn, key: &str) -> bool {
    conn.exists(key).await.unwrap()
}

async fn list(conn: &mut Conn, key: &str) -> Vec<String> {
    conn.lrange(key, 0, -1).await.unwrap()
}

async fn zset(conn: &mut Conn, key: &str) -> Vec<(String, i64)> {
    conn.zrange_withscores(key, 0, -1).await.unwrap()
}

fn ids(rows: &[TaskRow]) -> Vec<&str> {
    rows.iter().map(|r| r.id()).collect()
}

fn task(row: &TaskRow) -> &asynqdeck::TaskInfo {
    row.task()
        .unwrap_or_else(|| panic!("expected a decoded task: {row:?}"))
}

fn precondition(e: Error) -> String {
    match e {
        Error::FailedPrecondition(text) => text,
        other => panic!("expected FailedPrecondition, got {other:?}"),
    }
}

/// §9.1: pending pages are taken from the right end of the list, so page 1
/// holds the next-to-run (first enqueued) task first; a page past the end is
/// empty; NextProcessAt is now.
#[tokio::test]
async fn pending_pages_oldest_first() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let insp = inspector_at(&db, NOW).await;
    for id in ["t1", "t2", "t3"] {
        client
            .enqueue(
                &Task::new("t", id.as_bytes().to_vec()),
                EnqueueOptions::new().task_id(id),
            )
            .await
            .unwrap();
    }
    let page = |n| Page::new(n, 2).unwrap();
    let p1 = insp
        .list_tasks("default", TaskState::Pending, page(1))
        .await
        .unwrap();
    assert_eq!(ids(&p1), ["t1", "t2"]);
    let p2 = insp
        .list_tasks("default", TaskState::Pending, page(2))
        .await
        .unwrap();
    assert_eq!(ids(&p2), ["t3"]);
    let p3 = insp
        .list_tasks("default", TaskState::Pending, page(3))
        .await
        .unwrap();
    assert!(p3.is_empty(), "{p3:?}");
    let far = insp
        .list_tasks(
            "default",
            TaskState::Pending,
            Page::new(usize::MAX, 1000).unwrap(),
        )
        .await
        .unwrap();
    assert!(far.is_empty());

    let all = insp
        .list_tasks("default", TaskState::Pending, Page::default())
        .await
        .unwrap();
    assert_eq!(ids(&all), ["t1", "t2", "t3"]);
    let t1 = task(&all[0]);
    assert_eq!(t1.state, TaskState::Pending);
    assert_eq!(t1.next_process_at, Some(at(NOW)));
    assert_eq!(t1.payload, b"t1");
    assert_eq!(t1.max_retry, 25);
    assert!(!t1.is_orphaned);
    assert_eq!(t1.result, None);
}

/// Page numbers start at 1 and pages hold at least one task: zero is
/// InvalidArgument, from `Page::new` and from a hand-built `Page`.
#[tokio::test]
async fn zero_page_is_invalid_argument() {
    assert!(matches!(Page::new(0, 10), Err(Error::InvalidArgument(_))));
    assert!(matches!(Page::new(1, 0), Err(Error::InvalidArgument(_))));
    assert_eq!(
        Page::default(),
        Page {
            number: 1,
            size: 30
        }
    );
    let db = support::redis();
    let mut conn = db.raw().await;
    seed::task(&mut conn, "q", "a", "pending", 0).await;
    let insp = inspector_at(&db, NOW).await;
    let bad = Page {
        number: 0,
        size: 10,
    };
    assert!(matches!(
        insp.list_tasks("q", TaskState::Pending, bad).await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        insp.list_aggregating_tasks("q", GROUP, Page { number: 1, size: 0 })
            .await,
        Err(Error::InvalidArgument(_))
    ));
}

/// §9.1: zset listings are ascending by score whatever the insertion
/// order; scheduled and retry rows carry the score as NextProcessAt,
/// archived and completed none; result comes from the hash.
#[tokio::test]
async fn zset_listings_ascend_by_score() {
    let db = support::redis();
    let mut conn = db.raw().await;
    let insp = inspector_at(&db, NOW).await;
    for state in ["scheduled", "retry", "archived", "completed"] {
        for (id, score) in [("c", NOW + 300), ("a", NOW + 100), ("b", NOW + 200)] {
            seed::task(&mut conn, "q", &format!("{state}-{id}"), state, score).await;
        }
    }
    let _: () = conn
        .hset(
            keys::task_key("q", "archived-b"),
            "result",
            b"done".to_vec(),
        )
        .await
        .unwrap();
    for (state, next) in [
        (TaskState::Scheduled, true),
        (TaskState::Retry, true),
        (TaskState::Archived, false),
        (TaskState::Completed, false),
    ] {
        let rows = insp.list_tasks("q", state, Page::default()).await.unwrap();
        let s = state.as_str();
        assert_eq!(
            ids(&rows),
            [format!("{s}-a"), format!("{s}-b"), format!("{s}-c")],
            "{state}"
        );
        let nexts: Vec<_> = rows.iter().map(|r| task(r).next_process_at).collect();
        if next {
            assert_eq!(
                nexts,
                [
                    Some(at(NOW + 100)),
                    Some(at(NOW + 200)),
                    Some(at(NOW + 300))
                ]
            );
        } else {
            assert_eq!(nexts, [None, None, None]);
        }
        assert!(rows.iter().all(|r| task(r).state == state));
        let p2 = insp
            .list_tasks("q", state, Page::new(2, 2).unwrap())
            .await
            .unwrap();
        assert_eq!(ids(&p2), [format!("{s}-c")]);
        assert!(
            insp.list_tasks("q", state, Page::new(3, 2).unwrap())
                .await
                .unwrap()
                .is_empty()
        );
    }
    let archived = insp
        .list_tasks("q", TaskState::Archived, Page::default())
        .await
        .unwrap();
    assert_eq!(task(&archived[1]).result.as_deref(), Some(&b"done"[..]));
    assert_eq!(task(&archived[0]).result, None);
}

/// §9.1: active rows come earliest-dequeued first, with no NextProcessAt;
/// a lease at or before now marks the task orphaned (Go ListLeaseExpired).
#[tokio::test]
async fn active_listing_marks_expired_leases() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed::task(&mut conn, "q", "gone", "active", NOW - 10).await;
    seed::task(&mut conn, "q", "edge", "active", NOW).await;
    seed::task(&mut conn, "q", "live", "active", NOW + 30).await;
    let insp = inspector_at(&db, NOW).await;
    let rows = insp
        .list_tasks("q", TaskState::Active, Page::default())
        .await
        .unwrap();
    assert_eq!(ids(&rows), ["gone", "edge", "live"]);
    let orphaned: Vec<bool> = rows.iter().map(|r| task(r).is_orphaned).collect();
    assert_eq!(orphaned, [true, true, false]);
    assert!(rows.iter().all(|r| task(r).next_process_at.is_none()));
    // Unlike Go's GetTaskInfo (never, §9.2), task info reports an expired
    // lease as orphaned too (issue 12 R4).
    assert!(insp.get_task_info("q", "gone").await.unwrap().is_orphaned);
    assert!(!insp.get_task_info("q", "live").await.unwrap().is_orphaned);
}

/// §9.1: aggregating tasks are listed per group by ascending time added;
/// asking list_tasks for the aggregating state is InvalidArgument.
#[tokio::test]
async fn aggregating_listing() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed::task(&mut conn, "q", "late", "aggregating", NOW + 5).await;
    seed::task(&mut conn, "q", "early", "aggregating", NOW - 5).await;
    let insp = inspector_at(&db, NOW).await;
    let rows = insp
        .list_aggregating_tasks("q", GROUP, Page::default())
        .await
        .unwrap();
    assert_eq!(ids(&rows), ["early", "late"]);
    assert!(
        rows.iter()
            .all(|r| task(r).state == TaskState::Aggregating && task(r).next_process_at.is_none())
    );
    assert!(
        insp.list_aggregating_tasks("q", "other", Page::default())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        insp.list_tasks("q", TaskState::Aggregating, Page::default())
            .await,
        Err(Error::InvalidArgument(_))
    ));
}

/// §9.1 and the corrupt-data rule: an id whose hash is gone is skipped; a msg
/// that fails to decode is a `Corrupt` row (the listing still succeeds) and
/// `Error::Corrupt` from get_task_info.
#[tokio::test]
async fn corrupt_and_missing_tasks_in_listings() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed::task(&mut conn, "q", "good", "pending", 0).await;
    seed::task(&mut conn, "q", "bad", "pending", 0).await;
    let _: () = conn.lpush(keys::pending_key("q"), "ghost").await.unwrap();
    let _: () = conn
        .hset(keys::task_key("q", "bad"), "msg", vec![0x0a, 0x05, b'a'])
        .await
        .unwrap();
    let insp = inspector_at(&db, NOW).await;
    let rows = insp
        .list_tasks("q", TaskState::Pending, Page::default())
        .await
        .unwrap();
    assert_eq!(ids(&rows), ["good", "bad"]);
    assert_eq!(task(&rows[0]).id, "good");
    match &rows[1] {
        TaskRow::Corrupt { id, state, error } => {
            assert_eq!(id, "bad");
            assert_eq!(*state, TaskState::Pending);
            assert!(error.contains("asynq:{q}:t:bad msg"), "{error}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    match insp.get_task_info("q", "bad").await {
        Err(Error::Corrupt { key, .. }) => assert_eq!(key, "asynq:{q}:t:bad msg"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    // A hash without msg is corrupt too, in a zset listing.
    let _: () = conn
        .hset(keys::task_key("q", "nomsg"), "state", "archived")
        .await
        .unwrap();
    let _: () = conn
        .zadd(keys::archived_key("q"), "nomsg", NOW)
        .await
        .unwrap();
    let rows = insp
        .list_tasks("q", TaskState::Archived, Page::default())
        .await
        .unwrap();
    assert!(matches!(&rows[..], [TaskRow::Corrupt { id, .. }] if id == "nomsg"));
    assert!(matches!(
        insp.get_task_info("q", "nomsg").await,
        Err(Error::Corrupt { .. })
    ));
}

/// §9.2: GetTaskInfo maps every field (§11); NextProcessAt is the score for
/// scheduled/retry, now in whole seconds for pending, none otherwise;
/// missing → TaskNotFound; unknown state → FailedPrecondition with Go's text.
#[tokio::test]
async fn get_task_info_maps_fields() {
    let db = support::redis();
    let mut conn = db.raw().await;
    let client = Client::connect(&db.url()).await.unwrap();
    let dl = at(1_900_000_000);
    client
        .enqueue(
            &Task::new("email", b"p".to_vec()).with_header("k", "v"),
            EnqueueOptions::new()
                .queue("q")
                .task_id("p1")
                .max_retry(4)
                .deadline(dl)
                .retention(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let _: () = conn
        .hset(keys::task_key("q", "p1"), "result", b"r".to_vec())
        .await
        .unwrap();
    seed::task(&mut conn, "q", "s1", "scheduled", NOW + 50).await;
    seed::task(&mut conn, "q", "r1", "retry", NOW + 60).await;
    seed::task(&mut conn, "q", "a1", "archived", NOW - 60).await;
    let insp = inspector_at(&db, NOW).await;

    let p = insp.get_task_info("q", "p1").await.unwrap();
    assert_eq!(p.id, "p1");
    assert_eq!(p.queue, "q");
    assert_eq!(p.task_type, "email");
    assert_eq!(p.payload, b"p");
    assert_eq!(
        p.headers,
        BTreeMap::from([("k".to_string(), "v".to_string())])
    );
    assert_eq!(p.state, TaskState::Pending);
    assert_eq!(p.max_retry, 4);
    assert_eq!(p.retried, 0);
    assert_eq!(p.deadline, Some(dl));
    assert_eq!(p.timeout, Duration::ZERO);
    assert_eq!(p.retention, Duration::from_secs(60));
    assert_eq!(p.next_process_at, Some(at(NOW)));
    assert_eq!(p.result.as_deref(), Some(&b"r"[..]));

    let s = insp.get_task_info("q", "s1").await.unwrap();
    assert_eq!(
        (s.state, s.next_process_at),
        (TaskState::Scheduled, Some(at(NOW + 50)))
    );
    let r = insp.get_task_info("q", "r1").await.unwrap();
    assert_eq!(
        (r.state, r.next_process_at),
        (TaskState::Retry, Some(at(NOW + 60)))
    );
    let a = insp.get_task_info("q", "a1").await.unwrap();
    assert_eq!((a.state, a.next_process_at), (TaskState::Archived, None));

    assert!(matches!(
        insp.get_task_info("q", "nope").await,
        Err(Error::TaskNotFound { queue, id }) if queue == "q" && id == "nope"
    ));
    let _: () = conn
        .hset(keys::task_key("q", "a1"), "state", "bogus")
        .await
        .unwrap();
    let text = precondition(insp.get_task_info("q", "a1").await.unwrap_err());
    assert_eq!(text, r#""bogus" is not supported task state"#);
}

/// §9: every method checks the queue name first (blank → InvalidQueueName)
/// and then `asynq:queues` (absent → QueueNotFound).
#[tokio::test]
async fn queue_checks_come_first() {
    let db = support::redis();
    let insp = inspector_at(&db, NOW).await;
    let p = Page::default();
    macro_rules! both {
        ($call:expr, $blank:expr) => {{
            assert!(
                matches!($blank.await, Err(Error::InvalidQueueName)),
                "blank queue"
            );
            assert!(
                matches!($call.await, Err(Error::QueueNotFound { ref queue }) if queue == "nq"),
                "missing queue"
            );
        }};
    }
    both!(
        insp.list_tasks("nq", TaskState::Pending, p),
        insp.list_tasks(" ", TaskState::Pending, p)
    );
    both!(
        insp.list_tasks(
            "nq",
            TaskState::Scheduled,
            Page::new(usize::MAX, 2).unwrap()
        ),
        insp.list_tasks("", TaskState::Scheduled, p)
    );
    both!(
        insp.list_aggregating_tasks("nq", "g", p),
        insp.list_aggregating_tasks("", "g", p)
    );
    both!(insp.get_task_info("nq", "x"), insp.get_task_info("", "x"));
    both!(insp.run_task("nq", "x"), insp.run_task("", "x"));
    both!(insp.archive_task("nq", "x"), insp.archive_task("", "x"));
    both!(insp.delete_task("nq", "x"), insp.delete_task("", "x"));
    both!(
        insp.update_task_payload("nq", "x", vec![]),
        insp.update_task_payload("", "x", vec![])
    );
    both!(
        insp.run_all("nq", TaskState::Archived),
        insp.run_all("", TaskState::Archived)
    );
    both!(
        insp.archive_all("nq", TaskState::Pending),
        insp.archive_all("", TaskState::Pending)
    );
    both!(
        insp.delete_all("nq", TaskState::Completed),
        insp.delete_all("", TaskState::Completed)
    );
    both!(
        insp.run_all_aggregating("nq", "g"),
        insp.run_all_aggregating("", "g")
    );
    both!(
        insp.archive_all_aggregating("nq", "g"),
        insp.archive_all_aggregating("", "g")
    );
    both!(
        insp.delete_all_aggregating("nq", "g"),
        insp.delete_all_aggregating("", "g")
    );
}

/// §9.3 RunTask: scheduled, retry, archived, completed and aggregating tasks
/// move to the left of pending with state=pending and no pending_since; an
/// emptied group leaves the groups set; refusals carry Go's texts.
#[tokio::test]
async fn run_task_moves_to_pending() {
    let db = support::redis();
    let mut conn = db.raw().await;
    for state in ["scheduled", "retry", "archived", "completed"] {
        seed::task(&mut conn, "q", state, state, NOW).await;
    }
    seed::task(&mut conn, "q", "agg1", "aggregating", NOW).await;
    seed::task(&mut conn, "q", "agg2", "aggregating", NOW).await;
    seed::task(&mut conn, "q", "act", "active", NOW + 30).await;
    seed::task(&mut conn, "q", "pend", "pending", 0).await;
    let insp = inspector_at(&db, NOW).await;

    for state in ["scheduled", "retry", "archived", "completed"] {
        insp.run_task("q", state).await.unwrap();
        assert_eq!(
            state_of(&mut conn, "q", state).await.as_deref(),
            Some("pending")
        );
        let key = format!("{}{state}", keys::queue_prefix("q"));
        assert!(!exists(&mut conn, &key).await, "{key} emptied");
        let since: Option<String> = conn
            .hget(keys::task_key("q", state), "pending_since")
            .await
            .unwrap();
        assert_eq!(since, None);
    }
    insp.run_task("q", "agg1").await.unwrap();
    let groups: Vec<String> = conn.smembers(keys::all_groups_key("q")).await.unwrap();
    assert_eq!(groups, [GROUP], "group still holds agg2");
    insp.run_task("q", "agg2").await.unwrap();
    assert!(!exists(&mut conn, &keys::group_key("q", GROUP)).await);
    assert!(!exists(&mut conn, &keys::all_groups_key("q")).await);
    assert_eq!(
        state_of(&mut conn, "q", "agg2").await.as_deref(),
        Some("pending")
    );
    let group: String = conn
        .hget(keys::task_key("q", "agg2"), "group")
        .await
        .unwrap();
    assert_eq!(group, GROUP, "the group field stays (§14 quirk 4)");
    assert_eq!(
        list(&mut conn, &keys::pending_key("q")).await,
        [
            "agg2",
            "agg1",
            "completed",
            "archived",
            "retry",
            "scheduled",
            "pend"
        ]
    );

    assert_eq!(
        precondition(insp.run_task("q", "act").await.unwrap_err()),
        "task is already running"
    );
    assert_eq!(
        precondition(insp.run_task("q", "pend").await.unwrap_err()),
        "task is already in pending state"
    );
    assert!(matches!(
        insp.run_task("q", "nope").await,
        Err(Error::TaskNotFound { .. })
    ));
    assert_eq!(list(&mut conn, &keys::active_key("q")).await, ["act"]);
}

/// §9.3 ArchiveTask: pending (one LREM), scheduled, retry, completed and
/// aggregating tasks go to the archive scored now, with state=archived and
/// msg, lock and counters untouched; refusals carry Go's texts.
#[tokio::test]
async fn archive_task_moves_to_archive() {
    let db = support::redis();
    let mut conn = db.raw().await;
    let client = Client::connect(&db.url()).await.unwrap();
    let u = client
        .enqueue(
            &Task::new("u", b"1".to_vec()),
            EnqueueOptions::new()
                .queue("q")
                .task_id("pend")
                .unique(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let lock = keys::unique_key("q", "u", Some(b"1"));
    for state in ["scheduled", "retry", "completed"] {
        seed::task(&mut conn, "q", state, state, NOW + 100).await;
    }
    seed::task(&mut conn, "q", "agg", "aggregating", NOW).await;
    seed::task(&mut conn, "q", "act", "active", NOW + 30).await;
    seed::task(&mut conn, "q", "arch", "archived", NOW - 5).await;
    let msg_before: Vec<u8> = conn.hget(keys::task_key("q", "pend"), "msg").await.unwrap();
    let insp = inspector_at(&db, NOW).await;

    for id in ["pend", "scheduled", "retry", "completed", "agg"] {
        insp.archive_task("q", id).await.unwrap();
        assert_eq!(
            state_of(&mut conn, "q", id).await.as_deref(),
            Some("archived")
        );
    }
    assert_eq!(
        zset(&mut conn, &keys::archived_key("q")).await,
        [
            ("arch".to_string(), NOW - 5),
            ("agg".to_string(), NOW),
            ("completed".to_string(), NOW),
            ("pend".to_string(), NOW),
            ("retry".to_string(), NOW),
            ("scheduled".to_string(), NOW),
        ]
    );
    for key in [
        keys::pending_key("q"),
        keys::scheduled_key("q"),
        keys::retry_key("q"),
        keys::completed_key("q"),
        keys::group_key("q", GROUP),
        keys::all_groups_key("q"),
    ] {
        assert!(!exists(&mut conn, &key).await, "{key} emptied");
    }
    let msg_after: Vec<u8> = conn.hget(keys::task_key("q", "pend"), "msg").await.unwrap();
    assert_eq!(msg_after, msg_before, "msg is not modified");
    let holder: String = conn.get(&lock).await.unwrap();
    assert_eq!(holder, u.id, "the lock is untouched");
    let counters: Vec<String> = conn.keys("asynq:{q}:processed*").await.unwrap();
    assert!(counters.is_empty(), "no counters: {counters:?}");
    let since: Option<String> = conn
        .hget(keys::task_key("q", "pend"), "pending_since")
        .await
        .unwrap();
    assert!(since.is_some(), "pending_since is left as Go leaves it");

    assert!(matches!(
        insp.archive_task("q", "arch").await,
        Err(Error::TaskAlreadyArchived { queue, id }) if queue == "q" && id == "arch"
    ));
    assert_eq!(
        precondition(insp.archive_task("q", "act").await.unwrap_err()),
        "cannot archive task in active state. use CancelProcessing instead."
    );
    assert!(matches!(
        insp.archive_task("q", "nope").await,
        Err(Error::TaskNotFound { .. })
    ));
    assert_eq!(
        state_of(&mut conn, "q", "act").await.as_deref(),
        Some("active")
    );
}

/// §9.3 DeleteTask: every state but active; the hash and container
/// membership go, and the unique lock is released only while it holds the
/// task's id.
#[tokio::test]
async fn delete_task_removes_hash_and_lock() {
    let db = support::redis();
    let mut conn = db.raw().await;
    let client = Client::connect(&db.url()).await.unwrap();
    let unique = EnqueueOptions::new()
        .queue("q")
        .unique(Duration::from_secs(600));
    let p = client
        .enqueue(&Task::new("u", b"p".to_vec()), unique.clone())
        .await
        .unwrap();
    let s = client
        .enqueue(
            &Task::new("u", b"s".to_vec()),
            unique.clone().process_in(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let g = client
        .enqueue(&Task::new("u", b"g".to_vec()), unique.clone().group("gg"))
        .await
        .unwrap();
    for state in ["retry", "archived", "completed"] {
        seed::task(&mut conn, "q", state, state, NOW).await;
    }
    seed::task(&mut conn, "q", "act", "active", NOW + 30).await;
    // A task whose lock was taken over by another task keeps that lock.
    seed::task(&mut conn, "q", "stale", "retry", NOW).await;
    let other_lock = keys::unique_key("q", "u", Some(b"x"));
    let _: () = conn
        .hset(keys::task_key("q", "stale"), "unique_key", &other_lock)
        .await
        .unwrap();
    let _: () = conn.set(&other_lock, "someone-else").await.unwrap();
    let insp = inspector_at(&db, NOW).await;

    for (id, payload) in [(&p.id, "p"), (&s.id, "s"), (&g.id, "g")] {
        insp.delete_task("q", id).await.unwrap();
        assert!(!exists(&mut conn, &keys::task_key("q", id)).await);
        let lock = keys::unique_key("q", "u", Some(payload.as_bytes()));
        assert!(!exists(&mut conn, &lock).await, "lock {lock} released");
    }
    for id in ["retry", "archived", "completed", "stale"] {
        insp.delete_task("q", id).await.unwrap();
        assert!(!exists(&mut conn, &keys::task_key("q", id)).await);
    }
    let held: String = conn.get(&other_lock).await.unwrap();
    assert_eq!(held, "someone-else");
    for key in [
        keys::pending_key("q"),
        keys::scheduled_key("q"),
        keys::retry_key("q"),
        keys::archived_key("q"),
        keys::completed_key("q"),
        keys::group_key("q", "gg"),
        keys::all_groups_key("q"),
    ] {
        assert!(!exists(&mut conn, &key).await, "{key} emptied");
    }
    assert_eq!(
        precondition(insp.delete_task("q", "act").await.unwrap_err()),
        "cannot delete task in active state. use CancelProcessing instead."
    );
    assert!(exists(&mut conn, &keys::task_key("q", "act")).await);
    assert!(matches!(
        insp.delete_task("q", &p.id).await,
        Err(Error::TaskNotFound { .. })
    ));
}

/// §9.4 RunAll: every task of scheduled, retry or archived (and a group)
/// moves to pending, lowest score first (it runs first); counts are exact;
/// other states are InvalidArgument.
#[tokio::test]
async fn run_all_moves_every_task() {
    let db = support::redis();
    let mut conn = db.raw().await;
    for (i, score) in [30, 10, 20].into_iter().enumerate() {
        seed::task(&mut conn, "q", &format!("s{i}"), "scheduled", NOW + score).await;
    }
    for i in 0..2 {
        seed::task(&mut conn, "q", &format!("r{i}"), "retry", NOW).await;
    }
    seed::task(&mut conn, "q", "a0", "archived", NOW).await;
    // An id without a hash is dropped, not moved.
    let _: () = conn
        .zadd(keys::archived_key("q"), "ghost", NOW)
        .await
        .unwrap();
    seed::task(&mut conn, "q", "g0", "aggregating", NOW).await;
    seed::task(&mut conn, "q", "g1", "aggregating", NOW).await;
    let insp = inspector_at(&db, NOW).await;

    assert_eq!(insp.run_all("q", TaskState::Scheduled).await.unwrap(), 3);
    assert_eq!(
        list(&mut conn, &keys::pending_key("q")).await,
        ["s0", "s2", "s1"],
        "the earliest due (s1) is rightmost: next to run"
    );
    assert_eq!(insp.run_all("q", TaskState::Retry).await.unwrap(), 2);
    assert_eq!(insp.run_all("q", TaskState::Archived).await.unwrap(), 1);
    assert_eq!(insp.run_all_aggregating("q", GROUP).await.unwrap(), 2);
    assert_eq!(insp.run_all("q", TaskState::Scheduled).await.unwrap(), 0);
    for key in [
        keys::scheduled_key("q"),
        keys::retry_key("q"),
        keys::archived_key("q"),
        keys::group_key("q", GROUP),
        keys::all_groups_key("q"),
    ] {
        assert!(!exists(&mut conn, &key).await, "{key} emptied");
    }
    assert!(!exists(&mut conn, &keys::task_key("q", "ghost")).await);
    for id in ["s0", "s1", "s2", "r0", "r1", "a0", "g0", "g1"] {
        assert_eq!(
            state_of(&mut conn, "q", id).await.as_deref(),
            Some("pending")
        );
    }
    assert_eq!(list(&mut conn, &keys::pending_key("q")).await.len(), 8);
    for state in [
        TaskState::Pending,
        TaskState::Active,
        TaskState::Completed,
        TaskState::Aggregating,
    ] {
        assert!(
            matches!(
                insp.run_all("q", state).await,
                Err(Error::InvalidArgument(_))
            ),
            "{state}"
        );
    }
}

/// §9.4 ArchiveAll: every pending, scheduled, retry (or group) task is
/// archived scored now with state=archived; counts are exact; other states
/// are InvalidArgument.
#[tokio::test]
async fn archive_all_moves_every_task() {
    let db = support::redis();
    let mut conn = db.raw().await;
    for i in 0..3 {
        seed::task(&mut conn, "q", &format!("p{i}"), "pending", 0).await;
    }
    seed::task(&mut conn, "q", "s0", "scheduled", NOW + 10).await;
    seed::task(&mut conn, "q", "r0", "retry", NOW + 10).await;
    seed::task(&mut conn, "q", "r1", "retry", NOW + 10).await;
    seed::task(&mut conn, "q", "g0", "aggregating", NOW).await;
    let insp = inspector_at(&db, NOW).await;

    assert_eq!(insp.archive_all("q", TaskState::Pending).await.unwrap(), 3);
    assert_eq!(
        insp.archive_all("q", TaskState::Scheduled).await.unwrap(),
        1
    );
    assert_eq!(insp.archive_all("q", TaskState::Retry).await.unwrap(), 2);
    assert_eq!(insp.archive_all_aggregating("q", GROUP).await.unwrap(), 1);
    assert_eq!(insp.archive_all("q", TaskState::Pending).await.unwrap(), 0);
    let archived = zset(&mut conn, &keys::archived_key("q")).await;
    assert_eq!(archived.len(), 7);
    assert!(archived.iter().all(|(_, s)| *s == NOW));
    for (id, _) in &archived {
        assert_eq!(
            state_of(&mut conn, "q", id).await.as_deref(),
            Some("archived")
        );
    }
    for key in [
        keys::pending_key("q"),
        keys::scheduled_key("q"),
        keys::retry_key("q"),
        keys::group_key("q", GROUP),
        keys::all_groups_key("q"),
    ] {
        assert!(!exists(&mut conn, &key).await, "{key} emptied");
    }
    for state in [
        TaskState::Active,
        TaskState::Archived,
        TaskState::Completed,
        TaskState::Aggregating,
    ] {
        assert!(
            matches!(
                insp.archive_all("q", state).await,
                Err(Error::InvalidArgument(_))
            ),
            "{state}"
        );
    }
}

/// §9.4 DeleteAll: every task of the state goes with its hash; locks held
/// by the task are released for every source, pending and groups included
/// (Go forgets those); active and aggregating are InvalidArgument.
#[tokio::test]
async fn delete_all_deletes_tasks_and_locks() {
    let db = support::redis();
    let mut conn = db.raw().await;
    let client = Client::connect(&db.url()).await.unwrap();
    let unique = EnqueueOptions::new()
        .queue("q")
        .unique(Duration::from_secs(600));
    client
        .enqueue(&Task::new("u", b"p".to_vec()), unique.clone())
        .await
        .unwrap();
    client
        .enqueue(
            &Task::new("u", b"p2".to_vec()),
            EnqueueOptions::new().queue("q"),
        )
        .await
        .unwrap();
    client
        .enqueue(
            &Task::new("u", b"s".to_vec()),
            unique.clone().process_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    client
        .enqueue(&Task::new("u", b"g".to_vec()), unique.clone().group(GROUP))
        .await
        .unwrap();
    for state in ["retry", "archived", "completed"] {
        for i in 0..2 {
            seed::task(&mut conn, "q", &format!("{state}{i}"), state, NOW).await;
        }
    }
    let insp = inspector_at(&db, NOW).await;

    assert_eq!(insp.delete_all("q", TaskState::Pending).await.unwrap(), 2);
    assert_eq!(insp.delete_all("q", TaskState::Scheduled).await.unwrap(), 1);
    assert_eq!(insp.delete_all("q", TaskState::Retry).await.unwrap(), 2);
    assert_eq!(insp.delete_all("q", TaskState::Archived).await.unwrap(), 2);
    assert_eq!(insp.delete_all("q", TaskState::Completed).await.unwrap(), 2);
    assert_eq!(insp.delete_all_aggregating("q", GROUP).await.unwrap(), 1);
    assert_eq!(insp.delete_all("q", TaskState::Completed).await.unwrap(), 0);
    let mut left: Vec<String> = conn.keys("asynq:{q}:*").await.unwrap();
    left.sort();
    assert!(left.is_empty(), "no hash, container or lock left: {left:?}");
    for state in [TaskState::Active, TaskState::Aggregating] {
        assert!(
            matches!(
                insp.delete_all("q", state).await,
                Err(Error::InvalidArgument(_))
            ),
            "{state}"
        );
    }
}

/// Bulk scripts work in chunks of 100 ids: 250 tasks go in one call each.
#[tokio::test]
async fn bulk_operations_span_chunks() {
    let db = support::redis();
    let mut conn = db.raw().await;
    let mut seed_pipe = redis::pipe();
    for i in 0..250 {
        let id = format!("s{i:03}");
        seed_pipe
            .hset_multiple(
                keys::task_key("q", &id),
                &[
                    ("msg", msg_bytes("q", &id)),
                    ("state", b"scheduled".to_vec()),
                ],
            )
            .zadd(keys::scheduled_key("q"), &id, NOW + i);
    }
    let _: () = seed_pipe.query_async(&mut conn).await.unwrap();
    // asynq:queues has a slot of its own (cluster pass).
    let _: () = conn.sadd(keys::ALL_QUEUES, "q").await.unwrap();
    let insp = inspector_at(&db, NOW).await;

    assert_eq!(insp.run_all("q", TaskState::Scheduled).await.unwrap(), 250);
    let pending = list(&mut conn, &keys::pending_key("q")).await;
    assert_eq!(pending.len(), 250);
    assert_eq!(pending.last().map(String::as_str), Some("s000"));
    assert_eq!(pending.first().map(String::as_str), Some("s249"));
    assert_eq!(
        insp.archive_all("q", TaskState::Pending).await.unwrap(),
        250
    );
    assert_eq!(zset(&mut conn, &keys::archived_key("q")).await.len(), 250);
    assert_eq!(
        insp.delete_all("q", TaskState::Archived).await.unwrap(),
        250
    );
    let left: Vec<String> = conn.keys("asynq:{q}:*").await.unwrap();
    assert!(left.is_empty(), "{left:?}");
}

/// Seeds `count` archived tasks with hashes in one script call: ids
/// `<prefix><5 digits>`, the first scored `top`, each next one second older.
async fn seed_archive(conn: &mut Conn, q: &str, prefix: &str, count: usize, top: i64) {
    let script = redis::Script::new(
        r#"
        for i = 0, tonumber(ARGV[2]) - 1 do
            local id = ARGV[1] .. string.format("%05d", i)
            redis.call("HSET", ARGV[4] .. id, "msg", ARGV[5], "state", "archived")
            redis.call("ZADD", KEYS[1], tonumber(ARGV[3]) - i, id)
        end
        return 1
        "#,
    );
    let _: i64 = script
        .key(keys::archived_key(q))
        .arg(prefix)
        .arg(count)
        .arg(top)
        .arg(keys::task_key_prefix(q))
        .arg(msg_bytes(q, "seeded"))
        .invoke_async(conn)
        .await
        .unwrap();
    let _: () = conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
}

async fn task_hash_count(conn: &mut Conn, q: &str) -> usize {
    let found: Vec<String> = conn
        .keys(format!("{}*", keys::task_key_prefix(q)))
        .await
        .unwrap();
    found.len()
}

const RETENTION_S: i64 = ARCHIVE_RETENTION.as_secs() as i64;

/// S16, §10: archiving into a full archive keeps exactly 10,000 tasks
/// (deviation: Go keeps 9,999), drops the oldest, and drops everything
/// archived 90 days ago or earlier — with their hashes (Go's inspector
/// leaves them).
#[tokio::test]
async fn archive_task_trims_to_max_size_and_retention() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed_archive(&mut conn, "q", "r", MAX_ARCHIVE_SIZE, NOW - 1000).await;
    seed_archive(&mut conn, "q", "old", 3, NOW - RETENTION_S - 100).await;
    seed::task(&mut conn, "q", "new", "pending", 0).await;
    let oldest = format!("r{:05}", MAX_ARCHIVE_SIZE - 1);
    let insp = inspector_at(&db, NOW).await;

    insp.archive_task("q", "new").await.unwrap();
    let card: usize = conn.zcard(keys::archived_key("q")).await.unwrap();
    assert_eq!(card, MAX_ARCHIVE_SIZE);
    assert_eq!(card, 10_000);
    let score: Option<i64> = conn.zscore(keys::archived_key("q"), "new").await.unwrap();
    assert_eq!(score, Some(NOW));
    assert_eq!(
        state_of(&mut conn, "q", "new").await.as_deref(),
        Some("archived")
    );
    let gone: Option<i64> = conn.zscore(keys::archived_key("q"), &oldest).await.unwrap();
    assert_eq!(gone, None, "the oldest recent task is trimmed");
    assert!(!exists(&mut conn, &keys::task_key("q", &oldest)).await);
    let next_oldest = format!("r{:05}", MAX_ARCHIVE_SIZE - 2);
    assert!(exists(&mut conn, &keys::task_key("q", &next_oldest)).await);
    for i in 0..3 {
        let id = format!("old{i:05}");
        let s: Option<i64> = conn.zscore(keys::archived_key("q"), &id).await.unwrap();
        assert_eq!(s, None, "{id} older than 90 days");
        assert!(!exists(&mut conn, &keys::task_key("q", &id)).await);
    }
    assert_eq!(task_hash_count(&mut conn, "q").await, MAX_ARCHIVE_SIZE);
}

/// §10: the age cutoff is inclusive: archived exactly 90 days ago goes, one
/// second later stays.
#[tokio::test]
async fn archive_age_cutoff_is_inclusive() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed::task(&mut conn, "q", "at-cutoff", "archived", NOW - RETENTION_S).await;
    seed::task(&mut conn, "q", "after", "archived", NOW - RETENTION_S + 1).await;
    seed::task(&mut conn, "q", "new", "retry", NOW).await;
    let insp = inspector_at(&db, NOW).await;
    insp.archive_task("q", "new").await.unwrap();
    assert_eq!(
        zset(&mut conn, &keys::archived_key("q")).await,
        [
            ("after".to_string(), NOW - RETENTION_S + 1),
            ("new".to_string(), NOW)
        ]
    );
    assert!(!exists(&mut conn, &keys::task_key("q", "at-cutoff")).await);
    assert!(exists(&mut conn, &keys::task_key("q", "after")).await);
}

/// S16: 9,500 entries older than 90 days are trimmed, hashes included, by
/// one archive_task call without error (Go's unpack of them all fails from
/// about 8,000 entries).
#[tokio::test]
async fn archive_task_trims_thousands_of_stale_entries() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed_archive(&mut conn, "q", "stale", 9_500, NOW - RETENTION_S - 1).await;
    seed::task(&mut conn, "q", "new", "scheduled", NOW + 60).await;
    let insp = inspector_at(&db, NOW).await;
    insp.archive_task("q", "new").await.unwrap();
    assert_eq!(
        zset(&mut conn, &keys::archived_key("q")).await,
        [("new".to_string(), NOW)]
    );
    assert_eq!(task_hash_count(&mut conn, "q").await, 1);
}

/// §10: the bulk archive paths trim too: stale entries go and the archive
/// keeps at most 10,000 tasks after archive_all and archive_all_aggregating.
#[tokio::test]
async fn archive_all_trims_the_archive() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed_archive(&mut conn, "q", "stale", 120, NOW - RETENTION_S).await;
    seed_archive(&mut conn, "q", "r", MAX_ARCHIVE_SIZE - 2, NOW - 1000).await;
    for i in 0..3 {
        seed::task(&mut conn, "q", &format!("p{i}"), "pending", 0).await;
    }
    seed::task(&mut conn, "q", "g0", "aggregating", NOW).await;
    let insp = inspector_at(&db, NOW).await;

    assert_eq!(insp.archive_all("q", TaskState::Pending).await.unwrap(), 3);
    let card: usize = conn.zcard(keys::archived_key("q")).await.unwrap();
    assert_eq!(card, MAX_ARCHIVE_SIZE);
    assert_eq!(task_hash_count(&mut conn, "q").await, MAX_ARCHIVE_SIZE + 1);
    assert!(!exists(&mut conn, &keys::task_key("q", "stale00000")).await);
    let oldest = format!("r{:05}", MAX_ARCHIVE_SIZE - 3);
    assert!(!exists(&mut conn, &keys::task_key("q", &oldest)).await);

    assert_eq!(insp.archive_all_aggregating("q", GROUP).await.unwrap(), 1);
    let card: usize = conn.zcard(keys::archived_key("q")).await.unwrap();
    assert_eq!(card, MAX_ARCHIVE_SIZE);
    assert_eq!(task_hash_count(&mut conn, "q").await, MAX_ARCHIVE_SIZE);
    let s: Option<i64> = conn.zscore(keys::archived_key("q"), "g0").await.unwrap();
    assert_eq!(s, Some(NOW));
}

/// §9.3 UpdateTaskPayload (0.26): a scheduled task gets the new payload;
/// every other field, the unique_key field and an unknown protobuf field
/// (16) survive; other states are FailedPrecondition with Go's text.
#[tokio::test]
async fn update_task_payload_keeps_unknown_fields() {
    let db = support::redis();
    let mut conn = db.raw().await;
    seed::task(&mut conn, "q", "s", "scheduled", NOW + 600).await;
    let task_key = keys::task_key("q", "s");
    let future: Vec<u8> = [&[0x82, 0x01, 6][..], b"future"].concat();
    let mut with_future = msg_bytes("q", "s");
    with_future.extend_from_slice(&future);
    let _: () = conn.hset(&task_key, "msg", &with_future).await.unwrap();
    let _: () = conn
        .hset(&task_key, "unique_key", "asynq:{q}:unique:t:abc")
        .await
        .unwrap();
    seed::task(&mut conn, "q", "p", "pending", 0).await;
    let insp = inspector_at(&db, NOW).await;

    let info = insp
        .update_task_payload("q", "s", b"new payload".to_vec())
        .await
        .unwrap();
    assert_eq!(info.payload, b"new payload");
    assert_eq!(info.state, TaskState::Scheduled);
    assert_eq!(info.next_process_at, Some(at(NOW + 600)));
    assert_eq!(info.max_retry, 25);
    assert_eq!(info.timeout, Duration::from_secs(1800));
    let stored: Vec<u8> = conn.hget(&task_key, "msg").await.unwrap();
    assert!(stored.ends_with(&future), "field 16 kept: {stored:02x?}");
    let decoded = TaskMessage::decode(&stored[..]).unwrap();
    let mut expected = TaskMessage::decode(&msg_bytes("q", "s")[..]).unwrap();
    expected.payload = b"new payload".to_vec();
    assert_eq!(decoded, expected);
    let uk: String = conn.hget(&task_key, "unique_key").await.unwrap();
    assert_eq!(uk, "asynq:{q}:unique:t:abc");
    assert_eq!(
        state_of(&mut conn, "q", "s").await.as_deref(),
        Some("scheduled")
    );
    assert_eq!(
        zset(&mut conn, &keys::scheduled_key("q")).await,
        [("s".to_string(), NOW + 600)]
    );
    let got = insp.get_task_info("q", "s").await.unwrap();
    assert_eq!(got.payload, b"new payload");

    assert_eq!(
        precondition(
            insp.update_task_payload("q", "p", b"x".to_vec())
                .await
                .unwrap_err()
        ),
        "cannot update task that is not in scheduled state."
    );
    assert!(matches!(
        insp.update_task_payload("q", "nope", b"x".to_vec()).await,
        Err(Error::TaskNotFound { .. })
    ));
    let _: () = conn.hset(&task_key, "msg", vec![0x0a, 0x05]).await.unwrap();
    assert!(matches!(
        insp.update_task_payload("q", "s", b"x".to_vec()).await,
        Err(Error::Corrupt { .. })
    ));
}
