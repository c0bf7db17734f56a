//! `GET /api/audit?actor=&verb=&queue=&from=&limit=`: the audit log as
//! JSON (asynqdeck only): `{"entries":[{"id","at","actor","verb","queue",
//! "scope","count","result","status"}],"next":"<stream id>"|null,
//! "scanned":N}`, newest first; `limit` defaults to 100 (at most 500),
//! `next` is the `from` of the older page.

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::ApiError;
use crate::inspector::AuditFilter;
use crate::web::AppState;

#[derive(Debug, Default, Deserialize)]
pub struct AuditQuery {
    actor: Option<String>,
    verb: Option<String>,
    queue: Option<String>,
    from: Option<String>,
    limit: Option<usize>,
}

pub async fn audit(State(state): State<AppState>, Query(q): Query<AuditQuery>) -> Response {
    let f = |v: Option<String>| v.map(|s| s.trim().to_string()).filter(|s| !s.is_empty());
    let filter = AuditFilter {
        actor: f(q.actor),
        verb: f(q.verb),
        queue: f(q.queue),
    };
    match state
        .inspector
        .audit_log(&filter, q.from.as_deref(), q.limit.unwrap_or(100))
        .await
    {
        Ok(page) => Json(page).into_response(),
        Err(e) => ApiError::from(e).into_response(),
    }
}
