//! Search across queues and states in a real browser (issue 17 item 1):
//! the nav's Search link, a query typed in the box, the result rows with
//! "scanned N of M", and a result's link to its task page.

use std::time::Duration;

use crate::harness::{App, with_browser};
use crate::support;
use crate::support::seed;

const WAIT: Duration = Duration::from_secs(15);

/// Seeds retry tasks in `billing` and `mail` (two with "connection
/// refused" in LastErr, one timeout) and a pending one; searching
/// `error~refused` from the box lists exactly the two refused tasks,
/// across both queues, with "Scanned 4 of 4"; the first row's id link opens
/// its task page. No console error. With `UPDATE_SCREENSHOTS=1` writes
/// `docs/screenshots/search.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_query_lists_the_matches_and_links_to_the_task() {
    let db = support::redis();
    seed_retries(&db).await;
    let app = App::serve(&db, &["--no-engine"]);

    with_browser(|page| async move {
        page.goto(&app.url("/")).await;
        page.click("header nav a[href$=\"/search\"]").await;
        let _: bool = page
            .wait_js(WAIT, "the search page", "return document.querySelector('form.search-form input[name=q]') ? true : null;")
            .await;
        page.type_text("form.search-form input[name=q]", "error~refused").await;
        page.click("form.search-form button[type=submit]").await;
        let rows: Vec<Vec<String>> = page
            .wait_js(
                WAIT,
                "the result rows",
                "var rows = document.querySelectorAll('tr.search-hit'); if (location.search.indexOf('refused') < 0 || !rows.length) return null;
                 return Array.from(rows).map(function (r) {
                   return Array.from(r.cells).slice(0, 6).map(function (c) { return c.textContent.trim(); });
                 });",
            )
            .await;
        assert_eq!(
            rows,
            vec![
                vec!["billing", "retry", "inv-1042", "invoice:charge", "charge: dial tcp 10.0.3.7:443: connection refused", "3 / 25"],
                vec!["mail", "retry", "m-77", "email:send", "smtp: dial tcp 10.0.9.2:25: Connection refused", "1 / 25"],
            ]
        );
        let count: String = page
            .js("return document.querySelector('p.scan-count').textContent.trim();")
            .await;
        assert_eq!(
            count,
            "Scanned 4 of 4 tasks in scope (4 in this step); 2 matches in this step. The scan is complete."
        );
        page.park_pointer().await;
        page.screenshot("search").await;

        page.click("tr.search-hit a.task-link").await;
        let path: String = page
            .wait_js(
                WAIT,
                "the task page",
                "return location.pathname.indexOf('/tasks/') > 0 && document.querySelector('h1') ? location.pathname : null;",
            )
            .await;
        assert_eq!(path, "/queues/billing/tasks/inv-1042");
        let h1: String = page.js("return document.querySelector('h1').textContent;").await;
        assert!(h1.contains("inv-1042"), "{h1}");
        page.assert_no_console_errors("/search").await;
    })
    .await;
}

/// Three retry tasks in `billing` and `mail` (two "connection refused",
/// one timeout) and a pending one in `mail`.
async fn seed_retries(db: &support::TestDb) {
    let mut c = db.raw().await;
    let now = chrono::Utc::now().timestamp();
    for (q, id, ty, err, retried) in [
        (
            "billing",
            "inv-1042",
            "invoice:charge",
            "charge: dial tcp 10.0.3.7:443: connection refused",
            3,
        ),
        (
            "mail",
            "m-77",
            "email:send",
            "smtp: dial tcp 10.0.9.2:25: Connection refused",
            1,
        ),
        ("mail", "m-78", "email:send", "smtp: i/o timeout", 2),
    ] {
        let mut m = seed::msg(q, id, ty, br#"{"user":"u42"}"#);
        m.error_msg = err.into();
        m.retried = retried;
        m.last_failed_at = now - 600;
        seed::message(&mut c, &m, "retry", now + 3_600).await;
    }
    seed::message(
        &mut c,
        &seed::msg("mail", "m-79", "email:send", b"{}"),
        "pending",
        0,
    )
    .await;
}

/// From the search `error~refused`, "Archive matching" opens the
/// confirmation (3 of the 4 tasks' tabs, "This will archive 2 tasks …");
/// Confirm starts the jobs and opens /jobs; exactly the two refused tasks
/// end archived, the timeout one stays in retry. No console error. With
/// `UPDATE_SCREENSHOTS=1` writes `docs/screenshots/search-bulk.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archive_matching_a_search_archives_exactly_its_matches() {
    let db = support::redis();
    seed_retries(&db).await;
    let app = App::serve(&db, &["--no-engine"]);
    let insp = asynqdeck::Inspector::connect(&db.url()).await.unwrap();

    with_browser(|page| async move {
        page.goto(&app.url("/search?q=error~refused")).await;
        page.click("div.search-bulk a[href*=\"/search/bulk/archive\"]").await;
        let preview: String = page
            .wait_js(
                WAIT,
                "the confirmation",
                "var p = document.querySelector('p.preview-count'); return p ? p.textContent.trim() : null;",
            )
            .await;
        assert_eq!(
            preview,
            "This will archive 2 tasks matching the search in 3 queue tabs."
        );
        page.park_pointer().await;
        page.screenshot("search-bulk").await;
        page.click("button.confirm").await;
        let path: String = page
            .wait_js(
                WAIT,
                "the jobs page",
                "return location.pathname === '/jobs' ? location.pathname : null;",
            )
            .await;
        assert_eq!(path, "/jobs");
        let states = crate::harness::until(WAIT, "the jobs to archive the matches", || {
            let insp = insp.clone();
            async move {
                let mut out = Vec::new();
                for (q, id) in [("billing", "inv-1042"), ("mail", "m-77"), ("mail", "m-78")] {
                    out.push(insp.get_task_info(q, id).await.ok()?.state);
                }
                (out[0] == asynqdeck::TaskState::Archived && out[1] == asynqdeck::TaskState::Archived)
                    .then_some(out)
            }
        })
        .await;
        assert_eq!(states[2], asynqdeck::TaskState::Retry);
        page.assert_no_console_errors("/search/bulk").await;
    })
    .await;
}
