//! `Client::enqueue` on a real Redis: hash fields, containers, defaults and
//! typed errors (wire spec §5, §6.1–6.3, §6.12; S1–S3).

use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::broker::proto::TaskMessage;
use asynqdeck::{Client, EnqueueOptions, Error, Task, TaskState};
use prost::Message;
use redis::AsyncCommands;

use crate::support;

async fn msg_of(conn: &mut crate::support::redis::RawConn, q: &str, id: &str) -> TaskMessage {
    let bytes: Vec<u8> = conn.hget(keys::task_key(q, id), "msg").await.unwrap();
    TaskMessage::decode(&bytes[..]).unwrap()
}

/// S1/S3: an enqueue without options stores MaxRetry 25, the 30 min default
/// timeout, no deadline, and a pending hash with exactly msg, state and a
/// nanosecond pending_since; the queue is registered.
#[tokio::test]
async fn default_enqueue_writes_go_shaped_pending_task() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let task = Task::new("email:send", br#"{"to":"a@b.c"}"#.to_vec());
    let before = chrono::Utc::now();
    let info = client.enqueue(&task, EnqueueOptions::new()).await.unwrap();
    assert_eq!(info.state, TaskState::Pending);
    assert_eq!(info.queue, "default");
    assert_eq!(info.max_retry, 25);
    assert_eq!(info.retried, 0);
    assert_eq!(info.timeout, Duration::from_secs(1800));
    assert_eq!(info.deadline, None);
    assert!(info.next_process_at.unwrap() >= before);
    assert_eq!(info.id.len(), 36, "uuid v4 string: {}", info.id);

    let mut conn = db.raw().await;
    let fields: std::collections::BTreeMap<String, Vec<u8>> = conn
        .hgetall(keys::task_key("default", &info.id))
        .await
        .unwrap();
    assert_eq!(
        fields.keys().cloned().collect::<Vec<_>>(),
        ["msg", "pending_since", "state"]
    );
    assert_eq!(fields["state"], b"pending");
    let since = String::from_utf8(fields["pending_since"].clone()).unwrap();
    assert_eq!(since.len(), 19, "unix ns: {since}");
    let m = msg_of(&mut conn, "default", &info.id).await;
    assert_eq!(m.retry, 25);
    assert_eq!(m.timeout, 1800);
    assert_eq!(m.deadline, 0);
    assert_eq!(m.payload, br#"{"to":"a@b.c"}"#);
    let pending: Vec<String> = conn
        .lrange(keys::pending_key("default"), 0, -1)
        .await
        .unwrap();
    assert_eq!(pending, vec![info.id.clone()]);
    let queues: Vec<String> = conn.smembers(keys::ALL_QUEUES).await.unwrap();
    assert_eq!(queues, vec!["default".to_string()]);
}

/// S2: an enqueue option beats the task's default option; the task's
/// default beats Go's default.
#[tokio::test]
async fn enqueue_option_beats_task_default() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let task =
        Task::new("t", b"p".to_vec()).with_options(EnqueueOptions::new().max_retry(3).queue("low"));
    let a = client.enqueue(&task, EnqueueOptions::new()).await.unwrap();
    assert_eq!((a.max_retry, a.queue.as_str()), (3, "low"));
    let b = client
        .enqueue(&task, EnqueueOptions::new().max_retry(7))
        .await
        .unwrap();
    assert_eq!((b.max_retry, b.queue.as_str()), (7, "low"));
    let mut conn = db.raw().await;
    assert_eq!(msg_of(&mut conn, "low", &b.id).await.retry, 7);
    let neg = client
        .enqueue(&task, EnqueueOptions::new().max_retry(-4))
        .await
        .unwrap();
    assert_eq!(
        neg.max_retry, 0,
        "negative max retry is clamped to 0 as Go does"
    );
}

/// Timeout, deadline and retention go on the wire in whole seconds; a
/// deadline alone suppresses the default timeout (Go client.go).
#[tokio::test]
async fn timeout_deadline_retention_encoding() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let t = Task::new("t", b"x".to_vec());
    let a = client
        .enqueue(
            &t,
            EnqueueOptions::new()
                .timeout(Duration::from_millis(90_900))
                .retention(Duration::from_millis(3_600_999)),
        )
        .await
        .unwrap();
    let m = msg_of(&mut conn, "default", &a.id).await;
    assert_eq!((m.timeout, m.deadline, m.retention), (90, 0, 3600));
    let dl = chrono::DateTime::from_timestamp(1_900_000_000, 0).unwrap();
    let b = client
        .enqueue(&t, EnqueueOptions::new().deadline(dl))
        .await
        .unwrap();
    let m = msg_of(&mut conn, "default", &b.id).await;
    assert_eq!((m.timeout, m.deadline), (0, 1_900_000_000));
    assert_eq!(b.deadline, Some(dl));
    assert_eq!(b.timeout, Duration::ZERO);
}

/// A future process time makes the task scheduled with score = unix seconds
/// and no pending_since; a past one makes it pending.
#[tokio::test]
async fn process_in_schedules() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let t = Task::new("t", b"x".to_vec());
    let info = client
        .enqueue(
            &t,
            EnqueueOptions::new().process_in(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Scheduled);
    let at = info.next_process_at.unwrap();
    let score: i64 = conn
        .zscore(keys::scheduled_key("default"), &info.id)
        .await
        .unwrap();
    assert_eq!(score, at.timestamp());
    let fields: Vec<String> = conn
        .hkeys(keys::task_key("default", &info.id))
        .await
        .unwrap();
    assert_eq!(fields.len(), 2, "msg and state only: {fields:?}");
    let state: String = conn
        .hget(keys::task_key("default", &info.id), "state")
        .await
        .unwrap();
    assert_eq!(state, "scheduled");
    let past = chrono::Utc::now() - chrono::Duration::seconds(10);
    let p = client
        .enqueue(&t, EnqueueOptions::new().process_at(past))
        .await
        .unwrap();
    assert_eq!(p.state, TaskState::Pending);
}

/// Unique(1h) takes Go's lock key with the task id as value and a 3600 s TTL;
/// a second enqueue of the same type+payload is DuplicateTask; a nil payload
/// keeps the trailing colon (wire spec §16 check 4).
#[tokio::test]
async fn unique_lock_matches_go() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let t = Task::new("email:send", br#"{"to":"a@b.c"}"#.to_vec());
    let opts = EnqueueOptions::new().unique(Duration::from_secs(3600));
    let info = client.enqueue(&t, opts.clone()).await.unwrap();
    let lock = "asynq:{default}:unique:email:send:9c101e63e8b8c4cb30a5402296afa24c";
    let holder: String = conn.get(lock).await.unwrap();
    assert_eq!(holder, info.id);
    let ttl: i64 = conn.ttl(lock).await.unwrap();
    assert!((3599..=3600).contains(&ttl), "ttl {ttl}");
    let field: String = conn
        .hget(keys::task_key("default", &info.id), "unique_key")
        .await
        .unwrap();
    assert_eq!(field, lock);
    assert_eq!(
        msg_of(&mut conn, "default", &info.id).await.unique_key,
        lock
    );
    assert!(matches!(
        client.enqueue(&t, opts.clone()).await,
        Err(Error::DuplicateTask)
    ));

    let nil = Task::without_payload("email:send");
    let n = client.enqueue(&nil, opts.clone()).await.unwrap();
    let holder: String = conn
        .get("asynq:{default}:unique:email:send:")
        .await
        .unwrap();
    assert_eq!(holder, n.id);

    // Scheduled: the lock outlives the schedule (process-in + ttl).
    let s = Task::new("s", b"1".to_vec());
    client
        .enqueue(
            &s,
            EnqueueOptions::new()
                .unique(Duration::from_secs(60))
                .process_in(Duration::from_secs(600)),
        )
        .await
        .unwrap();
    let ttl: i64 = conn
        .ttl(keys::unique_key("default", "s", Some(b"1")))
        .await
        .unwrap();
    assert!((659..=660).contains(&ttl), "ttl {ttl}");
}

/// A custom id that exists is TaskIdConflict and takes no lock.
#[tokio::test]
async fn custom_task_id_conflict() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let t = Task::new("t", b"x".to_vec());
    let info = client
        .enqueue(&t, EnqueueOptions::new().task_id("my-id"))
        .await
        .unwrap();
    assert_eq!(info.id, "my-id");
    let again = client
        .enqueue(
            &t,
            EnqueueOptions::new()
                .task_id("my-id")
                .unique(Duration::from_secs(60)),
        )
        .await;
    assert!(matches!(again, Err(Error::TaskIdConflict)), "{again:?}");
    let lock: Option<String> = conn
        .get(keys::unique_key("default", "t", Some(b"x")))
        .await
        .unwrap();
    assert_eq!(lock, None, "no lock leaked on id conflict");
}

/// Bad input gets a typed error and writes nothing.
#[tokio::test]
async fn invalid_input_is_rejected() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let t = Task::new("t", b"x".to_vec());
    assert!(matches!(
        client
            .enqueue(&Task::new("  ", b"".to_vec()), EnqueueOptions::new())
            .await,
        Err(Error::EmptyTaskType)
    ));
    assert!(matches!(
        client.enqueue(&t, EnqueueOptions::new().queue(" ")).await,
        Err(Error::InvalidQueueName)
    ));
    assert!(matches!(
        client.enqueue(&t, EnqueueOptions::new().task_id("")).await,
        Err(Error::EmptyTaskId)
    ));
    assert!(matches!(
        client.enqueue(&t, EnqueueOptions::new().group("")).await,
        Err(Error::EmptyGroup)
    ));
    assert!(matches!(
        client
            .enqueue(&t, EnqueueOptions::new().unique(Duration::from_millis(999)))
            .await,
        Err(Error::UniqueTtlTooShort)
    ));
    let mut conn = db.raw().await;
    let keys: Vec<String> = conn.keys("*").await.unwrap();
    assert!(keys.is_empty(), "nothing written: {keys:?}");
}

/// A group makes the task aggregating: hash field group, group zset in
/// seconds, group registered in the queue's groups set.
#[tokio::test]
async fn group_enqueue_aggregates() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let mut conn = db.raw().await;
    let t = Task::new("t", b"x".to_vec());
    let info = client
        .enqueue(&t, EnqueueOptions::new().group("g1"))
        .await
        .unwrap();
    assert_eq!(info.state, TaskState::Aggregating);
    assert_eq!(info.next_process_at, None);
    assert_eq!(info.group, "g1");
    let g: String = conn
        .hget(keys::task_key("default", &info.id), "group")
        .await
        .unwrap();
    assert_eq!(g, "g1");
    let score: i64 = conn
        .zscore(keys::group_key("default", "g1"), &info.id)
        .await
        .unwrap();
    assert!((score - chrono::Utc::now().timestamp()).abs() <= 1);
    let groups: Vec<String> = conn
        .smembers(keys::all_groups_key("default"))
        .await
        .unwrap();
    assert_eq!(groups, vec!["g1".to_string()]);
}

/// Redis unavailable is a typed error, not a panic.
#[tokio::test]
async fn unreachable_redis_is_a_redis_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = Client::connect(&format!("redis://127.0.0.1:{port}/0"))
        .await
        .unwrap_err();
    assert!(err.is_redis_unavailable(), "{err}");
}

/// Go master's `Header(k, v)` option: option headers are added to the
/// task's own, and an option header replaces a task header of its key.
#[tokio::test]
async fn header_option_adds_and_overrides_task_headers() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let task = Task::new("h", Vec::new())
        .with_header("trace", "task")
        .with_header("tenant", "a");
    let info = client
        .enqueue(
            &task,
            EnqueueOptions::new()
                .header("trace", "opt")
                .header("x", "1"),
        )
        .await
        .unwrap();
    let want: std::collections::BTreeMap<String, String> = [
        ("tenant".to_string(), "a".to_string()),
        ("trace".to_string(), "opt".to_string()),
        ("x".to_string(), "1".to_string()),
    ]
    .into();
    assert_eq!(info.headers, want);
    let mut conn = db.raw().await;
    assert_eq!(
        msg_of(&mut conn, "default", &info.id).await.headers,
        want.into_iter().collect()
    );
}
