//! The audit log (issue 17 item 5): every mutating request appended with
//! who, what, where, how many and the result, refused ones included; the
//! actor from basic auth or a trusted proxy's header (refused from any
//! other peer); the 10,000-entry cap; `/audit` and `/api/audit`; one JSON
//! line per entry on `asynqdeck serve`'s stdout.

use std::net::SocketAddr;

use asynqdeck::inspector::{AuditEntry, AuditFilter};
use asynqdeck::web::WebConfig;
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, StatusCode};
use base64::Engine;

use crate::support::http::{self, Dashboard, ServeBin};
use crate::support::{self, TestDb};

fn basic(user: &str, pw: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"))
    )
}

/// (actor, verb, queue, scope, count, result, status) of an entry.
type Seen = (String, String, String, String, Option<u64>, String, u16);

fn seen(e: &AuditEntry) -> Seen {
    (
        e.actor.clone(),
        e.verb.clone(),
        e.queue.clone(),
        e.scope.clone(),
        e.count,
        e.result.clone(),
        e.status,
    )
}

fn s(
    actor: &str,
    verb: &str,
    queue: &str,
    scope: &str,
    count: Option<u64>,
    result: &str,
    status: u16,
) -> Seen {
    (
        actor.into(),
        verb.into(),
        queue.into(),
        scope.into(),
        count,
        result.into(),
        status,
    )
}

async fn setup() -> (TestDb, Inspector, Vec<String>) {
    let db = support::redis();
    let client = Client::connect(&db.url()).await.unwrap();
    let mut ids = Vec::new();
    for i in 0..3 {
        let t = client
            .enqueue(
                &Task::new("email", format!("{i}").into_bytes()),
                EnqueueOptions::new().queue("q"),
            )
            .await
            .unwrap();
        ids.push(t.id);
    }
    (
        db.clone(),
        Inspector::connect(&db.url()).await.unwrap(),
        ids,
    )
}

/// A page action with basic auth and the CSRF token.
async fn act(d: &Dashboard, uri: &str, form: &str) -> StatusCode {
    let auth = basic("ops", "pw");
    http::call(
        &d.app,
        Method::POST,
        uri,
        &[
            ("HX-Request", "true"),
            ("content-type", "application/x-www-form-urlencoded"),
            ("X-CSRF-Token", &d.token),
            ("Authorization", &auth),
        ],
        Some(form),
    )
    .await
    .status
}

/// Page actions and `/api` calls, successful and failed, are each one
/// entry with the basic-auth user, the verb, queue and scope read from
/// the route, the task count where known and the result; reads are not
/// audited; `/api/audit` and `/audit` list them newest first and filter.
#[tokio::test]
async fn actions_are_audited_with_who_what_where_and_the_result() {
    let (db, inspector, ids) = setup().await;
    let d = Dashboard::new(
        inspector.clone(),
        WebConfig {
            basic_auth: Some(("ops".into(), "pw".into())),
            poll_interval: std::time::Duration::ZERO,
            ..WebConfig::default()
        },
    );
    let auth = basic("ops", "pw");
    assert_eq!(act(&d, "/queues/q/pause", "").await, StatusCode::OK);
    assert_eq!(
        act(&d, &format!("/queues/q/tasks/{}/delete", ids[0]), "").await,
        StatusCode::OK
    );
    assert_eq!(
        act(
            &d,
            "/queues/q/pending/batch/archive",
            &format!("ids={}&ids={}", ids[1], ids[2])
        )
        .await,
        StatusCode::OK
    );
    let api = http::call(
        &d.app,
        Method::POST,
        "/api/queues/nope:resume",
        &[("Authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(api.status, StatusCode::BAD_REQUEST);
    let api_text = api.text();
    let read = http::call(
        &d.app,
        Method::GET,
        "/queues/q",
        &[("Authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(read.status, StatusCode::OK);

    let page = inspector
        .audit_log(&AuditFilter::default(), None, 100)
        .await
        .unwrap();
    let got: Vec<Seen> = page.entries.iter().map(seen).collect();
    assert_eq!(
        got,
        vec![
            s(
                "ops",
                "resume",
                "nope",
                "",
                None,
                &format!("error: 400 {}", api_text.trim()),
                400
            ),
            s("ops", "archive", "q", "pending/batch", Some(2), "ok", 200),
            s(
                "ops",
                "delete",
                "q",
                &format!("tasks/{}", ids[0]),
                Some(1),
                "ok",
                200
            ),
            s("ops", "pause", "q", "", None, "ok", 200),
        ]
    );
    assert_eq!((page.next, page.scanned), (None, 4));
    assert!(page.entries.windows(2).all(|w| w[0].id > w[1].id));

    let json = http::call(
        &d.app,
        Method::GET,
        "/api/audit?verb=delete",
        &[("Authorization", &auth)],
        None,
    )
    .await
    .json();
    assert_eq!(json["entries"].as_array().unwrap().len(), 1);
    assert_eq!(json["entries"][0]["scope"], format!("tasks/{}", ids[0]));
    assert_eq!(json["entries"][0]["actor"], "ops");
    assert_eq!(json["entries"][0]["count"], 1);
    assert_eq!(json["entries"][0]["id"], page.entries[2].id);
    assert_eq!(json["next"], serde_json::Value::Null);
    assert_eq!(json["scanned"], 4);

    let html = http::call(
        &d.app,
        Method::GET,
        "/audit?queue=q",
        &[("Authorization", &auth)],
        None,
    )
    .await
    .text();
    assert_eq!(html.matches("<tr class=\"audit-entry").count(), 3);
    assert!(
        html.contains("<td class=\"scope\">pending/batch</td>"),
        "{html}"
    );

    // Refused by the guard (read-only mode, no CSRF token, cross-site): not
    // recorded, so a hostile page cannot flush the capped log.
    let ro = Dashboard::new(
        inspector.clone(),
        WebConfig {
            read_only: true,
            ..WebConfig::default()
        },
    );
    let r = http::post_form(&ro.app, "/queues/q/resume", "", Some(&ro.token)).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = http::call(
        &d.app,
        Method::POST,
        "/queues/q/resume",
        &[("HX-Request", "true"), ("Authorization", &auth)],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "no CSRF token");
    let r = http::call(
        &d.app,
        Method::POST,
        "/api/queues/q:resume",
        &[
            ("Authorization", &auth),
            ("Origin", "http://evil.example"),
            ("Sec-Fetch-Site", "cross-site"),
        ],
        None,
    )
    .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let mut conn = db.raw().await;
    let len: usize = redis::cmd("XLEN")
        .arg("asynqdeck:{audit}:log")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(len, 4);
}

/// A request from `peer` with `headers`.
async fn from_peer(
    d: &Dashboard,
    method: Method,
    uri: &str,
    peer: &str,
    headers: &[(&str, &str)],
) -> http::Reply {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let addr: SocketAddr = peer.parse().unwrap();
    let req = req
        .extension(ConnectInfo(addr))
        .body(Body::empty())
        .unwrap();
    http::send(&d.app, req).await
}

/// The proxy's header names the actor only from a trusted peer; from any
/// other peer every request carrying it is refused (and nothing is
/// recorded); without it the actor is `anonymous`. Text from the header
/// is escaped on `/audit`.
#[tokio::test]
async fn the_actor_header_is_believed_only_from_trusted_proxies() {
    let (_db, inspector, _) = setup().await;
    let d = Dashboard::new(
        inspector.clone(),
        WebConfig {
            auth_header: Some("X-Forwarded-User".into()),
            trusted_proxies: "127.0.0.2/32, ::1".parse().unwrap(),
            poll_interval: std::time::Duration::ZERO,
            ..WebConfig::default()
        },
    );
    let r = from_peer(
        &d,
        Method::POST,
        "/api/queues/q:pause",
        "127.0.0.2:4000",
        &[("X-Forwarded-User", "<i>alice</i>")],
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.text());
    for method in [Method::POST, Method::GET] {
        let r = from_peer(
            &d,
            method.clone(),
            "/api/queues/q:resume",
            "127.0.0.3:4000",
            &[("X-Forwarded-User", "mallory")],
        )
        .await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{method}");
        assert_eq!(
            r.text(),
            "the X-Forwarded-User header is accepted only from a trusted proxy"
        );
    }
    let r = from_peer(
        &d,
        Method::POST,
        "/api/queues/q:resume",
        "127.0.0.3:4000",
        &[],
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);

    let page = inspector
        .audit_log(&AuditFilter::default(), None, 10)
        .await
        .unwrap();
    let actors: Vec<(&str, &str)> = page
        .entries
        .iter()
        .map(|e| (e.actor.as_str(), e.verb.as_str()))
        .collect();
    assert_eq!(
        actors,
        vec![
            ("anonymous", "resume"),
            ("untrusted 127.0.0.3: mallory", "resume"),
            ("<i>alice</i>", "pause")
        ]
    );
    assert_eq!(
        (page.entries[1].status, page.entries[1].result.as_str()),
        (
            403,
            "error: 403 the X-Forwarded-User header is accepted only from a trusted proxy"
        )
    );
    let only_alice = inspector
        .audit_log(
            &AuditFilter {
                actor: Some("<i>alice</i>".into()),
                ..AuditFilter::default()
            },
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(only_alice.entries.len(), 1);
    let html = from_peer(&d, Method::GET, "/audit", "127.0.0.3:1", &[])
        .await
        .text();
    assert!(
        html.contains("&#60;i&#62;alice&#60;/i&#62;") || html.contains("&lt;i&gt;alice&lt;/i&gt;"),
        "{html}"
    );
    assert!(!html.contains("<i>alice</i>"));
}

/// The log keeps the newest 10,000 entries; pages of 500 walk it newest
/// first without a gap or a repeat, and the last page says there is no
/// more.
#[tokio::test]
async fn the_log_is_capped_at_10000_and_pages_walk_it() {
    let db = support::redis();
    let inspector = Inspector::connect(&db.url()).await.unwrap();
    for i in 0..10_050u64 {
        let e = AuditEntry {
            id: String::new(),
            at: chrono::Utc::now(),
            actor: "bot".into(),
            verb: if i % 2 == 0 { "run" } else { "delete" }.into(),
            queue: "q".into(),
            scope: format!("tasks/t{i}"),
            count: Some(1),
            result: "ok".into(),
            status: 200,
        };
        inspector.record_audit(&e).await.unwrap();
    }
    let mut conn = db.raw().await;
    let len: usize = redis::cmd("XLEN")
        .arg("asynqdeck:{audit}:log")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(len, 10_000);

    let runs = AuditFilter {
        verb: Some("run".into()),
        ..AuditFilter::default()
    };
    let mut from: Option<String> = None;
    let mut scopes = Vec::new();
    loop {
        let page = inspector
            .audit_log(&runs, from.as_deref(), 500)
            .await
            .unwrap();
        scopes.extend(page.entries.iter().map(|e| e.scope.clone()));
        match page.next {
            Some(n) => from = Some(n),
            None => break,
        }
    }
    // The newest 10,000 are t50..t10049; the runs among them are the even ones.
    let want: Vec<String> = (50..10_050u64)
        .rev()
        .filter(|i| i % 2 == 0)
        .map(|i| format!("tasks/t{i}"))
        .collect();
    assert_eq!(scopes.len(), 5_000);
    assert_eq!(scopes, want);
}

/// `asynqdeck serve` with `--auth-header` and `--trusted-proxies
/// 127.0.0.1`: a request over TCP from loopback carries the actor, and the
/// entry is also one JSON line on stdout.
#[tokio::test]
async fn serve_prints_each_entry_as_a_json_line() {
    let (db, _inspector, _) = setup().await;
    let mut app = ServeBin::start(
        &db.url(),
        &[
            "--listen",
            "127.0.0.1:0",
            "--auth-header",
            "X-User",
            "--trusted-proxies",
            "127.0.0.1",
        ],
        &[],
    )
    .await;
    let addr = app.addr.clone();
    let r = http::request(
        &addr,
        "POST",
        "/api/queues/q:pause",
        &[("Host", &addr), ("X-User", "carol")],
        "",
    )
    .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    let line = loop {
        let line = app.next_line().await.expect("a line");
        if line.starts_with("{\"audit\"") {
            break line;
        }
    };
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    let e = &v["audit"];
    assert_eq!(
        (
            e["actor"].as_str(),
            e["verb"].as_str(),
            e["queue"].as_str(),
            e["result"].as_str(),
            e["status"].as_u64()
        ),
        (
            Some("carol"),
            Some("pause"),
            Some("q"),
            Some("ok"),
            Some(204)
        )
    );
    let stored = Inspector::connect(&db.url())
        .await
        .unwrap()
        .audit_log(&AuditFilter::default(), None, 1)
        .await
        .unwrap();
    assert_eq!(e["id"].as_str(), Some(stored.entries[0].id.as_str()));
    assert_eq!(app.terminate().await, Some(0));
}
