//! Alert webhooks in a real browser (issue 17 item 6): `asynqdeck serve
//! --alert-webhook` posts the firing alert of a critical finding to a
//! loopback receiver, `/alerts` lists the webhook by host with that send,
//! and "Send a test" posts one test message and shows its result.

use std::time::Duration;

use asynqdeck::{Client, EnqueueOptions, Task};

use crate::harness::{App, with_browser};
use crate::support::{self, webhook::Receiver};

const WAIT: Duration = Duration::from_secs(15);

/// A queue with pending work and no server: the alerter posts one firing
/// `no_consumer` alert. On `/alerts` the webhook shows as
/// `127.0.0.1:<port>` (never its path), the send is listed, and "Send a
/// test" adds one test message, shown as delivered (200 OK). No console
/// error. With `UPDATE_SCREENSHOTS=1` writes `docs/screenshots/alerts.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_alerts_page_lists_sends_and_the_test_button_posts_one() {
    let receiver = Receiver::start().await;
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    client
        .enqueue(
            &Task::new("email:send", b"{}".to_vec()),
            EnqueueOptions::new().queue("idle"),
        )
        .await
        .unwrap();
    let app = App::serve(
        &db,
        &["--no-engine", "--alert-webhook", receiver.url.as_str()],
    );
    let first = receiver.wait_for(1, WAIT).await;
    assert_eq!(first[0]["asynqdeck"]["signal"], "no_consumer");
    assert_eq!(first[0]["asynqdeck"]["state"], "firing");
    let host = receiver.url["http://".len()..]
        .split('/')
        .next()
        .unwrap()
        .to_string();

    with_browser(|page| async move {
        page.goto(&app.url("/alerts")).await;
        let hosts: Vec<String> = page
            .js("return Array.from(document.querySelectorAll('li.webhook')).map(function (e) { return e.textContent; });")
            .await;
        assert_eq!(hosts, vec![host.clone()]);
        let html: String = page.js("return document.body.innerHTML;").await;
        assert!(!html.contains("T0KEN"));
        page.click("#send-test").await;
        let result: Vec<String> = page
            .wait_js(
                WAIT,
                "the test result",
                "var b = document.querySelector('.test-result'); var r = document.querySelector('tr.alert-send');
                 return b && r ? [b.textContent.trim(), r.querySelector('.signal').textContent, r.querySelector('.result').textContent] : null;",
            )
            .await;
        assert_eq!(
            result,
            vec!["Test sent: delivered (see below).", "test", "200 OK"]
        );
        let rows: usize = page
            .js("return document.querySelectorAll('tr.alert-send').length;")
            .await;
        assert_eq!(rows, 2);
        assert_eq!(receiver.bodies().len(), 2);
        assert_eq!(receiver.bodies()[1]["asynqdeck"]["state"], "test");
        page.park_pointer().await;
        page.screenshot("alerts").await;
        page.assert_no_console_errors("/alerts").await;
    })
    .await;
}
