//! Bulk actions on a search's matches (issue 17 item 1): a search across
//! queues starts one background job per queue tab, filtered by the
//! search, and together they act on exactly the matches (`error~`,
//! `retried>`, `age>` included); a one-tab search goes through the tab's
//! job pages with `search=`; the confirmation shows the preview count and
//! the tabs; too wide a search is refused; the action is audited.

use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::AuditFilter;
use asynqdeck::web::WebConfig;
use asynqdeck::{Inspector, TaskState};
use axum::http::StatusCode;
use chrono::Duration;
use redis::AsyncCommands;

use crate::support::clock::{broker_at, now};
use crate::support::http::{self, Dashboard};
use crate::support::jobs::{finished, started_id};
use crate::support::redis::RawConn as Conn;
use crate::support::seed;
use crate::support::{self, TestDb};

/// One task of queue `q` in `state` with LastErr `err` and `retried`.
async fn put(c: &mut Conn, q: &str, id: &str, state: &str, err: &str, retried: i32) {
    let mut m = seed::msg(q, id, "email:send", id.as_bytes());
    m.error_msg = err.into();
    m.retried = retried;
    m.last_failed_at = now().timestamp() - 600;
    seed::message(c, &m, state, now().timestamp() + 60).await;
}

async fn dashboard(db: &TestDb) -> (Dashboard, Inspector) {
    let clock = SimulatedClock::new(now());
    let insp = Inspector::from_broker(broker_at(db, &clock).await);
    let d = Dashboard::new(
        insp.clone(),
        WebConfig {
            poll_interval: std::time::Duration::ZERO,
            ..WebConfig::default()
        },
    );
    (d, insp)
}

async fn state_of(insp: &Inspector, q: &str, id: &str) -> TaskState {
    insp.get_task_info(q, id).await.unwrap().state
}

/// `error~timeout retried>1` over three queues: the confirmation counts
/// the 3 matches in the 5 non-empty tabs "archive" applies to (active,
/// archived and completed are left alone); the POST starts 5 jobs; once
/// they finish exactly the matches are archived.
#[tokio::test]
async fn a_search_across_queues_archives_exactly_its_matches() {
    let db = support::redis();
    let mut c = db.raw().await;
    put(&mut c, "q1", "m1", "retry", "read timeout", 2).await;
    put(&mut c, "q1", "n1", "retry", "read timeout", 1).await;
    put(&mut c, "q1", "n2", "retry", "refused", 5).await;
    put(&mut c, "q2", "m2", "retry", "TIMEOUT <b>x</b>", 3).await;
    put(&mut c, "q2", "m3", "scheduled", "timeout again", 9).await;
    put(&mut c, "q3", "n3", "pending", "refused", 4).await;
    put(&mut c, "q3", "n4", "retry", "dns", 4).await;
    let (d, insp) = dashboard(&db).await;

    let page = http::get(&d.app, "/search?q=error~timeout+retried%3E1").await;
    assert_eq!(page.status, StatusCode::OK);
    let bulk: Vec<String> = http::attr_values(&page.body, "href")
        .into_iter()
        .filter(|h| h.contains("/search/bulk/"))
        .collect();
    assert_eq!(
        bulk,
        [
            "/search/bulk/run?q=error~timeout%20retried%3E1",
            "/search/bulk/archive?q=error~timeout%20retried%3E1",
            "/search/bulk/delete?q=error~timeout%20retried%3E1",
            "/search/bulk/cancel?q=error~timeout%20retried%3E1",
        ]
    );

    let confirm = http::get(&d.app, &bulk[1]).await;
    assert_eq!(confirm.status, StatusCode::OK, "{}", confirm.body);
    assert!(
        confirm
            .body
            .contains("This will archive 3 tasks matching the search in 5 queue tabs."),
        "{}",
        confirm.body
    );
    let tabs: Vec<String> = http::attr_values(&confirm.body, "href")
        .into_iter()
        .filter(|h| h.starts_with("/queues/"))
        .collect();
    assert_eq!(
        tabs,
        [
            "/queues/q1/retry",
            "/queues/q2/scheduled",
            "/queues/q2/retry",
            "/queues/q3/pending",
            "/queues/q3/retry"
        ]
    );
    assert!(
        confirm
            .body
            .contains("Left alone: active, archived, completed tasks"),
        "{}",
        confirm.body
    );
    let post = http::attr_values(&confirm.body, "hx-post").remove(0);
    assert_eq!(
        post,
        "/search/bulk/archive?q=error~timeout%20retried%3E1&confirmed=3"
    );

    let r = d.post(&post, "").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.header("hx-redirect"), Some("/jobs"));
    assert_eq!(r.body, "5 jobs started.");
    let jobs = insp.jobs(10).await.unwrap();
    assert_eq!(jobs.len(), 5);
    let mut done = 0;
    for j in &jobs {
        let j = finished(&insp, &j.id).await;
        assert_eq!(j.phase.as_str(), "done", "{:?}", j.error);
        done += j.done;
    }
    assert_eq!(done, 3);
    for (q, id, want) in [
        ("q1", "m1", TaskState::Archived),
        ("q2", "m2", TaskState::Archived),
        ("q2", "m3", TaskState::Archived),
        ("q1", "n1", TaskState::Retry),
        ("q1", "n2", TaskState::Retry),
        ("q3", "n3", TaskState::Pending),
        ("q3", "n4", TaskState::Retry),
    ] {
        assert_eq!(state_of(&insp, q, id).await, want, "{q}/{id}");
    }

    let audit = insp
        .audit_log(&AuditFilter::default(), None, 10)
        .await
        .unwrap();
    let e = &audit.entries[0];
    assert_eq!(
        (
            e.verb.as_str(),
            e.queue.as_str(),
            e.scope.as_str(),
            e.count,
            e.result.as_str()
        ),
        (
            "archive",
            "",
            "search error~timeout retried>1; 5 jobs",
            None,
            "ok"
        )
    );
}

/// A one-tab search with `age>` runs through the tab's job page with
/// `search=`: of two pending tasks only the one pending for 2 h is
/// deleted (its `pending_since` read as the search reads it).
#[tokio::test]
async fn a_one_tab_search_with_age_deletes_only_the_old_tasks() {
    let db = support::redis();
    let mut c = db.raw().await;
    put(&mut c, "p", "old", "pending", "", 0).await;
    put(&mut c, "p", "new", "pending", "", 0).await;
    for (id, ago) in [("old", Duration::hours(2)), ("new", Duration::seconds(10))] {
        let ns = (now() - ago).timestamp_nanos_opt().unwrap();
        let _: () = c
            .hset(
                asynqdeck::broker::keys::task_key("p", id),
                "pending_since",
                ns,
            )
            .await
            .unwrap();
    }
    let (d, insp) = dashboard(&db).await;
    let page = http::get(&d.app, "/search?q=queue%3Ap+state%3Apending+age%3E1h").await;
    let href = http::attr_values(&page.body, "href")
        .into_iter()
        .find(|h| h.contains("/delete"))
        .unwrap();
    assert_eq!(href, "/queues/p/pending/matching/delete?search=age%3E3600s");
    let confirm = http::get(&d.app, &href).await;
    assert!(
        confirm
            .body
            .contains("This will delete 1 pending tasks of queue p matching search age&#62;3600s."),
        "{}",
        confirm.body
    );
    let post = http::attr_values(&confirm.body, "hx-post").remove(0);
    let r = d.post(&post, "").await;
    let job = finished(&insp, &started_id(&r)).await;
    assert_eq!((job.done, job.skipped), (1, 1));
    assert!(insp.get_task_info("p", "old").await.is_err());
    assert_eq!(state_of(&insp, "p", "new").await, TaskState::Pending);
    let audit = insp
        .audit_log(&AuditFilter::default(), None, 10)
        .await
        .unwrap();
    let e = &audit.entries[0];
    assert_eq!(
        (e.verb.as_str(), e.queue.as_str(), e.scope.as_str()),
        ("delete", "p", "pending/matching search age>3600s")
    );
    // A tab names its queue and state: a search= naming others is refused.
    let r = http::get(
        &d.app,
        "/queues/p/pending/matching/delete?search=queue%3Aother",
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.body
            .contains("search= takes filters only: the tab names the queue and the state"),
        "{}",
        r.body
    );
}

/// A search over more than 50 non-empty tabs is refused (400, nothing
/// started); a bad query is 400; an action no state in scope allows is 400.
#[tokio::test]
async fn too_wide_or_bad_searches_are_refused() {
    let db = support::redis();
    let mut c = db.raw().await;
    for i in 0..51 {
        put(&mut c, &format!("w{i:02}"), "t", "retry", "boom", 1).await;
    }
    let (d, insp) = dashboard(&db).await;
    let r = http::get(&d.app, "/search/bulk/delete?q=boom").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.body
            .contains("this search spans 51 queue tabs; a bulk action takes at most 50"),
        "{}",
        r.body
    );
    let r = d.post("/search/bulk/delete?q=boom", "").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(insp.jobs(10).await.unwrap().is_empty());
    let r = http::get(&d.app, "/search/bulk/delete?q=bogus%3Ax").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let r = http::get(&d.app, "/search/bulk/run?q=state%3Apending").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(
        r.body.contains("run does not apply to pending tasks"),
        "{}",
        r.body
    );
    let r = http::get(&d.app, "/search/bulk/explode?q=boom").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
}

/// Matches past the counted scan are never shown as "about 0": 5,100 retry
/// tasks of which only the last 100 by due time match; the preview counts
/// over the first 5,000 and says so; Confirm deletes exactly the 100.
#[tokio::test]
async fn matches_past_the_counted_scan_are_not_hidden() {
    let db = support::redis();
    let mut c = db.raw().await;
    for i in 0..5_100 {
        let err = if i >= 5_000 { "special outage" } else { "boom" };
        let mut m = seed::msg("skew", &format!("t{i:04}"), "email:send", b"{}");
        m.error_msg = err.into();
        m.last_failed_at = now().timestamp() - 600;
        seed::message(&mut c, &m, "retry", now().timestamp() + 60 + i).await;
    }
    let (d, insp) = dashboard(&db).await;
    let confirm = http::get(
        &d.app,
        "/queues/skew/retry/matching/delete?search=error~special",
    )
    .await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(
        confirm.body.contains(
            "No match in the first 5,000 of 5,100 retry tasks of queue skew matching search error~special; the rest was not counted: the job looks at every task."
        ),
        "{}",
        confirm.body
    );
    assert!(
        confirm
            .body
            .contains("Confirm: Delete the matches</button>")
    );
    let post = http::attr_values(&confirm.body, "hx-post").remove(0);
    let job = finished(&insp, &started_id(&d.post(&post, "").await)).await;
    assert_eq!((job.done, job.skipped), (100, 5_000));
}
