//! No console errors on any page (issue 5 item 3): every page of the
//! dashboard, opened in Chromium against a running `asynqdeck demo`, logs
//! no error (script errors, failed loads, CSP violations) while it loads
//! and while its live fragments poll.

use std::time::Duration;

use asynqdeck::Inspector;
use serde_json::Value;

use crate::harness::{App, until, with_browser};
use crate::support;

/// Against `asynqdeck demo` with rows in the tabs: the queues page, every
/// tab of queue `default`, a task page, servers, schedulers, history,
/// Redis and the demo page each load and poll (an htmx request
/// finishes, none fails, where the page polls) with no console error. The
/// collector itself is proven on the last page: a `console.error` call and
/// an inline style (refused by the CSP) are both reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_console_errors_on_any_page() {
    let db = support::redis();
    let insp = Inspector::connect(&db.url()).await.unwrap();
    let app = App::demo(&db, &["--rate", "20", "--outage-every", "1h"]);
    // Rows to show: invalid orders archived in `default`, and a running
    // worker server.
    let archived_id = until(
        Duration::from_secs(60),
        "an archived task in default",
        || {
            let insp = insp.clone();
            async move {
                let page = asynqdeck::inspector::Page::new(1, 1).unwrap();
                let rows = insp
                    .list_tasks("default", asynqdeck::TaskState::Archived, page)
                    .await
                    .ok()?;
                rows.first().map(|r| r.id().to_string())
            }
        },
    )
    .await;

    with_browser(|page| async move {
        let task = format!("/queues/default/tasks/{archived_id}");
        let pages: Vec<(&str, bool)> = vec![
            ("/", true),
            ("/queues/default/active", true),
            ("/queues/default/pending", true),
            ("/queues/default/aggregating", true),
            ("/queues/low/aggregating", true),
            ("/queues/default/scheduled", true),
            ("/queues/default/retry", true),
            ("/queues/default/archived", true),
            ("/queues/default/completed", true),
            ("/queues/low/completed", true),
            (&task, true),
            ("/servers", true),
            ("/schedulers", true),
            ("/queues/default/history", false),
            ("/redis", true),
            ("/demo", true),
        ];
        for (path, polls) in pages {
            page.goto(&app.url(path)).await;
            let title: String = page.js("return document.title;").await;
            assert!(title.ends_with(" · asynqdeck"), "{path}: title {title:?}");
            if polls {
                page.count_htmx_requests().await;
                page.wait_htmx_requests(1, path).await;
            }
            page.assert_no_console_errors(path).await;
        }
        // The collector sees what it is meant to catch.
        let _: Value = page
            .js("console.error('probe: console.error'); document.body.setAttribute('style', 'color: red'); return null;")
            .await;
        let mut errors: Vec<String> = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !(errors.iter().any(|e| e.contains("probe: console.error"))
            && errors.iter().any(|e| e.contains("Content Security Policy")))
        {
            assert!(
                std::time::Instant::now() < deadline,
                "the collector missed a probe: {errors:?}"
            );
            errors.extend(page.console_errors().await);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
}
