//! Big task data in lists. A page of big tasks is read in calls of at most
//! 1 MiB. Long LastErr texts (an HTML error page of ~54 KB per task) stay
//! out of the lists: a tab's rows, search results (page and API) and the
//! error signatures show at most 500 (rows) or 1,000 (signature examples)
//! characters and `…`; the task page shows the whole text.

use asynqdeck::Inspector;
use asynqdeck::web::WebConfig;
use axum::http::StatusCode;

use crate::support::http::{self, Dashboard};
use crate::support::seed;
use crate::support::{self, TestDb};

/// `n` retry tasks of queue `long` whose LastErr is the same 54 KB page.
async fn seed_long(db: &TestDb, n: usize) -> String {
    let err = format!(
        "HTTP 502: {}",
        "<html><body>partner gateway error</body></html>".repeat(1_150)
    );
    let mut c = db.raw().await;
    let now = chrono::Utc::now().timestamp();
    for i in 0..n {
        let mut m = seed::msg("long", &format!("t{i:02}"), "hook:send", b"{}");
        m.error_msg = err.clone();
        m.retried = 1;
        m.last_failed_at = now - 60;
        seed::message(&mut c, &m, "retry", now + 3_600).await;
    }
    err
}

fn head(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

#[tokio::test]
async fn lists_cut_long_errors_and_the_task_page_keeps_them() {
    let db = support::redis();
    let err = seed_long(&db, 20).await;
    assert!(err.len() > 54_000);
    let d = Dashboard::new(
        Inspector::connect(&db.url()).await.unwrap(),
        WebConfig {
            poll_interval: std::time::Duration::ZERO,
            ..WebConfig::default()
        },
    );
    let cut_html = http::unescape(&format!("{}…", head(&err, 500)));

    let api = http::get_json(&d.app, "/api/search?queue=long").await;
    let rows = api["tasks"].as_array().unwrap();
    assert_eq!(rows.len(), 20);
    for r in rows {
        assert_eq!(
            r["last_error"].as_str().unwrap(),
            format!("{}…", head(&err, 500))
        );
    }

    let page = http::get(&d.app, "/search?q=queue%3Along").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.len() < 60_000, "{}", page.body.len());
    assert_eq!(http::unescape(&page.body).matches(&cut_html).count(), 20);

    let tab = http::get(&d.app, "/queues/long/retry").await;
    assert_eq!(tab.status, StatusCode::OK);
    assert!(tab.body.len() < 60_000, "{}", tab.body.len());
    assert_eq!(http::unescape(&tab.body).matches(&cut_html).count(), 20);

    let summary = http::page(&d.app, "/queues/long/retry/summary", false).await;
    assert_eq!(summary.status, StatusCode::OK);
    let example = http::unescape(&format!("{}…", head(&err, 1_000)));
    assert!(http::unescape(&summary.body).contains(&example));
    assert!(!http::unescape(&summary.body).contains(&head(&err, 1_001)));

    let task = http::get(&d.app, "/queues/long/tasks/t00").await;
    assert_eq!(task.status, StatusCode::OK);
    assert!(http::unescape(&task.body).contains(&err));
}

/// A page of big tasks is read in calls of at most 1 MiB of task data
/// (`PAGE_READ_BYTES`): 6 retry tasks and 5 pending tasks of 400 KB take
/// 3 calls each (two tasks per call), in page order; 500 small tasks take
/// one call.
#[tokio::test]
async fn a_page_of_big_tasks_is_read_in_bounded_calls() {
    use crate::support::commandstats;
    use asynqdeck::TaskState;
    use asynqdeck::inspector::Page;
    assert_eq!(asynqdeck::broker::PAGE_READ_BYTES, 1024 * 1024);
    let db = support::redis::private_redis();
    let mut c = db.raw().await;
    let now = chrono::Utc::now().timestamp();
    let big = vec![b'x'; 400 * 1024];
    for i in 0..6 {
        let m = seed::msg("big", &format!("r{i}"), "t", &big);
        seed::message(&mut c, &m, "retry", now + 60 + i).await;
    }
    for i in 0..5 {
        let m = seed::msg("big", &format!("p{i}"), "t", &big);
        seed::message(&mut c, &m, "pending", 0).await;
    }
    for i in 0..500 {
        let m = seed::msg("small", &format!("s{i:03}"), "t", b"{}");
        seed::message(&mut c, &m, "scheduled", now + 60 + i).await;
    }
    let insp = Inspector::connect(&db.url()).await.unwrap();
    let page = Page::new(1, 20).unwrap();
    let ids = |rows: Vec<asynqdeck::inspector::TaskRow>| -> Vec<String> {
        rows.iter().map(|r| r.id().to_string()).collect()
    };
    // A first read loads the scripts; count from the second.
    insp.list_tasks("big", TaskState::Retry, page)
        .await
        .unwrap();
    commandstats::reset(&mut c).await;

    let retry = insp
        .list_tasks("big", TaskState::Retry, page)
        .await
        .unwrap();
    assert_eq!(ids(retry), ["r0", "r1", "r2", "r3", "r4", "r5"]);
    assert_eq!(
        commandstats::since_last(&mut c).await.get("evalsha"),
        Some(&3)
    );

    // LPUSHed p0 first: p0 runs next and heads the page.
    let pending = insp
        .list_tasks("big", TaskState::Pending, page)
        .await
        .unwrap();
    assert_eq!(ids(pending), ["p0", "p1", "p2", "p3", "p4"]);
    assert_eq!(
        commandstats::since_last(&mut c).await.get("evalsha"),
        Some(&3)
    );

    let small = insp
        .list_tasks("small", TaskState::Scheduled, Page::new(1, 500).unwrap())
        .await
        .unwrap();
    assert_eq!(small.len(), 500);
    assert_eq!(
        commandstats::since_last(&mut c).await.get("evalsha"),
        Some(&1)
    );
}

/// A filtered job over big tasks reads them in byte-bounded calls and goes
/// on after each short read: of 6 retry tasks of 400 KB, the 3 whose
/// payload matches are deleted and 3 skipped.
#[tokio::test]
async fn a_filtered_job_over_big_tasks_reads_them_all() {
    use asynqdeck::TaskState;
    use asynqdeck::inspector::TabFilter;
    use asynqdeck::inspector::TaskAction;
    use asynqdeck::inspector::jobs::JobSpec;
    let db = support::redis();
    let mut c = db.raw().await;
    let now = chrono::Utc::now().timestamp();
    for i in 0..6u8 {
        let fill = if i % 2 == 0 { b'a' } else { b'b' };
        let m = seed::msg("bigjob", &format!("r{i}"), "t", &vec![fill; 400 * 1024]);
        seed::message(&mut c, &m, "retry", now + 60 + i64::from(i)).await;
    }
    let insp = Inspector::connect(&db.url()).await.unwrap();
    let spec = JobSpec {
        queue: "bigjob".into(),
        state: TaskState::Retry,
        group: None,
        action: TaskAction::Delete,
        filter: Some(TabFilter {
            payload: "aaaa".into(),
            ..TabFilter::default()
        }),
    };
    let job = insp.create_job(spec, None).await.unwrap();
    let job = insp
        .run_job(&job.id, &tokio_util::sync::CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        (job.phase.as_str(), job.done, job.skipped, job.failed),
        ("done", 3, 3, 0)
    );
    for i in 0..6 {
        let there = insp.get_task_info("bigjob", &format!("r{i}")).await.is_ok();
        assert_eq!(there, i % 2 == 1, "r{i}");
    }
}

/// A search step holds at most about 8 MiB of task data
/// (`SEARCH_STEP_BYTES`): over 30 retry tasks of 600 KiB a step reads 14
/// (each read one task, the 1 MiB read budget fitting one), and the
/// cursor resumes without gaps or repeats: 14, 14, 2.
#[tokio::test]
async fn a_search_step_over_big_tasks_is_bounded_in_bytes() {
    assert_eq!(asynqdeck::inspector::SEARCH_STEP_BYTES, 8 * 1024 * 1024);
    let db = support::redis();
    let mut c = db.raw().await;
    let now = chrono::Utc::now().timestamp();
    for i in 0..30 {
        let m = seed::msg("fat", &format!("f{i:02}"), "t", &vec![b'z'; 600 * 1024]);
        seed::message(&mut c, &m, "retry", now + 60 + i).await;
    }
    let d = Dashboard::new(
        Inspector::connect(&db.url()).await.unwrap(),
        WebConfig {
            poll_interval: std::time::Duration::ZERO,
            ..WebConfig::default()
        },
    );
    let (mut ids, mut steps, mut cursor) = (Vec::new(), Vec::new(), None::<String>);
    loop {
        let uri = match &cursor {
            None => "/api/search?queue=fat".to_string(),
            Some(c) => format!("/api/search?queue=fat&cursor={c}"),
        };
        let v = http::get_json(&d.app, &uri).await;
        steps.push(v["scanned_now"].as_u64().unwrap());
        for t in v["tasks"].as_array().unwrap() {
            ids.push(t["id"].as_str().unwrap().to_string());
        }
        match v["cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    assert_eq!(steps, [14, 14, 2]);
    let want: Vec<String> = (0..30).map(|i| format!("f{i:02}")).collect();
    assert_eq!(ids, want);
}

/// A tab's bounded scan (summary, filters, signatures) holds at most about
/// 32 MiB of task data (`SCAN_BYTES`): over 40 retry tasks of 1 MiB the
/// summary counts the first 32 of 40, not all 40 in memory.
#[tokio::test]
async fn a_tab_scan_over_big_tasks_is_bounded_in_bytes() {
    use asynqdeck::TaskState;
    use asynqdeck::inspector::{Page, SCAN_BYTES, TabFilter, TabRequest};
    assert_eq!(SCAN_BYTES, 32 * 1024 * 1024);
    let db = support::redis();
    let mut c = db.raw().await;
    let now = chrono::Utc::now().timestamp();
    for i in 0..40 {
        let m = seed::msg("huge", &format!("h{i:02}"), "t", &vec![b'y'; 1024 * 1024]);
        seed::message(&mut c, &m, "retry", now + 60 + i).await;
    }
    let insp = Inspector::connect(&db.url()).await.unwrap();
    let filter = TabFilter::default();
    let summary = insp
        .tab_summary(&TabRequest {
            queue: "huge",
            state: TaskState::Retry,
            group: None,
            stats: None,
            page: Page::new(1, 20).unwrap(),
            filter: &filter,
        })
        .await
        .unwrap();
    assert_eq!((summary.scanned, summary.total), (32, 32));
    assert_eq!(summary.types, vec![("t".to_string(), 32)]);
}
