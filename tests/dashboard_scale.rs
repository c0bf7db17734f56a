//! The queues overview at scale (issue 15 targets 2 and 3) against a real
//! Redis: server-side paging, sorting by any column (ties by name) and the
//! name filter, totals over every queue, pager links that keep the view, a
//! page whose size does not grow with the number of queues, and the Redis
//! budget: over it, no refresh reaches Redis, the numbers show their age,
//! and they refresh once the budget allows; the Redis page shows it.

use std::time::Duration;

use asynqdeck::broker::{Broker, keys};
use asynqdeck::web::{AppState, WebConfig};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use redis::AsyncCommands;

use crate::support::http;
use crate::support::redis::RawConn;
use crate::support::{self, TestDb};

/// Queue `i` of the seeded set: `q-000` … `q-119`.
fn name(i: usize) -> String {
    format!("q-{i:03}")
}

/// Scheduled size of queue `i`: a permutation of 1..=120 (37 is prime to
/// 120), so every queue has its own.
fn scheduled(i: usize) -> usize {
    (i * 37) % 120 + 1
}

/// Retry size of queue `i`: 0, 1 or 2 (ties, broken by name).
fn retry(i: usize) -> usize {
    i % 3
}

/// Seeds `n` queues named by `name_of`: one pending task each (through the
/// client), `scheduled(i)` scheduled and `retry(i)` retry members.
async fn seed(db: &TestDb, client: &Client, n: usize, name_of: impl Fn(usize) -> String) {
    let mut conn = db.raw().await;
    for i in 0..n {
        let q = name_of(i);
        client
            .enqueue(&Task::new("t", vec![1]), EnqueueOptions::new().queue(&q))
            .await
            .unwrap();
        let members: Vec<(f64, String)> = (0..scheduled(i))
            .map(|j| (j as f64, format!("s{j}")))
            .collect();
        let _: () = conn
            .zadd_multiple(keys::scheduled_key(&q), &members)
            .await
            .unwrap();
        if retry(i) > 0 {
            let members: Vec<(f64, String)> =
                (0..retry(i)).map(|j| (j as f64, format!("r{j}"))).collect();
            let _: () = conn
                .zadd_multiple(keys::retry_key(&q), &members)
                .await
                .unwrap();
        }
    }
}

async fn dashboard(db: &TestDb, config: WebConfig) -> (AppState, axum::Router, Client) {
    let broker = Broker::connect(&db.url()).await.unwrap();
    let state = AppState::new(Inspector::from_broker(broker.clone()), config);
    let app = asynqdeck::web::router(state.clone());
    (state, app, Client::from_broker(broker))
}

/// Every change visible at once (poll interval zero).
fn fresh() -> WebConfig {
    WebConfig {
        poll_interval: Duration::ZERO,
        ..WebConfig::default()
    }
}

/// The queue names of the table's rows, in order.
fn rows(html: &str) -> Vec<String> {
    html.split("<tr data-queue=\"")
        .skip(1)
        .map(|s| s[..s.find('"').unwrap()].to_string())
        .collect()
}

/// The cells of the totals row labelled `label` ("All", "Matching").
fn totals(html: &str, label: &str) -> Vec<String> {
    let at = html
        .find(&format!("data-totals=\"{label}\""))
        .unwrap_or_else(|| panic!("no {label} row: {html}"));
    let row = &html[at..at + html[at..].find("</tr>").unwrap()];
    row.split("<td class=\"num\">")
        .skip(1)
        .map(|c| c[..c.find("</td>").unwrap()].to_string())
        .collect()
}

/// The expected order of the seeded set by `key` (ties by name).
fn expected(n: usize, key: impl Fn(usize) -> i64, desc: bool) -> Vec<String> {
    let mut v: Vec<usize> = (0..n).collect();
    v.sort_by(|&a, &b| {
        let o = key(a).cmp(&key(b));
        let o = if desc { o.reverse() } else { o };
        o.then(name(a).cmp(&name(b)))
    });
    v.into_iter().map(name).collect()
}

/// Pages of 10 by scheduled size, both ways; by retry size (ties by name);
/// by name descending; the filter with its own pages; exact rows and order.
#[tokio::test]
async fn overview_pages_sorts_and_filters_on_the_server() {
    let db = support::redis();
    let (_state, app, client) = dashboard(&db, fresh()).await;
    seed(&db, &client, 120, name).await;

    let by_sched_desc = expected(120, |i| scheduled(i) as i64, true);
    let (_, html) = http::get(&app, "/?sort=scheduled&dir=desc&page=2&size=10")
        .await
        .parts();
    assert_eq!(rows(&html), by_sched_desc[10..20], "{html}");
    assert!(
        html.contains("Queues 11–20 of 120, page 2 of 12."),
        "{html}"
    );

    let by_sched_asc = expected(120, |i| scheduled(i) as i64, false);
    let (_, html) = http::get(&app, "/?sort=scheduled&dir=asc&page=12&size=10")
        .await
        .parts();
    assert_eq!(rows(&html), by_sched_asc[110..120]);

    let by_retry = expected(120, |i| retry(i) as i64, false);
    let (_, html) = http::get(&app, "/?sort=retry&dir=asc").await.parts();
    assert_eq!(rows(&html), by_retry[..50]);
    let (_, html) = http::get(&app, "/?sort=retry&dir=asc&page=3").await.parts();
    assert_eq!(rows(&html), by_retry[100..120]);

    // Size = pending + scheduled + retry: 1 + scheduled + retry.
    let by_size = expected(120, |i| (1 + scheduled(i) + retry(i)) as i64, true);
    let (_, html) = http::get(&app, "/?sort=size&dir=desc&size=7").await.parts();
    assert_eq!(rows(&html), by_size[..7]);

    let (_, html) = http::get(&app, "/?sort=name&dir=desc&size=3").await.parts();
    assert_eq!(rows(&html), ["q-119", "q-118", "q-117"]);

    // The filter: names containing "q-01" are q-010 … q-019.
    let (_, html) = http::get(&app, "/?q=q-01&sort=scheduled&dir=desc&size=4&page=2")
        .await
        .parts();
    let mut matching: Vec<usize> = (10..20).collect();
    matching.sort_by_key(|&i| std::cmp::Reverse(scheduled(i)));
    let want: Vec<String> = matching.into_iter().map(name).collect();
    assert_eq!(rows(&html), want[4..8], "{html}");
    assert!(
        html.contains("Queues 5–8 of 10 whose name contains “q-01” (120 in all), page 2 of 3."),
        "{html}"
    );

    // Out of range and nonsense: the last page, defaults.
    let (status, html) = http::get(&app, "/?page=999&size=50&sort=nope&dir=up")
        .await
        .parts();
    assert_eq!(status, 200);
    assert_eq!(rows(&html), (100..120).map(name).collect::<Vec<_>>());
}

/// The totals row sums every queue, not the page's; with a filter a second
/// row sums the matching queues.
#[tokio::test]
async fn overview_totals_cover_every_queue() {
    let db = support::redis();
    let (_state, app, client) = dashboard(&db, fresh()).await;
    seed(&db, &client, 120, name).await;
    let sched: usize = (0..120).map(scheduled).sum();
    let retries: usize = (0..120).map(retry).sum();
    assert_eq!(sched, 7260);

    let (_, html) = http::get(&app, "/?size=5").await.parts();
    assert_eq!(rows(&html).len(), 5);
    let all = totals(&html, "All");
    // Size, active, pending, aggregating, scheduled, retry, archived, …
    assert_eq!(all[0], (120 + sched + retries).to_string(), "{all:?}");
    assert_eq!(all[1], "0");
    assert_eq!(all[2], "120");
    assert_eq!(all[4], sched.to_string());
    assert_eq!(all[5], retries.to_string());
    assert!(html.contains("<th>All 120</th>"), "{html}");

    let (_, html) = http::get(&app, "/?q=q-01&size=2").await.parts();
    let m = totals(&html, "Matching");
    let msched: usize = (10..20).map(scheduled).sum();
    assert_eq!(m[4], msched.to_string());
    assert!(html.contains("<th>Matching 10</th>"), "{html}");
    assert_eq!(totals(&html, "All")[4], sched.to_string());
}

/// Pager links, header links, the live refresh and the actions carry the
/// sort, the direction, the page size and the filter; the filter is echoed
/// escaped.
#[tokio::test]
async fn overview_links_keep_the_view_and_the_filter_is_escaped() {
    let db = support::redis();
    let (_state, app, client) = dashboard(&db, fresh()).await;
    seed(&db, &client, 120, name).await;

    let (_, html) = http::get(&app, "/?q=q-0&sort=retry&dir=desc&size=10&page=2")
        .await
        .parts();
    let keep =
        |page: usize| format!("/?sort=retry&#38;dir=desc&#38;page={page}&#38;size=10&#38;q=q-0");
    // The live section refreshes this very view.
    assert!(html.contains(&format!("hx-get=\"{}\"", keep(2))), "{html}");
    for page in [1, 3, 10] {
        assert!(
            html.contains(&format!("href=\"{}\"", keep(page))),
            "page {page}: {html}"
        );
    }
    // A header sorts from page 1, keeping size and filter; the current
    // column's header turns the direction round.
    assert!(html.contains("href=\"/?sort=pending&#38;dir=desc&#38;page=1&#38;size=10&#38;q=q-0\""));
    assert!(html.contains("href=\"/?sort=retry&#38;dir=asc&#38;page=1&#38;size=10&#38;q=q-0\""));
    // An action answers with the same view.
    let first = &rows(&html)[0];
    assert!(html.contains(&format!(
        "hx-post=\"/queues/{first}/pause?sort=retry&#38;dir=desc&#38;page=2&#38;size=10&#38;q=q-0\""
    )));

    let (_, html) = http::get(&app, "/?q=%3Cb%3E%22x%22%26").await.parts();
    assert!(!html.contains("<b>\"x\""), "{html}");
    assert!(
        html.contains("value=\"&#60;b&#62;&#34;x&#34;&#38;\""),
        "{html}"
    );
    assert!(
        html.contains("No queue name contains “&#60;b&#62;&#34;x&#34;&#38;”."),
        "{html}"
    );
    assert!(html.contains("q=%3Cb%3E%22x%22%26"), "{html}");
}

/// The same page of 50 rows is as big with 2,000 queues as with 200 (up to
/// the digits of the counts): a page's size does not grow with the number
/// of queues.
#[tokio::test]
async fn overview_page_size_does_not_grow_with_the_queues() {
    let db = support::redis();
    let (_state, app, client) = dashboard(&db, fresh()).await;
    seed(&db, &client, 200, |i| format!("a-{i:03}")).await;
    let (_, small) = http::get(&app, "/?sort=name&dir=asc").await.parts();
    assert_eq!(rows(&small).len(), 50);

    // 1,800 more (empty) queues, all after the page's by name.
    let mut conn: RawConn = db.raw().await;
    let more: Vec<String> = (0..1800).map(|i| format!("z-{i:04}")).collect();
    let _: () = conn.sadd(keys::ALL_QUEUES, &more).await.unwrap();
    let (_, big) = http::get(&app, "/?sort=name&dir=asc").await.parts();
    assert_eq!(rows(&big), rows(&small));
    assert!(big.contains("Queues 1–50 of 2000, page 1 of 40."), "{big}");
    // Differences: "200" → "2000" (×3: summary, All row) and "4" → "40",
    // a few totals digits.
    assert!(
        big.len() <= small.len() + 16,
        "{} bytes with 2,000 queues, {} with 200",
        big.len(),
        small.len()
    );
    let (_, max) = http::get(&app, "/?size=100000").await.parts();
    assert_eq!(rows(&max).len(), 150, "the page size is capped");
}

/// Numbers of commands Redis ran, by name (scripts' inner commands
/// included), leaving out the test's own `INFO`.
async fn calls(conn: &mut RawConn) -> std::collections::BTreeMap<String, u64> {
    let mut calls = support::commandstats::calls(conn).await;
    calls.remove("info");
    calls
}

/// The age in the stale marker of `html` ("numbers 42 s old — Redis
/// budget"), if it shows one.
fn stale_age(html: &str) -> Option<i64> {
    let at = html.find("numbers ")?;
    let rest = &html[at + "numbers ".len()..];
    let (n, rest) = rest.split_once(" s old — Redis budget")?;
    let _ = rest;
    n.parse().ok()
}

/// With a tiny budget, refreshes are deferred: views keep coming and
/// Redis sees no command from the dashboard (INFO commandstats of a private
/// server stays flat), while the overview and the queue page mark the
/// numbers stale with their growing age and the Redis page shows the budget
/// and the deferrals; once the budget allows, the numbers refresh.
#[tokio::test]
async fn over_budget_numbers_age_and_redis_stays_flat() {
    let db = support::private_redis();
    let (state, app, client) = dashboard(
        &db,
        WebConfig {
            poll_interval: Duration::from_secs(1),
            ..WebConfig::default()
        },
    )
    .await;
    seed(&db, &client, 3, name).await;
    let (_, html) = http::get(&app, "/").await.parts();
    assert_eq!(rows(&html).len(), 3);
    state.stats.settle().await;

    // 0.001 commands/s: the bucket holds 0.01, the next refresh's first
    // call puts it ~1,000 s in debt, and nothing more is sent.
    state.stats.budget().set_limits(0.001, 0.0);
    let first = support::eventually(Duration::from_secs(60), || async {
        let (_, html) = http::get(&app, "/").await.parts();
        stale_age(&html)
    })
    .await
    .expect("a stale marker");
    let mut conn = db.raw().await;
    let before = calls(&mut conn).await;
    let later = support::eventually(Duration::from_secs(60), || async {
        let (_, html) = http::get(&app, "/").await.parts();
        stale_age(&html).filter(|age| *age >= first + 2)
    })
    .await
    .expect("the marker's age grows");
    assert!(later >= first + 2);
    assert_eq!(
        calls(&mut conn).await,
        before,
        "no command while over budget"
    );

    let (_, html) = http::get(&app, "/queues/q-001/pending").await.parts();
    assert!(html.contains("class=\"stale-marker\""), "{html}");
    assert!(stale_age(&html).is_some(), "{html}");
    let (_, html) = http::get(&app, "/redis").await.parts();
    assert!(
        html.contains("data-budget=\"commands\">0.001 commands/s</td>"),
        "{html}"
    );
    assert!(html.contains("data-budget=\"ms\">unlimited</td>"), "{html}");
    let usage = state.stats.budget().usage();
    assert!(usage.deferred_total >= 2, "{usage:?}");
    let shown: u64 = html
        .split("data-used=\"deferred\">")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no deferred count: {html}"));
    assert!(shown >= 1, "{html}");

    // The budget allows again: the numbers refresh (with a new task).
    client
        .enqueue(
            &Task::new("t", vec![2]),
            EnqueueOptions::new().queue("q-000"),
        )
        .await
        .unwrap();
    state.stats.budget().set_limits(0.0, 0.0);
    let fresh = support::eventually(Duration::from_secs(60), || async {
        let (_, html) = http::get(&app, "/?sort=pending&dir=desc&size=1")
            .await
            .parts();
        (stale_age(&html).is_none() && rows(&html) == ["q-000"]).then_some(html)
    })
    .await
    .expect("numbers refresh once the budget allows");
    assert_eq!(totals(&fresh, "All")[2], "4");
}

/// The budget meters the reads on any topology (the cluster pass reads
/// per queue, ~4 commands each): a view's snapshot is counted, and with the
/// budget spent the next slot's numbers are served stale with the marker.
#[tokio::test]
async fn budget_meters_and_defers_on_any_topology() {
    let db = support::redis();
    let (state, app, client) = dashboard(
        &db,
        WebConfig {
            poll_interval: Duration::from_secs(1),
            ..WebConfig::default()
        },
    )
    .await;
    seed(&db, &client, 12, name).await;
    let (_, html) = http::get(&app, "/").await.parts();
    assert_eq!(rows(&html).len(), 12);
    state.stats.settle().await;
    let used = state.stats.budget().usage();
    assert!(used.commands_per_s > 0.0, "{used:?}");
    assert!(used.ms_per_s > 0.0, "{used:?}");
    state.stats.budget().set_limits(0.001, 0.0);
    support::eventually(Duration::from_secs(60), || async {
        let (_, html) = http::get(&app, "/").await.parts();
        stale_age(&html)
    })
    .await
    .expect("a stale marker");
    state.stats.budget().set_limits(0.0, 0.0);
    support::eventually(Duration::from_secs(60), || async {
        let (_, html) = http::get(&app, "/").await.parts();
        stale_age(&html).is_none().then_some(())
    })
    .await
    .expect("fresh again");
}

/// `/api/queues` is streamed in chunks of 256 queues: with 600 queues (3
/// chunks) and one whose pending key is a string, the body is one JSON
/// document with every other queue once, sorted by name, and the broken one
/// under `errors` (L3; asynqmon's shape plus `errors`, A6).
#[tokio::test]
async fn api_queues_streams_every_queue_and_the_errors() {
    let db = support::redis();
    let (_state, app, _client) = dashboard(&db, fresh()).await;
    let mut conn: RawConn = db.raw().await;
    let names: Vec<String> = (0..600).map(|i| format!("s-{i:03}")).collect();
    let _: () = conn.sadd(keys::ALL_QUEUES, &names).await.unwrap();
    let _: () = conn.set(keys::pending_key("s-300"), "oops").await.unwrap();
    let (status, body) = http::get(&app, "/api/queues").await.parts();
    assert_eq!(status, 200);
    let json: serde_json::Value = serde_json::from_str(&body).expect("one JSON document");
    let listed: Vec<&str> = json["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    let want: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| *n != "s-300")
        .collect();
    assert_eq!(listed, want);
    let errors = json["errors"].as_object().unwrap();
    assert_eq!(errors.keys().collect::<Vec<_>>(), ["s-300"]);
    assert!(
        errors["s-300"].as_str().unwrap().contains("WRONGTYPE"),
        "{errors:?}"
    );
}
