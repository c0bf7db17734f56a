//! `GET {root}/queues/{q}/{state}/export?format=ndjson|csv` (S31): every
//! task of the tab, with the tab's filters (`group`, `type`, `id`, `q`,
//! `err`) and an optional `since`, as a download streamed chunk by chunk
//! ([`Inspector::export_tasks`](crate::Inspector::export_tasks)); memory
//! stays constant at any size. Rows as [`crate::export`]. A read that
//! fails after the first bytes were sent ends the body with one error
//! line (NDJSON `{"error":"export stopped: …"}`, CSV a row with only the
//! `error` column) instead of a clean end.
//!
//! Errors before any byte: 404 (unknown tab or queue), 400 (unknown
//! format, bad `since`, `since` on pending or active), 503 (Redis down).

use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde::Deserialize;

use super::query::{View, ViewQuery, parse_state};
use super::routes::unknown_tab;
use crate::export::{ExportFormat, parse_since};
use crate::inspector::ExportRequest;
use crate::web::AppState;
use crate::web::error::PageError;

/// The query of an export: the tab's own parameters plus `format`
/// (default `ndjson`) and `since`.
#[derive(Debug, Default, Deserialize)]
pub struct ExportQuery {
    /// `ndjson` (default) or `csv`.
    pub format: Option<String>,
    /// Only tasks whose zset score is at least this time
    /// ([`parse_since`] forms).
    pub since: Option<String>,
    /// The tab's own parameters (`group`, `type`, `id`, `q`, `err`; the
    /// page and size are ignored).
    #[serde(flatten)]
    pub view: ViewQuery,
}

fn bad_request(message: String, root: &str) -> Response {
    PageError {
        status: StatusCode::BAD_REQUEST,
        message,
        root: root.to_string(),
    }
    .into_response()
}

/// The download file name: `<queue>-<state>.<ext>`, the queue reduced to
/// characters safe in a header (others become `_`).
pub fn file_name(queue: &str, state: &str, format: ExportFormat) -> String {
    let safe: String = queue
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{safe}-{state}.{}", format.extension())
}

/// The export handler (see the module docs).
pub async fn export_get(
    State(state): State<AppState>,
    Path((queue, tab)): Path<(String, String)>,
    Query(query): Query<ExportQuery>,
) -> Response {
    let root = state.config.root_path.clone();
    let Some(tab) = parse_state(&tab) else {
        return unknown_tab(&state, &tab).into_response();
    };
    let name = query.format.as_deref().unwrap_or("ndjson");
    let Some(format) = ExportFormat::parse(name) else {
        return bad_request(
            format!("unknown export format {name:?}: use ndjson or csv"),
            &root,
        );
    };
    let since = match query.since.as_deref().filter(|s| !s.trim().is_empty()) {
        None => None,
        Some(s) => match parse_since(s, state.inspector.now()) {
            Ok(t) => Some(t),
            Err(e) => return bad_request(e, &root),
        },
    };
    let view = View::new(tab, &query.view);
    let req = ExportRequest {
        queue: queue.clone(),
        state: tab,
        group: view.group.clone(),
        filter: view.filter.clone(),
        since,
    };
    let chunks = match state.inspector.export_tasks(req).await {
        Ok(s) => s,
        Err(e) => return PageError::from_error(e, &root).into_response(),
    };
    let prologue = futures_util::stream::iter([Ok::<_, std::io::Error>(format.prologue())]);
    let body = chunks.map(move |chunk| {
        Ok::<_, std::io::Error>(match chunk {
            Ok(rows) => rows.iter().map(|r| format.row(r)).collect::<String>(),
            Err(e) => stopped_line(format, &e.to_string()),
        })
    });
    let mut resp = Body::from_stream(prologue.chain(body)).into_response();
    let headers = resp.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(format.content_type()),
    );
    let disposition = format!(
        "attachment; filename=\"{}\"",
        file_name(&queue, tab.as_str(), format)
    );
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        headers.insert(header::CONTENT_DISPOSITION, v);
    }
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    resp
}

/// The last line of an export a failed read stopped.
fn stopped_line(format: ExportFormat, error: &str) -> String {
    let message = format!("export stopped: {error}");
    match format {
        ExportFormat::Ndjson => format!("{}\n", serde_json::json!({ "error": message })),
        ExportFormat::Csv => {
            let blanks = ",".repeat(crate::export::COLUMNS.len() - 1);
            format!("{blanks}\"{}\"\r\n", message.replace('"', "\"\""))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_header_safe() {
        assert_eq!(
            file_name("a b/\"c", "archived", ExportFormat::Csv),
            "a_b__c-archived.csv"
        );
        assert_eq!(
            stopped_line(ExportFormat::Ndjson, "x"),
            "{\"error\":\"export stopped: x\"}\n"
        );
    }
}
