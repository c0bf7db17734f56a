//! Issue 12 R0: a live update never replaces the element under the
//! pointer or with keyboard focus, and the held fragment refreshes once
//! the pointer or focus leaves it.

use std::time::Duration;

use asynqdeck::broker::Broker;
use fantoccini::Locator;

use crate::actions::{MAIL, seed_archived};
use crate::harness::{App, Page, with_browser};
use crate::support;

const WAIT: Duration = Duration::from_secs(15);

/// Counts the polls of `#tab` htmx starts on this page (held or not), as
/// `window.__tabPolls`: requests of `#tab` with no triggering event (the
/// `every` timer, and the refresh after leaving).
const COUNT_POLLS: &str = "window.__tabPolls = 0;
  document.addEventListener('htmx:beforeRequest', function (e) {
    var c = e.detail.requestConfig;
    if (e.detail.elt && e.detail.elt.id === 'tab' && !(c && c.triggeringEvent)) window.__tabPolls++;
  });
  return null;";

/// Waits until `n` more polls of `#tab` were started than `since`.
async fn wait_polls(page: &Page, since: u64, n: u64, what: &str) -> u64 {
    page.wait_js(
        WAIT,
        &format!("{n} polls of #tab while {what}"),
        &format!(
            "return window.__tabPolls >= {} ? window.__tabPolls : null;",
            since + n
        ),
    )
    .await
}

async fn polls(page: &Page) -> u64 {
    page.js("return window.__tabPolls;").await
}

/// What the test asserts about the held row: whether the element saved as
/// `window[saved]` is still in the document, whether row `new_id` is shown,
/// and the hold badge's text (empty when none).
async fn held_state(page: &Page, saved: &str, new_id: &str) -> (bool, bool, String) {
    page.js(&format!(
        "var b = document.querySelector('#tab > .held-badge');
         return [document.contains(window.{saved}),
                 !!document.querySelector('#tab tr[data-id=\"{new_id}\"]'),
                 b ? b.textContent : ''];"
    ))
    .await
}

/// R0: on the archived tab (polling every second), the pointer rests on
/// m1's Run button while a new archived task appears in Redis: over three
/// observed polls the row stays the same element (the WebDriver reference
/// to its button is not stale), the new task is not swapped in, and a badge
/// says live updates are paused. When the pointer leaves, the tab refreshes
/// and shows the new task. The same with keyboard focus on m2's Run button
/// and the pointer elsewhere, until the focus leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r0_live_update_keeps_the_element_under_pointer_or_focus() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    seed_archived(&broker, "mail", &MAIL[..3]).await;
    let app = App::serve(&db, &[]);

    with_browser(|page| async move {
        page.goto(&app.url("/queues/mail/archived")).await;
        let _: Option<bool> = page.js(COUNT_POLLS).await;
        let start = polls(&page).await;
        wait_polls(&page, start, 1, "nothing is pointed at").await;

        // Pointer on m1's Run button.
        let run_css = "#tab tr[data-id=\"m1\"] button[data-op=\"run\"]";
        page.hover(run_css).await;
        let run = page.client.find(Locator::Css(run_css)).await.unwrap();
        let _: Option<bool> = page
            .js("window.__row = document.querySelector('#tab tr[data-id=\"m1\"]'); return null;")
            .await;
        seed_archived(&broker, "mail", &[("n1", "email:send", "{}", "new failure")]).await;
        let since = polls(&page).await;
        wait_polls(&page, since, 3, "the pointer is on a row").await;
        let (same, new_shown, badge) = held_state(&page, "__row", "n1").await;
        assert!(
            same,
            "the row under the pointer was replaced by a live update"
        );
        assert!(!new_shown, "the tab was swapped while the pointer was on it");
        assert_eq!(badge, "live updates paused while the pointer or focus is here");
        assert_eq!(
            run.attr("data-op").await.expect("the button's reference is not stale"),
            Some("run".to_string())
        );

        // The pointer leaves: the tab refreshes.
        page.park_pointer().await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the tab to refresh after the pointer left",
                "var b = document.querySelector('#tab > .held-badge');
                 return !document.contains(window.__row) && document.querySelector('#tab tr[data-id=\"n1\"]') && !b ? true : null;",
            )
            .await;

        // Keyboard focus on m2's Run button, pointer in the corner.
        let _: Option<bool> = page
            .js("window.__row2 = document.querySelector('#tab tr[data-id=\"m2\"]');
                 document.querySelector('#tab tr[data-id=\"m2\"] button[data-op=\"run\"]').focus();
                 return null;")
            .await;
        seed_archived(&broker, "mail", &[("n2", "email:send", "{}", "another failure")]).await;
        let since = polls(&page).await;
        wait_polls(&page, since, 3, "focus is on a row's button").await;
        let (same, new_shown, badge) = held_state(&page, "__row2", "n2").await;
        assert!(same, "the focused row was replaced by a live update");
        assert!(!new_shown, "the tab was swapped while focus was in it");
        assert_eq!(badge, "live updates paused while the pointer or focus is here");
        let focused: String = page
            .js("return document.activeElement.closest('tr').getAttribute('data-id');")
            .await;
        assert_eq!(focused, "m2", "focus stayed on m2's button");

        // Focus leaves: the tab refreshes.
        let _: Option<bool> = page.js("document.activeElement.blur(); return null;").await;
        let _: bool = page
            .wait_js(
                WAIT,
                "the tab to refresh after focus left",
                "return !document.contains(window.__row2) && document.querySelector('#tab tr[data-id=\"n2\"]') && !document.querySelector('#tab > .held-badge') ? true : null;",
            )
            .await;
        page.assert_no_console_errors("the archived tab").await;
    })
    .await;
}
