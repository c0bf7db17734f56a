//! Tasks, enqueue options, task states and the task facts users see.
//!
//! Go: `asynq.go` (`Task`, `TaskInfo`, `TaskState`) and the options of
//! `client.go`. Time values are UTC; durations are [`std::time::Duration`].

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, Utc};

/// Default max retry count when no option sets one (Go `defaultMaxRetry`; S1, S3).
pub const DEFAULT_MAX_RETRY: i32 = 25;
/// Default timeout when neither timeout nor deadline is given: 30 minutes (Go `defaultTimeout`).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Name of the queue used when none is given.
pub const DEFAULT_QUEUE: &str = "default";

/// A unit of work: a type name, an opaque payload, headers and default
/// enqueue options (Go `asynq.Task` / `NewTask` / `NewTaskWithHeaders`).
///
/// Options given to `Client::enqueue` are applied after the task's own, so
/// an enqueue option beats the task's default (S2).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Task {
    type_name: String,
    payload: Option<Vec<u8>>,
    headers: BTreeMap<String, String>,
    options: EnqueueOptions,
}

impl Task {
    /// A task with a payload (Go `NewTask(typename, payload)` with a non-nil slice).
    pub fn new(type_name: impl Into<String>, payload: impl Into<Vec<u8>>) -> Self {
        Task {
            type_name: type_name.into(),
            payload: Some(payload.into()),
            ..Default::default()
        }
    }

    /// A task without a payload (Go `NewTask(typename, nil)`). Differs from an
    /// empty payload only in its uniqueness key (spec §2.2).
    pub fn without_payload(type_name: impl Into<String>) -> Self {
        Task {
            type_name: type_name.into(),
            ..Default::default()
        }
    }

    /// Sets the task's headers (Go `NewTaskWithHeaders`; stored in field 15).
    pub fn with_headers(mut self, headers: BTreeMap<String, String>) -> Self {
        self.headers = headers;
        self
    }

    /// Adds one header.
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// Sets default enqueue options baked into the task (S2).
    pub fn with_options(mut self, options: EnqueueOptions) -> Self {
        self.options = options;
        self
    }

    /// The type name.
    pub fn type_name(&self) -> &str {
        &self.type_name
    }

    /// The payload bytes (empty when there is none).
    pub fn payload(&self) -> &[u8] {
        self.payload.as_deref().unwrap_or_default()
    }

    /// The payload, `None` when the task was built without one.
    pub fn payload_opt(&self) -> Option<&[u8]> {
        self.payload.as_deref()
    }

    /// The headers.
    pub fn headers(&self) -> &BTreeMap<String, String> {
        &self.headers
    }

    /// The default enqueue options.
    pub fn options(&self) -> &EnqueueOptions {
        &self.options
    }
}

/// When a task should first be processed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessAt {
    /// At this instant (Go `ProcessAt`).
    At(DateTime<Utc>),
    /// This long after the enqueue (Go `ProcessIn`).
    In(Duration),
}

/// Options of one enqueue (Go `asynq.Option`s). Every field is optional; an
/// unset field takes the task's default, then Go's default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EnqueueOptions {
    /// Queue name (default `default`).
    pub queue: Option<String>,
    /// Max retry count (default 25; negative becomes 0).
    pub max_retry: Option<i32>,
    /// Per-attempt timeout, truncated to whole seconds on the wire.
    pub timeout: Option<Duration>,
    /// Absolute deadline (stored as unix seconds).
    pub deadline: Option<DateTime<Utc>>,
    /// When to process; in the future makes the task `scheduled`.
    pub process_at: Option<ProcessAt>,
    /// Uniqueness lock TTL (at least 1 s).
    pub unique: Option<Duration>,
    /// Custom task id (not blank).
    pub task_id: Option<String>,
    /// How long to keep the task as `completed` after success (whole seconds).
    pub retention: Option<Duration>,
    /// Group for aggregation (not blank).
    pub group: Option<String>,
    /// Headers added to the task's own (Go master `Header(k, v)`, after
    /// v0.26.0); an option header replaces a task header of the same key.
    pub headers: BTreeMap<String, String>,
}

impl EnqueueOptions {
    /// No options set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Go `Queue(name)`.
    pub fn queue(mut self, name: impl Into<String>) -> Self {
        self.queue = Some(name.into());
        self
    }
    /// Go `MaxRetry(n)`.
    pub fn max_retry(mut self, n: i32) -> Self {
        self.max_retry = Some(n);
        self
    }
    /// Go `Timeout(d)`.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }
    /// Go `Deadline(t)`.
    pub fn deadline(mut self, t: DateTime<Utc>) -> Self {
        self.deadline = Some(t);
        self
    }
    /// Go `ProcessAt(t)`; replaces an earlier `process_in`.
    pub fn process_at(mut self, t: DateTime<Utc>) -> Self {
        self.process_at = Some(ProcessAt::At(t));
        self
    }
    /// Go `ProcessIn(d)`; replaces an earlier `process_at`.
    pub fn process_in(mut self, d: Duration) -> Self {
        self.process_at = Some(ProcessAt::In(d));
        self
    }
    /// Go `Unique(ttl)`.
    pub fn unique(mut self, ttl: Duration) -> Self {
        self.unique = Some(ttl);
        self
    }
    /// Go `TaskID(id)`.
    pub fn task_id(mut self, id: impl Into<String>) -> Self {
        self.task_id = Some(id.into());
        self
    }
    /// Go `Retention(d)`.
    pub fn retention(mut self, d: Duration) -> Self {
        self.retention = Some(d);
        self
    }
    /// Go `Group(name)`.
    pub fn group(mut self, name: impl Into<String>) -> Self {
        self.group = Some(name.into());
        self
    }

    /// Go master `Header(key, value)`: adds one header to the task at
    /// enqueue (a later call with the same key wins).
    pub fn header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(key.into(), value.into());
        self
    }

    /// `self` with every unset field taken from `defaults` (later options
    /// win, as Go appends enqueue options after the task's).
    pub fn or(self, defaults: &EnqueueOptions) -> EnqueueOptions {
        EnqueueOptions {
            queue: self.queue.or_else(|| defaults.queue.clone()),
            max_retry: self.max_retry.or(defaults.max_retry),
            timeout: self.timeout.or(defaults.timeout),
            deadline: self.deadline.or(defaults.deadline),
            process_at: self.process_at.or(defaults.process_at),
            unique: self.unique.or(defaults.unique),
            task_id: self.task_id.or_else(|| defaults.task_id.clone()),
            retention: self.retention.or(defaults.retention),
            group: self.group.or_else(|| defaults.group.clone()),
            headers: {
                let mut h = defaults.headers.clone();
                h.extend(self.headers);
                h
            },
        }
    }
}

/// The state of a task (Go `TaskState`). The string forms are the values of
/// the task hash's `state` field and the suffixes of the queue's keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaskState {
    /// Leased by a worker and running.
    Active,
    /// Waiting in the pending list.
    Pending,
    /// Waiting for its process-at time.
    Scheduled,
    /// Failed; waiting for its next attempt.
    Retry,
    /// Out of retries (or skipped them); kept for inspection.
    Archived,
    /// Succeeded and kept for its retention.
    Completed,
    /// Waiting in a group for aggregation.
    Aggregating,
}

impl TaskState {
    /// Every state, in asynqmon's tab order.
    pub const ALL: [TaskState; 7] = [
        TaskState::Active,
        TaskState::Pending,
        TaskState::Aggregating,
        TaskState::Scheduled,
        TaskState::Retry,
        TaskState::Archived,
        TaskState::Completed,
    ];

    /// The wire string (`pending`, `active`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Active => "active",
            TaskState::Pending => "pending",
            TaskState::Scheduled => "scheduled",
            TaskState::Retry => "retry",
            TaskState::Archived => "archived",
            TaskState::Completed => "completed",
            TaskState::Aggregating => "aggregating",
        }
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TaskState {
    type Err = String;
    /// Parses a wire string; the error is Go's text `"<x>" is not supported task state`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "active" => TaskState::Active,
            "pending" => TaskState::Pending,
            "scheduled" => TaskState::Scheduled,
            "retry" => TaskState::Retry,
            "archived" => TaskState::Archived,
            "completed" => TaskState::Completed,
            "aggregating" => TaskState::Aggregating,
            other => return Err(format!("{other:?} is not supported task state")),
        })
    }
}

/// Everything known about one task (Go `asynq.TaskInfo`, spec §11).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskInfo {
    /// Task id.
    pub id: String,
    /// Queue name.
    pub queue: String,
    /// Type name.
    pub task_type: String,
    /// Payload bytes.
    pub payload: Vec<u8>,
    /// Headers (empty when none).
    pub headers: BTreeMap<String, String>,
    /// Current state.
    pub state: TaskState,
    /// Max retry count (Go `MaxRetry`).
    pub max_retry: i32,
    /// Retries made so far (Go `Retried`).
    pub retried: i32,
    /// Last error text (Go `LastErr`), empty when none.
    pub last_err: String,
    /// When it last failed (Go `LastFailedAt`), whole seconds.
    pub last_failed_at: Option<DateTime<Utc>>,
    /// Per-attempt timeout; zero when none.
    pub timeout: Duration,
    /// Deadline, whole seconds.
    pub deadline: Option<DateTime<Utc>>,
    /// Group name, empty when none.
    pub group: String,
    /// When it is next due (Go `NextProcessAt`): the score for scheduled and
    /// retry, the time of the read for pending, `None` otherwise.
    pub next_process_at: Option<DateTime<Utc>>,
    /// Active and its lease expired: its worker is gone (listing of active only).
    pub is_orphaned: bool,
    /// How long it is kept after success; zero when not.
    pub retention: Duration,
    /// When it completed, whole seconds.
    pub completed_at: Option<DateTime<Utc>>,
    /// The result its handler wrote, if any.
    pub result: Option<Vec<u8>>,
}

/// One row of a task listing.
// Nearly every row is a `Task`; boxing it would cost an allocation per row.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum TaskRow {
    /// A task that decoded.
    Task(TaskInfo),
    /// A task whose hash exists but whose `msg` is absent or does not decode
    /// (Go skips these rows silently).
    // asynq divergence: COMPATIBILITY.md#t1
    Corrupt {
        /// The id as stored in the container.
        id: String,
        /// The state of the container it was listed from.
        state: TaskState,
        /// Why it could not be read.
        error: String,
    },
}

impl TaskRow {
    /// The task id.
    pub fn id(&self) -> &str {
        match self {
            TaskRow::Task(info) => &info.id,
            TaskRow::Corrupt { id, .. } => id,
        }
    }

    /// The task, `None` for a corrupt row.
    pub fn task(&self) -> Option<&TaskInfo> {
        match self {
            TaskRow::Task(info) => Some(info),
            TaskRow::Corrupt { .. } => None,
        }
    }

    /// The task data the row holds, as the readers' byte budgets count it:
    /// payload, result and LastErr bytes (0 for a corrupt row).
    pub fn data_bytes(&self) -> u64 {
        self.task().map_or(0, |t| {
            (t.payload.len() + t.result.as_ref().map_or(0, Vec::len) + t.last_err.len()) as u64
        })
    }
}
