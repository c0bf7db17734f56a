//! Defects the chaos suite (`tests/chaos/`) found outside issue 12's R
//! items, one test each (COMPATIBILITY.md X1–X3).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use asynqdeck::broker::{Broker, keys};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::web::StatsCache;
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use chrono::Utc;
use redis::AsyncCommands;

use crate::support::{self, restartable::RedisProc};

type Conn = crate::support::redis::RawConn;

async fn key_type(conn: &mut Conn, key: &str) -> String {
    redis::cmd("TYPE").arg(key).query_async(conn).await.unwrap()
}

async fn members(conn: &mut Conn, key: &str) -> BTreeSet<String> {
    let v: Vec<String> = conn.zrange(key, 0, -1).await.unwrap();
    v.into_iter().collect()
}

/// X1: in both the scheduled and the retry zset, a due id whose task key is
/// a string and a due id whose hash is missing sit before three valid due
/// tasks. One forwarder pass moves every valid task to pending; the
/// wrong-type id goes to the archive with its key untouched; the dangling
/// id leaves the zset and no hash is created for it.
#[tokio::test]
async fn x1_forwarder_skips_bad_ids_and_forwards_every_due_task() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let client = Client::from_broker(broker.clone());
    let mut conn = db.raw().await;
    let q = "default";
    let mut valid = BTreeSet::new();
    for source in ["scheduled", "retry"] {
        let zset = format!("{}{source}", keys::queue_prefix(q));
        for i in 0..3 {
            let info = client
                .enqueue(
                    &Task::new("t", format!("{source}{i}").into_bytes()),
                    EnqueueOptions::new().process_in(Duration::from_secs(3600)),
                )
                .await
                .unwrap();
            let _: () = conn.zrem(keys::scheduled_key(q), &info.id).await.unwrap();
            let _: () = conn.zadd(&zset, &info.id, 10).await.unwrap();
            let _: () = conn
                .hset(keys::task_key(q, &info.id), "state", source)
                .await
                .unwrap();
            valid.insert(info.id);
        }
        let wrong = format!("wrong-{source}");
        let _: () = conn
            .set(keys::task_key(q, &wrong), "not a hash")
            .await
            .unwrap();
        let _: () = conn.zadd(&zset, &wrong, 1).await.unwrap();
        let _: () = conn
            .zadd(&zset, format!("missing-{source}"), 1)
            .await
            .unwrap();
    }

    let moved = broker.forward_if_ready(q).await.unwrap();
    assert_eq!(moved, 6);
    let pending: Vec<String> = conn.lrange(keys::pending_key(q), 0, -1).await.unwrap();
    assert_eq!(pending.iter().cloned().collect::<BTreeSet<_>>(), valid);
    assert_eq!(pending.len(), 6);
    for id in &valid {
        let state: String = conn.hget(keys::task_key(q, id), "state").await.unwrap();
        assert_eq!(state, "pending", "{id}");
    }
    assert!(members(&mut conn, &keys::scheduled_key(q)).await.is_empty());
    assert!(members(&mut conn, &keys::retry_key(q)).await.is_empty());
    let archived = members(&mut conn, &keys::archived_key(q)).await;
    assert_eq!(
        archived,
        BTreeSet::from(["wrong-retry".to_string(), "wrong-scheduled".to_string()])
    );
    for source in ["scheduled", "retry"] {
        let wrong = keys::task_key(q, &format!("wrong-{source}"));
        let value: String = conn.get(&wrong).await.unwrap();
        assert_eq!(value, "not a hash", "the wrong-type key is left as it is");
        let missing = keys::task_key(q, &format!("missing-{source}"));
        assert_eq!(
            key_type(&mut conn, &missing).await,
            "none",
            "no hash created"
        );
    }
    assert_eq!(broker.forward_if_ready(q).await.unwrap(), 0);
}

/// X1 (recoverer): an aggregation set key of the wrong type, and a set whose
/// group key is of the wrong type, among the stale sets do not stop the
/// others from being reclaimed; the first leaves the index, the second
/// stays listed; both keys are left as they are.
#[tokio::test]
async fn x1_reclaim_skips_a_wrong_type_aggregation_set() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let q = "default";
    let sets = keys::all_aggregation_sets_key(q);
    let group = keys::group_key(q, "g");
    let bad = format!("{group}:bad-set");
    let good = format!("{group}:good-set");
    let _: () = conn.set(&bad, "not a zset").await.unwrap();
    let _: () = conn.zadd(&good, "t1", 5).await.unwrap();
    let _: () = conn.zadd(&sets, &bad, 1).await.unwrap();
    let _: () = conn.zadd(&sets, &good, 2).await.unwrap();
    let bad_group = keys::group_key(q, "h");
    let orphan = format!("{bad_group}:set");
    let _: () = conn.set(&bad_group, "not a zset").await.unwrap();
    let _: () = conn.zadd(&orphan, "t2", 5).await.unwrap();
    let _: () = conn.zadd(&sets, &orphan, 1).await.unwrap();

    let reclaimed = broker.reclaim_stale_aggregation_sets(q).await.unwrap();
    assert_eq!(reclaimed, 1);
    assert_eq!(
        members(&mut conn, &group).await,
        BTreeSet::from(["t1".to_string()])
    );
    assert_eq!(key_type(&mut conn, &good).await, "none");
    let value: String = conn.get(&bad).await.unwrap();
    assert_eq!(value, "not a zset");
    assert_eq!(
        members(&mut conn, &sets).await,
        BTreeSet::from([orphan.clone()])
    );
    assert_eq!(
        members(&mut conn, &orphan).await,
        BTreeSet::from(["t2".to_string()])
    );
    let value: String = conn.get(&bad_group).await.unwrap();
    assert_eq!(value, "not a zset");
}

/// X2: the statistics snapshot read while Redis was down is not served
/// once Redis is back: the first views after it returns compute anew, even
/// within the poll slot of the failed read (the clock is fixed, so the slot
/// never ends here).
#[tokio::test]
async fn x2_queue_stats_recover_at_the_first_view_after_redis_returns() {
    let mut redis = RedisProc::start(false);
    let clock = SimulatedClock::new(Utc::now());
    let broker = Broker::connect(&redis.url())
        .await
        .unwrap()
        .with_clock(std::sync::Arc::new(clock.clone()));
    let client = Client::from_broker(broker.clone());
    client
        .enqueue(&Task::new("t", b"x".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let inspector = Inspector::from_broker(broker);
    let cache = StatsCache::new(Duration::from_secs(5));
    let snap = cache.get(&inspector).await;
    assert_eq!(snap.error, None);
    assert_eq!(snap.queues.len(), 1);

    redis.kill();
    // Next slot: the old snapshot is served and a refresh fails in the
    // background; then views see the error.
    clock.advance(Duration::from_secs(5));
    let _ = cache.get(&inspector).await;
    cache.settle().await;
    let down = cache.get(&inspector).await;
    assert!(down.error.is_some(), "Redis is down: {down:?}");

    redis.up();
    let back = Instant::now();
    // Nothing was kept on disk: the queue again, on a connection of its own.
    let mut raw = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = raw.sadd(keys::ALL_QUEUES, "default").await.unwrap();
    let recovered = support::eventually(Duration::from_secs(10), || async {
        let snap = cache.get(&inspector).await;
        (snap.error.is_none() && snap.queues.len() == 1).then_some(())
    })
    .await;
    assert!(
        recovered.is_some(),
        "statistics still failed {:.1} s after Redis returned: {:?}",
        back.elapsed().as_secs_f64(),
        cache.get(&inspector).await.error
    );
    assert!(
        back.elapsed() < Duration::from_secs(1),
        "recovered after {:.2} s",
        back.elapsed().as_secs_f64()
    );
}

/// Makes Redis busy for `ms` milliseconds (a Lua loop on `TIME`): the
/// script is written to Redis before this returns, so a command sent after
/// it waits for its end. Join the returned thread to read the script's reply.
fn busy(port: u16, ms: u64) -> std::thread::JoinHandle<String> {
    use std::io::{Read, Write};
    let script = "local t = redis.call('TIME') \
        local start = t[1] * 1000000 + t[2] \
        repeat t = redis.call('TIME') until t[1] * 1000000 + t[2] - start >= tonumber(ARGV[1]) * 1000 \
        return 1";
    let ms = ms.to_string();
    let mut req = String::from("*4\r\n");
    for arg in ["EVAL", script, "0", ms.as_str()] {
        req.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut buf = [0u8; 64];
    // Accepted by Redis (a round trip) before the script is sent.
    s.write_all(b"PING\r\n").unwrap();
    let n = s.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"+PONG\r\n");
    s.write_all(req.as_bytes()).unwrap();
    std::thread::spawn(move || {
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    })
}

/// X3: a reply that takes over a second (Redis busy in a script, as on a
/// loaded machine) does not fail an enqueue or a read: the reply timeout is
/// Go's 3 s, not redis-rs's 500 ms. Each round sends the busy script
/// first; a round counts when the call waited at least 700 ms for its
/// reply (Redis read the script first); three must.
#[tokio::test]
async fn x3_reply_delayed_over_a_second_still_succeeds() {
    let db = support::private_redis();
    let url = db.url();
    let broker = Broker::connect(&url).await.unwrap();
    let client = Client::from_broker(broker.clone());
    let inspector = Inspector::from_broker(broker.clone());
    let mut delayed = 0;
    for round in 0..20 {
        let script = busy(db.port, 1200);
        let t = Instant::now();
        let result = match round % 3 {
            0 => client
                .enqueue(&Task::new("t", b"x".to_vec()), EnqueueOptions::new())
                .await
                .map(|_| ()),
            1 => inspector.queues().await.map(|_| ()),
            _ => broker.ping().await,
        };
        let waited = t.elapsed();
        assert_eq!(script.join().unwrap(), ":1\r\n");
        result.unwrap_or_else(|e| {
            panic!(
                "round {round}: a reply delayed {:.2} s failed: {e}",
                waited.as_secs_f64()
            )
        });
        if waited >= Duration::from_millis(700) {
            delayed += 1;
            if delayed >= 3 {
                return;
            }
        }
    }
    panic!("only {delayed} of 20 rounds had their reply delayed by the busy script");
}
