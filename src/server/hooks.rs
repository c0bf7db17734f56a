//! The user callbacks a server calls around a failed attempt, as type
//! aliases (Go `Config.IsFailure`, `Config.ErrorHandler`). They live here,
//! below both [`Config`](super::Config) and the worker that calls them, and
//! are re-exported as `asynqdeck::server::{IsFailureFunc, ErrorHandler}`.
//! The other callback types sit with the code that calls them:
//! [`RetryDelayFunc`](super::RetryDelayFunc) in `retry`,
//! [`HealthCheckFunc`](super::HealthCheckFunc) in `healthcheck`.

use std::sync::Arc;

use super::handler::TaskContext;
use super::task_error::TaskError;
use crate::task::Task;

/// Decides whether a handler error counts as a failure (Go `Config.IsFailure`;
/// S24). `false` retries the task without incrementing Retried or the failed
/// counter.
pub type IsFailureFunc = Arc<dyn Fn(&TaskError) -> bool + Send + Sync>;

/// Called for every failed attempt, before the retry/archive decision
/// (Go `ErrorHandler`; S20).
pub type ErrorHandler = Arc<dyn Fn(&TaskContext, &Task, &TaskError) + Send + Sync>;
