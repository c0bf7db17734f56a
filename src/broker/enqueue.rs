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
        let mut conn = self.conn();
        // Every time, not once per process as Go 0.25+.
        // asynq divergence: COMPATIBILITY.md#c5
        let _: i64 = redis::cmd("SADD")
            .arg(keys::ALL_QUEUES)
            .arg(&msg.queue)
            .query_async(&mut conn)
            .await?;
        let call = script_call(msg, target, unique, self.now());
        let mut inv = call.script.prepare_invoke();
        for key in &call.keys {
            inv.key(key);
        }
        for arg in &call.args {
            inv.arg(&arg[..]);
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

/// One enqueue script call: the script and its KEYS and ARGV, in the order
/// `enqueue.lua`, `schedule.lua` and `add_to_group.lua` take them (shared
/// by single and batch enqueue).
pub(super) struct ScriptCall {
    pub(super) script: &'static scripts::Lua,
    pub(super) keys: Vec<String>,
    pub(super) args: Vec<Vec<u8>>,
}

/// The script call that writes `msg` to `target` at `now`, with the lock
/// `unique` (key, TTL in whole seconds) when given.
pub(super) fn script_call(
    msg: &TaskMessage,
    target: &EnqueueTarget,
    unique: Option<(&str, u64)>,
    now: DateTime<Utc>,
) -> ScriptCall {
    use prost::Message;
    let task_key = keys::task_key(&msg.queue, &msg.id);
    let (script, mut keys, mut args): (&'static scripts::Lua, Vec<String>, Vec<Vec<u8>>) =
        match target {
            EnqueueTarget::Pending => (
                &scripts::ENQUEUE,
                vec![task_key, keys::pending_key(&msg.queue)],
                vec![num(now.timestamp_nanos_opt().unwrap_or(i64::MAX))],
            ),
            EnqueueTarget::Scheduled(at) => (
                &scripts::SCHEDULE,
                vec![task_key, keys::scheduled_key(&msg.queue)],
                vec![num(at.timestamp())],
            ),
            EnqueueTarget::Group(group) => (
                &scripts::ADD_TO_GROUP,
                vec![
                    task_key,
                    keys::group_key(&msg.queue, group),
                    keys::all_groups_key(&msg.queue),
                ],
                vec![num(now.timestamp()), group.as_bytes().to_vec()],
            ),
        };
    args.splice(0..0, [msg.encode_to_vec(), msg.id.as_bytes().to_vec()]);
    if let Some((lock, ttl_s)) = unique {
        keys.push(lock.to_string());
        args.push(num(ttl_s as i64));
    }
    ScriptCall { script, keys, args }
}

fn num(n: i64) -> Vec<u8> {
    n.to_string().into_bytes()
}
