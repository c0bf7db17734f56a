//! The periodic task scheduler against real Go asynq v0.26.0 (issue 16
//! item 7; wire spec §4.4, §4.5, §6.17, §8, §9.10), both directions on one
//! Redis (a database of the private server, or the local cluster in the
//! cluster pass: the peer then dials it with `--cluster-nodes`):
//!
//! - Go's `Inspector.SchedulerEntries` and `ListSchedulerEnqueueEvents`
//!   read what our [`Scheduler`] published, field by field;
//! - our Inspector and `/api/scheduler_entries` read what a Go
//!   `asynq.Scheduler` published, field by field against Go's Inspector,
//!   and `/schedulers` lists it;
//! - a Go server processes the tasks our scheduler enqueued, with their
//!   type, payload, queue, `MaxRetry` and `Timeout`.
//!
//! Reads of both sides are compared only when they saw the same published
//! snapshot (our read before and after Go's are equal: no heartbeat in
//! between); every wait polls for a state.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use asynqdeck::broker::{Broker, Page};
use asynqdeck::inspector::{SchedulerEnqueueEvent, SchedulerEntry};
use asynqdeck::scheduler::{Scheduler, SchedulerOpts};
use asynqdeck::web::WebConfig;
use asynqdeck::{EnqueueOptions, Inspector, Task};
use axum::http::{Method, StatusCode};
use chrono::{DateTime, Datelike, TimeZone, Utc};
use serde_json::Value;

use crate::support;
use crate::support::http::Dashboard;

/// Overall cap of each wait (a loaded 2-CPU machine; the waits end on a
/// state, usually within a few seconds).
const WAIT: Duration = Duration::from_secs(60);

fn nanos(t: Option<DateTime<Utc>>) -> i64 {
    t.map(|t| t.timestamp_nanos_opt().unwrap()).unwrap_or(0)
}

fn now_ns() -> i64 {
    Utc::now().timestamp_nanos_opt().unwrap()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The element of a JSON array whose `key` is `id`.
fn by_id<'a>(list: &'a Value, key: &str, id: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|e| e[key] == id)
        .unwrap_or_else(|| panic!("{id} not in {list}"))
}

/// Asserts Go's view of an entry (asynq-peer `inspect scheduler-entries`)
/// equals ours: id, spec, type, payload, Go's parsed option strings
/// `go_options`, next and prev to the nanosecond.
fn assert_entry(go: &Value, ours: &SchedulerEntry, go_options: &[&str]) {
    assert_eq!(go["id"], ours.id, "id");
    assert_eq!(go["spec"], ours.spec, "spec of {}", ours.id);
    assert_eq!(go["task_type"], ours.task_type, "type of {}", ours.id);
    assert_eq!(
        go["task_payload"].as_str().unwrap().as_bytes(),
        ours.payload.as_slice(),
        "payload of {}",
        ours.id
    );
    assert_eq!(strings(&go["opts"]), go_options, "options of {}", ours.id);
    assert_eq!(
        go["next_ns"],
        nanos(ours.next_enqueue_at),
        "next of {}",
        ours.id
    );
    assert_eq!(
        go["prev_ns"],
        nanos(ours.prev_enqueue_at),
        "prev of {}",
        ours.id
    );
    assert_eq!(
        go["prev_is_zero"],
        ours.prev_enqueue_at.is_none(),
        "prev zero of {}",
        ours.id
    );
}

/// Asserts Go's events of an entry (`inspect scheduler-events`) equal ours,
/// in order (newest first), to the nanosecond.
fn assert_events(go: &Value, ours: &[SchedulerEnqueueEvent]) {
    let go = go.as_array().unwrap();
    assert_eq!(go.len(), ours.len(), "events: {go:?} vs {ours:?}");
    for (g, o) in go.iter().zip(ours) {
        assert_eq!(g["task_id"], o.task_id);
        assert_eq!(g["enqueued_at_ns"], nanos(Some(o.enqueued_at)));
    }
}

/// The next 1 January, 00:00 UTC after now (`0 0 1 1 *`).
fn next_new_year() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(Utc::now().year() + 1, 1, 1, 0, 0, 0)
        .unwrap()
}

const DEADLINE_RFC3339: &str = "2030-01-02T03:04:05Z";
const DEADLINE_GO: &str = "Deadline(Wed Jan  2 03:04:05 UTC 2030)";

/// Our scheduler publishes a firing entry and one with every option; Go's
/// Inspector lists both with our id, spec, type, payload, the option
/// strings Go reads (exactly; not `TaskID`, `Group`, `Header`), next and
/// prev to the nanosecond, and the firing entry's history with our task
/// ids and times; the tasks, read by Go, carry the entry's options. After
/// our shutdown Go sees no entry and no history.
#[tokio::test]
async fn go_inspector_reads_our_scheduler_entries_and_history() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let fired = Arc::new(Mutex::new(Vec::<String>::new()));
    let f = fired.clone();
    let scheduler = Scheduler::new(
        broker,
        SchedulerOpts {
            heartbeat_interval: Duration::from_secs(1),
            post_enqueue: Some(Arc::new(move |r| {
                if let Ok(info) = r {
                    f.lock().unwrap().push(info.id.clone());
                }
            })),
            ..SchedulerOpts::default()
        },
    );
    let tick = scheduler
        .register(
            "@every 1s",
            Task::new("sched:tick", br#"{"n":1}"#.to_vec()),
            EnqueueOptions::new()
                .queue("low")
                .max_retry(3)
                .timeout(Duration::from_secs(30)),
        )
        .unwrap();
    let deadline = DateTime::parse_from_rfc3339(DEADLINE_RFC3339)
        .unwrap()
        .with_timezone(&Utc);
    let full = scheduler
        .register(
            "0 0 1 1 *",
            Task::new("sched:full", b"full".to_vec()),
            EnqueueOptions::new()
                .queue("reports")
                .max_retry(7)
                .timeout(Duration::from_secs(90))
                .deadline(deadline)
                .unique(Duration::from_secs(3600))
                .process_in(Duration::from_secs(120))
                .retention(Duration::from_secs(86_400))
                .task_id("tid")
                .group("grp")
                .header("k", "v"),
        )
        .unwrap();
    scheduler.start().await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();

    // Wait until the firing entry was published with a prev time, and read
    // Go's view between two equal reads of ours.
    let (go_entries, ours) = support::eventually(WAIT, || async {
        let before = inspector.scheduler_entries().await.ok()?;
        if before.len() != 2
            || before
                .iter()
                .all(|e| e.id != tick || e.prev_enqueue_at.is_none())
        {
            return None;
        }
        let go_entries = db.peer_ok_async(&["inspect", "scheduler-entries"]).await;
        let after = inspector.scheduler_entries().await.ok()?;
        (before == after).then_some((go_entries, before))
    })
    .await
    .expect("our entries published, the firing one with a prev time");
    assert_eq!(go_entries.as_array().unwrap().len(), 2, "{go_entries}");
    let ours_tick = ours.iter().find(|e| e.id == tick).unwrap();
    let ours_full = ours.iter().find(|e| e.id == full).unwrap();
    // What we published is what was registered, in Go's forms.
    assert_eq!(
        ours_tick.options,
        ["Queue(\"low\")", "MaxRetry(3)", "Timeout(30s)"]
    );
    let full_stored = [
        "Queue(\"reports\")",
        "MaxRetry(7)",
        "Timeout(1m30s)",
        DEADLINE_GO,
        "Unique(1h0m0s)",
        "ProcessIn(2m0s)",
        "Retention(24h0m0s)",
        "TaskID(\"tid\")",
        "Group(\"grp\")",
        "Header([\"k\",\"v\"])",
    ];
    assert_eq!(ours_full.options, full_stored);
    let prev = ours_tick.prev_enqueue_at.unwrap();
    assert_eq!(prev.timestamp_subsec_nanos(), 0, "ticks on whole seconds");
    assert_eq!(
        ours_tick.next_enqueue_at,
        Some(prev + chrono::Duration::seconds(1))
    );
    assert_eq!(ours_full.next_enqueue_at, Some(next_new_year()));
    assert_eq!(ours_full.prev_enqueue_at, None);
    // Go reads the same, field by field; of the options, those Go parses.
    assert_entry(
        by_id(&go_entries, "id", &tick),
        ours_tick,
        &["Queue(\"low\")", "MaxRetry(3)", "Timeout(30s)"],
    );
    assert_entry(
        by_id(&go_entries, "id", &full),
        ours_full,
        &full_stored[..7],
    );

    // History: Go lists the events of our fires (ids from the post-enqueue
    // hook), newest first, with our times.
    let (go_events, ours_events) = support::eventually(WAIT, || async {
        let ids: Vec<String> = fired.lock().unwrap().clone();
        let before = inspector
            .scheduler_enqueue_events(&tick, Page::new(1, 100).unwrap())
            .await
            .ok()?;
        let mut recorded: Vec<String> = before.iter().map(|e| e.task_id.clone()).collect();
        recorded.sort();
        let mut hooked = ids.clone();
        hooked.sort();
        if ids.len() < 2 || recorded != hooked {
            return None;
        }
        let go_events = db
            .peer_ok_async(&["inspect", "scheduler-events", "--entry", &tick])
            .await;
        let after = inspector
            .scheduler_enqueue_events(&tick, Page::new(1, 100).unwrap())
            .await
            .ok()?;
        (before == after).then_some((go_events, before))
    })
    .await
    .expect("two fires recorded");
    assert_events(&go_events, &ours_events);
    for pair in ours_events.windows(2) {
        assert!(pair[0].enqueued_at > pair[1].enqueued_at, "newest first");
    }
    // Each task as Go's Inspector reads it: the entry's type, payload and
    // options.
    for ev in &ours_events {
        let t = db
            .peer_ok_async(&["inspect", "task", "--queue", "low", "--id", &ev.task_id])
            .await;
        assert_eq!(t["type"], "sched:tick");
        assert_eq!(t["payload"], r#"{"n":1}"#);
        assert_eq!(t["queue"], "low");
        assert_eq!(t["state"], "pending");
        assert_eq!(t["max_retry"], 3);
        assert_eq!(t["timeout_secs"], 30);
    }

    scheduler.shutdown().await;
    assert_eq!(
        db.peer_ok_async(&["inspect", "scheduler-entries"]).await,
        serde_json::json!([])
    );
    assert_eq!(
        db.peer_ok_async(&["inspect", "scheduler-events", "--entry", &tick])
            .await,
        serde_json::json!([])
    );
}

/// Two Go schedulers (one firing each second, one with every option Go
/// has): our Inspector lists their entries with Go's id, spec, type,
/// payload, stored option strings, next and prev to the nanosecond; the
/// asynqmon API lists the options Go's Inspector lists, RFC 3339 times,
/// no prev for an entry that never fired; the firing entry's history reads
/// as Go reads it.
#[tokio::test]
async fn our_inspector_and_api_read_go_scheduler_entries() {
    let db = support::redis();
    let tick_sched = db.peer_spawn(&[
        "schedule",
        "--spec",
        "@every 1s",
        "--type",
        "go:tick",
        "--payload",
        "p1",
        "--max-retry",
        "2",
        "--queue",
        "low",
        "--timeout",
        "45s",
        "--for",
        "2m",
    ]);
    let full_sched = db.peer_spawn(&[
        "schedule",
        "--spec",
        "@every 1h",
        "--type",
        "go:full",
        "--payload",
        r#"{"a":1}"#,
        "--max-retry",
        "5",
        "--queue",
        "reports",
        "--timeout",
        "90s",
        "--deadline",
        DEADLINE_RFC3339,
        "--unique",
        "1h",
        "--process-in",
        "2m",
        "--retention",
        "24h",
        "--task-id",
        "tid",
        "--group",
        "grp",
        "--for",
        "2m",
    ]);
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let dash = Dashboard::new(inspector.clone(), WebConfig::default());

    let (ours, go_entries, api) = support::eventually(WAIT, || async {
        let before = inspector.scheduler_entries().await.ok()?;
        if before.len() != 2
            || before
                .iter()
                .all(|e| e.task_type != "go:tick" || e.prev_enqueue_at.is_none())
        {
            return None;
        }
        let go_entries = db.peer_ok_async(&["inspect", "scheduler-entries"]).await;
        let api = dash.api(Method::GET, "/api/scheduler_entries").await;
        assert_eq!(api.status, StatusCode::OK, "{}", api.text());
        let after = inspector.scheduler_entries().await.ok()?;
        (before == after).then_some((before, go_entries, api.json()))
    })
    .await
    .expect("both Go schedulers published, the firing one with a prev time");
    let tick = ours.iter().find(|e| e.task_type == "go:tick").unwrap();
    let full = ours.iter().find(|e| e.task_type == "go:full").unwrap();
    assert_eq!(go_entries.as_array().unwrap().len(), 2);

    // Our Inspector keeps the strings as Go stored them (COMPATIBILITY.md
    // Q8): Go's order, TaskID and Group included.
    let tick_opts = ["MaxRetry(2)", "Queue(\"low\")", "Timeout(45s)"];
    assert_eq!(tick.options, tick_opts);
    let full_stored = [
        "MaxRetry(5)",
        "Queue(\"reports\")",
        "Timeout(1m30s)",
        DEADLINE_GO,
        "Unique(1h0m0s)",
        "ProcessIn(2m0s)",
        "Retention(24h0m0s)",
        "TaskID(\"tid\")",
        "Group(\"grp\")",
    ];
    assert_eq!(full.options, full_stored);
    assert_eq!(
        (tick.spec.as_str(), tick.payload.as_slice()),
        ("@every 1s", &b"p1"[..])
    );
    assert_eq!(
        (full.spec.as_str(), full.payload.as_slice()),
        ("@every 1h", &br#"{"a":1}"#[..])
    );
    assert_eq!(full.prev_enqueue_at, None);
    assert_entry(by_id(&go_entries, "id", &tick.id), tick, &tick_opts);
    assert_entry(by_id(&go_entries, "id", &full.id), full, &full_stored[..7]);

    // The asynqmon API: what asynqmon builds from Go's Inspector.
    let api_entries = &api["entries"];
    assert_eq!(api_entries.as_array().unwrap().len(), 2, "{api}");
    for (ours, go_opts) in [(tick, &tick_opts[..]), (full, &full_stored[..7])] {
        let a = by_id(api_entries, "id", &ours.id);
        let g = by_id(&go_entries, "id", &ours.id);
        assert_eq!(a["spec"], g["spec"]);
        assert_eq!(a["task_type"], g["task_type"]);
        assert_eq!(a["task_payload"], g["task_payload"]);
        assert_eq!(strings(&a["options"]), go_opts, "API options");
        let rfc = |secs: &Value| {
            Utc.timestamp_opt(secs.as_i64().unwrap(), 0)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%SZ")
                .to_string()
        };
        assert_eq!(a["next_enqueue_at"], rfc(&g["next"]));
        if g["prev_is_zero"] == true {
            assert!(a.get("prev_enqueue_at").is_none(), "{a}");
        } else {
            assert_eq!(a["prev_enqueue_at"], rfc(&g["prev"]));
        }
    }

    // The dashboard's page lists both Go entries and links their history.
    let (status, html) = crate::support::http::page(&dash.app, "/schedulers", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    for e in [tick, full] {
        assert!(html.contains(&e.task_type), "{} on the page", e.task_type);
        let events = format!("href=\"/schedulers/{}/events\"", e.id);
        assert!(html.contains(&events), "{events} on the page");
    }

    // The firing entry's history, read by both between two equal reads.
    let (go_events, ours_events) = support::eventually(WAIT, || async {
        let before = inspector
            .scheduler_enqueue_events(&tick.id, Page::new(1, 100).unwrap())
            .await
            .ok()?;
        if before.len() < 2 {
            return None;
        }
        let go_events = db
            .peer_ok_async(&["inspect", "scheduler-events", "--entry", &tick.id])
            .await;
        let after = inspector
            .scheduler_enqueue_events(&tick.id, Page::new(1, 100).unwrap())
            .await
            .ok()?;
        (before == after).then_some((go_events, before))
    })
    .await
    .expect("two Go fires recorded");
    assert_events(&go_events, &ours_events);
    let api_events = dash
        .api(
            Method::GET,
            &format!("/api/scheduler_entries/{}/enqueue_events", tick.id),
        )
        .await
        .json();
    // The API's first page (20) is the newest of what was read; the Go
    // scheduler may have fired since, so compare what both list.
    for e in api_events["events"].as_array().unwrap() {
        if let Some(o) = ours_events.iter().find(|o| e["task_id"] == o.task_id) {
            assert_eq!(
                e["enqueued_at"],
                o.enqueued_at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
            );
        }
    }
    for p in [tick_sched, full_sched] {
        assert!(p.terminate().status.success());
    }
}

/// A Go server processes the tasks our scheduler enqueued: Go's Inspector
/// reads them pending with the entry's options, and Go's handler gets each
/// one once with our type, payload and queue, `MaxRetry` 4 and a context
/// deadline of its dequeue time + 45 s (`Timeout(45s)`).
#[tokio::test]
async fn go_server_processes_our_scheduled_tasks() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let fired = Arc::new(Mutex::new(Vec::<String>::new()));
    let f = fired.clone();
    let scheduler = Scheduler::new(
        broker,
        SchedulerOpts {
            heartbeat_interval: Duration::from_secs(1),
            post_enqueue: Some(Arc::new(move |r| {
                f.lock().unwrap().push(r.as_ref().unwrap().id.clone());
            })),
            ..SchedulerOpts::default()
        },
    );
    scheduler
        .register(
            "@every 1s",
            Task::new("sched:work", b"payload-x".to_vec()),
            EnqueueOptions::new()
                .queue("sched")
                .max_retry(4)
                .timeout(Duration::from_secs(45)),
        )
        .unwrap();
    scheduler.start().await.unwrap();
    support::eventually(WAIT, || async {
        (!fired.lock().unwrap().is_empty()).then_some(())
    })
    .await
    .expect("our scheduler fires");
    // Shutdown waits for fires in flight: the hook has every task now.
    scheduler.shutdown().await;
    let mut ids = fired.lock().unwrap().clone();
    ids.sort();

    let pending = db
        .peer_ok_async(&["inspect", "list", "--queue", "sched", "--state", "pending"])
        .await;
    let mut listed: Vec<String> = pending
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    listed.sort();
    assert_eq!(listed, ids, "Go lists exactly our scheduled tasks");
    for t in pending.as_array().unwrap() {
        assert_eq!(
            (&t["type"], &t["payload"], &t["queue"]),
            (
                &Value::from("sched:work"),
                &Value::from("payload-x"),
                &Value::from("sched")
            )
        );
        assert_eq!(
            (&t["max_retry"], &t["timeout_secs"]),
            (&4.into(), &45.into())
        );
    }

    let before_work = now_ns();
    let count = ids.len().to_string();
    let handled = db
        .peer_lines_async(&[
            "work",
            "--queues",
            "sched",
            "--count",
            &count,
            "--max-duration",
            "60s",
        ])
        .await;
    let mut handled_ids: Vec<String> = handled
        .iter()
        .map(|l| l["id"].as_str().unwrap().to_string())
        .collect();
    handled_ids.sort();
    assert_eq!(handled_ids, ids, "each task handled once by Go");
    let timeout = 45_000_000_000_i64;
    for l in &handled {
        assert_eq!(l["type"], "sched:work");
        assert_eq!(l["payload"], "payload-x");
        assert_eq!(l["queue"], "sched");
        assert_eq!(l["max_retry"], 4);
        assert_eq!(l["retry_count"], 0);
        // Go sets the deadline to dequeue time + Timeout; the dequeue was
        // after `before_work` and before the handler started.
        let deadline = l["deadline_ns"].as_i64().unwrap();
        let started = l["started_ns"].as_i64().unwrap();
        assert!(
            before_work + timeout <= deadline && deadline <= started + timeout,
            "deadline {deadline} not in [{}, {}]",
            before_work + timeout,
            started + timeout
        );
    }
}
