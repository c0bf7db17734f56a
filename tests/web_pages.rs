//! Dashboard pages for servers, schedulers, daily history, Redis and the
//! outage signal, driven over HTTP (`tower::ServiceExt::oneshot`) against a
//! real Redis: exact values in the HTML, 404 for unknown queues, 400 for bad
//! query values, escaping of text from Redis, and the sampler that feeds the
//! outage signal (issue 4 items 2 and 3; S14, S29; wire spec §9.7, §9.9,
//! §9.10).

use std::time::Duration;

use crate::support::redis::RawConn;
use asynqdeck::Inspector;
use asynqdeck::broker::proto::{SchedulerEnqueueEvent, SchedulerEntry, Timestamp};
use asynqdeck::broker::{Broker, keys, samples_key};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::server::sampler::Sampler;
use asynqdeck::web::{AppState, WebConfig};
use axum::Router;
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use redis::AsyncCommands;

use crate::support::clock::{broker_at, now, ts};
use crate::support::http::{self, Dashboard};
use crate::support::seed;
use crate::support::{self, TestDb};

struct Setup {
    app: Router,
    broker: Broker,
    clock: SimulatedClock,
    raw: RawConn,
}

/// The dashboard on a fresh database, broker and pages on one simulated
/// clock set to [`now`], default settings (poll interval 5 s).
async fn setup(db: &TestDb) -> Setup {
    let clock = SimulatedClock::new(now());
    let broker = broker_at(db, &clock).await;
    Setup {
        app: Dashboard::new(Inspector::from_broker(broker.clone()), WebConfig::default()).app,
        broker,
        clock,
        raw: db.raw().await,
    }
}

/// Occurrences of `needle` in `hay`.
fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

async fn add_queue(raw: &mut RawConn, queue: &str) {
    let _: i64 = raw.sadd(keys::ALL_QUEUES, queue).await.unwrap();
}

// ---------------------------------------------------------------- servers

/// §9.9: a server written with `write_server_state` shows its host, pid,
/// queues with weights (highest first), strict priority, active workers
/// over concurrency, status, start time (UTC + relative), and each running
/// task with a link to its task page, queue, start and deadline.
#[tokio::test]
async fn servers_page_lists_a_server_and_its_workers() {
    let db = support::redis();
    let s = setup(&db).await;
    let info = seed::server("web-1", 4242, "0b5d6b2e-srv", 2);
    s.broker
        .write_server_state(
            &info,
            &[
                seed::worker(&info, "task-a", br#"{"to":"a@b.c"}"#.to_vec(), 30, 60),
                seed::worker(&info, "task-b", br#"{"to":"a@b.c"}"#.to_vec(), 10, 60),
            ],
            Duration::from_secs(60),
        )
        .await
        .unwrap();

    let (status, html) = http::page(&s.app, "/servers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.starts_with("<!doctype html>"));
    assert_eq!(count(&html, r#"<tr class="server">"#), 1);
    assert!(html.contains(r#"<span class="mono host">web-1</span>"#));
    assert!(html.contains(r#"<td class="num pid">4242</td>"#));
    assert!(html.contains(
        r#"<a href="/queues/critical">critical</a>&nbsp;(6), <a href="/queues/default">default</a>&nbsp;(3)"#
    ));
    assert!(html.contains("<td>yes</td>"));
    assert!(html.contains(r#"<td class="num active">2</td>"#));
    assert!(html.contains(r#"<td class="num">10</td>"#));
    assert!(html.contains(r#"<span class="badge">active</span>"#));
    assert!(html.contains(
        r#"<time datetime="2026-03-10T11:55:00Z">2026-03-10 11:55:00 UTC</time><br><span class="meta">5m 0s ago</span>"#
    ));
    assert_eq!(count(&html, r#"<tr class="worker">"#), 2);
    // Oldest start first; each id links to the task page.
    let a = html
        .find(r#"href="/queues/critical/tasks/task-a""#)
        .unwrap();
    let b = html
        .find(r#"href="/queues/critical/tasks/task-b""#)
        .unwrap();
    assert!(a < b);
    assert!(html.contains(r#"<span class="meta">30s ago</span>"#));
    assert!(html.contains(r#"<span class="meta">in 1m 0s</span>"#));
    assert!(html.contains(r#"{&#34;to&#34;:&#34;a@b.c&#34;}"#));

    // htmx gets the live fragment alone, with its poll trigger.
    let (status, frag) = http::page(&s.app, "/servers", true).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(frag.starts_with(
        r#"<section id="servers" class="live" hx-get="/servers" hx-trigger="every 5s""#
    ));
    assert!(!frag.contains("<!doctype"));
    assert_eq!(count(&frag, r#"<tr class="worker">"#), 2);
}

/// No server: an explanatory empty state, not an error.
#[tokio::test]
async fn servers_page_without_servers_says_so() {
    let db = support::redis();
    let s = setup(&db).await;
    let (status, html) = http::page(&s.app, "/servers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("No server is running."));
    assert_eq!(count(&html, r#"<tr class="server">"#), 0);
}

/// Text from Redis is escaped: a host and a task type holding `<script>`
/// render as text.
#[tokio::test]
async fn servers_page_escapes_host_and_task_fields() {
    let db = support::redis();
    let s = setup(&db).await;
    let mut info = seed::server("<script>alert(1)</script>", 4242, "0b5d6b2e-srv", 2);
    info.status = "<b>x</b>".into();
    let mut w = seed::worker(&info, "t1", br#"{"to":"a@b.c"}"#.to_vec(), 1, 60);
    w.task_type = "<script>t()</script>".into();
    s.broker
        .write_server_state(&info, &[w], Duration::from_secs(60))
        .await
        .unwrap();
    let (status, html) = http::page(&s.app, "/servers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"));
    assert!(html.contains("&#60;script&#62;t()&#60;/script&#62;"));
    assert!(html.contains("&#60;b&#62;x&#60;/b&#62;"));
    assert!(!html.contains("<script>alert"));
    assert!(!html.contains("<script>t()"));
    assert!(!html.contains("<b>x</b>"));
}

// ------------------------------------------------------------- schedulers

fn entry(id: &str, payload: &[u8], prev: Option<DateTime<Utc>>) -> SchedulerEntry {
    SchedulerEntry {
        id: id.into(),
        spec: "@every 30s".into(),
        task_type: format!("report:{id}"),
        task_payload: payload.to_vec(),
        enqueue_options: vec!["MaxRetry(5)".into(), r#"Queue("critical")"#.into()],
        next_enqueue_time: ts(now() + chrono::Duration::seconds(30)),
        prev_enqueue_time: Some(Timestamp::from_utc(prev)),
    }
}

/// §9.10: entries show id, spec, type, payload, options, next enqueue and
/// previous enqueue, "never" when the entry has not fired; a payload with
/// `<script>` is escaped; each entry links to its history.
#[tokio::test]
async fn schedulers_page_lists_entries() {
    let db = support::redis();
    let s = setup(&db).await;
    let fired = now() - chrono::Duration::seconds(90);
    s.broker
        .write_scheduler_entries(
            "sched-1",
            &[
                entry("e1", b"<script>evil()</script>", None),
                entry("e2", b"plain", Some(fired)),
            ],
            Duration::from_secs(60),
        )
        .await
        .unwrap();

    let (status, html) = http::page(&s.app, "/schedulers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(count(&html, r#"<tr class="entry">"#), 2);
    assert_eq!(count(&html, r#"<td class="mono spec">@every 30s</td>"#), 2);
    assert!(html.contains(r#"<td class="mono">report:e1</td>"#));
    assert!(html.contains(r#"MaxRetry(5)<br>Queue(&#34;critical&#34;)"#));
    assert!(html.contains("&#60;script&#62;evil()&#60;/script&#62;"));
    assert!(!html.contains("<script>evil"));
    assert!(html.contains(r#"<span class="meta">never</span>"#));
    assert_eq!(count(&html, r#"<span class="meta">never</span>"#), 1);
    assert!(html.contains(
        r#"<time datetime="2026-03-10T11:58:30Z">2026-03-10 11:58:30 UTC</time><br><span class="meta">1m 30s ago</span>"#
    ));
    assert_eq!(count(&html, r#"<span class="meta">in 30s</span>"#), 2);
    assert!(html.contains(r#"href="/schedulers/e1/events""#));
    assert!(html.contains(r#"href="/schedulers/e2/events""#));

    let (_, frag) = http::page(&s.app, "/schedulers", true).await.parts();
    assert!(frag.starts_with(r#"<section id="schedulers" class="live""#));
    assert_eq!(count(&frag, r#"<tr class="entry">"#), 2);
}

/// §9.10 pagination: 25 events, 20 per page, newest first; page 2 holds
/// the last 5 and offers no older page; page 3 is empty, not an error; a
/// page or size of 0 or a non-number is a 400; an unknown entry has no
/// events.
#[tokio::test]
async fn scheduler_events_are_paginated() {
    let db = support::redis();
    let s = setup(&db).await;
    for i in 0..25i64 {
        s.broker
            .record_scheduler_enqueue_event(
                "e1",
                &SchedulerEnqueueEvent {
                    task_id: format!("task-{i:02}"),
                    enqueue_time: ts(now() - chrono::Duration::minutes(25 - i)),
                },
            )
            .await
            .unwrap();
    }

    let (status, html) = http::page(&s.app, "/schedulers/e1/events", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.starts_with("<!doctype html>"));
    assert_eq!(count(&html, r#"<tr class="event">"#), 20);
    let newest = html.find(">task-24 ").unwrap();
    let older = html.find(">task-05 ").unwrap();
    assert!(newest < older);
    assert!(!html.contains(">task-04 "));
    assert!(html.contains(r#"<td class="num">1</td>"#));
    assert!(
        html.contains(r#"<time datetime="2026-03-10T11:59:00Z">2026-03-10 11:59:00 UTC</time>"#)
    );
    assert!(html.contains(r#"href="/schedulers/e1/events?page=2&amp;size=20""#));
    assert!(!html.contains("← Newer"));

    let (status, frag) = http::page(&s.app, "/schedulers/e1/events?page=2", true)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(frag.starts_with(r#"<section id="events">"#));
    assert_eq!(count(&frag, r#"<tr class="event">"#), 5);
    assert!(frag.contains(">task-04 ") && frag.contains(">task-00 "));
    assert!(frag.contains(r#"<td class="num">21</td>"#));
    assert!(frag.contains("← Newer"));
    assert!(!frag.contains("Older →"));

    let (status, html) = http::page(&s.app, "/schedulers/e1/events?page=3", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(count(&html, r#"<tr class="event">"#), 0);
    assert!(html.contains("No events on page 3"));

    let (status, html) = http::page(&s.app, "/schedulers/e1/events?page=1&size=10", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(count(&html, r#"<tr class="event">"#), 10);

    for bad in ["page=0", "size=0", "page=x", "size=-1"] {
        let (status, _) = http::page(&s.app, &format!("/schedulers/e1/events?{bad}"), false)
            .await
            .parts();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
    }

    let (status, html) = http::page(&s.app, "/schedulers/nope/events", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("No enqueue recorded for this entry."));
}

// ---------------------------------------------------------------- history

/// §9.7: the history page draws one stacked bar per UTC day (7, 30 or 90)
/// and lists the exact daily counters (succeeded = processed − failed)
/// with totals, and says that days are UTC and that attempts are counted.
#[tokio::test]
async fn history_page_charts_daily_counters() {
    let db = support::redis();
    let mut s = setup(&db).await;
    add_queue(&mut s.raw, "default").await;
    let today = now().date_naive();
    let day = |n: i64| today - chrono::Duration::days(n);
    let _: () = s
        .raw
        .mset(&[
            (keys::processed_key("default", day(0)), 10),
            (keys::failed_key("default", day(0)), 3),
            (keys::processed_key("default", day(1)), 5),
            (keys::processed_key("default", day(3)), 7),
            (keys::failed_key("default", day(3)), 7),
            (keys::processed_key("default", day(20)), 100),
        ])
        .await
        .unwrap();

    let (status, html) = http::page(&s.app, "/queues/default/history", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(count(&html, r#"<g class="bar">"#), 7);
    assert_eq!(count(&html, r#"<tr class="day">"#), 7);
    assert!(html.contains(
        r#"<tr class="day"><td>2026-03-10</td><td class="num">10</td><td class="num">7</td><td class="num">3</td><td class="num">30.00%</td></tr>"#
    ));
    assert!(html.contains(
        r#"<tr class="day"><td>2026-03-09</td><td class="num">5</td><td class="num">5</td><td class="num">0</td><td class="num">0.00%</td></tr>"#
    ));
    assert!(html.contains(
        r#"<tr class="day"><td>2026-03-07</td><td class="num">7</td><td class="num">0</td><td class="num">7</td><td class="num">100.00%</td></tr>"#
    ));
    assert!(html.contains(
        r#"<tr class="day"><td>2026-03-04</td><td class="num">0</td><td class="num">0</td><td class="num">0</td><td class="num">0.00%</td></tr>"#
    ));
    assert!(html.contains(
        r#"<tr class="total"><th>Total</th><th class="num">22</th><th class="num">12</th><th class="num">10</th><th class="num">45.45%</th></tr>"#
    ));
    // Today's bar is the last one, with its tooltip.
    assert!(html.contains("<title>2026-03-10: 10 processed, 7 succeeded, 3 failed</title>"));
    let first_bar = html.find("<title>2026-03-04:").unwrap();
    let last_bar = html.find("<title>2026-03-10:").unwrap();
    assert!(first_bar < last_bar);
    assert!(html.contains("Days are UTC."));
    assert!(html.contains("a failed attempt counts as processed and as failed"));
    assert!(html.contains(r#"aria-current="page">Last 7 days</a>"#));

    let (status, html) = http::page(&s.app, "/queues/default/history?days=30", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(count(&html, r#"<g class="bar">"#), 30);
    assert!(html.contains(
        r#"<tr class="day"><td>2026-02-18</td><td class="num">100</td><td class="num">100</td><td class="num">0</td><td class="num">0.00%</td></tr>"#
    ));

    let (status, html) = http::page(&s.app, "/queues/default/history?days=90", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(count(&html, r#"<g class="bar">"#), 90);
    assert_eq!(count(&html, r#"<tr class="day">"#), 90);
}

/// Unknown queue → 404 page; a range other than 7, 30, 90 → 400.
#[tokio::test]
async fn history_page_rejects_unknown_queue_and_bad_range() {
    let db = support::redis();
    let mut s = setup(&db).await;
    let (status, html) = http::page(&s.app, "/queues/nope/history", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(html.contains("404"));
    add_queue(&mut s.raw, "default").await;
    for bad in ["0", "8", "x", "365"] {
        let (status, html) = http::page(
            &s.app,
            &format!("/queues/default/history?days={bad}"),
            false,
        )
        .await
        .parts();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
        assert!(html.contains("days must be 7, 30 or 90"));
    }
}

// ------------------------------------------------------------------ redis

/// The Redis page shows the version `INFO` reports, the database this test
/// uses in the keyspace table, and the raw `INFO`; a standalone server has
/// no cluster section.
#[tokio::test]
async fn redis_page_shows_info() {
    let db = support::redis();
    let mut s = setup(&db).await;
    add_queue(&mut s.raw, "default").await;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut s.raw)
        .await
        .unwrap();
    let version = info
        .lines()
        .find_map(|l| l.trim_end().strip_prefix("redis_version:"))
        .unwrap()
        .to_string();

    let (status, html) = http::page(&s.app, "/redis", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&format!(
        r#"<tr class="card"><th>Version</th><td class="value">{version}</td>"#
    )));
    assert!(html.contains(r#"<tr class="card"><th>Role</th><td class="value">master</td>"#));
    assert!(html.contains(&format!(
        r#"<td class="mono">db{}</td><td class="mono">keys=1,"#,
        db.db
    )));
    assert!(html.contains(&format!("redis_version:{version}")));
    assert!(html.contains(&format!("127.0.0.1:{}", db.port)));
    assert!(!html.contains("<h2>Cluster</h2>"));

    let (status, frag) = http::page(&s.app, "/redis", true).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(frag.starts_with(r#"<section id="redis" class="live""#));
}

// ------------------------------------------------------ sampler and outage

async fn zadd_retry(raw: &mut RawConn, queue: &str, ids: std::ops::Range<u32>) {
    for i in ids {
        let _: i64 = raw
            .zadd(keys::retry_key(queue), format!("r{i}"), 1)
            .await
            .unwrap();
    }
}

async fn members(raw: &mut RawConn, key: &str) -> Vec<String> {
    raw.zrange(key, 0, -1).await.unwrap()
}

/// S29: a sampler tick records `<unix s>:<retry>:<archived>` for every
/// queue in `asynq:queues` under `asynqdeck:{<queue>}:samples` (score =
/// unix s, TTL two hours) and drops samples older than one hour in the same
/// write; the count cap keeps only the newest samples.
#[tokio::test]
async fn sampler_records_capped_series_under_our_key() {
    let db = support::redis();
    let mut s = setup(&db).await;
    add_queue(&mut s.raw, "default").await;
    add_queue(&mut s.raw, "idle").await;
    zadd_retry(&mut s.raw, "default", 0..3).await;
    let _: i64 = s
        .raw
        .zadd(keys::archived_key("default"), "a0", 1)
        .await
        .unwrap();
    let sampler = Sampler::new(s.broker.clone(), Duration::from_secs(5));
    let t0 = now().timestamp();

    assert_eq!(sampler.tick().await.unwrap(), 2);
    let key = samples_key("default");
    assert_eq!(key, "asynqdeck:{default}:samples");
    assert_eq!(members(&mut s.raw, &key).await, vec![format!("{t0}:3:1")]);
    assert_eq!(
        members(&mut s.raw, "asynqdeck:{idle}:samples").await,
        vec![format!("{t0}:0:0")]
    );
    let score: f64 = s.raw.zscore(&key, format!("{t0}:3:1")).await.unwrap();
    assert_eq!(score, t0 as f64);
    let ttl: i64 = s.raw.ttl(&key).await.unwrap();
    assert!((7190..=7200).contains(&ttl), "ttl {ttl}");

    s.clock.advance(Duration::from_secs(30 * 60));
    zadd_retry(&mut s.raw, "default", 3..5).await;
    sampler.tick().await.unwrap();
    s.clock.advance(Duration::from_secs(31 * 60));
    sampler.tick().await.unwrap();
    // The t0 sample is now 61 minutes old: trimmed by the last write.
    assert_eq!(
        members(&mut s.raw, &key).await,
        vec![format!("{}:5:1", t0 + 1800), format!("{}:5:1", t0 + 3660)]
    );

    // Count cap: only the newest 3 remain.
    for _ in 0..5 {
        s.clock.advance(Duration::from_secs(5));
        s.broker
            .record_queue_sample("default", Duration::from_secs(3600), 3)
            .await
            .unwrap();
    }
    let kept = members(&mut s.raw, &key).await;
    assert_eq!(
        kept,
        (3..=5)
            .map(|i| format!("{}:5:1", t0 + 3660 + 5 * i))
            .collect::<Vec<_>>()
    );
    // asynq's own keys are untouched by sampling.
    let retry: i64 = s.raw.zcard(keys::retry_key("default")).await.unwrap();
    assert_eq!(retry, 5);
}

/// A sample every 30 s for the last 5 minutes while the retry set grows
/// from 6 to 66 (+60: ≥ 20 tasks and ≥ 50 %): the fragment shows the
/// banner, the figures and a sparkline (S14, S29).
#[tokio::test]
async fn outage_fragment_shows_banner_for_fast_growth() {
    let db = support::redis();
    let mut s = setup(&db).await;
    add_queue(&mut s.raw, "default").await;
    for i in 0..=10u32 {
        s.clock
            .set(now() - chrono::Duration::seconds(300 - 30 * i as i64));
        zadd_retry(&mut s.raw, "default", 6 * i..6 * (i + 1)).await;
        s.broker
            .record_queue_sample("default", Duration::from_secs(3600), 3600)
            .await
            .unwrap();
    }
    assert_eq!(s.clock_now(), now());

    let (status, html) = http::page(&s.app, "/queues/default/outage", true)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    // A fragment for the retry tab's polling container: no poll of its own.
    assert!(html.starts_with(r#"<div class="outage-signal" data-queue="default">"#));
    assert!(!html.contains("hx-get") && !html.contains("<!doctype"));
    assert!(html.contains(
        "<strong>Retry queue growing fast: +60 in 5 min</strong> — many tasks failing now; check the error groups below (same LastErr ⇒ external outage)."
    ));
    assert!(html.contains(r#"<strong class="retry-now">66</strong>"#));
    assert_eq!(count(&html, "+60 in 5 min"), 2);
    assert!(html.contains("<polyline points="));
    assert!(html.contains("11 samples in the last hour"));
    assert!(!html.contains("Retry queue steady"));
}

/// A flat series (the retry set holds 40 the whole time): a quiet line, no
/// banner.
#[tokio::test]
async fn outage_fragment_is_quiet_for_a_flat_series() {
    let db = support::redis();
    let mut s = setup(&db).await;
    add_queue(&mut s.raw, "default").await;
    zadd_retry(&mut s.raw, "default", 0..40).await;
    for i in 0..=20i64 {
        s.clock.set(now() - chrono::Duration::seconds(600 - 30 * i));
        s.broker
            .record_queue_sample("default", Duration::from_secs(3600), 3600)
            .await
            .unwrap();
    }
    let (status, html) = http::page(&s.app, "/queues/default/outage", true)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Retry queue steady: ±0 in 5 min."));
    assert!(!html.contains("growing fast"));
    assert!(html.contains(r#"<strong class="retry-now">40</strong>"#));
    assert!(html.contains("±0 in 10 min"));
}

/// No sample yet: "collecting samples" with the interval; one sample is
/// still collecting; unknown queue → 404.
#[tokio::test]
async fn outage_fragment_collects_first_and_404s_unknown_queue() {
    let db = support::redis();
    let mut s = setup(&db).await;
    add_queue(&mut s.raw, "default").await;
    let (status, html) = http::page(&s.app, "/queues/default/outage", true)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("Collecting samples (the embedded engine records one every 5 s)."));
    assert!(html.contains("None recorded in the last hour"));

    Sampler::new(s.broker.clone(), Duration::from_secs(5))
        .tick()
        .await
        .unwrap();
    let (_, html) = http::page(&s.app, "/queues/default/outage", true)
        .await
        .parts();
    assert!(html.contains("Collecting samples"));
    assert!(!html.contains("None recorded"));

    let (status, _) = http::page(&s.app, "/queues/nope/outage", true)
        .await
        .parts();
    assert_eq!(status, StatusCode::NOT_FOUND);
}

impl Setup {
    fn clock_now(&self) -> DateTime<Utc> {
        use asynqdeck::clock::Clock;
        self.clock.now()
    }
}

/// Under `--root-path /asynq` every page of this area answers below the
/// prefix and builds its links and polls with it.
#[tokio::test]
async fn pages_honour_the_root_path() {
    let db = support::redis();
    let clock = SimulatedClock::new(now());
    let broker = broker_at(&db, &clock).await;
    let mut raw = db.raw().await;
    add_queue(&mut raw, "default").await;
    let info = seed::server("web-1", 4242, "0b5d6b2e-srv", 2);
    broker
        .write_server_state(
            &info,
            &[seed::worker(
                &info,
                "t1",
                br#"{"to":"a@b.c"}"#.to_vec(),
                1,
                60,
            )],
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    let config = WebConfig {
        root_path: "/asynq".into(),
        ..WebConfig::default()
    };
    let app = asynqdeck::web::router(AppState::new(Inspector::from_broker(broker), config));

    let (status, html) = http::page(&app, "/asynq/servers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"hx-get="/asynq/servers""#));
    assert!(html.contains(r#"href="/asynq/queues/critical/tasks/t1""#));
    for uri in [
        "/asynq/schedulers",
        "/asynq/schedulers/e1/events",
        "/asynq/queues/default/history",
        "/asynq/queues/default/outage",
        "/asynq/redis",
    ] {
        let (status, _) = http::page(&app, uri, false).await.parts();
        assert_eq!(status, StatusCode::OK, "{uri}");
    }
    let (status, html) = http::page(&app, "/asynq/queues/default/history?days=30", false)
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"href="/asynq/queues/default/history?days=90""#));
    let (status, _) = http::page(&app, "/servers", false).await.parts();
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Issue 16 item 3: `/schedulers` shows each replica group with its active
/// replica first and the standbys, ids escaped; no group, no section.
#[tokio::test]
async fn schedulers_page_shows_the_active_replica() {
    let db = support::redis();
    let s = setup(&db).await;
    let (_, html) = http::page(&s.app, "/schedulers", false).await.parts();
    assert!(!html.contains("Replica groups"));
    let beat = Duration::from_secs(60);
    assert!(
        s.broker
            .scheduler_lease("reports", "h:1:<b>a</b>", beat, beat)
            .await
            .unwrap()
    );
    assert!(
        !s.broker
            .scheduler_lease("reports", "h:2:b", beat, beat)
            .await
            .unwrap()
    );
    let (status, html) = http::page(&s.app, "/schedulers", false).await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("<h2>Replica groups</h2>"));
    let active = r#"<tr class="replica active"><td class="mono">reports</td><td class="mono">h:1:&#60;b&#62;a&#60;/b&#62;</td><td><strong>active</strong></td></tr>"#;
    let standby = r#"<tr class="replica"><td class="mono">reports</td><td class="mono">h:2:b</td><td>standby</td></tr>"#;
    let (a, b) = (html.find(active), html.find(standby));
    assert!(a.is_some() && b.is_some(), "{html}");
    assert!(a < b, "active first");
    assert_eq!(count(&html, r#"<tr class="replica"#), 2);
}
