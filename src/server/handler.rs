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

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::task_error::{HandlerNotFound, TaskError};
use crate::broker::Broker;
use crate::error::{Error, Result};
use crate::task::Task;

/// What a handler may read about the task it runs (Go `context.go`:
/// `GetTaskID`, `GetRetryCount`, `GetMaxRetry`, `GetQueueName`, plus the
/// context's deadline and cancellation; wire spec §7.3; S26). Cheap to clone.
#[derive(Clone)]
pub struct TaskContext {
    inner: Arc<ContextInner>,
}

#[derive(Clone)]
struct ContextInner {
    task_id: String,
    retry_count: u32,
    max_retry: u32,
    queue: String,
    deadline: DateTime<Utc>,
    cancel: CancellationToken,
    result_writer: ResultWriter,
}

impl fmt::Debug for TaskContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskContext")
            .field("task_id", &self.inner.task_id)
            .field("queue", &self.inner.queue)
            .field("retry_count", &self.inner.retry_count)
            .field("max_retry", &self.inner.max_retry)
            .field("deadline", &self.inner.deadline)
            .field("cancelled", &self.inner.cancel.is_cancelled())
            .finish()
    }
}

impl TaskContext {
    /// The context the processor hands a handler. `retry_count` = the task
    /// message's `retried`, `max_retry` = its `retry`; `cancel` fires on
    /// deadline, `asynq:cancel` or shutdown abort. Results go to `broker`.
    #[allow(
        dead_code,
        reason = "called by the processor, which is not written yet"
    )]
    pub(crate) fn new(
        task_id: String,
        queue: String,
        retry_count: u32,
        max_retry: u32,
        deadline: DateTime<Utc>,
        cancel: CancellationToken,
        broker: Broker,
    ) -> Self {
        let result_writer = ResultWriter {
            sink: ResultSink::Redis(broker),
            queue: queue.clone(),
            id: task_id.clone(),
            deadline,
            cancel: cancel.clone(),
        };
        TaskContext {
            inner: Arc::new(ContextInner {
                task_id,
                retry_count,
                max_retry,
                queue,
                deadline,
                cancel,
                result_writer,
            }),
        }
    }

    /// A context not tied to Redis, for unit-testing handlers: retry count 0,
    /// max retry 25, deadline 30 minutes from now, a fresh cancellation token.
    /// Its [`ResultWriter`] keeps the last write in memory
    /// ([`ResultWriter::last_written`]). Adjust with the `with_*` methods.
    pub fn detached(task_id: impl Into<String>, queue: impl Into<String>) -> Self {
        let task_id = task_id.into();
        let queue = queue.into();
        let deadline = Utc::now() + chrono::Duration::minutes(30);
        let cancel = CancellationToken::new();
        let result_writer = ResultWriter {
            sink: ResultSink::Memory(Arc::new(Mutex::new(None))),
            queue: queue.clone(),
            id: task_id.clone(),
            deadline,
            cancel: cancel.clone(),
        };
        TaskContext {
            inner: Arc::new(ContextInner {
                task_id,
                retry_count: 0,
                max_retry: crate::task::DEFAULT_MAX_RETRY as u32,
                queue,
                deadline,
                cancel,
                result_writer,
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut ContextInner)) -> Self {
        let inner = Arc::make_mut(&mut self.inner);
        f(inner);
        self
    }

    /// The same context with other retry counters (for tests of a detached context).
    pub fn with_retry(self, retry_count: u32, max_retry: u32) -> Self {
        self.edit(|c| {
            c.retry_count = retry_count;
            c.max_retry = max_retry;
        })
    }

    /// The same context with another deadline (for tests of a detached context).
    pub fn with_deadline(self, deadline: DateTime<Utc>) -> Self {
        self.edit(|c| {
            c.deadline = deadline;
            c.result_writer.deadline = deadline;
        })
    }

    /// The task id (Go `GetTaskID`; S26).
    pub fn task_id(&self) -> &str {
        &self.inner.task_id
    }

    /// Retries already made: 0 on the first attempt (Go `GetRetryCount` =
    /// the message's `retried`; S26).
    pub fn retry_count(&self) -> u32 {
        self.inner.retry_count
    }

    /// The task's retry ceiling (Go `GetMaxRetry` = the message's `retry`; S1, S26).
    pub fn max_retry(&self) -> u32 {
        self.inner.max_retry
    }

    /// The queue the task came from (Go `GetQueueName`).
    pub fn queue(&self) -> &str {
        &self.inner.queue
    }

    /// When this attempt must end (wire spec §7.3 `computeDeadline`), UTC.
    pub fn deadline(&self) -> DateTime<Utc> {
        self.inner.deadline
    }

    /// The token cancelled when the attempt must stop (deadline, `asynq:cancel`,
    /// shutdown). Long handlers should watch it (Go `ctx.Done()`).
    pub fn cancellation(&self) -> &CancellationToken {
        &self.inner.cancel
    }

    /// Whether the attempt has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }

    /// Completes when the attempt is cancelled (Go `<-ctx.Done()`).
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await
    }

    /// Writes the task's result (Go `Task.ResultWriter()`).
    pub fn result_writer(&self) -> &ResultWriter {
        &self.inner.result_writer
    }
}

/// Where a [`ResultWriter`] puts bytes.
#[derive(Clone)]
enum ResultSink {
    /// The task hash in Redis.
    Redis(Broker),
    /// Memory, for a detached context.
    Memory(Arc<Mutex<Option<Vec<u8>>>>),
}

/// Stores a handler's result in the task hash, field `result` (Go
/// `ResultWriter`; wire spec §6.18). With a retention set, the result stays
/// readable in `TaskInfo.result` after the task completes.
#[derive(Clone)]
pub struct ResultWriter {
    sink: ResultSink,
    queue: String,
    id: String,
    deadline: DateTime<Utc>,
    cancel: CancellationToken,
}

impl fmt::Debug for ResultWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResultWriter")
            .field("queue", &self.queue)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl ResultWriter {
    /// The id of the task the result belongs to (Go `ResultWriter.TaskID`).
    pub fn task_id(&self) -> &str {
        &self.id
    }

    /// Writes `data` as the task's result, replacing any earlier one, and
    /// returns the number of bytes written (Go `ResultWriter.Write`).
    ///
    /// Errors: [`Error::FailedPrecondition`] `failed to write task result:
    /// context canceled` once the attempt is cancelled, `...: context deadline
    /// exceeded` after its deadline; [`Error::TaskNotFound`] when the task's
    /// hash is gone (the task was deleted while it ran; nothing is written,
    /// issue 12 R7); [`Error::Redis`].
    pub async fn write(&self, data: &[u8]) -> Result<usize> {
        if self.cancel.is_cancelled() {
            return Err(Error::FailedPrecondition(
                "failed to write task result: context canceled".into(),
            ));
        }
        let now = match &self.sink {
            ResultSink::Redis(broker) => broker.now(),
            ResultSink::Memory(_) => Utc::now(),
        };
        if now >= self.deadline {
            return Err(Error::FailedPrecondition(
                "failed to write task result: context deadline exceeded".into(),
            ));
        }
        match &self.sink {
            ResultSink::Redis(broker) => broker.write_result(&self.queue, &self.id, data).await,
            ResultSink::Memory(slot) => {
                *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(data.to_vec());
                Ok(data.len())
            }
        }
    }

    /// The last bytes written through a detached context's writer
    /// ([`TaskContext::detached`]); always `None` for a writer backed by Redis.
    pub fn last_written(&self) -> Option<Vec<u8>> {
        match &self.sink {
            ResultSink::Redis(_) => None,
            ResultSink::Memory(slot) => slot.lock().unwrap_or_else(|e| e.into_inner()).clone(),
        }
    }
}

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

/// Routes each task to the handler registered for its type (Go `ServeMux`;
/// wire spec §7.3): an exact pattern match first, else the longest registered
/// pattern that is a prefix of the type (`"images"` and
/// `"images:thumbnails"`: the latter gets `images:thumbnails:small`), else a
/// [`HandlerNotFound`] error, which takes the normal failure path.
///
/// Build it before handing it to a server; registration takes `&mut self`.
#[derive(Default)]
pub struct ServeMux {
    exact: HashMap<String, Arc<dyn Handler>>,
    /// Every entry, longest pattern first (ties: registration order).
    by_length: Vec<(String, Arc<dyn Handler>)>,
    middleware: Vec<Middleware>,
}

impl fmt::Debug for ServeMux {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeMux")
            .field(
                "patterns",
                &self.by_length.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            )
            .field("middleware", &self.middleware.len())
            .finish()
    }
}

impl ServeMux {
    /// An empty multiplexer (Go `NewServeMux`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `handler` for `pattern` (Go `ServeMux.Handle`).
    ///
    /// # Panics
    /// Like Go, on a programming error at start-up: a blank pattern (`asynq:
    /// invalid pattern`) or a pattern registered twice (`asynq: multiple
    /// registrations for <pattern>`).
    pub fn handle(&mut self, pattern: impl Into<String>, handler: impl Handler) -> &mut Self {
        let pattern = pattern.into();
        if pattern.trim().is_empty() {
            panic!("asynq: invalid pattern");
        }
        if self.exact.contains_key(&pattern) {
            panic!("asynq: multiple registrations for {pattern}");
        }
        let handler: Arc<dyn Handler> = Arc::new(handler);
        self.exact.insert(pattern.clone(), handler.clone());
        let at = self
            .by_length
            .partition_point(|(p, _)| p.len() >= pattern.len());
        self.by_length.insert(at, (pattern, handler));
        self
    }

    /// Registers an async function for `pattern` (Go `ServeMux.HandleFunc`).
    /// Panics like [`handle`](Self::handle).
    pub fn handle_fn<F, Fut>(&mut self, pattern: impl Into<String>, f: F) -> &mut Self
    where
        F: Fn(TaskContext, Task) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), TaskError>> + Send + 'static,
    {
        self.handle(pattern, handler_fn(f))
    }

    /// Adds a middleware around every handler, the not-found one included
    /// (Go `ServeMux.Use`). Middleware run in registration order: the first
    /// registered is the outermost.
    pub fn use_middleware<M>(&mut self, middleware: M) -> &mut Self
    where
        M: Fn(Arc<dyn Handler>) -> Arc<dyn Handler> + Send + Sync + 'static,
    {
        self.middleware.push(Arc::new(middleware));
        self
    }

    /// The pattern that `task_type` routes to, `None` when no handler matches.
    pub fn route(&self, task_type: &str) -> Option<&str> {
        self.matching(task_type).map(|(p, _)| p)
    }

    fn matching(&self, task_type: &str) -> Option<(&str, &Arc<dyn Handler>)> {
        if let Some((p, h)) = self.exact.get_key_value(task_type) {
            return Some((p.as_str(), h));
        }
        self.by_length
            .iter()
            .find(|(p, _)| task_type.starts_with(p.as_str()))
            .map(|(p, h)| (p.as_str(), h))
    }

    /// The handler `task_type` goes to, wrapped in the middleware; the
    /// not-found handler when nothing matches (Go `ServeMux.Handler`).
    pub fn handler(&self, task_type: &str) -> Arc<dyn Handler> {
        let mut h = match self.matching(task_type) {
            Some((_, h)) => h.clone(),
            None => not_found_handler(),
        };
        for mw in self.middleware.iter().rev() {
            h = mw(h);
        }
        h
    }
}

impl Handler for ServeMux {
    fn process_task(
        &self,
        ctx: TaskContext,
        task: Task,
    ) -> BoxFuture<'static, Result<(), TaskError>> {
        self.handler(task.type_name()).process_task(ctx, task)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::task_error::{error_text, find_cause};

    fn ctx() -> TaskContext {
        TaskContext::detached("id-1", "default")
    }

    fn tagging(tag: &'static str) -> impl Handler {
        handler_fn(move |_ctx, _task| async move { Err(anyhow::anyhow!(tag)) })
    }

    async fn run(mux: &ServeMux, t: &str) -> String {
        let err = mux
            .process_task(ctx(), Task::new(t, b"".to_vec()))
            .await
            .unwrap_err();
        error_text(&err)
    }

    /// Wire spec §7.3: exact match beats a longer-prefix candidate; else the
    /// longest prefix; else `handler not found for task "<type>"`.
    #[tokio::test]
    async fn routing_exact_then_longest_prefix_then_not_found() {
        let mut mux = ServeMux::new();
        mux.handle("images", tagging("images"))
            .handle("images:thumbnails", tagging("thumbs"))
            .handle("images:thumbnails:small", tagging("exact-small"))
            .handle("im", tagging("im"));
        assert_eq!(run(&mux, "images:thumbnails:small").await, "exact-small");
        assert_eq!(run(&mux, "images:thumbnails:large").await, "thumbs");
        assert_eq!(run(&mux, "images:resize").await, "images");
        assert_eq!(run(&mux, "imx").await, "im");
        assert_eq!(run(&mux, "images").await, "images");
        assert_eq!(
            mux.route("images:thumbnails:large"),
            Some("images:thumbnails")
        );
        assert_eq!(mux.route("email:send"), None);
        let err = mux
            .process_task(ctx(), Task::new("email:send", b"".to_vec()))
            .await
            .unwrap_err();
        assert_eq!(
            find_cause::<HandlerNotFound>(&err).map(|e| e.task_type.as_str()),
            Some("email:send")
        );
        assert_eq!(
            error_text(&err),
            r#"handler not found for task "email:send""#
        );
    }

    /// Go `ServeMux.Use`: the first registered middleware is the outermost,
    /// and middleware also wrap the not-found handler.
    #[tokio::test]
    async fn middleware_order_first_is_outermost() {
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let mut mux = ServeMux::new();
        {
            let log = log.clone();
            mux.handle_fn("job", move |_ctx, _task| {
                let log = log.clone();
                async move {
                    log.lock().unwrap().push("handler".into());
                    Ok(())
                }
            });
        }
        for name in ["outer", "inner"] {
            let log = log.clone();
            mux.use_middleware(move |next: Arc<dyn Handler>| {
                let log = log.clone();
                Arc::new(handler_fn(move |ctx, task| {
                    let log = log.clone();
                    let next = next.clone();
                    async move {
                        log.lock().unwrap().push(format!("{name} before"));
                        let r = next.process_task(ctx, task).await;
                        log.lock().unwrap().push(format!("{name} after"));
                        r
                    }
                })) as Arc<dyn Handler>
            });
        }
        mux.process_task(ctx(), Task::new("job", b"".to_vec()))
            .await
            .unwrap();
        assert_eq!(
            *log.lock().unwrap(),
            vec![
                "outer before",
                "inner before",
                "handler",
                "inner after",
                "outer after"
            ]
        );
        log.lock().unwrap().clear();
        assert!(
            mux.process_task(ctx(), Task::new("nope", b"".to_vec()))
                .await
                .is_err()
        );
        assert_eq!(
            *log.lock().unwrap(),
            vec!["outer before", "inner before", "inner after", "outer after"]
        );
    }

    /// Go `ServeMux.Handle`: a blank pattern panics.
    #[test]
    #[should_panic(expected = "asynq: invalid pattern")]
    fn blank_pattern_panics() {
        ServeMux::new().handle("  ", tagging("x"));
    }

    /// Go `ServeMux.Handle`: a duplicate pattern panics.
    #[test]
    #[should_panic(expected = "asynq: multiple registrations for email")]
    fn duplicate_pattern_panics() {
        let mut mux = ServeMux::new();
        mux.handle("email", tagging("a"))
            .handle("email", tagging("b"));
    }

    /// S26: the handler reads task id, retry count, max retry and queue.
    #[tokio::test]
    async fn s26_context_exposes_task_facts() {
        let mut mux = ServeMux::new();
        mux.handle_fn("t", |ctx: TaskContext, _task| async move {
            anyhow::ensure!(ctx.task_id() == "abc", "id");
            anyhow::ensure!(ctx.retry_count() == 3, "retried");
            anyhow::ensure!(ctx.max_retry() == 5, "max");
            anyhow::ensure!(ctx.queue() == "critical", "queue");
            Ok(())
        });
        let c = TaskContext::detached("abc", "critical").with_retry(3, 5);
        mux.process_task(c, Task::new("t", b"".to_vec()))
            .await
            .unwrap();
        let d = TaskContext::detached("x", "q");
        assert_eq!((d.retry_count(), d.max_retry()), (0, 25));
    }

    /// S26, wire spec §6.18: cancellation is visible to the handler and the
    /// result writer refuses afterwards with Go's text.
    #[tokio::test]
    async fn s26_cancellation_and_result_writer() {
        let c = ctx();
        assert_eq!(c.result_writer().write(b"42").await.unwrap(), 2);
        assert_eq!(c.result_writer().last_written(), Some(b"42".to_vec()));
        assert_eq!(c.result_writer().task_id(), "id-1");
        assert!(!c.is_cancelled());
        let clone = c.clone();
        let waiter = tokio::spawn(async move { clone.cancelled().await });
        c.cancellation().cancel();
        waiter.await.unwrap();
        assert!(c.is_cancelled());
        let err = c.result_writer().write(b"late").await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "FAILED_PRECONDITION: failed to write task result: context canceled"
        );
        assert_eq!(c.result_writer().last_written(), Some(b"42".to_vec()));

        let past = ctx().with_deadline(Utc::now() - chrono::Duration::seconds(1));
        let err = past.result_writer().write(b"x").await.unwrap_err();
        assert!(matches!(
            err,
            Error::FailedPrecondition(ref m) if m == "failed to write task result: context deadline exceeded"
        ));
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
