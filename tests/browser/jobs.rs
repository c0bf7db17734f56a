//! "Delete all" as a background job in a real browser (issue 15 target 4):
//! the tab's button opens the confirmation page with the preview count,
//! Confirm starts the job and lands on its page, the progress bar reaches
//! 100 % by itself (htmx polling, no reload), the report gives the done
//! count, and the tab is empty afterwards.

use std::time::Duration;

use asynqdeck::broker::keys;
use prost::Message;
use redis::AsyncCommands;

use crate::harness::{App, with_browser};
use crate::support::{self, seed};

const WAIT: Duration = Duration::from_secs(15);
/// The job's own deadline: generous, a loaded machine runs it slower.
const JOB_WAIT: Duration = Duration::from_secs(120);
const TASKS: usize = 3_000;

/// 3,000 pending tasks in queue `bulk`: "Delete all" → the confirmation
/// page says "This will delete 3,000 pending tasks of queue bulk." →
/// Confirm → the job page (no tasks deleted before the click); its bar
/// reaches 100 % and the phase `done` without a page load; the report says
/// 3,000 done, 0 skipped, 0 failed; the pending tab then shows no task and
/// Redis holds none; no console error (CSP) on any of the pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_all_runs_as_a_job_with_live_progress() {
    let db = support::redis();
    let mut raw = db.raw().await;
    let _: () = raw.sadd(keys::ALL_QUEUES, "bulk").await.unwrap();
    let mut pipe = redis::pipe();
    for i in 0..TASKS {
        let id = format!("b{i:05}");
        let m = seed::msg("bulk", &id, "report:build", br#"{"n":1}"#);
        pipe.hset_multiple(
            keys::task_key("bulk", &id),
            &[("msg", m.encode_to_vec()), ("state", b"pending".to_vec())],
        )
        .ignore();
        pipe.lpush(keys::pending_key("bulk"), &id).ignore();
    }
    let _: () = pipe.query_async(&mut raw).await.unwrap();
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        page.goto(&app.url("/queues/bulk/pending")).await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the pending tab with its count",
                "var n = document.querySelector('#tab span.count[data-state=\"pending\"]');
                 return n && n.textContent.trim() === '3000' ? true : null;",
            )
            .await;
        page.assert_no_console_errors("the pending tab").await;

        page.click("#tab a[data-bulk=\"all-delete\"]").await;
        let preview: String = page
            .wait_js(
                WAIT,
                "the confirmation page",
                "var p = document.querySelector('.confirm-job .preview-count');
                 return p ? p.textContent.trim() : null;",
            )
            .await;
        assert_eq!(preview, "This will delete 3,000 pending tasks of queue bulk.");
        let button: String = page
            .js("return document.querySelector('button.confirm').textContent.trim();")
            .await;
        assert_eq!(button, "Confirm: Delete 3,000 tasks");
        let left: i64 = raw.llen(keys::pending_key("bulk")).await.unwrap();
        assert_eq!(left, 3_000, "the preview deletes nothing");
        page.assert_no_console_errors("the confirmation page").await;
        page.screenshot("job-confirm").await;

        page.click("button.confirm").await;
        let path: String = page
            .wait_js(
                WAIT,
                "the job page",
                "return location.pathname.indexOf('/jobs/') === 0 && document.querySelector('#job') ? location.pathname : null;",
            )
            .await;
        // The pointer stays where Confirm was: park it outside the live
        // fragment, whose polls it would hold (R0).
        page.park_pointer().await;
        page.mark_window("job-page").await;
        let first: String = page
            .js("return document.querySelector('#job').getAttribute('data-phase');")
            .await;
        let title: String = page.js("return document.querySelector('h1').textContent;").await;
        assert_eq!(title, "Delete all pending tasks of queue bulk");

        // Wait for the state: phase done, bar at 100 %.
        let (value, percent): (u32, String) = page
            .wait_js(
                JOB_WAIT,
                "the job to finish",
                "var j = document.querySelector('#job[data-phase=\"done\"]');
                 if (!j) return null;
                 return [j.querySelector('progress.job-bar').value, j.querySelector('.percent').textContent.trim()];",
            )
            .await;
        assert_eq!((value, percent.as_str()), (100, "100 %"));
        // Updated in place by htmx polling, not by reloading the page.
        page.assert_not_reloaded("job-page").await;
        let report: Vec<String> = page
            .js("var r = document.querySelector('#job .report-counts');
                 return ['done', 'skipped', 'failed'].map(function (c) { return r.querySelector('.' + c).textContent; });")
            .await;
        assert_eq!(report, ["3,000", "0", "0"]);
        let polling: bool = page
            .js("return document.querySelector('#job').hasAttribute('hx-trigger');")
            .await;
        assert!(!polling, "a finished job's page stops polling");
        let cancel: bool = page
            .js("return !!document.querySelector('#job button.cancel-job');")
            .await;
        assert!(!cancel, "no Cancel once done");
        page.assert_no_console_errors(&path).await;
        page.screenshot("job-done").await;
        eprintln!("job page first seen in phase {first}");

        let left: i64 = raw.llen(keys::pending_key("bulk")).await.unwrap();
        assert_eq!(left, 0);
        let hashes = db.scan_keys("asynq:{bulk}:t:*").await;
        assert!(hashes.is_empty(), "task hashes deleted: {}", hashes.len());

        // Back to the tab: empty.
        page.click("#job .report a.btn").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the empty pending tab",
                "var n = document.querySelector('#tab span.count[data-state=\"pending\"]');
                 var empty = document.querySelector('#tab tr.empty-row');
                 return n && n.textContent.trim() === '0' && empty && !document.querySelector('#tab tr[data-id]') ? true : null;",
            )
            .await;
        let empty: String = page
            .js("return document.querySelector('#tab tr.empty-row').textContent.trim();")
            .await;
        assert_eq!(empty, "No pending tasks.");
        page.assert_no_console_errors("the emptied tab").await;
    })
    .await;
}
