//! Enqueues tasks. Go: `client.go` (`Client.Enqueue`).
//!
//! The client writes a task once, with its retry ceiling (`MaxRetry`, default
//! 25) baked in; workers keep the count (S1–S3).

mod batch;

pub use batch::BatchResult;

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::broker::proto::TaskMessage;
use crate::broker::{Broker, EnqueueTarget, keys};
use crate::error::{Error, Result};
use crate::task::{
    DEFAULT_MAX_RETRY, DEFAULT_QUEUE, DEFAULT_TIMEOUT, EnqueueOptions, ProcessAt, Task, TaskInfo,
    TaskState,
};

/// Enqueues tasks into Redis, as Go's `asynq.Client` does.
#[derive(Clone, Debug)]
pub struct Client {
    broker: Broker,
}

impl Client {
    /// Connects to Redis at `url` (`redis://host:port/db`). Errors with
    /// [`Error::Redis`] when Redis cannot be reached.
    pub async fn connect(url: &str) -> Result<Self> {
        Ok(Client {
            broker: Broker::connect(url).await?,
        })
    }

    /// A client on an existing broker connection.
    pub fn from_broker(broker: Broker) -> Self {
        Client { broker }
    }

    /// The broker this client writes through.
    pub fn broker(&self) -> &Broker {
        &self.broker
    }

    /// Enqueues `task` with `options` applied over the task's own defaults
    /// (an enqueue option beats the task's default, S2). Mirrors Go
    /// `Client.Enqueue`:
    ///
    /// - a process-at strictly in the future makes the task `scheduled`
    ///   (even with a group, as Go does); else a group makes it
    ///   `aggregating`; else it is `pending`;
    /// - max retry defaults to 25 (negative becomes 0); timeout defaults to
    ///   30 min when neither timeout nor deadline is given; timeout and
    ///   retention are stored in whole seconds, deadline in unix seconds;
    /// - `unique(ttl)` locks `asynq:{queue}:unique:<type>:<md5(payload)>` for
    ///   `ttl` (for a scheduled task, until process-at + ttl).
    ///
    /// Returns the new task's [`TaskInfo`] (`next_process_at`: now for pending,
    /// process-at for scheduled, `None` for aggregating).
    ///
    /// Errors: [`Error::EmptyTaskType`], [`Error::InvalidQueueName`],
    /// [`Error::InvalidArgument`] for a queue name a Redis Cluster cannot
    /// hold ([`Broker::check_queue_name`]), [`Error::EmptyTaskId`], [`Error::UniqueTtlTooShort`],
    /// [`Error::EmptyGroup`], [`Error::TaskIdConflict`],
    /// [`Error::DuplicateTask`], [`Error::Redis`].
    pub async fn enqueue(&self, task: &Task, options: EnqueueOptions) -> Result<TaskInfo> {
        let new = self.prepare(task, options)?;
        let unique = new.unique.as_ref().map(|(key, ttl)| (key.as_str(), *ttl));
        self.broker.enqueue(&new.msg, &new.target, unique).await?;
        Ok(new.into_info())
    }

    /// Validates `task` under `options` and builds what the broker writes:
    /// the one place where an enqueue's message, target and lock are
    /// decided (single and batch enqueue). Errors as [`Client::enqueue`]
    /// before Redis is reached.
    fn prepare(&self, task: &Task, options: EnqueueOptions) -> Result<NewTask> {
        if task.type_name().trim().is_empty() {
            return Err(Error::EmptyTaskType);
        }
        let opts = options.or(task.options());
        let queue = opts.queue.unwrap_or_else(|| DEFAULT_QUEUE.to_string());
        self.broker.check_queue_name(&queue)?;
        let id = match opts.task_id {
            Some(id) if id.trim().is_empty() => return Err(Error::EmptyTaskId),
            Some(id) => id,
            None => uuid::Uuid::new_v4().to_string(),
        };
        if let Some(ttl) = opts.unique
            && ttl < Duration::from_secs(1)
        {
            return Err(Error::UniqueTtlTooShort);
        }
        if let Some(g) = &opts.group
            && g.trim().is_empty()
        {
            return Err(Error::EmptyGroup);
        }

        let now = self.broker.now();
        let process_at = match opts.process_at {
            None => now,
            Some(ProcessAt::At(t)) => t,
            Some(ProcessAt::In(d)) => now + chrono_duration(d),
        };
        let timeout = opts.timeout.unwrap_or_default();
        // Go applies the default only when neither option is non-zero, so a
        // sub-second timeout alone stores 0 (Go quirk kept: COMPATIBILITY.md#c4).
        let timeout_s = if timeout.is_zero() && opts.deadline.is_none() {
            DEFAULT_TIMEOUT.as_secs() as i64
        } else {
            timeout.as_secs() as i64
        };
        let unique_key = opts
            .unique
            .map(|_| keys::unique_key(&queue, task.type_name(), task.payload_opt()));
        let msg = TaskMessage {
            r#type: task.type_name().to_string(),
            payload: task.payload().to_vec(),
            headers: {
                // Go master `Header(k, v)`: option headers over the task's.
                let mut h = task.headers().clone();
                h.extend(opts.headers.clone());
                h
            },
            id,
            queue,
            retry: opts.max_retry.unwrap_or(DEFAULT_MAX_RETRY).max(0),
            retried: 0,
            error_msg: String::new(),
            last_failed_at: 0,
            timeout: timeout_s,
            deadline: opts.deadline.map(|d| d.timestamp()).unwrap_or(0),
            unique_key: unique_key.clone().unwrap_or_default(),
            group_key: opts.group.clone().unwrap_or_default(),
            retention: opts.retention.map(|d| d.as_secs() as i64).unwrap_or(0),
            completed_at: 0,
        };

        // A future process time wins over a group, and the scheduled hash gets
        // no group field (Go quirk kept: COMPATIBILITY.md#c3).
        let (target, state, next) = if process_at > now {
            (
                EnqueueTarget::Scheduled(process_at),
                TaskState::Scheduled,
                Some(process_at),
            )
        } else if let Some(g) = &opts.group {
            (
                EnqueueTarget::Group(g.clone()),
                TaskState::Aggregating,
                None,
            )
        } else {
            (EnqueueTarget::Pending, TaskState::Pending, Some(now))
        };
        let unique = match (unique_key, opts.unique) {
            (Some(key), Some(ttl)) => {
                let ttl = match target {
                    // The lock outlives the schedule (Go ScheduleUnique).
                    EnqueueTarget::Scheduled(at) => {
                        (at - now).to_std().unwrap_or_default().saturating_add(ttl)
                    }
                    _ => ttl,
                };
                Some((key, ttl.as_secs()))
            }
            _ => None,
        };
        Ok(NewTask {
            msg,
            target,
            state,
            next,
            unique,
        })
    }
}

/// One validated enqueue, ready for the broker ([`Client::prepare`]).
struct NewTask {
    msg: TaskMessage,
    target: EnqueueTarget,
    state: TaskState,
    next: Option<DateTime<Utc>>,
    /// Lock key and TTL in whole seconds, for a unique task.
    unique: Option<(String, u64)>,
}

impl NewTask {
    /// The [`TaskInfo`] of the task once written.
    fn into_info(self) -> TaskInfo {
        TaskInfo::from_message(self.msg, self.state, self.next, None, false)
    }
}

fn chrono_duration(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::MAX)
}

impl TaskInfo {
    /// Builds a `TaskInfo` from a decoded message (Go `newTaskInfo`, spec §11).
    pub(crate) fn from_message(
        msg: TaskMessage,
        state: TaskState,
        next_process_at: Option<DateTime<Utc>>,
        result: Option<Vec<u8>>,
        is_orphaned: bool,
    ) -> TaskInfo {
        use crate::broker::from_unix_s;
        TaskInfo {
            id: msg.id,
            queue: msg.queue,
            task_type: msg.r#type,
            payload: msg.payload,
            headers: msg.headers,
            state,
            max_retry: msg.retry,
            retried: msg.retried,
            last_err: msg.error_msg,
            last_failed_at: from_unix_s(msg.last_failed_at),
            timeout: Duration::from_secs(msg.timeout.max(0) as u64),
            deadline: from_unix_s(msg.deadline),
            group: msg.group_key,
            next_process_at,
            is_orphaned,
            retention: Duration::from_secs(msg.retention.max(0) as u64),
            completed_at: from_unix_s(msg.completed_at),
            result: result.filter(|r| !r.is_empty()),
        }
    }
}
