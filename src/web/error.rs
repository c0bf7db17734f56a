//! Errors as pages, as action answers and as API answers, all mapped by
//! one function from [`crate::Error`] to an HTTP status ([`status_of`]).
//!
//! Data in Redis never causes a 500: corrupt tasks are rows, failing
//! statistics are "n/a" cells. What remains, as asynqmon answers: unknown
//! queue or task → 404 (asynq `ErrQueueNotFound`, `ErrTaskNotFound`),
//! refused change → 400 (`ErrQueueNotEmpty`, a failed precondition), data
//! that cannot be read → 422, Redis unreachable → 503 with a clear page.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::Error;

/// The HTTP status for an inspector error: the one mapping the pages, the
/// dashboard's actions and `/api` use.
pub fn status_of(err: &Error) -> StatusCode {
    match err {
        Error::QueueNotFound { .. }
        | Error::TaskNotFound { .. }
        | Error::JobNotFound { .. }
        | Error::SchedulerEntryNotFound { .. } => StatusCode::NOT_FOUND,
        Error::QueueNotEmpty { .. }
        | Error::TaskAlreadyArchived { .. }
        | Error::FailedPrecondition(_)
        | Error::InvalidArgument(_)
        | Error::InvalidQueueName
        | Error::EmptyTaskId
        | Error::EmptyTaskType
        | Error::EmptyGroup
        | Error::UniqueTtlTooShort
        | Error::DuplicateTask
        | Error::TaskIdConflict => StatusCode::BAD_REQUEST,
        Error::Redis(_) if err.is_redis_unavailable() => StatusCode::SERVICE_UNAVAILABLE,
        // Data in Redis that cannot be read (undecodable task, a key of the
        // wrong type, a counter that is not a number) is never a 500.
        Error::Redis(_) | Error::Corrupt { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        Error::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An action's error as a text answer with [`status_of`]'s status (htmx
/// shows the text as an error toast).
pub fn action_error(err: Error) -> Response {
    (status_of(&err), err.to_string()).into_response()
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage<'a> {
    root: &'a str,
    title: &'a str,
    status: u16,
    message: &'a str,
    hint: &'a str,
}

/// An error shown as an HTML page (or as a fragment inside one).
#[derive(Debug)]
pub struct PageError {
    /// HTTP status.
    pub status: StatusCode,
    /// What happened, shown to the user.
    pub message: String,
    /// Root path for links.
    pub root: String,
}

impl PageError {
    /// From an inspector error.
    pub fn from_error(err: Error, root: &str) -> Self {
        PageError {
            status: status_of(&err),
            message: err.to_string(),
            root: root.to_string(),
        }
    }

    /// A 404 with `message`.
    pub fn not_found(message: impl Into<String>, root: &str) -> Self {
        PageError {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
            root: root.to_string(),
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let hint = match self.status {
            StatusCode::SERVICE_UNAVAILABLE => {
                "Redis is not answering. This page recovers by itself when Redis is back; reload to retry."
            }
            StatusCode::NOT_FOUND => {
                "Check the queue name or task id; the task may have finished or been deleted."
            }
            StatusCode::UNPROCESSABLE_ENTITY => {
                "Data in Redis could not be read (written by another program, or corrupted); the rest of the dashboard is unaffected."
            }
            _ => "",
        };
        let title = self.status.canonical_reason().unwrap_or("Error");
        let page = ErrorPage {
            root: &self.root,
            title,
            status: self.status.as_u16(),
            message: &self.message,
            hint,
        };
        match page.render() {
            Ok(html) => (self.status, Html(html)).into_response(),
            Err(_) => (self.status, self.message).into_response(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One mapping for the pages' actions and `/api`, as asynqmon: an
    /// unknown queue is 404 like an unknown task (deleting or pausing one
    /// from the pages answered 400 before), a queue that is not empty and
    /// a refused change are 400, Redis data that cannot be read is 422.
    #[test]
    fn action_errors_map_like_asynqmon() {
        let cases = [
            (
                Error::QueueNotFound { queue: "q".into() },
                StatusCode::NOT_FOUND,
            ),
            (
                Error::TaskNotFound {
                    queue: "q".into(),
                    id: "t".into(),
                },
                StatusCode::NOT_FOUND,
            ),
            (
                Error::QueueNotEmpty { queue: "q".into() },
                StatusCode::BAD_REQUEST,
            ),
            (
                Error::FailedPrecondition("task is already running".into()),
                StatusCode::BAD_REQUEST,
            ),
            (
                Error::InvalidArgument("bad".into()),
                StatusCode::BAD_REQUEST,
            ),
        ];
        for (err, want) in cases {
            assert_eq!(status_of(&err), want, "{err}");
            let text = err.to_string();
            let answer = action_error(err);
            assert_eq!(answer.status(), want, "{text}");
        }
    }
}
