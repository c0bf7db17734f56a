//! "Run now" on `/schedulers`: one enqueue of a published entry's task, as
//! a fire would make it, recorded in the entry's history; for entries of
//! our `Scheduler` and entries in Go's form; refused without the CSRF
//! token, in read-only mode, for unknown entries and for entries whose
//! options cannot be read. Also runs in the cluster pass.

use std::time::Duration;

use asynqdeck::broker::proto::SchedulerEntry;
use asynqdeck::broker::{Broker, Page, keys};
use asynqdeck::scheduler::{Scheduler, SchedulerOpts};
use asynqdeck::web::WebConfig;
use asynqdeck::{EnqueueOptions, Inspector, Task, TaskInfo, TaskState};
use axum::http::StatusCode;
use redis::AsyncCommands;

use crate::support::http::{self, Dashboard};
use crate::support::{self, TestDb};

const WAIT: Duration = Duration::from_secs(30);

/// An entry in Go's form (option strings as Go's `Option.String()`), and
/// one whose options cannot be read, published by a "Go" scheduler.
async fn publish_go_entries(broker: &Broker) {
    let entry = |id: &str, options: &[&str]| SchedulerEntry {
        id: id.into(),
        spec: "@every 1h".into(),
        task_type: "go:<task>".into(),
        task_payload: br#"{"go":true}"#.to_vec(),
        enqueue_options: options.iter().map(|o| o.to_string()).collect(),
        next_enqueue_time: None,
        prev_enqueue_time: None,
    };
    broker
        .write_scheduler_entries(
            "go-host:7:0b5d",
            &[
                entry(
                    "go-entry",
                    &[r#"Queue("critical")"#, "MaxRetry(5)", "Timeout(1m30s)"],
                ),
                entry("bad-entry", &["MaxRetry(5)", "Bogus(<x>)"]),
            ],
            Duration::from_secs(120),
        )
        .await
        .unwrap();
}

/// The task id a "Run now" answer names.
fn task_id_of(fragment: &str) -> String {
    let start = fragment.find(r#"class="mono task-id""#).expect(fragment);
    let rest = &fragment[start..];
    let open = rest.find('>').unwrap() + 1;
    let close = rest.find("</a>").unwrap();
    http::unescape(&rest[open..close])
}

/// Posts "Run now" for `entry` and returns the task it made, as stored.
async fn run_now(dash: &Dashboard, inspector: &Inspector, entry: &str, queue: &str) -> TaskInfo {
    let reply = dash.post(&format!("/schedulers/{entry}/run"), "").await;
    let (status, body) = reply.parts();
    assert_eq!(status, StatusCode::OK, "{body}");
    let id = task_id_of(&body);
    assert!(
        body.contains(&format!(
            "in queue <span class=\"mono\">{queue}</span>, pending."
        )),
        "{body}"
    );
    inspector.get_task_info(queue, &id).await.unwrap()
}

async fn history(inspector: &Inspector, entry: &str) -> Vec<String> {
    inspector
        .scheduler_enqueue_events(entry, Page::new(1, 100).unwrap())
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.task_id)
        .collect()
}

async fn pending_count(db: &TestDb, queue: &str) -> usize {
    let mut conn = db.raw().await;
    let n: usize = conn.llen(keys::pending_key(queue)).await.unwrap();
    n
}

/// Our scheduler's entry (never due during the test) and a Go entry: each
/// "Run now" makes exactly the task a fire makes (type, payload, queue,
/// MaxRetry, timeout) and one history event with its id; the button is
/// there for both and disabled, naming the options, for the unreadable
/// one; that one, an unknown id and a POST without the CSRF token are
/// refused and enqueue nothing.
#[tokio::test]
async fn run_now_enqueues_as_a_fire_and_records_history() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let scheduler = Scheduler::new(
        broker.clone(),
        SchedulerOpts {
            heartbeat_interval: Duration::from_secs(1),
            ..SchedulerOpts::default()
        },
    );
    let ours = scheduler
        .register(
            "0 0 1 1 *",
            Task::new("report:run", br#"{"x":1}"#.to_vec()),
            EnqueueOptions::new()
                .queue("low")
                .max_retry(3)
                .timeout(Duration::from_secs(90)),
        )
        .unwrap();
    scheduler.start().await.unwrap();
    publish_go_entries(&broker).await;
    let inspector = Inspector::from_broker(broker.clone());
    support::eventually(WAIT, || async {
        let entries = inspector.scheduler_entries().await.unwrap();
        entries.iter().any(|e| e.id == ours).then_some(())
    })
    .await
    .expect("our entry published after one heartbeat");
    let dash = Dashboard::new(inspector.clone(), WebConfig::default());

    let (status, page) = http::page(&dash.app, "/schedulers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    for id in [ours.as_str(), "go-entry"] {
        let button = format!(r##"hx-post="/schedulers/{id}/run" hx-target="#run-now-result""##);
        assert!(page.contains(&button), "{id}: {page}");
    }
    assert!(page.contains(r#"<div id="run-now-result" aria-live="polite"></div>"#));
    assert!(
        page.contains(
            r#"<button type="button" class="btn small run-now" disabled title="Cannot run by hand: options not understood: Bogus(&#60;x&#62;)">Run now</button>"#
        ),
        "{page}"
    );
    assert!(!page.contains("/schedulers/bad-entry/run"));

    // Ours: the registered task and options.
    let before = chrono::Utc::now().timestamp();
    let task = run_now(&dash, &inspector, &ours, "low").await;
    assert_eq!(task.task_type, "report:run");
    assert_eq!(task.payload, br#"{"x":1}"#);
    assert_eq!(task.queue, "low");
    assert_eq!(task.max_retry, 3);
    assert_eq!(task.timeout, Duration::from_secs(90));
    assert_eq!(task.state, TaskState::Pending);
    let events = inspector
        .scheduler_enqueue_events(&ours, Page::new(1, 100).unwrap())
        .await
        .unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].task_id, task.id);
    let at = events[0].enqueued_at.timestamp();
    assert!(at >= before && at <= chrono::Utc::now().timestamp(), "{at}");

    // Go's: its option strings read back.
    let go = run_now(&dash, &inspector, "go-entry", "critical").await;
    assert_eq!(go.task_type, "go:<task>");
    assert_eq!(go.payload, br#"{"go":true}"#);
    assert_eq!((go.max_retry, go.timeout), (5, Duration::from_secs(90)));
    assert_eq!(history(&inspector, "go-entry").await, [go.id]);

    // Refusals: nothing enqueued, nothing recorded.
    let (status, text) = dash.post("/schedulers/bad-entry/run", "").await.parts();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        text.contains(r#"its options ["Bogus(<x>)"] cannot be read"#),
        "{text}"
    );
    let (status, text) = dash.post("/schedulers/no-such-entry/run", "").await.parts();
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        text,
        "scheduler entry not found: no running scheduler has an entry with id=no-such-entry"
    );
    let uri = format!("/schedulers/{ours}/run");
    let (status, text) = http::post_form(&dash.app, &uri, "", None).await.parts();
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(text, "missing or wrong CSRF token");
    assert_eq!(pending_count(&db, "low").await, 1);
    assert_eq!(pending_count(&db, "critical").await, 1);
    assert_eq!(history(&inspector, &ours).await, [task.id]);
    assert!(history(&inspector, "bad-entry").await.is_empty());

    scheduler.shutdown().await;
}

/// Read-only mode: no button, no Actions column, and the POST is refused
/// with 403 even with the CSRF token; nothing is enqueued.
#[tokio::test]
async fn read_only_has_no_run_now() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    publish_go_entries(&broker).await;
    let config = WebConfig {
        read_only: true,
        ..WebConfig::default()
    };
    let dash = Dashboard::new(Inspector::from_broker(broker), config);
    let (status, page) = http::page(&dash.app, "/schedulers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(page.contains("go-entry"), "{page}");
    assert!(!page.contains("Run now"), "{page}");
    assert!(!page.contains("<th>Actions</th>"));
    let (status, text) = dash.post("/schedulers/go-entry/run", "").await.parts();
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(text, "read-only mode: changes are disabled");
    assert_eq!(pending_count(&db, "critical").await, 0);
}
