//! Queue routes: `GET /queues`, `GET|DELETE /queues/{q}`,
//! `POST /queues/{q}:pause|:resume`, `GET /queue_stats`,
//! `GET /queues/{q}/groups` (asynqmon `queue_handlers.go`,
//! `group_handlers.go`).

use std::collections::{BTreeMap, HashMap};

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::Method;
use axum::response::IntoResponse;
use serde::Serialize;

use super::model::{DailyStatsJson, GroupJson, QueueSnapshot};
use super::{ApiError, ApiResult, no_content, queue_snapshot};
use crate::inspector::GROUPS_PAGE_MAX;
use crate::web::AppState;

/// Days of history in `GET /queues/{q}` (asynqmon's fixed 10).
const QUEUE_HISTORY_DAYS: usize = 10;
/// Days of history per queue in `GET /queue_stats` (asynqmon's 90).
const QUEUE_STATS_DAYS: usize = 90;

/// Queues serialized per body chunk of `GET /queues`: the answer is
/// streamed, so at 25,000 queues (7.7 MB of JSON) the process never holds
/// it whole (issue 15, RSS).
const QUEUES_PER_CHUNK: usize = 256;

/// `GET /queues`: `{"queues": [snapshot, ...], "errors": {queue: why}}`
/// for every queue, sorted by name, from the shared snapshot; `errors`
/// (queues whose statistics could not be read) is absent when empty
/// (asynqmon fails the whole response instead). The body is streamed,
/// [`QUEUES_PER_CHUNK`] queues at a time. 503 when Redis is unreachable.
pub async fn list(State(state): State<AppState>) -> ApiResult {
    // asynqmon divergence: COMPATIBILITY.md#a6
    let snap = state.stats.get(&state.inspector).await;
    if let Some(e) = &snap.error {
        return Err(ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            e.clone(),
        ));
    }
    let chunks = snap.queues.len().div_ceil(QUEUES_PER_CHUNK);
    // Chunk i serializes rows [i·N, (i+1)·N); chunk `chunks` closes the
    // body. The state carries whether a queue was written already (commas).
    let body = futures_util::stream::unfold((0usize, false), move |(i, mut wrote)| {
        let snap = snap.clone();
        async move {
            if i > chunks {
                return None;
            }
            let mut out = Vec::new();
            if i == 0 {
                out.extend_from_slice(b"{\"queues\":[");
            }
            let rows = snap
                .queues
                .iter()
                .skip(i * QUEUES_PER_CHUNK)
                .take(QUEUES_PER_CHUNK);
            for info in rows.filter_map(|r| r.info.as_ref().ok()) {
                if wrote {
                    out.push(b',');
                }
                wrote = true;
                if let Err(e) = serde_json::to_writer(&mut out, &QueueSnapshot::from(info)) {
                    return Some((Err(e), (chunks + 1, wrote)));
                }
            }
            if i == chunks {
                out.push(b']');
                let errors: BTreeMap<&str, &str> = snap
                    .queues
                    .iter()
                    .filter_map(|r| r.info.as_ref().err().map(|e| (r.name.as_str(), e.as_str())))
                    .collect();
                if !errors.is_empty() {
                    out.extend_from_slice(b",\"errors\":");
                    if let Err(e) = serde_json::to_writer(&mut out, &errors) {
                        return Some((Err(e), (chunks + 1, wrote)));
                    }
                }
                out.push(b'}');
            }
            Some((Ok(bytes::Bytes::from(out)), (i + 1, wrote)))
        }
    });
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

/// `GET /queues/{q}` body.
#[derive(Serialize)]
struct QueueResponse {
    /// `null` when the queue's statistics could not be read.
    current: Option<QueueSnapshot>,
    /// The last 10 UTC days, today first.
    history: Vec<DailyStatsJson>,
}

/// `/queues/{segment}`: GET the queue, DELETE it (not forced), or POST
/// `{q}:pause` / `{q}:resume` (the verb after the last `:`).
pub async fn queue_segment(
    State(state): State<AppState>,
    method: Method,
    Path(segment): Path<String>,
) -> ApiResult {
    match method {
        Method::GET | Method::HEAD => get_queue(&state, &segment).await,
        Method::DELETE => {
            let result = state.inspector.delete_queue(&segment, false).await;
            state.stats.invalidate().await;
            result?;
            Ok(no_content())
        }
        Method::POST => {
            let Some((queue, verb)) = segment.rsplit_once(':') else {
                return Err(ApiError::method_not_allowed());
            };
            let result = match verb {
                "pause" => state.inspector.pause_queue(queue).await,
                "resume" => state.inspector.unpause_queue(queue).await,
                _ => return Err(ApiError::method_not_allowed()),
            };
            state.stats.invalidate().await;
            result?;
            Ok(no_content())
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// `{"current": snapshot, "history": [10 days]}`; 404 for an unknown queue.
async fn get_queue(state: &AppState, queue: &str) -> ApiResult {
    let current = queue_snapshot(state, queue).await?;
    let history = state
        .inspector
        .history(queue, QUEUE_HISTORY_DAYS)
        .await?
        .iter()
        .map(DailyStatsJson::from)
        .collect();
    Ok(Json(QueueResponse { current, history }).into_response())
}

/// `GET /queue_stats` body.
#[derive(Serialize)]
struct QueueStatsResponse {
    /// Queue → the last 90 UTC days, today first.
    stats: BTreeMap<String, Vec<DailyStatsJson>>,
    /// Queues whose history could not be read → why; absent when empty.
    // asynqmon divergence: COMPATIBILITY.md#a6
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    errors: BTreeMap<String, String>,
}

/// `GET /queue_stats`: `{"stats": {queue: [{queue, processed, succeeded,
/// failed, date}, ...]}}`, 90 days per queue.
pub async fn daily_stats(State(state): State<AppState>) -> ApiResult {
    let names = state.inspector.queues().await?;
    let histories = futures_util::future::join_all(
        names
            .iter()
            .map(|q| state.inspector.history(q, QUEUE_STATS_DAYS)),
    )
    .await;
    let mut resp = QueueStatsResponse {
        stats: BTreeMap::new(),
        errors: BTreeMap::new(),
    };
    for (name, history) in names.into_iter().zip(histories) {
        match history {
            Ok(days) => {
                resp.stats
                    .insert(name, days.iter().map(DailyStatsJson::from).collect());
            }
            Err(e) => {
                resp.errors.insert(name, e.to_string());
            }
        }
    }
    Ok(Json(resp).into_response())
}

/// `GET /queues/{q}/groups` body.
#[derive(Serialize)]
struct GroupsResponse {
    groups: Vec<GroupJson>,
    stats: Option<QueueSnapshot>,
    /// Cursor of the next page as a decimal string (an SSCAN cursor can
    /// pass 2^53); absent when every group was listed, so a queue of one
    /// page answers exactly asynqmon's body. asynqdeck only.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// `GET /queues/{q}/groups?cursor=&size=`: `{"groups": [{group, size}],
/// "stats": snapshot}`, plus `"next_cursor": "<c>"` while more groups
/// follow; 404 for an unknown queue
/// (asynq lists no groups for it). Bounded (COMPATIBILITY.md L9): one page
/// of about `size` groups (default and most [`GROUPS_PAGE_MAX`], 500)
/// from `cursor` (default 0, the first page); asynqmon lists every group,
/// which is the same answer for a queue of fewer groups. `size` outside
/// 1..=500 or a cursor that is not an unsigned integer is 400.
// asynqmon divergence: COMPATIBILITY.md#l9
pub async fn groups(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let cursor = match query.get("cursor").map(|c| c.trim()) {
        None | Some("") => 0,
        Some(c) => c
            .parse::<u64>()
            .map_err(|_| ApiError::bad_request(format!("invalid cursor {c:?}")))?,
    };
    let size = match query.get("size").map(|c| c.trim()) {
        None | Some("") => GROUPS_PAGE_MAX,
        Some(c) => c
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=GROUPS_PAGE_MAX).contains(n))
            .ok_or_else(|| ApiError::bad_request(format!("size must be 1 to {GROUPS_PAGE_MAX}")))?,
    };
    let page = state.inspector.groups_page(&queue, cursor, size).await?;
    let stats = queue_snapshot(&state, &queue).await?;
    Ok(Json(GroupsResponse {
        groups: page.groups.iter().map(GroupJson::from).collect(),
        stats,
        next_cursor: (page.next_cursor != 0).then(|| page.next_cursor.to_string()),
    })
    .into_response())
}
