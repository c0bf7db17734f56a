//! The queues page and the task actions of the archived tab in a real
//! browser against `asynqdeck serve` (issue 5 item 3; S17), and read-only
//! mode (issue 4: read-only hides buttons).
//!
//! Data is seeded the way a worker produces it: enqueued with [`Client`],
//! leased with `Broker::dequeue` and failed with `Broker::archive` /
//! `Broker::retry`, so LastErr, counters and keys are the real ones.

use std::time::Duration;

use asynqdeck::broker::{Broker, keys};
use asynqdeck::{Client, EnqueueOptions, Error, Inspector, Task, TaskState};
use chrono::Utc;
use redis::AsyncCommands;

use crate::harness::{App, Page, with_browser};
use crate::support;

const WAIT: Duration = Duration::from_secs(10);

/// Leases every pending task of `queue` (as a worker would) and returns them.
async fn lease_all(broker: &Broker, queue: &str) -> Vec<asynqdeck::broker::proto::WireTask> {
    let lease = Utc::now() + chrono::Duration::hours(1);
    broker
        .dequeue(queue, 100, lease)
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.expect("seeded tasks decode"))
        .collect()
}

/// Enqueues `(id, type, payload, error)` tasks into `queue` and archives
/// each with its error, as a worker does after the last retry.
pub(crate) async fn seed_archived(
    broker: &Broker,
    queue: &str,
    tasks: &[(&str, &str, &str, &str)],
) {
    let client = Client::from_broker(broker.clone());
    for (id, kind, payload, _) in tasks {
        client
            .enqueue(
                &Task::new(*kind, *payload),
                EnqueueOptions::new().queue(queue).task_id(*id).max_retry(3),
            )
            .await
            .unwrap();
    }
    for t in lease_all(broker, queue).await {
        let (_, _, _, err) = tasks.iter().find(|x| x.0 == t.msg.id).unwrap();
        broker.archive(&t, err).await.unwrap();
    }
}

pub(crate) const MAIL: &[(&str, &str, &str, &str)] = &[
    (
        "m1",
        "email:send",
        r#"{"to":"ana@example.com"}"#,
        "dial tcp 10.0.3.7:25: connect: connection timed out",
    ),
    (
        "m2",
        "email:send",
        r#"{"to":"bo@example.com"}"#,
        "smtp: 550 5.1.1 <bo@example.com>: mailbox unavailable",
    ),
    (
        "m3",
        "email:send",
        r#"{"to":"cy@example.com"}"#,
        "smtp: 552 5.2.2 mailbox full",
    ),
    (
        "m4",
        "email:send",
        r#"{"to":"di@example.com"}"#,
        "smtp: 552 5.2.2 mailbox full",
    ),
    (
        "m5",
        "email:digest",
        r#"{"user":5}"#,
        "template \"digest\": missing field user.name",
    ),
    (
        "m6",
        "email:digest",
        r#"{"user":6}"#,
        "template \"digest\": missing field user.name",
    ),
];

/// The queues table as `(queue, [cell texts])`, header order; a cell with
/// a link gives the link's text (the count, without the trend under it).
const QUEUE_ROWS: &str = "return Array.from(document.querySelectorAll('#queues table tbody tr')).map(function (tr) {
  return [tr.cells[0].textContent.trim(), Array.from(tr.cells).filter(function (c) { return !c.classList.contains('actions'); }).map(function (c) { var a = c.querySelector('a'); return (a ? a.textContent : c.textContent).trim(); })];
});";

/// The ids of the task rows of the current tab, in page order.
const ROW_IDS: &str = "return Array.from(document.querySelectorAll('#tab table.tasks tbody tr[data-id]')).map(function (r) { return r.getAttribute('data-id'); });";

fn count_js(state: &str) -> String {
    format!(
        "var c = document.querySelector('#tab span.count[data-state=\"{state}\"]'); return c ? c.textContent.trim() : null;"
    )
}

async fn tab_count(page: &Page, state: &str) -> String {
    page.js(&count_js(state)).await
}

async fn row_ids(page: &Page) -> Vec<String> {
    page.js(ROW_IDS).await
}

/// Opens the queues page: one row per queue with the counts Redis has;
/// then the archived tab of `mail` through its link. Run on m1 moves it to
/// pending without a page load (the window marker survives) and drops the
/// archived count by one; the pending tab and Redis both show it. Delete on
/// m2 asks for confirmation and removes it from Redis; selecting m3, m4, m5
/// and "Delete selected" (confirmed) removes those three, leaving m6 (S17,
/// issue 5 item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_tab_run_delete_and_bulk_delete() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let insp = Inspector::from_broker(broker.clone());
    seed_archived(&broker, "mail", MAIL).await;
    let client = Client::from_broker(broker.clone());
    for n in 1..=3 {
        client
            .enqueue(
                &Task::new("invoice:create", format!(r#"{{"invoice":{n}}}"#)),
                EnqueueOptions::new()
                    .queue("billing")
                    .task_id(format!("b{n}")),
            )
            .await
            .unwrap();
    }
    let mut raw = db.raw().await;
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        // Queues page: exact counts, the same as Redis.
        page.goto(&app.url("/")).await;
        let rows: Vec<(String, Vec<String>)> = page.js(QUEUE_ROWS).await;
        let names: Vec<&str> = rows.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["billing", "mail"]);
        // Columns (the Actions cell left out): Queue, State, Size, Active,
        // Pending, Aggregating, Scheduled, Retry, Due 1·5·60 min, Archived,
        // Completed, Processed, Failed, ...
        let mail = insp.queue_info("mail").await.unwrap();
        assert_eq!((mail.size, mail.archived, mail.failed), (6, 6, 6));
        assert_eq!(
            rows[1].1[1..13],
            ["run", "6", "0", "0", "0", "0", "0", "0 · 0 · 0", "6", "0", "6", "6"]
        );
        let billing = insp.queue_info("billing").await.unwrap();
        assert_eq!((billing.size, billing.pending), (3, 3));
        assert_eq!(
            rows[0].1[1..13],
            ["run", "3", "0", "3", "0", "0", "0", "0 · 0 · 0", "0", "0", "0", "0"]
        );
        page.assert_no_console_errors("the queues page").await;

        // To the archived tab through the count link.
        page.click("#queues a[href=\"/queues/mail/archived\"]").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the archived tab",
                "return document.querySelector('#tab table.tasks[data-tab=\"archived\"]') ? true : null;",
            )
            .await;
        let mut ids = row_ids(&page).await;
        ids.sort();
        assert_eq!(ids, ["m1", "m2", "m3", "m4", "m5", "m6"]);
        assert_eq!(tab_count(&page, "archived").await, "6");
        assert_eq!(tab_count(&page, "pending").await, "0");
        let errs: Vec<(String, String)> = page
            .js("return Array.from(document.querySelectorAll('#tab tr[data-id]')).map(function (r) {
                   return [r.getAttribute('data-id'), r.querySelector('pre.err').textContent];
                 });")
            .await;
        for (id, err) in &errs {
            let want = MAIL.iter().find(|m| m.0 == id).unwrap().3;
            assert_eq!(err, want, "LastErr of {id}");
        }

        // Run m1: leaves the tab, count 6 → 5, no page load.
        page.mark_window("before-run").await;
        page.click("#tab tr[data-id=\"m1\"] button[data-op=\"run\"]")
            .await;
        let toast: String = page
            .wait_js(
                WAIT,
                "m1 to leave the archived tab",
                "var gone = !document.querySelector('#tab tr[data-id=\"m1\"]');
                     var n = document.querySelector('#tab span.count[data-state=\"archived\"]');
                     var t = document.querySelector('#toast .msg');
                     return gone && n && n.textContent.trim() === '5' && t ? t.textContent : null;",
            )
            .await;
        assert_eq!(toast, "Task m1: moved to pending.");
        page.assert_not_reloaded("before-run").await;
        assert_eq!(tab_count(&page, "pending").await, "1");
        let mut ids = row_ids(&page).await;
        ids.sort();
        assert_eq!(ids, ["m2", "m3", "m4", "m5", "m6"]);
        // Redis: m1 is pending, with its error kept.
        let m1 = insp.get_task_info("mail", "m1").await.unwrap();
        assert_eq!(m1.state, TaskState::Pending);
        assert_eq!(m1.last_err, MAIL[0].3);
        let pending: Vec<String> = raw.lrange(keys::pending_key("mail"), 0, -1).await.unwrap();
        assert_eq!(pending, ["m1"]);
        let archived: i64 = raw.zcard(keys::archived_key("mail")).await.unwrap();
        assert_eq!(archived, 5);

        // The pending tab shows it.
        page.click("#tab nav.tabs a[href=\"/queues/mail/pending\"]").await;
        let pending_ids: Vec<String> = page
            .wait_js(
                WAIT,
                "the pending tab",
                &format!(
                    "return document.querySelector('#tab table.tasks[data-tab=\"pending\"]') ? (function () {{ {ROW_IDS} }})() : null;"
                ),
            )
            .await;
        assert_eq!(pending_ids, ["m1"]);
        assert_eq!(tab_count(&page, "pending").await, "1");
        assert_eq!(tab_count(&page, "archived").await, "5");

        // Delete m2 from the archived tab, confirming the dialog.
        page.goto(&app.url("/queues/mail/archived")).await;
        page.mark_window("before-delete").await;
        page.click("#tab tr[data-id=\"m2\"] button[data-op=\"delete\"]")
            .await;
        page.confirm("Delete task m2?").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "m2 to leave the archived tab",
                "var n = document.querySelector('#tab span.count[data-state=\"archived\"]');
                     return !document.querySelector('#tab tr[data-id=\"m2\"]') && n && n.textContent.trim() === '4' ? true : null;",
            )
            .await;
        page.assert_not_reloaded("before-delete").await;
        assert!(matches!(
            insp.get_task_info("mail", "m2").await,
            Err(Error::TaskNotFound { .. })
        ));
        let exists: bool = raw.exists(keys::task_key("mail", "m2")).await.unwrap();
        assert!(!exists, "hash of m2 deleted");

        // Select m3, m4, m5 and delete them at once.
        for id in ["m3", "m4", "m5"] {
            page.click(&format!("#tab input.row-select[value=\"{id}\"]"))
                .await;
        }
        let mut checked: Vec<String> = page
            .js("return Array.from(document.querySelectorAll('#tab input.row-select:checked')).map(function (c) { return c.value; });")
            .await;
        checked.sort();
        assert_eq!(checked, ["m3", "m4", "m5"]);
        page.click("#tab .toolbar.bulk button[hx-post*=\"/batch/delete\"]")
            .await;
        page.confirm("Delete the selected tasks?").await;
        let left: Vec<String> = page
            .wait_js(
                WAIT,
                "the selected rows to go",
                &format!(
                    "var n = document.querySelector('#tab span.count[data-state=\"archived\"]');
                     return n && n.textContent.trim() === '1' ? (function () {{ {ROW_IDS} }})() : null;"
                ),
            )
            .await;
        assert_eq!(left, ["m6"]);
        page.assert_not_reloaded("before-delete").await;
        for id in ["m3", "m4", "m5"] {
            assert!(
                matches!(
                    insp.get_task_info("mail", id).await,
                    Err(Error::TaskNotFound { .. })
                ),
                "{id} deleted"
            );
        }
        let archived: Vec<String> = raw
            .zrange(keys::archived_key("mail"), 0, -1)
            .await
            .unwrap();
        assert_eq!(archived, ["m6"]);
        assert_eq!(insp.get_task_info("mail", "m6").await.unwrap().state, TaskState::Archived);
        page.assert_no_console_errors("the archived tab").await;
    })
    .await;
}

/// Every state of queue `mail` holds tasks: active 1, pending 2,
/// aggregating 1 (group `digest`), scheduled 1, retry 2, archived 2,
/// completed 1.
async fn seed_every_state(broker: &Broker) {
    let client = Client::from_broker(broker.clone());
    let q = "mail";
    let enqueue = |id: &'static str, opts: EnqueueOptions| {
        let client = client.clone();
        async move {
            client
                .enqueue(
                    &Task::new("email:send", format!(r#"{{"id":"{id}"}}"#)),
                    opts.queue(q).task_id(id),
                )
                .await
                .unwrap();
        }
    };
    seed_archived(broker, q, &MAIL[..2]).await;
    for id in ["r1", "r2"] {
        enqueue(id, EnqueueOptions::new()).await;
    }
    for t in lease_all(broker, q).await {
        let at = Utc::now() + chrono::Duration::hours(1);
        broker
            .retry(&t, at, "dial tcp 10.0.3.7:25: i/o timeout", true)
            .await
            .unwrap();
    }
    enqueue(
        "c1",
        EnqueueOptions::new().retention(Duration::from_secs(3600)),
    )
    .await;
    for t in lease_all(broker, q).await {
        broker.mark_as_complete(&t).await.unwrap();
    }
    enqueue("a1", EnqueueOptions::new()).await;
    let _active = lease_all(broker, q).await;
    enqueue("p1", EnqueueOptions::new()).await;
    enqueue("p2", EnqueueOptions::new()).await;
    enqueue(
        "s1",
        EnqueueOptions::new().process_in(Duration::from_secs(3600)),
    )
    .await;
    enqueue("g1", EnqueueOptions::new().group("digest")).await;
}

/// Counts of action controls on the page: elements posting with htmx,
/// forms posting, row checkboxes, and buttons other than the live-updates
/// toggle and copy buttons.
const ACTION_CONTROLS: &str = "return [
  document.querySelectorAll('[hx-post],[hx-put],[hx-patch],[hx-delete]').length,
  Array.from(document.querySelectorAll('form')).filter(function (f) { return (f.getAttribute('method') || 'get').toLowerCase() !== 'get'; }).length,
  document.querySelectorAll('input.row-select, input[data-select-all]').length,
  Array.from(document.querySelectorAll('button')).filter(function (b) { return b.id !== 'live-toggle' && !b.hasAttribute('data-copy') && b.type !== 'submit'; }).length
];";

/// Read-only mode: on the queues page, every tab of a queue (each holding
/// tasks), a task page, servers, schedulers, history and Redis there is no
/// element that posts, no form that posts, no row checkbox and no action
/// button, while the rows themselves are shown (issue 4 read-only; issue 5
/// item 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_mode_shows_no_action_buttons() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    let insp = Inspector::from_broker(broker.clone());
    seed_every_state(&broker).await;
    let info = insp.queue_info("mail").await.unwrap();
    assert_eq!(
        (
            info.active,
            info.pending,
            info.aggregating,
            info.scheduled,
            info.retry,
            info.archived,
            info.completed
        ),
        (1, 2, 1, 1, 2, 2, 1)
    );
    let app = App::serve(&db, &["--read-only"]);

    with_browser(|page| async move {
        let check = |path: &'static str| {
            let page = page.clone();
            let url = app.url(path);
            async move {
                page.goto(&url).await;
                let controls: [usize; 4] = page.js(ACTION_CONTROLS).await;
                assert_eq!(controls, [0, 0, 0, 0], "action controls on {path} (hx-post, post forms, checkboxes, buttons)");
                let badge: String = page
                    .js("var b = document.querySelector('header .badge.ro'); return b ? b.textContent : '';")
                    .await;
                assert_eq!(badge, "read-only", "badge on {path}");
                page.assert_no_console_errors(path).await;
            }
        };
        check("/").await;
        let rows: Vec<(String, Vec<String>)> = page.js(QUEUE_ROWS).await;
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].1.len(), 16, "no Actions column");
        for (tab, path, rows) in [
            ("active", "/queues/mail/active", 1),
            ("pending", "/queues/mail/pending", 2),
            ("aggregating", "/queues/mail/aggregating?group=digest", 1),
            ("scheduled", "/queues/mail/scheduled", 1),
            ("retry", "/queues/mail/retry", 2),
            ("archived", "/queues/mail/archived", 2),
            ("completed", "/queues/mail/completed", 1),
        ] {
            check(path).await;
            assert_eq!(row_ids(&page).await.len(), rows, "rows on the {tab} tab");
        }
        check("/queues/mail/tasks/m1").await;
        let state: String = page
            .js("return document.querySelector('dd[data-field=\"state\"]').textContent.trim();")
            .await;
        assert_eq!(state, "archived");
        for path in ["/servers", "/schedulers", "/queues/mail/history", "/redis"] {
            check(path).await;
        }
    })
    .await;
}
