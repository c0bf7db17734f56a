//! The audit log in a real browser (issue 17 item 5): a task deleted from
//! its tab shows on `/audit` with who, what, where, how many and the
//! result, and the page's filter form narrows the list.

use std::time::Duration;

use asynqdeck::{Client, EnqueueOptions, Task};

use crate::harness::{App, with_browser};
use crate::support;

const WAIT: Duration = Duration::from_secs(15);

/// Deleting task a1 from the pending tab (confirmed) adds one row to
/// `/audit`: anonymous, delete, queue mail, scope tasks/a1, 1 task, ok.
/// Filtering by verb "pause" leaves no row; by queue "mail" the row again.
/// No console error. With `UPDATE_SCREENSHOTS=1` writes
/// `docs/screenshots/audit.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_shows_on_the_audit_page_and_filters_narrow_it() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    for id in ["a1", "a2"] {
        client
            .enqueue(
                &Task::new("email:send", br#"{"to":"a@example.com"}"#.to_vec()),
                EnqueueOptions::new().queue("mail").task_id(id),
            )
            .await
            .unwrap();
    }
    let app = App::serve(&db, &["--no-engine"]);

    with_browser(|page| async move {
        page.goto(&app.url("/queues/mail/pending")).await;
        page.click("#tab tr[data-id=\"a1\"] button[data-op=\"delete\"]")
            .await;
        page.confirm("Delete task a1?").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "a1 to leave the pending tab",
                "return document.querySelector('#tab tr[data-id=\"a2\"]') && !document.querySelector('#tab tr[data-id=\"a1\"]') ? true : null;",
            )
            .await;

        page.goto(&app.url("/audit")).await;
        let rows: Vec<Vec<String>> = page
            .js("return Array.from(document.querySelectorAll('tr.audit-entry')).map(function (r) {
                   return Array.from(r.cells).slice(1).map(function (c) { return c.textContent.trim(); });
                 });")
            .await;
        assert_eq!(
            rows,
            vec![vec!["anonymous", "delete", "mail", "tasks/a1", "1", "ok"]]
        );
        page.park_pointer().await;
        page.screenshot("audit").await;

        page.js::<bool>("document.querySelector('form.filters input[name=verb]').value = 'pause'; return true;")
            .await;
        page.click("form.filters button[type=submit]").await;
        let empty: String = page
            .wait_js(
                WAIT,
                "the filtered audit page",
                "var p = document.querySelector('p.empty'); return location.search.indexOf('verb=pause') >= 0 && p ? p.textContent.trim() : null;",
            )
            .await;
        assert_eq!(empty, "No entries match these filters (1 read).");
        page.goto(&app.url("/audit?queue=mail")).await;
        let n: usize = page
            .js("return document.querySelectorAll('tr.audit-entry').length;")
            .await;
        assert_eq!(n, 1);
        page.assert_no_console_errors("/audit").await;
    })
    .await;
}
