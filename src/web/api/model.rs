//! The JSON shapes of asynqmon's API, with its field names, and the
//! conversions from inspector types. asynqmon v0.7.2 `conversion_helpers.go`
//! is the reference for every name and format here.
//!
//! Time formats follow asynqmon's two conventions: fields typed `time.Time`
//! in Go serialise as RFC 3339 with as many fraction digits as needed
//! ([`go_time`]; Go's zero time `0001-01-01T00:00:00Z` when unset), fields
//! typed `string` use whole-second RFC 3339 ([`rfc3339`]) with `""` or `-`
//! where asynqmon uses them. asynqdeck always writes UTC (`Z`). The
//! formatting itself is in `go_format.rs`.
// asynqmon divergence: COMPATIBILITY.md#a3

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

pub use super::go_format::rfc3339;
use super::go_format::{format_bytes, go_duration, go_round, go_time, go_zero, rfc3339_or_empty};
use crate::inspector::{
    DailyStats, GroupInfo, QueueInfo, SchedulerEnqueueEvent, SchedulerEntry, ServerInfo, TaskRow,
    WorkerInfo,
};
use crate::task::{TaskInfo, TaskState};

/// asynqmon `queueStateSnapshot`: one queue's numbers.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QueueSnapshot {
    pub queue: String,
    pub memory_usage_bytes: i64,
    pub size: i64,
    pub groups: i64,
    /// Latency in whole milliseconds (truncated).
    pub latency_msec: i64,
    /// Latency rounded to 10 ms in Go's duration notation (`1.23s`).
    pub display_latency: String,
    pub active: i64,
    pub pending: i64,
    pub aggregating: i64,
    pub scheduled: i64,
    pub retry: i64,
    pub archived: i64,
    pub completed: i64,
    /// Today's (UTC) processed count, successes and failures.
    pub processed: i64,
    /// processed − failed.
    pub succeeded: i64,
    pub failed: i64,
    pub paused: bool,
    /// When the numbers were read.
    pub timestamp: String,
}

impl From<&QueueInfo> for QueueSnapshot {
    fn from(i: &QueueInfo) -> Self {
        QueueSnapshot {
            queue: i.queue.clone(),
            memory_usage_bytes: i.memory_usage,
            size: i.size,
            groups: i.groups,
            latency_msec: i64::try_from(i.latency.as_millis()).unwrap_or(i64::MAX),
            display_latency: go_duration(go_round(i.latency, Duration::from_millis(10))),
            active: i.active,
            pending: i.pending,
            aggregating: i.aggregating,
            scheduled: i.scheduled,
            retry: i.retry,
            archived: i.archived,
            completed: i.completed,
            processed: i.processed,
            succeeded: i.processed - i.failed,
            failed: i.failed,
            paused: i.paused,
            timestamp: go_time(Some(i.timestamp)),
        }
    }
}

/// asynqmon `dailyStats`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DailyStatsJson {
    pub queue: String,
    pub processed: i64,
    pub succeeded: i64,
    pub failed: i64,
    /// `YYYY-MM-DD` (UTC day).
    pub date: String,
}

impl From<&DailyStats> for DailyStatsJson {
    fn from(s: &DailyStats) -> Self {
        DailyStatsJson {
            queue: s.queue.clone(),
            processed: s.processed,
            succeeded: s.processed - s.failed,
            failed: s.failed,
            date: s.date.format("%Y-%m-%d").to_string(),
        }
    }
}

/// asynqmon `groupInfo`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupJson {
    pub group: String,
    pub size: i64,
}

impl From<&GroupInfo> for GroupJson {
    fn from(g: &GroupInfo) -> Self {
        GroupJson {
            group: g.group.clone(),
            size: g.size,
        }
    }
}

/// asynqmon `baseTask`: the fields every task row has.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BaseTask {
    pub id: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub payload: String,
    pub queue: String,
    pub max_retry: i32,
    pub retried: i32,
    pub error_message: String,
    /// Only on a task whose stored message does not decode: why (asynq
    /// leaves such tasks out of listings). Its other fields are then empty.
    // asynqmon divergence: COMPATIBILITY.md#a5
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<String>,
}

/// One row of a task listing, shaped per state as asynqmon's
/// `activeTask`, `pendingTask`, `scheduledTask`, `retryTask`,
/// `archivedTask`, `completedTask` and `aggregatingTask`.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum TaskRowJson {
    /// `start_time`/`deadline` come from the worker running it (RFC 3339,
    /// or `-` when no server reports it).
    Active {
        #[serde(flatten)]
        base: BaseTask,
        start_time: String,
        deadline: String,
        is_orphaned: bool,
    },
    /// Pending: the base fields only.
    Pending {
        #[serde(flatten)]
        base: BaseTask,
    },
    /// Scheduled and retry: when it is due.
    Due {
        #[serde(flatten)]
        base: BaseTask,
        next_process_at: String,
    },
    /// Archived: when it last failed.
    Archived {
        #[serde(flatten)]
        base: BaseTask,
        last_failed_at: String,
    },
    /// Completed: when, its result and the seconds of retention left.
    Completed {
        #[serde(flatten)]
        base: BaseTask,
        completed_at: String,
        result: String,
        ttl_seconds: i64,
    },
    /// Aggregating: its group.
    Aggregating {
        #[serde(flatten)]
        base: BaseTask,
        group: String,
    },
}

/// Seconds of retention left for a completed task: completed_at +
/// retention − now, truncated toward zero; 0 for other states (asynqmon
/// `taskTTL`).
fn ttl_seconds(t: &TaskInfo, now: DateTime<Utc>) -> i64 {
    if t.state != TaskState::Completed {
        return 0;
    }
    let retention = chrono::Duration::from_std(t.retention).unwrap_or(chrono::Duration::zero());
    (t.completed_at.unwrap_or_else(go_zero) + retention - now).num_seconds()
}

/// Limits for previews in listings.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Characters of payload shown (`--max-payload-length`).
    pub payload: usize,
    /// Characters of result shown (`--max-result-length`).
    pub result: usize,
}

/// A listing row in the shape of `state`. `now` is for the completed TTL.
pub fn task_row(
    row: &TaskRow,
    state: TaskState,
    limits: Limits,
    now: DateTime<Utc>,
) -> TaskRowJson {
    let (base, info) = match row {
        TaskRow::Task(t) => (
            BaseTask {
                id: t.id.clone(),
                task_type: t.task_type.clone(),
                payload: format_bytes(&t.payload, Some(limits.payload)),
                queue: t.queue.clone(),
                max_retry: t.max_retry,
                retried: t.retried,
                error_message: t.last_err.clone(),
                corrupt: None,
            },
            Some(t),
        ),
        TaskRow::Corrupt { id, error, .. } => (
            BaseTask {
                id: id.clone(),
                task_type: String::new(),
                payload: String::new(),
                queue: String::new(),
                max_retry: 0,
                retried: 0,
                error_message: String::new(),
                corrupt: Some(error.clone()),
            },
            None,
        ),
    };
    match state {
        TaskState::Active => TaskRowJson::Active {
            base,
            start_time: "-".to_string(),
            deadline: "-".to_string(),
            is_orphaned: info.is_some_and(|t| t.is_orphaned),
        },
        TaskState::Pending => TaskRowJson::Pending { base },
        TaskState::Scheduled | TaskState::Retry => TaskRowJson::Due {
            base,
            next_process_at: go_time(info.and_then(|t| t.next_process_at)),
        },
        TaskState::Archived => TaskRowJson::Archived {
            base,
            last_failed_at: go_time(info.and_then(|t| t.last_failed_at)),
        },
        TaskState::Completed => TaskRowJson::Completed {
            base,
            completed_at: go_time(info.and_then(|t| t.completed_at)),
            result: info
                .map(|t| format_bytes(t.result.as_deref().unwrap_or_default(), Some(limits.result)))
                .unwrap_or_default(),
            ttl_seconds: info.map(|t| ttl_seconds(t, now)).unwrap_or(0),
        },
        TaskState::Aggregating => TaskRowJson::Aggregating {
            base,
            group: info.map(|t| t.group.clone()).unwrap_or_default(),
        },
    }
}

/// asynqmon `taskInfo`: the task detail (`GET /queues/{q}/tasks/{id}`).
/// Payload and result are shown whole (asynqmon cuts them, #301).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TaskDetail {
    pub id: String,
    pub queue: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub payload: String,
    pub state: String,
    pub max_retry: i32,
    pub retried: i32,
    pub error_message: String,
    /// RFC 3339, `""` when it never failed.
    pub last_failed_at: String,
    pub timeout_seconds: i64,
    /// RFC 3339, `""` when none.
    pub deadline: String,
    /// RFC 3339, `""` when not applicable.
    pub next_process_at: String,
    /// RFC 3339, `""` when not completed.
    pub completed_at: String,
    pub result: String,
    pub ttl_seconds: i64,
}

impl TaskDetail {
    /// The detail of `t`, with the TTL computed against `now`.
    pub fn new(t: &TaskInfo, now: DateTime<Utc>) -> Self {
        TaskDetail {
            id: t.id.clone(),
            queue: t.queue.clone(),
            task_type: t.task_type.clone(),
            payload: format_bytes(&t.payload, None),
            state: t.state.as_str().to_string(),
            max_retry: t.max_retry,
            retried: t.retried,
            error_message: t.last_err.clone(),
            last_failed_at: rfc3339_or_empty(t.last_failed_at),
            timeout_seconds: i64::try_from(t.timeout.as_secs()).unwrap_or(i64::MAX),
            deadline: rfc3339_or_empty(t.deadline),
            next_process_at: rfc3339_or_empty(t.next_process_at),
            completed_at: rfc3339_or_empty(t.completed_at),
            result: format_bytes(t.result.as_deref().unwrap_or_default(), None),
            ttl_seconds: ttl_seconds(t, now),
        }
    }
}

/// asynqmon `workerInfo` (inside a server).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WorkerJson {
    pub task_id: String,
    pub queue: String,
    pub task_type: String,
    pub task_payload: String,
    /// RFC 3339.
    pub start_time: String,
}

impl WorkerJson {
    fn new(w: &WorkerInfo, limits: Limits) -> Self {
        WorkerJson {
            task_id: w.task_id.clone(),
            queue: w.queue.clone(),
            task_type: w.task_type.clone(),
            task_payload: format_bytes(&w.task_payload, Some(limits.payload)),
            start_time: rfc3339(w.started),
        }
    }
}

/// asynqmon `serverInfo`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ServerJson {
    pub id: String,
    pub host: String,
    pub pid: i32,
    pub concurrency: i32,
    pub queue_priorities: BTreeMap<String, i32>,
    pub strict_priority_enabled: bool,
    /// RFC 3339.
    pub start_time: String,
    pub status: String,
    pub active_workers: Vec<WorkerJson>,
}

impl ServerJson {
    /// The server with its workers' payloads cut to `limits.payload`.
    pub fn new(s: &ServerInfo, limits: Limits) -> Self {
        ServerJson {
            id: s.server_id.clone(),
            host: s.host.clone(),
            pid: s.pid,
            concurrency: s.concurrency,
            queue_priorities: s.queues.clone(),
            strict_priority_enabled: s.strict_priority,
            start_time: rfc3339(s.started),
            status: s.status.clone(),
            active_workers: s
                .active_workers
                .iter()
                .map(|w| WorkerJson::new(w, limits))
                .collect(),
        }
    }
}

/// asynqmon `schedulerEntry`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SchedulerEntryJson {
    pub id: String,
    pub spec: String,
    pub task_type: String,
    pub task_payload: String,
    /// The enqueue options Go's inspector reads from the stored strings,
    /// in their `String()` form, as asynqmon lists them (the `TaskID`,
    /// `Group` and `Header` strings Go cannot read are left out; the
    /// `/schedulers` page shows every stored string, COMPATIBILITY.md Q8).
    pub options: Vec<String>,
    /// RFC 3339.
    pub next_enqueue_at: String,
    /// RFC 3339; absent when the entry never fired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prev_enqueue_at: Option<String>,
}

impl SchedulerEntryJson {
    /// The entry with its payload cut to `limits.payload`.
    pub fn new(e: &SchedulerEntry, limits: Limits) -> Self {
        SchedulerEntryJson {
            id: e.id.clone(),
            spec: e.spec.clone(),
            task_type: e.task_type.clone(),
            task_payload: format_bytes(&e.payload, Some(limits.payload)),
            options: crate::scheduler::go_inspector_option_strings(&e.options),
            next_enqueue_at: rfc3339(e.next_enqueue_at),
            prev_enqueue_at: e.prev_enqueue_at.map(|t| rfc3339(Some(t))),
        }
    }
}

/// asynqmon `schedulerEnqueueEvent`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EnqueueEventJson {
    pub task_id: String,
    /// RFC 3339.
    pub enqueued_at: String,
}

impl From<&SchedulerEnqueueEvent> for EnqueueEventJson {
    fn from(e: &SchedulerEnqueueEvent) -> Self {
        EnqueueEventJson {
            task_id: e.task_id.clone(),
            enqueued_at: rfc3339(Some(e.enqueued_at)),
        }
    }
}
