//! Errors as pages and as API answers, mapped once from [`crate::Error`].
//!
//! Data in Redis never causes a 500: corrupt tasks are rows, failing
//! statistics are "n/a" cells. What remains: unknown queue or task → 404,
//! refused action → 400/409, Redis unreachable → 503 with a clear page.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};

use crate::Error;

/// The HTTP status for an inspector error.
pub fn status_of(err: &Error) -> StatusCode {
    match err {
        Error::QueueNotFound { .. } | Error::TaskNotFound { .. } => StatusCode::NOT_FOUND,
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
