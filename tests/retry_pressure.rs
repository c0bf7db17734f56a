//! Retry pressure (issue 17 item 3): retries due in the next 1, 5 and 60
//! minutes per queue, from three `ZCOUNT`s on the retry set's scores. Exact
//! counts at the 60 / 300 / 3,600 s boundaries on a simulated clock, the
//! overview's "Due 1·5·60 min" column and the retry tab's outage fragment
//! for seeded queues, and no read at all while the Redis budget is spent.

use std::time::Duration;

use asynqdeck::broker::keys;
use asynqdeck::inspector::RetryPressure;
use asynqdeck::web::{AppState, WebConfig};
use asynqdeck::{Error, Inspector};
use redis::AsyncCommands;

use crate::support::clock::{self, clocked};
use crate::support::commandstats;
use crate::support::http;
use crate::support::{self, TestDb};

/// Puts `queue` in `asynq:queues` and one retry member per offset (seconds
/// from `now`, the clock's unix time) in its retry set.
async fn seed_retries(db: &TestDb, queue: &str, now: i64, offsets: &[i64]) {
    let mut conn = db.raw().await;
    let _: () = conn.sadd(keys::ALL_QUEUES, queue).await.unwrap();
    for (i, off) in offsets.iter().enumerate() {
        let _: () = conn
            .zadd(keys::retry_key(queue), format!("id-{i}"), now + off)
            .await
            .unwrap();
    }
}

fn pressure(next_1m: i64, next_5m: i64, next_60m: i64) -> RetryPressure {
    RetryPressure {
        next_1m,
        next_5m,
        next_60m,
    }
}

/// The three windows are `(now, now+60]`, `(now, now+300]` and
/// `(now, now+3600]`: a retry due exactly at a horizon counts, one a second
/// later does not, one due now or earlier counts nowhere; the counts follow
/// the clock.
#[tokio::test]
async fn counts_are_exact_at_the_boundaries_and_follow_the_clock() {
    let c = clocked(clock::now()).await;
    let now = clock::now().timestamp();
    seed_retries(&c.db, "q", now, &[-5, 0, 1, 60, 61, 300, 301, 3600, 3601]).await;
    assert_eq!(
        c.inspector.retry_pressure("q").await.unwrap(),
        pressure(2, 4, 6)
    );

    c.clock.advance(Duration::from_secs(60));
    // (now+60, now+120]: 61; (…, now+360]: 61, 300, 301;
    // (…, now+3660]: and 3600, 3601.
    assert_eq!(
        c.inspector.retry_pressure("q").await.unwrap(),
        pressure(1, 3, 5)
    );

    c.clock.advance(Duration::from_secs(3600));
    assert_eq!(
        c.inspector.retry_pressure("q").await.unwrap(),
        pressure(0, 0, 0)
    );
}

/// Many queues in one call, in order: a missing queue counts 0, a retry key
/// of the wrong type is that queue's error only, a bad name its own error.
#[tokio::test]
async fn many_queues_in_order_with_errors_per_queue() {
    let c = clocked(clock::now()).await;
    let now = clock::now().timestamp();
    seed_retries(&c.db, "a", now, &[10, 100, 1000]).await;
    seed_retries(&c.db, "c", now, &[30, 30, 299, 5000]).await;
    let mut conn = c.db.raw().await;
    let _: () = conn.set(keys::retry_key("wrong"), "x").await.unwrap();
    let names: Vec<String> = ["a", "missing", "wrong", "", "c"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let got = c.inspector.retry_pressures(&names).await.unwrap();
    assert_eq!(got.len(), 5);
    assert_eq!(got[0].as_ref().unwrap(), &pressure(1, 2, 3));
    assert_eq!(got[1].as_ref().unwrap(), &pressure(0, 0, 0));
    assert!(matches!(got[2], Err(Error::Internal(_))), "{:?}", got[2]);
    assert!(
        matches!(got[3], Err(Error::InvalidQueueName)),
        "{:?}",
        got[3]
    );
    assert_eq!(got[4].as_ref().unwrap(), &pressure(2, 3, 3));
}

/// The dashboard over an inspector on the simulated clock.
fn dashboard(c: &support::clock::Clocked, config: WebConfig) -> (AppState, axum::Router) {
    let state = AppState::new(Inspector::from_broker(c.broker.clone()), config);
    let app = asynqdeck::web::router(state.clone());
    (state, app)
}

/// The overview's column shows each row's figures as `1 · 5 · 60 min`
/// counts with their meaning in the title; the retry tab's outage fragment
/// shows the same figures next to the sparkline.
#[tokio::test]
async fn overview_column_and_outage_fragment_show_the_figures() {
    let c = clocked(clock::now()).await;
    let now = clock::now().timestamp();
    seed_retries(&c.db, "alpha", now, &[30, 200, 1000, 1000, 4000]).await;
    seed_retries(&c.db, "beta", now, &[]).await;
    let (_, app) = dashboard(&c, WebConfig::default());
    let (status, html) = http::get(&app, "/").await.parts();
    assert_eq!(status, 200);
    assert!(
        html.contains(r#"title="Retries due in the next 1 / 5 / 60 min (read for this page's rows, every 5 s)">Due 1·5·60 min</th>"#),
        "{html}"
    );
    let cell = |queue: &str| {
        let row = html
            .split(&format!("<tr data-queue=\"{queue}\">"))
            .nth(1)
            .unwrap_or_else(|| panic!("no row {queue}: {html}"));
        let td = row.split("<td class=\"num pressure").nth(1).unwrap();
        let text = td.split_once('>').unwrap().1.split("</td>").next().unwrap();
        (td.split_once('>').unwrap().0.to_string(), text.to_string())
    };
    assert_eq!(
        cell("alpha"),
        (
            "\" title=\"Retries due in the next 1 / 5 / 60 min\"".to_string(),
            "1 · 2 · 4".to_string()
        )
    );
    assert_eq!(cell("beta").1, "0 · 0 · 0");

    let (status, html) = http::get(&app, "/queues/alpha/outage").await.parts();
    assert_eq!(status, 200);
    assert!(
        html.contains(r#"<span class="retry-pressure" title="Retries due in the next 1 / 5 / 60 min">Due in 1 / 5 / 60 min: <strong class="pressure-figures">1 · 2 · 4</strong></span>"#),
        "{html}"
    );
}

/// While the Redis budget is spent the column reads nothing: the cells keep
/// their last figures, marked stale with their age, and Redis runs no
/// `ZCOUNT`; once the budget allows, they are read again.
#[tokio::test]
async fn over_budget_the_column_reads_nothing_and_goes_stale() {
    let db = support::private_redis();
    let c = support::clock::clocked_on(db, clock::now()).await;
    let now = clock::now().timestamp();
    seed_retries(&c.db, "alpha", now, &[30, 200]).await;
    let (state, app) = dashboard(
        &c,
        WebConfig {
            poll_interval: Duration::from_secs(1),
            ..WebConfig::default()
        },
    );
    let (_, html) = http::get(&app, "/").await.parts();
    assert!(html.contains(">1 · 2 · 2</td>"), "{html}");
    state.stats.settle().await;

    // Into debt: the bucket holds 0.01 commands, one spend leaves it ~1,000 s short.
    state.stats.budget().set_limits(0.001, 0.0);
    state.stats.budget().spend(1).await;
    let mut conn = c.db.raw().await;
    commandstats::reset(&mut conn).await;
    let stale = support::eventually(Duration::from_secs(30), || async {
        let (_, html) = http::get(&app, "/").await.parts();
        html.contains("<td class=\"num pressure stale\"")
            .then_some(html)
    })
    .await
    .expect("a stale pressure cell");
    assert!(
        stale.contains("s old — Redis budget)\">1 · 2 · 2</td>"),
        "{stale}"
    );
    let calls = commandstats::calls(&mut conn).await;
    assert_eq!(
        calls.get("zcount"),
        None,
        "no ZCOUNT over budget: {calls:?}"
    );
    assert!(state.stats.budget().usage().deferred_total >= 1);

    state.stats.budget().set_limits(0.0, 0.0);
    let (_, html) = http::get(&app, "/").await.parts();
    assert!(
        html.contains("title=\"Retries due in the next 1 / 5 / 60 min\">1 · 2 · 2</td>"),
        "{html}"
    );
    assert_eq!(commandstats::calls(&mut conn).await.get("zcount"), Some(&3));
}
