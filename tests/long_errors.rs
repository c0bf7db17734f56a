//! Long LastErr texts (an HTML error page of ~54 KB per task) stay out of
//! the lists: a tab's rows, search results (page and API) and the error
//! signatures show at most 500 (rows) or 1,000 (signature examples)
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
