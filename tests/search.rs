//! Search across queues and states (issue 17 item 1): `/api/search` and
//! `/search` over tasks seeded in several queues and states; every filter
//! of the query language; the bounded scan resumed by its cursor; "scanned
//! N of M"; corrupt tasks as rows; a bad query is 400 naming the word; the
//! bulk actions offered for a one-tab search.

use asynqdeck::broker::keys;
use asynqdeck::clock::SimulatedClock;
use asynqdeck::web::WebConfig;
use asynqdeck::web::format;
use asynqdeck::{Inspector, TaskState};
use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use redis::AsyncCommands;

use crate::support::clock::now;
use crate::support::http::{self, Dashboard};
use crate::support::redis::RawConn as Conn;
use crate::support::seed;
use crate::support::{self, TestDb};

/// A task message with the fields the filters read.
struct T<'a> {
    q: &'a str,
    id: &'a str,
    ty: &'a str,
    payload: &'a str,
    err: &'a str,
    retried: i32,
    failed_at: i64,
    completed_at: i64,
}

impl<'a> T<'a> {
    fn new(q: &'a str, id: &'a str, ty: &'a str) -> Self {
        T {
            q,
            id,
            ty,
            payload: id,
            err: "",
            retried: 0,
            failed_at: 0,
            completed_at: 0,
        }
    }
}

async fn put(conn: &mut Conn, t: T<'_>, state: &str, score: i64) {
    let mut m = seed::msg(t.q, t.id, t.ty, t.payload.as_bytes());
    m.error_msg = t.err.into();
    m.retried = t.retried;
    m.last_failed_at = t.failed_at;
    m.completed_at = t.completed_at;
    seed::message(conn, &m, state, score).await;
}

async fn pending_since(conn: &mut Conn, q: &str, id: &str, at: DateTime<Utc>) {
    let ns = at.timestamp_nanos_opt().unwrap();
    let _: () = conn
        .hset(keys::task_key(q, id), "pending_since", ns)
        .await
        .unwrap();
}

fn ago(secs: i64) -> i64 {
    now().timestamp() - secs
}

/// The dashboard on a clock stopped at the seeds' [`now`].
async fn dashboard(db: &TestDb) -> Dashboard {
    let clock = SimulatedClock::new(now());
    let insp = Inspector::from_broker(support::clock::broker_at(db, &clock).await);
    Dashboard::new(
        insp,
        WebConfig {
            poll_interval: std::time::Duration::ZERO,
            ..WebConfig::default()
        },
    )
}

/// Nine tasks in three queues and five states (see each line).
async fn seed_three_queues(db: &TestDb) -> DateTime<Utc> {
    let mut c = db.raw().await;
    let t0 = now();
    // alpha: pending a1 (2 h), a2 (10 s); retry a3; archived a4.
    let mut a1 = T::new("alpha", "a1", "email:send");
    a1.payload = r#"{"user":"user42"}"#;
    put(&mut c, a1, "pending", 0).await;
    pending_since(&mut c, "alpha", "a1", t0 - chrono::Duration::hours(2)).await;
    let mut a2 = T::new("alpha", "a2", "sms:send");
    a2.payload = r#"{"user":"user7"}"#;
    put(&mut c, a2, "pending", 0).await;
    pending_since(&mut c, "alpha", "a2", t0 - chrono::Duration::seconds(10)).await;
    let mut a3 = T::new("alpha", "a3", "email:send");
    (a3.err, a3.retried, a3.failed_at) = ("dial tcp: Connection Refused", 4, ago(3 * 3600));
    put(&mut c, a3, "retry", ago(-60)).await;
    let mut a4 = T::new("alpha", "a4", "report:daily");
    (a4.err, a4.retried, a4.failed_at) = ("timeout <b>exceeded</b>", 25, ago(2 * 86_400));
    put(&mut c, a4, "archived", ago(2 * 86_400)).await;
    // beta: active b4; scheduled b2 (overdue 2 h), b1 (in 1 h); completed b3.
    put(&mut c, T::new("beta", "b4", "sms:send"), "active", ago(-30)).await;
    put(
        &mut c,
        T::new("beta", "b1", "email:welcome"),
        "scheduled",
        ago(-3600),
    )
    .await;
    put(
        &mut c,
        T::new("beta", "b2", "email:send"),
        "scheduled",
        ago(7200),
    )
    .await;
    let mut b3 = T::new("beta", "b3", "email:send");
    b3.completed_at = ago(1800);
    put(&mut c, b3, "completed", ago(-3600)).await;
    // gamma: retry g1.
    let mut g1 = T::new("gamma", "g1", "email:send");
    (g1.err, g1.retried, g1.failed_at) = ("TIMEOUT while reading", 1, ago(60));
    put(&mut c, g1, "retry", ago(-60)).await;
    t0
}

/// `queue/state/id` of each row of `/api/search?q=<text>`, and the answer.
async fn found(d: &Dashboard, text: &str) -> (Vec<String>, serde_json::Value) {
    let uri = format!("/api/search?q={}", urlencode(text));
    let v = http::get_json(&d.app, &uri).await;
    let rows = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            format!(
                "{}/{}/{}",
                t["queue"].as_str().unwrap(),
                t["state"].as_str().unwrap(),
                t["id"].as_str().unwrap()
            )
        })
        .collect();
    (rows, v)
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn every_filter_finds_exactly_its_tasks() {
    let db = support::redis();
    seed_three_queues(&db).await;
    let d = dashboard(&db).await;
    let all = [
        "alpha/pending/a1",
        "alpha/pending/a2",
        "alpha/retry/a3",
        "alpha/archived/a4",
        "beta/active/b4",
        "beta/scheduled/b2",
        "beta/scheduled/b1",
        "beta/completed/b3",
        "gamma/retry/g1",
    ];
    let (rows, v) = found(&d, "").await;
    assert_eq!(rows, all, "no filter: every task, in scan order");
    assert_eq!(
        (v["scanned"].as_u64(), v["total"].as_u64()),
        (Some(9), Some(9))
    );
    assert!(v["cursor"].is_null());
    let cases: &[(&str, &[&str])] = &[
        ("queue:beta,gamma state:retry", &["gamma/retry/g1"]),
        (
            "queue:alpha queue:gamma state:pending",
            &["alpha/pending/a1", "alpha/pending/a2"],
        ),
        (
            "type:email:send",
            &[
                "alpha/pending/a1",
                "alpha/retry/a3",
                "beta/scheduled/b2",
                "beta/completed/b3",
                "gamma/retry/g1",
            ],
        ),
        (
            "type:email:*",
            &[
                "alpha/pending/a1",
                "alpha/retry/a3",
                "beta/scheduled/b2",
                "beta/scheduled/b1",
                "beta/completed/b3",
                "gamma/retry/g1",
            ],
        ),
        ("error~timeout", &["alpha/archived/a4", "gamma/retry/g1"]),
        ("connection refused", &["alpha/retry/a3"]),
        ("payload~user42", &["alpha/pending/a1"]),
        ("payload~USER42", &[]),
        (
            "age>1h",
            &[
                "alpha/pending/a1",
                "alpha/retry/a3",
                "alpha/archived/a4",
                "beta/scheduled/b2",
            ],
        ),
        ("age>20m state:completed", &["beta/completed/b3"]),
        ("age>1d", &["alpha/archived/a4"]),
        ("retried>3", &["alpha/retry/a3", "alpha/archived/a4"]),
        (
            "retried>3 error~timeout type:report:daily",
            &["alpha/archived/a4"],
        ),
        ("queue:nosuch", &[]),
    ];
    for (text, want) in cases {
        let (rows, _) = found(&d, text).await;
        assert_eq!(rows, *want, "{text}");
    }
    // Totals count the states in scope over the queues in scope.
    let (_, v) = found(&d, "queue:alpha,beta state:pending,scheduled").await;
    assert_eq!(
        (v["scanned"].as_u64(), v["total"].as_u64()),
        (Some(4), Some(4))
    );
    // The separate parameters add to q.
    let v = http::get_json(
        &d.app,
        "/api/search?queue=alpha&state=retry,archived&error=TIMEOUT",
    )
    .await;
    assert_eq!(v["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(v["tasks"][0]["id"], "a4");
    assert_eq!(v["query"], "queue:alpha state:retry,archived error~TIMEOUT");
    assert_eq!(v["total"], 2);
    // queue and state repeat; unknown parameters are ignored.
    let v = http::get_json(
        &d.app,
        "/api/search?queue=gamma&queue=alpha&state=retry&state=pending&page=3",
    )
    .await;
    assert_eq!(v["query"], "queue:alpha queue:gamma state:pending,retry");
    let ids: Vec<&str> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["a1", "a2", "a3", "g1"]);
}

#[tokio::test]
async fn api_rows_have_the_documented_shape() {
    let db = support::redis();
    seed_three_queues(&db).await;
    let d = dashboard(&db).await;
    let (_, v) = found(&d, "queue:alpha state:retry").await;
    let a3 = &v["tasks"][0];
    let since = a3["since"].as_str().unwrap().to_string();
    assert_eq!(
        *a3,
        serde_json::json!({
            "queue": "alpha", "id": "a3", "type": "email:send", "state": "retry",
            "payload": "a3", "last_error": "dial tcp: Connection Refused",
            "retried": 4, "max_retry": 25, "since": since,
        })
    );
    let at = DateTime::parse_from_rfc3339(&since)
        .unwrap()
        .with_timezone(&Utc);
    assert_eq!(
        at.timestamp(),
        ago(3 * 3600),
        "since = LastFailedAt: {since}"
    );
    assert_eq!(format::iso(at), since);
    assert_eq!(
        v.as_object().unwrap().keys().collect::<Vec<_>>(),
        [
            "cursor",
            "errors",
            "query",
            "scanned",
            "scanned_now",
            "tasks",
            "total"
        ]
    );
    // Pending rows carry their pending_since; active ones no time.
    let (_, v) = found(&d, "queue:alpha,beta state:pending,active").await;
    let since: Vec<bool> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["since"].is_string())
        .collect();
    assert_eq!(since, [true, true, false]);
}

#[tokio::test]
async fn the_cursor_resumes_without_gaps_or_repeats() {
    let db = support::redis();
    let mut c = db.raw().await;
    for i in 0..6 {
        seed::task(&mut c, "big", &format!("p{i}"), "pending", 0).await;
    }
    for i in 0..4 {
        seed::task(&mut c, "big2", &format!("r{i}"), "retry", ago(-600) + i).await;
    }
    let d = dashboard(&db).await;
    let mut uri = "/api/search?q=queue%3Abig%2Cbig2&limit=4".to_string();
    let mut steps = Vec::new();
    let mut seen = Vec::new();
    loop {
        let v = http::get_json(&d.app, &uri).await;
        for t in v["tasks"].as_array().unwrap() {
            seen.push(t["id"].as_str().unwrap().to_string());
        }
        steps.push((
            v["scanned_now"].as_u64().unwrap(),
            v["scanned"].as_u64().unwrap(),
            v["total"].as_u64().unwrap(),
        ));
        match v["cursor"].as_str() {
            Some(cur) => uri = format!("/api/search?q=queue%3Abig%2Cbig2&limit=4&cursor={cur}"),
            None => break,
        }
        assert!(steps.len() < 10, "the scan never ends: {steps:?}");
    }
    assert_eq!(steps, [(4, 4, 10), (2, 6, 10), (4, 10, 10)]);
    assert_eq!(
        seen,
        ["p0", "p1", "p2", "p3", "p4", "p5", "r0", "r1", "r2", "r3"]
    );

    // The page says it and links the next step.
    let page = http::get(&d.app, "/search?q=queue%3Abig%2Cbig2&limit=4").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains("Scanned 4 of 10 tasks in scope (4 in this step); 4 matches in this step."),
        "{}",
        page.body
    );
    let more = http::attr_values(&page.body, "href")
        .into_iter()
        .find(|h| h.contains("cursor="))
        .expect("Scan more");
    let next = http::get(&d.app, &more).await;
    assert_eq!(next.status, StatusCode::OK, "{more}");
    assert!(
        next.body
            .contains("Scanned 6 of 10 tasks in scope (2 in this step); 2 matches in this step."),
        "{}",
        next.body
    );
    assert!(next.body.contains(">p5</a>") && !next.body.contains(">p3</a>"));
}

#[tokio::test]
async fn a_corrupt_task_is_a_row() {
    let db = support::redis();
    let mut c = db.raw().await;
    seed::task(&mut c, "q", "ok1", "pending", 0).await;
    seed::put(
        &mut c,
        "q",
        "bad1",
        vec![0xff, 0xff, 0xff],
        "pending",
        0,
        "",
    )
    .await;
    let d = dashboard(&db).await;
    // Listed whatever the filter: whether it matches cannot be told.
    let (rows, v) = found(&d, "type:nomatch").await;
    assert_eq!(rows, ["q/pending/bad1"]);
    let bad = &v["tasks"][0];
    assert_eq!(bad["type"], "");
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .starts_with("corrupt data in Redis at asynq:{q}:t:bad1 msg"),
        "{bad}"
    );
    let page = http::get(&d.app, "/search?q=").await;
    assert_eq!(page.status, StatusCode::OK);
    let page = http::get(&d.app, "/search?q=queue%3Aq").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("<tr class=\"search-hit corrupt\">"));
    assert!(
        page.body
            .contains("Cannot read this task: corrupt data in Redis at asynq:{q}:t:bad1 msg")
    );
    assert!(page.body.contains("href=\"/queues/q/tasks/ok1\""));
}

/// A state whose key is of the wrong type is skipped and named; the
/// other states of the queue are still searched.
#[tokio::test]
async fn an_unreadable_state_is_skipped_and_named() {
    let db = support::redis();
    let mut c = db.raw().await;
    seed::task(&mut c, "q", "p1", "pending", 0).await;
    seed::task(&mut c, "q", "a1", "archived", 5).await;
    let _: () = c.set(keys::retry_key("q"), "not a zset").await.unwrap();
    let d = dashboard(&db).await;
    let (rows, v) = found(&d, "queue:q").await;
    assert_eq!(rows, ["q/pending/p1", "q/archived/a1"]);
    let errors = v["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{v}");
    let e = errors[0].as_str().unwrap();
    assert!(e.starts_with("q retry: ") && e.contains("WRONGTYPE"), "{e}");
    assert!(v["cursor"].is_null());
    let page = http::get(&d.app, "/search?q=queue%3Aq").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Skipped, cannot be read: q retry: "));
}

#[tokio::test]
async fn a_bad_query_is_400_naming_the_word() {
    let db = support::redis();
    seed_three_queues(&db).await;
    let d = dashboard(&db).await;
    let r = http::get(&d.app, "/api/search?q=state%3Aretry+quue%3Aalpha").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.text(),
        "invalid argument: bad search term \"quue:alpha\": unknown filter: use queue:, state:, type:, error~, payload~, age> or retried>\n"
    );
    let r = http::get(&d.app, "/api/search?age=soon").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("\"age=soon\""), "{}", r.text());
    let r = http::get(&d.app, "/api/search?limit=many").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        r.text(),
        "invalid argument: limit=\"many\": a whole number is needed\n"
    );
    let r = http::get(&d.app, "/api/search?type=a&type=b").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.text().contains("type is given twice"), "{}", r.text());
    let r = http::get(&d.app, "/api/search?cursor=zz").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // Crafted cursors with counts past any container: 400, no overflow.
    for text in [
        "1\npending\n18446744073709551615\n1\n0\nalpha",
        "1\npending\n0\n1\n18446744073709551615\nalpha",
    ] {
        let r = http::get(&d.app, &format!("/api/search?cursor={}", hex::encode(text))).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text());
        assert!(
            r.text().starts_with("invalid argument: bad search cursor"),
            "{}",
            r.text()
        );
    }
    // An age past the time range matches nothing (no overflow, no 500).
    for q in ["age%3E9999999999h", "age%3E99999999999999"] {
        let r = http::get(&d.app, &format!("/api/search?q={q}")).await;
        assert_eq!(r.status, StatusCode::OK, "{q}: {}", r.text());
        assert_eq!(r.json()["tasks"], serde_json::json!([]), "{q}");
    }
    let page = http::get(&d.app, "/search?q=age%3E%3Cb%3E").await;
    assert_eq!(page.status, StatusCode::BAD_REQUEST);
    assert!(
        page.body
            .contains("bad search term &#34;age&#62;&#60;b&#62;&#34;"),
        "{}",
        page.body
    );
}

#[tokio::test]
async fn the_page_links_tasks_escapes_errors_and_offers_bulk_jobs() {
    let db = support::redis();
    seed_three_queues(&db).await;
    let d = dashboard(&db).await;
    let page = http::get(&d.app, "/search?q=error%7Etimeout").await;
    assert_eq!(page.status, StatusCode::OK);
    let at = page.body.find("timeout &").expect(&page.body);
    assert!(
        page.body
            .contains("timeout &#60;b&#62;exceeded&#60;/b&#62;"),
        "{}",
        &page.body[at..at + 80]
    );
    assert!(!page.body.contains("<b>exceeded"));
    assert!(page.body.contains("href=\"/queues/alpha/tasks/a4\""));
    assert!(
        page.body
            .contains("href=\"/search/bulk/delete?q=error~timeout\""),
        "{}",
        page.body
    );
    let task = http::get(&d.app, "/queues/alpha/tasks/a4").await;
    assert_eq!(task.status, StatusCode::OK);

    let page = http::get(
        &d.app,
        "/search?q=queue%3Aalpha+state%3Aretry+type%3Aemail%3Asend",
    )
    .await;
    let bulk: Vec<String> = http::attr_values(&page.body, "href")
        .into_iter()
        .filter(|h| h.contains("/matching/"))
        .collect();
    assert_eq!(
        bulk,
        [
            "/queues/alpha/retry/matching/run?search=type%3Aemail%3Asend",
            "/queues/alpha/retry/matching/archive?search=type%3Aemail%3Asend",
            "/queues/alpha/retry/matching/delete?search=type%3Aemail%3Asend",
        ]
    );
    assert!(
        page.body
            .contains("On every match of the search (<span class=\"bulk-count\">1 task</span>)"),
        "{}",
        page.body
    );
    let confirm = http::get(&d.app, &bulk[1]).await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(
        confirm.body.contains(
            "This will archive 1 retry tasks of queue alpha matching search type:email:send."
        ),
        "{}",
        confirm.body
    );
    let insp = Inspector::connect(&db.url()).await.unwrap();
    assert_eq!(
        insp.get_task_info("alpha", "a3").await.unwrap().state,
        TaskState::Retry
    );
}

/// Queues whose states the statistics count as empty cost no read: 1,000
/// of them beside one task are scanned in one step (1,000 × 6 reads would
/// take 30 steps of `SEARCH_MAX_READS`).
#[tokio::test]
async fn empty_queues_cost_no_reads() {
    let db = support::redis();
    let mut c = db.raw().await;
    let empty: Vec<String> = (0..1000).map(|i| format!("idle{i:04}")).collect();
    let _: () = c.sadd(keys::ALL_QUEUES, &empty).await.unwrap();
    seed::task(&mut c, "work", "w1", "pending", 0).await;
    let d = dashboard(&db).await;
    let v = http::get_json(&d.app, "/api/search").await;
    assert_eq!(v["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(
        (v["scanned"].as_u64(), v["total"].as_u64()),
        (Some(1), Some(1))
    );
    assert!(v["cursor"].is_null(), "{v}");
}

/// Many small states are read at most `SEARCH_MAX_READS` (200) per step:
/// 250 queues of one pending task each take two steps, 200 then 50.
#[tokio::test]
async fn a_step_makes_at_most_200_reads() {
    let db = support::redis();
    let mut c = db.raw().await;
    for i in 0..250 {
        seed::task(&mut c, &format!("q{i:03}"), "t", "pending", 0).await;
    }
    let d = dashboard(&db).await;
    let v = http::get_json(&d.app, "/api/search").await;
    assert_eq!(asynqdeck::inspector::SEARCH_MAX_READS, 200);
    assert_eq!(
        (v["scanned_now"].as_u64(), v["total"].as_u64()),
        (Some(200), Some(250))
    );
    let last = v["tasks"].as_array().unwrap().last().unwrap()["queue"].clone();
    assert_eq!(last, "q199");
    let cur = v["cursor"].as_str().unwrap();
    let v = http::get_json(&d.app, &format!("/api/search?cursor={cur}")).await;
    assert_eq!(
        (v["scanned_now"].as_u64(), v["scanned"].as_u64()),
        (Some(50), Some(250))
    );
    assert_eq!(v["tasks"][0]["queue"], "q200");
    assert!(v["cursor"].is_null());
}

/// Read-only mode: the search answers, and offers no bulk action.
#[tokio::test]
async fn read_only_searches_without_bulk_actions() {
    let db = support::redis();
    seed_three_queues(&db).await;
    let clock = SimulatedClock::new(now());
    let insp = Inspector::from_broker(support::clock::broker_at(&db, &clock).await);
    let d = Dashboard::new(
        insp,
        WebConfig {
            poll_interval: std::time::Duration::ZERO,
            read_only: true,
            ..WebConfig::default()
        },
    );
    let page = http::get(&d.app, "/search?q=queue%3Aalpha+state%3Aretry").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("href=\"/queues/alpha/tasks/a3\""));
    assert!(
        !page.body.contains("/matching/")
            && !page.body.contains("/all/")
            && !page.body.contains("/search/bulk/")
    );
}
