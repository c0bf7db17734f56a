//! Issue 17 items 2 and 3 in a real browser against `asynqdeck serve`:
//! retry pressure (retries due in the next 1 / 5 / 60 min) on the
//! overview and next to the retry tab's sparkline, and error signatures
//! above the retry tab's task list, whose Filter link narrows the list to
//! the signature and whose bulk link opens the confirmation page.

use std::time::Duration;

use asynqdeck::broker::proto::TaskMessage;
use asynqdeck::inspector::errgroups;
use chrono::Utc;

use crate::harness::{App, with_browser};
use crate::support::{self, seed};

const WAIT: Duration = Duration::from_secs(15);

/// A retry task of `ty` in `q` that last failed `ago` s ago with `err`.
fn failed(q: &str, id: &str, ty: &str, err: &str, ago: i64) -> TaskMessage {
    TaskMessage {
        retried: 1,
        error_msg: err.into(),
        last_failed_at: Utc::now().timestamp() - ago,
        ..seed::msg(q, id, ty, br#"{"n":1}"#)
    }
}

/// Queue `payments` holds retries due in 58 s, 200 s, 250 s, 1,000 s and
/// 3,000 s, queue `quiet` one due in 2 h: the overview's "Due 1·5·60 min"
/// cells read `1 · 3 · 5` and `0 · 0 · 0` with their meaning in the
/// tooltip, and the retry tab of `payments` shows `1 · 3 · 5` in the
/// outage fragment (the test takes seconds; the nearest retry is 58 s out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_pressure_on_the_overview_and_the_retry_tab() {
    let db = support::redis();
    let mut raw = db.raw().await;
    let now = Utc::now().timestamp();
    let err = "POST https://psp.example/charge: 503 Service Unavailable";
    for (i, due) in [58, 200, 250, 1000, 3000].iter().enumerate() {
        let m = failed("payments", &format!("p{i}"), "payment:charge", err, 30);
        seed::message(&mut raw, &m, "retry", now + due).await;
    }
    let m = failed("quiet", "q0", "report:build", "disk full", 30);
    seed::message(&mut raw, &m, "retry", now + 7200).await;
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        page.goto(&app.url("/")).await;
        let cells: Vec<(String, String)> = page
            .wait_js(
                WAIT,
                "the pressure cells of both queues",
                "var r = ['payments', 'quiet'].map(function (q) {
                   var c = document.querySelector('#queues tr[data-queue=\"' + q + '\"] td.pressure');
                   return c ? [c.textContent.trim(), c.getAttribute('title')] : null;
                 });
                 return r[0] && r[1] ? r : null;",
            )
            .await;
        let meaning = "Retries due in the next 1 / 5 / 60 min".to_string();
        assert_eq!(
            cells,
            [
                ("1 · 3 · 5".to_string(), meaning.clone()),
                ("0 · 0 · 0".to_string(), meaning.clone())
            ]
        );
        let header: String = page
            .js("return document.querySelector('#queues th.pressure').textContent.trim();")
            .await;
        assert_eq!(header, "Due 1·5·60 min");
        page.assert_no_console_errors("the queues page").await;

        page.goto(&app.url("/queues/payments/retry")).await;
        let shown: (String, String) = page
            .wait_js(
                WAIT,
                "the retry pressure in the outage fragment",
                "var p = document.querySelector('#outage .retry-pressure');
                 return p ? [p.querySelector('.pressure-figures').textContent.trim(), p.textContent.trim()] : null;",
            )
            .await;
        assert_eq!(
            shown,
            (
                "1 · 3 · 5".to_string(),
                "Due in 1 / 5 / 60 min: 1 · 3 · 5".to_string()
            )
        );
        page.assert_no_console_errors("the retry tab").await;
    })
    .await;
}

/// Queue `mail` holds three `email:send` retries refused by the mail server
/// (three addresses), one `sms:send` retry with the same error and one
/// `email:send` with another: the retry tab shows three signatures above
/// the task list (email refused ×3 first), each with its count and last
/// hour; clicking the email signature's Filter shows exactly its three
/// tasks, and its "Archive 3" opens the confirmation page for 3 tasks.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_signatures_sit_above_the_list_and_filter_it() {
    let db = support::redis();
    let mut raw = db.raw().await;
    let now = Utc::now().timestamp();
    let refused = |n: u8| format!("dial tcp 10.0.0.{n}:25: connect: connection refused");
    let seeds = [
        failed("mail", "e1", "email:send", &refused(1), 120),
        failed("mail", "e2", "email:send", &refused(2), 900),
        failed("mail", "e3", "email:send", &refused(3), 5400),
        failed("mail", "s1", "sms:send", &refused(4), 60),
        failed("mail", "t1", "email:send", "template 7 missing", 300),
    ];
    for (i, m) in seeds.iter().enumerate() {
        seed::message(&mut raw, m, "retry", now + 3600 + i as i64).await;
    }
    let gid = errgroups::group_id("dial tcp <ip>:<n>: connect: connection refused");
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        page.goto(&app.url("/queues/mail/retry")).await;
        let rows: Vec<(String, String, String, String)> = page
            .wait_js(
                WAIT,
                "three error signatures",
                "var r = Array.from(document.querySelectorAll('#summary table.signatures tbody tr')).map(function (tr) {
                   return [tr.getAttribute('data-type'), tr.querySelector('code').textContent,
                           tr.querySelector('td.num').textContent.trim(),
                           tr.querySelector('.sig-trend').firstChild.textContent.trim()];
                 });
                 return r.length === 3 ? r : null;",
            )
            .await;
        let s = |a: &str, b: &str, c: &str, d: &str| {
            (a.to_string(), b.to_string(), c.to_string(), d.to_string())
        };
        assert_eq!(
            rows,
            [
                s("email:send", "dial tcp <ip>:<n>: connect: connection refused", "3", "2"),
                s("sms:send", "dial tcp <ip>:<n>: connect: connection refused", "1", "1"),
                s("email:send", "template <n> missing", "1", "1"),
            ]
        );
        // Above the task list, on screen.
        let above: bool = page
            .js("var s = document.querySelector('#summary table.signatures').getBoundingClientRect();
                 var t = document.querySelector('#tab table.tasks').getBoundingClientRect();
                 return s.bottom <= t.top;")
            .await;
        assert!(above, "the signatures sit above the task list");
        page.screenshot("signatures").await;

        let sig = format!("#summary tr[data-group=\"{gid}\"][data-type=\"email:send\"]");
        page.click(&format!("{sig} a[data-filter=\"signature\"]")).await;
        let ids: Vec<String> = page
            .wait_js(
                WAIT,
                "the list filtered by the signature",
                "if (location.search.indexOf('err=') < 0) return null;
                 var ids = Array.from(document.querySelectorAll('#tab tr[data-id]')).map(function (r) { return r.getAttribute('data-id'); });
                 return ids.length ? ids : null;",
            )
            .await;
        assert_eq!(ids, ["e1", "e2", "e3"]);
        let search: String = page.js("return location.search;").await;
        assert_eq!(search, format!("?type=email%3Asend&err={gid}"));
        page.assert_no_console_errors("the filtered retry tab").await;

        page.goto(&app.url("/queues/mail/retry")).await;
        page.click(&format!("{sig} a[data-bulk=\"group-archive\"]")).await;
        let button: String = page
            .wait_js(
                WAIT,
                "the confirmation page",
                "var b = document.querySelector('button.confirm');
                 return b && location.pathname.indexOf('/matching/archive') > 0 ? b.textContent.trim() : null;",
            )
            .await;
        assert_eq!(button, "Confirm: Archive 3 tasks");
        page.assert_no_console_errors("the confirmation page").await;
    })
    .await;
}
