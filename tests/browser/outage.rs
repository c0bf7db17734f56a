//! A webhook partner outage in `asynqdeck demo`, watched in the browser:
//! the retry count of queue `critical` grows across polls and the outage
//! banner appears on its retry tab (S14, S29; issue 5 item 3). The same run
//! takes the README's screenshots (with `UPDATE_SCREENSHOTS=1`).

use std::time::Duration;

use asynqdeck::Inspector;
use asynqdeck::inspector::{
    FAST_GROWTH_MIN_PERCENT, FAST_GROWTH_MIN_TASKS, QueueSample, retry_growth,
};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::harness::{App, Page, until, updating_screenshots, with_browser};
use crate::support;

/// The error every `webhook:deliver` call fails with during an outage
/// (`src/demo/workload.rs`).
const PARTNER_DOWN: &str = "POST https://partner.example/hooks: 503 Service Unavailable";

/// The outage fragment as shown, read in one script so its parts agree.
#[derive(Debug, Deserialize)]
struct Signal {
    banner: String,
    retry_now: i64,
    latest: String,
    samples: usize,
}

const READ_SIGNAL: &str = "var o = document.querySelector('#outage .outage-signal');
var b = o && o.querySelector('.outage-banner');
if (!b) return null;
var last = Array.from(o.querySelectorAll('p.meta')).filter(function (p) { return p.textContent.indexOf('Last sample') === 0; })[0];
var m = /; (\\d+) samples in the last hour/.exec(last.textContent);
return {
  banner: b.textContent.trim(),
  retry_now: parseInt(o.querySelector('.retry-now').textContent, 10),
  latest: last.querySelector('time').getAttribute('datetime'),
  samples: m ? parseInt(m[1], 10) : 0
};";

/// `+12`, `−3`, `±0`, as the fragment writes a delta.
fn signed(n: i64) -> String {
    match n {
        0 => "±0".to_string(),
        n if n > 0 => format!("+{n}"),
        n => format!("−{}", n.unsigned_abs()),
    }
}

/// `5 min` from a minute up, else `45 s`, as the fragment writes a span.
fn span_words(span: Duration) -> String {
    let secs = span.as_secs();
    if secs >= 60 {
        format!("{} min", (secs + 30) / 60)
    } else {
        format!("{secs} s")
    }
}

async fn retry_count(page: &Page) -> Option<i64> {
    let text: Option<String> = page
        .js("var c = document.querySelector('#tab span.count[data-state=\"retry\"]'); return c ? c.textContent.trim() : null;")
        .await;
    text.and_then(|t| t.parse().ok())
}

/// `asynqdeck demo --rate 40` (automatic outages an hour apart): on `/demo`
/// the partner is up; `#start-outage` takes it down; on the retry tab of
/// `critical` the retry count rises over at least three polls without a
/// page load, and the banner "Retry queue growing fast: +N in M" appears,
/// where N and M are exactly what the samples in Redis give (≥ 20 tasks and
/// ≥ 50 %); the `webhook:deliver` rows show the partner's error as LastErr,
/// as Redis has it. Then the queues page and the archived tab of `default`
/// (invalid orders archived with SkipRetry, S19) for the screenshots.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_outage_grows_retry_and_raises_banner() {
    let db = support::redis();
    let insp = Inspector::connect(&db.url()).await.unwrap();
    let app = App::demo(&db, &["--rate", "40", "--outage-every", "1h"]);

    with_browser(|page| async move {
        if updating_screenshots() {
            // A fuller picture for the README: half a minute of normal
            // traffic before the outage.
            until(Duration::from_secs(90), "30 samples before the outage", || {
                let insp = insp.clone();
                async move {
                    let n = insp.queue_samples("critical").await.ok()?.len();
                    (n >= 30).then_some(())
                }
            })
            .await;
        }
        page.goto(&app.url("/demo")).await;
        let state: String = page
            .js("return document.getElementById('partner-state').textContent.trim();")
            .await;
        assert_eq!(state, "Partner is up.");
        page.click("#start-outage").await;
        let outage_start = Utc::now();
        let down: String = page
            .wait_js(
                Duration::from_secs(10),
                "the partner to be down",
                "var s = document.getElementById('partner-state').textContent.trim();
                 return s.indexOf('Partner is DOWN') === 0 ? s : null;",
            )
            .await;
        assert!(
            down.starts_with("Partner is DOWN: outage ends in ") && down.ends_with(" s."),
            "{down}"
        );
        page.assert_no_console_errors("/demo").await;

        // The retry tab: its count grows poll after poll, in place.
        page.goto(&app.url("/queues/critical/retry")).await;
        page.mark_window("retry-tab").await;
        let mut seen: Vec<i64> = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let grown = loop {
            if let Some(n) = retry_count(&page).await
                && seen.last() != Some(&n)
            {
                seen.push(n);
            }
            if seen.len() >= 3 && seen.windows(2).rev().take(2).all(|w| w[0] < w[1]) {
                break seen;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the retry count did not grow over three polls: {seen:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert!(grown[grown.len() - 1] > grown[grown.len() - 3], "{grown:?}");
        page.assert_not_reloaded("retry-tab").await;

        // The banner, checked against the samples in Redis.
        let signal: Signal = page
            .wait_js(
                Duration::from_secs(90),
                "the outage banner on the retry tab",
                READ_SIGNAL,
            )
            .await;
        page.assert_not_reloaded("retry-tab").await;
        let latest: DateTime<Utc> = DateTime::parse_from_rfc3339(&signal.latest)
            .unwrap()
            .with_timezone(&Utc);
        let samples: Vec<QueueSample> = insp
            .queue_samples("critical")
            .await
            .unwrap()
            .into_iter()
            .filter(|s| s.at <= latest)
            .collect();
        assert_eq!(samples.len(), signal.samples, "samples the fragment saw");
        let growth = retry_growth(&samples, latest).expect("two samples at least");
        assert_eq!(growth.latest.at, latest);
        assert_eq!(growth.latest.retry, signal.retry_now);
        assert!(growth.fast, "{growth:?}");
        let delta = growth.last_5m.delta();
        assert!(delta >= FAST_GROWTH_MIN_TASKS, "{growth:?}");
        assert!(delta * 100 >= growth.last_5m.from * FAST_GROWTH_MIN_PERCENT, "{growth:?}");
        assert_eq!(
            signal.banner,
            format!(
                "Retry queue growing fast: {} in {} — many tasks failing now; check the error groups below (same LastErr ⇒ external outage).",
                signed(delta),
                span_words(growth.last_5m.span)
            )
        );

        // The failing webhooks carry the partner's error, in the page and in Redis.
        let rows: Vec<(String, String, String)> = page
            .js("return Array.from(document.querySelectorAll('#tab tr[data-id]')).map(function (r) {
                   return [r.getAttribute('data-id'), r.cells[2].textContent.trim(), r.querySelector('pre.err').textContent];
                 });")
            .await;
        let webhooks: Vec<&(String, String, String)> =
            rows.iter().filter(|r| r.1 == "webhook:deliver").collect();
        assert!(!webhooks.is_empty(), "webhook rows on the retry tab: {rows:?}");
        for (id, _, err) in &webhooks {
            assert_eq!(err, PARTNER_DOWN, "LastErr of {id} on the page");
            if let Ok(t) = insp.get_task_info("critical", id).await {
                assert_eq!(t.last_err, PARTNER_DOWN, "LastErr of {id} in Redis");
            }
        }
        if updating_screenshots() {
            // Let the outage run for 40 s so the sparkline shows it.
            until(Duration::from_secs(90), "40 s of outage samples", || {
                let insp = insp.clone();
                async move {
                    let s = insp.queue_samples("critical").await.ok()?;
                    let last = s.iter().map(|s| s.at).max()?;
                    (last >= outage_start + chrono::Duration::seconds(40)).then_some(())
                }
            })
            .await;
            let _: Signal = page
                .wait_js(Duration::from_secs(10), "the outage banner", READ_SIGNAL)
                .await;
        }
        page.screenshot("retry-outage").await;
        page.assert_no_console_errors("the retry tab during the outage").await;

        // The queues page, with every queue's numbers.
        page.goto(&app.url("/")).await;
        let names: Vec<String> = page
            .wait_js(
                Duration::from_secs(10),
                "the three demo queues",
                "var r = Array.from(document.querySelectorAll('#queues table tbody tr')).map(function (tr) { return tr.cells[0].textContent.trim(); });
                 return r.length === 3 ? r : null;",
            )
            .await;
        assert_eq!(names, ["critical", "default", "low"]);
        page.screenshot("queues").await;
        page.assert_no_console_errors("the queues page").await;

        // Invalid orders archived at once with a self-explanatory LastErr.
        let archived = until(Duration::from_secs(60), "invalid orders in the archive", || {
            let insp = insp.clone();
            async move {
                let n = insp.queue_info("default").await.ok()?.archived;
                (n >= 5).then_some(n)
            }
        })
        .await;
        assert!(archived >= 5);
        page.goto(&app.url("/queues/default/archived")).await;
        let rows: Vec<(String, String)> = page
            .js("return Array.from(document.querySelectorAll('#tab tr[data-id]')).map(function (r) {
                   return [r.getAttribute('data-id'), r.querySelector('pre.err').textContent];
                 });")
            .await;
        assert!(rows.len() >= 5, "{rows:?}");
        for (id, err) in &rows {
            assert!(
                err.starts_with(&format!("task {id} (attempt 1): order "))
                    && err.contains(r#" invalid: missing field "sku""#),
                "LastErr of {id}: {err}"
            );
            let t = insp.get_task_info("default", id).await.unwrap();
            assert_eq!(&t.last_err, err, "LastErr of {id} in Redis");
            assert_eq!(t.task_type, "order:import");
        }
        page.screenshot("archived").await;
        page.assert_no_console_errors("the archived tab").await;

        // End the outage by hand.
        page.goto(&app.url("/demo")).await;
        page.click("#end-outage").await;
        let _: bool = page
            .wait_js(
                Duration::from_secs(10),
                "the partner to be up again",
                "return document.getElementById('partner-state').textContent.trim() === 'Partner is up.' ? true : null;",
            )
            .await;
        page.assert_no_console_errors("/demo").await;
    })
    .await;
}
