//! "Run now" on `/schedulers` in a real browser: the click enqueues the
//! entry's task and the page names it.

use std::time::Duration;

use asynqdeck::broker::proto::SchedulerEntry;
use asynqdeck::broker::{Broker, Page as RedisPage};
use asynqdeck::{Inspector, TaskState};

use crate::harness::{App, with_browser};
use crate::support;

const WAIT: Duration = Duration::from_secs(15);

/// A Go-form entry published by a "Go" scheduler: clicking its "Run now"
/// shows the confirmation naming the new task, which is in Redis with the
/// entry's type, payload and options, and in the entry's history; no
/// console error. With `UPDATE_SCREENSHOTS=1` writes
/// `docs/screenshots/schedulers.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_now_click_enqueues_and_confirms() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let entry = |id: &str, spec: &str, task_type: &str, options: &[&str]| SchedulerEntry {
        id: id.into(),
        spec: spec.into(),
        task_type: task_type.into(),
        task_payload: br#"{"report":"daily"}"#.to_vec(),
        enqueue_options: options.iter().map(|o| o.to_string()).collect(),
        next_enqueue_time: None,
        prev_enqueue_time: None,
    };
    broker
        .write_scheduler_entries(
            "reports-host:4242:9f1c",
            &[
                entry(
                    "7d3c1e0a-run-now",
                    "0 9 * * *",
                    "report:daily",
                    &[r#"Queue("reports")"#, "MaxRetry(2)", "Timeout(5m0s)"],
                ),
                entry(
                    "b2a4-unreadable",
                    "@every 1h",
                    "cleanup:tmp",
                    &["Unknown(1)"],
                ),
            ],
            Duration::from_secs(600),
        )
        .await
        .unwrap();
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        page.goto(&app.url("/schedulers")).await;
        let disabled: (bool, String) = page
            .js("var b = document.querySelector('tr.entry button.run-now[disabled]');
                 return [!!b, b ? b.getAttribute('title') : ''];")
            .await;
        assert_eq!(
            disabled,
            (
                true,
                "Cannot run by hand: options not understood: Unknown(1)".to_string()
            )
        );
        page.click("button.run-now[hx-post$=\"/schedulers/7d3c1e0a-run-now/run\"]")
            .await;
        let (text, task_id): (String, String) = page
            .wait_js(
                WAIT,
                "the Run now confirmation",
                "var p = document.querySelector('#run-now-result .run-now-done');
                 return p ? [p.textContent, p.querySelector('.task-id').textContent] : null;",
            )
            .await;
        assert_eq!(
            text,
            format!(
                "Run now: entry 7d3c1e0a-run-now enqueued task {task_id} (report:daily) in queue reports, pending."
            )
        );
        let inspector = Inspector::from_broker(broker.clone());
        let task = inspector.get_task_info("reports", &task_id).await.unwrap();
        assert_eq!(task.task_type, "report:daily");
        assert_eq!(task.payload, br#"{"report":"daily"}"#);
        assert_eq!(task.state, TaskState::Pending);
        assert_eq!((task.max_retry, task.timeout), (2, Duration::from_secs(300)));
        let events = inspector
            .scheduler_enqueue_events("7d3c1e0a-run-now", RedisPage::new(1, 10).unwrap())
            .await
            .unwrap();
        assert_eq!(
            events.iter().map(|e| e.task_id.as_str()).collect::<Vec<_>>(),
            [task_id.as_str()]
        );
        page.park_pointer().await;
        page.screenshot("schedulers").await;
        page.assert_no_console_errors("/schedulers").await;
    })
    .await;
}
