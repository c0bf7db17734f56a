//! Background bulk jobs over `/api` (asynqdeck only, issue 15):
//! `POST /api/jobs` starts one and answers 202 with the job at once;
//! `GET /api/jobs` lists them (newest first, `?limit=`, default 50);
//! `GET /api/jobs/{id}` reads one; `POST /api/jobs/{id}:cancel` cancels
//! it; `GET /api/jobs:preview?queue=&state=&action=&group=&task_type=&payload=&err=&id=&search=`
//! counts what a job would touch. Mutations pass the same guard as every
//! `/api` POST (same origin checked, no CSRF token as asynqmon's UI sends
//! none; read-only 403). A filter is
//! `{"task_type","payload","err","id","search"}`: `search` takes the
//! search box's filters (`error~timeout age>1h`; its `queue:` and
//! `state:` are dropped), empty for none; a bad one is 400.
//!
//! A job's JSON: `{"id","queue","state","group","action","filter",
//! "phase","total","done","skipped","failed","percent","rate","eta_s",
//! "actor","created_at","started_at","updated_at","finished_at","error",
//! "skipped_ids","failed_ids":[{"id","error"}]}`; times RFC 3339 UTC or
//! null, `rate` tasks/s or null, `eta_s` seconds or null.

use std::collections::HashMap;

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::IntoResponse;
use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use super::{ApiError, ApiResult};
use crate::inspector::jobs::{JobSpec, JobStatus};
use crate::inspector::{SearchQuery, TabFilter, TaskAction};
use crate::task::TaskState;
use crate::web::AppState;

/// Jobs listed when `?limit=` is absent.
const DEFAULT_LIMIT: usize = 50;
/// Most jobs one list answers.
const MAX_LIMIT: usize = 1_000;
/// Largest request body read by `POST /api/jobs`, in bytes.
const MAX_BODY: usize = 64 * 1024;

/// A job's filter as JSON (empty strings filter nothing).
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(default)]
pub(super) struct FilterJson {
    task_type: String,
    payload: String,
    err: String,
    id: String,
    /// A search's filters (`/search` syntax; its queue: and state: are
    /// ignored), empty for none.
    search: String,
}

/// The body of `POST /api/jobs`.
#[derive(Debug, Deserialize)]
struct CreateRequest {
    queue: String,
    state: String,
    action: String,
    #[serde(default)]
    group: Option<String>,
    #[serde(default)]
    filter: Option<FilterJson>,
}

#[derive(Serialize)]
struct FailedJson {
    id: String,
    error: String,
}

/// A job as `/api` answers it.
#[derive(Serialize)]
pub(super) struct JobJson {
    id: String,
    queue: String,
    state: &'static str,
    group: Option<String>,
    action: &'static str,
    filter: Option<FilterJson>,
    phase: &'static str,
    total: u64,
    done: u64,
    skipped: u64,
    failed: u64,
    percent: u8,
    rate: Option<f64>,
    eta_s: Option<f64>,
    actor: Option<String>,
    created_at: String,
    started_at: Option<String>,
    updated_at: String,
    finished_at: Option<String>,
    error: Option<String>,
    skipped_ids: Vec<String>,
    failed_ids: Vec<FailedJson>,
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl From<&JobStatus> for JobJson {
    fn from(j: &JobStatus) -> Self {
        JobJson {
            id: j.id.clone(),
            queue: j.spec.queue.clone(),
            state: j.spec.state.as_str(),
            group: j.spec.group.clone(),
            action: j.spec.action.as_str(),
            filter: j.spec.filter.as_ref().map(|f| FilterJson {
                task_type: f.task_type.clone(),
                payload: f.payload.clone(),
                err: f.err.clone(),
                id: f.id.clone(),
                search: f.search.as_ref().map(|q| q.to_text()).unwrap_or_default(),
            }),
            phase: j.phase.as_str(),
            total: j.total,
            done: j.done,
            skipped: j.skipped,
            failed: j.failed,
            percent: j.percent(),
            rate: j.rate(),
            eta_s: j.eta().map(|d| d.as_secs_f64()),
            actor: j.actor.clone(),
            created_at: rfc3339(j.created_at),
            started_at: j.started_at.map(rfc3339),
            updated_at: rfc3339(j.updated_at),
            finished_at: j.finished_at.map(rfc3339),
            error: j.error.clone(),
            skipped_ids: j.skipped_ids.clone(),
            failed_ids: j
                .failed_ids
                .iter()
                .map(|(id, error)| FailedJson {
                    id: id.clone(),
                    error: error.clone(),
                })
                .collect(),
        }
    }
}

/// The basic-auth user, when the dashboard has one (the job's actor).
pub(super) fn actor(state: &AppState) -> Option<&str> {
    state
        .config
        .basic_auth
        .as_ref()
        .map(|(user, _)| user.as_str())
}

/// A spec from its parts. Errors: 400 for an unknown state or action.
fn spec_of(
    queue: &str,
    state: &str,
    action: &str,
    group: Option<&str>,
    filter: Option<FilterJson>,
) -> ApiResult<JobSpec> {
    let task_state: TaskState = state
        .parse()
        .map_err(|e: String| ApiError::bad_request(e))?;
    let action = TaskAction::parse(action).ok_or_else(|| {
        ApiError::bad_request(format!(
            "unknown action {action:?}: run, archive, delete or cancel"
        ))
    })?;
    let filter = filter
        .map(|f| -> ApiResult<TabFilter> {
            let search = match f.search.trim() {
                "" => None,
                text => Some(
                    SearchQuery::parse(text)
                        .map_err(|e| ApiError::bad_request(e.to_string()))?
                        .filters_only(),
                ),
            };
            Ok(TabFilter {
                task_type: f.task_type,
                id: f.id,
                payload: f.payload,
                err: f.err,
                search,
            })
        })
        .transpose()?;
    Ok(JobSpec {
        queue: queue.to_string(),
        state: task_state,
        group: group.filter(|g| !g.is_empty()).map(str::to_string),
        action,
        filter,
    })
}

/// `GET /api/jobs?limit=`: the newest jobs first.
pub(super) async fn list(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
) -> ApiResult {
    let limit = query
        .get("limit")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(DEFAULT_LIMIT)
        .min(MAX_LIMIT);
    let jobs = state.inspector.jobs(limit).await?;
    let jobs: Vec<JobJson> = jobs.iter().map(JobJson::from).collect();
    Ok(Json(serde_json::json!({ "jobs": jobs })).into_response())
}

/// `POST /api/jobs`: starts a job; 202 with the job.
pub(super) async fn create(State(state): State<AppState>, body: Body) -> ApiResult {
    let bytes = axum::body::to_bytes(body, MAX_BODY)
        .await
        .map_err(|_| ApiError::bad_request("request body too large or unreadable"))?;
    let req: CreateRequest =
        serde_json::from_slice(&bytes).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let spec = spec_of(
        &req.queue,
        &req.state,
        &req.action,
        req.group.as_deref(),
        req.filter,
    )?;
    let job = state.inspector.start_job(spec, actor(&state)).await?;
    Ok((StatusCode::ACCEPTED, Json(JobJson::from(&job))).into_response())
}

/// `GET /api/jobs:preview?...`: what a job would touch.
pub(super) async fn preview(
    State(state): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult {
    let get = |k: &str| q.get(k).map(String::as_str).unwrap_or_default();
    let filter = FilterJson {
        task_type: get("task_type").to_string(),
        payload: get("payload").to_string(),
        err: get("err").to_string(),
        id: get("id").to_string(),
        search: get("search").to_string(),
    };
    let spec = spec_of(
        get("queue"),
        get("state"),
        get("action"),
        q.get("group").map(String::as_str),
        Some(filter),
    )?;
    let preview = state.inspector.preview_job(&spec).await?;
    Ok(Json(preview).into_response())
}

/// `GET /api/jobs/{id}` and `POST /api/jobs/{id}:cancel`.
pub(super) async fn item(
    State(state): State<AppState>,
    method: Method,
    Path(segment): Path<String>,
) -> ApiResult {
    let job = match method {
        Method::GET => state.inspector.job(&segment).await?,
        Method::POST => match segment.rsplit_once(':') {
            Some((id, "cancel")) => state.inspector.cancel_job(id).await?,
            _ => return Err(ApiError::not_found("404 page not found")),
        },
        _ => return Err(ApiError::method_not_allowed()),
    };
    Ok(Json(JobJson::from(&job)).into_response())
}
