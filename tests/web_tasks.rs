//! The queue page (tabs, pagination, filters, LastErr groups, actions) and
//! the task page, driven over HTTP (`tower::ServiceExt::oneshot`) against a
//! real Redis: exact counts and rows in the HTML, Redis state after every
//! action checked through the Inspector, CSRF and read-only refusals,
//! escaping of text from Redis, corrupt tasks as error rows, 404s, the root
//! path (issue 4 items 2, 3, 6, 7; S4, S14, S17, S28, S29).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crate::support::redis::RawConn as Conn;
use asynqdeck::broker::proto::{ServerInfo, TaskMessage, WorkerInfo};
use asynqdeck::broker::{Broker, keys};
use asynqdeck::clock::SimulatedClock;
use asynqdeck::inspector::jobs::JobPhase;
use asynqdeck::web::WebConfig;
use asynqdeck::{Error, Inspector, TaskState};
use axum::http::StatusCode;
use prost::Message;
use redis::AsyncCommands;

use crate::support::clock::{now, ts};
use crate::support::http::{self, Dashboard, Reply};
use crate::support::jobs;
use crate::support::seed;
use crate::support::{self, TestDb};

fn secs(offset: i64) -> i64 {
    now().timestamp() + offset
}

struct Setup {
    dash: Dashboard,
    insp: Inspector,
    broker: Broker,
    raw: Conn,
}

/// The dashboard on a fresh database with `config`; broker and pages on one
/// simulated clock set to [`now`].
async fn setup_with(db: &TestDb, config: WebConfig) -> Setup {
    let broker = Broker::connect(&db.url())
        .await
        .unwrap()
        .with_clock(Arc::new(SimulatedClock::new(now())));
    let insp = Inspector::from_broker(broker.clone());
    Setup {
        dash: Dashboard::new(insp.clone(), config),
        insp,
        broker,
        raw: db.raw().await,
    }
}

async fn setup(db: &TestDb) -> Setup {
    setup_with(db, WebConfig::default()).await
}

/// The dashboard's requests (`s.post(...)`, `s.app`, `s.token`) are the
/// shared [`Dashboard`]'s.
impl std::ops::Deref for Setup {
    type Target = Dashboard;

    fn deref(&self) -> &Dashboard {
        &self.dash
    }
}

/// The JSON of the answer's `HX-Trigger` header.
fn trigger(a: &Reply) -> serde_json::Value {
    let text = a
        .headers
        .get("hx-trigger")
        .expect("HX-Trigger header")
        .to_str()
        .unwrap();
    serde_json::from_str(text).unwrap()
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// Ids of the task rows, in page order.
fn row_ids(body: &str) -> Vec<String> {
    body.split("<tr data-id=\"")
        .skip(1)
        .chain(body.split("<tr class=\"corrupt\" data-id=\"").skip(1))
        .map(|s| s.split('"').next().unwrap().to_string())
        .collect()
}

/// A retry task that failed `failed_ago` s before now and is due `due_in` s after.
fn retry_msg(q: &str, id: &str, err: &str, retried: i32) -> TaskMessage {
    TaskMessage {
        retried,
        error_msg: err.into(),
        last_failed_at: secs(-50),
        ..seed::msg(q, id, "email:send", br#"{"to":"a@b.c"}"#)
    }
}

/// Starts the bulk job `uri` names (as its confirmation page's Confirm
/// does), waits until it is finished and returns how many tasks it did.
async fn run_job(s: &Setup, uri: &str, form: &str) -> u64 {
    let a = s.post(uri, form).await;
    assert_eq!(a.status, StatusCode::OK, "{uri}: {}", a.body);
    let job = jobs::finished(&s.insp, &jobs::started_id(&a)).await;
    assert_eq!(job.phase, JobPhase::Done, "{uri}");
    job.done
}

async fn state_of(insp: &Inspector, q: &str, id: &str) -> Option<TaskState> {
    match insp.get_task_info(q, id).await {
        Ok(t) => Some(t.state),
        Err(Error::TaskNotFound { .. }) => None,
        Err(e) => panic!("get_task_info({id}): {e}"),
    }
}

/// One task in every state of queue `q`: pending p1 p2, active a1 (worker
/// known, lease valid) and a2 (no worker, lease expired), scheduled s1,
/// retry r1, archived x1, completed c1, aggregating g1 in group `grp`.
async fn seed_every_state(s: &mut Setup, q: &str) {
    let raw = &mut s.raw;
    seed::message(
        raw,
        &seed::msg(q, "p1", "email:send", b"hello"),
        "pending",
        0,
    )
    .await;
    seed::message(
        raw,
        &seed::msg(q, "p2", "email:send", b"world"),
        "pending",
        0,
    )
    .await;
    seed::message(
        raw,
        &seed::msg(q, "a1", "img:resize", b"{}"),
        "active",
        secs(30),
    )
    .await;
    seed::message(
        raw,
        &seed::msg(q, "a2", "img:resize", b"{}"),
        "active",
        secs(-10),
    )
    .await;
    seed::message(
        raw,
        &seed::msg(q, "s1", "report", b"r"),
        "scheduled",
        secs(3600),
    )
    .await;
    seed::message(
        raw,
        &retry_msg(q, "r1", "dial tcp 10.0.0.1:5432: connection refused", 3),
        "retry",
        secs(250),
    )
    .await;
    let x1 = TaskMessage {
        retried: 25,
        error_msg: "boom".into(),
        last_failed_at: secs(-7200),
        ..seed::msg(q, "x1", "email:send", b"x")
    };
    seed::message(raw, &x1, "archived", secs(-7200)).await;
    let c1 = TaskMessage {
        completed_at: secs(-60),
        retention: 3600,
        ..seed::msg(q, "c1", "report", b"c")
    };
    seed::message(raw, &c1, "completed", secs(3540)).await;
    let _: () = raw
        .hset(
            keys::task_key(q, "c1"),
            "result",
            br#"{"ok":true}"#.to_vec(),
        )
        .await
        .unwrap();
    let g1 = TaskMessage {
        group_key: "grp".into(),
        ..seed::msg(q, "g1", "batch:item", b"g")
    };
    seed::message(raw, &g1, "aggregating", secs(-5)).await;
    let server = ServerInfo {
        host: "host-a".into(),
        pid: 7,
        server_id: "sid".into(),
        concurrency: 10,
        queues: [(q.to_string(), 1)].into(),
        strict_priority: false,
        status: "active".into(),
        start_time: ts(now() - chrono::Duration::minutes(5)),
        active_worker_count: 1,
    };
    let worker = WorkerInfo {
        host: "host-a".into(),
        pid: 7,
        server_id: "sid".into(),
        task_id: "a1".into(),
        task_type: "img:resize".into(),
        task_payload: b"{}".to_vec(),
        queue: q.into(),
        start_time: ts(now() - chrono::Duration::seconds(20)),
        deadline: ts(now() + chrono::Duration::seconds(40)),
    };
    s.broker
        .write_server_state(&server, &[worker], Duration::from_secs(60))
        .await
        .unwrap();
}

/// Issue 4 item 2 (S28): every tab renders with its rows, its own columns
/// and the tab counts from the stats snapshot; `/queues/{q}` shows the
/// active tab and `?status=` (asynqmon's link) picks another.
#[tokio::test]
async fn every_tab_renders_rows_and_counts() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_every_state(&mut s, "q").await;
    let app = &s.app;

    let counts = [
        ("active", 2),
        ("pending", 2),
        ("aggregating", 1),
        ("scheduled", 1),
        ("retry", 1),
        ("archived", 1),
        ("completed", 1),
    ];
    for (tab, _) in counts {
        let a = http::page(app, &format!("/queues/q/{tab}"), false).await;
        assert_eq!(a.status, StatusCode::OK, "{tab}");
        for (other, n) in counts {
            assert_eq!(
                count(&a.body, &format!("data-state=\"{other}\">{n}</span>")),
                1,
                "{tab}: count of {other}"
            );
        }
        assert_eq!(
            count(
                &a.body,
                &format!("href=\"/queues/q/{tab}\" aria-current=\"page\"")
            ),
            1,
            "{tab} is the current tab"
        );
    }

    let active = http::page(app, "/queues/q", false).await;
    assert_eq!(active.status, StatusCode::OK);
    assert_eq!(row_ids(&active.body), ["a1", "a2"]);
    // a1: worker's start and deadline; a2: unknown ("-"), lease expired.
    assert!(active.body.contains("<time datetime=\"2026-03-10T11:59:40Z\">2026-03-10 11:59:40 UTC</time> <span class=\"rel\">(20s ago)</span>"));
    assert!(active.body.contains("<time datetime=\"2026-03-10T12:00:40Z\">2026-03-10 12:00:40 UTC</time> <span class=\"rel\">(in 40s)</span>"));
    assert_eq!(count(&active.body, "<span class=\"na\">-</span>"), 2);
    assert_eq!(count(&active.body, "<span class=\"badge orphaned\""), 1);
    assert_eq!(count(&active.body, "data-op=\"cancel\""), 2);
    assert!(active.body.contains("Cancel all"));

    let pending = http::page(app, "/queues/q?status=pending", false).await;
    assert_eq!(row_ids(&pending.body), ["p1", "p2"]);
    assert_eq!(count(&pending.body, "<td class=\"num\">0 / 25</td>"), 2);
    assert_eq!(count(&pending.body, "data-op=\"archive\""), 2);
    assert_eq!(count(&pending.body, "data-op=\"delete\""), 2);
    assert_eq!(count(&pending.body, "data-op=\"run\""), 0);

    let sched = http::page(app, "/queues/q/scheduled", false).await;
    assert_eq!(row_ids(&sched.body), ["s1"]);
    assert!(
        sched
            .body
            .contains("2026-03-10 13:00:00 UTC</time> <span class=\"rel\">(in 1h 0m)</span>")
    );

    // S28: next attempt as relative and absolute time, and its distance
    // from the last failure.
    let retry = http::page(app, "/queues/q/retry", false).await;
    assert_eq!(row_ids(&retry.body), ["r1"]);
    assert!(retry.body.contains("<td class=\"num\">3 / 25</td>"));
    assert!(
        retry
            .body
            .contains("<pre class=\"err\">dial tcp 10.0.0.1:5432: connection refused</pre>")
    );
    assert!(
        retry
            .body
            .contains("2026-03-10 11:59:10 UTC</time> <span class=\"rel\">(50s ago)</span>")
    );
    assert!(
        retry
            .body
            .contains("2026-03-10 12:04:10 UTC</time> <span class=\"rel\">(in 4m 10s)</span>")
    );
    assert!(
        retry
            .body
            .contains("<div class=\"meta delay\">5m 0s after the last failure</div>")
    );
    // The outage signal's placeholder (served by the outage page).
    assert!(
        retry
            .body
            .contains("hx-get=\"/queues/q/outage\" hx-trigger=\"load, every 5s\"")
    );

    // S17: archived rows offer Run and Delete.
    let archived = http::page(app, "/queues/q/archived", false).await;
    assert_eq!(row_ids(&archived.body), ["x1"]);
    assert!(archived.body.contains("<pre class=\"err\">boom</pre>"));
    assert!(
        archived
            .body
            .contains("2026-03-10 10:00:00 UTC</time> <span class=\"rel\">(2h 0m ago)</span>")
    );
    assert_eq!(count(&archived.body, "data-op=\"run\""), 1);
    assert_eq!(count(&archived.body, "data-op=\"delete\""), 1);
    assert_eq!(count(&archived.body, "data-op=\"archive\""), 0);

    let completed = http::page(app, "/queues/q/completed", false).await;
    assert_eq!(row_ids(&completed.body), ["c1"]);
    assert!(
        completed
            .body
            .contains("only when they were enqueued with a retention")
    );
    assert!(
        completed
            .body
            .contains("2026-03-10 11:59:00 UTC</time> <span class=\"rel\">(1m 0s ago)</span>")
    );
    assert!(
        completed
            .body
            .contains("2026-03-10 12:59:00 UTC</time> <span class=\"rel\">(in 59m 0s)</span>")
    );
    assert!(
        completed
            .body
            .contains("<pre class=\"payload json\">{\n  &#34;ok&#34;: true\n}</pre>")
    );

    let agg = http::page(app, "/queues/q/aggregating", false).await;
    assert_eq!(row_ids(&agg.body), ["g1"]);
    assert!(agg.body.contains(
        "href=\"/queues/q/aggregating?group=grp&#38;size=20\" aria-current=\"true\">grp (1)</a>"
    ));
    assert!(agg.body.contains("<td>grp</td>"));

    // Payload previews: text as text; the id cell links the task and copies the full id.
    assert!(
        pending
            .body
            .contains("<pre class=\"payload text\">hello</pre>")
    );
    assert!(pending.body.contains("href=\"/queues/q/tasks/p1\" title=\"p1\">p1</a> <button type=\"button\" class=\"btn tiny copy\" data-copy=\"p1\""));
    // The banner: state, size, and today's numbers.
    assert!(pending.body.contains("<span>Size <b>9</b></span>"));
    assert!(
        pending
            .body
            .contains("<span>Error rate <b>0.00%</b></span>")
    );

    // The live fragment alone for htmx polls.
    let frag = http::page(app, "/queues/q/pending?page=1&size=20", true).await;
    assert!(
        frag.body
            .trim_start()
            .starts_with("<section id=\"tab\" class=\"live\" hx-get=\"/queues/q/pending?page=1&#38;size=20\" hx-trigger=\"every 5s\" hx-swap=\"outerHTML\">"),
        "{}",
        &frag.body[..200]
    );
    assert!(!frag.body.contains("<html"));
}

/// Seeds `n` pending tasks t000.. (t000 runs first).
async fn seed_pending(raw: &mut Conn, q: &str, n: usize, task_type: &str) {
    for i in 0..n {
        seed::message(
            raw,
            &seed::msg(
                q,
                &format!("t{i:03}"),
                task_type,
                format!("{{\"n\":{i}}}").as_bytes(),
            ),
            "pending",
            0,
        )
        .await;
    }
}

/// Pages of 20, 50 and 100 (other sizes fall back to 20); page links and
/// totals; a page past the end is a 200 with an empty table and a link
/// back, not an error.
#[tokio::test]
async fn pagination_edges_and_sizes() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "q", 45, "t").await;
    let app = &s.app;

    let p1 = http::page(app, "/queues/q/pending", false).await;
    let ids = row_ids(&p1.body);
    assert_eq!(ids.len(), 20);
    assert_eq!((ids[0].as_str(), ids[19].as_str()), ("t000", "t019"));
    assert!(p1.body.contains("<span class=\"total\">1–20 of 45</span>"));
    assert!(
        p1.body
            .contains("<a class=\"btn small\" href=\"/queues/q/pending?page=3&#38;size=20\">3</a>")
    );
    assert!(
        p1.body
            .contains("rel=\"next\" href=\"/queues/q/pending?page=2&#38;size=20\"")
    );
    assert!(!p1.body.contains("rel=\"prev\""));

    let p3 = http::page(app, "/queues/q/pending?page=3&size=20", false).await;
    assert_eq!(row_ids(&p3.body), ["t040", "t041", "t042", "t043", "t044"]);
    assert!(p3.body.contains("<span class=\"total\">41–45 of 45</span>"));
    assert!(!p3.body.contains("rel=\"next\""));

    let p4 = http::page(app, "/queues/q/pending?page=4&size=20", false).await;
    assert_eq!(p4.status, StatusCode::OK);
    assert!(row_ids(&p4.body).is_empty());
    assert!(p4.body.contains("Page 4 is past the end of this tab (3 pages). <a href=\"/queues/q/pending?page=3&#38;size=20\">Go to page 3</a>"));
    let far = http::page(app, "/queues/q/pending?page=999999999999", false).await;
    assert_eq!(far.status, StatusCode::OK);
    assert!(row_ids(&far.body).is_empty());

    for (size, rows) in [("50", 45), ("100", 45), ("20", 20), ("37", 20), ("0", 20)] {
        let a = http::page(app, &format!("/queues/q/pending?size={size}"), false).await;
        assert_eq!(row_ids(&a.body).len(), rows, "size {size}");
    }
    let p2_50 = http::page(app, "/queues/q/pending?page=2&size=50", false).await;
    assert!(row_ids(&p2_50.body).is_empty());
    assert!(
        p2_50
            .body
            .contains("Page 2 is past the end of this tab (1 page).")
    );
    let sizes = http::page(app, "/queues/q/pending?size=50", false).await;
    assert!(sizes.body.contains("Per page: <a href=\"/queues/q/pending?page=1&#38;size=20\">20</a> <b>50</b> <a href=\"/queues/q/pending?page=1&#38;size=100\">100</a>"));

    // An empty tab.
    let empty = http::page(app, "/queues/q/retry", false).await;
    assert!(empty.body.contains("No retry tasks."));
    assert!(empty.body.contains("<span class=\"total\">0 of 0</span>"));
}

/// S17, S29: each single action changes Redis as the Inspector would and
/// answers the re-rendered tab with a toast; from the task page it answers
/// the task's fields (or sends the browser back to the tab once deleted).
#[tokio::test]
async fn single_actions_change_redis_and_answer_the_tab() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_every_state(&mut s, "q").await;
    seed::message(
        &mut s.raw,
        &retry_msg("q", "r2", "e", 1),
        "retry",
        secs(100),
    )
    .await;
    seed::message(
        &mut s.raw,
        &retry_msg("q", "r3", "e", 1),
        "retry",
        secs(200),
    )
    .await;
    let insp = s.insp.clone();

    let a = s
        .post("/queues/q/tasks/r1/run?tab=retry&page=1&size=20", "")
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(state_of(&insp, "q", "r1").await, Some(TaskState::Pending));
    assert!(a.body.contains("<section id=\"tab\""));
    assert_eq!(row_ids(&a.body), ["r2", "r3"]);
    assert!(a.body.contains("data-state=\"retry\">2</span>"));
    assert!(a.body.contains("data-state=\"pending\">3</span>"));
    assert_eq!(trigger(&a)["toast"], "Task r1: moved to pending.");
    assert_eq!(trigger(&a)["refreshSummary"], true);

    let a = s.post("/queues/q/tasks/r2/archive?tab=retry", "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(state_of(&insp, "q", "r2").await, Some(TaskState::Archived));
    let a = s.post("/queues/q/tasks/r3/delete?tab=retry", "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(state_of(&insp, "q", "r3").await, None);
    assert!(a.body.contains("No retry tasks."));

    // Archived: run (S17) and delete.
    let a = s.post("/queues/q/tasks/x1/run?tab=archived", "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(state_of(&insp, "q", "x1").await, Some(TaskState::Pending));
    let a = s.post("/queues/q/tasks/r2/delete?tab=archived", "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(state_of(&insp, "q", "r2").await, None);

    for (id, op, tab, after) in [
        ("p1", "archive", "pending", Some(TaskState::Archived)),
        ("p2", "delete", "pending", None),
        ("s1", "archive", "scheduled", Some(TaskState::Archived)),
        ("g1", "run", "aggregating", Some(TaskState::Pending)),
        ("c1", "delete", "completed", None),
    ] {
        let a = s
            .post(&format!("/queues/q/tasks/{id}/{op}?tab={tab}"), "")
            .await;
        assert_eq!(a.status, StatusCode::OK, "{op} {id}");
        assert_eq!(state_of(&insp, "q", id).await, after, "{op} {id}");
    }

    // Cancel publishes; the task stays active until its server reacts.
    let a = s.post("/queues/q/tasks/a1/cancel?tab=active", "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(trigger(&a)["toast"], "Task a1: cancellation requested.");
    assert_eq!(state_of(&insp, "q", "a1").await, Some(TaskState::Active));

    // Refused by the Inspector: a 400 whose text htmx shows as an error toast.
    let a = s.post("/queues/q/tasks/a1/delete?tab=active", "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(
        a.body,
        "FAILED_PRECONDITION: cannot delete task in active state. use CancelProcessing instead."
    );
    let a = s.post("/queues/q/tasks/nope/run?tab=retry", "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let a = s.post("/queues/q/tasks/x1/explode?tab=retry", "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    // From the task page: the fields come back; a delete redirects to the tab.
    seed::message(
        &mut s.raw,
        &retry_msg("q", "r4", "e", 1),
        "retry",
        secs(100),
    )
    .await;
    let a = s
        .post("/queues/q/tasks/r4/archive?from=task&tab=retry", "")
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.body.contains("<section id=\"task-fields\""));
    assert!(
        a.body
            .contains("<dd data-field=\"state\"><a href=\"/queues/q/archived\">archived</a></dd>")
    );
    let a = s
        .post("/queues/q/tasks/r4/delete?from=task&tab=archived", "")
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.headers["hx-redirect"], "/queues/q/archived");
    assert_eq!(state_of(&insp, "q", "r4").await, None);
}

/// Bulk actions on a selection act per id and report each failure in an
/// error toast; the answer is the re-rendered tab.
#[tokio::test]
async fn bulk_actions_on_a_selection() {
    let db = support::redis();
    let mut s = setup(&db).await;
    for (i, id) in ["r1", "r2", "r3", "r4"].iter().enumerate() {
        seed::message(
            &mut s.raw,
            &retry_msg("q", id, "e", 1),
            "retry",
            secs(100 + i as i64),
        )
        .await;
    }
    let insp = s.insp.clone();

    let a = s
        .post("/queues/q/retry/batch/run?page=1&size=20", "ids=r1&ids=r2")
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(trigger(&a)["toast"], "Ran 2 selected tasks.");
    assert_eq!(row_ids(&a.body), ["r3", "r4"]);
    assert_eq!(state_of(&insp, "q", "r1").await, Some(TaskState::Pending));
    assert_eq!(state_of(&insp, "q", "r2").await, Some(TaskState::Pending));

    let a = s
        .post("/queues/q/retry/batch/archive", "ids=r3&ids=gone")
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let t = trigger(&a);
    assert_eq!(
        t["toastError"],
        "Archived 1 of 2 selected tasks; 1 failed: gone: task not found: cannot find task with id=gone in queue \"q\""
    );
    assert_eq!(state_of(&insp, "q", "r3").await, Some(TaskState::Archived));

    let a = s
        .post("/queues/q/pending/batch/delete", "ids=r1&ids=r2")
        .await;
    assert_eq!(trigger(&a)["toast"], "Deleted 2 selected tasks.");
    assert_eq!(state_of(&insp, "q", "r1").await, None);
    assert_eq!(state_of(&insp, "q", "r2").await, None);

    let a = s.post("/queues/q/retry/batch/delete", "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(a.body, "no task selected");
    let a = s.post("/queues/q/nosuch/batch/delete", "ids=r4").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(state_of(&insp, "q", "r4").await, Some(TaskState::Retry));
}

/// "All in this tab" actions link to their confirmation page and run as
/// background jobs (per group on the aggregating tab); see `web_jobs`.
#[tokio::test]
async fn all_actions_per_tab_and_group() {
    let db = support::redis();
    let mut s = setup(&db).await;
    for i in 0..3 {
        seed::message(
            &mut s.raw,
            &retry_msg("q", &format!("r{i}"), "e", 1),
            "retry",
            secs(100 + i),
        )
        .await;
    }
    for i in 0..2 {
        let m = TaskMessage {
            group_key: "g".into(),
            ..seed::msg("q", &format!("g{i}"), "batch", b"")
        };
        seed::message(&mut s.raw, &m, "aggregating", secs(-5)).await;
    }
    let insp = s.insp.clone();

    let page = http::page(&s.app, "/queues/q/retry", false).await;
    assert!(page.body.contains("<a class=\"btn small\" data-bulk=\"all-run\" href=\"/queues/q/retry/all/run?page=1&#38;size=20\" title=\"Run every retry task of queue q? (a background job; you confirm the count first)\">Run all</a>"));
    assert!(page.body.contains(
        "data-bulk=\"all-delete\" href=\"/queues/q/retry/all/delete?page=1&#38;size=20\""
    ));

    assert_eq!(
        run_job(&s, "/queues/q/retry/all/archive?page=1&size=20", "").await,
        3
    );
    assert_eq!(insp.queue_info("q").await.unwrap().archived, 3);
    assert_eq!(run_job(&s, "/queues/q/archived/all/run", "").await, 3);
    assert_eq!(insp.queue_info("q").await.unwrap().pending, 3);
    assert_eq!(run_job(&s, "/queues/q/pending/all/delete", "").await, 3);
    assert_eq!(insp.queue_info("q").await.unwrap().pending, 0);
    let a = s.post("/queues/q/archived/all/archive", "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);

    let agg = http::page(&s.app, "/queues/q/aggregating", false).await;
    assert!(agg.body.contains(
        "href=\"/queues/q/aggregating/all/archive?page=1&#38;size=20&#38;group=g\" title=\"Archive every task of group g? (a background job; you confirm the count first)\">Archive all</a>"
    ));
    assert_eq!(
        run_job(&s, "/queues/q/aggregating/all/run?group=g", "").await,
        2
    );
    assert_eq!(insp.queue_info("q").await.unwrap().pending, 2);
    let a = s.post("/queues/q/aggregating/all/run", "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
}

/// Issue 4 item 7: an HTML mutation without the CSRF token is refused with
/// 403 and changes nothing; in read-only mode no action control is
/// rendered and every POST is refused.
#[tokio::test]
async fn csrf_and_read_only() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed::message(
        &mut s.raw,
        &retry_msg("q", "r1", "e", 1),
        "retry",
        secs(100),
    )
    .await;
    let a = http::post_form(&s.app, "/queues/q/tasks/r1/run?tab=retry", "", None).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let a = http::post_form(&s.app, "/queues/q/retry/all/delete", "", Some("wrong")).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(state_of(&s.insp, "q", "r1").await, Some(TaskState::Retry));

    let ro = setup_with(
        &db,
        WebConfig {
            read_only: true,
            ..WebConfig::default()
        },
    )
    .await;
    for uri in [
        "/queues/q/retry",
        "/queues/q/tasks/r1",
        "/queues/q/retry/summary",
    ] {
        let page = http::page(&ro.app, uri, false).await;
        assert_eq!(page.status, StatusCode::OK, "{uri}");
        assert_eq!(count(&page.body, "hx-post"), 0, "{uri}");
        assert_eq!(count(&page.body, "type=\"checkbox\""), 0, "{uri}");
    }
    for uri in [
        "/queues/q/tasks/r1/run?tab=retry",
        "/queues/q/retry/batch/run",
        "/queues/q/retry/all/delete",
        "/queues/q/retry/matching/delete",
    ] {
        let a = ro.post(uri, "ids=r1").await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{uri}");
    }
    assert_eq!(state_of(&s.insp, "q", "r1").await, Some(TaskState::Retry));
}

/// Issue 4 item 7: a payload, type, header and LastErr holding
/// `<script>` render as text on the tab, the summary and the task page.
#[tokio::test]
async fn text_from_redis_is_escaped() {
    let db = support::redis();
    let mut s = setup(&db).await;
    let evil = "<script>alert(1)</script>";
    let m = TaskMessage {
        r#type: evil.into(),
        payload: evil.as_bytes().to_vec(),
        error_msg: evil.into(),
        headers: [(evil.to_string(), evil.to_string())].into(),
        ..retry_msg("q", "r1", "", 1)
    };
    seed::message(&mut s.raw, &m, "retry", secs(10)).await;
    let escaped = "&#60;script&#62;alert(1)&#60;/script&#62;";
    for uri in [
        "/queues/q/retry",
        "/queues/q/retry/summary",
        "/queues/q/tasks/r1",
    ] {
        let a = http::page(&s.app, uri, false).await;
        assert_eq!(a.status, StatusCode::OK, "{uri}");
        assert!(!a.body.contains(evil), "{uri}");
        assert!(count(&a.body, escaped) >= 2, "{uri}: {}", a.body);
    }
    let task = http::page(&s.app, "/queues/q/tasks/r1", false).await;
    assert!(
        task.body
            .contains(&format!("<pre class=\"err\">{escaped}</pre>"))
    );
    assert!(
        task.body
            .contains(&format!("<tr><th>{escaped}</th><td>{escaped}</td></tr>"))
    );
    assert!(
        task.body
            .contains(&format!("data-copy=\"{escaped}\">Copy payload</button>"))
    );
}

/// A task key of another type (a string where the hash should be) looked
/// up by id in its tab is one error row naming the key's type, not a 422
/// page for the whole tab (found in the issue-13 review).
#[tokio::test]
async fn id_lookup_of_a_wrong_type_task_key_is_an_error_row() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed::message(
        &mut s.raw,
        &seed::msg("q", "ok1", "t", b"fine"),
        "retry",
        4_102_444_800,
    )
    .await;
    let _: () = s.raw.set("asynq:{q}:t:str1", "x").await.unwrap();
    let _: () = s
        .raw
        .zadd("asynq:{q}:retry", "str1", 4_102_444_800_i64)
        .await
        .unwrap();
    let a = http::page(&s.app, "/queues/q/retry?id=str1", false).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    assert!(a.body.contains("Task str1 exists but cannot be read."));
    assert_eq!(row_ids(&a.body), ["str1"]);
    assert!(a.body.contains("<tr class=\"corrupt\" data-id=\"str1\">"));
    assert!(
        a.body.contains(
            "Cannot read this task: corrupt data in Redis at asynq:{q}:t:str1: the task key is a string, not a hash</td>"
        ),
        "{}",
        a.body
    );
}

/// Issue 4 item 6: a task whose msg does not decode is an error row with
/// its id and the decode error (the rest of the tab renders); its task page
/// says so and can delete it.
#[tokio::test]
async fn corrupt_task_is_an_error_row() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed::message(
        &mut s.raw,
        &seed::msg("q", "ok1", "t", b"fine"),
        "pending",
        0,
    )
    .await;
    seed::put(
        &mut s.raw,
        "q",
        "bad1",
        vec![0xff, 0xff, 0xff],
        "pending",
        0,
        "",
    )
    .await;
    let a = http::page(&s.app, "/queues/q/pending", false).await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.body.contains("<tr data-id=\"ok1\">"));
    assert!(a.body.contains("<tr class=\"corrupt\" data-id=\"bad1\">"));
    assert!(a.body.contains("<td class=\"mono\">bad1</td>\n  <td colspan=\"3\" class=\"error-text\">Cannot read this task: corrupt data in Redis at asynq:{q}:t:bad1 msg:"));

    let page = http::page(&s.app, "/queues/q/tasks/bad1", false).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains(
            "Task <span class=\"mono\">bad1</span> exists in queue q but cannot be read."
        )
    );
    assert!(
        page.body
            .contains("corrupt data in Redis at asynq:{q}:t:bad1 msg")
    );
    let summary = http::page(&s.app, "/queues/q/pending/summary", false).await;
    assert!(summary.body.contains("1 task(s) cannot be decoded"));
    let a = http::page(&s.app, "/queues/q/pending?id=bad1", false).await;
    assert!(a.body.contains("Task bad1 exists but cannot be read."));
    assert_eq!(row_ids(&a.body), ["bad1"]);
    // A state field no version knows is shown the same way, not as an error page.
    seed::message(&mut s.raw, &seed::msg("q", "odd1", "t", b""), "pending", 0).await;
    let _: () = s
        .raw
        .hset(keys::task_key("q", "odd1"), "state", "hibernating")
        .await
        .unwrap();
    let page = http::page(&s.app, "/queues/q/tasks/odd1", false).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("exists in queue q but cannot be read."));
    let a = s.post("/queues/q/tasks/bad1/delete?tab=pending", "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(row_ids(&a.body), ["ok1", "odd1"]);
}

/// Issue 4 item 6: an unknown queue, tab, task or action is a 404 page.
#[tokio::test]
async fn unknown_queue_tab_and_task_are_404() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed::message(&mut s.raw, &seed::msg("q", "p1", "t", b""), "pending", 0).await;
    for uri in [
        "/queues/nope",
        "/queues/nope/retry",
        "/queues/nope/aggregating",
        "/queues/nope/retry?type=x",
        "/queues/nope/retry?id=x",
        "/queues/q/bogus",
        "/queues/q/tasks/missing",
        "/queues/nope/tasks/p1",
        "/queues/q/tasks/missing/payload",
        "/queues/q/tasks/p1/result",
    ] {
        let a = http::page(&s.app, uri, false).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{uri}");
        assert!(a.body.contains("<h1>404 Not Found</h1>"), "{uri}");
    }
}

/// Filters by type, payload substring and LastErr group scan the tab
/// (bounded) and say how much they scanned; a filter by id is one lookup
/// that says where the task is; the summary counts tasks per type.
#[tokio::test]
async fn filters_and_type_counts() {
    let db = support::redis();
    let mut s = setup(&db).await;
    let tasks = [
        (
            "r1",
            "email:send",
            r#"{"to":"ann"}"#,
            "dial tcp 10.0.0.1:25: timeout",
        ),
        (
            "r2",
            "email:send",
            r#"{"to":"bob"}"#,
            "dial tcp 10.0.0.2:25: timeout",
        ),
        ("r3", "email:send", r#"{"to":"needle"}"#, "template missing"),
        ("r4", "sms:send", r#"{"to":"needle"}"#, "quota exceeded"),
        ("r5", "sms:send", r#"{"to":"eve"}"#, "quota exceeded"),
    ];
    for (i, (id, ty, payload, err)) in tasks.iter().enumerate() {
        let m = TaskMessage {
            r#type: ty.to_string(),
            payload: payload.as_bytes().to_vec(),
            ..retry_msg("q", id, err, 2)
        };
        seed::message(&mut s.raw, &m, "retry", secs(100 + i as i64)).await;
    }
    seed::message(
        &mut s.raw,
        &seed::msg("q", "p1", "email:send", b""),
        "pending",
        0,
    )
    .await;
    let app = &s.app;

    let a = http::page(app, "/queues/q/retry?type=email%3Asend", false).await;
    assert_eq!(row_ids(&a.body), ["r1", "r2", "r3"]);
    assert!(a.body.contains(
        "<p class=\"meta scan-note\">3 matching · scanned 5 of 5 tasks in this tab.</p>"
    ));
    assert!(a.body.contains("<span class=\"total\">1–3 of 3</span>"));
    // The filter form keeps the value; the matching actions appear.
    assert!(
        a.body
            .contains("name=\"type\" list=\"task-types\" value=\"email:send\"")
    );
    assert!(a.body.contains(
        "href=\"/queues/q/retry/matching/run?page=1&#38;size=20&#38;type=email%3Asend\""
    ));
    // "All" buttons would ignore the filter: a filtered view offers "matching" only.
    assert!(!a.body.contains("/queues/q/retry/all/"));

    let a = http::page(app, "/queues/q/retry?q=needle", false).await;
    assert_eq!(row_ids(&a.body), ["r3", "r4"]);
    let a = http::page(app, "/queues/q/retry?q=needle&type=sms%3Asend", false).await;
    assert_eq!(row_ids(&a.body), ["r4"]);
    let a = http::page(app, "/queues/q/retry?type=none", false).await;
    assert!(row_ids(&a.body).is_empty());
    assert!(a.body.contains("No retry tasks match the filter."));
    let a = http::page(
        app,
        "/queues/q/retry?type=email%3Asend&size=20&page=2",
        false,
    )
    .await;
    assert!(row_ids(&a.body).is_empty());
    assert!(a.body.contains("Page 2 is past the end"));

    let a = http::page(app, "/queues/q/retry?id=r2", false).await;
    assert_eq!(row_ids(&a.body), ["r2"]);
    assert!(a.body.contains("Task r2 is in this tab."));
    let a = http::page(app, "/queues/q/retry?id=p1", false).await;
    assert!(row_ids(&a.body).is_empty());
    assert!(a.body.contains("Task p1 not found in this tab: it is pending. <a href=\"/queues/q/tasks/p1\">Open the task</a>"));
    let a = http::page(app, "/queues/q/retry?id=zzz", false).await;
    assert!(
        a.body
            .contains("Task zzz not found in this tab (nor in queue q).")
    );

    // LastErr group: r1 and r2 differ only in the address.
    let summary = http::page(app, "/queues/q/retry/summary", false).await;
    assert_eq!(summary.status, StatusCode::OK);
    assert!(summary.body.contains("Counted over 5 of 5 tasks: counts and error groups look at the first 5000 tasks of a tab only."));
    assert!(
        summary
            .body
            .contains("data-type-count=\"email:send\">3</td>")
    );
    assert!(summary.body.contains("data-type-count=\"sms:send\">2</td>"));
    assert!(
        summary
            .body
            .contains("<code>dial tcp &#60;ip&#62;:&#60;n&#62;: timeout</code>")
    );
    let gid = summary
        .body
        .split("<tr data-group=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    assert!(
        summary
            .body
            .contains(&format!("data-group-count=\"{gid}\">2</td>"))
    );
    let a = http::page(app, &format!("/queues/q/retry?err={gid}"), false).await;
    assert_eq!(row_ids(&a.body), ["r1", "r2"]);
    assert!(
        a.body
            .contains("2 matching · scanned 5 of 5 tasks in this tab.")
    );

    // The pending tab's summary has type counts and no error groups.
    let summary = http::page(app, "/queues/q/pending/summary", false).await;
    assert!(
        summary
            .body
            .contains("data-type-count=\"email:send\">1</td>")
    );
    assert!(!summary.body.contains("LastErr group"));

    // Acting on what a filter matches.
    assert_eq!(
        run_job(&s, "/queues/q/retry/matching/archive?type=sms%3Asend", "").await,
        2
    );
    assert_eq!(
        state_of(&s.insp, "q", "r4").await,
        Some(TaskState::Archived)
    );
    assert_eq!(
        state_of(&s.insp, "q", "r5").await,
        Some(TaskState::Archived)
    );
    assert_eq!(state_of(&s.insp, "q", "r1").await, Some(TaskState::Retry));
}

/// The scan behind filters stops at 5,000 tasks and the page says that it
/// did ("scanned 5000 of 5001").
#[tokio::test]
async fn filter_scan_is_bounded() {
    let db = support::redis();
    let mut s = setup(&db).await;
    // asynq:queues has a slot of its own (cluster pass): not in the pipeline.
    let _: () = s.raw.sadd(keys::ALL_QUEUES, "q").await.unwrap();
    let mut pipe = redis::pipe();
    for i in 0..5001 {
        let id = format!("t{i:05}");
        let m = seed::msg("q", &id, if i == 5000 { "late" } else { "early" }, b"");
        pipe.hset_multiple(
            keys::task_key("q", &id),
            &[("msg", m.encode_to_vec()), ("state", b"pending".to_vec())],
        )
        .ignore();
        pipe.lpush(keys::pending_key("q"), &id).ignore();
    }
    let _: () = pipe.query_async(&mut s.raw).await.unwrap();
    let a = http::page(&s.app, "/queues/q/pending?type=late", false).await;
    assert!(row_ids(&a.body).is_empty());
    assert!(a.body.contains("0 matching · scanned 5000 of 5001 tasks in this tab. Filters look at the first 5000 tasks of a tab only: later tasks are not searched."));
    let a = http::page(
        &s.app,
        "/queues/q/pending?type=early&size=100&page=50",
        false,
    )
    .await;
    assert_eq!(row_ids(&a.body).len(), 100);
    assert!(
        a.body
            .contains("<span class=\"total\">4901–5000 of 5000</span>")
    );
}

/// S14: forty tasks with one normalised error form one group with an
/// "external outage" reading, and the group can be run in bulk; forty
/// different errors form forty groups read as a bug in the handlers.
#[tokio::test]
async fn lasterr_groups_outage_vs_bugs() {
    let db = support::redis();
    let mut s = setup(&db).await;
    for i in 0..40 {
        let err = format!(
            "dial tcp 10.1.{}.{}:5432: connect: connection refused",
            i / 10,
            i % 10 + 1
        );
        seed::message(
            &mut s.raw,
            &retry_msg("out", &format!("o{i:02}"), &err, 1),
            "retry",
            secs(100 + i),
        )
        .await;
        let words = ["alpha", "bravo", "charlie", "delta", "echo"];
        let bug = format!(
            "field {} of {} invalid",
            words[i as usize % 5],
            words[i as usize / 5 % 5].repeat(i as usize / 5 + 1)
        );
        seed::message(
            &mut s.raw,
            &retry_msg("bug", &format!("b{i:02}"), &bug, 1),
            "retry",
            secs(100 + i),
        )
        .await;
    }
    let out = http::page(&s.app, "/queues/out/retry/summary", false).await;
    assert_eq!(count(&out.body, "<tr data-group="), 1);
    assert!(
        out.body.contains(
            "<code>dial tcp &#60;ip&#62;:&#60;n&#62;: connect: connection refused</code>"
        )
    );
    assert!(
        out.body.contains(
            "<pre class=\"err\">dial tcp 10.1.0.1:5432: connect: connection refused</pre>"
        )
    );
    assert!(out.body.contains(
        "One error accounts for 40 of 40 tasks: most likely an external service is down"
    ));
    let gid = out
        .body
        .split("<tr data-group=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    assert!(out.body.contains(&format!(
        "data-bulk=\"group-run\" href=\"/queues/out/retry/matching/run?type=email%3Asend&#38;err={gid}\""
    )));
    assert!(
        out.body
            .contains("(a background job; you confirm the count first)\">Run 40</a>")
    );

    // 40 invalid orders archived with SkipRetry: one normalised error, but
    // permanent, so the verdict points at data/code, not at an outage.
    for i in 0..40 {
        let err = format!("order {i} invalid: missing field \"sku\": skip retry for the task");
        seed::message(
            &mut s.raw,
            &retry_msg("orders", &format!("p{i:02}"), &err, 1),
            "archived",
            secs(100 + i),
        )
        .await;
    }
    let perm = http::page(&s.app, "/queues/orders/archived/summary", false).await;
    assert_eq!(count(&perm.body, "<tr data-group="), 1);
    assert!(perm.body.contains(
        "One permanent error accounts for 40 of 40 tasks: one cause in the input data or the handler code, not an outage"
    ), "{}", perm.body);

    let bug = http::page(&s.app, "/queues/bug/retry/summary", false).await;
    assert_eq!(count(&bug.body, "<tr data-group="), 40);
    assert!(bug.body.contains(
        "40 different errors across 40 tasks: this points at a bug in the task handlers"
    ));

    // Run the whole group (what the group's Run button posts).
    assert_eq!(
        run_job(
            &s,
            "/queues/out/retry/matching/run?page=1&size=20",
            &format!("err={gid}"),
        )
        .await,
        40
    );
    let info = s.insp.queue_info("out").await.unwrap();
    assert_eq!((info.retry, info.pending), (0, 40));
    // Delete the first bug group's task only.
    let bug_gid = bug
        .body
        .split("<tr data-group=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        run_job(
            &s,
            "/queues/bug/retry/matching/delete",
            &format!("err={bug_gid}"),
        )
        .await,
        1
    );
    assert_eq!(s.insp.queue_info("bug").await.unwrap().retry, 39);
}

/// Issue 4 item 2 (S1, S4): the task page shows every TaskInfo field,
/// headers and group included, the retry facts and the default policy's
/// delay bounds for each remaining retry, and the row's actions.
#[tokio::test]
async fn task_page_fields_and_retry_delays() {
    let db = support::redis();
    let mut s = setup(&db).await;
    let m = TaskMessage {
        retry: 5,
        retried: 2,
        deadline: secs(86_400),
        headers: BTreeMap::from([("trace".to_string(), "abc".to_string())]),
        group_key: "".into(),
        ..retry_msg("q", "r1", "quota exceeded", 2)
    };
    seed::message(&mut s.raw, &m, "retry", secs(250)).await;
    let page = http::page(&s.app, "/queues/q/tasks/r1", false).await;
    assert_eq!(page.status, StatusCode::OK);
    let b = &page.body;
    assert!(b.contains("<dd data-field=\"type\">email:send</dd>"));
    assert!(b.contains("<dd data-field=\"state\"><a href=\"/queues/q/retry\">retry</a></dd>"));
    assert!(b.contains("<dd data-field=\"group\"><span class=\"na\">none</span></dd>"));
    assert!(b.contains("<dd data-field=\"retries\">2 / 5</dd>"));
    assert!(b.contains("<dd data-field=\"last_err\"><pre class=\"err\">quota exceeded</pre></dd>"));
    assert!(b.contains("<dd data-field=\"last_failed\"><time datetime=\"2026-03-10T11:59:10Z\">2026-03-10 11:59:10 UTC</time> <span class=\"rel\">(50s ago)</span></dd>"));
    assert!(b.contains("<dd data-field=\"next\"><time datetime=\"2026-03-10T12:04:10Z\">2026-03-10 12:04:10 UTC</time> <span class=\"rel\">(in 4m 10s)</span></dd>"));
    assert!(b.contains("<dd data-field=\"timeout\">30m 0s</dd>"));
    assert!(b.contains("<dd data-field=\"deadline\"><time datetime=\"2026-03-11T12:00:00Z\">"));
    assert!(b.contains("<dd data-field=\"retention\">none</dd>"));
    assert!(b.contains("<tr><th>trace</th><td>abc</td></tr>"));
    assert!(b.contains("<pre class=\"payload full json\" data-field=\"payload\">{\n  &#34;to&#34;: &#34;a@b.c&#34;\n}</pre>"));
    assert!(b.contains("Retried 2 of 5 times; 3 retries left."));
    // n = 2, 3, 4: n^4 + 15 + r(n+1), r in 0..=29.
    assert!(b.contains("<tr><td class=\"num\">3</td><td class=\"num\">2</td><td>31s – 1m 58s</td><td>31s – 1m 58s</td></tr>"));
    assert!(b.contains("<tr><td class=\"num\">4</td><td class=\"num\">3</td><td>1m 36s – 3m 32s</td><td>2m 7s – 5m 30s</td></tr>"));
    assert!(b.contains("<tr><td class=\"num\">5</td><td class=\"num\">4</td><td>4m 31s – 6m 56s</td><td>6m 38s – 12m 26s</td></tr>"));
    assert_eq!(count(b, "<tr><td class=\"num\">"), 3);
    for op in ["run", "archive", "delete"] {
        assert!(
            b.contains(&format!(
                "data-op=\"{op}\" hx-post=\"/queues/q/tasks/r1/{op}?from=task&#38;tab=retry\""
            )),
            "{op}"
        );
    }
    // The live fragment alone.
    let frag = http::page(&s.app, "/queues/q/tasks/r1", true).await;
    assert!(!frag.body.contains("<html"));
    assert!(frag.body.contains("<section id=\"task-fields\" class=\"live\" hx-get=\"/queues/q/tasks/r1\" hx-trigger=\"every 5s\""));

    // An aggregating task shows its group; a completed one its result.
    let g = TaskMessage {
        group_key: "batch-7".into(),
        ..seed::msg("q", "g1", "t", b"")
    };
    seed::message(&mut s.raw, &g, "aggregating", secs(0)).await;
    let page = http::page(&s.app, "/queues/q/tasks/g1", false).await;
    assert!(page.body.contains("<dd data-field=\"group\">batch-7</dd>"));
    assert!(page.body.contains("<p class=\"na\">empty</p>"));
}

/// Payloads over 64 KiB show their first 64 KiB with a raw download that
/// returns the exact bytes (asynqmon #301 cut them for good).
#[tokio::test]
async fn large_payload_is_cut_with_a_download() {
    let db = support::redis();
    let mut s = setup(&db).await;
    let mut payload = "é".repeat(40_000).into_bytes(); // 80,000 bytes of 2-byte chars
    payload.extend_from_slice(b"tail");
    seed::message(
        &mut s.raw,
        &seed::msg("q", "big", "t", &payload),
        "pending",
        0,
    )
    .await;
    let mut binary: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    binary[0] = 0xff;
    seed::message(
        &mut s.raw,
        &seed::msg("q", "bin", "t", &binary),
        "pending",
        0,
    )
    .await;

    let page = http::page(&s.app, "/queues/q/tasks/big", false).await;
    assert!(page.body.contains("Showing the first 64 KiB of 80004 bytes. <a href=\"/queues/q/tasks/big/payload\" download>Download the raw payload</a>"));
    let shown = page
        .body
        .split("data-field=\"payload\">")
        .nth(1)
        .unwrap()
        .split("</pre>")
        .next()
        .unwrap();
    assert_eq!(shown, "é".repeat(32_768));
    assert!(!page.body.contains("Copy payload"));

    let dl = http::page(&s.app, "/queues/q/tasks/big/payload", false).await;
    assert_eq!(dl.status, StatusCode::OK);
    assert_eq!(dl.bytes, payload);
    assert_eq!(dl.headers["content-type"], "application/octet-stream");
    assert_eq!(
        dl.headers["content-disposition"],
        "attachment; filename=\"big-payload.bin\""
    );

    let dl = http::page(&s.app, "/queues/q/tasks/bin/payload", false).await;
    assert_eq!(dl.bytes, binary);
    let page = http::page(&s.app, "/queues/q/tasks/bin", false).await;
    assert!(
        page.body
            .contains("Showing the first 64 KiB of 70000 bytes.")
    );
    assert!(
        page.body
            .contains("<pre class=\"payload full binary\" data-field=\"payload\">ff 01 02 03")
    );

    // The list preview is cut to max_payload_length characters.
    let tab = http::page(&s.app, "/queues/q/pending", false).await;
    assert!(tab.body.contains(&format!(
        "<pre class=\"payload text\">{}…</pre>",
        "é".repeat(200)
    )));
}

/// A dashboard served under `/asynq` prefixes every link and serves its
/// routes there only.
#[tokio::test]
async fn root_path_prefixes_links_and_routes() {
    let db = support::redis();
    let mut s = setup_with(
        &db,
        WebConfig {
            root_path: "/asynq".into(),
            ..WebConfig::default()
        },
    )
    .await;
    seed::message(&mut s.raw, &retry_msg("q", "r1", "e", 1), "retry", secs(10)).await;
    let a = http::page(&s.app, "/asynq/queues/q/retry", false).await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(
        a.body
            .contains("hx-get=\"/asynq/queues/q/retry?page=1&#38;size=20\"")
    );
    assert!(a.body.contains("href=\"/asynq/queues/q/tasks/r1\""));
    assert!(
        a.body
            .contains("hx-post=\"/asynq/queues/q/tasks/r1/run?tab=retry&#38;page=1&#38;size=20\"")
    );
    assert!(a.body.contains("hx-get=\"/asynq/queues/q/outage\""));
    assert!(
        a.body
            .contains("hx-get=\"/asynq/queues/q/retry/summary?page=1&#38;size=20\"")
    );
    assert!(
        a.body
            .contains("<a href=\"/asynq/queues/q/pending\">Pending")
    );
    assert!(!a.body.contains("\"/queues/"));
    let t = http::page(&s.app, "/asynq/queues/q/tasks/r1", false).await;
    assert_eq!(t.status, StatusCode::OK);
    assert!(!t.body.contains("\"/queues/"));
    assert_eq!(
        http::page(&s.app, "/queues/q/retry", false).await.status,
        StatusCode::NOT_FOUND
    );
    let a = s.post("/asynq/queues/q/tasks/r1/run?tab=retry", "").await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(state_of(&s.insp, "q", "r1").await, Some(TaskState::Pending));
    let a = s
        .post("/asynq/queues/q/tasks/r1/delete?from=task&tab=pending", "")
        .await;
    assert_eq!(a.headers["hx-redirect"], "/asynq/queues/q/pending");
}

/// Issue 4 item 6: when a queue's statistics cannot be read (here a
/// counter that is not an integer) the banner and the tab counts say
/// "n/a" and the task table still renders, with an open-ended pager.
#[tokio::test]
async fn failing_statistics_show_na() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "q", 25, "t").await;
    let _: () = s
        .raw
        .set(keys::processed_total_key("q"), "not a number")
        .await
        .unwrap();
    let a = http::page(&s.app, "/queues/q/pending", false).await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(a.body.contains("<span class=\"na\">Statistics n/a: corrupt data in Redis at asynq:{q}:processed: counter is not an integer: &#34;not a number&#34;</span>"));
    assert_eq!(count(&a.body, "\">n/a</span></a>"), 7);
    assert_eq!(row_ids(&a.body).len(), 20);
    assert!(!a.body.contains("<span class=\"total\">"));
    assert!(
        a.body
            .contains("rel=\"next\" href=\"/queues/q/pending?page=2&#38;size=20\"")
    );
    let p2 = http::page(&s.app, "/queues/q/pending?page=2", false).await;
    assert_eq!(row_ids(&p2.body).len(), 5);
    assert!(!p2.body.contains("rel=\"next\""));
}
