//! What a running handler may read and write about its task (Go
//! `context.go`: `GetTaskID`, `GetRetryCount`, `GetMaxRetry`,
//! `GetQueueName`, the context's deadline and cancellation; Go
//! `ResultWriter`; wire spec §7.3, §6.18; S26): [`TaskContext`] and its
//! [`ResultWriter`]. Re-exported by [`handler`](super::handler) and
//! `asynqdeck::server`.

use std::fmt;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

use crate::broker::Broker;
use crate::error::{Error, Result};

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
    /// The context a worker hands its handler. `retry_count` = the task
    /// message's `retried`, `max_retry` = its `retry`; `cancel` fires on
    /// deadline, `asynq:cancel` or shutdown abort. Results go to `broker`.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::ServeMux;
    use crate::server::handler::Handler;
    use crate::task::Task;

    fn ctx() -> TaskContext {
        TaskContext::detached("id-1", "default")
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
}
