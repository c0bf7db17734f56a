//! Every route of the dashboard, as requests to send: the pages
//! (`src/web/pages/*.rs`), `/metrics`, `/static`, and the asynqmon API
//! (`src/web/api/mod.rs`), with every tab, collection and action. Used by
//! the chaos suite (Redis down, corrupt data) and the route property tests
//! (`tests/props_routes.rs`).
//!
//! Keep it in step with the routers: a route missing here is a route no
//! chaos or property test covers.

/// The tabs of a queue page (`/queues/{q}/{tab}`).
pub const TABS: [&str; 7] = [
    "active",
    "pending",
    "aggregating",
    "scheduled",
    "retry",
    "archived",
    "completed",
];

/// The actions of the pages (`.../{op}`).
pub const PAGE_OPS: [&str; 4] = ["run", "archive", "delete", "cancel"];

/// The API collections of a queue (`/api/queues/{q}/{collection}`).
pub const COLLECTIONS: [&str; 6] = [
    "active_tasks",
    "pending_tasks",
    "scheduled_tasks",
    "retry_tasks",
    "archived_tasks",
    "completed_tasks",
];

/// The API's verbs on a whole collection (`{collection}:{verb}`).
pub const ALL_VERBS: [&str; 8] = [
    "delete_all",
    "batch_delete",
    "run_all",
    "batch_run",
    "archive_all",
    "batch_archive",
    "cancel_all",
    "batch_cancel",
];

/// The API's verbs on one task (`{id}:{verb}`, POST; DELETE deletes).
pub const ITEM_VERBS: [&str; 3] = ["run", "archive", "cancel"];

/// What the routes are about: a queue, one of its groups, a scheduler
/// entry, and task ids with the tab each is in.
#[derive(Clone, Debug)]
pub struct Subject {
    /// Queue name (used as is in paths: give a path-safe name).
    pub queue: String,
    /// A group of the queue.
    pub group: String,
    /// A scheduler entry id.
    pub entry: String,
    /// `(tab, task id)` pairs.
    pub tasks: Vec<(String, String)>,
}

/// One request: method, path with query, and body.
#[derive(Clone, Debug)]
pub struct RouteReq {
    /// `GET`, `POST` or `DELETE`.
    pub method: &'static str,
    /// Path and query.
    pub uri: String,
    /// Body and its content type, if any.
    pub body: Option<(String, &'static str)>,
}

impl RouteReq {
    fn get(uri: String) -> Self {
        RouteReq {
            method: "GET",
            uri,
            body: None,
        }
    }

    fn form(uri: String, body: &str) -> Self {
        RouteReq {
            method: "POST",
            uri,
            body: Some((body.to_string(), "application/x-www-form-urlencoded")),
        }
    }

    fn json(method: &'static str, uri: String, body: Option<String>) -> Self {
        RouteReq {
            method,
            uri,
            body: body.map(|b| (b, "application/json")),
        }
    }
}

/// The API collection of a tab (`None` for aggregating: a group's).
pub fn collection_of(tab: &str) -> Option<String> {
    (tab != "aggregating").then(|| format!("{tab}_tasks"))
}

/// Every GET route: pages, fragments, bulk confirmation pages, job pages,
/// downloads, `/metrics`, `/static`, API.
pub fn reads(s: &Subject) -> Vec<String> {
    let q = &s.queue;
    let mut out: Vec<String> = [
        "/",
        "/servers",
        "/schedulers",
        "/redis",
        "/alerts",
        "/metrics",
        "/static/app.css",
    ]
    .iter()
    .map(|p| p.to_string())
    .collect();
    out.push(format!("/schedulers/{}/events", s.entry));
    out.push(format!("/queues/{q}"));
    out.push(format!("/queues/{q}/history"));
    out.push(format!("/queues/{q}/outage"));
    for tab in TABS {
        out.push(format!("/queues/{q}/{tab}"));
        out.push(format!("/queues/{q}/{tab}/summary"));
        // The tab's export (S31), both formats.
        out.push(format!("/queues/{q}/{tab}/export"));
        out.push(format!("/queues/{q}/{tab}/export?format=csv"));
        // Bulk actions' confirmation pages (the preview count of a job).
        for op in PAGE_OPS {
            out.push(format!("/queues/{q}/{tab}/all/{op}"));
            out.push(format!("/queues/{q}/{tab}/matching/{op}?err=boom"));
        }
    }
    out.push("/jobs".to_string());
    out.push("/jobs/no-such-job".to_string());
    // Search across queues: the whole scope, and one queue's tasks.
    out.push("/search?q=".to_string());
    out.push(format!("/search?q=queue%3A{q}+retried%3E0"));
    out.push("/api/search".to_string());
    out.push(format!("/api/search?queue={q}&error=x"));
    for (_, id) in &s.tasks {
        out.push(format!("/queues/{q}/tasks/{id}"));
        out.push(format!("/queues/{q}/tasks/{id}/payload"));
        out.push(format!("/queues/{q}/tasks/{id}/result"));
    }
    for p in [
        "/api/queues",
        "/api/queue_stats",
        "/api/servers",
        "/api/scheduler_entries",
        "/api/redis_info",
        "/api/jobs",
        "/api/jobs/no-such-job",
    ] {
        out.push(p.to_string());
    }
    out.push(format!(
        "/api/jobs:preview?queue={q}&state=retry&action=run&err=boom"
    ));
    out.push(format!("/api/queues/{q}"));
    out.push(format!("/api/queues/{q}/groups"));
    out.push(format!("/api/scheduler_entries/{}/enqueue_events", s.entry));
    for c in COLLECTIONS {
        out.push(format!("/api/queues/{q}/{c}"));
    }
    out.push(format!(
        "/api/queues/{q}/groups/{}/aggregating_tasks",
        s.group
    ));
    for (tab, id) in &s.tasks {
        match collection_of(tab) {
            Some(c) => out.push(format!("/api/queues/{q}/{c}/{id}")),
            None => out.push(format!(
                "/api/queues/{q}/groups/{}/aggregating_tasks/{id}",
                s.group
            )),
        }
    }
    out
}

/// Every mutating route (pages with a form body, API with JSON), each
/// action on each task of the subject, in an order that ends with the
/// queue's deletion. Destructive: run them last.
pub fn writes(s: &Subject) -> Vec<RouteReq> {
    let q = &s.queue;
    let ids: Vec<&String> = s.tasks.iter().map(|(_, id)| id).collect();
    let form_ids: String = ids
        .iter()
        .map(|id| format!("ids={id}"))
        .collect::<Vec<_>>()
        .join("&");
    let json_ids = serde_json::json!({ "task_ids": ids }).to_string();
    let mut out = vec![
        RouteReq::form(format!("/queues/{q}/pause"), ""),
        RouteReq::form(format!("/queues/{q}/resume"), ""),
        RouteReq::json("POST", format!("/api/queues/{q}:pause"), None),
        RouteReq::json("POST", format!("/api/queues/{q}:resume"), None),
    ];
    for (tab, id) in &s.tasks {
        for op in PAGE_OPS {
            out.push(RouteReq::form(
                format!("/queues/{q}/tasks/{id}/{op}?tab={tab}"),
                "",
            ));
        }
        let item = match collection_of(tab) {
            Some(c) => format!("/api/queues/{q}/{c}/{id}"),
            None => format!("/api/queues/{q}/groups/{}/aggregating_tasks/{id}", s.group),
        };
        for verb in ITEM_VERBS {
            out.push(RouteReq::json("POST", format!("{item}:{verb}"), None));
        }
        out.push(RouteReq::json("DELETE", item, None));
    }
    for tab in TABS {
        for op in PAGE_OPS {
            out.push(RouteReq::form(
                format!("/queues/{q}/{tab}/batch/{op}"),
                &form_ids,
            ));
            out.push(RouteReq::form(
                format!("/queues/{q}/{tab}/matching/{op}"),
                "err=boom",
            ));
            out.push(RouteReq::form(format!("/queues/{q}/{tab}/all/{op}"), ""));
        }
    }
    let mut collections: Vec<String> = COLLECTIONS
        .iter()
        .map(|c| format!("/api/queues/{q}/{c}"))
        .collect();
    collections.push(format!(
        "/api/queues/{q}/groups/{}/aggregating_tasks",
        s.group
    ));
    for c in &collections {
        for verb in ALL_VERBS {
            let body = verb.starts_with("batch_").then(|| json_ids.clone());
            out.push(RouteReq::json("POST", format!("{c}:{verb}"), body));
        }
    }
    out.push(RouteReq::form("/jobs/no-such-job/cancel".to_string(), ""));
    // No webhook configured in these tests: 422, nothing sent.
    out.push(RouteReq::form("/alerts/test".to_string(), ""));
    out.push(RouteReq::form(format!("/schedulers/{}/run", s.entry), ""));
    for (state, action) in [
        ("pending", "delete"),
        ("retry", "run"),
        ("active", "cancel"),
    ] {
        let body = serde_json::json!({ "queue": q, "state": state, "action": action });
        out.push(RouteReq::json(
            "POST",
            "/api/jobs".to_string(),
            Some(body.to_string()),
        ));
    }
    out.push(RouteReq::json(
        "POST",
        "/api/jobs/no-such-job:cancel".to_string(),
        None,
    ));
    out.push(RouteReq::form(format!("/queues/{q}/delete"), ""));
    out.push(RouteReq::form(format!("/queues/{q}/delete"), "force=on"));
    out.push(RouteReq::json("DELETE", format!("/api/queues/{q}"), None));
    out.push(RouteReq::json(
        "DELETE",
        format!("/api/queues/{q}?force=true"),
        None,
    ));
    out
}

/// Sends `req` to `app` in-process (`tower::ServiceExt::oneshot`), with
/// the CSRF token the pages' mutations need and no `Origin` (as curl or
/// a script); returns the status and the body as text.
pub async fn send(
    app: &axum::Router,
    req: &RouteReq,
    csrf: &str,
) -> (axum::http::StatusCode, String) {
    use tower::ServiceExt;
    let mut b = axum::http::Request::builder()
        .method(req.method)
        .uri(&req.uri)
        .header("x-csrf-token", csrf);
    let body = match &req.body {
        Some((text, ctype)) => {
            b = b.header("content-type", *ctype);
            axum::body::Body::from(text.clone())
        }
        None => axum::body::Body::empty(),
    };
    let request = match b.body(body) {
        Ok(r) => r,
        Err(e) => panic!("bad request {} {}: {e}", req.method, req.uri),
    };
    let resp = app.clone().oneshot(request).await.unwrap();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

/// A GET [`RouteReq`] for `uri`.
pub fn get(uri: impl Into<String>) -> RouteReq {
    RouteReq::get(uri.into())
}
