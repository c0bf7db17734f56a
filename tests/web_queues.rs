//! The queues overview page over HTTP against a real Redis: one row per
//! queue with Go's numbers, "n/a" for a queue whose statistics fail, pause /
//! resume / delete actions with CSRF and read-only refusals, escaping, the
//! outage banner from the sampler's series, and statistics computed once per
//! interval whatever the number of viewers (issue 4 items 2–7; S14, S29).

use std::time::Duration;

use asynqdeck::broker::{Broker, keys};
use asynqdeck::web::{AppState, WebConfig};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use redis::AsyncCommands;
use tower::ServiceExt;

use crate::support::http::{self, Dashboard};
use crate::support::{self, TestDb};

struct Setup {
    dash: Dashboard,
    client: Client,
    insp: Inspector,
}

/// The dashboard's router and token (`s.app`, `s.token`) are the shared
/// [`Dashboard`]'s.
impl std::ops::Deref for Setup {
    type Target = Dashboard;

    fn deref(&self) -> &Dashboard {
        &self.dash
    }
}

async fn setup(db: &TestDb, config: WebConfig) -> Setup {
    let broker = Broker::connect(&db.url()).await.unwrap();
    let insp = Inspector::from_broker(broker.clone());
    Setup {
        dash: Dashboard::new(insp.clone(), config),
        client: Client::from_broker(broker),
        insp,
    }
}

/// Each queue gets a row with its counts, linked tabs and a history link;
/// a queue named with HTML is escaped.
#[tokio::test]
async fn queues_page_lists_every_queue_with_counts() {
    let db = support::redis();
    let s = setup(&db, WebConfig::default()).await;
    for i in 0..3u8 {
        s.client
            .enqueue(&Task::new("t", vec![i]), EnqueueOptions::new())
            .await
            .unwrap();
    }
    s.client
        .enqueue(
            &Task::new("t", b"x".to_vec()),
            EnqueueOptions::new()
                .queue("<b>evil</b>")
                .process_in(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let (status, html) = http::get(&s.app, "/").await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains(r#"<a href="/queues/default">default</a>"#),
        "{html}"
    );
    assert!(html.contains(r#"<a href="/queues/default/pending">3</a>"#));
    assert!(html.contains(r#"<a href="/queues/default/history" title="Daily history">0</a>"#));
    assert!(
        html.contains("&#60;b&#62;evil&#60;/b&#62;"),
        "queue name escaped"
    );
    assert!(!html.contains("<b>evil</b>"));
    assert!(
        html.contains("/queues/%3Cb%3Eevil%3C%2Fb%3E/scheduled"),
        "strict URL encoding"
    );
    // The htmx poll gets only the fragment.
    let res = s
        .app
        .clone()
        .oneshot(
            Request::get("/")
                .header("hx-request", "true")
                .body(Body::empty())
                .unwrap(),
        )
        .await
        .unwrap();
    let frag =
        String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert!(
        frag.starts_with(r#"<section id="queues" class="live""#),
        "{frag}"
    );
    assert!(!frag.contains("<html"));
}

/// A queue whose statistics cannot be read shows "n/a", the page is 200
/// and the other queues are intact (asynqmon answered 500).
#[tokio::test]
async fn failing_statistic_shows_na_not_500() {
    let db = support::redis();
    let s = setup(&db, WebConfig::default()).await;
    s.client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    s.client
        .enqueue(
            &Task::new("t", b"1".to_vec()),
            EnqueueOptions::new().queue("broken"),
        )
        .await
        .unwrap();
    let mut raw = db.raw().await;
    // A counter that is not a number makes the stats read fail for that queue.
    let _: () = raw
        .set(keys::processed_total_key("broken"), "not-a-number")
        .await
        .unwrap();
    let (status, html) = http::get(&s.app, "/").await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"class="na""#), "{html}");
    assert!(html.contains(r#"<a href="/queues/default/pending">1</a>"#));
}

/// Pause, resume and delete act through the Inspector and answer with the
/// refreshed table; without the CSRF token they are refused; deleting a
/// non-empty queue needs the force box.
#[tokio::test]
async fn queue_actions_pause_resume_delete() {
    let db = support::redis();
    let s = setup(&db, WebConfig::default()).await;
    s.client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let (status, _) = http::post_form(&s.app, "/queues/default/pause", "", None)
        .await
        .parts();
    assert_eq!(status, StatusCode::FORBIDDEN, "no CSRF token");
    assert!(!s.insp.queue_info("default").await.unwrap().paused);
    let (status, html) = http::post_form(&s.app, "/queues/default/pause", "", Some(&s.token))
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(s.insp.queue_info("default").await.unwrap().paused);
    assert!(
        html.contains(r#"<span class="badge paused">paused</span>"#),
        "{html}"
    );
    let (status, body) = http::post_form(&s.app, "/queues/default/pause", "", Some(&s.token))
        .await
        .parts();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("already paused"), "{body}");
    let (status, _) = http::post_form(&s.app, "/queues/default/resume", "", Some(&s.token))
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(!s.insp.queue_info("default").await.unwrap().paused);
    let (status, body) = http::post_form(&s.app, "/queues/default/delete", "", Some(&s.token))
        .await
        .parts();
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("not empty"), "{body}");
    let (status, _) = http::post_form(&s.app, "/queues/default/delete", "force=on", Some(&s.token))
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    assert!(s.insp.queues().await.unwrap().is_empty());
}

/// Read-only: no action buttons, and POSTs are refused even with the token.
#[tokio::test]
async fn read_only_hides_and_refuses_queue_actions() {
    let db = support::redis();
    let s = setup(
        &db,
        WebConfig {
            read_only: true,
            ..WebConfig::default()
        },
    )
    .await;
    s.client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let (_, html) = http::get(&s.app, "/").await.parts();
    assert!(!html.contains("hx-post"), "{html}");
    assert!(html.contains("read-only"));
    let (status, _) = http::post_form(&s.app, "/queues/default/pause", "", Some(&s.token))
        .await
        .parts();
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(!s.insp.queue_info("default").await.unwrap().paused);
}

/// S14, S29: a fast-growing retry series shows the outage banner and the
/// trend in the retry cell; a flat one does not.
#[tokio::test]
async fn outage_banner_on_fast_retry_growth() {
    let db = support::redis();
    let s = setup(&db, WebConfig::default()).await;
    s.client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    s.client
        .enqueue(
            &Task::new("t", b"1".to_vec()),
            EnqueueOptions::new().queue("calm"),
        )
        .await
        .unwrap();
    let mut raw = db.raw().await;
    let now = chrono::Utc::now().timestamp();
    for (i, retry) in [(240, 10), (120, 40), (0, 90)] {
        let t = now - i;
        let _: () = raw
            .zadd(
                asynqdeck::broker::samples_key("default"),
                format!("{t}:{retry}:0"),
                t,
            )
            .await
            .unwrap();
        let _: () = raw
            .zadd(
                asynqdeck::broker::samples_key("calm"),
                format!("{t}:5:0"),
                t,
            )
            .await
            .unwrap();
    }
    let (_, html) = http::get(&s.app, "/").await.parts();
    assert_eq!(html.matches("outage-banner").count(), 1, "{html}");
    assert!(
        html.contains(
            r#"Retry queue of <a href="/queues/default/retry">default</a> is growing fast"#
        )
    );
    assert!(html.contains(r#"<span class="trend fast" title="Change of the retry set over the last 5 minutes (or since sampling began)">+80 in 4m 0s</span>"#), "{html}");
    assert!(html.contains(r#"<span class="trend" title="Change of the retry set over the last 5 minutes (or since sampling began)">+0 in 4m 0s</span>"#));
}

/// Statistics are computed once per interval slot: ten concurrent viewers
/// cost Redis exactly what one does (one snapshot).
#[tokio::test]
async fn ten_viewers_cost_what_one_does() {
    let db = support::redis();
    let broker = Broker::connect(&db.url()).await.unwrap();
    // A slot of an hour: the test cannot straddle two slots in practice.
    let state = AppState::new(
        Inspector::from_broker(broker.clone()),
        WebConfig {
            poll_interval: Duration::from_secs(3600),
            ..WebConfig::default()
        },
    );
    let app = asynqdeck::web::router(state.clone());
    let client = Client::from_broker(broker);
    for q in ["a", "b", "c"] {
        client
            .enqueue(
                &Task::new("t", b"1".to_vec()),
                EnqueueOptions::new().queue(q),
            )
            .await
            .unwrap();
    }
    let (status, _) = http::get(&app, "/").await.parts();
    assert_eq!(status, StatusCode::OK);
    assert_eq!(state.stats.computations(), 1);
    let views = futures_util::future::join_all(
        (0..10).map(|_| async { http::get(&app, "/").await.parts() }),
    )
    .await;
    assert!(
        views
            .iter()
            .all(|(st, html)| *st == StatusCode::OK && html.contains("/queues/c"))
    );
    assert_eq!(
        state.stats.computations(),
        1,
        "ten more viewers: still one snapshot"
    );
    let _ = http::get(&app, "/api/queues").await.parts();
    assert_eq!(state.stats.computations(), 1, "the API shares it too");
}

fn start_redis(port: u16) -> std::process::Child {
    let child = std::process::Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("redis-server");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// Redis going away gives a clear error (banner on the queues page, 503
/// page elsewhere, 503 from the API) and the pages recover by themselves
/// when Redis is back (issue 4 item 6).
#[tokio::test]
async fn redis_down_then_back() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut redis = start_redis(port);
    let url = format!("redis://127.0.0.1:{port}/0");
    let broker = Broker::connect(&url).await.unwrap();
    Client::from_broker(broker.clone())
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let state = AppState::new(
        Inspector::from_broker(broker),
        WebConfig {
            poll_interval: Duration::from_millis(1),
            ..WebConfig::default()
        },
    );
    let app = asynqdeck::web::router(state);
    let (status, html) = http::get(&app, "/").await.parts();
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("/queues/default"));

    redis.kill().unwrap();
    redis.wait().unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (status, html) = http::get(&app, "/").await.parts();
    assert_eq!(status, StatusCode::OK, "the page itself renders");
    assert!(html.contains("Cannot read queues"), "{html}");
    let (status, html) = http::get(&app, "/queues/default/pending").await.parts();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(html.contains("Redis is not answering"), "{html}");
    let (status, _) = http::get(&app, "/api/queues").await.parts();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);

    // Back on the same port (data gone: no persistence): pages recover.
    let mut redis = start_redis(port);
    let recovered = support::eventually(Duration::from_secs(10), || {
        let app = app.clone();
        async move {
            let (status, html) = http::get(&app, "/").await.parts();
            (status == StatusCode::OK && !html.contains("Cannot read queues")).then_some(html)
        }
    })
    .await;
    assert!(
        recovered.is_some(),
        "queues page recovers when Redis is back"
    );
    let (status, _) = http::get(&app, "/api/queues").await.parts();
    assert_eq!(status, StatusCode::OK);
    redis.kill().unwrap();
    let _ = redis.wait();
}

/// Under `--root-path /asynq` the page answers at `/asynq/` (the URL the
/// binary prints and every "Queues" link uses) and at `/asynq`, its links
/// and live poll carry the prefix, and nothing answers outside it.
#[tokio::test]
async fn root_path_with_and_without_trailing_slash() {
    let db = support::redis();
    let s = setup(
        &db,
        WebConfig {
            root_path: "/asynq".into(),
            ..WebConfig::default()
        },
    )
    .await;
    s.client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    for path in ["/asynq/", "/asynq"] {
        let (status, html) = http::get(&s.app, path).await.parts();
        assert_eq!(status, StatusCode::OK, "{path}");
        assert!(html.contains(r#"hx-get="/asynq/""#), "{html}");
        assert!(html.contains(r#"<a href="/asynq/queues/default">default</a>"#));
    }
    let (status, _) = http::get(&s.app, "/asynq/?x=1").await.parts();
    assert_eq!(status, StatusCode::OK);
    let (status, _) = http::get(&s.app, "/asynq/queues/default/pending")
        .await
        .parts();
    assert_eq!(status, StatusCode::OK);
    let (status, _) = http::get(&s.app, "/").await.parts();
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Data in Redis that cannot be read never gives a 500: an undecodable
/// task's downloads, a daily counter that is not a number, a key of the
/// wrong type all answer 422 with an explanation (issue 4 item 6).
#[tokio::test]
async fn unreadable_data_is_422_not_500() {
    let db = support::redis();
    let s = setup(&db, WebConfig::default()).await;
    let t = s
        .client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    let mut raw = db.raw().await;
    let _: () = raw
        .hset(keys::task_key("default", &t.id), "msg", "garbage")
        .await
        .unwrap();
    for what in ["payload", "result"] {
        let (status, html) = http::get(&s.app, &format!("/queues/default/tasks/{}/{what}", t.id))
            .await
            .parts();
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{what}: {html}");
        assert!(html.contains("could not be read"), "{html}");
    }
    let day = chrono::Utc::now().date_naive();
    let _: () = raw
        .set(keys::processed_key("default", day), "notanumber")
        .await
        .unwrap();
    let (status, _) = http::get(&s.app, "/queues/default/history").await.parts();
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    s.client
        .enqueue(
            &Task::new("t", b"1".to_vec()),
            EnqueueOptions::new().queue("typed"),
        )
        .await
        .unwrap();
    let _: () = raw.del(keys::archived_key("typed")).await.unwrap();
    let _: () = raw
        .set(keys::archived_key("typed"), "a string, not a zset")
        .await
        .unwrap();
    let (status, _) = http::get(&s.app, "/queues/typed/archived").await.parts();
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, html) = http::get(&s.app, "/").await.parts();
    assert_eq!(
        status,
        StatusCode::OK,
        "the overview shows n/a for that queue: {html}"
    );
}

/// One status mapping for the pages' actions and `/api` (issue 13): an
/// unknown queue answers 404 whether the action deletes the queue (the
/// queues page answered 400 before) or acts on a task, as asynqmon does; a
/// queue that is not empty is 400. (Pausing an unknown queue succeeds, as
/// in Go.)
#[tokio::test]
async fn unknown_queue_actions_are_404_on_pages_and_api() {
    let db = support::redis();
    let s = setup(&db, WebConfig::default()).await;
    s.client
        .enqueue(&Task::new("t", b"1".to_vec()), EnqueueOptions::new())
        .await
        .unwrap();
    for path in ["/queues/nope/delete", "/queues/nope/tasks/x1/run?tab=retry"] {
        let r = s.post(path, "").await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.body);
    }
    let r = s.post("/queues/default/delete", "").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    let r = http::call(
        &s.app,
        Method::DELETE,
        "/api/queues/nope",
        &[("x-csrf-token", s.token.as_str())],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{}", r.body);
}
