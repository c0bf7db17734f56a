//! Tasks written straight into Redis the way Go asynq leaves them, for
//! tests that need a state no public call reaches in one step (a task
//! hash with its `msg` and `state`, the id in the state's container, the
//! queue registered), a small queue made through the public API
//! ([`due_and_pending`]), and the heartbeat records of a server and its
//! workers ([`server`], [`worker`]).
//!
//! Where a task goes by state: `pending` → the `pending` list (without
//! `pending_since`); `active` → the `active` list and, when a lease is
//! given, the `lease` zset; `aggregating` → the group's zset, the group
//! registered and the hash field `group`; any other state → the zset of
//! that name (`scheduled`, `retry`, `archived`, `completed`) scored
//! `score`.

use super::redis::RawConn as Conn;
use asynqdeck::broker::proto::{ServerInfo, TaskMessage, WorkerInfo};
use asynqdeck::broker::{Broker, keys};
use asynqdeck::{Client, EnqueueOptions, Task};
use prost::Message;
use redis::AsyncCommands;

use super::TestDb;
use super::clock::{now, ts};

/// The group [`task`] puts aggregating tasks in.
pub const GROUP: &str = "grp";

/// A task message of type `task_type` with `payload`, max retry 25 and
/// timeout 1800 s, the rest Go's defaults.
pub fn msg(q: &str, id: &str, task_type: &str, payload: &[u8]) -> TaskMessage {
    TaskMessage {
        r#type: task_type.into(),
        payload: payload.to_vec(),
        id: id.into(),
        queue: q.into(),
        retry: 25,
        timeout: 1800,
        ..Default::default()
    }
}

/// The encoded message of [`task`]: type `t`, the id as payload.
pub fn msg_bytes(q: &str, id: &str) -> Vec<u8> {
    msg(q, id, "t", id.as_bytes()).encode_to_vec()
}

/// Writes the task hash (`msg` = `msg`, `state`) and puts `id` in the
/// container of `state` scored `score`; an active task gets a lease
/// expiring at `lease` (unix s) when one is given; an aggregating task
/// goes in `group`. Registers the queue.
#[allow(clippy::too_many_arguments)]
pub async fn write(
    conn: &mut Conn,
    q: &str,
    id: &str,
    msg: Vec<u8>,
    state: &str,
    score: i64,
    group: &str,
    lease: Option<i64>,
) {
    let _: () = conn.sadd(keys::ALL_QUEUES, q).await.unwrap();
    let key = keys::task_key(q, id);
    let _: () = conn
        .hset_multiple(&key, &[("msg", msg), ("state", state.as_bytes().to_vec())])
        .await
        .unwrap();
    match state {
        "pending" => {
            let _: () = conn.lpush(keys::pending_key(q), id).await.unwrap();
        }
        "active" => {
            let _: () = conn.lpush(keys::active_key(q), id).await.unwrap();
            if let Some(expiry) = lease {
                let _: () = conn.zadd(keys::lease_key(q), id, expiry).await.unwrap();
            }
        }
        "aggregating" => {
            let _: () = conn.hset(&key, "group", group).await.unwrap();
            let _: () = conn
                .zadd(keys::group_key(q, group), id, score)
                .await
                .unwrap();
            let _: () = conn.sadd(keys::all_groups_key(q), group).await.unwrap();
        }
        s => {
            let _: () = conn
                .zadd(format!("{}{s}", keys::queue_prefix(q)), id, score)
                .await
                .unwrap();
        }
    }
}

/// [`write`] with the raw `msg` bytes (a corrupt one, say): an active
/// task's lease expires at `score`, an aggregating one goes in `group`.
pub async fn put(
    conn: &mut Conn,
    q: &str,
    id: &str,
    msg: Vec<u8>,
    state: &str,
    score: i64,
    group: &str,
) {
    write(conn, q, id, msg, state, score, group, Some(score)).await;
}

/// Stores `m` in `state` ([`put`] in its queue, with its id and group).
pub async fn message(conn: &mut Conn, m: &TaskMessage, state: &str, score: i64) {
    put(
        conn,
        &m.queue,
        &m.id,
        m.encode_to_vec(),
        state,
        score,
        &m.group_key,
    )
    .await;
}

/// A task of type `t` whose payload is its id ([`msg_bytes`]) in `state`
/// scored `score` (active: lease expiry; aggregating: group [`GROUP`]).
pub async fn task(conn: &mut Conn, q: &str, id: &str, state: &str, score: i64) {
    put(conn, q, id, msg_bytes(q, id), state, score, GROUP).await;
}

/// The message of [`seeded`]: type `seeded`, payload `payload of <id>`.
fn seeded_msg(q: &str, id: &str) -> Vec<u8> {
    msg(q, id, "seeded", format!("payload of {id}").as_bytes()).encode_to_vec()
}

/// A `seeded` task in `state` as a Go server leaves it at [`now`]: pending
/// (no `pending_since`), active with a lease until now + 30 s, or retry,
/// archived, completed scored now.
pub async fn seeded(conn: &mut Conn, q: &str, id: &str, state: &str) {
    assert!(
        ["pending", "active", "retry", "archived", "completed"].contains(&state),
        "seed: unsupported state {state}"
    );
    let score = now().timestamp();
    let msg = seeded_msg(q, id);
    write(conn, q, id, msg, state, score, "", Some(score + 30)).await;
}

/// [`seeded`] for active, retry, archived or completed, an active task
/// with no lease (a worker that never wrote one).
pub async fn seeded_unleased(conn: &mut Conn, q: &str, id: &str, state: &str) {
    assert!(
        ["active", "retry", "archived", "completed"].contains(&state),
        "seed: unsupported state {state}"
    );
    let score = now().timestamp();
    write(conn, q, id, seeded_msg(q, id), state, score, "", None).await;
}

/// Enqueues `pending` tasks (`p0`, `p1`, ...) and one task ("due") that
/// failed and waits in retry with a score one second in the past, so the
/// next forwarder tick moves it to pending.
pub async fn due_and_pending(db: &TestDb, queue: &str, pending: usize) {
    let client = Client::connect(&db.url()).await.unwrap();
    let broker = Broker::connect(&db.url()).await.unwrap();
    client
        .enqueue(
            &Task::new("job", b"{}".to_vec()),
            EnqueueOptions::new().queue(queue).task_id("due"),
        )
        .await
        .unwrap();
    let now = chrono::Utc::now();
    let leased = broker
        .dequeue(queue, 1, now + chrono::Duration::seconds(30))
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    let task = leased.into_iter().next().unwrap().unwrap();
    assert_eq!(task.msg.id, "due");
    broker
        .retry(&task, now - chrono::Duration::seconds(1), "boom", true)
        .await
        .unwrap();
    for i in 0..pending {
        client
            .enqueue(
                &Task::new("job", b"{}".to_vec()),
                EnqueueOptions::new().queue(queue).task_id(format!("p{i}")),
            )
            .await
            .unwrap();
    }
}

/// A server's heartbeat record as Go writes it: queues critical (6) and
/// default (3), concurrency 10, strict priority, active, started five
/// minutes before [`now`], with `active_workers` workers.
pub fn server(host: &str, pid: i32, server_id: &str, active_workers: i32) -> ServerInfo {
    ServerInfo {
        host: host.into(),
        pid,
        server_id: server_id.into(),
        concurrency: 10,
        queues: [("critical".to_string(), 6), ("default".to_string(), 3)].into(),
        strict_priority: true,
        status: "active".into(),
        start_time: ts(now() - chrono::Duration::minutes(5)),
        active_worker_count: active_workers,
    }
}

/// A worker of server `s` running `task_id` (type `email:send`, queue
/// `critical`, `payload`), started `started_secs_ago` before [`now`], its
/// deadline `deadline_in_secs` after.
pub fn worker(
    s: &ServerInfo,
    task_id: &str,
    payload: Vec<u8>,
    started_secs_ago: i64,
    deadline_in_secs: i64,
) -> WorkerInfo {
    WorkerInfo {
        host: s.host.clone(),
        pid: s.pid,
        server_id: s.server_id.clone(),
        task_id: task_id.into(),
        task_type: "email:send".into(),
        task_payload: payload,
        queue: "critical".into(),
        start_time: ts(now() - chrono::Duration::seconds(started_secs_ago)),
        deadline: ts(now() + chrono::Duration::seconds(deadline_in_secs)),
    }
}
