//! Both directions against real Go asynq v0.26.0 (`interop/`, the
//! `asynq-peer` CLI) on one Redis: what one side writes, the other reads
//! with identical fields; Go workers process our tasks; our inspector
//! mutations leave the state Go's Inspector expects (issue 2, wire spec §16).

use std::time::Duration;

use asynqdeck::inspector::{Page, SchedulerEntry, TaskRow};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskInfo, TaskState};
use serde_json::Value;

use crate::support::{self, TestDb};

pub(crate) fn unix(t: Option<chrono::DateTime<chrono::Utc>>) -> i64 {
    t.map(|t| t.timestamp()).unwrap_or(0)
}

/// Asserts that Go's view of a task (asynq-peer TaskInfo JSON) equals ours,
/// field by field. `next_process_at` of a pending task is "now" at read time
/// on both sides, so it is compared within 2 s.
pub(crate) fn assert_same(go: &Value, ours: &TaskInfo) {
    assert_eq!(go["id"], ours.id, "id");
    assert_eq!(go["queue"], ours.queue, "queue");
    assert_eq!(go["type"], ours.task_type, "type");
    assert_eq!(go["payload_hex"], hex::encode(&ours.payload), "payload");
    let headers: std::collections::BTreeMap<String, String> =
        serde_json::from_value(go["headers"].clone()).unwrap();
    assert_eq!(headers, ours.headers, "headers");
    assert_eq!(go["state"], ours.state.as_str(), "state");
    assert_eq!(go["max_retry"], ours.max_retry, "max_retry");
    assert_eq!(go["retried"], ours.retried, "retried");
    assert_eq!(go["last_err"], ours.last_err, "last_err");
    assert_eq!(
        go["last_failed_at"],
        unix(ours.last_failed_at),
        "last_failed_at"
    );
    assert_eq!(go["timeout_secs"], ours.timeout.as_secs(), "timeout");
    assert_eq!(go["deadline"], unix(ours.deadline), "deadline");
    assert_eq!(go["group"], ours.group, "group");
    let go_next = go["next_process_at"].as_i64().unwrap();
    if ours.state == TaskState::Pending {
        assert!(
            (go_next - unix(ours.next_process_at)).abs() <= 2,
            "next_process_at"
        );
    } else {
        assert_eq!(go_next, unix(ours.next_process_at), "next_process_at");
    }
    assert_eq!(go["is_orphaned"], ours.is_orphaned, "is_orphaned");
    assert_eq!(go["retention_secs"], ours.retention.as_secs(), "retention");
    assert_eq!(go["completed_at"], unix(ours.completed_at), "completed_at");
    assert_eq!(
        go["result_hex"],
        hex::encode(ours.result.clone().unwrap_or_default()),
        "result"
    );
}

pub(crate) async fn setup() -> (TestDb, Client, Inspector) {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    (db, client, inspector)
}

fn tasks(rows: Vec<TaskRow>) -> Vec<TaskInfo> {
    rows.into_iter()
        .map(|r| match r {
            TaskRow::Task(t) => t,
            other => panic!("unexpected corrupt row {other:?}"),
        })
        .collect()
}

/// Check 1: a Go task with MaxRetry(5), Timeout, Unique and ProcessIn is
/// read by our Inspector with every field equal to Go's view (S1, S2).
#[tokio::test]
async fn go_enqueued_scheduled_unique_task_reads_identically() {
    let (db, _client, inspector) = setup().await;
    let go = db.peer_ok(&[
        "enqueue",
        "--type",
        "email:send",
        "--payload",
        r#"{"to":"a@b.c"}"#,
        "--max-retry",
        "5",
        "--timeout",
        "90s",
        "--unique",
        "1h",
        "--process-in",
        "10m",
    ]);
    let ours = inspector
        .get_task_info("default", go["id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(ours.state, TaskState::Scheduled);
    assert_eq!(ours.max_retry, 5);
    assert_eq!(ours.timeout, Duration::from_secs(90));
    let go_view = db.peer_ok(&["inspect", "task", "--queue", "default", "--id", &ours.id]);
    assert_same(&go_view, &ours);
}

/// Check 2: a Go task with the default options (MaxRetry 25, 30 min timeout).
#[tokio::test]
async fn go_default_enqueue_reads_identically() {
    let (db, _client, inspector) = setup().await;
    let go = db.peer_ok(&["enqueue", "--type", "report:render", "--payload", "x"]);
    let ours = inspector
        .get_task_info("default", go["id"].as_str().unwrap())
        .await
        .unwrap();
    assert_eq!(
        (ours.max_retry, ours.timeout),
        (25, Duration::from_secs(1800))
    );
    assert_same(&go, &ours);
}

/// Check 3: every enqueue option we write is read back by Go's Inspector
/// with identical fields.
#[tokio::test]
async fn rust_enqueue_with_each_option_reads_identically_in_go() {
    let (db, client, _inspector) = setup().await;
    let deadline = chrono::DateTime::from_timestamp(4_000_000_000, 0).unwrap();
    let task = Task::new("payment:charge", br#"{"amount":5}"#.to_vec()).with_header("trace", "abc");
    let cases = vec![
        EnqueueOptions::new().max_retry(5),
        EnqueueOptions::new()
            .queue("critical")
            .timeout(Duration::from_secs(42)),
        EnqueueOptions::new().deadline(deadline),
        EnqueueOptions::new().process_in(Duration::from_secs(3600)),
        EnqueueOptions::new().unique(Duration::from_secs(600)),
        EnqueueOptions::new().task_id("custom-id-1"),
        EnqueueOptions::new().retention(Duration::from_secs(7200)),
        EnqueueOptions::new().group("batch-1"),
    ];
    for opts in cases {
        let ours = client.enqueue(&task, opts.clone()).await.unwrap();
        let go = db.peer_ok(&["inspect", "task", "--queue", &ours.queue, "--id", &ours.id]);
        assert_same(&go, &ours);
    }
}

/// Check 4: Go's worker processes a task we enqueued, with payload and
/// headers intact and retry count / max retry from our message (S26).
#[tokio::test]
async fn go_worker_processes_rust_task_with_headers() {
    let (db, client, inspector) = setup().await;
    let task = Task::new("email:send", vec![0xff, 0x00, b'a']).with_header("trace", "t-1");
    let ours = client
        .enqueue(&task, EnqueueOptions::new().max_retry(7))
        .await
        .unwrap();
    let lines = db.peer_lines(&[
        "work",
        "--queues",
        "default=1",
        "--count",
        "1",
        "--max-duration",
        "20s",
    ]);
    assert_eq!(lines.len(), 1, "{lines:?}");
    let seen = &lines[0];
    assert_eq!(seen["id"], ours.id);
    assert_eq!(seen["type"], "email:send");
    assert_eq!(seen["payload_hex"], "ff0061");
    assert_eq!(seen["headers"]["trace"], "t-1");
    assert_eq!(seen["retry_count"], 0);
    assert_eq!(seen["max_retry"], 7);
    // Success without retention deletes the task; both sides count it.
    let err = inspector
        .get_task_info("default", &ours.id)
        .await
        .unwrap_err();
    assert!(
        matches!(err, asynqdeck::Error::TaskNotFound { .. }),
        "{err}"
    );
    let info = inspector.queue_info("default").await.unwrap();
    let go = db.peer_ok(&["inspect", "queue-info", "--queue", "default"]);
    assert_eq!(
        (info.processed, info.processed_total, info.failed),
        (1, 1, 0)
    );
    assert_eq!(go["processed"], info.processed);
    assert_eq!(go["processed_total"], info.processed_total);
}

/// Check 5: a Go worker fails our task; our Inspector shows the retry
/// exactly as Go does (Retried 1, LastErr, LastFailedAt, NextProcessAt = score; S12, S28).
#[tokio::test]
async fn go_failure_shows_identically_in_our_retry_listing() {
    let (db, client, inspector) = setup().await;
    let ours = client
        .enqueue(
            &Task::new("webhook:deliver", b"{}".to_vec()),
            EnqueueOptions::new(),
        )
        .await
        .unwrap();
    db.peer_lines(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "fail",
        "--max-duration",
        "20s",
    ]);
    let listed = tasks(
        inspector
            .list_tasks("default", TaskState::Retry, Page::default())
            .await
            .unwrap(),
    );
    assert_eq!(listed.len(), 1);
    let t = &listed[0];
    assert_eq!(
        (t.id.as_str(), t.retried, t.last_err.as_str()),
        (ours.id.as_str(), 1, "peer failure")
    );
    let delay = unix(t.next_process_at) - unix(t.last_failed_at);
    assert!(
        (15..=44).contains(&delay),
        "S4 first delay 15–44 s, got {delay}"
    );
    let go = db.peer_ok(&["inspect", "list", "--queue", "default", "--state", "retry"]);
    assert_same(&go[0], t);
    let stats = inspector.queue_info("default").await.unwrap();
    assert_eq!((stats.processed, stats.failed, stats.retry), (1, 1, 1));
}

/// Check 6: a Go worker archives a MaxRetry(0) task; we list it archived
/// with Go's LastErr and Retried 0 (S15), and our run puts it back to
/// pending where Go sees it pending.
#[tokio::test]
async fn go_archive_then_rust_run() {
    let (db, _client, inspector) = setup().await;
    let go = db.peer_ok(&[
        "enqueue",
        "--type",
        "order:import",
        "--payload",
        "bad",
        "--max-retry",
        "0",
    ]);
    let id = go["id"].as_str().unwrap().to_string();
    db.peer_lines(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "skip",
        "--max-duration",
        "20s",
    ]);
    let archived = tasks(
        inspector
            .list_tasks("default", TaskState::Archived, Page::default())
            .await
            .unwrap(),
    );
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0].last_err, "peer skip: skip retry for the task");
    assert_eq!(archived[0].retried, 0);
    assert!(archived[0].last_failed_at.is_some());
    assert_same(
        &db.peer_ok(&["inspect", "task", "--queue", "default", "--id", &id]),
        &archived[0],
    );

    inspector.run_task("default", &id).await.unwrap();
    let go = db.peer_ok(&["inspect", "task", "--queue", "default", "--id", &id]);
    assert_eq!(go["state"], "pending");
    assert_eq!(
        go["last_err"], "peer skip: skip retry for the task",
        "history kept"
    );
    let go_pending = db.peer_ok(&[
        "inspect", "list", "--queue", "default", "--state", "pending",
    ]);
    assert_eq!(go_pending[0]["id"], id);
    // And a Go worker can process it now.
    let lines = db.peer_lines(&["work", "--count", "1", "--max-duration", "20s"]);
    assert_eq!(lines[0]["id"], id);
}

/// Check 7: our archive and delete of Go-written tasks leave Redis as Go's
/// Inspector expects (archived listed by Go; deleted is not found by Go).
#[tokio::test]
async fn rust_archive_and_delete_on_go_tasks() {
    let (db, _client, inspector) = setup().await;
    let a = db.peer_ok(&["enqueue", "--type", "t", "--payload", "a"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let b = db.peer_ok(&["enqueue", "--type", "t", "--payload", "b", "--unique", "1h"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    inspector.archive_task("default", &a).await.unwrap();
    let go = db.peer_ok(&[
        "inspect", "list", "--queue", "default", "--state", "archived",
    ]);
    assert_eq!(go.as_array().unwrap().len(), 1);
    assert_eq!(go[0]["id"], a);
    assert_eq!(go[0]["state"], "archived");
    inspector.delete_task("default", &b).await.unwrap();
    let err = db
        .peer(&["inspect", "task", "--queue", "default", "--id", &b])
        .unwrap_err();
    assert_eq!(err["code"], "task_not_found");
    // The unique lock was released: Go can enqueue the same task again.
    db.peer_ok(&["enqueue", "--type", "t", "--payload", "b", "--unique", "1h"]);
    // Go archives again what we archived: refused the same way on both sides.
    let go_err = db
        .peer(&["inspect", "archive", "--queue", "default", "--id", &a])
        .unwrap_err();
    assert_eq!(go_err["code"], "task_already_archived");
    assert!(matches!(
        inspector.archive_task("default", &a).await,
        Err(asynqdeck::Error::TaskAlreadyArchived { .. })
    ));
}

/// Check 8: uniqueness locks are shared both ways (same key as Go).
#[tokio::test]
async fn unique_locks_are_shared_with_go() {
    let (db, client, _inspector) = setup().await;
    let t = Task::new("email:send", br#"{"to":"a@b.c"}"#.to_vec());
    client
        .enqueue(&t, EnqueueOptions::new().unique(Duration::from_secs(3600)))
        .await
        .unwrap();
    let err = db
        .peer(&[
            "enqueue",
            "--type",
            "email:send",
            "--payload",
            r#"{"to":"a@b.c"}"#,
            "--unique",
            "1h",
        ])
        .unwrap_err();
    assert_eq!(err["code"], "duplicate_task");
    db.peer_ok(&[
        "enqueue",
        "--type",
        "sms:send",
        "--nil-payload",
        "--unique",
        "1h",
    ]);
    let again = client
        .enqueue(
            &Task::without_payload("sms:send"),
            EnqueueOptions::new().unique(Duration::from_secs(60)),
        )
        .await;
    assert!(
        matches!(again, Err(asynqdeck::Error::DuplicateTask)),
        "{again:?}"
    );
}

/// Check 9: a custom task id taken by Go is a typed conflict for us.
#[tokio::test]
async fn task_id_conflict_with_go() {
    let (db, client, _inspector) = setup().await;
    db.peer_ok(&[
        "enqueue",
        "--type",
        "t",
        "--payload",
        "x",
        "--task-id",
        "order-42",
    ]);
    let r = client
        .enqueue(
            &Task::new("t", b"y".to_vec()),
            EnqueueOptions::new().task_id("order-42"),
        )
        .await;
    assert!(matches!(r, Err(asynqdeck::Error::TaskIdConflict)), "{r:?}");
    let err = db
        .peer(&[
            "enqueue",
            "--type",
            "t",
            "--payload",
            "x",
            "--task-id",
            "order-42",
        ])
        .unwrap_err();
    assert_eq!(err["code"], "task_id_conflict");
}

/// Check 10: pagination order agrees with Go for pending (oldest first)
/// and scheduled (ascending time), and a page past the end is empty.
#[tokio::test]
async fn pagination_matches_go() {
    let (db, client, inspector) = setup().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(
            client
                .enqueue(&Task::new("t", vec![i]), EnqueueOptions::new())
                .await
                .unwrap()
                .id,
        );
    }
    for page in 1..=3 {
        let ours: Vec<String> = tasks(
            inspector
                .list_tasks("default", TaskState::Pending, Page::new(page, 2).unwrap())
                .await
                .unwrap(),
        )
        .into_iter()
        .map(|t| t.id)
        .collect();
        let go = db.peer_ok(&[
            "inspect",
            "list",
            "--queue",
            "default",
            "--state",
            "pending",
            "--page",
            &page.to_string(),
            "--size",
            "2",
        ]);
        let go: Vec<String> = go
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["id"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ours, go, "page {page}");
        let want: Vec<String> = ids.iter().skip((page - 1) * 2).take(2).cloned().collect();
        assert_eq!(ours, want, "page {page}: enqueue order");
    }
    let beyond = inspector
        .list_tasks("default", TaskState::Pending, Page::new(9, 2).unwrap())
        .await
        .unwrap();
    assert!(beyond.is_empty());
    for secs in [300, 100, 200] {
        db.peer_ok(&[
            "enqueue",
            "--type",
            "s",
            "--payload",
            &secs.to_string(),
            "--process-in",
            &format!("{secs}s"),
        ]);
    }
    let ours: Vec<Vec<u8>> = tasks(
        inspector
            .list_tasks("default", TaskState::Scheduled, Page::default())
            .await
            .unwrap(),
    )
    .into_iter()
    .map(|t| t.payload)
    .collect();
    assert_eq!(
        ours,
        vec![b"100".to_vec(), b"200".to_vec(), b"300".to_vec()]
    );
}

/// Check 11: queue statistics and history agree with Go on the same Redis.
#[tokio::test]
async fn queue_stats_and_history_agree_with_go() {
    let (db, client, inspector) = setup().await;
    for i in 0..3u8 {
        client
            .enqueue(&Task::new("ok", vec![i]), EnqueueOptions::new())
            .await
            .unwrap();
    }
    db.peer_lines(&["work", "--count", "3", "--max-duration", "20s"]);
    client
        .enqueue(&Task::new("bad", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    db.peer_lines(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "fail",
        "--max-duration",
        "20s",
    ]);
    client
        .enqueue(&Task::new("p", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    client
        .enqueue(
            &Task::new("s", b"1".to_vec()),
            EnqueueOptions::new().process_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    client
        .enqueue(
            &Task::new("g", b"1".to_vec()),
            EnqueueOptions::new().group("g1"),
        )
        .await
        .unwrap();
    let go = db.peer_ok(&["inspect", "queue-info", "--queue", "default"]);
    let ours = inspector.queue_info("default").await.unwrap();
    for (field, value) in [
        ("size", ours.size),
        ("groups", ours.groups),
        ("pending", ours.pending),
        ("active", ours.active),
        ("scheduled", ours.scheduled),
        ("retry", ours.retry),
        ("archived", ours.archived),
        ("completed", ours.completed),
        ("aggregating", ours.aggregating),
        ("processed", ours.processed),
        ("failed", ours.failed),
        ("processed_total", ours.processed_total),
        ("failed_total", ours.failed_total),
    ] {
        assert_eq!(go[field], value, "{field}");
    }
    assert_eq!(
        (
            ours.processed,
            ours.failed,
            ours.pending,
            ours.scheduled,
            ours.retry,
            ours.aggregating
        ),
        (4, 1, 1, 1, 1, 1)
    );
    assert_eq!(go["paused"], ours.paused);
    let mem = go["memory_usage"].as_i64().unwrap();
    assert!(
        (ours.memory_usage - mem).abs() <= mem / 5,
        "memory usage ours {} go {mem}",
        ours.memory_usage
    );
    let go_hist = db.peer_ok(&["inspect", "history", "--queue", "default", "--days", "7"]);
    let hist = inspector.history("default", 7).await.unwrap();
    assert_eq!(hist.len(), 7);
    for (g, o) in go_hist.as_array().unwrap().iter().zip(&hist) {
        assert_eq!(g["date"], o.date.format("%Y-%m-%d").to_string());
        assert_eq!(
            (
                g["processed"].as_i64().unwrap(),
                g["failed"].as_i64().unwrap()
            ),
            (o.processed, o.failed)
        );
    }
    assert_eq!((hist[0].processed, hist[0].failed), (4, 1));
}

/// Check 12: pausing is shared: Go's pause shows as paused to us and our
/// unpause lets a Go worker dequeue again.
#[tokio::test]
async fn pause_is_shared_with_go() {
    let (db, client, inspector) = setup().await;
    client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    db.peer_ok(&["inspect", "pause", "--queue", "default"]);
    assert!(inspector.queue_info("default").await.unwrap().paused);
    assert!(
        inspector.pause_queue("default").await.is_err(),
        "already paused"
    );
    let lines = db.peer_lines(&["work", "--count", "1", "--max-duration", "2s"]);
    assert!(lines.is_empty(), "paused queue: nothing dequeued");
    inspector.unpause_queue("default").await.unwrap();
    assert_eq!(
        db.peer_ok(&["inspect", "queue-info", "--queue", "default"])["paused"],
        false
    );
    let lines = db.peer_lines(&["work", "--count", "1", "--max-duration", "20s"]);
    assert_eq!(lines.len(), 1);
}

/// Check 13: a running Go server and its active worker are listed by our
/// Inspector; our cancel reaches the Go handler, which ends in retry with
/// `context canceled` (wire spec §16 checks 15, 17).
#[tokio::test]
async fn go_servers_listed_and_cancel_reaches_go_worker() {
    let (db, client, inspector) = setup().await;
    let t = client
        .enqueue(&Task::new("slow", b"z".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let worker = db.peer_spawn(&[
        "work",
        "--queues",
        "default=3,low=1",
        "--concurrency",
        "4",
        "--behaviour",
        "sleep:60s",
        "--max-duration",
        "60s",
    ]);
    let servers = support::eventually(Duration::from_secs(15), || {
        let inspector = inspector.clone();
        async move {
            let s = inspector.servers().await.unwrap();
            (s.len() == 1 && s[0].active_workers.len() == 1).then_some(s)
        }
    })
    .await
    .expect("Go server with one active worker listed");
    let s = &servers[0];
    assert_eq!(s.pid as u32, worker.0.id());
    assert_eq!(s.concurrency, 4);
    assert_eq!(s.status, "active");
    assert_eq!(s.queues.get("default"), Some(&3));
    assert_eq!(s.queues.get("low"), Some(&1));
    assert_eq!(s.active_workers[0].task_id, t.id);
    assert_eq!(s.active_workers[0].task_type, "slow");
    let go = db.peer_ok(&["inspect", "servers"]);
    assert_eq!(go[0]["server_id"], s.server_id);
    assert_eq!(go[0]["host"], s.host);

    inspector.cancel_processing(&t.id).await.unwrap();
    let retried = support::eventually(Duration::from_secs(10), || {
        let inspector = inspector.clone();
        let id = t.id.clone();
        async move {
            let info = inspector.get_task_info("default", &id).await.ok()?;
            (info.state == TaskState::Retry).then_some(info)
        }
    })
    .await
    .expect("cancelled task moves to retry");
    assert_eq!(retried.last_err, "context canceled");
    let out = worker.terminate();
    assert!(out.status.success());
    let gone = support::eventually(Duration::from_secs(5), || {
        let inspector = inspector.clone();
        async move { inspector.servers().await.unwrap().is_empty().then_some(()) }
    })
    .await;
    assert!(
        gone.is_some(),
        "graceful Go shutdown clears the server state"
    );
}

/// Check 14: a Go scheduler's entries and enqueue events are read by us
/// (spec §4.4 option strings, §6.17).
#[tokio::test]
async fn go_scheduler_entries_and_events() {
    let (db, _client, inspector) = setup().await;
    let lines = db.peer_lines(&[
        "schedule",
        "--spec",
        "@every 1s",
        "--type",
        "cron:tick",
        "--payload",
        "p",
        "--max-retry",
        "3",
        "--queue",
        "default",
        "--timeout",
        "1m",
        "--for",
        "3500ms",
    ]);
    let entry_id = lines[0]["entry_id"].as_str().unwrap().to_string();
    // The Go scheduler clears its entries at shutdown but keeps the history
    // until then; read the events it recorded.
    let events = inspector
        .scheduler_enqueue_events(&entry_id, Page::default())
        .await
        .unwrap();
    let go_events = db.peer_ok(&["inspect", "scheduler-events", "--entry", &entry_id]);
    assert_eq!(events.len(), go_events.as_array().unwrap().len());
    for (o, g) in events.iter().zip(go_events.as_array().unwrap()) {
        assert_eq!(g["task_id"], o.task_id);
        assert_eq!(g["enqueued_at"], o.enqueued_at.timestamp());
    }
}

/// Check 15: a Go scheduler that is running is listed with its spec, type,
/// payload and option strings.
#[tokio::test]
async fn running_go_scheduler_is_listed() {
    let (db, _client, inspector) = setup().await;
    let _sched = go_report_scheduler(&db);
    let e = &first_scheduler_entry(&inspector).await;
    assert_eq!(
        (e.spec.as_str(), e.task_type.as_str(), e.payload.as_slice()),
        ("@every 1h", "cron:report", &b"weekly"[..])
    );
    for opt in ["MaxRetry(3)", "Queue(\"reports\")", "Timeout(1m0s)"] {
        assert!(
            e.options.iter().any(|o| o == opt),
            "{opt} in {:?}",
            e.options
        );
    }
    assert_eq!(
        e.prev_enqueue_at, None,
        "never fired: Go zero time reads as None"
    );
    let go = db.peer_ok(&["inspect", "scheduler-entries"]);
    assert_eq!(go[0]["id"], e.id);
    assert_eq!(go[0]["prev_is_zero"], true);
}

/// A Go scheduler (the peer's `schedule`, for 30 s) with one entry:
/// `@every 1h`, type `cron:report`, payload `weekly`, MaxRetry(3),
/// Queue("reports"), Timeout(1m); killed when dropped.
pub(crate) fn go_report_scheduler(db: &TestDb) -> support::PeerProcess {
    db.peer_spawn(&[
        "schedule",
        "--spec",
        "@every 1h",
        "--type",
        "cron:report",
        "--payload",
        "weekly",
        "--max-retry",
        "3",
        "--queue",
        "reports",
        "--timeout",
        "1m",
        "--for",
        "30s",
    ])
}

/// The first scheduler entry listed, once one is (within 10 s).
pub(crate) async fn first_scheduler_entry(inspector: &Inspector) -> SchedulerEntry {
    support::eventually(Duration::from_secs(10), || {
        let inspector = inspector.clone();
        async move { inspector.scheduler_entries().await.ok()?.into_iter().next() }
    })
    .await
    .expect("scheduler entry listed")
}

/// Check 16: Go group tasks are listed by us per group, and ours by Go.
#[tokio::test]
async fn groups_are_shared_with_go() {
    let (db, client, inspector) = setup().await;
    db.peer_ok(&[
        "enqueue",
        "--type",
        "notify",
        "--payload",
        "1",
        "--group",
        "user:1",
    ]);
    client
        .enqueue(
            &Task::new("notify", b"2".to_vec()),
            EnqueueOptions::new().group("user:1"),
        )
        .await
        .unwrap();
    let groups = inspector.groups("default").await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!((groups[0].group.as_str(), groups[0].size), ("user:1", 2));
    let go_groups = db.peer_ok(&["inspect", "groups", "--queue", "default"]);
    assert_eq!(go_groups[0]["size"], 2);
    let ours = tasks(
        inspector
            .list_aggregating_tasks("default", "user:1", Page::default())
            .await
            .unwrap(),
    );
    let go = db.peer_ok(&[
        "inspect",
        "list",
        "--queue",
        "default",
        "--state",
        "aggregating",
        "--group",
        "user:1",
    ]);
    assert_eq!(ours.len(), 2);
    for (g, o) in go.as_array().unwrap().iter().zip(&ours) {
        assert_same(g, o);
    }
}

/// Check 17: precondition refusals agree with Go on the same state (spec §16 check 21).
#[tokio::test]
async fn precondition_errors_agree_with_go() {
    let (db, client, inspector) = setup().await;
    let p = client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let err = db
        .peer(&["inspect", "run", "--queue", "default", "--id", &p.id])
        .unwrap_err();
    assert_eq!(err["code"], "failed_precondition");
    assert!(matches!(
        inspector.run_task("default", &p.id).await,
        Err(asynqdeck::Error::FailedPrecondition(_))
    ));
    let err = db
        .peer(&[
            "inspect",
            "update-payload",
            "--queue",
            "default",
            "--id",
            &p.id,
            "--payload",
            "x",
        ])
        .unwrap_err();
    assert_eq!(err["code"], "failed_precondition");
    assert!(matches!(
        inspector
            .update_task_payload("default", &p.id, b"x".to_vec())
            .await,
        Err(asynqdeck::Error::FailedPrecondition(_))
    ));
    let err = db
        .peer(&["inspect", "run", "--queue", "nope", "--id", &p.id])
        .unwrap_err();
    assert_eq!(err["code"], "queue_not_found");
    assert!(matches!(
        inspector.run_task("nope", &p.id).await,
        Err(asynqdeck::Error::QueueNotFound { .. })
    ));
    let err = db
        .peer(&["inspect", "delete", "--queue", "default", "--id", "missing"])
        .unwrap_err();
    assert_eq!(err["code"], "task_not_found");
    assert!(matches!(
        inspector.delete_task("default", "missing").await,
        Err(asynqdeck::Error::TaskNotFound { .. })
    ));
}

/// Check 18: bulk operations on Go-written tasks: our run-all of archived
/// moves them all to pending where Go lists them; our delete-all empties
/// the retry tab for Go too.
#[tokio::test]
async fn bulk_operations_on_go_tasks() {
    let (db, _client, inspector) = setup().await;
    for i in 0..3 {
        db.peer_ok(&[
            "enqueue",
            "--type",
            "t",
            "--payload",
            &i.to_string(),
            "--max-retry",
            "0",
        ]);
    }
    db.peer_lines(&[
        "work",
        "--count",
        "3",
        "--behaviour",
        "fail",
        "--max-duration",
        "20s",
    ]);
    assert_eq!(inspector.queue_info("default").await.unwrap().archived, 3);
    assert_eq!(
        inspector
            .run_all("default", TaskState::Archived)
            .await
            .unwrap(),
        3
    );
    let go = db.peer_ok(&["inspect", "queue-info", "--queue", "default"]);
    assert_eq!(
        (go["archived"].as_i64(), go["pending"].as_i64()),
        (Some(0), Some(3))
    );
    for i in 0..2 {
        db.peer_ok(&["enqueue", "--type", "r", "--payload", &i.to_string()]);
    }
    db.peer_lines(&[
        "work",
        "--count",
        "5",
        "--behaviour",
        "fail",
        "--max-duration",
        "20s",
    ]);
    // The three re-run tasks have MaxRetry 0: archived again; the two new ones retry.
    let go = db.peer_ok(&["inspect", "queue-info", "--queue", "default"]);
    assert_eq!(
        (go["archived"].as_i64(), go["retry"].as_i64()),
        (Some(3), Some(2))
    );
    assert_eq!(
        inspector
            .delete_all("default", TaskState::Retry)
            .await
            .unwrap(),
        2
    );
    let go = db.peer_ok(&["inspect", "list", "--queue", "default", "--state", "retry"]);
    assert_eq!(go.as_array().unwrap().len(), 0);
}

/// Check 19: Go's update-payload keeps our headers; our update keeps the
/// fields Go wrote (0.26 UpdateTaskPayload).
#[tokio::test]
async fn update_payload_round_trip() {
    let (db, client, inspector) = setup().await;
    let t = Task::new("t", b"old".to_vec()).with_header("k", "v");
    let ours = client
        .enqueue(
            &t,
            EnqueueOptions::new()
                .process_in(Duration::from_secs(600))
                .max_retry(4),
        )
        .await
        .unwrap();
    let go = db.peer_ok(&[
        "inspect",
        "update-payload",
        "--queue",
        "default",
        "--id",
        &ours.id,
        "--payload",
        "go-new",
    ]);
    assert_eq!(go["payload"], "go-new");
    assert_eq!(go["headers"]["k"], "v");
    let updated = inspector
        .update_task_payload("default", &ours.id, b"rust-new".to_vec())
        .await
        .unwrap();
    assert_eq!(
        (updated.payload.as_slice(), updated.max_retry),
        (&b"rust-new"[..], 4)
    );
    assert_same(
        &db.peer_ok(&["inspect", "task", "--queue", "default", "--id", &ours.id]),
        &updated,
    );
}

/// Check 20: delete-queue agrees: refused for a non-empty queue, done with
/// force; Go then no longer lists the queue.
#[tokio::test]
async fn delete_queue_agrees_with_go() {
    let (db, client, inspector) = setup().await;
    client
        .enqueue(
            &Task::new("t", b"1".to_vec()),
            EnqueueOptions::new().queue("old"),
        )
        .await
        .unwrap();
    let err = db
        .peer(&["inspect", "delete-queue", "--queue", "old"])
        .unwrap_err();
    assert_eq!(err["code"], "queue_not_empty");
    assert!(matches!(
        inspector.delete_queue("old", false).await,
        Err(asynqdeck::Error::QueueNotEmpty { .. })
    ));
    inspector.delete_queue("old", true).await.unwrap();
    let queues = db.peer_ok(&["inspect", "queues"]);
    assert_eq!(queues.as_array().unwrap().len(), 0);
    // Go's GetQueueInfo does not map this to ErrQueueNotFound; its text says it.
    let err = db
        .peer(&["inspect", "queue-info", "--queue", "old"])
        .unwrap_err();
    assert!(
        err["error"].as_str().unwrap().contains("NOT_FOUND"),
        "{err}"
    );
    assert!(matches!(
        inspector.queue_info("old").await,
        Err(asynqdeck::Error::QueueNotFound { .. })
    ));
}

/// Check 21: a Go worker completes our task with retention and a result;
/// we read CompletedAt and Result as Go does.
#[tokio::test]
async fn completed_with_result_reads_identically() {
    let (db, client, inspector) = setup().await;
    let t = client
        .enqueue(
            &Task::new("r", b"1".to_vec()),
            EnqueueOptions::new().retention(Duration::from_secs(3600)),
        )
        .await
        .unwrap();
    db.peer_lines(&[
        "work",
        "--count",
        "1",
        "--behaviour",
        "result:ok",
        "--max-duration",
        "20s",
    ]);
    let done = tasks(
        inspector
            .list_tasks("default", TaskState::Completed, Page::default())
            .await
            .unwrap(),
    );
    assert_eq!(done.len(), 1);
    assert_eq!(done[0].id, t.id);
    assert_eq!(done[0].result.as_deref(), Some(&b"ok"[..]));
    assert!(done[0].completed_at.is_some());
    assert_same(
        &db.peer_ok(&["inspect", "task", "--queue", "default", "--id", &t.id]),
        &done[0],
    );
}
