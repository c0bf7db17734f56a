//! The worker-side broker operations on a real Redis: each moves a task
//! exactly as Go's script does (wire spec §6.4–6.15; S12, S15, S16, S24).

use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::broker::proto::WireTask;
use asynqdeck::broker::{Broker, DoneOutcome};
use asynqdeck::{Client, EnqueueOptions, Task};
use chrono::Utc;
use redis::AsyncCommands;

use crate::support::{self, TestDb};

async fn setup() -> (TestDb, Broker, Client, crate::support::redis::RawConn) {
    setup_on(support::redis()).await
}

async fn setup_on(db: TestDb) -> (TestDb, Broker, Client, crate::support::redis::RawConn) {
    let broker = Broker::connect(&db.url()).await.unwrap();
    let client = Client::from_broker(broker.clone());
    let conn = db.raw().await;
    (db, broker, client, conn)
}

fn lease_until() -> chrono::DateTime<Utc> {
    Utc::now() + chrono::Duration::seconds(30)
}

async fn lease_one(broker: &Broker, q: &str) -> WireTask {
    let mut got = broker.dequeue(q, 1, lease_until()).await.unwrap();
    assert_eq!(got.len(), 1);
    got.remove(0).unwrap()
}

async fn state(conn: &mut crate::support::redis::RawConn, q: &str, id: &str) -> Option<String> {
    conn.hget(keys::task_key(q, id), "state").await.unwrap()
}

fn today() -> chrono::NaiveDate {
    Utc::now().date_naive()
}

/// Dequeue takes the oldest first (right end), moves it to active with a
/// lease in unix seconds, drops pending_since, and takes nothing from a
/// paused queue (wire spec §6.5).
#[tokio::test]
async fn dequeue_leases_oldest_first_and_respects_pause() {
    let (_db, broker, client, mut conn) = setup().await;
    let a = client
        .enqueue(&Task::new("t", b"a".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let b = client
        .enqueue(&Task::new("t", b"b".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let until = lease_until();
    let got = broker.dequeue("default", 10, until).await.unwrap();
    let ids: Vec<String> = got.into_iter().map(|t| t.unwrap().msg.id).collect();
    assert_eq!(ids, vec![a.id.clone(), b.id.clone()]);
    let active: Vec<String> = conn
        .lrange(keys::active_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(active, vec![b.id.clone(), a.id.clone()]);
    let score: i64 = conn
        .zscore(keys::lease_key("default"), &a.id)
        .await
        .unwrap();
    assert_eq!(score, until.timestamp());
    assert_eq!(
        state(&mut conn, "default", &a.id).await.as_deref(),
        Some("active")
    );
    let since: Option<String> = conn
        .hget(keys::task_key("default", &a.id), "pending_since")
        .await
        .unwrap();
    assert_eq!(since, None);

    client
        .enqueue(&Task::new("t", b"c".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let _: () = conn
        .set(keys::paused_key("default"), Utc::now().timestamp())
        .await
        .unwrap();
    assert!(
        broker
            .dequeue("default", 10, lease_until())
            .await
            .unwrap()
            .is_empty()
    );
}

/// Done removes the task everywhere, counts processed (daily key with a
/// ~90-day expiry, and the total) and releases the task's own lock.
#[tokio::test]
async fn done_deletes_counts_and_releases_lock() {
    let (_db, broker, client, mut conn) = setup().await;
    let t = Task::new("t", b"u".to_vec());
    client
        .enqueue(&t, EnqueueOptions::new().unique(Duration::from_secs(600)))
        .await
        .unwrap();
    client
        .enqueue(&Task::new("t", b"v".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let leased: Vec<WireTask> = broker
        .dequeue("default", 5, lease_until())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let msgs: Vec<_> = leased.iter().map(|w| &w.msg).collect();
    let outcomes = broker.done("default", &msgs).await.unwrap();
    assert_eq!(outcomes, vec![DoneOutcome::Done, DoneOutcome::Done]);
    let again = broker.done("default", &msgs[..1]).await.unwrap();
    assert_eq!(again, vec![DoneOutcome::NotActive]);
    let daily = keys::processed_key("default", today());
    let n: i64 = conn.get(&daily).await.unwrap();
    assert_eq!(n, 2);
    let ttl: i64 = conn.ttl(&daily).await.unwrap();
    assert!(ttl > 7_776_000 - 5 && ttl <= 7_776_000, "ttl {ttl}");
    let total: i64 = conn
        .get(keys::processed_total_key("default"))
        .await
        .unwrap();
    assert_eq!(total, 2);
    let lock: Option<String> = conn
        .get(keys::unique_key("default", "t", Some(b"u")))
        .await
        .unwrap();
    assert_eq!(lock, None);
    let keys_left: Vec<String> = conn.keys("asynq:{default}:t:*").await.unwrap();
    assert!(keys_left.is_empty());
}

/// Retry with is_failure: Retried +1, LastErr, LastFailedAt, score = retry
/// time, failure counted; without: Retried and counters unchanged (S24).
#[tokio::test]
async fn retry_counts_only_failures() {
    let (_db, broker, client, mut conn) = setup().await;
    client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    let at = Utc::now() + chrono::Duration::seconds(100);
    broker.retry(&w, at, "boom", true).await.unwrap();
    let info = asynqdeck::Inspector::from_broker(broker.clone())
        .get_task_info("default", &w.msg.id)
        .await
        .unwrap();
    assert_eq!((info.retried, info.last_err.as_str()), (1, "boom"));
    assert_eq!(info.next_process_at.unwrap().timestamp(), at.timestamp());
    assert!(
        (info.last_failed_at.unwrap() - Utc::now())
            .num_seconds()
            .abs()
            <= 1
    );
    let failed: i64 = conn
        .get(keys::failed_key("default", today()))
        .await
        .unwrap();
    let total_failed: i64 = conn.get(keys::failed_total_key("default")).await.unwrap();
    assert_eq!((failed, total_failed), (1, 1));

    // Not a failure: forwarded back, leased again, retried without counting.
    let _: () = conn
        .zadd(keys::retry_key("default"), &w.msg.id, 0)
        .await
        .unwrap();
    assert_eq!(broker.forward_if_ready("default").await.unwrap(), 1);
    let w2 = lease_one(&broker, "default").await;
    assert_eq!(w2.msg.retried, 1);
    broker.retry(&w2, at, "no resource", false).await.unwrap();
    let m = broker_msg(&mut conn, &w.msg.id).await;
    assert_eq!(
        (m.msg.retried, m.msg.error_msg.as_str()),
        (1, "no resource")
    );
    let failed: i64 = conn
        .get(keys::failed_key("default", today()))
        .await
        .unwrap();
    let processed: i64 = conn
        .get(keys::processed_key("default", today()))
        .await
        .unwrap();
    assert_eq!((failed, processed), (1, 1), "S24: counters unchanged");
}

async fn broker_msg(conn: &mut crate::support::redis::RawConn, id: &str) -> WireTask {
    let b: Vec<u8> = conn
        .hget(keys::task_key("default", id), "msg")
        .await
        .unwrap();
    WireTask::decode(&b).unwrap()
}

/// Archive writes LastErr without touching Retried, counts a failure, and
/// keeps unknown protobuf fields of a newer peer byte for byte (S15).
#[tokio::test]
async fn archive_keeps_retried_and_unknown_fields() {
    let (_db, broker, client, mut conn) = setup().await;
    let t = client
        .enqueue(
            &Task::new("t", b"1".to_vec()),
            EnqueueOptions::new().max_retry(0),
        )
        .await
        .unwrap();
    // Append an unknown field 16 to the stored message, as a newer Go would.
    let key = keys::task_key("default", &t.id);
    let mut bytes: Vec<u8> = conn.hget(&key, "msg").await.unwrap();
    bytes.extend_from_slice(&[0x82, 0x01, 3, b'n', b'e', b'w']);
    let _: () = conn.hset(&key, "msg", bytes).await.unwrap();
    let w = lease_one(&broker, "default").await;
    broker
        .archive(&w, "order invalid: skip retry for the task")
        .await
        .unwrap();
    let m = broker_msg(&mut conn, &t.id).await;
    assert_eq!(m.msg.retried, 0);
    assert_eq!(m.msg.error_msg, "order invalid: skip retry for the task");
    assert_eq!(m.unknown, vec![0x82, 0x01, 3, b'n', b'e', b'w']);
    assert_eq!(
        state(&mut conn, "default", &t.id).await.as_deref(),
        Some("archived")
    );
    let failed: i64 = conn.get(keys::failed_total_key("default")).await.unwrap();
    assert_eq!(failed, 1);
}

/// S16: the processor's archive keeps at most 10,000 tasks, deletes the
/// trimmed tasks' hashes, and drops entries older than 90 days, in one step.
#[tokio::test]
async fn archive_trims_to_10k_and_90_days_and_deletes_hashes() {
    let (_db, broker, client, mut conn) = setup().await;
    let now = Utc::now().timestamp();
    let old = now - 91 * 24 * 3600;
    // 10,000 archived tasks: 50 older than 90 days, the rest recent.
    let seed = redis::Script::new(
        r#"for i = 1, tonumber(ARGV[1]) do
             local id = "seed-" .. i
             local score = ARGV[3]
             if i <= tonumber(ARGV[2]) then score = ARGV[4] end
             redis.call("ZADD", KEYS[1], tonumber(score) + i, id)
             redis.call("HSET", KEYS[2] .. id, "msg", "x", "state", "archived")
           end"#,
    );
    let _: () = seed
        .key(keys::archived_key("default"))
        .key(keys::task_key_prefix("default"))
        .arg(10_000)
        .arg(50)
        .arg(now - 86_400 - 20_000)
        .arg(old)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    broker.archive(&w, "boom").await.unwrap();
    let card: usize = conn.zcard(keys::archived_key("default")).await.unwrap();
    assert_eq!(
        card, 9_951,
        "50 stale dropped; 9,950 recent + the new one remain"
    );
    for gone in ["seed-1", "seed-50"] {
        let exists: bool = conn.exists(keys::task_key("default", gone)).await.unwrap();
        assert!(!exists, "{gone}'s hash deleted");
    }
    // Fill to exactly 10,000 then archive one more: the oldest recent goes.
    let _: () = seed
        .key(keys::archived_key("default"))
        .key(keys::task_key_prefix("default"))
        .arg(49)
        .arg(0)
        .arg(now - 86_400 - 40_000)
        .arg(old)
        .invoke_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        conn.zcard::<_, usize>(keys::archived_key("default"))
            .await
            .unwrap(),
        10_000
    );
    let oldest: Vec<String> = conn
        .zrange(keys::archived_key("default"), 0, 0)
        .await
        .unwrap();
    client
        .enqueue(&Task::new("t", b"2".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    broker.archive(&w, "boom").await.unwrap();
    assert_eq!(
        conn.zcard::<_, usize>(keys::archived_key("default"))
            .await
            .unwrap(),
        10_000
    );
    let still: Option<f64> = conn
        .zscore(keys::archived_key("default"), &oldest[0])
        .await
        .unwrap();
    assert_eq!(still, None);
    let exists: bool = conn
        .exists(keys::task_key("default", &oldest[0]))
        .await
        .unwrap();
    assert!(!exists, "the oldest task's hash is deleted");
    let newest: Option<f64> = conn
        .zscore(keys::archived_key("default"), &w.msg.id)
        .await
        .unwrap();
    assert!(newest.is_some());
}

/// The all-time counters wrap at MaxInt64 as Go's do (wire spec §16 check 23).
#[tokio::test]
async fn counters_wrap_at_max_int64() {
    let (_db, broker, client, mut conn) = setup().await;
    let _: () = conn
        .set(keys::processed_total_key("default"), i64::MAX)
        .await
        .unwrap();
    client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    broker.done("default", &[&w.msg]).await.unwrap();
    let p: i64 = conn
        .get(keys::processed_total_key("default"))
        .await
        .unwrap();
    assert_eq!(p, 1);
    let _: () = conn
        .set(keys::processed_total_key("default"), i64::MAX)
        .await
        .unwrap();
    let _: () = conn
        .set(keys::failed_total_key("default"), 77)
        .await
        .unwrap();
    client
        .enqueue(&Task::new("t", b"2".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    broker.retry(&w, Utc::now(), "e", true).await.unwrap();
    let p: i64 = conn
        .get(keys::processed_total_key("default"))
        .await
        .unwrap();
    let f: i64 = conn.get(keys::failed_total_key("default")).await.unwrap();
    assert_eq!((p, f), (1, 1));

    // A batch counts as that many single Dones, also next to MaxInt64
    // where Go's Lua compares doubles: from MaxInt64 - 2 (equal to
    // MaxInt64 as a double) the first Done already wraps, so five give 5.
    let client_ref = &client;
    let finish = |q: String, n: usize, one_by_one: bool| {
        let broker = broker.clone();
        async move {
            let msgs = lease_batch(&broker, client_ref, &q, n).await;
            if one_by_one {
                for m in &msgs {
                    broker.done(&q, &[m]).await.unwrap();
                }
            } else {
                let refs: Vec<_> = msgs.iter().collect();
                broker.done(&q, &refs).await.unwrap();
            }
        }
    };
    for (i, start, end) in [
        (0, i64::MAX - 2, Some(5)),
        (1, i64::MAX - 5, None),
        (2, i64::MAX - 600, None),
        (3, i64::MAX - 5000, Some(i64::MAX - 4995)),
        (4, i64::MAX, Some(5)),
    ] {
        let mut got = Vec::new();
        for one_by_one in [false, true] {
            let q = format!("wrap-{i}-{one_by_one}");
            let _: () = conn
                .set(keys::processed_total_key(&q), start)
                .await
                .unwrap();
            finish(q.clone(), 5, one_by_one).await;
            let p: i64 = conn.get(keys::processed_total_key(&q)).await.unwrap();
            got.push(p);
        }
        assert_eq!(got[0], got[1], "from {start}: batch vs one by one");
        if let Some(end) = end {
            assert_eq!(got[0], end, "from {start}");
        }
    }
}

/// S12: the forwarder moves due retry and scheduled tasks to pending with
/// pending_since, leaves future ones, and routes grouped tasks to their group.
#[tokio::test]
async fn forward_moves_due_tasks_only() {
    let (_db, broker, client, mut conn) = setup().await;
    let due = client
        .enqueue(
            &Task::new("t", b"1".to_vec()),
            EnqueueOptions::new().process_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let later = client
        .enqueue(
            &Task::new("t", b"2".to_vec()),
            EnqueueOptions::new().process_in(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let _: () = conn
        .zadd(
            keys::scheduled_key("default"),
            &due.id,
            Utc::now().timestamp() - 1,
        )
        .await
        .unwrap();
    assert_eq!(broker.forward_if_ready("default").await.unwrap(), 1);
    assert_eq!(
        state(&mut conn, "default", &due.id).await.as_deref(),
        Some("pending")
    );
    assert_eq!(
        state(&mut conn, "default", &later.id).await.as_deref(),
        Some("scheduled")
    );
    let since: String = conn
        .hget(keys::task_key("default", &due.id), "pending_since")
        .await
        .unwrap();
    assert_eq!(since.len(), 19);
    // 250 due retries move in batches of 100 in one call.
    for i in 0..250 {
        let id = format!("r{i}");
        let _: () = conn
            .hset_multiple(
                keys::task_key("default", &id),
                &[("msg", "x"), ("state", "retry")],
            )
            .await
            .unwrap();
        let _: () = conn.zadd(keys::retry_key("default"), &id, 1).await.unwrap();
    }
    let _: () = conn
        .hset(keys::task_key("default", "r7"), "group", "g")
        .await
        .unwrap();
    assert_eq!(broker.forward_if_ready("default").await.unwrap(), 250);
    assert_eq!(
        conn.llen::<_, usize>(keys::pending_key("default"))
            .await
            .unwrap(),
        250
    );
    assert_eq!(
        state(&mut conn, "default", "r7").await.as_deref(),
        Some("aggregating")
    );
    let groups: Vec<String> = conn
        .smembers(keys::all_groups_key("default"))
        .await
        .unwrap();
    assert_eq!(groups, vec!["g".to_string()]);
}

/// Requeue puts the task at the consuming end of pending without counting a
/// retry or setting pending_since (wire spec §6.8, §16 check 16).
#[tokio::test]
async fn requeue_returns_task_next_in_line() {
    let (_db, broker, client, mut conn) = setup().await;
    let a = client
        .enqueue(&Task::new("t", b"a".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    client
        .enqueue(&Task::new("t", b"b".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    broker.requeue(&w.msg).await.unwrap();
    let next: Vec<String> = conn
        .lrange(keys::pending_key("default"), -1, -1)
        .await
        .unwrap();
    assert_eq!(next, vec![a.id.clone()]);
    assert_eq!(
        state(&mut conn, "default", &a.id).await.as_deref(),
        Some("pending")
    );
    assert!(matches!(
        broker.requeue(&w.msg).await,
        Err(asynqdeck::Error::TaskNotFound { .. })
    ));
}

/// Retention: completed with score completed_at + retention, the lock
/// released, then the janitor deletes it once expired (wire spec §6.7, §6.14).
#[tokio::test]
async fn complete_then_janitor_deletes_expired() {
    let (_db, broker, client, mut conn) = setup().await;
    let t = client
        .enqueue(
            &Task::new("t", b"1".to_vec()),
            EnqueueOptions::new()
                .retention(Duration::from_secs(3600))
                .unique(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    broker.mark_as_complete(&w).await.unwrap();
    let m = broker_msg(&mut conn, &t.id).await;
    let score: i64 = conn
        .zscore(keys::completed_key("default"), &t.id)
        .await
        .unwrap();
    assert_eq!(score, m.msg.completed_at + 3600);
    let lock: Option<String> = conn
        .get(keys::unique_key("default", "t", Some(b"1")))
        .await
        .unwrap();
    assert_eq!(lock, None);
    assert_eq!(
        broker
            .delete_expired_completed("default", 100)
            .await
            .unwrap(),
        0
    );
    let _: () = conn
        .zadd(keys::completed_key("default"), &t.id, 1)
        .await
        .unwrap();
    assert_eq!(
        broker
            .delete_expired_completed("default", 100)
            .await
            .unwrap(),
        1
    );
    let exists: bool = conn.exists(keys::task_key("default", &t.id)).await.unwrap();
    assert!(!exists);
}

/// A dequeued task whose msg does not decode comes back as an error with its
/// id, and `archive_undecodable` moves it from active/lease to the archive
/// with its msg untouched, so it neither runs nor holds a lease forever.
#[tokio::test]
async fn undecodable_task_is_archived_as_is() {
    let (_db, broker, _client, mut conn) = setup().await;
    let _: () = conn.sadd(keys::ALL_QUEUES, "default").await.unwrap();
    let _: () = conn
        .hset_multiple(
            keys::task_key("default", "bad"),
            &[("msg", "garbage"), ("state", "pending")],
        )
        .await
        .unwrap();
    let _: () = conn
        .lpush(keys::pending_key("default"), "bad")
        .await
        .unwrap();
    let mut got = broker.dequeue("default", 5, lease_until()).await.unwrap();
    let (id, err) = got.remove(0).unwrap_err();
    assert_eq!(id, "bad");
    assert!(matches!(err, asynqdeck::Error::Corrupt { .. }), "{err}");
    assert!(broker.archive_undecodable("default", "bad").await.unwrap());
    let active: Vec<String> = conn
        .lrange(keys::active_key("default"), 0, -1)
        .await
        .unwrap();
    assert!(active.is_empty());
    let lease: Option<f64> = conn
        .zscore(keys::lease_key("default"), "bad")
        .await
        .unwrap();
    assert_eq!(lease, None);
    let archived: Option<f64> = conn
        .zscore(keys::archived_key("default"), "bad")
        .await
        .unwrap();
    assert!(archived.is_some());
    let msg: Vec<u8> = conn
        .hget(keys::task_key("default", "bad"), "msg")
        .await
        .unwrap();
    assert_eq!(msg, b"garbage");
    assert!(
        !broker.archive_undecodable("default", "bad").await.unwrap(),
        "second call: nothing to move"
    );
}

/// Expired leases are listed for the recoverer; extension only touches
/// tasks still leased (ZADD XX).
#[tokio::test]
async fn lease_expiry_and_extension() {
    let (_db, broker, client, mut conn) = setup().await;
    client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let w = lease_one(&broker, "default").await;
    let cutoff = Utc::now() - chrono::Duration::seconds(30);
    assert!(
        broker
            .list_lease_expired("default", cutoff)
            .await
            .unwrap()
            .is_empty()
    );
    let _: () = conn
        .zadd(
            keys::lease_key("default"),
            &w.msg.id,
            cutoff.timestamp() - 100,
        )
        .await
        .unwrap();
    let expired = broker.list_lease_expired("default", cutoff).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].as_ref().unwrap().msg.id, w.msg.id);
    let until = broker
        .extend_lease("default", &[&w.msg.id, "not-leased"])
        .await
        .unwrap();
    let score: i64 = conn
        .zscore(keys::lease_key("default"), &w.msg.id)
        .await
        .unwrap();
    assert_eq!(score, until.timestamp());
    let none: Option<i64> = conn
        .zscore(keys::lease_key("default"), "not-leased")
        .await
        .unwrap();
    assert_eq!(none, None);
}

/// Enqueues `n` tasks with ids `<prefix>000`, `<prefix>001`, ... in order.
async fn enqueue_ids(client: &Client, prefix: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("{prefix}{i:03}");
        client
            .enqueue(
                &Task::new("t", vec![i as u8]),
                EnqueueOptions::new().task_id(&id),
            )
            .await
            .unwrap();
        ids.push(id);
    }
    ids
}

/// A batched dequeue of 150 tasks (two chunks of the list moves in
/// lib/lease_tasks) leaves Redis exactly as 150 single dequeues (Go's
/// RPOPLPUSH one at a time) leave it: same active list order, same leases,
/// same pending rest, tasks returned oldest first (wire spec §6.5, COMPATIBILITY W1).
#[tokio::test]
async fn batched_dequeue_leaves_redis_as_single_dequeues_do() {
    let (_db, broker, client, mut conn) = setup().await;
    let batch_ids = enqueue_ids(&client, "b", 160).await;
    let until = lease_until();
    let got = broker.dequeue("default", 150, until).await.unwrap();
    let got: Vec<String> = got.into_iter().map(|t| t.unwrap().msg.id).collect();
    assert_eq!(got, batch_ids[..150].to_vec());

    let single_q = "single";
    let mut single_ids = Vec::new();
    for i in 0..160 {
        let id = format!("s{i:03}");
        client
            .enqueue(
                &Task::new("t", vec![i as u8]),
                EnqueueOptions::new().task_id(&id).queue(single_q),
            )
            .await
            .unwrap();
        single_ids.push(id);
    }
    for expected in &single_ids[..150] {
        let got = broker.dequeue(single_q, 1, until).await.unwrap();
        assert_eq!(&got[0].as_ref().unwrap().msg.id, expected);
    }
    // Same shapes once the id prefix is set aside.
    let strip =
        |v: Vec<String>| -> Vec<String> { v.into_iter().map(|s| s[1..].to_string()).collect() };
    let active_b: Vec<String> = conn
        .lrange(keys::active_key("default"), 0, -1)
        .await
        .unwrap();
    let active_s: Vec<String> = conn
        .lrange(keys::active_key(single_q), 0, -1)
        .await
        .unwrap();
    assert_eq!(active_b.len(), 150);
    assert_eq!(active_b.first().map(String::as_str), Some("b149"));
    assert_eq!(active_b.last().map(String::as_str), Some("b000"));
    assert_eq!(strip(active_b), strip(active_s));
    let pending_b: Vec<String> = conn
        .lrange(keys::pending_key("default"), 0, -1)
        .await
        .unwrap();
    let pending_s: Vec<String> = conn
        .lrange(keys::pending_key(single_q), 0, -1)
        .await
        .unwrap();
    assert_eq!(
        pending_b,
        [
            "b159", "b158", "b157", "b156", "b155", "b154", "b153", "b152", "b151", "b150"
        ]
    );
    assert_eq!(strip(pending_b), strip(pending_s));
    let leases: Vec<(String, i64)> = conn
        .zrange_withscores(keys::lease_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(leases.len(), 150);
    assert!(leases.iter().all(|(_, s)| *s == until.timestamp()));
    for id in ["b000", "b075", "b149"] {
        assert_eq!(
            state(&mut conn, "default", id).await.as_deref(),
            Some("active")
        );
        let since: Option<String> = conn
            .hget(keys::task_key("default", id), "pending_since")
            .await
            .unwrap();
        assert_eq!(since, None);
    }
    assert_eq!(
        state(&mut conn, "default", "b150").await.as_deref(),
        Some("pending")
    );
}

/// done_and_dequeue finishes first, then leases: the finished tasks are
/// gone and counted, the next ones are leased in order; a paused queue
/// still finishes but leases nothing; max 0 only finishes (wire spec §6.5,
/// §6.6).
#[tokio::test]
async fn done_and_dequeue_finishes_then_leases() {
    let (_db, broker, client, mut conn) = setup().await;
    let ids = enqueue_ids(&client, "t", 6).await;
    let first = broker.dequeue("default", 2, lease_until()).await.unwrap();
    let first: Vec<WireTask> = first.into_iter().map(|t| t.unwrap()).collect();
    let msgs: Vec<_> = first.iter().map(|t| &t.msg).collect();
    let until = lease_until();
    let (outcomes, leased) = broker
        .done_and_dequeue("default", &msgs, 3, until)
        .await
        .unwrap();
    assert_eq!(outcomes, vec![DoneOutcome::Done, DoneOutcome::Done]);
    let leased: Vec<String> = leased.into_iter().map(|t| t.unwrap().msg.id).collect();
    assert_eq!(leased, ids[2..5].to_vec());
    let active: Vec<String> = conn
        .lrange(keys::active_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(active, ["t004", "t003", "t002"]);
    for id in ["t000", "t001"] {
        let exists: bool = conn.exists(keys::task_key("default", id)).await.unwrap();
        assert!(!exists, "{id} hash deleted");
    }
    let processed: i64 = conn
        .get(keys::processed_key("default", today()))
        .await
        .unwrap();
    let total: i64 = conn
        .get(keys::processed_total_key("default"))
        .await
        .unwrap();
    assert_eq!((processed, total), (2, 2));

    // Paused: t002 finishes, nothing is leased.
    let t2 = WireTask::decode(
        &conn
            .hget::<_, _, Vec<u8>>(keys::task_key("default", "t002"), "msg")
            .await
            .unwrap(),
    )
    .unwrap();
    let _: () = conn.set(keys::paused_key("default"), 1).await.unwrap();
    let (outcomes, leased) = broker
        .done_and_dequeue("default", &[&t2.msg], 5, until)
        .await
        .unwrap();
    assert_eq!(outcomes, vec![DoneOutcome::Done]);
    assert!(leased.is_empty());
    let _: () = conn.del(keys::paused_key("default")).await.unwrap();

    // Max 0: t002 again is no longer active; nothing leased.
    let (outcomes, leased) = broker
        .done_and_dequeue("default", &[&t2.msg], 0, until)
        .await
        .unwrap();
    assert_eq!(outcomes, vec![DoneOutcome::NotActive]);
    assert!(leased.is_empty());
    let pending: Vec<String> = conn
        .lrange(keys::pending_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(pending, ["t005"]);
    let active: Vec<String> = conn
        .lrange(keys::active_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(active, ["t004", "t003"]);
    let total: i64 = conn
        .get(keys::processed_total_key("default"))
        .await
        .unwrap();
    assert_eq!(total, 3);
}

/// An id in pending whose hash has no msg leaves pending without being put
/// in active or leased; the tasks around it are leased in order
/// (COMPATIBILITY W2).
#[tokio::test]
async fn dequeue_drops_an_id_without_msg() {
    let (_db, broker, client, mut conn) = setup().await;
    enqueue_ids(&client, "t", 1).await;
    let _: () = conn
        .lpush(keys::pending_key("default"), "ghost")
        .await
        .unwrap();
    let _: () = conn
        .hset(keys::task_key("default", "ghost"), "state", "pending")
        .await
        .unwrap();
    enqueue_ids(&client, "u", 1).await;
    let got = broker.dequeue("default", 3, lease_until()).await.unwrap();
    let got: Vec<String> = got.into_iter().map(|t| t.unwrap().msg.id).collect();
    assert_eq!(got, ["t000", "u000"]);
    let active: Vec<String> = conn
        .lrange(keys::active_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(active, ["u000", "t000"]);
    let pending: i64 = conn.llen(keys::pending_key("default")).await.unwrap();
    assert_eq!(pending, 0);
    let lease: Option<i64> = conn
        .zscore(keys::lease_key("default"), "ghost")
        .await
        .unwrap();
    assert_eq!(lease, None);
    let ghost_state: Option<String> = state(&mut conn, "default", "ghost").await;
    assert_eq!(
        ghost_state.as_deref(),
        Some("pending"),
        "hash left as it was"
    );
}

/// Builds, in queue `q`, six leased tasks and returns their messages in this
/// order: done, done with its unique lock, lock taken over by another id,
/// not in active, no lease, no hash. `padding` extra ids are put at the
/// head of active and `lease_padding` in the lease zset first, to choose
/// lib/finish_tasks' path.
async fn finish_scenario(
    broker: &Broker,
    client: &Client,
    conn: &mut crate::support::redis::RawConn,
    q: &str,
    padding: usize,
    lease_padding: usize,
) -> Vec<asynqdeck::broker::proto::TaskMessage> {
    let until = lease_until();
    for i in 0..padding {
        let _: () = conn
            .lpush(keys::active_key(q), format!("pad{i}"))
            .await
            .unwrap();
    }
    for i in 0..lease_padding {
        let _: () = conn
            .zadd(keys::lease_key(q), format!("pad{i}"), until.timestamp())
            .await
            .unwrap();
    }
    let mut ids = Vec::new();
    for (i, unique) in [false, true, true, false, false, false]
        .into_iter()
        .enumerate()
    {
        let mut opts = EnqueueOptions::new().queue(q).task_id(format!("x{i}"));
        if unique {
            opts = opts.unique(Duration::from_secs(600));
        }
        client
            .enqueue(&Task::new("t", format!("p{i}").into_bytes()), opts)
            .await
            .unwrap();
        ids.push(format!("x{i}"));
    }
    let leased: Vec<WireTask> = broker
        .dequeue(q, 6, until)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(leased.len(), 6);
    // x2's lock now belongs to someone else; x3 left active; x4 lost its
    // lease; x5 lost its hash.
    let _: () = conn.set(&leased[2].msg.unique_key, "other").await.unwrap();
    let _: () = conn.lrem(keys::active_key(q), 0, "x3").await.unwrap();
    let _: () = conn.zrem(keys::lease_key(q), "x4").await.unwrap();
    let _: () = conn.del(keys::task_key(q, "x5")).await.unwrap();
    leased.into_iter().map(|w| w.msg).collect()
}

/// The per-task LREM/ZREM/DEL path of lib/finish_tasks (taken whenever
/// active or lease hold anything besides the batch) gives every outcome Go's
/// Done would (wire spec §6.6): codes, what stays in active (order kept) and
/// lease, hashes, locks released only when held, counters for finished
/// tasks only — with short and long lists.
#[tokio::test]
async fn done_outcomes_agree_on_both_finishing_paths() {
    let (_db, broker, client, mut conn) = setup().await;
    for (q, padding, lease_padding) in [
        ("small", 3, 3),
        ("long", 300, 300),
        ("leases", 3, 300),
        ("busy", 40, 40),
    ] {
        let msgs = finish_scenario(&broker, &client, &mut conn, q, padding, lease_padding).await;
        let refs: Vec<_> = msgs.iter().collect();
        let outcomes = broker.done(q, &refs).await.unwrap();
        assert_eq!(
            outcomes,
            vec![
                DoneOutcome::Done,
                DoneOutcome::Done,
                DoneOutcome::Done,
                DoneOutcome::NotActive,
                DoneOutcome::NoLease,
                DoneOutcome::NoHash,
            ],
            "queue {q}"
        );
        let active: Vec<String> = conn.lrange(keys::active_key(q), 0, -1).await.unwrap();
        let expected: Vec<String> = (0..padding).rev().map(|i| format!("pad{i}")).collect();
        assert_eq!(
            active, expected,
            "queue {q}: only the padding stays, in order"
        );
        // x3 stopped at its first step (not in active), so its lease stays.
        let leases: Vec<String> = conn.zrange(keys::lease_key(q), 0, -1).await.unwrap();
        assert_eq!(leases.len(), lease_padding + 1, "queue {q}");
        assert!(leases.contains(&"x3".to_string()), "queue {q}");
        assert!(
            leases.iter().all(|m| m.starts_with("pad") || m == "x3"),
            "queue {q}"
        );
        // x3 (not active) and x4 (no lease) keep their hashes, as in Go.
        let mut hashes: Vec<String> = conn.keys(format!("asynq:{{{q}}}:t:*")).await.unwrap();
        hashes.sort();
        assert_eq!(
            hashes,
            [keys::task_key(q, "x3"), keys::task_key(q, "x4")],
            "queue {q}"
        );
        let lock1: Option<String> = conn.get(&msgs[1].unique_key).await.unwrap();
        let lock2: Option<String> = conn.get(&msgs[2].unique_key).await.unwrap();
        assert_eq!(
            (lock1, lock2.as_deref()),
            (None, Some("other")),
            "queue {q}"
        );
        let daily: i64 = conn.get(keys::processed_key(q, today())).await.unwrap();
        let total: i64 = conn.get(keys::processed_total_key(q)).await.unwrap();
        assert_eq!((daily, total), (3, 3), "queue {q}");
    }
}

/// The per-task path with every remaining hash present deletes them in one
/// DEL (lib/finish_tasks' finish_hashes): outcomes, hashes, locks and
/// counters are still those of Go's Done task by task, for tasks at any
/// position after one that stopped early.
#[tokio::test]
async fn per_task_path_with_all_hashes_present_ends_as_go_done() {
    let (_db, broker, client, mut conn) = setup().await;
    let q = "allhashes";
    let msgs = finish_scenario(&broker, &client, &mut conn, q, 3, 3).await;
    // x5 gets a hash back: every task still going after LREM and ZREM has one.
    let _: () = conn
        .hset(keys::task_key(q, "x5"), "state", "active")
        .await
        .unwrap();
    let refs: Vec<_> = msgs.iter().collect();
    let outcomes = broker.done(q, &refs).await.unwrap();
    assert_eq!(
        outcomes,
        vec![
            DoneOutcome::Done,
            DoneOutcome::Done,
            DoneOutcome::Done,
            DoneOutcome::NotActive,
            DoneOutcome::NoLease,
            DoneOutcome::Done,
        ]
    );
    let active: Vec<String> = conn.lrange(keys::active_key(q), 0, -1).await.unwrap();
    assert_eq!(active, ["pad2", "pad1", "pad0"]);
    let mut leases: Vec<String> = conn.zrange(keys::lease_key(q), 0, -1).await.unwrap();
    leases.sort();
    assert_eq!(leases, ["pad0", "pad1", "pad2", "x3"]);
    let mut hashes: Vec<String> = conn.keys(format!("asynq:{{{q}}}:t:*")).await.unwrap();
    hashes.sort();
    assert_eq!(hashes, [keys::task_key(q, "x3"), keys::task_key(q, "x4")]);
    let lock1: Option<String> = conn.get(&msgs[1].unique_key).await.unwrap();
    let lock2: Option<String> = conn.get(&msgs[2].unique_key).await.unwrap();
    assert_eq!((lock1, lock2.as_deref()), (None, Some("other")));
    let daily: i64 = conn.get(keys::processed_key(q, today())).await.unwrap();
    let total: i64 = conn.get(keys::processed_total_key(q)).await.unwrap();
    assert_eq!((daily, total), (4, 4));
}

/// Leases `n` tasks of `q` (ids w0.., the first two unique) so that active
/// and lease hold exactly them.
async fn lease_batch(
    broker: &Broker,
    client: &Client,
    q: &str,
    n: usize,
) -> Vec<asynqdeck::broker::proto::TaskMessage> {
    for i in 0..n {
        let mut opts = EnqueueOptions::new().queue(q).task_id(format!("w{i}"));
        if i < 2 {
            opts = opts.unique(Duration::from_secs(600));
        }
        client
            .enqueue(&Task::new("t", vec![b'p'; i]), opts)
            .await
            .unwrap();
    }
    let leased = broker.dequeue(q, n, lease_until()).await.unwrap();
    assert_eq!(leased.len(), n);
    leased.into_iter().map(|r| r.unwrap().msg).collect()
}

/// The whole-batch path of lib/finish_tasks (active and lease hold exactly
/// the finishing tasks: one server with its whole batch done) ends exactly
/// as Go's Done one task at a time (wire spec §6.6): both keys gone, every
/// hash gone, locks released only when still held, counters +n. A missing
/// hash is found and reported (NoHash, not counted, lock kept); and active
/// or lease of the right sizes but other members fall back to the per-task
/// path with Go's outcomes.
#[tokio::test]
async fn done_of_a_whole_batch_ends_as_go_done_one_by_one() {
    // A server of its own: the test resets and reads server-wide commandstats.
    let (_db, broker, client, mut conn) = setup_on(support::private_redis()).await;
    let count = |conn: &mut crate::support::redis::RawConn, q: &'static str| {
        let mut conn = conn.clone();
        async move {
            let daily: Option<i64> = conn.get(keys::processed_key(q, today())).await.unwrap();
            let total: Option<i64> = conn.get(keys::processed_total_key(q)).await.unwrap();
            let ttl: i64 = conn.ttl(keys::processed_key(q, today())).await.unwrap();
            (daily, total, ttl > 0)
        }
    };

    // All finished: nothing of them is left but the counters, and no
    // per-task LREM was needed.
    let msgs = lease_batch(&broker, &client, "all", 6).await;
    let _: () = conn.set(&msgs[1].unique_key, "other").await.unwrap();
    let refs: Vec<_> = msgs.iter().collect();
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(
        broker.done("all", &refs).await.unwrap(),
        vec![DoneOutcome::Done; 6]
    );
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(
        !stats.contains("cmdstat_lrem:"),
        "whole-batch path taken: {stats}"
    );
    let keys_left: Vec<String> = conn.keys("asynq:{all}:*").await.unwrap();
    let mut keys_left: Vec<_> = keys_left
        .into_iter()
        .filter(|k| !k.contains(":processed"))
        .collect();
    keys_left.sort();
    assert_eq!(
        keys_left,
        vec![msgs[1].unique_key.clone()],
        "only the lock held by another"
    );
    let lock0: Option<String> = conn.get(&msgs[0].unique_key).await.unwrap();
    assert_eq!(lock0, None);
    assert_eq!(count(&mut conn, "all").await, (Some(6), Some(6), true));

    // One hash gone (w3): NoHash for it, its lock-free siblings done.
    let msgs = lease_batch(&broker, &client, "nohash", 5).await;
    let _: () = conn.del(keys::task_key("nohash", "w0")).await.unwrap();
    let refs: Vec<_> = msgs.iter().collect();
    let outcomes = broker.done("nohash", &refs).await.unwrap();
    let expected: Vec<_> = msgs
        .iter()
        .map(|m| {
            if m.id == "w0" {
                DoneOutcome::NoHash
            } else {
                DoneOutcome::Done
            }
        })
        .collect();
    assert_eq!(outcomes, expected);
    let w0_lock: Option<String> = conn
        .get(&msgs.iter().find(|m| m.id == "w0").unwrap().unique_key)
        .await
        .unwrap();
    assert_eq!(
        w0_lock.as_deref(),
        Some("w0"),
        "a task stopped at DEL keeps its lock"
    );
    let w1_lock: Option<String> = conn
        .get(&msgs.iter().find(|m| m.id == "w1").unwrap().unique_key)
        .await
        .unwrap();
    assert_eq!(w1_lock, None);
    let active: i64 = conn.llen(keys::active_key("nohash")).await.unwrap();
    let lease: i64 = conn.zcard(keys::lease_key("nohash")).await.unwrap();
    assert_eq!((active, lease), (0, 0));
    assert_eq!(count(&mut conn, "nohash").await, (Some(4), Some(4), true));

    // Active of the right length but w3 twice and w4 missing: Go's LREM -1
    // takes one w3 (the one nearest the tail); w4 is NotActive and keeps
    // its lease and hash.
    let msgs = lease_batch(&broker, &client, "dup", 5).await;
    let _: () = conn.lrem(keys::active_key("dup"), 0, "w4").await.unwrap();
    let _: () = conn.lpush(keys::active_key("dup"), "w3").await.unwrap();
    let refs: Vec<_> = msgs.iter().collect();
    let outcomes = broker.done("dup", &refs).await.unwrap();
    let expected: Vec<_> = msgs
        .iter()
        .map(|m| {
            if m.id == "w4" {
                DoneOutcome::NotActive
            } else {
                DoneOutcome::Done
            }
        })
        .collect();
    assert_eq!(outcomes, expected);
    let active: Vec<String> = conn.lrange(keys::active_key("dup"), 0, -1).await.unwrap();
    let lease: Vec<String> = conn.zrange(keys::lease_key("dup"), 0, -1).await.unwrap();
    assert_eq!(
        (active, lease),
        (vec!["w3".to_string()], vec!["w4".to_string()])
    );
    let w4: bool = conn.exists(keys::task_key("dup", "w4")).await.unwrap();
    assert!(w4);
    assert_eq!(count(&mut conn, "dup").await, (Some(4), Some(4), true));

    // Lease of the right size but w2's lease replaced by a stranger's:
    // NoLease for w2 (hash kept), the stranger's lease stays.
    let msgs = lease_batch(&broker, &client, "stranger", 4).await;
    let _: () = conn.zrem(keys::lease_key("stranger"), "w2").await.unwrap();
    let _: () = conn
        .zadd(keys::lease_key("stranger"), "zz", lease_until().timestamp())
        .await
        .unwrap();
    let refs: Vec<_> = msgs.iter().collect();
    let outcomes = broker.done("stranger", &refs).await.unwrap();
    let expected: Vec<_> = msgs
        .iter()
        .map(|m| {
            if m.id == "w2" {
                DoneOutcome::NoLease
            } else {
                DoneOutcome::Done
            }
        })
        .collect();
    assert_eq!(outcomes, expected);
    let active: i64 = conn.llen(keys::active_key("stranger")).await.unwrap();
    let lease: Vec<String> = conn
        .zrange(keys::lease_key("stranger"), 0, -1)
        .await
        .unwrap();
    assert_eq!((active, lease), (0, vec!["zz".to_string()]));
    let w2: bool = conn.exists(keys::task_key("stranger", "w2")).await.unwrap();
    assert!(w2);
    assert_eq!(count(&mut conn, "stranger").await, (Some(3), Some(3), true));
}

/// One lease call takes at most LEASE_BATCH_MAX tasks, and a larger ask
/// loses none: the rest stay pending in order (Lua's unpack limit would
/// otherwise fail the script after it emptied pending).
#[tokio::test]
async fn a_lease_call_takes_at_most_its_cap_and_loses_nothing() {
    use asynqdeck::broker::LEASE_BATCH_MAX;
    let (_db, broker, client, mut conn) = setup().await;
    let n = LEASE_BATCH_MAX * 2 + 500;
    for i in 0..n {
        client
            .enqueue(
                &Task::new("t", Vec::new()),
                EnqueueOptions::new().task_id(format!("id{i:05}")),
            )
            .await
            .unwrap();
    }
    let first = broker.dequeue("default", n, lease_until()).await.unwrap();
    assert_eq!(first.len(), LEASE_BATCH_MAX);
    assert_eq!(first[0].as_ref().unwrap().msg.id, "id00000", "oldest first");
    let msgs: Vec<_> = first
        .iter()
        .map(|r| r.as_ref().unwrap().msg.clone())
        .collect();
    let refs: Vec<_> = msgs.iter().collect();
    let (outcomes, second) = broker
        .done_and_dequeue("default", &refs, n, lease_until())
        .await
        .unwrap();
    assert_eq!(outcomes, vec![DoneOutcome::Done; LEASE_BATCH_MAX]);
    assert_eq!(second.len(), LEASE_BATCH_MAX);
    assert_eq!(
        second[0].as_ref().unwrap().msg.id,
        format!("id{:05}", LEASE_BATCH_MAX)
    );
    let pending: i64 = conn.llen(keys::pending_key("default")).await.unwrap();
    let active: i64 = conn.llen(keys::active_key("default")).await.unwrap();
    let lease: i64 = conn.zcard(keys::lease_key("default")).await.unwrap();
    assert_eq!((pending, active, lease), (500, 1000, 1000));
    let processed: i64 = conn
        .get(keys::processed_total_key("default"))
        .await
        .unwrap();
    assert_eq!(processed, 1000);
}

/// Where `id` is in queue `q`: each of pending, active, lease and archived
/// that holds it (lists counted once per occurrence).
async fn places(conn: &mut crate::support::redis::RawConn, q: &str, id: &str) -> Vec<&'static str> {
    let mut out = Vec::new();
    for (name, key) in [
        ("pending", keys::pending_key(q)),
        ("active", keys::active_key(q)),
    ] {
        let list: Vec<String> = conn.lrange(&key, 0, -1).await.unwrap();
        out.extend(list.iter().filter(|x| *x == id).map(|_| name));
    }
    for (name, key) in [
        ("lease", keys::lease_key(q)),
        ("archived", keys::archived_key(q)),
    ] {
        let score: Option<f64> = conn.zscore(&key, id).await.unwrap();
        out.extend(score.map(|_| name));
    }
    out
}

/// Asserts each good task of `ids` was leased normally: in active once, in
/// the lease zset, state active, no pending_since.
async fn assert_leased(conn: &mut crate::support::redis::RawConn, q: &str, ids: &[&str]) {
    for id in ids {
        assert_eq!(places(conn, q, id).await, ["active", "lease"], "{id}");
        assert_eq!(state(conn, q, id).await.as_deref(), Some("active"), "{id}");
        let since: bool = conn
            .hexists(keys::task_key(q, id), "pending_since")
            .await
            .unwrap();
        assert!(!since, "{id}: pending_since removed");
    }
}

/// A task key of the wrong type in the middle of a lease batch (a string or
/// a list at `asynq:{q}:t:<id>`: WRONGTYPE for the per-task commands) loses
/// nothing, on both lease paths (COMPATIBILITY.md#w13). Behaviour: "leased
/// and handed back corrupt" — every other task of the batch is leased as
/// usual (active, lease, state active, in taking order); the corrupt id is
/// leased too (active and lease, its key untouched) and comes back, in its
/// place, as an `Error::Corrupt` entry with its id; the recoverer's listing
/// returns it the same way instead of failing; `archive_undecodable` moves
/// it to the archive with its key untouched, where the inspector lists it as
/// a corrupt row. Every id is in exactly one container at every step.
#[tokio::test]
async fn lease_of_a_batch_with_a_wrong_type_task_key_loses_nothing() {
    let (db, broker, client, mut conn) = setup().await;
    let q = "default";
    enqueue_ids(&client, "t", 6).await;
    let _: () = conn
        .set(keys::task_key(q, "t002"), "garbage")
        .await
        .unwrap();

    // dequeue: t000..t004 taken, t002 in the middle (3rd of 5).
    let got = broker.dequeue(q, 5, lease_until()).await.unwrap();
    let got: Vec<Result<String, String>> = got
        .into_iter()
        .map(|r| match r {
            Ok(t) => Ok(t.msg.id),
            Err((id, e)) => {
                assert!(matches!(e, asynqdeck::Error::Corrupt { .. }), "{e}");
                Err(id)
            }
        })
        .collect();
    assert_eq!(
        got,
        [
            Ok("t000".into()),
            Ok("t001".into()),
            Err("t002".into()),
            Ok("t003".into()),
            Ok("t004".into())
        ]
    );
    let active: Vec<String> = conn.lrange(keys::active_key(q), 0, -1).await.unwrap();
    assert_eq!(active, ["t004", "t003", "t002", "t001", "t000"]);
    assert_leased(&mut conn, q, &["t000", "t001", "t003", "t004"]).await;
    assert_eq!(places(&mut conn, q, "t002").await, ["active", "lease"]);
    assert_eq!(places(&mut conn, q, "t005").await, ["pending"]);
    let kept: String = conn.get(keys::task_key(q, "t002")).await.unwrap();
    assert_eq!(kept, "garbage", "corrupt key untouched");

    assert!(broker.archive_undecodable(q, "t002").await.unwrap());
    assert_eq!(places(&mut conn, q, "t002").await, ["archived"]);
    let kept: String = conn.get(keys::task_key(q, "t002")).await.unwrap();
    assert_eq!(kept, "garbage", "archived as it is");
    let inspector = asynqdeck::Inspector::connect(&db.url()).await.unwrap();
    let rows = inspector
        .list_tasks(
            q,
            asynqdeck::TaskState::Archived,
            asynqdeck::inspector::Page::default(),
        )
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(
        matches!(&rows[0], asynqdeck::inspector::TaskRow::Corrupt { id, .. } if id == "t002"),
        "{rows:?}"
    );

    // done_and_dequeue: finishes the four, leases t005 and u000..u003, u001
    // a list, with a lease already over so the recoverer lists them.
    enqueue_ids(&client, "u", 4).await;
    let _: () = conn.del(keys::task_key(q, "u001")).await.unwrap();
    let _: () = conn.rpush(keys::task_key(q, "u001"), "x").await.unwrap();
    let mut finished = Vec::new();
    for id in ["t000", "t001", "t003", "t004"] {
        finished.push(broker_msg(&mut conn, id).await.msg);
    }
    let finished: Vec<_> = finished.iter().collect();
    let past = Utc::now() - chrono::Duration::seconds(60);
    let (outcomes, leased) = broker
        .done_and_dequeue(q, &finished, 10, past)
        .await
        .unwrap();
    assert_eq!(outcomes, [DoneOutcome::Done; 4]);
    let leased: Vec<Result<String, String>> = leased
        .into_iter()
        .map(|r| r.map(|t| t.msg.id).map_err(|(id, _)| id))
        .collect();
    assert_eq!(
        leased,
        [
            Ok("t005".into()),
            Ok("u000".into()),
            Err("u001".into()),
            Ok("u002".into()),
            Ok("u003".into())
        ]
    );
    let pending: i64 = conn.llen(keys::pending_key(q)).await.unwrap();
    assert_eq!(pending, 0);
    assert_leased(&mut conn, q, &["t005", "u000", "u002", "u003"]).await;
    assert_eq!(places(&mut conn, q, "u001").await, ["active", "lease"]);
    for id in ["t000", "t001", "t003", "t004"] {
        assert!(places(&mut conn, q, id).await.is_empty(), "{id} done");
    }

    // The recoverer's listing hands it back the same way, not failing.
    let expired = broker.list_lease_expired(q, Utc::now()).await.unwrap();
    let expired: Vec<Result<String, String>> = expired
        .into_iter()
        .map(|r| r.map(|t| t.msg.id).map_err(|(id, _)| id))
        .collect();
    assert_eq!(expired.len(), 5);
    assert!(expired.contains(&Err("u001".into())), "{expired:?}");
    assert!(broker.archive_undecodable(q, "u001").await.unwrap());
    assert_eq!(places(&mut conn, q, "u001").await, ["archived"]);
    let kept: Vec<String> = conn.lrange(keys::task_key(q, "u001"), 0, -1).await.unwrap();
    assert_eq!(kept, ["x"]);
}
