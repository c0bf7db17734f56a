//! Issue 17 item 7 (S31) in a real browser: the archived tab has Export
//! links (NDJSON and CSV, marked for download) whose downloads hold every
//! task of the tab, and with a filter applied, only what it matches.

use std::time::Duration;

use asynqdeck::broker::Broker;

use crate::actions::seed_archived;
use crate::harness::{App, with_browser};
use crate::support;

const WAIT: Duration = Duration::from_secs(15);

/// Fetches `href` through the page (same origin, the page's cookies) and
/// returns the status, the content disposition and the body.
const FETCH: &str = "window.__export = null;
    fetch(arguments[0]).then(function (r) {
        return r.text().then(function (t) {
            window.__export = [r.status, r.headers.get('content-disposition') || '', t];
        });
    });
    return true;";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_tab_exports_every_task() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    seed_archived(
        &broker,
        "mail",
        &[
            (
                "m1",
                "email:send",
                r#"{"to":"ana@example.com"}"#,
                "smtp down",
            ),
            (
                "m2",
                "email:send",
                r#"{"to":"bo@example.com"}"#,
                "smtp down",
            ),
            ("s1", "sms:send", "hello", "gateway 503"),
        ],
    )
    .await;
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        page.goto(&app.url("/queues/mail/archived")).await;
        let (href, download, label): (String, bool, String) = page
            .wait_js(
                WAIT,
                "the Export NDJSON link",
                "var a = document.querySelector('a[data-export=\"ndjson\"]');
                 return a ? [a.getAttribute('href'), a.hasAttribute('download'), a.textContent.trim()] : null;",
            )
            .await;
        assert_eq!(label, "Export NDJSON");
        assert!(download, "the link downloads");
        assert!(href.contains("/queues/mail/archived/export?format=ndjson"), "{href}");
        let (status, disposition, body) = fetch(&page, &href).await;
        assert_eq!(status, 200);
        assert_eq!(disposition, "attachment; filename=\"mail-archived.ndjson\"");
        let lines: Vec<serde_json::Value> = body
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let ids: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(sorted, ["m1", "m2", "s1"]);
        let s1 = lines.iter().find(|l| l["id"] == "s1").unwrap();
        assert_eq!(s1["payload"], "hello");
        assert_eq!(s1["payload_encoding"], "text");
        assert_eq!(s1["last_err"], "gateway 503");
        assert_eq!(s1["state"], "archived");
        assert_eq!(s1["type"], "sms:send");

        // The CSV link: header row and three rows.
        let csv: String = page
            .js("return document.querySelector('a[data-export=\"csv\"]').getAttribute('href');")
            .await;
        let (status, _, body) = fetch(&page, &csv).await;
        assert_eq!(status, 200);
        assert_eq!(body.matches("\r\n").count(), 4, "{body}");
        assert!(body.starts_with("id,queue,type,state,payload,"), "{body}");

        // Filtered by type, the link exports only the matches.
        page.js::<bool>(
            "document.querySelector('form.filters input[name=\"type\"]').value = 'email:send'; return true;",
        )
        .await;
        page.click("form.filters button[type=submit]").await;
        let href: String = page
            .wait_js(
                WAIT,
                "the filtered Export link",
                "var a = document.querySelector('a[data-export=\"ndjson\"]');
                 return a && a.getAttribute('href').indexOf('type=email') >= 0 ? a.getAttribute('href') : null;",
            )
            .await;
        let (_, _, body) = fetch(&page, &href).await;
        let mut ids: Vec<String> = body
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        assert_eq!(ids, ["m1", "m2"]);
        page.assert_no_console_errors("the archived tab").await;
    })
    .await;
}

async fn fetch(page: &crate::harness::Page, href: &str) -> (u16, String, String) {
    let script = FETCH.replace("arguments[0]", &serde_json::to_string(href).unwrap());
    page.js::<bool>(&script).await;
    page.wait_js(WAIT, "the download", "return window.__export;")
        .await
}
