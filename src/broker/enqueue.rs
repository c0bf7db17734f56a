//! Client writes: create a task as pending, scheduled or aggregating.
//!
//! Go: `rdb.Enqueue`, `EnqueueUnique`, `Schedule`, `ScheduleUnique`,
//! `AddToGroup`, `AddToGroupUnique` (wire spec §5, §6.1–6.3, §6.12).

use chrono::{DateTime, Utc};

use super::{Broker, keys, proto::TaskMessage, scripts};
use crate::error::{Error, Result};

/// Where a new task goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnqueueTarget {
    /// The pending list; `pending_since` is set to now (unix ns).
    Pending,
    /// The scheduled set, due at this time (stored as whole unix seconds).
    Scheduled(DateTime<Utc>),
    /// The group's zset, scored with now (unix s).
    Group(String),
}

impl Broker {
    /// Writes a new task. `unique` is `(lock key, TTL in whole seconds)`.
    ///
    /// Adds the queue to `asynq:queues` first (as Go, not atomic with the
    /// script; idempotent). Errors: [`Error::TaskIdConflict`] when the id is
    /// taken, [`Error::DuplicateTask`] when the lock is held, [`Error::Redis`].
    pub async fn enqueue(
        &self,
        msg: &TaskMessage,
        target: &EnqueueTarget,
        unique: Option<(&str, u64)>,
    ) -> Result<()> {
        use prost::Message;
        let mut conn = self.conn();
        // Every time, not once per process as Go 0.25+.
        // asynq divergence: COMPATIBILITY.md#c5
        let _: i64 = redis::cmd("SADD")
            .arg(keys::ALL_QUEUES)
            .arg(&msg.queue)
            .query_async(&mut conn)
            .await?;
        let now = self.now();
        let encoded = msg.encode_to_vec();
        let task_key = keys::task_key(&msg.queue, &msg.id);
        let mut inv;
        match target {
            EnqueueTarget::Pending => {
                inv = scripts::ENQUEUE.prepare_invoke();
                inv.key(&task_key).key(keys::pending_key(&msg.queue));
                if let Some((lock, _)) = unique {
                    inv.key(lock);
                }
                inv.arg(&encoded[..])
                    .arg(&msg.id)
                    .arg(now.timestamp_nanos_opt().unwrap_or(i64::MAX));
            }
            EnqueueTarget::Scheduled(at) => {
                inv = scripts::SCHEDULE.prepare_invoke();
                inv.key(&task_key).key(keys::scheduled_key(&msg.queue));
                if let Some((lock, _)) = unique {
                    inv.key(lock);
                }
                inv.arg(&encoded[..]).arg(&msg.id).arg(at.timestamp());
            }
            EnqueueTarget::Group(group) => {
                inv = scripts::ADD_TO_GROUP.prepare_invoke();
                inv.key(&task_key)
                    .key(keys::group_key(&msg.queue, group))
                    .key(keys::all_groups_key(&msg.queue));
                if let Some((lock, _)) = unique {
                    inv.key(lock);
                }
                inv.arg(&encoded[..])
                    .arg(&msg.id)
                    .arg(now.timestamp())
                    .arg(group);
            }
        }
        if let Some((_, ttl_s)) = unique {
            inv.arg(ttl_s);
        }
        let code: i64 = inv.invoke_async(&mut conn).await?;
        match code {
            1 => Ok(()),
            0 => Err(Error::TaskIdConflict),
            -1 => Err(Error::DuplicateTask),
            other => Err(Error::Internal(format!("enqueue script replied {other}"))),
        }
    }
}
