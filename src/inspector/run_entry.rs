//! "Run now" for a scheduler entry: one enqueue of the entry's task, as a
//! fire of its scheduler would make it, recorded in the entry's history
//! (asynqdeck only; asynqmon has no such action).

use super::{Inspector, SchedulerEntry};
use crate::broker::proto::{SchedulerEnqueueEvent, Timestamp};
use crate::client::Client;
use crate::error::{Error, Result};
use crate::scheduler::parse_option_strings;
use crate::task::{Task, TaskInfo};

impl SchedulerEntry {
    /// The option strings that cannot be read back into enqueue options
    /// ([`parse_option_strings`]); empty when the entry can be run by hand
    /// with exactly the options its scheduler uses.
    pub fn unreadable_options(&self) -> Vec<String> {
        parse_option_strings(&self.options).1
    }
}

impl Inspector {
    /// Enqueues the task of the published scheduler entry `entry_id` now,
    /// as a fire of its scheduler would: its task type and payload, its
    /// option strings read back into options ([`parse_option_strings`]),
    /// through [`Client::enqueue`]. Then records the enqueue in the entry's
    /// history (Go `RecordSchedulerEnqueueEvent`,
    /// `asynq:scheduler_history:<entry id>`, capped at 1,000 events), as
    /// the scheduler does after a fire (a failure to record is logged, the
    /// task stays enqueued, as the scheduler does). The scheduler's own timing (next
    /// and previous enqueue) is not changed. Works for entries of Go
    /// schedulers and of ours alike.
    ///
    /// Returns the new task's [`TaskInfo`].
    ///
    /// Errors: [`Error::SchedulerEntryNotFound`] when no running scheduler
    /// publishes the entry; [`Error::FailedPrecondition`] naming the option
    /// strings that cannot be read (nothing enqueued); the errors of
    /// [`Client::enqueue`] (e.g. [`Error::DuplicateTask`] for a unique
    /// entry whose lock is held); [`Error::Redis`].
    pub async fn run_scheduler_entry(&self, entry_id: &str) -> Result<TaskInfo> {
        let entry: SchedulerEntry = self
            .broker
            .scheduler_entry(entry_id)
            .await?
            .ok_or_else(|| Error::SchedulerEntryNotFound {
                id: entry_id.to_string(),
            })?
            .into();
        let (options, unread) = parse_option_strings(&entry.options);
        if !unread.is_empty() {
            return Err(Error::FailedPrecondition(format!(
                "entry {entry_id} cannot be run by hand: its options {unread:?} cannot be read"
            )));
        }
        let task = Task::new(entry.task_type, entry.payload);
        let info = Client::from_broker(self.broker.clone())
            .enqueue(&task, options)
            .await?;
        let event = SchedulerEnqueueEvent {
            task_id: info.id.clone(),
            enqueue_time: Some(Timestamp::from_utc(Some(self.broker.now()))),
        };
        if let Err(e) = self
            .broker
            .record_scheduler_enqueue_event(entry_id, &event)
            .await
        {
            // The task is enqueued: say so, as the scheduler does.
            tracing::warn!(entry = %entry_id, task = %info.id, error = %e,
                "could not record a Run now enqueue in the entry's history");
        }
        Ok(info)
    }
}
