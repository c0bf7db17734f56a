//! Collection verbs of the task routes (asynqmon `task_handlers.go`):
//! `delete_all`, `run_all`, `archive_all` answer a count; `batch_delete`,
//! `batch_run`, `batch_archive`, `batch_cancel` answer the ids that
//! succeeded and those that failed, in request order; `cancel_all` answers
//! 204. Go: asynq `Inspector.DeleteAll*`, `RunAll*`, `ArchiveAll*`, and one
//! `DeleteTask`/`RunTask`/`ArchiveTask`/`CancelProcessing` per id.
//!
//! The "all" verbs run as a background job (issue 15, bounded chunks): for
//! a set of at most [`WebConfig::sync_job_limit`](crate::web::WebConfig)
//! tasks the route runs the job itself and answers asynqmon's shape (200,
//! `{"deleted": n}`); above it, it answers at once with 202 and the same
//! shape, the count done so far (0) plus the job:
//! `{"deleted": 0, "job": {...}}` (COMPATIBILITY.md L5).
// asynqmon divergence: COMPATIBILITY.md#l5

use axum::Json;
use axum::body::Body;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::jobs::{JobJson, actor};
use super::task_paths::{AllVerb, Target};
use super::{ApiError, ApiResult, batch_ids, no_content};
use crate::Inspector;
use crate::inspector::jobs::{JobPhase, JobSpec, JobStatus};
use crate::inspector::{Page, TaskAction, TaskRow};
use crate::task::TaskState;
use crate::web::AppState;

/// Active tasks read per page by `cancel_all` (asynqmon's batch of 100).
const CANCEL_ALL_PAGE: usize = 100;

#[derive(Serialize)]
struct Deleted {
    deleted: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<JobJson>,
}

#[derive(Serialize)]
struct Scheduled {
    scheduled: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<JobJson>,
}

#[derive(Serialize)]
struct Archived {
    archived: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    job: Option<JobJson>,
}

/// How often the route looks at a job another runner took over.
const WAIT_POLL: std::time::Duration = std::time::Duration::from_millis(20);
/// How long the route waits for such a job before answering 202.
const WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs an "all" verb as a job: waited for when the set is small (the
/// job and `true` once finished), else started and answered at once (the
/// job in progress and `false`). A job that failed is its error (422).
async fn all_as_job(
    state: &AppState,
    target: Target<'_>,
    action: TaskAction,
) -> ApiResult<(JobStatus, bool)> {
    let inspector = &state.inspector;
    let spec = JobSpec {
        queue: target.queue.to_string(),
        state: target.state,
        group: target.group.map(str::to_string),
        action,
        filter: None,
    };
    let size = inspector.preview_job(&spec).await?.total;
    if size > state.config.sync_job_limit {
        let job = inspector.start_job(spec, actor(state)).await?;
        return Ok((job, false));
    }
    let job = inspector.create_job(spec, actor(state)).await?;
    let mut job = inspector
        .run_job(&job.id, &CancellationToken::new())
        .await?;
    let deadline = tokio::time::Instant::now() + WAIT_MAX;
    while !job.phase.is_finished() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(WAIT_POLL).await;
        job = inspector.job(&job.id).await?;
    }
    if job.phase == JobPhase::Failed {
        return Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            job.error.clone().unwrap_or_else(|| "job failed".into()),
        ));
    }
    let finished = job.phase.is_finished();
    Ok((job, finished))
}

/// The status and job field of an "all" verb's answer.
fn all_answer(job: &JobStatus, finished: bool) -> (StatusCode, Option<JobJson>) {
    if finished {
        (StatusCode::OK, None)
    } else {
        (StatusCode::ACCEPTED, Some(JobJson::from(job)))
    }
}

#[derive(Serialize)]
struct BatchDeleted {
    deleted_ids: Vec<String>,
    failed_ids: Vec<String>,
}

#[derive(Serialize)]
struct BatchRan {
    pending_ids: Vec<String>,
    error_ids: Vec<String>,
}

#[derive(Serialize)]
struct BatchArchived {
    archived_ids: Vec<String>,
    error_ids: Vec<String>,
}

#[derive(Serialize)]
struct BatchCanceled {
    canceled_ids: Vec<String>,
    error_ids: Vec<String>,
}

/// Applies `action` to every id ([`Inspector::act_on_each`]: a bounded
/// number at once) and splits the ids, in request order, into those that
/// succeeded and those that failed.
async fn run_batch(
    inspector: &Inspector,
    queue: &str,
    action: TaskAction,
    ids: Vec<String>,
) -> (Vec<String>, Vec<String>) {
    let (mut ok, mut failed) = (Vec::new(), Vec::new());
    for (id, result) in inspector.act_on_each(action, queue, ids).await {
        match result {
            Ok(()) => ok.push(id),
            Err(e) => {
                let what = action.as_str();
                tracing::debug!(task_id = %id, error = %e, "api: could not {what} task");
                failed.push(id);
            }
        }
    }
    (ok, failed)
}

/// Cancels every active task of the queue, reading the active list 100 at
/// a time (asynqmon `cancel_all`). Cancelation is a best-effort message,
/// so tasks stay listed while this pages through them.
async fn cancel_all(inspector: &Inspector, queue: &str) -> crate::Result<()> {
    let mut number = 1;
    loop {
        let page = Page::new(number, CANCEL_ALL_PAGE)?;
        let rows = inspector.list_tasks(queue, TaskState::Active, page).await?;
        for row in &rows {
            inspector.cancel_processing(TaskRow::id(row)).await?;
        }
        if rows.len() < CANCEL_ALL_PAGE {
            return Ok(());
        }
        number += 1;
    }
}

/// Runs a collection verb: counts for the "all" verbs, id lists for the
/// batch verbs, 204 for `cancel_all`.
pub(super) async fn collection_action(
    state: &AppState,
    target: Target<'_>,
    verb: AllVerb,
    body: Body,
) -> ApiResult {
    let inspector = &state.inspector;
    let queue = target.queue;
    let action = verb.action();
    let response: Response = match verb {
        AllVerb::DeleteAll => {
            let (job, finished) = all_as_job(state, target, action).await?;
            let (status, job_json) = all_answer(&job, finished);
            let body = Deleted {
                deleted: job.done,
                job: job_json,
            };
            (status, Json(body)).into_response()
        }
        AllVerb::RunAll => {
            let (job, finished) = all_as_job(state, target, action).await?;
            let (status, job_json) = all_answer(&job, finished);
            let body = Scheduled {
                scheduled: job.done,
                job: job_json,
            };
            (status, Json(body)).into_response()
        }
        AllVerb::ArchiveAll => {
            let (job, finished) = all_as_job(state, target, action).await?;
            let (status, job_json) = all_answer(&job, finished);
            let body = Archived {
                archived: job.done,
                job: job_json,
            };
            (status, Json(body)).into_response()
        }
        AllVerb::CancelAll => {
            cancel_all(inspector, queue).await?;
            no_content()
        }
        AllVerb::BatchDelete => {
            let ids = batch_ids(body).await?;
            let (deleted_ids, failed_ids) = run_batch(inspector, queue, action, ids).await;
            Json(BatchDeleted {
                deleted_ids,
                failed_ids,
            })
            .into_response()
        }
        AllVerb::BatchRun => {
            let ids = batch_ids(body).await?;
            let (pending_ids, error_ids) = run_batch(inspector, queue, action, ids).await;
            Json(BatchRan {
                pending_ids,
                error_ids,
            })
            .into_response()
        }
        AllVerb::BatchArchive => {
            let ids = batch_ids(body).await?;
            let (archived_ids, error_ids) = run_batch(inspector, queue, action, ids).await;
            Json(BatchArchived {
                archived_ids,
                error_ids,
            })
            .into_response()
        }
        AllVerb::BatchCancel => {
            let ids = batch_ids(body).await?;
            let (canceled_ids, error_ids) = run_batch(inspector, queue, action, ids).await;
            Json(BatchCanceled {
                canceled_ids,
                error_ids,
            })
            .into_response()
        }
    };
    Ok(response)
}
