//! Issue 12 R9 in a real browser: the queue named `..`, whose links a
//! browser would otherwise normalise to `/`, is reachable by clicking.

use std::time::Duration;

use asynqdeck::broker::Broker;
use asynqdeck::{Client, EnqueueOptions, Task};

use crate::actions::seed_archived;
use crate::harness::{App, with_browser};
use crate::support;

const WAIT: Duration = Duration::from_secs(15);

/// R9: queue `..` holds a pending task `p1` and an archived task `a1`. From
/// the queues page its name link opens its page, and clicking each of its
/// seven tab links shows that tab of queue `..` (heading, current tab, the
/// task of that state), never the queues page; the pending row's task link
/// opens the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r9_dot_dot_queue_tabs_are_reachable_by_clicking() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    seed_archived(&broker, "..", &[("a1", "email:send", "{}", "smtp down")]).await;
    Client::from_broker(broker.clone())
        .enqueue(
            &Task::new("email:send", "{}"),
            EnqueueOptions::new().queue("..").task_id("p1"),
        )
        .await
        .unwrap();
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        page.goto(&app.url("/")).await;
        let href: String = page
            .js("var a = Array.from(document.querySelectorAll('#queues tbody tr td:first-child a')).find(function (a) { return a.textContent === '..'; });
                 return a ? a.getAttribute('href') : '';")
            .await;
        assert!(!href.is_empty(), "a link for queue ..");
        page.click(&format!("#queues tbody a[href=\"{href}\"]")).await;
        let h1: String = page
            .wait_js(
                WAIT,
                "the page of queue ..",
                "var h = document.querySelector('h1'); return h && document.querySelector('#tab') ? h.firstChild.textContent.trim() : null;",
            )
            .await;
        assert_eq!(h1, "Queue ..");

        for (state, task) in [
            ("active", None),
            ("pending", Some("p1")),
            ("aggregating", None),
            ("scheduled", None),
            ("retry", None),
            ("archived", Some("a1")),
            ("completed", None),
        ] {
            let tab_href: String = page
                .js(&format!(
                    "return document.querySelector('#tab nav.tabs a .count[data-state=\"{state}\"]').parentElement.getAttribute('href');"
                ))
                .await;
            page.click(&format!("#tab nav.tabs a[href=\"{tab_href}\"]")).await;
            let (h1, current, ids): (String, String, Vec<String>) = page
                .wait_js(
                    WAIT,
                    &format!("the {state} tab of queue .."),
                    &format!(
                        "var t = document.querySelector('#tab table.tasks[data-tab=\"{state}\"]');
                         if (!t) return null;
                         var cur = document.querySelector('#tab nav.tabs a[aria-current=\"page\"] .count');
                         return [document.querySelector('h1').firstChild.textContent.trim(),
                                 cur ? cur.getAttribute('data-state') : '',
                                 Array.from(t.querySelectorAll('tbody tr[data-id]')).map(function (r) {{ return r.getAttribute('data-id'); }})];"
                    ),
                )
                .await;
            assert_eq!(h1, "Queue ..", "{state} tab via {tab_href}");
            assert_eq!(current, state, "{state} tab via {tab_href}");
            let want: Vec<String> = task.map(|t| t.to_string()).into_iter().collect();
            assert_eq!(ids, want, "rows of the {state} tab of queue ..");
        }

        page.goto(&app.url("/queues/..~/pending")).await;
        page.click("#tab tr[data-id=\"p1\"] td.id a").await;
        let id: String = page
            .wait_js(
                WAIT,
                "the task page of p1",
                "var s = document.querySelector('h1 .mono'); return s ? s.textContent : null;",
            )
            .await;
        assert_eq!(id, "p1");
        let queue: String = page
            .js("return Array.from(document.querySelectorAll('nav.crumbs a'))[1].textContent;")
            .await;
        assert_eq!(queue, "..");
        page.assert_no_console_errors("queue ..").await;
    })
    .await;
}
