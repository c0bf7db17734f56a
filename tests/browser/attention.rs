//! The attention board in a real browser (issue 17 item 4): the overview
//! of seeded trouble lists its findings most urgent first, refreshed with
//! the overview, and each link leads to where the on-call engineer acts.

use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::{Client, EnqueueOptions, Task};
use redis::AsyncCommands;

use crate::harness::{App, with_browser};
use crate::support::{self, seed};

const WAIT: Duration = Duration::from_secs(15);

/// Seeds a queue with pending work and no server (`idle`), a scheduled
/// task due 5 minutes ago with no forwarder (`stalled`, the engine is
/// off), an active task without a lease (`orphan`) and a queue paused two
/// hours ago (`paused`). The board shows the four findings in order; the
/// past-due link opens the scheduled tab of `stalled`; no console error.
/// With `UPDATE_SCREENSHOTS=1` writes `docs/screenshots/attention.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_board_lists_findings_and_links_to_the_tab() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    client
        .enqueue(
            &Task::new("email:send", b"{}".to_vec()),
            EnqueueOptions::new().queue("idle"),
        )
        .await
        .unwrap();
    let now = chrono::Utc::now().timestamp();
    let mut conn = db.raw().await;
    seed::task(&mut conn, "stalled", "late1", "scheduled", now - 300).await;
    seed::seeded_unleased(&mut conn, "orphan", "o1", "active").await;
    let _: () = conn.sadd(keys::ALL_QUEUES, "paused").await.unwrap();
    let _: () = conn
        .set(keys::paused_key("paused"), now - 7200)
        .await
        .unwrap();
    let app = App::serve(&db, &["--no-engine"]);

    with_browser(|page| async move {
        page.goto(&app.url("/")).await;
        let items: Vec<Vec<String>> = page
            .wait_js(
                WAIT,
                "the attention board",
                "var li = document.querySelectorAll('#attention li.finding');
                 return li.length == 4 ? Array.from(li).map(function (e) {
                   return [e.dataset.severity, e.dataset.kind, e.dataset.queue, e.querySelector('a').getAttribute('href')];
                 }) : null;",
            )
            .await;
        assert_eq!(
            items,
            vec![
                vec!["critical", "no_consumer", "idle", "/queues/idle/pending"],
                vec!["critical", "past_due", "stalled", "/queues/stalled/scheduled"],
                vec!["warning", "orphaned", "orphan", "/queues/orphan/active"],
                vec!["warning", "paused_long", "paused", "/queues/paused"],
            ]
        );
        // The board is part of the live fragment: still there after a refresh.
        page.count_htmx_requests().await;
        page.wait_htmx_requests(1, "/").await;
        let n: usize = page
            .js("return document.querySelectorAll('#queues #attention li.finding').length;")
            .await;
        assert_eq!(n, 4);
        page.park_pointer().await;
        page.screenshot("attention").await;

        page.click("#attention li[data-kind=\"past_due\"] a.finding-link")
            .await;
        let id: String = page
            .wait_js(
                WAIT,
                "the scheduled tab of stalled",
                "return location.pathname == '/queues/stalled/scheduled' && document.querySelector('#tab tr[data-id=\"late1\"]') ? 'late1' : null;",
            )
            .await;
        assert_eq!(id, "late1");
        page.assert_no_console_errors("/").await;
    })
    .await;
}
