//! `/audit`: the audit log (issue 17 item 5), newest first, filtered by
//! actor, verb or queue, 100 entries a page with an "Older" link. The
//! entries are written by the audit layer (`web/audit.rs`).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::Layout;
use crate::inspector::{AuditEntry, AuditFilter};
use crate::web::AppState;
use crate::web::error::PageError;
use crate::web::format;
use crate::web::urls::filters;

/// Entries per page.
const PAGE: usize = 100;

/// The filters and the page start, from the query string.
#[derive(Debug, Default, Deserialize)]
pub struct AuditQuery {
    pub actor: Option<String>,
    pub verb: Option<String>,
    pub queue: Option<String>,
    /// Stream id the page starts at.
    pub from: Option<String>,
}

impl AuditQuery {
    /// The inspector's filter (blank fields unset).
    pub fn filter(&self) -> AuditFilter {
        let f = |v: &Option<String>| {
            v.as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_string)
        };
        AuditFilter {
            actor: f(&self.actor),
            verb: f(&self.verb),
            queue: f(&self.queue),
        }
    }
}

/// One row, formatted.
pub struct Row {
    pub at: String,
    pub entry: AuditEntry,
    pub count: String,
    pub ok: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "audit.html")]
struct AuditPageView {
    layout: Layout,
    actor: String,
    verb: String,
    queue: String,
    rows: Vec<Row>,
    scanned: usize,
    /// Query string of the next (older) page, empty at the end.
    older: String,
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/audit", get(view_audit_get))
}

async fn view_audit_get(State(state): State<AppState>, Query(q): Query<AuditQuery>) -> Response {
    let page = match state
        .inspector
        .audit_log(&q.filter(), q.from.as_deref(), PAGE)
        .await
    {
        Ok(p) => p,
        Err(e) => return PageError::from_error(e, &state.config.root_path).into_response(),
    };
    let filter = q.filter();
    let older = page
        .next
        .map(|from| {
            let mut pairs = url_pairs(&filter);
            pairs.push(("from", from));
            pairs
                .iter()
                .map(|(k, v)| format!("{k}={}", crate::web::urls::encode(v)))
                .collect::<Vec<_>>()
                .join("&")
        })
        .unwrap_or_default();
    AuditPageView {
        layout: Layout::new(&state, "Audit log", "audit"),
        actor: filter.actor.clone().unwrap_or_default(),
        verb: filter.verb.clone().unwrap_or_default(),
        queue: filter.queue.clone().unwrap_or_default(),
        rows: page
            .entries
            .into_iter()
            .map(|e| Row {
                at: format::utc(e.at),
                count: e.count.map(|n| n.to_string()).unwrap_or_default(),
                ok: e.result == "ok",
                entry: e,
            })
            .collect(),
        scanned: page.scanned,
        older,
    }
    .into_response()
}

fn url_pairs(f: &AuditFilter) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    for (k, v) in [("actor", &f.actor), ("verb", &f.verb), ("queue", &f.queue)] {
        if let Some(v) = v {
            out.push((k, v.clone()));
        }
    }
    out
}
