//! Enqueue, clone and edit from the dashboard (issue 17 item 8): the form
//! with every option, refused input shown again with the values kept,
//! "Clone" prefilled from a task, the payload edit of pending, scheduled,
//! retry and archived tasks, read-only mode, and the audit entries.

use std::time::Duration;

use asynqdeck::inspector::AuditFilter;
use asynqdeck::web::WebConfig;
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};
use axum::http::StatusCode;

use crate::support::clock::{broker_at, now};
use crate::support::http::{self, Dashboard};
use crate::support::{self, TestDb};

async fn dashboard(db: &TestDb, read_only: bool) -> (Dashboard, Inspector) {
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let d = Dashboard::new(
        inspector.clone(),
        WebConfig {
            read_only,
            poll_interval: Duration::ZERO,
            ..WebConfig::default()
        },
    );
    (d, inspector)
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `application/x-www-form-urlencoded` value: every byte but
/// alphanumerics percent-encoded.
fn encode(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Every option of the form reaches the stored task; the answer opens the
/// new task's page; the change is audited as `enqueue`, 1 task.
#[tokio::test]
async fn the_form_enqueues_with_every_option() {
    let db = support::redis();
    let (d, inspector) = dashboard(&db, false).await;
    let body = form(&[
        ("task_type", "email:send"),
        ("payload_format", "json"),
        ("payload", r#"{"to":"a@example.com"}"#),
        ("queue", "mail"),
        ("max_retry", "4"),
        ("timeout", "1m30s"),
        ("deadline", "2030-01-02T03:04:05Z"),
        ("process_in", "1h"),
        ("unique", "2h"),
        ("task_id", "form-1"),
        ("retention", "24h"),
        ("group", ""),
        ("headers", "trace: t-1\nx-tenant: acme"),
    ]);
    let r = d.post("/enqueue", &body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.header("hx-redirect"), Some("/queues/mail/tasks/form-1"));
    let t = inspector.get_task_info("mail", "form-1").await.unwrap();
    assert_eq!(t.task_type, "email:send");
    assert_eq!(t.payload, br#"{"to":"a@example.com"}"#);
    assert_eq!(t.state, TaskState::Scheduled);
    assert_eq!(t.max_retry, 4);
    assert_eq!(t.timeout, Duration::from_secs(90));
    assert_eq!(t.deadline, Some("2030-01-02T03:04:05Z".parse().unwrap()));
    assert_eq!(t.retention, Duration::from_secs(86_400));
    assert_eq!(
        t.headers.into_iter().collect::<Vec<_>>(),
        [
            ("trace".to_string(), "t-1".to_string()),
            ("x-tenant".to_string(), "acme".to_string())
        ]
    );
    let next = t.next_process_at.unwrap() - chrono::Utc::now();
    assert!(
        next <= chrono::Duration::hours(1) && next > chrono::Duration::minutes(59),
        "{next}"
    );
    let mut raw = db.raw().await;
    let ttl: i64 = redis::cmd("TTL")
        .arg(asynqdeck::broker::keys::unique_key(
            "mail",
            "email:send",
            Some(br#"{"to":"a@example.com"}"#.as_slice()),
        ))
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(
        (3 * 3600 - 60..=3 * 3600).contains(&ttl),
        "lock until process-at + 2h: {ttl}"
    );
    let audit = inspector
        .audit_log(&AuditFilter::default(), None, 5)
        .await
        .unwrap();
    let e = &audit.entries[0];
    assert_eq!(
        (
            e.verb.as_str(),
            e.queue.as_str(),
            e.scope.as_str(),
            e.count,
            e.result.as_str()
        ),
        ("enqueue", "mail", "tasks/form-1", Some(1), "ok")
    );
}

/// Refused input answers the form again (recorded as 422): the values kept (escaped)
/// and every problem listed; nothing is enqueued; the audit entry carries
/// the problems.
#[tokio::test]
async fn refused_input_keeps_the_values_and_lists_the_problems() {
    let db = support::redis();
    let (d, inspector) = dashboard(&db, false).await;
    let body = form(&[
        ("task_type", ""),
        ("payload_format", "json"),
        ("payload", "{\"a\": <b>"),
        ("queue", "mail"),
        ("timeout", "3x"),
    ]);
    let r = d.post("/enqueue", &body).await;
    assert_eq!(r.status, StatusCode::OK);
    let html = r.text();
    assert!(html.contains("<li>type: required</li>"), "{html}");
    assert!(
        html.contains("<li>timeout: time: unknown unit &#34;x&#34; in duration &#34;3x&#34;</li>")
            || html.contains(
                "<li>timeout: time: unknown unit &quot;x&quot; in duration &quot;3x&quot;</li>"
            ),
        "{html}"
    );
    assert!(
        html.contains("{&#34;a&#34;: &#60;b&#62;</textarea>")
            || html.contains("{&quot;a&quot;: &lt;b&gt;</textarea>"),
        "{html}"
    );
    assert!(html.contains("name=\"queue\" value=\"mail\""), "{html}");
    assert_eq!(inspector.queues().await.unwrap(), Vec::<String>::new());
    let audit = inspector
        .audit_log(&AuditFilter::default(), None, 1)
        .await
        .unwrap();
    let result = &audit.entries[0].result;
    assert!(
        result.starts_with("error: 422 type: required; payload: not valid JSON: "),
        "{result}"
    );
    assert!(
        result.ends_with("; timeout: time: unknown unit \"x\" in duration \"3x\""),
        "{result}"
    );

    // A Redis-side refusal (the id is taken) is shown the same way.
    Client::connect(&db.url())
        .await
        .unwrap()
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().task_id("taken"),
        )
        .await
        .unwrap();
    let r = d
        .post(
            "/enqueue",
            &form(&[("task_type", "t"), ("task_id", "taken")]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.text()
            .contains("<li>task ID conflicts with another task</li>"),
        "{}",
        r.text()
    );
}

/// "Clone" prefills the form from the task: type, payload (JSON; binary as
/// base64), queue, max retry, timeout, retention, group, headers; not the id.
#[tokio::test]
async fn clone_prefills_the_form_from_a_task() {
    let db = support::redis();
    let (d, _) = dashboard(&db, false).await;
    let client = Client::connect(&db.url()).await.unwrap();
    client
        .enqueue(
            &Task::new("report", br#"{"n":1}"#.to_vec()).with_header("k", "v"),
            EnqueueOptions::new()
                .queue("low")
                .task_id("src")
                .max_retry(7)
                .timeout(Duration::from_secs(60))
                .retention(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    client
        .enqueue(
            &Task::new("blob", vec![0u8, 255, 1]),
            EnqueueOptions::new().queue("low").task_id("bin"),
        )
        .await
        .unwrap();
    let html = http::get(&d.app, "/enqueue?clone_queue=low&clone_id=src")
        .await
        .text();
    for want in [
        "name=\"task_type\" value=\"report\"",
        "name=\"queue\" value=\"low\"",
        "name=\"max_retry\" value=\"7\"",
        "name=\"timeout\" value=\"1m0s\"",
        "name=\"retention\" value=\"1h0m0s\"",
        "name=\"task_id\" value=\"\"",
        "<option value=\"json\" selected>json</option>",
        "k: v</textarea>",
        "Cloned from task <span class=\"mono\">low/src</span>",
    ] {
        assert!(html.contains(want), "{want} in {html}");
    }
    let html = http::get(&d.app, "/enqueue?clone_queue=low&clone_id=bin")
        .await
        .text();
    assert!(
        html.contains("<option value=\"base64\" selected>base64</option>"),
        "{html}"
    );
    assert!(html.contains(">\nAP8B</textarea>"), "{html}");
    let task_page = http::get(&d.app, "/queues/low/tasks/src").await.text();
    assert!(
        task_page.contains("href=\"/enqueue?clone_queue=low&#38;clone_id=src\"")
            || task_page.contains("href=\"/enqueue?clone_queue=low&amp;clone_id=src\""),
        "{task_page}"
    );
    assert!(
        task_page.contains("href=\"/queues/low/tasks/src/edit\""),
        "{task_page}"
    );
}

/// The payload edit changes only the payload of a retry task (Retried,
/// LastErr and its place in the retry set stay), works on pending and
/// archived tasks too, and refuses an active one (the form again, recorded as 422).
#[tokio::test]
async fn edit_changes_only_the_payload() {
    let db = support::redis();
    let (d, inspector) = dashboard(&db, false).await;
    let clock = asynqdeck::clock::SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let client = Client::from_broker(broker.clone());
    client
        .enqueue(
            &Task::new("t", b"old".to_vec()),
            EnqueueOptions::new().task_id("r"),
        )
        .await
        .unwrap();
    client
        .enqueue(
            &Task::new("t", b"p".to_vec()),
            EnqueueOptions::new().task_id("p"),
        )
        .await
        .unwrap();
    // Lease and fail "r" once: it goes to retry with Retried 1 and LastErr.
    let lease_until = now() + chrono::Duration::seconds(30);
    let leased = broker.dequeue("default", 1, lease_until).await.unwrap();
    assert_eq!(leased.len(), 1);
    let task = leased.into_iter().next().unwrap().unwrap();
    assert_eq!(task.msg.id, "r");
    let retry_at = now() + chrono::Duration::seconds(300);
    broker.retry(&task, retry_at, "boom", true).await.unwrap();
    let before = inspector.get_task_info("default", "r").await.unwrap();
    assert_eq!(before.state, TaskState::Retry);

    let r = d
        .post(
            "/queues/default/tasks/r/edit",
            &form(&[("payload_format", "text"), ("payload", "new")]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    assert_eq!(r.header("hx-redirect"), Some("/queues/default/tasks/r"));
    let after = inspector.get_task_info("default", "r").await.unwrap();
    assert_eq!(after.payload, b"new");
    assert_eq!(
        (
            after.state,
            after.retried,
            after.last_err.as_str(),
            after.next_process_at
        ),
        (
            TaskState::Retry,
            before.retried,
            before.last_err.as_str(),
            before.next_process_at
        )
    );

    let r = d
        .post(
            "/queues/default/tasks/p/edit",
            &form(&[("payload_format", "base64"), ("payload", "AAE=")]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let p = inspector.get_task_info("default", "p").await.unwrap();
    assert_eq!((p.payload, p.state), (vec![0u8, 1], TaskState::Pending));

    // Lease "p": active tasks cannot be edited.
    assert_eq!(
        broker
            .dequeue("default", 1, lease_until)
            .await
            .unwrap()
            .len(),
        1
    );
    let r = d
        .post(
            "/queues/default/tasks/p/edit",
            &form(&[("payload_format", "text"), ("payload", "x")]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.text()
            .contains("cannot edit the payload of a task in this state"),
        "{}",
        r.text()
    );
    let e = &inspector
        .audit_log(&AuditFilter::default(), None, 1)
        .await
        .unwrap()
        .entries[0];
    assert_eq!(
        (
            e.verb.as_str(),
            e.queue.as_str(),
            e.scope.as_str(),
            e.status
        ),
        ("edit", "default", "tasks/p", 422)
    );
}

/// Read-only mode: no Enqueue link, no form, no Clone or Edit buttons, and
/// the POSTs are refused.
#[tokio::test]
async fn read_only_has_no_forms() {
    let db = support::redis();
    let (d, _) = dashboard(&db, true).await;
    Client::connect(&db.url())
        .await
        .unwrap()
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().task_id("a"),
        )
        .await
        .unwrap();
    let html = http::get(&d.app, "/enqueue").await.text();
    assert!(html.contains("Read-only mode: enqueueing is disabled."));
    assert!(!html.contains("<form id=\"enqueue-form\""));
    assert!(!html.contains(">Enqueue</a>"));
    let task = http::get(&d.app, "/queues/default/tasks/a").await.text();
    assert!(!task.contains("class=\"btn small clone\""));
    assert!(!task.contains("Edit payload"));
    let r = d.post("/enqueue", &form(&[("task_type", "t")])).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = d
        .post("/queues/default/tasks/a/edit", &form(&[("payload", "y")]))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
}

/// A payload of 6 MiB (8 MiB as base64, past axum's default 2 MB body
/// limit) is edited and enqueued unchanged; a body past the forms' 64 MiB
/// limit answers 413 and changes nothing.
#[tokio::test]
async fn large_payloads_are_edited_and_enqueued() {
    use base64::Engine as _;
    let db = support::redis();
    let (d, inspector) = dashboard(&db, false).await;
    let client = Client::connect(&db.url()).await.unwrap();
    client
        .enqueue(
            &Task::new("big", b"small".to_vec()),
            EnqueueOptions::new().task_id("b"),
        )
        .await
        .unwrap();
    let payload: Vec<u8> = (0..6 * 1024 * 1024u32)
        .map(|i| (i * 7 % 251) as u8)
        .collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(&payload);

    let r = d
        .post(
            "/queues/default/tasks/b/edit",
            &form(&[("payload_format", "base64"), ("payload", &b64)]),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
    let t = inspector.get_task_info("default", "b").await.unwrap();
    assert_eq!(t.payload.len(), payload.len());
    assert!(t.payload == payload);

    let r = d
        .post(
            "/enqueue",
            &form(&[
                ("queue", "default"),
                ("task_type", "big"),
                ("payload_format", "base64"),
                ("payload", &b64),
                ("task_id", "b2"),
            ]),
        )
        .await;
    assert!(r.status.is_success(), "{} {}", r.status, r.text());
    let t = inspector.get_task_info("default", "b2").await.unwrap();
    assert!(t.payload == payload);

    let huge = "A".repeat(asynqdeck::web::MAX_FORM_BODY);
    let r = d
        .post(
            "/queues/default/tasks/b/edit",
            &form(&[("payload_format", "text"), ("payload", &huge)]),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    let t = inspector.get_task_info("default", "b").await.unwrap();
    assert!(t.payload == payload);
}
