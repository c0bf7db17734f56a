//! The routing multiplexer (Go `servemux.go`; wire spec §7.3): [`ServeMux`]
//! sends each task to the handler registered for its type, wrapped in the
//! registered [`Middleware`]. Re-exported by [`handler`](super::handler)
//! and `asynqdeck::server`.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::handler::{Handler, Middleware, handler_fn, not_found_handler};
use super::task_context::TaskContext;
use super::task_error::TaskError;
use crate::task::Task;

/// Routes each task to the handler registered for its type (Go `ServeMux`;
/// wire spec §7.3): an exact pattern match first, else the longest registered
/// pattern that is a prefix of the type (`"images"` and
/// `"images:thumbnails"`: the latter gets `images:thumbnails:small`), else a
/// [`HandlerNotFound`](super::HandlerNotFound) error, which takes the normal failure path.
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
    use std::sync::Mutex;

    use super::*;
    use crate::server::task_error::{HandlerNotFound, error_text, find_cause};

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
}
