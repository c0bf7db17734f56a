//! Collection verbs of the task routes (asynqmon `task_handlers.go`):
//! `delete_all`, `run_all`, `archive_all` answer a count; `batch_delete`,
//! `batch_run`, `batch_archive`, `batch_cancel` answer the ids that
//! succeeded and those that failed, in request order; `cancel_all` answers
//! 204. Go: asynq `Inspector.DeleteAll*`, `RunAll*`, `ArchiveAll*`, and one
//! `DeleteTask`/`RunTask`/`ArchiveTask`/`CancelProcessing` per id.

use axum::Json;
use axum::body::Body;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::task_paths::{AllVerb, Target};
use super::{ApiResult, batch_ids, no_content};
use crate::Inspector;
use crate::inspector::{Page, TaskAction, TaskRow};
use crate::task::TaskState;
use crate::web::AppState;

/// Active tasks read per page by `cancel_all` (asynqmon's batch of 100).
const CANCEL_ALL_PAGE: usize = 100;

#[derive(Serialize)]
struct Deleted {
    deleted: u64,
}

#[derive(Serialize)]
struct Scheduled {
    scheduled: u64,
}

#[derive(Serialize)]
struct Archived {
    archived: u64,
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
    let (queue, task_state, group) = (target.queue, target.state, target.group);
    let action = verb.action();
    let response: Response = match verb {
        AllVerb::DeleteAll => {
            let deleted = inspector
                .act_on_all(action, queue, task_state, group)
                .await?;
            Json(Deleted { deleted }).into_response()
        }
        AllVerb::RunAll => {
            let scheduled = inspector
                .act_on_all(action, queue, task_state, group)
                .await?;
            Json(Scheduled { scheduled }).into_response()
        }
        AllVerb::ArchiveAll => {
            let archived = inspector
                .act_on_all(action, queue, task_state, group)
                .await?;
            Json(Archived { archived }).into_response()
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
