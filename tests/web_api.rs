//! The asynqmon-compatible JSON API under `/api` (issue 4 item 5), driven
//! over HTTP with `tower::ServiceExt::oneshot` against real Redis: every
//! route with exact JSON for seeded data, every `:verb` path, page
//! defaults, status codes, the batch body rules, read-only and
//! cross-origin refusals, and parity with Go asynq's Inspector for a
//! Go-made mix of tasks in every state.
//!
//! Reference: asynqmon v0.7.2 (`handler.go`, `*_handlers.go`,
//! `conversion_helpers.go`); /work/shared/spec/asynqmon-reference.md §2a.

use std::time::Duration;

use asynqdeck::broker::Broker;
use asynqdeck::broker::proto::{
    SchedulerEnqueueEvent, SchedulerEntry, ServerInfo, Timestamp, WireTask, WorkerInfo,
};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::TaskRow;
use asynqdeck::web::{AppState, WebConfig, router};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};
use axum::Router;
use axum::http::{Method, StatusCode};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::support::clock::{broker_at, ts};
use crate::support::http::{self, delete, get, get_json, post};
use crate::support::{self, TestDb};

/// The seeded world's clock at seeding: 2030-03-10T12:00:00Z.
fn t0() -> DateTime<Utc> {
    DateTime::parse_from_rfc3339("2030-03-10T12:00:00Z")
        .unwrap()
        .with_timezone(&Utc)
}

/// Reads happen 1.234 s after seeding, so latency is 1234 ms.
fn t_read() -> DateTime<Utc> {
    t0() + chrono::Duration::milliseconds(1234)
}

/// asynqmon's `baseTask` fields.
fn base(id: &str, ty: &str, payload: &str, queue: &str, retried: i64, err: &str) -> Value {
    json!({
        "id": id,
        "type": ty,
        "payload": payload,
        "queue": queue,
        "max_retry": 25,
        "retried": retried,
        "error_message": err,
    })
}

/// `base` with `extra`'s fields added.
fn with(mut base: Value, extra: Value) -> Value {
    let obj = base.as_object_mut().unwrap();
    for (k, v) in extra.as_object().unwrap() {
        obj.insert(k.clone(), v.clone());
    }
    base
}

/// A table row: one request with no body, the status it must answer and,
/// when given, its exact text. `label` names the row in a failure.
struct Answer {
    label: &'static str,
    method: Method,
    uri: &'static str,
    status: StatusCode,
    text: Option<&'static str>,
}

/// A row of [`answers`]: `method uri` must answer `status`.
fn answer(label: &'static str, method: Method, uri: &'static str, status: StatusCode) -> Answer {
    Answer {
        label,
        method,
        uri,
        status,
        text: None,
    }
}

impl Answer {
    /// The row's answer must also be exactly `text`.
    fn text(self, text: &'static str) -> Answer {
        Answer {
            text: Some(text),
            ..self
        }
    }
}

/// Sends each row's request in order and checks its answer.
async fn answers(app: &Router, rows: Vec<Answer>) {
    for row in rows {
        let (label, method, uri) = (row.label, row.method.clone(), row.uri);
        let r = http::api(app, row.method, uri, None).await;
        assert_eq!(
            r.status,
            row.status,
            "{label}: {method} {uri}: {}",
            r.text()
        );
        if let Some(text) = row.text {
            assert_eq!(r.text(), text, "{label}: {method} {uri}");
        }
    }
}

/// A row of [`steps`]: a request with no body, and the state its task of
/// `default` must be in afterwards (`None`: gone), when given.
type Step = (
    Method,
    &'static str,
    Option<(&'static str, Option<TaskState>)>,
);

/// Sends `method uri` (no body), checks it answers 204 and, when `then`
/// names a task of `default`, the state that task is in afterwards.
async fn step(
    w: &World,
    method: Method,
    uri: &str,
    then: Option<(&'static str, Option<TaskState>)>,
) {
    let r = http::api(&w.app, method.clone(), uri, None).await;
    assert_eq!(
        r.status,
        StatusCode::NO_CONTENT,
        "{method} {uri}: {}",
        r.text()
    );
    if let Some((id, state)) = then {
        assert_eq!(
            state_of(w, id).await,
            state,
            "{method} {uri}: state of {id}"
        );
    }
}

/// [`step`] for each row, in order.
async fn steps(w: &World, rows: Vec<Step>) {
    for (method, uri, then) in rows {
        step(w, method, uri, then).await;
    }
}

/// The seeded world (see [`world`]).
struct World {
    db: TestDb,
    app: Router,
    inspector: Inspector,
    broker: Broker,
    client: Client,
    clock: SimulatedClock,
}

async fn enqueue(
    client: &Client,
    id: &str,
    queue: &str,
    ty: &str,
    payload: &[u8],
    opts: EnqueueOptions,
) {
    client
        .enqueue(
            &Task::new(ty, payload.to_vec()),
            opts.task_id(id).queue(queue),
        )
        .await
        .unwrap();
}

async fn dequeue_one(broker: &Broker, queue: &str) -> WireTask {
    let mut got = broker
        .dequeue(queue, 1, t0() + chrono::Duration::seconds(30))
        .await
        .unwrap();
    assert_eq!(got.len(), 1);
    got.remove(0).unwrap()
}

/// Seeds, at [`t0`], queue `default` with a task in every state and queue
/// `critical` with one pending task; a server running `act1`; a
/// scheduler entry with two enqueue events. Then sets the clock to
/// [`t_read`].
///
/// `default`: r1 retry (failed once with `boom`, due t0+10m), a1 archived
/// (`fatal`, binary payload), c1 completed (result `done`, retention 1h),
/// act1 active (worker started t0−5s, deadline t0+1795s), p1 and p2
/// pending (p2's payload has a newline), s1 scheduled (t0+1h), g1 and g2
/// aggregating in group `batch`. Counters: processed 3, failed 2.
async fn world(config: WebConfig) -> World {
    let db = support::redis();
    let clock = SimulatedClock::new(t0());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    let inspector = Inspector::from_broker(broker.clone());
    let none = EnqueueOptions::new;

    enqueue(
        &client,
        "r1",
        "default",
        "email:send",
        br#"{"n":1}"#,
        none(),
    )
    .await;
    let t = dequeue_one(&broker, "default").await;
    broker
        .retry(&t, t0() + chrono::Duration::minutes(10), "boom", true)
        .await
        .unwrap();

    enqueue(
        &client,
        "a1",
        "default",
        "img:resize",
        &[0xff, 0x00, 0x41],
        none(),
    )
    .await;
    let t = dequeue_one(&broker, "default").await;
    broker.archive(&t, "fatal").await.unwrap();

    enqueue(
        &client,
        "c1",
        "default",
        "report",
        b"r",
        none().retention(Duration::from_secs(3600)),
    )
    .await;
    let t = dequeue_one(&broker, "default").await;
    broker.write_result("default", "c1", b"done").await.unwrap();
    broker.mark_as_complete(&t).await.unwrap();

    enqueue(&client, "act1", "default", "video:encode", b"v", none()).await;
    dequeue_one(&broker, "default").await;
    let server = ServerInfo {
        host: "web-1".into(),
        pid: 4242,
        server_id: "sid-1".into(),
        concurrency: 10,
        queues: [("critical".to_string(), 6), ("default".to_string(), 3)].into(),
        strict_priority: false,
        status: "active".into(),
        start_time: ts(t0() - chrono::Duration::minutes(5)),
        active_worker_count: 1,
    };
    let worker = WorkerInfo {
        host: "web-1".into(),
        pid: 4242,
        server_id: "sid-1".into(),
        task_id: "act1".into(),
        task_type: "video:encode".into(),
        task_payload: b"v".to_vec(),
        queue: "default".into(),
        start_time: ts(t0() - chrono::Duration::seconds(5)),
        deadline: ts(t0() + chrono::Duration::seconds(1795)),
    };
    broker
        .write_server_state(&server, &[worker], Duration::from_secs(600))
        .await
        .unwrap();

    enqueue(
        &client,
        "p1",
        "default",
        "email:send",
        br#"{"to":"a@b.c"}"#,
        none().deadline(t0() + chrono::Duration::days(1)),
    )
    .await;
    enqueue(
        &client,
        "p2",
        "default",
        "email:send",
        b"line1\nline2",
        none(),
    )
    .await;
    enqueue(
        &client,
        "s1",
        "default",
        "email:send",
        b"later",
        none().process_in(Duration::from_secs(3600)),
    )
    .await;
    enqueue(&client, "g1", "default", "agg", b"1", none().group("batch")).await;
    enqueue(&client, "g2", "default", "agg", b"2", none().group("batch")).await;
    enqueue(&client, "k1", "critical", "report", b"x", none()).await;

    let entry = SchedulerEntry {
        id: "entry-1".into(),
        spec: "@every 30s".into(),
        task_type: "cleanup".into(),
        task_payload: b"{}".to_vec(),
        enqueue_options: vec!["MaxRetry(5)".into(), r#"Queue("critical")"#.into()],
        next_enqueue_time: ts(t0() + chrono::Duration::seconds(30)),
        prev_enqueue_time: ts(t0()),
    };
    let never = SchedulerEntry {
        id: "entry-2".into(),
        spec: "0 * * * *".into(),
        task_type: "hourly".into(),
        task_payload: Vec::new(),
        enqueue_options: Vec::new(),
        next_enqueue_time: ts(t0() + chrono::Duration::minutes(60)),
        prev_enqueue_time: Some(Timestamp::from_utc(None)),
    };
    broker
        .write_scheduler_entries(
            "web-1:4242:sched",
            &[entry, never],
            Duration::from_secs(600),
        )
        .await
        .unwrap();
    for (i, id) in ["ev-a", "ev-b"].iter().enumerate() {
        broker
            .record_scheduler_enqueue_event(
                "entry-1",
                &SchedulerEnqueueEvent {
                    task_id: id.to_string(),
                    enqueue_time: ts(t0() - chrono::Duration::seconds(60 - 30 * i as i64)),
                },
            )
            .await
            .unwrap();
    }

    clock.set(t_read());
    let app = router(AppState::new(inspector.clone(), config));
    World {
        db,
        app,
        inspector,
        broker,
        client,
        clock,
    }
}

/// Fresh statistics on every request (no sharing window), so tests see
/// their own changes.
fn fresh() -> WebConfig {
    WebConfig {
        poll_interval: Duration::ZERO,
        ..WebConfig::default()
    }
}

async fn memory(w: &World, queue: &str) -> i64 {
    w.inspector.queue_info(queue).await.unwrap().memory_usage
}

/// The expected `queueStateSnapshot` of `default` as seeded.
async fn default_snapshot(w: &World) -> Value {
    json!({
        "queue": "default",
        "memory_usage_bytes": memory(w, "default").await,
        "size": 9,
        "groups": 1,
        "latency_msec": 1234,
        "display_latency": "1.23s",
        "active": 1,
        "pending": 2,
        "aggregating": 2,
        "scheduled": 1,
        "retry": 1,
        "archived": 1,
        "completed": 1,
        "processed": 3,
        "succeeded": 1,
        "failed": 2,
        "paused": false,
        "timestamp": "2030-03-10T12:00:01.234Z",
    })
}

fn snapshot_keys() -> Vec<&'static str> {
    vec![
        "active",
        "aggregating",
        "archived",
        "completed",
        "display_latency",
        "failed",
        "groups",
        "latency_msec",
        "memory_usage_bytes",
        "paused",
        "pending",
        "processed",
        "queue",
        "retry",
        "scheduled",
        "size",
        "succeeded",
        "timestamp",
    ]
}

/// §2a `GET /queues`: `{"queues": [...]}` sorted by name, every
/// `queueStateSnapshot` field exact (latency 1234 ms shown as Go's
/// `1.23s`, succeeded = processed − failed, timestamp RFC 3339 with
/// fraction).
#[tokio::test]
async fn queues_list_has_asynqmon_snapshots() {
    let w = world(fresh()).await;
    let body = get_json(&w.app, "/api/queues").await;
    let critical = json!({
        "queue": "critical",
        "memory_usage_bytes": memory(&w, "critical").await,
        "size": 1,
        "groups": 0,
        "latency_msec": 1234,
        "display_latency": "1.23s",
        "active": 0,
        "pending": 1,
        "aggregating": 0,
        "scheduled": 0,
        "retry": 0,
        "archived": 0,
        "completed": 0,
        "processed": 0,
        "succeeded": 0,
        "failed": 0,
        "paused": false,
        "timestamp": "2030-03-10T12:00:01.234Z",
    });
    assert_eq!(
        body,
        json!({"queues": [critical, default_snapshot(&w).await]})
    );
    let mut keys: Vec<&str> = body["queues"][0]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(keys, snapshot_keys());
}

/// §2a `GET /queues/{q}`: `{"current", "history"}` with 10 UTC days,
/// today first (processed 3, succeeded 1, failed 2 today); unknown queue 404.
#[tokio::test]
async fn queue_detail_has_ten_days_of_history() {
    let w = world(fresh()).await;
    let body = get_json(&w.app, "/api/queues/default").await;
    let mut history = vec![json!({
        "queue": "default", "processed": 3, "succeeded": 1, "failed": 2, "date": "2030-03-10",
    })];
    for day in 1..10 {
        let date = (t0() - chrono::Duration::days(day))
            .format("%Y-%m-%d")
            .to_string();
        history.push(json!({
            "queue": "default", "processed": 0, "succeeded": 0, "failed": 0, "date": date,
        }));
    }
    assert_eq!(
        body,
        json!({"current": default_snapshot(&w).await, "history": history})
    );
    assert_eq!(history[9]["date"], "2030-03-01");

    let r = get(&w.app, "/api/queues/nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.content_type(), "text/plain; charset=utf-8");
    assert_eq!(r.text(), "queue not found: queue \"nope\" does not exist\n");
}

/// §2a `GET /queue_stats`: 90 days per queue, `{"stats": {queue: [...]}}`.
#[tokio::test]
async fn queue_stats_has_ninety_days_per_queue() {
    let w = world(fresh()).await;
    let body = get_json(&w.app, "/api/queue_stats").await;
    let stats = body["stats"].as_object().unwrap();
    assert_eq!(
        stats.keys().collect::<Vec<_>>(),
        ["critical", "default"],
        "one entry per queue"
    );
    assert_eq!(body.as_object().unwrap().len(), 1, "only `stats`");
    for (queue, days) in stats {
        let days = days.as_array().unwrap();
        assert_eq!(days.len(), 90, "{queue}");
        assert_eq!(
            days[89],
            json!({"queue": queue, "processed": 0, "succeeded": 0, "failed": 0, "date": "2029-12-11"})
        );
    }
    assert_eq!(
        stats["default"][0],
        json!({"queue": "default", "processed": 3, "succeeded": 1, "failed": 2, "date": "2030-03-10"})
    );
}

/// §2a per-state lists with asynqmon's row shapes: pending (base fields),
/// active (start_time/deadline from the worker, is_orphaned), scheduled
/// and retry (`next_process_at`), archived (`last_failed_at`), completed
/// (`completed_at`, `result`, `ttl_seconds`), aggregating (`group`, plus
/// the queue's `groups`). Each carries the queue's `stats`.
#[tokio::test]
async fn task_lists_have_asynqmon_rows() {
    let w = world(fresh()).await;
    let stats = default_snapshot(&w).await;
    let list = |state: &'static str| {
        let app = w.app.clone();
        async move { get_json(&app, &format!("/api/queues/default/{state}_tasks")).await }
    };

    assert_eq!(
        list("pending").await,
        json!({"stats": stats, "tasks": [
            base("p1", "email:send", r#"{"to":"a@b.c"}"#, "default", 0, ""),
            base("p2", "email:send", "line1\nline2", "default", 0, ""),
        ]})
    );
    assert_eq!(
        list("active").await,
        json!({"stats": stats, "tasks": [with(
            base("act1", "video:encode", "v", "default", 0, ""),
            json!({
                "start_time": "2030-03-10T11:59:55Z",
                "deadline": "2030-03-10T12:29:55Z",
                "is_orphaned": false,
            }),
        )]})
    );
    assert_eq!(
        list("scheduled").await,
        json!({"stats": stats, "tasks": [with(
            base("s1", "email:send", "later", "default", 0, ""),
            json!({"next_process_at": "2030-03-10T13:00:00Z"}),
        )]})
    );
    assert_eq!(
        list("retry").await,
        json!({"stats": stats, "tasks": [with(
            base("r1", "email:send", r#"{"n":1}"#, "default", 1, "boom"),
            json!({"next_process_at": "2030-03-10T12:10:00Z"}),
        )]})
    );
    assert_eq!(
        list("archived").await,
        json!({"stats": stats, "tasks": [with(
            base("a1", "img:resize", "non-printable bytes", "default", 0, "fatal"),
            json!({"last_failed_at": "2030-03-10T12:00:00Z"}),
        )]})
    );
    // TTL: 12:00:00 + 3600 s − 12:00:01.234 = 3598.766 s, truncated.
    assert_eq!(
        list("completed").await,
        json!({"stats": stats, "tasks": [with(
            base("c1", "report", "r", "default", 0, ""),
            json!({"completed_at": "2030-03-10T12:00:00Z", "result": "done", "ttl_seconds": 3598}),
        )]})
    );
    assert_eq!(
        get_json(&w.app, "/api/queues/default/groups/batch/aggregating_tasks").await,
        json!({
            "groups": [{"group": "batch", "size": 2}],
            "stats": stats,
            "tasks": [
                with(base("g1", "agg", "1", "default", 0, ""), json!({"group": "batch"})),
                with(base("g2", "agg", "2", "default", 0, ""), json!({"group": "batch"})),
            ],
        })
    );
    // An unknown group of a known queue is an empty page.
    assert_eq!(
        get_json(&w.app, "/api/queues/default/groups/none/aggregating_tasks").await["tasks"],
        json!([])
    );
    // An unknown queue is 404 on every list.
    for state in [
        "pending",
        "active",
        "scheduled",
        "retry",
        "archived",
        "completed",
    ] {
        let r = get(&w.app, &format!("/api/queues/nope/{state}_tasks")).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{state}");
    }
    let r = get(&w.app, "/api/queues/nope/groups/g/aggregating_tasks").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

/// An active task no server reports has `-` for start and deadline; one
/// whose lease expired is orphaned.
#[tokio::test]
async fn active_task_without_worker_shows_dashes_and_orphan_flag() {
    let w = world(fresh()).await;
    enqueue(&w.client, "lost", "solo", "t", b"z", EnqueueOptions::new()).await;
    dequeue_one(&w.broker, "solo").await; // leased until t0 + 30 s
    w.clock.set(t0() + chrono::Duration::seconds(31));
    let body = get_json(&w.app, "/api/queues/solo/active_tasks").await;
    assert_eq!(
        body["tasks"],
        json!([with(
            base("lost", "t", "z", "solo", 0, ""),
            json!({"start_time": "-", "deadline": "-", "is_orphaned": true}),
        )])
    );
}

/// §2a `?page=` (default 1) and `?size=` (default 20): the default page
/// holds 20, page 2 of size 20 the rest, a page beyond the end is empty,
/// non-numbers fall back to the defaults, page 0 or size 0 is 400.
#[tokio::test]
async fn pages_default_to_one_and_twenty() {
    let w = world(fresh()).await;
    for i in 0..23 {
        enqueue(
            &w.client,
            &format!("n{i:02}"),
            "bulk",
            "t",
            b"",
            EnqueueOptions::new(),
        )
        .await;
    }
    let ids = |v: &Value| {
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let all: Vec<String> = (0..23).map(|i| format!("n{i:02}")).collect();
    let first = get_json(&w.app, "/api/queues/bulk/pending_tasks").await;
    assert_eq!(ids(&first), all[..20]);
    assert_eq!(first["tasks"][0]["payload"], "", "empty payload is \"\"");
    let second = get_json(&w.app, "/api/queues/bulk/pending_tasks?page=2").await;
    assert_eq!(ids(&second), all[20..]);
    let sized = get_json(&w.app, "/api/queues/bulk/pending_tasks?page=3&size=5").await;
    assert_eq!(ids(&sized), all[10..15]);
    let beyond = get_json(&w.app, "/api/queues/bulk/pending_tasks?page=9").await;
    assert_eq!(beyond["tasks"], json!([]));
    assert_eq!(beyond["stats"]["pending"], 23);
    let junk = get_json(&w.app, "/api/queues/bulk/pending_tasks?page=x&size=y").await;
    assert_eq!(ids(&junk), all[..20]);
    for bad in ["page=0", "size=0", "size=-3"] {
        let r = get(&w.app, &format!("/api/queues/bulk/pending_tasks?{bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
    }
}

/// §2a `GET /queues/{q}/tasks/{id}`: asynqmon's `taskInfo` for a task in
/// every state (times RFC 3339 or `""`); unknown task or queue 404.
#[tokio::test]
async fn task_detail_has_asynqmon_fields() {
    let w = world(fresh()).await;
    let detail = |id: &'static str| {
        let app = w.app.clone();
        async move { get_json(&app, &format!("/api/queues/default/tasks/{id}")).await }
    };
    let task = |id: &str, ty: &str, payload: &str, state: &str| {
        json!({
            "id": id, "queue": "default", "type": ty, "payload": payload, "state": state,
            "max_retry": 25, "retried": 0, "error_message": "", "last_failed_at": "",
            "timeout_seconds": 1800, "deadline": "", "next_process_at": "",
            "completed_at": "", "result": "", "ttl_seconds": 0,
        })
    };
    assert_eq!(
        detail("p1").await,
        with(
            task("p1", "email:send", r#"{"to":"a@b.c"}"#, "pending"),
            json!({
                "timeout_seconds": 0,
                "deadline": "2030-03-11T12:00:00Z",
                "next_process_at": "2030-03-10T12:00:01Z",
            })
        )
    );
    assert_eq!(
        detail("act1").await,
        task("act1", "video:encode", "v", "active")
    );
    assert_eq!(
        detail("s1").await,
        with(
            task("s1", "email:send", "later", "scheduled"),
            json!({"next_process_at": "2030-03-10T13:00:00Z"})
        )
    );
    assert_eq!(
        detail("r1").await,
        with(
            task("r1", "email:send", r#"{"n":1}"#, "retry"),
            json!({
                "retried": 1, "error_message": "boom",
                "last_failed_at": "2030-03-10T12:00:00Z",
                "next_process_at": "2030-03-10T12:10:00Z",
            })
        )
    );
    assert_eq!(
        detail("a1").await,
        with(
            task("a1", "img:resize", "non-printable bytes", "archived"),
            json!({"error_message": "fatal", "last_failed_at": "2030-03-10T12:00:00Z"})
        )
    );
    assert_eq!(
        detail("c1").await,
        with(
            task("c1", "report", "r", "completed"),
            json!({"completed_at": "2030-03-10T12:00:00Z", "result": "done", "ttl_seconds": 3598})
        )
    );
    assert_eq!(detail("g1").await, task("g1", "agg", "1", "aggregating"));
    let not_found = StatusCode::NOT_FOUND;
    answers(
        &w.app,
        vec![
            answer(
                "unknown task",
                Method::GET,
                "/api/queues/default/tasks/missing",
                not_found,
            )
            .text("task not found: cannot find task with id=missing in queue \"default\"\n"),
            answer(
                "unknown queue",
                Method::GET,
                "/api/queues/nope/tasks/p1",
                not_found,
            ),
        ],
    )
    .await;
}

/// The task detail shows a payload longer than `--max-payload-length`
/// whole; lists cut it to the limit plus `…` (asynqmon #301 fixed).
#[tokio::test]
async fn lists_cut_payloads_and_detail_does_not() {
    let w = world(WebConfig {
        max_payload_length: 5,
        max_result_length: 2,
        ..fresh()
    })
    .await;
    let list = get_json(&w.app, "/api/queues/default/pending_tasks").await;
    assert_eq!(list["tasks"][0]["payload"], r#"{"to"…"#);
    let done = get_json(&w.app, "/api/queues/default/completed_tasks").await;
    assert_eq!(done["tasks"][0]["result"], "do…");
    let detail = get_json(&w.app, "/api/queues/default/tasks/p1").await;
    assert_eq!(detail["payload"], r#"{"to":"a@b.c"}"#);
    let detail = get_json(&w.app, "/api/queues/default/tasks/c1").await;
    assert_eq!(detail["result"], "done");
}

/// §2a `GET /queues/{q}/groups`: `{"groups", "stats"}`; unknown queue 404.
#[tokio::test]
async fn groups_route() {
    let w = world(fresh()).await;
    assert_eq!(
        get_json(&w.app, "/api/queues/default/groups").await,
        json!({"groups": [{"group": "batch", "size": 2}], "stats": default_snapshot(&w).await})
    );
    let r = get(&w.app, "/api/queues/nope/groups").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

/// §2a `POST /queues/{q}:pause` and `:resume` answer 204 and flip
/// `paused`; pausing twice is 400. A queue name with `:` works (the verb is
/// after the last `:`).
#[tokio::test]
async fn pause_and_resume_routes() {
    let w = world(fresh()).await;
    let r = post(&w.app, "/api/queues/default:pause", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(r.body.is_empty());
    assert_eq!(
        get_json(&w.app, "/api/queues/default").await["current"]["paused"],
        true
    );
    let r = post(&w.app, "/api/queues/default:pause", None).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.text(),
        "FAILED_PRECONDITION: queue \"default\" is already paused\n"
    );
    let r = post(&w.app, "/api/queues/default:resume", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(
        get_json(&w.app, "/api/queues/default").await["current"]["paused"],
        false
    );

    enqueue(&w.client, "x", "team:mail", "t", b"", EnqueueOptions::new()).await;
    let r = post(&w.app, "/api/queues/team:mail:pause", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert!(w.inspector.queue_info("team:mail").await.unwrap().paused);
    assert_eq!(
        get_json(&w.app, "/api/queues/team:mail").await["current"]["paused"],
        true
    );
    // No verb, or an unknown one: the path is the GET/DELETE route → 405.
    let not_allowed = StatusCode::METHOD_NOT_ALLOWED;
    answers(
        &w.app,
        vec![
            answer("no verb", Method::POST, "/api/queues/default", not_allowed),
            answer(
                "unknown verb",
                Method::POST,
                "/api/queues/default:explode",
                not_allowed,
            ),
        ],
    )
    .await;
}

/// §2a `DELETE /queues/{q}`: 400 when not empty, 404 when unknown, 204
/// when empty (and the queue is gone).
#[tokio::test]
async fn delete_queue_route() {
    let w = world(fresh()).await;
    answers(
        &w.app,
        vec![
            answer(
                "not empty",
                Method::DELETE,
                "/api/queues/default",
                StatusCode::BAD_REQUEST,
            )
            .text("queue is not empty: queue \"default\" is not empty\n"),
            answer(
                "unknown",
                Method::DELETE,
                "/api/queues/nope",
                StatusCode::NOT_FOUND,
            ),
        ],
    )
    .await;
    let r = delete(&w.app, "/api/queues/critical/pending_tasks:delete_all").await;
    assert_eq!(r.json(), json!({"deleted": 1}));
    let r = delete(&w.app, "/api/queues/critical").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(w.inspector.queues().await.unwrap(), ["default"]);
    let body = get_json(&w.app, "/api/queues").await;
    assert_eq!(body["queues"].as_array().unwrap().len(), 1);
}

/// The state of `id` in `default`, or `None` when it is gone.
async fn state_of(w: &World, id: &str) -> Option<TaskState> {
    match w.inspector.get_task_info("default", id).await {
        Ok(t) => Some(t.state),
        Err(asynqdeck::Error::TaskNotFound { .. }) => None,
        Err(e) => panic!("{e}"),
    }
}

/// §2a every single-task `:verb` and DELETE route answers 204 and does
/// what it says (the state segment is cosmetic, as in asynqmon); a missing
/// task is 404; a refused change is 400.
#[tokio::test]
async fn single_task_routes() {
    let w = world(fresh()).await;
    steps(
        &w,
        vec![
            (
                Method::POST,
                "/api/queues/default/pending_tasks/p1:archive",
                Some(("p1", Some(TaskState::Archived))),
            ),
            (
                Method::POST,
                "/api/queues/default/archived_tasks/p1:run",
                Some(("p1", Some(TaskState::Pending))),
            ),
            (
                Method::DELETE,
                "/api/queues/default/pending_tasks/p1",
                Some(("p1", None)),
            ),
            (
                Method::POST,
                "/api/queues/default/scheduled_tasks/s1:archive",
                Some(("s1", Some(TaskState::Archived))),
            ),
            (
                Method::DELETE,
                "/api/queues/default/archived_tasks/s1",
                Some(("s1", None)),
            ),
            (
                Method::POST,
                "/api/queues/default/retry_tasks/r1:run",
                Some(("r1", Some(TaskState::Pending))),
            ),
            (
                Method::POST,
                "/api/queues/default/pending_tasks/r1:archive",
                None,
            ),
            (
                Method::POST,
                "/api/queues/default/archived_tasks/r1:run",
                None,
            ),
            (
                Method::DELETE,
                "/api/queues/default/retry_tasks/r1",
                Some(("r1", None)),
            ),
        ],
    )
    .await;

    // A second retry task (in queue `side`) archived by its own route.
    enqueue(&w.client, "r2", "side", "t", b"", EnqueueOptions::new()).await;
    let t = dequeue_one(&w.broker, "side").await;
    w.broker
        .retry(&t, t_read() + chrono::Duration::minutes(5), "again", true)
        .await
        .unwrap();
    step(
        &w,
        Method::POST,
        "/api/queues/side/retry_tasks/r2:archive",
        None,
    )
    .await;
    let r2 = w.inspector.get_task_info("side", "r2").await.unwrap();
    assert_eq!(
        (r2.state, r2.last_err.as_str()),
        (TaskState::Archived, "again")
    );

    steps(
        &w,
        vec![
            (
                Method::DELETE,
                "/api/queues/default/completed_tasks/c1",
                Some(("c1", None)),
            ),
            (
                Method::POST,
                "/api/queues/default/groups/batch/aggregating_tasks/g1:run",
                Some(("g1", Some(TaskState::Pending))),
            ),
            (
                Method::POST,
                "/api/queues/default/groups/batch/aggregating_tasks/g2:archive",
                Some(("g2", Some(TaskState::Archived))),
            ),
        ],
    )
    .await;
    enqueue(
        &w.client,
        "g3",
        "default",
        "agg",
        b"3",
        EnqueueOptions::new().group("batch"),
    )
    .await;
    step(
        &w,
        Method::DELETE,
        "/api/queues/default/groups/batch/aggregating_tasks/g3",
        Some(("g3", None)),
    )
    .await;

    // A scheduled task run by its route.
    enqueue(
        &w.client,
        "s2",
        "default",
        "t",
        b"",
        EnqueueOptions::new().process_in(Duration::from_secs(60)),
    )
    .await;
    step(
        &w,
        Method::POST,
        "/api/queues/default/scheduled_tasks/s2:run",
        Some(("s2", Some(TaskState::Pending))),
    )
    .await;
    // A scheduled task deleted by its route; a retry task archived by its route.
    enqueue(
        &w.client,
        "s3",
        "default",
        "t",
        b"",
        EnqueueOptions::new().process_in(Duration::from_secs(60)),
    )
    .await;
    step(
        &w,
        Method::DELETE,
        "/api/queues/default/scheduled_tasks/s3",
        Some(("s3", None)),
    )
    .await;

    // Cancel publishes; the task stays active.
    step(
        &w,
        Method::POST,
        "/api/queues/default/active_tasks/act1:cancel",
        Some(("act1", Some(TaskState::Active))),
    )
    .await;

    // Errors.
    let (not_found, bad) = (StatusCode::NOT_FOUND, StatusCode::BAD_REQUEST);
    answers(
        &w.app,
        vec![
            answer(
                "missing task",
                Method::DELETE,
                "/api/queues/default/pending_tasks/missing",
                not_found,
            ),
            answer(
                "unknown queue",
                Method::POST,
                "/api/queues/nope/retry_tasks/r1:run",
                not_found,
            ),
            answer(
                "running task",
                Method::POST,
                "/api/queues/default/scheduled_tasks/act1:run",
                bad,
            )
            .text("FAILED_PRECONDITION: task is already running\n"),
            answer(
                "already archived",
                Method::POST,
                "/api/queues/default/retry_tasks/g2:archive",
                bad,
            ),
            answer(
                "empty id",
                Method::POST,
                "/api/queues/default/pending_tasks/:archive",
                bad,
            )
            .text("route parameters should not be empty\n"),
        ],
    )
    .await;
}

/// A task id containing `:` is addressed whole by DELETE and split at the
/// last `:` by a POST verb.
#[tokio::test]
async fn task_ids_with_colons() {
    let w = world(fresh()).await;
    enqueue(
        &w.client,
        "job:7",
        "default",
        "t",
        b"",
        EnqueueOptions::new(),
    )
    .await;
    let r = post(
        &w.app,
        "/api/queues/default/pending_tasks/job:7:archive",
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(state_of(&w, "job:7").await, Some(TaskState::Archived));
    assert_eq!(
        get_json(&w.app, "/api/queues/default/tasks/job:7").await["state"],
        "archived"
    );
    let r = delete(&w.app, "/api/queues/default/archived_tasks/job:7").await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    assert_eq!(state_of(&w, "job:7").await, None);
}

/// §2a every batch route: `{"task_ids": [...]}` in, the asynqmon id lists
/// out (unknown ids land in the failure list, request order kept).
#[tokio::test]
async fn batch_routes() {
    let w = world(fresh()).await;
    let batch = |path: &'static str, ids: &'static str| {
        let app = w.app.clone();
        async move {
            let r = post(&app, path, Some(&format!(r#"{{"task_ids": {ids}}}"#))).await;
            assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
            assert_eq!(r.content_type(), "application/json");
            r.json()
        }
    };
    for (path, ids, want) in [
        (
            "/api/queues/default/pending_tasks:batch_archive",
            r#"["p1","zz"]"#,
            json!({"archived_ids": ["p1"], "error_ids": ["zz"]}),
        ),
        (
            "/api/queues/default/archived_tasks:batch_run",
            r#"["p1","a1","zz"]"#,
            json!({"pending_ids": ["p1", "a1"], "error_ids": ["zz"]}),
        ),
        (
            "/api/queues/default/pending_tasks:batch_delete",
            r#"["p1","zz"]"#,
            json!({"deleted_ids": ["p1"], "failed_ids": ["zz"]}),
        ),
        (
            "/api/queues/default/scheduled_tasks:batch_archive",
            r#"["s1"]"#,
            json!({"archived_ids": ["s1"], "error_ids": []}),
        ),
        (
            "/api/queues/default/archived_tasks:batch_delete",
            r#"["s1"]"#,
            json!({"deleted_ids": ["s1"], "failed_ids": []}),
        ),
        (
            "/api/queues/default/retry_tasks:batch_run",
            r#"["r1"]"#,
            json!({"pending_ids": ["r1"], "error_ids": []}),
        ),
        (
            "/api/queues/default/retry_tasks:batch_archive",
            r#"["r1"]"#,
            json!({"archived_ids": ["r1"], "error_ids": []}),
        ),
        (
            "/api/queues/default/retry_tasks:batch_delete",
            r#"["r1"]"#,
            json!({"deleted_ids": ["r1"], "failed_ids": []}),
        ),
    ] {
        assert_eq!(batch(path, ids).await, want, "{path} {ids}");
    }
    for id in ["s4", "s5", "s6"] {
        enqueue(
            &w.client,
            id,
            "default",
            "t",
            b"",
            EnqueueOptions::new().process_in(Duration::from_secs(60)),
        )
        .await;
    }
    for (path, ids, want) in [
        (
            "/api/queues/default/scheduled_tasks:batch_run",
            r#"["s4"]"#,
            json!({"pending_ids": ["s4"], "error_ids": []}),
        ),
        (
            "/api/queues/default/scheduled_tasks:batch_delete",
            r#"["s5","s4"]"#,
            json!({"deleted_ids": ["s5", "s4"], "failed_ids": []}),
        ),
        (
            "/api/queues/default/completed_tasks:batch_delete",
            r#"["c1","c1"]"#,
            json!({"deleted_ids": ["c1"], "failed_ids": ["c1"]}),
        ),
        (
            "/api/queues/default/groups/batch/aggregating_tasks:batch_run",
            r#"["g1"]"#,
            json!({"pending_ids": ["g1"], "error_ids": []}),
        ),
        (
            "/api/queues/default/groups/batch/aggregating_tasks:batch_archive",
            r#"["g2"]"#,
            json!({"archived_ids": ["g2"], "error_ids": []}),
        ),
    ] {
        assert_eq!(batch(path, ids).await, want, "{path} {ids}");
    }
    enqueue(
        &w.client,
        "g3",
        "default",
        "agg",
        b"3",
        EnqueueOptions::new().group("batch"),
    )
    .await;
    for (path, ids, want) in [
        (
            "/api/queues/default/groups/batch/aggregating_tasks:batch_delete",
            r#"["g3","zz"]"#,
            json!({"deleted_ids": ["g3"], "failed_ids": ["zz"]}),
        ),
        (
            "/api/queues/default/active_tasks:batch_cancel",
            r#"["act1","other"]"#,
            json!({"canceled_ids": ["act1", "other"], "error_ids": []}),
        ),
    ] {
        assert_eq!(batch(path, ids).await, want, "{path} {ids}");
    }
    // Missing or null task_ids is an empty batch (Go decodes it as nil).
    assert_eq!(
        batch("/api/queues/default/pending_tasks:batch_delete", "null").await,
        json!({"deleted_ids": [], "failed_ids": []})
    );
    let r = post(
        &w.app,
        "/api/queues/default/pending_tasks:batch_delete",
        Some("{}"),
    )
    .await;
    assert_eq!(r.json(), json!({"deleted_ids": [], "failed_ids": []}));
    let after = w.inspector.queue_info("default").await.unwrap();
    assert_eq!(
        (
            after.pending,
            after.scheduled,
            after.retry,
            after.archived,
            after.completed,
            after.aggregating
        ),
        (3, 1, 0, 1, 0, 0),
        "pending p2, a1, g1; scheduled s6; archived g2"
    );
}

/// Batch bodies as asynqmon reads them: unknown fields, bad JSON, an
/// empty body and a body over 1,000,000 bytes are 400; one of exactly the
/// limit is read.
#[tokio::test]
async fn batch_body_rules() {
    let w = world(fresh()).await;
    let path = "/api/queues/default/pending_tasks:batch_delete";
    for body in [
        r#"{"task_ids": ["p1"], "extra": 1}"#,
        "{not json",
        "",
        r#"{"task_ids": "p1"}"#,
    ] {
        let r = post(&w.app, path, Some(body)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{body:?}: {}", r.text());
        assert_eq!(r.content_type(), "text/plain; charset=utf-8");
    }
    assert_eq!(state_of(&w, "p1").await, Some(TaskState::Pending));
    let head = r#"{"task_ids": ["p1"]}"#;
    let exact = format!("{head}{}", " ".repeat(1_000_000 - head.len()));
    let r = post(&w.app, path, Some(&exact)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.json(), json!({"deleted_ids": ["p1"], "failed_ids": []}));
    let over = format!("{head}{}", " ".repeat(1_000_001 - head.len()));
    let r = post(&w.app, path, Some(&over)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
}

/// §2a every "all" route: counts named `deleted`, `scheduled` (run) and
/// `archived`; `cancel_all` is 204.
#[tokio::test]
async fn all_routes() {
    let w = world(fresh()).await;
    let call = |method: Method, path: &'static str| {
        let app = w.app.clone();
        async move {
            let r = http::api(&app, method, path, None).await;
            assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
            r.json()
        }
    };
    let client = &w.client;
    let add_scheduled = |ids: &'static [&'static str]| async move {
        for id in ids {
            enqueue(
                client,
                id,
                "default",
                "t",
                b"",
                EnqueueOptions::new().process_in(Duration::from_secs(60)),
            )
            .await;
        }
    };
    for (method, path, want) in [
        (
            Method::POST,
            "/api/queues/default/retry_tasks:archive_all",
            json!({"archived": 1}),
        ),
        (
            Method::POST,
            "/api/queues/default/archived_tasks:run_all",
            json!({"scheduled": 2}),
        ),
        (
            Method::POST,
            "/api/queues/default/pending_tasks:archive_all",
            json!({"archived": 4}),
        ),
        (
            Method::DELETE,
            "/api/queues/default/archived_tasks:delete_all",
            json!({"deleted": 4}),
        ),
        (
            Method::POST,
            "/api/queues/default/scheduled_tasks:run_all",
            json!({"scheduled": 1}),
        ),
    ] {
        assert_eq!(call(method.clone(), path).await, want, "{method} {path}");
    }
    add_scheduled(&["s2", "s3"]).await;
    assert_eq!(
        call(
            Method::POST,
            "/api/queues/default/scheduled_tasks:archive_all"
        )
        .await,
        json!({"archived": 2})
    );
    add_scheduled(&["s4"]).await;
    for (method, path, want) in [
        (
            Method::DELETE,
            "/api/queues/default/scheduled_tasks:delete_all",
            json!({"deleted": 1}),
        ),
        (
            Method::DELETE,
            "/api/queues/default/pending_tasks:delete_all",
            json!({"deleted": 1}),
        ),
        (
            Method::DELETE,
            "/api/queues/default/completed_tasks:delete_all",
            json!({"deleted": 1}),
        ),
        (
            Method::DELETE,
            "/api/queues/default/retry_tasks:delete_all",
            json!({"deleted": 0}),
        ),
        (
            Method::POST,
            "/api/queues/default/retry_tasks:run_all",
            json!({"scheduled": 0}),
        ),
        (
            Method::POST,
            "/api/queues/default/groups/batch/aggregating_tasks:run_all",
            json!({"scheduled": 2}),
        ),
    ] {
        assert_eq!(call(method.clone(), path).await, want, "{method} {path}");
    }
    for id in ["g3", "g4"] {
        enqueue(
            &w.client,
            id,
            "default",
            "agg",
            b"",
            EnqueueOptions::new().group("batch"),
        )
        .await;
    }
    assert_eq!(
        call(
            Method::POST,
            "/api/queues/default/groups/batch/aggregating_tasks:archive_all"
        )
        .await,
        json!({"archived": 2})
    );
    enqueue(
        &w.client,
        "g5",
        "default",
        "agg",
        b"",
        EnqueueOptions::new().group("batch"),
    )
    .await;
    assert_eq!(
        call(
            Method::DELETE,
            "/api/queues/default/groups/batch/aggregating_tasks:delete_all"
        )
        .await,
        json!({"deleted": 1})
    );
    answers(
        &w.app,
        vec![
            answer(
                "cancel all",
                Method::POST,
                "/api/queues/default/active_tasks:cancel_all",
                StatusCode::NO_CONTENT,
            ),
            answer(
                "cancel all, unknown queue",
                Method::POST,
                "/api/queues/nope/active_tasks:cancel_all",
                StatusCode::NOT_FOUND,
            ),
            answer(
                "delete all, unknown queue",
                Method::DELETE,
                "/api/queues/nope/pending_tasks:delete_all",
                StatusCode::NOT_FOUND,
            ),
        ],
    )
    .await;

    let info = w.inspector.queue_info("default").await.unwrap();
    assert_eq!(
        (
            info.pending,
            info.active,
            info.scheduled,
            info.retry,
            info.archived,
            info.completed,
            info.aggregating
        ),
        (2, 1, 0, 0, 4, 0, 0),
        "pending g1, g2; archived s2, s3, g3, g4"
    );
}

/// Paths that are not asynqmon routes are 404; a route with the wrong
/// method is 405; `/api/metrics` (the Prometheus proxy) is a 404 with a
/// JSON error.
#[tokio::test]
async fn unknown_routes_and_methods() {
    let w = world(fresh()).await;
    for (method, path, status) in [
        (Method::GET, "/api/nope", StatusCode::NOT_FOUND),
        (
            Method::GET,
            "/api/queues/default/aggregating_tasks",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            "/api/queues/default/bogus_tasks",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            "/api/queues/default/pending_tasks:run_all",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            "/api/queues/default/completed_tasks:archive_all",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            "/api/queues/default/active_tasks:batch_delete",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            "/api/queues/default/pending_tasks/p1:run",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::POST,
            "/api/queues/default/completed_tasks/c1:archive",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::DELETE,
            "/api/queues/default/active_tasks/act1",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            "/api/queues/default/pending_tasks/p1",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::POST,
            "/api/queues/default/pending_tasks:delete_all",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::DELETE,
            "/api/queues/default/pending_tasks:archive_all",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::POST,
            "/api/queues/default/pending_tasks",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::DELETE,
            "/api/queues/default/tasks/p1",
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        (
            Method::GET,
            "/api/queues/default/groups/batch",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            "/api/queues/default/groups/batch/aggregating_tasks/g1/deeper",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::GET,
            "/api/queues/default/groups/batch/other_tasks",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::POST,
            "/api/queues/default/groups/batch/aggregating_tasks:cancel_all",
            StatusCode::NOT_FOUND,
        ),
        (
            Method::DELETE,
            "/api/queues/default/groups/batch/other/g1",
            StatusCode::NOT_FOUND,
        ),
    ] {
        let r = http::api(&w.app, method.clone(), path, None).await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.text());
    }
    assert_eq!(
        state_of(&w, "p1").await,
        Some(TaskState::Pending),
        "nothing changed"
    );
    let r = get(&w.app, "/api/metrics?duration=3600").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.content_type(), "application/json");
    assert!(
        r.json()["error"]
            .as_str()
            .unwrap()
            .contains("not supported"),
        "{}",
        r.text()
    );
}

/// §2a `GET /servers`: asynqmon's `serverInfo` with `active_workers`.
#[tokio::test]
async fn servers_route() {
    let w = world(fresh()).await;
    assert_eq!(
        get_json(&w.app, "/api/servers").await,
        json!({"servers": [{
            "id": "sid-1",
            "host": "web-1",
            "pid": 4242,
            "concurrency": 10,
            "queue_priorities": {"critical": 6, "default": 3},
            "strict_priority_enabled": false,
            "start_time": "2030-03-10T11:55:00Z",
            "status": "active",
            "active_workers": [{
                "task_id": "act1",
                "queue": "default",
                "task_type": "video:encode",
                "task_payload": "v",
                "start_time": "2030-03-10T11:59:55Z",
            }],
        }]})
    );
}

/// §2a `GET /scheduler_entries` (`prev_enqueue_at` omitted when the entry
/// never fired) and `GET /scheduler_entries/{id}/enqueue_events` (newest
/// first, paged; an unknown entry has none).
#[tokio::test]
async fn scheduler_routes() {
    let w = world(fresh()).await;
    assert_eq!(
        get_json(&w.app, "/api/scheduler_entries").await,
        json!({"entries": [
            {
                "id": "entry-2",
                "spec": "0 * * * *",
                "task_type": "hourly",
                "task_payload": "",
                "options": [],
                "next_enqueue_at": "2030-03-10T13:00:00Z",
            },
            {
                "id": "entry-1",
                "spec": "@every 30s",
                "task_type": "cleanup",
                "task_payload": "{}",
                "options": ["MaxRetry(5)", "Queue(\"critical\")"],
                "next_enqueue_at": "2030-03-10T12:00:30Z",
                "prev_enqueue_at": "2030-03-10T12:00:00Z",
            },
        ]})
    );
    assert_eq!(
        get_json(&w.app, "/api/scheduler_entries/entry-1/enqueue_events").await,
        json!({"events": [
            {"task_id": "ev-b", "enqueued_at": "2030-03-10T11:59:30Z"},
            {"task_id": "ev-a", "enqueued_at": "2030-03-10T11:59:00Z"},
        ]})
    );
    assert_eq!(
        get_json(
            &w.app,
            "/api/scheduler_entries/entry-1/enqueue_events?page=2&size=1"
        )
        .await,
        json!({"events": [{"task_id": "ev-a", "enqueued_at": "2030-03-10T11:59:00Z"}]})
    );
    assert_eq!(
        get_json(&w.app, "/api/scheduler_entries/none/enqueue_events").await,
        json!({"events": []})
    );
}

/// §2a `GET /redis_info` on a plain server: address, parsed and raw
/// `INFO`, `cluster: false`, `raw_cluster_nodes: ""`, `queue_locations: null`.
#[tokio::test]
async fn redis_info_route() {
    let w = world(fresh()).await;
    let body = get_json(&w.app, "/api/redis_info").await;
    let mut keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "address",
            "cluster",
            "info",
            "queue_locations",
            "raw_cluster_nodes",
            "raw_info"
        ]
    );
    assert_eq!(body["address"], format!("127.0.0.1:{}", w.db.port));
    assert_eq!(body["cluster"], false);
    assert_eq!(body["raw_cluster_nodes"], "");
    assert_eq!(body["queue_locations"], Value::Null);
    let raw = body["raw_info"].as_str().unwrap();
    assert!(raw.starts_with("# Server\r\n"), "{raw}");
    let version = raw
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap()
        .trim_end();
    assert_eq!(body["info"]["redis_version"], version);
    assert_eq!(body["info"]["cluster_enabled"], "0");
    assert_eq!(body["info"]["tcp_port"], w.db.port.to_string());
}

/// A private cluster-mode redis-server on a free port (one node holding
/// every slot), killed on drop.
struct ClusterNode {
    port: u16,
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn cluster_node() -> ClusterNode {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("asynqdeck-test-cluster-{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    let child = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args([
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
        ])
        .arg("--dir")
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server");
    let node = ClusterNode { port, child, dir };
    let url = format!("redis://127.0.0.1:{port}/0");
    let client = redis::Client::open(url).unwrap();
    let mut conn = None;
    for _ in 0..200 {
        if let Ok(c) = client.get_multiplexed_async_connection().await {
            conn = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let mut conn = conn.expect("cluster node did not start");
    let _: () = redis::cmd("CLUSTER")
        .arg("ADDSLOTSRANGE")
        .arg(0)
        .arg(16383)
        .query_async(&mut conn)
        .await
        .unwrap();
    for _ in 0..200 {
        let info: String = redis::cmd("CLUSTER")
            .arg("INFO")
            .query_async(&mut conn)
            .await
            .unwrap();
        if info.contains("cluster_state:ok") {
            return node;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("cluster did not become ok");
}

/// §2a `GET /redis_info` on a cluster node: `info`/`raw_info` are
/// `CLUSTER INFO`, `raw_cluster_nodes` is `CLUSTER NODES`, and each queue's
/// key slot (of `asynq:{q}:pending`) with the node serving it.
#[tokio::test]
async fn redis_info_route_on_a_cluster() {
    let node = cluster_node().await;
    let url = format!("redis://127.0.0.1:{}/0", node.port);
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    // Queues as asynq registers them (a plain SADD, which works on a cluster).
    let _: i64 = redis::cmd("SADD")
        .arg("asynq:queues")
        .arg("default")
        .arg("critical")
        .query_async(&mut conn)
        .await
        .unwrap();
    let inspector = Inspector::connect(&url).await.unwrap();
    let app = router(AppState::new(inspector, fresh()));
    let body = get_json(&app, "/api/redis_info").await;
    let mut slots = Vec::new();
    for q in ["critical", "default"] {
        let s: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(format!("asynq:{{{q}}}:pending"))
            .query_async(&mut conn)
            .await
            .unwrap();
        slots.push(s);
    }
    let addr = format!("127.0.0.1:{}", node.port);
    assert_eq!(body["address"], addr);
    assert_eq!(body["cluster"], true);
    assert_eq!(body["info"]["cluster_state"], "ok");
    assert_eq!(body["info"]["cluster_slots_assigned"], "16384");
    assert!(
        body["raw_info"]
            .as_str()
            .unwrap()
            .starts_with("cluster_state:ok\r\n")
    );
    let nodes_raw: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query_async(&mut conn)
        .await
        .unwrap();
    let node_id = nodes_raw.split(' ').next().unwrap().to_string();
    assert!(
        body["raw_cluster_nodes"]
            .as_str()
            .unwrap()
            .starts_with(&node_id),
        "{}",
        body["raw_cluster_nodes"]
    );
    assert_eq!(
        body["queue_locations"],
        json!([
            {"queue": "critical", "keyslot": slots[0], "nodes": [addr]},
            {"queue": "default", "keyslot": slots[1], "nodes": [addr]},
        ])
    );
}

/// Security (issue 4 item 7): in read-only mode every mutation is 403
/// (asynqmon answers 405) and reads work.
#[tokio::test]
async fn read_only_mutations_are_refused() {
    let w = world(WebConfig {
        read_only: true,
        ..fresh()
    })
    .await;
    for (method, path) in [
        (Method::POST, "/api/queues/default:pause"),
        (Method::DELETE, "/api/queues/default"),
        (Method::DELETE, "/api/queues/default/pending_tasks/p1"),
        (
            Method::POST,
            "/api/queues/default/pending_tasks:batch_delete",
        ),
        (
            Method::DELETE,
            "/api/queues/default/pending_tasks:delete_all",
        ),
    ] {
        let r = http::api(&w.app, method.clone(), path, Some(r#"{"task_ids":["p1"]}"#)).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method} {path}");
    }
    assert_eq!(state_of(&w, "p1").await, Some(TaskState::Pending));
    assert_eq!(
        get_json(&w.app, "/api/queues").await["queues"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

/// A dashboard reached as dash.local (a library user lists the names it
/// is served under: R15): a cross-origin mutation is 403; a same-origin
/// one and one without `Origin` (curl) work.
#[tokio::test]
async fn cross_origin_mutations_are_refused() {
    let w = world(WebConfig {
        allowed_hosts: asynqdeck::web::AllowedHosts::LoopbackAnd(vec!["dash.local".into()]),
        ..fresh()
    })
    .await;
    let evil = [("host", "dash.local:8080"), ("origin", "http://evil")];
    let r = http::call(
        &w.app,
        Method::POST,
        "/api/queues/default:pause",
        &evil,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = http::call(
        &w.app,
        Method::DELETE,
        "/api/queues/default/pending_tasks/p1",
        &evil,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let site = [("sec-fetch-site", "cross-site")];
    let r = http::call(
        &w.app,
        Method::POST,
        "/api/queues/default:pause",
        &site,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert!(!w.inspector.queue_info("default").await.unwrap().paused);
    assert_eq!(state_of(&w, "p1").await, Some(TaskState::Pending));
    // Reads are not refused cross-origin (CORS decides what a page may read).
    let r = http::call(&w.app, Method::GET, "/api/queues", &evil, None).await;
    assert_eq!(r.status, StatusCode::OK);

    let same = [
        ("host", "dash.local:8080"),
        ("origin", "http://dash.local:8080"),
    ];
    let r = http::call(
        &w.app,
        Method::POST,
        "/api/queues/default:pause",
        &same,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = post(&w.app, "/api/queues/default:resume", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "curl-like, no Origin");
}

/// Basic auth and the root path apply to `/api` too.
#[tokio::test]
async fn root_path_and_basic_auth() {
    let w = world(WebConfig {
        root_path: "/asynq".into(),
        basic_auth: Some(("ops".into(), "s3cret".into())),
        ..fresh()
    })
    .await;
    let r = get(&w.app, "/asynq/api/queues").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    // base64("ops:s3cret")
    let auth = [("authorization", "Basic b3BzOnMzY3JldA==")];
    let r = http::call(&w.app, Method::GET, "/asynq/api/queues", &auth, None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["queues"].as_array().unwrap().len(), 2);
    let r = http::call(
        &w.app,
        Method::POST,
        "/asynq/api/queues/default:pause",
        &auth,
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let r = http::call(&w.app, Method::GET, "/api/queues", &auth, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "only under the root path");
}

/// Queue numbers come from the shared snapshot: within one poll interval
/// a change made elsewhere is not seen, an API action refreshes it.
#[tokio::test]
async fn queue_numbers_are_shared_per_interval() {
    let w = world(WebConfig {
        poll_interval: Duration::from_secs(3600),
        ..WebConfig::default()
    })
    .await;
    let pending = |v: Value| v["queues"][1]["pending"].clone();
    assert_eq!(pending(get_json(&w.app, "/api/queues").await), 2);
    enqueue(&w.client, "p3", "default", "t", b"", EnqueueOptions::new()).await;
    assert_eq!(pending(get_json(&w.app, "/api/queues").await), 2, "cached");
    assert_eq!(
        get_json(&w.app, "/api/queues/default/pending_tasks").await["stats"]["pending"],
        2,
        "lists share the snapshot"
    );
    let r = post(&w.app, "/api/queues/default/pending_tasks/p3:archive", None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let body = get_json(&w.app, "/api/queues").await;
    assert_eq!(pending(body.clone()), 2);
    assert_eq!(
        body["queues"][1]["archived"], 2,
        "refreshed after the action"
    );
}

/// A task whose stored message does not decode is listed as a row with
/// its id and a `corrupt` reason; its detail is 422, not 500.
#[tokio::test]
async fn corrupt_task_is_a_row_and_a_422() {
    let w = world(fresh()).await;
    let mut raw = w.db.raw().await;
    let _: () = redis::cmd("HSET")
        .arg("asynq:{default}:t:p2")
        .arg("msg")
        .arg(b"\xff\xff\xff".to_vec())
        .query_async(&mut raw)
        .await
        .unwrap();
    let body = get_json(&w.app, "/api/queues/default/pending_tasks").await;
    let row = &body["tasks"][1];
    assert_eq!(row["id"], "p2");
    assert_eq!(row["type"], "");
    assert!(row["corrupt"].as_str().unwrap().len() > 3, "{row}");
    assert!(body["tasks"][0].get("corrupt").is_none());
    let r = get(&w.app, "/api/queues/default/tasks/p2").await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(
        r.text().starts_with("corrupt data in Redis"),
        "{}",
        r.text()
    );
}

fn unix_rfc3339(v: &Value) -> String {
    match v.as_i64().unwrap() {
        0 => String::new(),
        s => DateTime::from_timestamp(s, 0)
            .unwrap()
            .format("%Y-%m-%dT%H:%M:%SZ")
            .to_string(),
    }
}

/// Asserts that the API's task detail equals Go's `inspect task` view,
/// field by field under asynqmon's names.
fn assert_detail_matches_go(api: &Value, go: &Value) {
    let id = go["id"].as_str().unwrap();
    assert_eq!(api["id"], go["id"], "{id} id");
    assert_eq!(api["queue"], go["queue"], "{id} queue");
    assert_eq!(api["type"], go["type"], "{id} type");
    assert_eq!(api["payload"], go["payload"], "{id} payload");
    assert_eq!(api["state"], go["state"], "{id} state");
    assert_eq!(api["max_retry"], go["max_retry"], "{id} max_retry");
    assert_eq!(api["retried"], go["retried"], "{id} retried");
    assert_eq!(api["error_message"], go["last_err"], "{id} error_message");
    assert_eq!(
        api["last_failed_at"],
        unix_rfc3339(&go["last_failed_at"]),
        "{id} last_failed_at"
    );
    assert_eq!(api["timeout_seconds"], go["timeout_secs"], "{id} timeout");
    assert_eq!(
        api["deadline"],
        unix_rfc3339(&go["deadline"]),
        "{id} deadline"
    );
    assert_eq!(
        api["completed_at"],
        unix_rfc3339(&go["completed_at"]),
        "{id} completed_at"
    );
    let result = hex::decode(go["result_hex"].as_str().unwrap()).unwrap();
    assert_eq!(
        api["result"],
        String::from_utf8(result).unwrap(),
        "{id} result"
    );
    if go["state"] == "pending" {
        assert!(!api["next_process_at"].as_str().unwrap().is_empty());
    } else {
        assert_eq!(
            api["next_process_at"],
            unix_rfc3339(&go["next_process_at"]),
            "{id} next"
        );
    }
    if go["state"] == "completed" {
        let expected = go["completed_at"].as_i64().unwrap()
            + go["retention_secs"].as_i64().unwrap()
            - Utc::now().timestamp();
        let ttl = api["ttl_seconds"].as_i64().unwrap();
        assert!((ttl - expected).abs() <= 2, "{id} ttl {ttl} vs {expected}");
    } else {
        assert_eq!(api["ttl_seconds"], 0, "{id} ttl");
    }
}

/// Issue 4 "Done when": a Go-enqueued mix of tasks in every state, made by
/// Go workers (fail → retry, skip → archived, result → completed, a
/// sleeping handler → active), reads through the API with the counts Go's
/// `GetQueueInfo` reports and, per state, task fields equal to Go's
/// `GetTaskInfo`; active rows carry the Go worker's start and deadline and
/// `/servers` matches Go's `Servers`.
#[tokio::test]
async fn go_made_tasks_match_go_inspector() {
    let db = support::redis();
    let enqueue_go = |args: &[&str]| {
        let mut all = vec!["enqueue"];
        all.extend_from_slice(args);
        db.peer_ok(&all)["id"].as_str().unwrap().to_string()
    };
    let retry = enqueue_go(&["--type", "go:retry", "--payload", r#"{"r":1}"#]);
    db.peer_lines(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "fail",
        "--retry-delay",
        "1h",
        "--max-duration",
        "20s",
    ]);
    let archived = enqueue_go(&["--type", "go:skip", "--payload", "s", "--timeout", "90s"]);
    db.peer_lines(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "skip",
        "--max-duration",
        "20s",
    ]);
    let completed = enqueue_go(&["--type", "go:done", "--payload", "c", "--retention", "1h"]);
    db.peer_lines(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "result:go-result",
        "--max-duration",
        "20s",
    ]);
    let scheduled = enqueue_go(&["--type", "go:later", "--payload", "l", "--process-in", "1h"]);
    let deadline = (Utc::now() + chrono::Duration::days(2))
        .timestamp()
        .to_string();
    let aggregating = enqueue_go(&[
        "--type",
        "go:agg",
        "--payload",
        "g",
        "--group",
        "gg",
        "--deadline",
        &deadline,
    ]);
    let active = enqueue_go(&["--type", "go:sleep", "--payload", "z"]);
    let _worker = db.peer_spawn(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "sleep:60s",
        "--max-duration",
        "60s",
    ]);
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let seen = support::eventually(Duration::from_secs(20), || {
        let inspector = inspector.clone();
        let active = active.clone();
        async move {
            let servers = inspector.servers().await.ok()?;
            servers
                .iter()
                .any(|s| s.active_workers.iter().any(|w| w.task_id == active))
                .then_some(())
        }
    })
    .await;
    assert!(
        seen.is_some(),
        "the Go worker never reported the active task"
    );
    let pending = enqueue_go(&["--type", "go:wait", "--payload", "line\nbreak"]);

    let app = router(AppState::new(inspector.clone(), fresh()));
    let go_info = db.peer_ok(&["inspect", "queue-info", "--queue", "default"]);
    let current = get_json(&app, "/api/queues/default").await["current"].clone();
    for field in [
        "size",
        "groups",
        "pending",
        "active",
        "scheduled",
        "retry",
        "archived",
        "completed",
        "aggregating",
        "processed",
        "failed",
        "paused",
    ] {
        assert_eq!(current[field], go_info[field], "{field}");
    }
    assert_eq!(
        current["succeeded"].as_i64().unwrap(),
        go_info["processed"].as_i64().unwrap() - go_info["failed"].as_i64().unwrap()
    );
    assert_eq!(
        (
            current["processed"].as_i64(),
            current["failed"].as_i64(),
            current["size"].as_i64()
        ),
        (Some(3), Some(2), Some(7))
    );
    let latency = current["latency_msec"].as_i64().unwrap();
    assert!(
        (latency - go_info["latency_ms"].as_i64().unwrap()).abs() <= 2_000,
        "latency {latency} vs {}",
        go_info["latency_ms"]
    );
    let mem = go_info["memory_usage"].as_i64().unwrap();
    let ours = current["memory_usage_bytes"].as_i64().unwrap();
    assert!((ours - mem).abs() <= mem / 5, "memory {ours} vs {mem}");

    for (state, id, list) in [
        ("pending", &pending, "pending_tasks"),
        ("active", &active, "active_tasks"),
        ("scheduled", &scheduled, "scheduled_tasks"),
        ("retry", &retry, "retry_tasks"),
        ("archived", &archived, "archived_tasks"),
        ("completed", &completed, "completed_tasks"),
        ("aggregating", &aggregating, "groups/gg/aggregating_tasks"),
    ] {
        let go = db.peer_ok(&["inspect", "task", "--queue", "default", "--id", id]);
        assert_eq!(go["state"], state);
        let api = get_json(&app, &format!("/api/queues/default/tasks/{id}")).await;
        assert_detail_matches_go(&api, &go);

        let rows = get_json(&app, &format!("/api/queues/default/{list}")).await;
        let tasks = rows["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 1, "{state}");
        let row = &tasks[0];
        for (ours, theirs) in [
            ("id", "id"),
            ("type", "type"),
            ("payload", "payload"),
            ("queue", "queue"),
            ("max_retry", "max_retry"),
            ("retried", "retried"),
            ("error_message", "last_err"),
        ] {
            assert_eq!(row[ours], go[theirs], "{state} row {ours}");
        }
        match state {
            "scheduled" | "retry" => assert_eq!(
                row["next_process_at"],
                unix_rfc3339(&go["next_process_at"]),
                "{state} next_process_at"
            ),
            "archived" => assert_eq!(row["last_failed_at"], unix_rfc3339(&go["last_failed_at"])),
            "completed" => {
                assert_eq!(row["completed_at"], unix_rfc3339(&go["completed_at"]));
                assert_eq!(row["result"], "go-result");
            }
            "aggregating" => assert_eq!(row["group"], go["group"]),
            "active" => assert_eq!(row["is_orphaned"], go["is_orphaned"]),
            _ => {}
        }
    }
    assert_eq!(
        get_json(&app, &format!("/api/queues/default/tasks/{retry}")).await["error_message"],
        "peer failure"
    );

    let go_servers = db.peer_ok(&["inspect", "servers"]);
    let api_servers = get_json(&app, "/api/servers").await;
    let live: Vec<&Value> = go_servers
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| {
            s["active_workers"]
                .as_array()
                .is_some_and(|w| !w.is_empty())
        })
        .collect();
    assert_eq!(live.len(), 1);
    let go_server = live[0];
    let api_server = api_servers["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == go_server["server_id"])
        .expect("the Go server is listed");
    assert_eq!(api_server["host"], go_server["host"]);
    assert_eq!(api_server["pid"], go_server["pid"]);
    assert_eq!(api_server["concurrency"], go_server["concurrency"]);
    assert_eq!(api_server["queue_priorities"], go_server["queues"]);
    assert_eq!(
        api_server["strict_priority_enabled"],
        go_server["strict_priority"]
    );
    assert_eq!(api_server["status"], go_server["status"]);
    assert_eq!(
        api_server["start_time"],
        unix_rfc3339(&go_server["started"])
    );
    let go_worker = &go_server["active_workers"][0];
    assert_eq!(
        api_server["active_workers"][0]["task_id"],
        go_worker["task_id"]
    );
    assert_eq!(
        api_server["active_workers"][0]["task_payload"],
        go_worker["task_payload"]
    );
    assert_eq!(
        api_server["active_workers"][0]["start_time"],
        unix_rfc3339(&go_worker["started"])
    );
    let active_row = &get_json(&app, "/api/queues/default/active_tasks").await["tasks"][0];
    assert_eq!(
        active_row["start_time"],
        unix_rfc3339(&go_worker["started"])
    );
    assert_eq!(active_row["deadline"], unix_rfc3339(&go_worker["deadline"]));
    let rows = inspector
        .list_tasks(
            "default",
            TaskState::Active,
            asynqdeck::inspector::Page::default(),
        )
        .await
        .unwrap();
    assert!(matches!(&rows[0], TaskRow::Task(t) if t.id == active));
}
