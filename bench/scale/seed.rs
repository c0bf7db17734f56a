//! Seeding, written as Go asynq v0.26.0 lays tasks out (wire format §2–§4):
//! a task hash `asynq:{q}:t:<id>` (`msg` = an encoded `TaskMessage`,
//! `state`, and `pending_since` in unix ns for pending tasks), its id in
//! `asynq:{q}:pending` (LPUSH) or in the `retry` / `archived` sorted set,
//! and the queue in `asynq:queues`. Lua scripts write [`CHUNK`] tasks per
//! call (tens of ms each, before any measured window); the message is one
//! template encoded here with prost, the script appending the task's id as
//! field 3 (and, for the many-queues seeder, its queue as field 4: protobuf
//! decoders accept fields in any order, and Go re-encodes in its own order
//! when it rewrites a message).

use asynqdeck::broker::proto::TaskMessage;
use prost::Message;
use redis::aio::MultiplexedConnection;

/// Tasks per seeding script call.
pub const CHUNK: usize = 10_000;
/// Queues per call of the many-queues seeder.
const QUEUE_CHUNK: usize = 500;

/// Creates ARGV[4] tasks `<ARGV[6]><i>`, i from ARGV[3], in one queue.
const SEED_ONE_QUEUE: &str = r#"
-- KEYS[1] asynq:{<q>}:pending (list) or the retry/archived zset
-- KEYS[2] asynq:queues
-- ARGV[1] encoded TaskMessage without its id field
-- ARGV[2] task key prefix asynq:{<q>}:t:
-- ARGV[3] first index, ARGV[4] count
-- ARGV[5] state (pending, retry, archived)
-- ARGV[6] id prefix
-- ARGV[7] pending: pending_since (unix ns); zset: the score (unix s)
-- ARGV[8] queue name
-- Returns the number of tasks created.
local first, n = tonumber(ARGV[3]), tonumber(ARGV[4])
local batch = {}
local function flush()
    if #batch == 0 then return end
    if ARGV[5] == "pending" then
        redis.call("LPUSH", KEYS[1], unpack(batch))
    else
        redis.call("ZADD", KEYS[1], unpack(batch))
    end
    batch = {}
end
for i = first, first + n - 1 do
    local id = ARGV[6] .. i
    local msg = ARGV[1] .. string.char(26, #id) .. id
    if ARGV[5] == "pending" then
        redis.call("HSET", ARGV[2] .. id, "msg", msg, "state", "pending", "pending_since", ARGV[7])
        batch[#batch + 1] = id
    else
        redis.call("HSET", ARGV[2] .. id, "msg", msg, "state", ARGV[5])
        batch[#batch + 1] = ARGV[7]
        batch[#batch + 1] = id
    end
    if #batch >= 1000 then flush() end
end
flush()
redis.call("SADD", KEYS[2], ARGV[8])
return n
"#;

/// Creates ARGV[2] pending tasks `t-1` … in each queue ARGV[4..].
const SEED_MANY_QUEUES: &str = r#"
-- KEYS[1] asynq:queues
-- ARGV[1] encoded TaskMessage without its id and queue fields
-- ARGV[2] tasks per queue
-- ARGV[3] pending_since (unix ns)
-- ARGV[4..] queue names (each shorter than 100 bytes)
-- Returns the number of tasks created.
local per = tonumber(ARGV[2])
local made = 0
for q = 4, #ARGV do
    local name = ARGV[q]
    local prefix = "asynq:{" .. name .. "}:"
    local ids = {}
    for i = 1, per do
        local id = "t-" .. i
        redis.call("HSET", prefix .. "t:" .. id,
            "msg", ARGV[1] .. string.char(26, #id) .. id .. string.char(34, #name) .. name,
            "state", "pending", "pending_since", ARGV[3])
        ids[#ids + 1] = id
    end
    redis.call("LPUSH", prefix .. "pending", unpack(ids))
    made = made + per
end
redis.call("SADD", KEYS[1], unpack(ARGV, 4))
return made
"#;

fn now_ns() -> i64 {
    chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0)
}

/// The message every seeded task shares (a Go client's defaults: retry 25,
/// timeout 1800 s); a retry or archived task carries a failure.
fn template(queue: &str, state: &str) -> Vec<u8> {
    let failed = state != "pending";
    TaskMessage {
        r#type: "bench:scale".into(),
        payload: br#"{"user":42,"note":"scale bench"}"#.to_vec(),
        queue: queue.into(),
        retry: 25,
        retried: i32::from(failed),
        error_msg: if failed { "boom".into() } else { String::new() },
        last_failed_at: if failed {
            chrono::Utc::now().timestamp()
        } else {
            0
        },
        timeout: 1800,
        ..Default::default()
    }
    .encode_to_vec()
}

/// `name(i)` for i in 0..n: `queue-00000`, … (the overview's queues).
pub fn queue_name(i: usize) -> String {
    format!("queue-{i:05}")
}

/// `queues` queues (`queue-00000` …) with `per_queue` pending tasks each.
pub async fn many_queues(
    conn: &mut MultiplexedConnection,
    queues: usize,
    per_queue: usize,
) -> anyhow::Result<()> {
    let script = redis::Script::new(SEED_MANY_QUEUES);
    let tmpl = template("", "pending");
    let since = now_ns();
    let names: Vec<String> = (0..queues).map(queue_name).collect();
    for chunk in names.chunks(QUEUE_CHUNK) {
        let mut inv = script.key("asynq:queues");
        inv.arg(&tmpl).arg(per_queue).arg(since);
        for n in chunk {
            inv.arg(n);
        }
        let made: usize = inv.invoke_async(conn).await?;
        anyhow::ensure!(made == chunk.len() * per_queue, "seeded {made}");
    }
    Ok(())
}

/// `n` tasks in `state` (`pending`, `retry` or `archived`) of `queue`, ids
/// `<first letter of state>-1` …; retry tasks are due in 1 day (so no
/// forwarder moves them during the bench), archived ones archived now.
pub async fn one_queue(
    conn: &mut MultiplexedConnection,
    queue: &str,
    state: &str,
    n: usize,
) -> anyhow::Result<()> {
    let script = redis::Script::new(SEED_ONE_QUEUE);
    let tmpl = template(queue, state);
    let key = format!("asynq:{{{queue}}}:{state}");
    let prefix = format!("asynq:{{{queue}}}:t:");
    let id_prefix = format!("{}-", &state[..1]);
    let now = chrono::Utc::now().timestamp();
    let extra = match state {
        "pending" => now_ns(),
        "retry" => now + 86_400,
        _ => now,
    };
    let mut first = 1;
    while first <= n {
        let count = CHUNK.min(n + 1 - first);
        let made: usize = script
            .key(&key)
            .key("asynq:queues")
            .arg(&tmpl)
            .arg(&prefix)
            .arg(first)
            .arg(count)
            .arg(state)
            .arg(&id_prefix)
            .arg(extra)
            .arg(queue)
            .invoke_async(conn)
            .await?;
        anyhow::ensure!(made == count, "seeded {made} of {count}");
        first += count;
    }
    Ok(())
}

/// Tasks in `queue`'s `state` container (LLEN or ZCARD).
pub async fn size(
    conn: &mut MultiplexedConnection,
    queue: &str,
    state: &str,
) -> anyhow::Result<u64> {
    let key = format!("asynq:{{{queue}}}:{state}");
    let cmd = if state == "pending" { "LLEN" } else { "ZCARD" };
    Ok(redis::cmd(cmd).arg(key).query_async(conn).await?)
}

/// FLUSHALL (only ever on the bench's own redis-server).
pub async fn flush(conn: &mut MultiplexedConnection) -> anyhow::Result<()> {
    redis::cmd("FLUSHALL").query_async::<()>(conn).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deploy::{Deployment, Kind};

    async fn hget(conn: &mut MultiplexedConnection, key: &str, field: &str) -> Option<Vec<u8>> {
        redis::cmd("HGET")
            .arg(key)
            .arg(field)
            .query_async(conn)
            .await
            .unwrap()
    }

    fn decode(bytes: &[u8]) -> TaskMessage {
        TaskMessage::decode(bytes).expect("msg decodes as a TaskMessage")
    }

    /// The seeders write Go asynq's layout: the queue in `asynq:queues`,
    /// ids in the pending list (oldest on the right) or the sorted set,
    /// and task hashes whose `msg` decodes to the task's own id and queue.
    /// (Checked once by hand with the Go peer too: `asynq-peer inspect
    /// task` reads these tasks, retry ones with retried 1 and "boom".)
    #[tokio::test]
    async fn seeders_write_go_asynqs_layout() {
        let redis = Deployment::start(Kind::Standalone).await.unwrap();
        let mut conn = redis::Client::open(redis.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap();

        let (t0_ns, t0_s) = (now_ns(), chrono::Utc::now().timestamp());
        many_queues(&mut conn, 3, 2).await.unwrap();
        one_queue(&mut conn, "q", "pending", CHUNK + 5)
            .await
            .unwrap();
        one_queue(&mut conn, "q", "retry", 3).await.unwrap();
        let (t1_ns, t1_s) = (now_ns(), chrono::Utc::now().timestamp());

        let mut queues: Vec<String> = redis::cmd("SMEMBERS")
            .arg("asynq:queues")
            .query_async(&mut conn)
            .await
            .unwrap();
        queues.sort();
        assert_eq!(queues, ["q", "queue-00000", "queue-00001", "queue-00002"]);

        let ids: Vec<String> = redis::cmd("LRANGE")
            .arg("asynq:{queue-00002}:pending")
            .arg(0)
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(ids, ["t-2", "t-1"]);
        let key = "asynq:{queue-00002}:t:t-2";
        let m = decode(&hget(&mut conn, key, "msg").await.unwrap());
        assert_eq!((m.id.as_str(), m.queue.as_str()), ("t-2", "queue-00002"));
        assert_eq!(
            (m.r#type.as_str(), m.retry, m.timeout),
            ("bench:scale", 25, 1800)
        );
        assert_eq!(hget(&mut conn, key, "state").await.unwrap(), b"pending");
        let since: i64 = String::from_utf8(hget(&mut conn, key, "pending_since").await.unwrap())
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            (t0_ns..=t1_ns).contains(&since),
            "pending_since in ns: {since}"
        );

        assert_eq!(
            size(&mut conn, "q", "pending").await.unwrap(),
            CHUNK as u64 + 5
        );
        let oldest: String = redis::cmd("LINDEX")
            .arg("asynq:{q}:pending")
            .arg(-1)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(oldest, "p-1");
        let last = format!("p-{}", CHUNK + 5);
        let m = decode(
            &hget(&mut conn, &format!("asynq:{{q}}:t:{last}"), "msg")
                .await
                .unwrap(),
        );
        assert_eq!((m.id, m.queue.as_str()), (last, "q"));

        let retry: Vec<(String, i64)> = redis::cmd("ZRANGE")
            .arg("asynq:{q}:retry")
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query_async(&mut conn)
            .await
            .unwrap();
        assert_eq!(retry.len(), 3);
        let due = (t0_s + 86_400)..=(t1_s + 86_400);
        assert!(
            retry.iter().all(|(_, s)| due.contains(s)),
            "due in a day: {retry:?}"
        );
        let m = decode(&hget(&mut conn, "asynq:{q}:t:r-2", "msg").await.unwrap());
        assert_eq!(
            (m.id.as_str(), m.retried, m.error_msg.as_str()),
            ("r-2", 1, "boom")
        );
        assert_eq!(
            hget(&mut conn, "asynq:{q}:t:r-2", "state").await.unwrap(),
            b"retry"
        );
        assert_eq!(
            hget(&mut conn, "asynq:{q}:t:r-2", "pending_since").await,
            None
        );
    }
}
