//! Bulk actions as background jobs, seen from the pages (issue 15 target
//! 4): a tab's "all" and "matching" actions open a confirmation page with
//! the preview count; Confirm (a POST with the CSRF token, refused in
//! read-only mode) starts the job and sends the person to its page; the
//! job page shows its phase, progress and report (ids escaped, linked to
//! their task pages); `/jobs` lists the jobs; an unknown job is a 404 page.
//! Against a real Redis; jobs run in the dashboard's process as
//! `asynqdeck serve` runs them ([`Inspector::start_job`]).

use asynqdeck::broker::{Broker, keys};
use asynqdeck::inspector::jobs::{JobPhase, JobSpec};
use asynqdeck::inspector::{TabFilter, TaskAction};
use asynqdeck::web::WebConfig;
use asynqdeck::{Error, Inspector, TaskState};
use axum::http::{Method, StatusCode};
use prost::Message;
use redis::AsyncCommands;

use crate::support::http::{self, Dashboard};
use crate::support::jobs::{finished, started_id};
use crate::support::redis::RawConn;
use crate::support::seed;
use crate::support::{self, TestDb};

struct Setup {
    dash: Dashboard,
    insp: Inspector,
    raw: RawConn,
}

impl std::ops::Deref for Setup {
    type Target = Dashboard;

    fn deref(&self) -> &Dashboard {
        &self.dash
    }
}

async fn setup_with(db: &TestDb, config: WebConfig) -> Setup {
    let broker = Broker::connect(&db.url()).await.unwrap();
    let insp = Inspector::from_broker(broker);
    Setup {
        dash: Dashboard::new(insp.clone(), config),
        insp,
        raw: db.raw().await,
    }
}

async fn setup(db: &TestDb) -> Setup {
    setup_with(db, WebConfig::default()).await
}

/// `n` pending tasks `t00000`… in queue `q` in one pipeline; task `i` has
/// type `type_of(i)`.
async fn seed_pending(
    raw: &mut RawConn,
    q: &str,
    n: usize,
    type_of: impl Fn(usize) -> &'static str,
) {
    // asynq:queues has a slot of its own (cluster pass): not in the pipeline.
    let _: () = raw.sadd(keys::ALL_QUEUES, q).await.unwrap();
    let mut pipe = redis::pipe();
    for i in 0..n {
        let id = format!("t{i:05}");
        let m = seed::msg(q, &id, type_of(i), b"{}");
        pipe.hset_multiple(
            keys::task_key(q, &id),
            &[("msg", m.encode_to_vec()), ("state", b"pending".to_vec())],
        )
        .ignore();
        pipe.lpush(keys::pending_key(q), &id).ignore();
    }
    let _: () = pipe.query_async(raw).await.unwrap();
}

async fn pending(insp: &Inspector, q: &str) -> i64 {
    insp.queue_info(q).await.unwrap().pending
}

fn count(hay: &str, needle: &str) -> usize {
    hay.matches(needle).count()
}

/// "Delete all" on a tab of 1,500 pending tasks links to the confirmation
/// page, which shows the exact count and starts nothing; Confirm starts a
/// job and redirects to its page (`HX-Redirect` for htmx, 303 otherwise);
/// the job deletes every task and its page and `/jobs` show it done.
#[tokio::test]
async fn preview_shows_the_exact_count_and_confirm_starts_a_job() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "q", 1_500, |_| "t").await;

    let tab = http::get(&s.app, "/queues/q/pending").await;
    assert!(
        tab.body.contains(
            "data-bulk=\"all-delete\" href=\"/queues/q/pending/all/delete?page=1&#38;size=20\""
        ),
        "{}",
        tab.body
    );
    assert_eq!(count(&tab.body, "/all/"), 2, "Archive all and Delete all");

    let confirm = http::get(&s.app, "/queues/q/pending/all/delete?page=1&size=20").await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains(
        "<p class=\"preview-count\">This will delete 1,500 pending tasks of queue q.</p>"
    ));
    assert!(confirm.body.contains(
        "hx-post=\"/queues/q/pending/all/delete?confirmed=1500\" hx-swap=\"none\">Confirm: Delete 1,500 tasks</button>"
    ));
    assert!(confirm.body.contains(
        "<a class=\"btn\" href=\"/queues/q/pending?page=1&#38;size=20\">Back to the tab</a>"
    ));
    // Looking is not doing.
    assert!(s.insp.jobs(10).await.unwrap().is_empty());
    assert_eq!(pending(&s.insp, "q").await, 1_500);

    let started = s.post("/queues/q/pending/all/delete", "").await;
    assert_eq!(started.status, StatusCode::OK, "{}", started.body);
    let id = started_id(&started);
    assert_eq!(
        started.header("hx-redirect"),
        Some(format!("/jobs/{id}").as_str())
    );
    let job = finished(&s.insp, &id).await;
    assert_eq!(job.phase, JobPhase::Done);
    assert_eq!(
        (job.total, job.done, job.skipped, job.failed),
        (1_500, 1_500, 0, 0)
    );
    assert_eq!(job.spec.queue, "q");
    assert_eq!(job.spec.state, TaskState::Pending);
    assert_eq!(job.spec.action, TaskAction::Delete);
    assert!(job.spec.filter.is_none());
    assert_eq!(pending(&s.insp, "q").await, 0);

    let page = http::get(&s.app, &format!("/jobs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body
            .contains("<h1>Delete all pending tasks of queue q</h1>")
    );
    assert!(page.body.contains("data-phase=\"done\""));
    assert!(
        page.body
            .contains("<progress class=\"job-bar\" max=\"100\" value=\"100\"")
    );
    assert!(page.body.contains("1,500 of 1,500 tasks handled"));
    assert!(page.body.contains(
        "Delete: <b class=\"done\">1,500</b> done, <b class=\"skipped\">0</b> skipped, <b class=\"failed\">0</b> failed, of 1,500 tasks."
    ));
    assert!(
        !page.body.contains("hx-trigger=\"every 1s\""),
        "finished: no polling"
    );
    assert!(!page.body.contains("/cancel"), "finished: no Cancel");
    assert!(
        page.body
            .contains("href=\"/jobs\" aria-current=\"page\">Jobs</a>")
    );

    let list = http::get(&s.app, "/jobs").await;
    assert_eq!(list.status, StatusCode::OK);
    assert!(list.body.contains(&format!(
        "<a href=\"/jobs/{id}\">Delete all pending tasks of queue q</a>"
    )));
    assert!(
        list.body
            .contains("<span class=\"badge phase done\">done</span>")
    );

    // Without htmx (a script with the token): 303 to the job page.
    seed_pending(&mut s.raw, "q", 3, |_| "t").await;
    let plain = http::as_page(
        &s.app,
        Method::POST,
        "/queues/q/pending/all/archive",
        false,
        Some(&s.token),
        "",
    )
    .await;
    assert_eq!(plain.status, StatusCode::SEE_OTHER, "{}", plain.body);
    let id = started_id(&plain);
    assert_eq!(
        plain.header("location"),
        Some(format!("/jobs/{id}").as_str())
    );
    let job = finished(&s.insp, &id).await;
    assert_eq!((job.phase, job.done), (JobPhase::Done, 3));
    assert_eq!(s.insp.queue_info("q").await.unwrap().archived, 3);
}

/// "Matching" on 6,000 pending tasks, every other one of type `b`: the
/// bounded scan counts 2,500 of its first 5,000, so the preview says
/// "at least 2,500"; the job looks at every task and deletes exactly the
/// 3,000 that match (the others are skipped, counted not listed).
#[tokio::test]
async fn matching_preview_is_approximate_beyond_the_scan_and_the_job_exact() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(
        &mut s.raw,
        "q",
        6_000,
        |i| if i % 2 == 0 { "b" } else { "a" },
    )
    .await;

    let tab = http::get(&s.app, "/queues/q/pending?type=b").await;
    assert!(tab.body.contains(
        "data-bulk=\"matching-delete\" href=\"/queues/q/pending/matching/delete?page=1&#38;size=20&#38;type=b\""
    ));
    assert!(
        !tab.body.contains("/all/"),
        "a filtered view offers matching only"
    );

    let confirm = http::get(&s.app, "/queues/q/pending/matching/delete?type=b").await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains(
        "<p class=\"preview-count\">This will delete at least 2,500 pending tasks of queue q matching type = b: found in the first 5,000 of 6,000; the job looks at every task.</p>"
    ), "{}", confirm.body);
    assert!(confirm.body.contains(
        "hx-post=\"/queues/q/pending/matching/delete?type=b\" hx-swap=\"none\">Confirm: Delete at least 2,500 tasks</button>"
    ));

    let started = s.post("/queues/q/pending/matching/delete?type=b", "").await;
    let id = started_id(&started);
    let job = finished(&s.insp, &id).await;
    assert_eq!(job.phase, JobPhase::Done);
    assert_eq!((job.done, job.skipped, job.failed), (3_000, 3_000, 0));
    assert!(job.skipped_ids.is_empty(), "non-matches are not listed");
    assert_eq!(
        job.spec.filter.as_ref().map(|f| f.task_type.as_str()),
        Some("b")
    );
    assert_eq!(pending(&s.insp, "q").await, 3_000);
    let page = http::get(&s.app, &format!("/jobs/{id}")).await;
    assert!(
        page.body
            .contains("<h1>Delete the pending tasks of queue q matching type = b</h1>")
    );
    assert!(
        page.body
            .contains("<tr><th>Filter</th><td>type = b</td></tr>")
    );

    // Exactly nothing to do: no Confirm button.
    let none = http::get(&s.app, "/queues/q/pending/matching/delete?type=zzz").await;
    assert!(none.body.contains(
        "<p class=\"preview-count\">Nothing to do: there are no pending tasks of queue q matching type = zzz.</p>"
    ), "{}", none.body);
    assert_eq!(count(&none.body, "hx-post"), 0);
}

/// Confirming needs the CSRF token and is refused in read-only mode (which
/// still shows the count, without a Confirm button); nothing starts.
#[tokio::test]
async fn read_only_and_missing_csrf_refuse() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "q", 5, |_| "t").await;
    for uri in [
        "/queues/q/pending/all/delete",
        "/queues/q/pending/matching/delete?type=t",
    ] {
        let a = http::post_form(&s.app, uri, "", None).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{uri}");
        assert_eq!(a.body, "missing or wrong CSRF token");
        let a = http::post_form(&s.app, uri, "", Some("wrong")).await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{uri}");
    }
    let queued = s
        .insp
        .create_job(
            JobSpec {
                queue: "q".into(),
                state: TaskState::Pending,
                group: None,
                action: TaskAction::Delete,
                filter: None,
            },
            None,
        )
        .await
        .unwrap();
    let a = http::post_form(&s.app, &format!("/jobs/{}/cancel", queued.id), "", None).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(
        s.insp.job(&queued.id).await.unwrap().phase,
        JobPhase::Queued
    );

    let ro = setup_with(
        &db,
        WebConfig {
            read_only: true,
            ..WebConfig::default()
        },
    )
    .await;
    let confirm = http::get(&ro.app, "/queues/q/pending/all/delete").await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(
        confirm
            .body
            .contains("This will delete 5 pending tasks of queue q.")
    );
    assert!(
        confirm
            .body
            .contains("read-only mode: actions are disabled")
    );
    assert_eq!(count(&confirm.body, "hx-post"), 0);
    let job_page = http::get(&ro.app, &format!("/jobs/{}", queued.id)).await;
    assert_eq!(job_page.status, StatusCode::OK);
    assert!(!job_page.body.contains("/cancel"), "read-only: no Cancel");
    for uri in [
        "/queues/q/pending/all/delete".to_string(),
        "/queues/q/pending/matching/delete?type=t".to_string(),
        format!("/jobs/{}/cancel", queued.id),
    ] {
        let a = ro.post(&uri, "").await;
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{uri}");
    }
    // Only the job this test created directly exists; the tasks are there.
    let jobs = s.insp.jobs(10).await.unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].phase, JobPhase::Queued);
    assert_eq!(pending(&s.insp, "q").await, 5);
}

/// The job page of a queued job polls every second and offers Cancel; the
/// htmx fragment is the live section alone; Cancel (with the token) stops
/// it and the fragment then shows the cancelled report without polling.
/// (Every phase's rendering is also unit-tested in `web::pages::jobs`.)
#[tokio::test]
async fn job_page_queued_then_cancelled() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "q", 4, |_| "t").await;
    let job = s
        .insp
        .create_job(
            JobSpec {
                queue: "q".into(),
                state: TaskState::Pending,
                group: None,
                action: TaskAction::Archive,
                filter: Some(TabFilter {
                    payload: "{".into(),
                    ..TabFilter::default()
                }),
            },
            None,
        )
        .await
        .unwrap();
    let id = job.id;
    let page = http::get(&s.app, &format!("/jobs/{id}")).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.body.contains(
            "<h1>Archive the pending tasks of queue q matching payload contains &#34;{&#34;</h1>"
        ),
        "{}",
        page.body
    );
    assert!(page.body.contains(&format!(
        "<section id=\"job\" class=\"live job\" data-phase=\"queued\" hx-get=\"/jobs/{id}\" hx-trigger=\"every 1s\" hx-swap=\"outerHTML\">"
    )));
    assert!(
        page.body
            .contains("<span class=\"badge phase queued\">queued</span>")
    );
    assert!(
        page.body
            .contains(&format!("hx-post=\"/jobs/{id}/cancel\""))
    );
    assert!(page.body.contains("0 of 4 tasks handled"));
    assert!(!page.body.contains("<h2>Report</h2>"));

    let fragment = s.hx_get(&format!("/jobs/{id}")).await;
    assert!(
        fragment.body.starts_with("<section id=\"job\""),
        "{}",
        fragment.body
    );
    assert!(!fragment.body.contains("<html"));

    let cancelled = s.post(&format!("/jobs/{id}/cancel"), "").await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.body);
    let toast: serde_json::Value =
        serde_json::from_str(cancelled.header("hx-trigger").unwrap()).unwrap();
    assert_eq!(
        toast["toast"],
        format!("Job {id} had already finished (cancelled).")
    );
    assert!(cancelled.body.contains("data-phase=\"cancelled\""));
    assert!(!cancelled.body.contains("hx-trigger"));
    assert!(cancelled.body.contains("<h2>Report</h2>"));
    assert_eq!(s.insp.job(&id).await.unwrap().phase, JobPhase::Cancelled);
    assert_eq!(
        pending(&s.insp, "q").await,
        4,
        "a cancelled queued job did nothing"
    );
}

/// A task id holding `<script>` that the job skips (its hash is gone) is
/// listed in the report as text, linked to its task page by its encoded id.
#[tokio::test]
async fn report_ids_are_escaped() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "q", 2, |_| "t").await;
    let evil = "<script>alert(1)</script>";
    // A pending entry without its hash: the job skips and lists it.
    let _: () = s.raw.lpush(keys::pending_key("q"), evil).await.unwrap();
    let started = s.post("/queues/q/pending/all/archive", "").await;
    let id = started_id(&started);
    let job = finished(&s.insp, &id).await;
    assert_eq!((job.done, job.skipped), (2, 1));
    assert_eq!(job.skipped_ids, [evil]);
    let page = http::get(&s.app, &format!("/jobs/{id}")).await;
    assert!(!page.body.contains(evil), "{}", page.body);
    assert!(page.body.contains(
        "<a class=\"mono\" href=\"/queues/q/tasks/%3Cscript%3Ealert%281%29%3C%2Fscript%3E\">&#60;script&#62;alert(1)&#60;/script&#62;</a>"
    ), "{}", page.body);
}

/// An unknown job is a 404 page (and a 404 answer to Cancel); a bulk page
/// with an unknown action is 404, one the tab does not allow or the
/// aggregating tab without a group 400.
#[tokio::test]
async fn unknown_job_and_bad_bulk_requests() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "q", 1, |_| "t").await;
    let page = http::get(&s.app, "/jobs/no-such-job").await;
    assert_eq!(page.status, StatusCode::NOT_FOUND);
    assert!(
        page.body.contains("<h1>404 Not Found</h1>"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains(
            &Error::JobNotFound {
                id: "no-such-job".into()
            }
            .to_string()
        )
    );
    let a = s.post("/jobs/no-such-job/cancel", "").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    let a = http::get(&s.app, "/queues/q/pending/all/explode").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    let a = http::get(&s.app, "/queues/q/pending/all/run").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("Run does not apply to pending tasks"));
    let a = http::get(&s.app, "/queues/q/aggregating/all/run").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(a.body.contains("name the group"));
    let a = s.post("/queues/q/aggregating/all/run", "").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert!(s.insp.jobs(10).await.unwrap().is_empty());
}

/// "Cancel all" on the active tab is a job too: the link, the preview of
/// the active tasks, and a job that asks for each cancellation.
#[tokio::test]
async fn cancel_all_on_the_active_tab_is_a_job() {
    let db = support::redis();
    let mut s = setup(&db).await;
    let lease = chrono::Utc::now().timestamp() + 3_600;
    for id in ["a1", "a2"] {
        seed::task(&mut s.raw, "q", id, "active", lease).await;
    }
    let tab = http::get(&s.app, "/queues/q/active").await;
    assert!(
        tab.body.contains(
            "data-bulk=\"all-cancel\" href=\"/queues/q/active/all/cancel?page=1&#38;size=20\""
        ),
        "{}",
        tab.body
    );
    let confirm = http::get(&s.app, "/queues/q/active/all/cancel").await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(
        confirm
            .body
            .contains("<p class=\"preview-count\">This will cancel 2 active tasks of queue q.</p>"),
        "{}",
        confirm.body
    );
    assert!(confirm.body.contains("Confirm: Cancel 2 tasks</button>"));
    let started = s.post("/queues/q/active/all/cancel", "").await;
    let job = finished(&s.insp, &started_id(&started)).await;
    assert_eq!(job.phase, JobPhase::Done);
    assert_eq!((job.total, job.done, job.failed), (2, 2, 0));
    assert_eq!(job.spec.action, TaskAction::Cancel);
}

/// The Confirm button carries the count the person saw (`confirmed=N`):
/// tasks that arrived between the preview and the click are left alone
/// (the review's "Delete 5" that deleted 5,005).
#[tokio::test]
async fn confirm_acts_on_at_most_the_previewed_count() {
    let db = support::redis();
    let mut s = setup(&db).await;
    seed_pending(&mut s.raw, "race", 5, |_| "t").await;
    let confirm = http::get(&s.app, "/queues/race/pending/all/delete").await;
    assert!(
        confirm
            .body
            .contains("hx-post=\"/queues/race/pending/all/delete?confirmed=5\""),
        "{}",
        confirm.body
    );
    // 50 more arrive (ids t00005… are new) before the click.
    let mut pipe = redis::pipe();
    for i in 5..55 {
        let id = format!("t{i:05}");
        let m = seed::msg("race", &id, "t", b"{}");
        pipe.hset_multiple(
            keys::task_key("race", &id),
            &[("msg", m.encode_to_vec()), ("state", b"pending".to_vec())],
        )
        .ignore();
        pipe.lpush(keys::pending_key("race"), &id).ignore();
    }
    let _: () = pipe.query_async(&mut s.raw).await.unwrap();
    let started = s
        .post("/queues/race/pending/all/delete?confirmed=5", "")
        .await;
    let job = finished(&s.insp, &started_id(&started)).await;
    assert_eq!(job.phase, JobPhase::Done);
    assert_eq!((job.total, job.done), (5, 5));
    // The oldest 5 (the ones counted) went; the 50 newer stay.
    let left: Vec<String> = s
        .raw
        .lrange(keys::pending_key("race"), 0, -1)
        .await
        .unwrap();
    assert_eq!(left.len(), 50);
    assert!(left.iter().all(|id| id.as_str() >= "t00005"), "{left:?}");
}
