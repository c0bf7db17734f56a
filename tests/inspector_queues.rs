//! Queue-level `Inspector` operations on a real Redis: the queue list,
//! `queue_info` numbers, daily history, groups, pause/unpause and queue
//! deletion (wire spec §6.4, §9.5–9.8, §14.5, §14.10, §14.11).

use std::time::Duration;

use crate::support::redis::RawConn;
use asynqdeck::broker::keys;
use asynqdeck::inspector::{DailyStats, GroupInfo};
use asynqdeck::{EnqueueOptions, Error, Task};
use redis::AsyncCommands;

use crate::support::clock::{Clocked, clocked_on, now};
use crate::support::seed;
use crate::support::{self};

/// Every key of the queue, sorted.
async fn queue_keys(conn: &mut RawConn, q: &str) -> Vec<String> {
    let mut found: Vec<String> = conn.keys(format!("asynq:{{{q}}}:*")).await.unwrap();
    found.sort();
    found
}

/// §9.6 and §14.10: after seeding every state, `queue_info` reports Go's
/// numbers: per-state counts, Size including completed, aggregating summed
/// over groups, today's (UTC) counters only, the all-time totals, the pause
/// flag, latency of the rightmost (next-to-run) pending task, the call time
/// and a positive memory estimate.
#[tokio::test]
async fn queue_info_counts_every_state_as_go() {
    let db = support::redis();
    let Clocked {
        client,
        inspector,
        clock,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let q = "critical";
    let opts = || EnqueueOptions::new().queue(q);
    // The first pending task is the rightmost one: it runs next and sets the latency.
    clock.set(now() - chrono::Duration::seconds(42));
    client
        .enqueue(&Task::new("p", b"1".to_vec()), opts())
        .await
        .unwrap();
    clock.set(now() - chrono::Duration::seconds(10));
    for _ in 0..2 {
        client
            .enqueue(&Task::new("p", b"2".to_vec()), opts())
            .await
            .unwrap();
    }
    clock.set(now());
    for _ in 0..2 {
        let o = opts().process_in(Duration::from_secs(3600));
        client
            .enqueue(&Task::new("s", b"3".to_vec()), o)
            .await
            .unwrap();
    }
    for group in ["g1", "g1", "g2"] {
        let o = opts().group(group);
        client
            .enqueue(&Task::new("a", b"4".to_vec()), o)
            .await
            .unwrap();
    }
    seed::seeded(&mut conn, q, "active-1", "active").await;
    for i in 0..4 {
        seed::seeded(&mut conn, q, &format!("retry-{i}"), "retry").await;
    }
    for i in 0..5 {
        seed::seeded(&mut conn, q, &format!("archived-{i}"), "archived").await;
    }
    for i in 0..6 {
        seed::seeded(&mut conn, q, &format!("completed-{i}"), "completed").await;
    }
    let today = now().date_naive();
    let yesterday = today.pred_opt().unwrap();
    let _: () = conn.set(keys::processed_key(q, today), 7).await.unwrap();
    let _: () = conn.set(keys::failed_key(q, today), 2).await.unwrap();
    let _: () = conn
        .set(keys::processed_key(q, yesterday), 99)
        .await
        .unwrap();
    let _: () = conn.set(keys::failed_key(q, yesterday), 98).await.unwrap();
    let _: () = conn.set(keys::processed_total_key(q), 100).await.unwrap();
    let _: () = conn.set(keys::failed_total_key(q), 10).await.unwrap();
    inspector.pause_queue(q).await.unwrap();

    let info = inspector.queue_info(q).await.unwrap();
    assert_eq!(info.queue, q);
    assert_eq!(
        (info.pending, info.active, info.scheduled, info.retry),
        (3, 1, 2, 4)
    );
    assert_eq!((info.archived, info.completed, info.aggregating), (5, 6, 3));
    assert_eq!(info.groups, 2);
    assert_eq!(
        info.size,
        3 + 1 + 2 + 4 + 5 + 6 + 3,
        "Size includes completed (§14.10)"
    );
    assert_eq!(
        (info.processed, info.failed),
        (7, 2),
        "today's counters only"
    );
    assert_eq!((info.processed_total, info.failed_total), (100, 10));
    assert!(info.paused);
    assert_eq!(info.latency, Duration::from_secs(42));
    assert_eq!(info.timestamp, now());
    assert!(info.memory_usage > 0, "memory usage {}", info.memory_usage);

    inspector.unpause_queue(q).await.unwrap();
    assert!(!inspector.queue_info(q).await.unwrap().paused);
}

/// §9.6: with nothing pending, or when the next pending task has no
/// `pending_since` (requeued / run by hand, §14.5), latency is zero; missing
/// counters read 0.
#[tokio::test]
async fn queue_info_latency_zero_without_pending_since() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    seed::seeded(&mut conn, "q", "r1", "retry").await;
    let info = inspector.queue_info("q").await.unwrap();
    assert_eq!(info.latency, Duration::ZERO);
    assert_eq!(
        (
            info.processed,
            info.failed,
            info.processed_total,
            info.failed_total
        ),
        (0, 0, 0, 0)
    );
    assert_eq!((info.size, info.groups, info.paused), (1, 0, false));

    seed::seeded(&mut conn, "q", "p1", "pending").await;
    let info = inspector.queue_info("q").await.unwrap();
    assert_eq!(info.pending, 1);
    assert_eq!(info.latency, Duration::ZERO);
}

/// Sums MEMORY USAGE the way wire spec §9.6 describes (sample 20 per
/// container, 5 groups; a missing hash counts 0 in lists/zsets and is left
/// out of the group sample), in the script's order of float operations.
async fn expected_memory(conn: &mut RawConn, q: &str) -> i64 {
    async fn usage(conn: &mut RawConn, key: &str) -> f64 {
        let n: Option<i64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(key)
            .query_async(conn)
            .await
            .unwrap();
        n.unwrap_or(0) as f64
    }
    let mut total = 0f64;
    let containers = [
        (keys::active_key(q), true),
        (keys::pending_key(q), true),
        (keys::scheduled_key(q), false),
        (keys::retry_key(q), false),
        (keys::archived_key(q), false),
        (keys::completed_key(q), false),
    ];
    for (key, is_list) in containers {
        let (ids, len): (Vec<String>, i64) = if is_list {
            (
                conn.lrange(&key, 0, 19).await.unwrap(),
                conn.llen(&key).await.unwrap(),
            )
        } else {
            (
                conn.zrange(&key, 0, 19).await.unwrap(),
                conn.zcard(&key).await.unwrap(),
            )
        };
        if !ids.is_empty() {
            let mut sum = 0f64;
            for id in &ids {
                sum += usage(conn, &keys::task_key(q, id)).await;
            }
            total += (sum / ids.len() as f64) * len as f64;
        }
        total += usage(conn, &key).await;
    }
    let groups: Vec<String> = conn.smembers(keys::all_groups_key(q)).await.unwrap();
    let (mut tasks, mut sampled, mut bytes) = (0i64, 0i64, 0f64);
    for (i, g) in groups.iter().enumerate() {
        let gkey = keys::group_key(q, g);
        tasks += conn.zcard::<_, i64>(&gkey).await.unwrap();
        if i < 5 {
            let ids: Vec<String> = conn.zrange(&gkey, 0, 19).await.unwrap();
            for id in ids {
                let n: Option<i64> = redis::cmd("MEMORY")
                    .arg("USAGE")
                    .arg(keys::task_key(q, &id))
                    .query_async(conn)
                    .await
                    .unwrap();
                if let Some(n) = n {
                    sampled += 1;
                    bytes += n as f64;
                }
            }
        }
    }
    if sampled > 0 {
        total += (bytes / sampled as f64) * tasks as f64;
    }
    total as i64
}

/// §9.6 MemoryUsage, guarded form: the estimate equals the sampled formula
/// (20 tasks per container, longer lists extrapolated), an id without a hash
/// does not fail the call, and a group whose members have no hash adds
/// nothing.
#[tokio::test]
async fn memory_usage_is_the_sampled_estimate() {
    let db = support::redis();
    let Clocked {
        client,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let q = "mem";
    for i in 0..25 {
        let payload = vec![b'x'; 10 + i * 37];
        client
            .enqueue(&Task::new("p", payload), EnqueueOptions::new().queue(q))
            .await
            .unwrap();
    }
    for i in 0..3 {
        seed::seeded(&mut conn, q, &format!("done-{i}"), "completed").await;
    }
    client
        .enqueue(
            &Task::new("a", vec![b'y'; 500]),
            EnqueueOptions::new().queue(q).group("real"),
        )
        .await
        .unwrap();
    // Dangling ids: one in pending (leftmost, so it is sampled), one in a group of its own.
    let _: () = conn.lpush(keys::pending_key(q), "ghost").await.unwrap();
    let _: () = conn
        .zadd(keys::group_key(q, "ghosts"), "ghost-2", 1)
        .await
        .unwrap();
    let _: () = conn.sadd(keys::all_groups_key(q), "ghosts").await.unwrap();

    let expected = expected_memory(&mut conn, q).await;
    let info = inspector.queue_info(q).await.unwrap();
    assert_eq!(info.memory_usage, expected);
    assert!(expected > 25 * 100, "estimate {expected}");
    assert_eq!((info.pending, info.aggregating, info.groups), (26, 2, 2));
}

/// §9.6: unknown queue → QueueNotFound, blank name → InvalidQueueName, and a
/// counter that is not an integer is reported as corrupt data.
#[tokio::test]
async fn queue_info_errors() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    match inspector.queue_info("nope").await {
        Err(Error::QueueNotFound { queue }) => assert_eq!(queue, "nope"),
        other => panic!("expected QueueNotFound, got {other:?}"),
    }
    assert!(matches!(
        inspector.queue_info(" ").await,
        Err(Error::InvalidQueueName)
    ));
    seed::seeded(&mut conn, "q", "r1", "retry").await;
    let _: () = conn.set(keys::failed_total_key("q"), "lots").await.unwrap();
    match inspector.queue_info("q").await {
        Err(Error::Corrupt { key, .. }) => assert_eq!(key, "asynq:{q}:failed"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

/// §9.5 Queues(): every registered queue, sorted; empty when there is none.
#[tokio::test]
async fn queues_are_listed_sorted() {
    let db = support::redis();
    let Clocked {
        client, inspector, ..
    } = clocked_on(db.clone(), now()).await;
    assert_eq!(inspector.queues().await.unwrap(), Vec::<String>::new());
    for q in ["zeta", "alpha", "mid"] {
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    assert_eq!(inspector.queues().await.unwrap(), ["alpha", "mid", "zeta"]);
}

/// §9.7: History over 3 days reads the UTC daily counters, index 0 is today,
/// a day without counters reads 0 and older days are not read.
#[tokio::test]
async fn history_reads_daily_counters_today_first() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let q = "hist";
    let _: () = conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    let day = |i: i64| (now() - chrono::Duration::days(i)).date_naive();
    let _: () = conn.set(keys::processed_key(q, day(0)), 5).await.unwrap();
    let _: () = conn.set(keys::failed_key(q, day(0)), 1).await.unwrap();
    let _: () = conn.set(keys::processed_key(q, day(2)), 8).await.unwrap();
    let _: () = conn.set(keys::failed_key(q, day(2)), 3).await.unwrap();
    let _: () = conn.set(keys::processed_key(q, day(3)), 100).await.unwrap();

    let stats = inspector.history(q, 3).await.unwrap();
    let row = |i: i64, processed, failed| DailyStats {
        queue: q.to_string(),
        date: day(i),
        processed,
        failed,
    };
    assert_eq!(stats, vec![row(0, 5, 1), row(1, 0, 0), row(2, 8, 3)]);
    assert_eq!(stats[0].date.to_string(), "2026-03-10");
}

/// §9.7: a long history (120 days, read in several batches) keeps every day
/// in place, today first.
#[tokio::test]
async fn history_over_many_days() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let q = "long";
    let _: () = conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    let day = |i: i64| (now() - chrono::Duration::days(i)).date_naive();
    for i in [49i64, 50, 119] {
        let _: () = conn
            .set(keys::processed_key(q, day(i)), i * 2)
            .await
            .unwrap();
        let _: () = conn.set(keys::failed_key(q, day(i)), i).await.unwrap();
    }
    let stats = inspector.history(q, 120).await.unwrap();
    assert_eq!(stats.len(), 120);
    for (i, s) in stats.iter().enumerate() {
        assert_eq!(s.date, day(i as i64));
        let expected = if [49, 50, 119].contains(&i) {
            (i as i64 * 2, i as i64)
        } else {
            (0, 0)
        };
        assert_eq!((s.processed, s.failed), expected, "day {i}");
    }
}

/// §9.7 preconditions: days = 0 → FailedPrecondition with Go's text (checked
/// before the queue), more than 36,500 days → InvalidArgument (our bound),
/// unknown queue → QueueNotFound, blank name → InvalidQueueName.
#[tokio::test]
async fn history_errors() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let _: () = conn.sadd(keys::ALL_QUEUES, "q").await.unwrap();
    for q in ["q", "unknown"] {
        match inspector.history(q, 0).await {
            Err(Error::FailedPrecondition(text)) => {
                assert_eq!(text, "the number of days must be positive")
            }
            other => panic!("expected FailedPrecondition, got {other:?}"),
        }
    }
    assert!(matches!(
        inspector.history("q", 36_501).await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(inspector.history("q", 36_500).await.unwrap().len(), 36_500);
    match inspector.history("unknown", 1).await {
        Err(Error::QueueNotFound { queue }) => assert_eq!(queue, "unknown"),
        other => panic!("expected QueueNotFound, got {other:?}"),
    }
    assert!(matches!(
        inspector.history("", 1).await,
        Err(Error::InvalidQueueName)
    ));
}

/// §9.8: groups with their sizes, sorted by name; a queue without groups
/// (even an unknown one, as Go) has none.
#[tokio::test]
async fn groups_with_sizes_sorted() {
    let db = support::redis();
    let Clocked {
        client, inspector, ..
    } = clocked_on(db.clone(), now()).await;
    for g in ["b", "b", "a", "c", "b"] {
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue("q").group(g),
            )
            .await
            .unwrap();
    }
    let info = |group: &str, size| GroupInfo {
        group: group.into(),
        size,
    };
    assert_eq!(
        inspector.groups("q").await.unwrap(),
        vec![info("a", 1), info("b", 3), info("c", 1)]
    );
    assert_eq!(inspector.groups("unknown").await.unwrap(), vec![]);
    assert!(matches!(
        inspector.groups("").await,
        Err(Error::InvalidQueueName)
    ));
}

/// §9.5: pause writes `asynq:{q}:paused` = now in unix seconds with no TTL;
/// pausing twice and unpausing twice fail with Go's texts; like Go, a queue
/// that was never enqueued to can be paused.
#[tokio::test]
async fn pause_and_unpause() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let q = "never-enqueued";
    inspector.pause_queue(q).await.unwrap();
    let stored: String = conn.get(keys::paused_key(q)).await.unwrap();
    assert_eq!(stored, now().timestamp().to_string());
    let ttl: i64 = conn.ttl(keys::paused_key(q)).await.unwrap();
    assert_eq!(ttl, -1, "no expiry");
    match inspector.pause_queue(q).await {
        Err(Error::FailedPrecondition(text)) => {
            assert_eq!(text, r#"queue "never-enqueued" is already paused"#)
        }
        other => panic!("expected FailedPrecondition, got {other:?}"),
    }
    let again: String = conn.get(keys::paused_key(q)).await.unwrap();
    assert_eq!(again, stored, "a refused pause leaves the key alone");

    inspector.unpause_queue(q).await.unwrap();
    let exists: bool = conn.exists(keys::paused_key(q)).await.unwrap();
    assert!(!exists);
    match inspector.unpause_queue(q).await {
        Err(Error::FailedPrecondition(text)) => {
            assert_eq!(text, r#"queue "never-enqueued" is not paused"#)
        }
        other => panic!("expected FailedPrecondition, got {other:?}"),
    }
    assert!(matches!(
        inspector.pause_queue(" ").await,
        Err(Error::InvalidQueueName)
    ));
    assert!(matches!(
        inspector.unpause_queue("").await,
        Err(Error::InvalidQueueName)
    ));
}

/// §9.5 DeleteQueue without force refuses a queue holding a task in any
/// state — including completed and aggregating, which Go ignores (§14.11,
/// deliberate deviation) — and changes nothing; an unknown queue is
/// QueueNotFound.
#[tokio::test]
async fn delete_queue_refuses_non_empty_queue() {
    let db = support::redis();
    let Clocked {
        client,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    for state in ["pending", "active", "retry", "archived", "completed"] {
        seed::seeded(&mut conn, state, "t1", state).await;
    }
    client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new()
                .queue("scheduled")
                .process_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().queue("aggregating").group("g"),
        )
        .await
        .unwrap();
    let all = [
        "active",
        "aggregating",
        "archived",
        "completed",
        "pending",
        "retry",
        "scheduled",
    ];
    for q in all {
        let before = queue_keys(&mut conn, q).await;
        match inspector.delete_queue(q, false).await {
            Err(Error::QueueNotEmpty { queue }) => assert_eq!(queue, q),
            other => panic!("{q}: expected QueueNotEmpty, got {other:?}"),
        }
        assert_eq!(
            queue_keys(&mut conn, q).await,
            before,
            "{q}: nothing changed"
        );
    }
    assert_eq!(inspector.queues().await.unwrap(), all);
    match inspector.delete_queue("unknown", false).await {
        Err(Error::QueueNotFound { queue }) => assert_eq!(queue, "unknown"),
        other => panic!("expected QueueNotFound, got {other:?}"),
    }
    match inspector.delete_queue("unknown", true).await {
        Err(Error::QueueNotFound { queue }) => assert_eq!(queue, "unknown"),
        other => panic!("expected QueueNotFound, got {other:?}"),
    }
    assert!(matches!(
        inspector.delete_queue(" ", true).await,
        Err(Error::InvalidQueueName)
    ));
}

/// §9.5: an empty queue is deleted without force: it leaves `asynq:queues`,
/// and its counters and paused flag go too (issue 12 R14; Go keeps them).
#[tokio::test]
async fn delete_empty_queue_without_force() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let q = "empty";
    let _: () = conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    let _: () = conn.set(keys::processed_total_key(q), 3).await.unwrap();
    inspector.pause_queue(q).await.unwrap();
    inspector.delete_queue(q, false).await.unwrap();
    assert_eq!(inspector.queues().await.unwrap(), Vec::<String>::new());
    assert_eq!(queue_keys(&mut conn, q).await, Vec::<String>::new());
    assert!(matches!(
        inspector.queue_info(q).await,
        Err(Error::QueueNotFound { .. })
    ));
}

/// §9.5: a forced delete refuses a queue with an active task (Go's text) and
/// changes nothing.
#[tokio::test]
async fn force_delete_refuses_active_tasks() {
    let db = support::redis();
    let Clocked {
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    seed::seeded(&mut conn, "busy", "a1", "active").await;
    seed::seeded(&mut conn, "busy", "p1", "pending").await;
    let before = queue_keys(&mut conn, "busy").await;
    match inspector.delete_queue("busy", true).await {
        Err(Error::FailedPrecondition(text)) => {
            assert_eq!(text, "cannot remove queue with active tasks")
        }
        other => panic!("expected FailedPrecondition, got {other:?}"),
    }
    assert_eq!(queue_keys(&mut conn, "busy").await, before);
    assert_eq!(inspector.queues().await.unwrap(), ["busy"]);
}

/// §9.5 forced delete (with the §14.11 deviation): hundreds of tasks in
/// every inactive state — more than one 100-id chunk — are deleted with
/// their hashes, as are completed tasks, groups, aggregation sets and the
/// stale lease, and (issue 12 R14, unlike Go) the counters and the paused
/// flag; another queue is untouched.
#[tokio::test]
async fn force_delete_removes_every_task_key() {
    let db = support::redis();
    let Clocked {
        client,
        inspector,
        mut conn,
        ..
    } = clocked_on(db.clone(), now()).await;
    let q = "doomed";
    for i in 0..250 {
        seed::seeded(&mut conn, q, &format!("p{i}"), "pending").await;
    }
    for i in 0..150 {
        seed::seeded(&mut conn, q, &format!("a{i}"), "archived").await;
    }
    for i in 0..3 {
        seed::seeded(&mut conn, q, &format!("r{i}"), "retry").await;
        seed::seeded(&mut conn, q, &format!("c{i}"), "completed").await;
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new()
                    .queue(q)
                    .process_in(Duration::from_secs(60)),
            )
            .await
            .unwrap();
        client
            .enqueue(
                &Task::new("t", b"x".to_vec()),
                EnqueueOptions::new().queue(q).group("g"),
            )
            .await
            .unwrap();
    }
    // An aggregation set in flight: its task hash plus the set and its registry entry.
    let set_key = keys::aggregation_set_key(q, "g", "set-1");
    let _: () = conn
        .hset(keys::task_key(q, "in-set"), "state", "aggregating")
        .await
        .unwrap();
    let _: () = conn.zadd(&set_key, "in-set", 1).await.unwrap();
    let _: () = conn
        .zadd(keys::all_aggregation_sets_key(q), &set_key, 2)
        .await
        .unwrap();
    let _: () = conn.zadd(keys::lease_key(q), "gone", 1).await.unwrap();
    let _: () = conn.set(keys::processed_total_key(q), 9).await.unwrap();
    let _: () = conn.set(keys::failed_total_key(q), 4).await.unwrap();
    let _: () = conn
        .set(keys::processed_key(q, now().date_naive()), 2)
        .await
        .unwrap();
    inspector.pause_queue(q).await.unwrap();
    seed::seeded(&mut conn, "other", "keep", "pending").await;

    inspector.delete_queue(q, true).await.unwrap();
    // Counters and the paused flag go too (issue 12 R14; Go keeps them).
    assert_eq!(queue_keys(&mut conn, q).await, Vec::<String>::new());
    assert_eq!(inspector.queues().await.unwrap(), ["other"]);
    assert_eq!(
        queue_keys(&mut conn, "other").await,
        ["asynq:{other}:pending", "asynq:{other}:t:keep"]
    );
}
