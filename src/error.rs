//! The public error type.
//!
//! Go: `internal/errors/errors.go` plus the sentinel errors of `client.go` and
//! `inspector.go`. Expected outcomes (a duplicate task, an unknown queue, a
//! refused state change) are variants callers can match on; the text of each
//! follows Go's, so an operator reading logs of both sees the same words.

/// Every error asynqdeck's public API returns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The task type name is blank (Go: `task typename cannot be empty`).
    #[error("task typename cannot be empty")]
    EmptyTaskType,
    /// The queue name is blank (Go: `queue name must contain one or more characters`).
    #[error("queue name must contain one or more characters")]
    InvalidQueueName,
    /// A custom task id is blank (Go: `task ID cannot be empty`).
    #[error("task ID cannot be empty")]
    EmptyTaskId,
    /// A group name is blank (Go: `group key cannot be empty`).
    #[error("group key cannot be empty")]
    EmptyGroup,
    /// `unique` was given a TTL under one second (Go: `Unique TTL cannot be less than 1s`).
    #[error("Unique TTL cannot be less than 1s")]
    UniqueTtlTooShort,
    /// Another task holds the uniqueness lock (Go `ErrDuplicateTask`).
    #[error("task already exists")]
    DuplicateTask,
    /// A task with this id already exists in the queue (Go `ErrTaskIDConflict`).
    #[error("task ID conflicts with another task")]
    TaskIdConflict,
    /// The queue is not in `asynq:queues` (Go `ErrQueueNotFound`).
    #[error("queue not found: queue {queue:?} does not exist")]
    QueueNotFound {
        /// The queue asked for.
        queue: String,
    },
    /// No task with this id in the queue (Go `ErrTaskNotFound`).
    #[error("task not found: cannot find task with id={id} in queue {queue:?}")]
    TaskNotFound {
        /// The queue searched.
        queue: String,
        /// The id asked for.
        id: String,
    },
    /// No background job with this id (never created, or expired after its
    /// retention; asynqdeck only, issue 15).
    #[error("job not found: no job with id={id}")]
    JobNotFound {
        /// The id asked for.
        id: String,
    },
    /// No published scheduler entry with this id (no running scheduler
    /// lists it; asynqdeck only: the dashboard's "Run now").
    #[error("scheduler entry not found: no running scheduler has an entry with id={id}")]
    SchedulerEntryNotFound {
        /// The entry id asked for.
        id: String,
    },
    /// Deleting a queue that still holds tasks without `force` (Go `ErrQueueNotEmpty`).
    #[error("queue is not empty: queue {queue:?} is not empty")]
    QueueNotEmpty {
        /// The queue.
        queue: String,
    },
    /// Archiving a task that is already archived (Go `ErrTaskAlreadyArchived`).
    #[error("task already archived: task is already archived: id={id}, queue={queue}")]
    TaskAlreadyArchived {
        /// The queue.
        queue: String,
        /// The task id.
        id: String,
    },
    /// The operation is not allowed in the current state (Go code
    /// `FAILED_PRECONDITION`); the text says why, e.g. `task is already running`.
    #[error("FAILED_PRECONDITION: {0}")]
    FailedPrecondition(String),
    /// An argument is out of range (e.g. a zero page size).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Data in Redis could not be decoded (a corrupt or foreign task message).
    #[error("corrupt data in Redis at {key}: {reason}")]
    Corrupt {
        /// The key (and field) that held it.
        key: String,
        /// What was wrong.
        reason: String,
    },
    /// Redis could not be reached or answered with an error.
    #[error("redis: {0}")]
    Redis(#[source] redis::RedisError),
    /// A script answered something it never should (a bug or a foreign script).
    #[error("INTERNAL: {0}")]
    Internal(String),
}

impl Error {
    /// True when Redis could not be reached (connection refused, dropped or
    /// timed out; on a cluster, the slot's node down or moving), as opposed to a refusal of the operation or an error reply
    /// about the data (e.g. `WRONGTYPE` for a key of another type).
    pub fn is_redis_unavailable(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    // A Redis Cluster whose node for the slot is down or
                    // moving: MOVED/ASK left after redis-rs's retries,
                    // TRYAGAIN, CLUSTERDOWN (issue 14).
                    || e.is_cluster_error()
                    || e.code() == Some("MASTERDOWN")
                    // ... also inside an aborted transaction or pipeline.
                    || e.clone().into_server_errors().is_some_and(|errs| {
                        errs.iter().any(|(_, se)| {
                            matches!(
                                se.code(),
                                "MOVED" | "ASK" | "TRYAGAIN" | "CLUSTERDOWN" | "MASTERDOWN"
                            )
                        })
                    })
            }
            _ => false,
        }
    }
}

impl From<redis::RedisError> for Error {
    /// Wraps `e`; an error saying keys crossed slots is counted and logged
    /// first (`broker::slot_errors`, issue 14).
    fn from(e: redis::RedisError) -> Self {
        crate::broker::note_slot_error(&e);
        Error::Redis(e)
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
