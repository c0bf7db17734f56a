//! Go interop of issue 16's engine parity items, against real Go asynq
//! v0.26.0 (`interop/`, the `asynq-peer` CLI): tasks written by
//! `Client::enqueue_batch` and by "Run now" on a Go scheduler's entry are
//! read by Go's Inspector with identical fields. Not in the cluster pass
//! (the peer dials one server by `--redis`/`--db`).

use std::time::Duration;

use asynqdeck::{EnqueueOptions, Task};

use crate::interop::{assert_same, first_scheduler_entry, go_report_scheduler, setup};

/// Tasks written by `Client::enqueue_batch` (pending and scheduled, several
/// options) are read by Go's Inspector with every field equal to ours.
#[tokio::test]
async fn rust_batch_enqueue_reads_identically_in_go() {
    let (db, client, _inspector) = setup().await;
    let task = Task::new("payment:charge", br#"{"amount":5}"#.to_vec()).with_header("trace", "abc");
    let batch = vec![
        (task.clone(), EnqueueOptions::new().max_retry(5)),
        (
            task.clone(),
            EnqueueOptions::new()
                .queue("critical")
                .timeout(Duration::from_secs(42))
                .retention(Duration::from_secs(7200)),
        ),
        (
            task.clone(),
            EnqueueOptions::new().process_in(Duration::from_secs(3600)),
        ),
        (task, EnqueueOptions::new().task_id("batch-custom-1")),
    ];
    let results = client.enqueue_batch(&batch).await.unwrap();
    assert_eq!(results.len(), 4);
    for result in results {
        let ours = result.unwrap();
        let go = db.peer_ok(&["inspect", "task", "--queue", &ours.queue, "--id", &ours.id]);
        assert_same(&go, &ours);
    }
}

/// "Run now" on a running Go scheduler's entry
/// (`Inspector::run_scheduler_entry`, the dashboard's button): the task
/// has the entry's type, payload and options as Go's Inspector reads it,
/// and Go's Inspector lists the enqueue event we recorded.
#[tokio::test]
async fn run_now_on_a_go_scheduler_entry_reads_in_go() {
    let (db, _client, inspector) = setup().await;
    let _sched = go_report_scheduler(&db);
    let entry = first_scheduler_entry(&inspector).await;
    let ours = inspector.run_scheduler_entry(&entry.id).await.unwrap();
    assert_eq!(
        (
            ours.task_type.as_str(),
            ours.payload.as_slice(),
            ours.queue.as_str(),
            ours.max_retry,
            ours.timeout
        ),
        (
            "cron:report",
            &b"weekly"[..],
            "reports",
            3,
            Duration::from_secs(60)
        )
    );
    let go = db.peer_ok(&["inspect", "task", "--queue", "reports", "--id", &ours.id]);
    assert_same(&go, &ours);
    let events = db.peer_ok(&["inspect", "scheduler-events", "--entry", &entry.id]);
    let events = events.as_array().unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["task_id"], ours.id);
}
