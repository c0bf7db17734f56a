//! The worker side: handlers, their errors and retry policies (Go
//! `server.go`, `servemux.go`, `processor.go`, `context.go`).
//!
//! - `task_error`: [`TaskError`] (an [`anyhow::Error`]) and the outcome
//!   markers [`SkipRetry`], [`RevokeTask`], [`RetryAfter`], plus
//!   [`PanicError`] and [`HandlerNotFound`]; [`error_text`] gives the stored
//!   `LastErr` (wire spec §7.4, §12; S19–S25).
//! - `retry`: [`RetryDelayFunc`], [`default_retry_delay`] (Sidekiq curve) and
//!   the [`RetryPolicy`] builder (S4–S11).
//! - `handler`: the [`Handler`] trait, [`handler_fn`], [`TaskContext`],
//!   [`ResultWriter`] and the routing [`ServeMux`] (wire spec §7.3; S26).

pub mod handler;
pub mod retry;
pub mod task_error;

pub use handler::{
    Handler, HandlerFn, Middleware, ResultWriter, ServeMux, TaskContext, handler_fn,
    not_found_handler,
};
pub use retry::{
    Backoff, RetryDelayFunc, RetryPolicy, default_retry_delay, default_retry_delay_bounds,
    default_retry_delay_fn,
};
pub use task_error::{
    HandlerNotFound, MAX_ERROR_TEXT_BYTES, PanicError, RetryAfter, RevokeTask, SkipRetry,
    TaskError, error_text, find_cause, is_panic_error, is_revoke_task, is_skip_retry, panic_error,
    retry_after,
};

// maintenance (temporary block)
#[doc(hidden)]
pub mod forwarder;
#[doc(hidden)]
pub mod healthcheck;
#[doc(hidden)]
pub mod heartbeat;
#[doc(hidden)]
pub mod inflight;
#[doc(hidden)]
pub mod janitor;
#[doc(hidden)]
pub mod lease;
#[doc(hidden)]
pub mod recoverer;
#[doc(hidden)]
pub mod subscriber;
#[doc(hidden)]
pub mod syncer;
