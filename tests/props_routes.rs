//! Property tests of the dashboard's parameters (issue 12): random strings
//! in the query parameters, form fields, JSON bodies and path segments of
//! every route (`support::routes`) never give a 5xx. Requests go through
//! `tower::ServiceExt::oneshot` to `web::router` over a real Redis with a
//! queue holding a task in several states.

use std::time::Duration;

use asynqdeck::web::{AppState, WebConfig, router};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use crate::support::routes::{self, RouteReq, Subject, TABS};

/// What a random parameter value looks like: any text, or one of the
/// values that trip number parsing and paging.
fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => ".{0,24}",
        1 => prop::sample::select(vec![
            "", "0", "-1", "1", "2", "99999999999999999999", "-9223372036854775808",
            "9223372036854775807", "1e9", "NaN", "%", "%zz", "..", "/", "a/b", "?", "&", "=",
            "\u{0}", "\u{feff}", "true", "null", "[]", "{}",
        ])
        .prop_map(str::to_string),
    ]
}

fn enc(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A path segment: percent-encoded except `/`-free printable text.
fn seg(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The query parameter names the routes read (pages' `ViewQuery`,
/// history's `days`, paging of events and the API).
const QUERY_KEYS: [&str; 12] = [
    "page", "size", "group", "type", "id", "q", "err", "status", "tab", "from", "days", "force",
];

/// The queue `default` with a pending, a scheduled and an aggregating
/// task; the app and its CSRF token.
async fn world() -> (axum::Router, String, Subject) {
    let db = crate::support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let t = Task::new("props:t", b"{}".to_vec());
    let opts = || EnqueueOptions::new().queue("default");
    let mut tasks = Vec::new();
    for (tab, o) in [
        ("pending", opts()),
        ("scheduled", opts().process_in(Duration::from_secs(3600))),
        ("aggregating", opts().group("g")),
    ] {
        tasks.push((tab.to_string(), client.enqueue(&t, o).await.unwrap().id));
    }
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    let state = AppState::new(
        inspector,
        WebConfig {
            poll_interval: Duration::ZERO,
            ..WebConfig::default()
        },
    );
    let csrf = state.csrf_token.to_string();
    let subject = Subject {
        queue: "default".into(),
        group: "g".into(),
        entry: "entry-1".into(),
        tasks,
    };
    (router(state), csrf, subject)
}

/// Runs `cases` random requests made by `make` and fails on the first 5xx.
fn check<S: Strategy>(cases: u32, strategy: S, make: impl Fn(S::Value) -> RouteReq) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let (app, csrf, _) = rt.block_on(world());
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&strategy, |v| {
            let req = make(v);
            let (status, body) = rt.block_on(routes::send(&app, &req, &csrf));
            prop_assert!(
                !status.is_server_error(),
                "{} {} {:?} -> {status}: {body}",
                req.method,
                req.uri,
                req.body
            );
            Ok(())
        })
        .unwrap();
}

/// Every route with every query parameter set to random values.
fn with_query(base: &RouteReq, values: &[String]) -> RouteReq {
    let query: Vec<String> = QUERY_KEYS
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{k}={}", enc(v)))
        .collect();
    let sep = if base.uri.contains('?') { '&' } else { '?' };
    RouteReq {
        uri: format!("{}{sep}{}", base.uri, query.join("&")),
        ..base.clone()
    }
}

/// Every route (reads and writes) of a subject whose first task id is
/// the seeded world's shape; the query and body are what the properties vary.
fn every_route() -> Vec<RouteReq> {
    let subject = Subject {
        queue: "default".into(),
        group: "g".into(),
        entry: "entry-1".into(),
        tasks: vec![("pending".into(), "some-id".into())],
    };
    let mut all: Vec<RouteReq> = routes::reads(&subject)
        .into_iter()
        .map(routes::get)
        .collect();
    all.extend(routes::writes(&subject));
    all
}

#[test]
fn random_query_parameters_never_give_5xx() {
    let all = every_route();
    let n = all.len();
    check(
        256,
        (0..n, prop::collection::vec(value(), QUERY_KEYS.len())),
        |(i, values)| with_query(&all[i], &values),
    );
}

#[test]
fn random_form_fields_and_bodies_never_give_5xx() {
    let all: Vec<RouteReq> = every_route()
        .into_iter()
        .filter(|r| r.method != "GET")
        .collect();
    let n = all.len();
    check(
        256,
        (
            0..n,
            prop::collection::vec((value(), value()), 0..4),
            value(),
        ),
        |(i, fields, raw)| {
            let mut req = all[i].clone();
            req.body = Some(match req.body.as_ref().map(|(_, t)| *t) {
                Some("application/json") => {
                    let ids: Vec<&String> = fields.iter().map(|(_, v)| v).collect();
                    // Half valid `{"task_ids": [...]}`, half raw text.
                    if fields.len() % 2 == 0 {
                        (
                            serde_json::json!({ "task_ids": ids }).to_string(),
                            "application/json",
                        )
                    } else {
                        (raw, "application/json")
                    }
                }
                _ => {
                    let mut form: Vec<String> = fields
                        .iter()
                        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
                        .collect();
                    for key in ["ids", "err", "force"] {
                        form.push(format!("{key}={}", enc(&raw)));
                    }
                    (form.join("&"), "application/x-www-form-urlencoded")
                }
            });
            req
        },
    );
}

#[test]
fn random_path_segments_never_give_5xx() {
    let templates: Vec<String> = {
        let mut t = vec![
            "/queues/{q}".to_string(),
            "/queues/{q}/history".into(),
            "/queues/{q}/outage".into(),
            "/queues/{q}/tasks/{id}".into(),
            "/queues/{q}/tasks/{id}/payload".into(),
            "/queues/{q}/tasks/{id}/result".into(),
            "/schedulers/{id}/events".into(),
            "/api/queues/{q}".into(),
            "/api/queues/{q}/groups".into(),
            "/api/queues/{q}/{x}".into(),
            "/api/queues/{q}/{x}/{id}".into(),
            "/api/queues/{q}/groups/{x}/aggregating_tasks".into(),
            "/api/queues/{q}/groups/{x}/aggregating_tasks/{id}".into(),
            "/api/scheduler_entries/{id}/enqueue_events".into(),
            "/static/{x}".into(),
        ];
        for tab in TABS {
            t.push(format!("/queues/{{q}}/{tab}"));
            t.push(format!("/queues/{{q}}/{tab}/summary"));
        }
        t.push("/queues/{q}/{x}".into());
        t.push("/queues/{q}/{x}/summary".into());
        t
    };
    let n = templates.len();
    check(
        256,
        (
            0..n,
            value(),
            value(),
            value(),
            prop::sample::select(vec!["GET", "POST", "DELETE"]),
        ),
        |(i, q, id, x, method)| {
            let uri = templates[i]
                .replace("{q}", &seg(&q))
                .replace("{id}", &seg(&id))
                .replace("{x}", &seg(&x));
            let uri = if uri.contains("//") || uri.ends_with('/') {
                format!("{uri}x")
            } else {
                uri
            };
            RouteReq {
                method,
                uri: uri.replace("//", "/x/"),
                body: None,
            }
        },
    );
}
