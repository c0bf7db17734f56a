//! Task handlers, their context, and the routing multiplexer (Go
//! `servemux.go`, `context.go`, `Handler`/`HandlerFunc`/`ResultWriter` of
//! `asynq.go`/`server.go`; wire spec §7.3).
//!
//! A [`Handler`] gets a [`TaskContext`] (task id, retry count, max retry,
//! queue, deadline, cancellation, result writer; S26) and the [`Task`], and
//! returns `Ok(())` or a [`TaskError`]. [`ServeMux`] routes tasks to handlers
//! by type name.
//!
//! ```
//! use asynqdeck::server::{ServeMux, SkipRetry, TaskContext, TaskError};
//! use asynqdeck::Task;
//!
//! let mut mux = ServeMux::new();
//! mux.handle_fn("email:", |ctx: TaskContext, task: Task| async move {
//!     if task.payload().is_empty() {
//!         return Err(TaskError::new(SkipRetry).context(format!(
//!             "task {} (retry {}/{}): empty payload",
//!             ctx.task_id(), ctx.retry_count(), ctx.max_retry()
//!         )));
//!     }
//!     Ok(())
//! });
//! ```
//!
//! The handler's context is in `task_context` ([`TaskContext`],
//! [`ResultWriter`]) and routing in `serve_mux` ([`ServeMux`]); both are
//! re-exported here, so `server::handler::TaskContext` keeps working.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures_util::future::BoxFuture;

pub use super::serve_mux::ServeMux;
pub use super::task_context::{ResultWriter, TaskContext};
use super::task_error::{HandlerNotFound, TaskError};
use crate::task::Task;

/// Processes tasks (Go `asynq.Handler`). Dyn-compatible: servers hold
/// `Arc<dyn Handler>`. Returning `Ok(())` completes the task; an error takes
/// the failure path (wire spec §7.4) — see the markers in
/// [`task_error`](super::task_error). A panic in `process_task` itself
/// (before it returns its future; middleware included) or inside the
/// returned future is caught by the worker and becomes a
/// [`PanicError`](super::PanicError) failure (S25, issue 12 R1).
///
/// Each task runs concurrently with the others, like Go's goroutine per
/// task. A task's future is spawned on the runtime the server was started
/// on, except for task types whose first polls were seen to be quick (under
/// 100 µs, 64 times in a row): the server's fetch loop polls those once
/// itself, inside that runtime's context, and spawns them only if still
/// pending, which spares a thread wake-up per quick task. A type whose first
/// poll takes over 1 ms is spawned again until 1,024 first polls in a row
/// were quick. As in any async code, long
/// computations and blocking calls belong in `spawn_blocking`. Unlike Go,
/// a handler must not block its thread until another task runs (a
/// `std::sync` barrier, condvar or blocking channel between tasks): the
/// other task may be queued on the same runtime thread and only start once
/// the wait ends (tokio does not let other threads take a blocked thread's
/// next task), and a quick type that starts doing so could also hold up the
/// server's fetch loop. Wait with async primitives (`tokio::sync`) instead.
pub trait Handler: Send + Sync + 'static {
    /// Processes one task. The future must be `'static`: clone what it needs
    /// from `self` before the `async move` block.
    fn process_task(
        &self,
        ctx: TaskContext,
        task: Task,
    ) -> BoxFuture<'static, Result<(), TaskError>>;
}

impl<H: Handler + ?Sized> Handler for Arc<H> {
    fn process_task(
        &self,
        ctx: TaskContext,
        task: Task,
    ) -> BoxFuture<'static, Result<(), TaskError>> {
        (**self).process_task(ctx, task)
    }
}

impl<H: Handler + ?Sized> Handler for Box<H> {
    fn process_task(
        &self,
        ctx: TaskContext,
        task: Task,
    ) -> BoxFuture<'static, Result<(), TaskError>> {
        (**self).process_task(ctx, task)
    }
}

/// The handler's view of a dequeued task: type, payload and headers
/// (copied, so the running task keeps the message for its outcome write).
/// The one WireTask → [`Task`] conversion of the server: the worker hands it
/// to the handler and the delay function, the recoverer to the delay
/// function.
pub(crate) fn user_task(msg: &crate::broker::proto::TaskMessage) -> Task {
    Task::new(msg.r#type.clone(), msg.payload.clone()).with_headers(msg.headers.clone())
}

/// A [`Handler`] made from an async function; see [`handler_fn`].
#[derive(Clone)]
pub struct HandlerFn<F>(F);

impl<F> fmt::Debug for HandlerFn<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HandlerFn")
    }
}

/// Wraps `f(ctx, task) -> impl Future<Output = Result<(), TaskError>>` as a
/// [`Handler`] (Go `HandlerFunc`).
pub fn handler_fn<F, Fut>(f: F) -> HandlerFn<F>
where
    F: Fn(TaskContext, Task) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
{
    HandlerFn(f)
}

impl<F, Fut> Handler for HandlerFn<F>
where
    F: Fn(TaskContext, Task) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
{
    fn process_task(
        &self,
        ctx: TaskContext,
        task: Task,
    ) -> BoxFuture<'static, Result<(), TaskError>> {
        Box::pin((self.0)(ctx, task))
    }
}

/// A handler that always fails with [`HandlerNotFound`] (Go `NotFoundHandler`).
pub fn not_found_handler() -> Arc<dyn Handler> {
    Arc::new(handler_fn(|_ctx, task: Task| async move {
        Err(TaskError::new(HandlerNotFound {
            task_type: task.type_name().to_owned(),
        }))
    }))
}

/// Wraps a handler in another (logging, metrics, tracing...; Go `MiddlewareFunc`).
pub type Middleware = Arc<dyn Fn(Arc<dyn Handler>) -> Arc<dyn Handler> + Send + Sync>;

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> TaskContext {
        TaskContext::detached("id-1", "default")
    }

    /// The Handler trait is dyn-compatible and works through Arc and Box.
    #[tokio::test]
    async fn handler_is_dyn_compatible() {
        let h: Arc<dyn Handler> = Arc::new(handler_fn(|_c, _t| async { Ok(()) }));
        let boxed: Box<dyn Handler> = Box::new(h.clone());
        boxed
            .process_task(ctx(), Task::new("t", b"".to_vec()))
            .await
            .unwrap();
        let mut mux = ServeMux::new();
        mux.handle("t", h);
        mux.process_task(ctx(), Task::new("t", b"".to_vec()))
            .await
            .unwrap();
    }
}
