//! Defects found by the fresh-clone review of issue 12, each with the test
//! that failed before its fix: forged sweep totals overflowed (a panic that
//! dropped the connection), and a handler panic had no answer at all.

use std::time::Duration;

use asynqdeck::web::{AppState, WebConfig, router, router_with};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use crate::support;

async fn state(url: &str) -> AppState {
    AppState::new(
        Inspector::connect(url).await.unwrap(),
        WebConfig {
            poll_interval: Duration::ZERO,
            ..WebConfig::default()
        },
    )
}

async fn body_text(resp: axum::response::Response) -> String {
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// R12 sweep: the running totals come back from the browser; totals at
/// `u64::MAX` saturate instead of overflowing (before: a panic and an empty
/// reply in debug builds, a wrapped total in release builds).
#[tokio::test]
async fn forged_sweep_totals_saturate_instead_of_panicking() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    client
        .enqueue(&Task::new("t", b"x".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let state = state(&db.url()).await;
    let csrf = state.csrf_token.to_string();
    let app = router(state);
    let max = u64::MAX;
    let resp = app
        .clone()
        .oneshot(
            Request::get(format!(
                "/queues/default/left_behind?cursor=5&scanned={max}&found={max}"
            ))
            .header("hx-request", "true")
            .body(axum::body::Body::empty())
            .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = body_text(resp).await;
    assert!(text.contains(&max.to_string()), "{text}");
    let resp = app
        .oneshot(
            Request::post("/queues/default/left_behind/delete")
                .header("x-csrf-token", &csrf)
                .header("hx-request", "true")
                .header("content-type", "application/x-www-form-urlencoded")
                .body(axum::body::Body::from(format!(
                    "cursor=5&scanned={max}&deleted={max}"
                )))
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let text = body_text(resp).await;
    assert!(text.contains(&max.to_string()), "{text}");
}

/// A handler that panics (a bug) answers 500 with a plain text, behind the
/// same layers as every route, instead of dropping the connection.
#[tokio::test]
async fn a_panicking_handler_answers_500() {
    let db = support::redis();
    let extra = axum::Router::new().route(
        "/boom",
        axum::routing::get(|| async {
            if std::hint::black_box(true) {
                panic!("boom");
            }
            "unreachable"
        }),
    );
    let app = router_with(state(&db.url()).await, extra);
    let resp = app
        .oneshot(
            Request::get("/boom")
                .body(axum::body::Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(
        resp.headers().get("x-content-type-options").unwrap(),
        "nosniff"
    );
    assert_eq!(
        body_text(resp).await,
        "internal error: the dashboard hit a bug (logged)\n"
    );
}

/// R9 on the left-behind page (added by R12 after R9's fix): its links to
/// the queue encode the name as one dashboard segment, so queue `..` is
/// reached (before: `/queues/..`, which browsers resolve to `/`).
#[tokio::test]
async fn left_behind_links_reach_a_dot_dot_queue() {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new().queue(".."),
        )
        .await
        .unwrap();
    let app = router(state(&db.url()).await);
    let get = |uri: String| {
        let app = app.clone();
        async move {
            let resp = app
                .oneshot(Request::get(uri).body(axum::body::Body::empty()).unwrap())
                .await
                .unwrap();
            (resp.status(), body_text(resp).await)
        }
    };
    let (status, page) = get("/queues/..~/left_behind".into()).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.contains(r#"href="/queues/..~""#), "{page}");
    assert!(!page.contains(r#"href="/queues/..""#), "{page}");
    let (status, queue_page) = get("/queues/..~".into()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(queue_page.contains("Queue .."), "{queue_page}");
}
