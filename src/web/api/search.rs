//! `GET /api/search?q=&queue=&state=&type=&error=&payload=&age=&retried=&cursor=&limit=`
//! (asynqdeck only): one bounded step of a search across queues and
//! states (`web/search.rs`). Answers
//! `{"tasks":[{"queue","id","type","state","payload","last_error",
//! "retried","max_retry","since","error"}],"scanned":N,"scanned_now":n,
//! "total":M,"cursor":"…"|null,"query":"…","errors":["<queue> <state>: …"]}`: `scanned` counts the tasks
//! read by the whole scan so far (`last_error` is cut to 500 characters
//! and `…`, the task's own API answers it whole), `total` the tasks in scope by the
//! statistics, `cursor` resumes the scan (`null` when it is complete). A
//! corrupt task is a row with `"type":""` and `error` set; a state that
//! cannot be read (a key of the wrong type) is skipped and named in
//! `errors`. A bad query is
//! 400 with the parse error naming the bad word.

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::ApiError;
use crate::inspector::{SearchHit, TaskRow};
use crate::web::AppState;
use crate::web::format;
use crate::web::search::{SearchParams, run};

/// One row of the answer.
#[derive(Debug, Serialize)]
struct HitJson {
    queue: String,
    id: String,
    #[serde(rename = "type")]
    task_type: String,
    state: &'static str,
    /// The payload as text (lossy UTF-8), cut to the dashboard's
    /// `--max-payload-length` characters.
    payload: String,
    last_error: String,
    retried: i32,
    max_retry: i32,
    /// When it entered its state (RFC 3339), when known.
    since: Option<String>,
    /// Why the task could not be read (corrupt rows), else absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

#[derive(Debug, Serialize)]
struct SearchJson {
    tasks: Vec<HitJson>,
    scanned: usize,
    scanned_now: usize,
    total: usize,
    cursor: Option<String>,
    query: String,
    /// States that could not be read and were skipped.
    errors: Vec<String>,
}

fn hit_json(h: SearchHit, max_payload: usize) -> HitJson {
    let since = h.since.map(format::iso);
    let state = h.state.as_str();
    match h.row {
        TaskRow::Task(t) => HitJson {
            queue: h.queue,
            id: t.id,
            task_type: t.task_type,
            state,
            payload: String::from_utf8_lossy(&t.payload)
                .chars()
                .take(max_payload)
                .collect(),
            last_error: crate::web::format::clip(&t.last_err, crate::web::format::LIST_ERROR_CHARS),
            retried: t.retried,
            max_retry: t.max_retry,
            since,
            error: None,
        },
        TaskRow::Corrupt { id, error, .. } => HitJson {
            queue: h.queue,
            id,
            task_type: String::new(),
            state,
            payload: String::new(),
            last_error: String::new(),
            retried: 0,
            max_retry: 0,
            since,
            error: Some(error),
        },
    }
}

pub async fn search(
    State(state): State<AppState>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let params = SearchParams::from_pairs(pairs);
    match run(&state, &params).await {
        Ok((query, page)) => {
            let max = state.config.max_payload_length;
            Json(SearchJson {
                tasks: page.hits.into_iter().map(|h| hit_json(h, max)).collect(),
                scanned: page.scanned,
                scanned_now: page.scanned_now,
                total: page.total,
                cursor: page.cursor.map(|c| c.encode()),
                query: query.to_text(),
                errors: page.errors,
            })
            .into_response()
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}
