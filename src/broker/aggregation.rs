//! Group aggregation: the Redis steps of the aggregator (Go
//! `rdb.ListGroups`, `AggregationCheck`, `ReadAggregationSet`,
//! `DeleteAggregationSet`; wire spec §6.13, §7.6).
//!
//! Same keys and the same effects as Go's scripts, with every call bounded
//! (COMPATIBILITY.md M4): a set takes at most [`AGGREGATION_SET_MAX`]
//! tasks, groups are listed with `SSCAN`, and a set is read and deleted in
//! chunks of [`AGGREGATION_CHUNK`] tasks.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::proto::{TaskMessage, WireTask};
use super::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// Most tasks one aggregation set takes (asynqdeck's bound; Go takes every
/// task of a group without a max size in one call). The rest of a ready
/// group forms the next set at the next check.
pub const AGGREGATION_SET_MAX: usize = 5_000;

/// Tasks of a set read, or deleted, per call.
pub const AGGREGATION_CHUNK: usize = 500;

/// How long a set may wait for its aggregated task before the recoverer
/// gives its tasks back to the group (Go `aggregationTimeout`, 2 min).
pub const AGGREGATION_SET_TIMEOUT: Duration = Duration::from_secs(120);

/// A set member's id and its task hash's `msg` (`None`: no hash).
type IdAndMsg = (String, Option<Vec<u8>>);

/// Group names listed per `SSCAN` step.
const GROUPS_SCAN_COUNT: usize = 1_000;

/// When a group is aggregated (Go `Config.GroupGracePeriod`,
/// `GroupMaxDelay`, `GroupMaxSize`; all in whole seconds on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupRules {
    /// Aggregate once the newest task waited this long.
    pub grace_period: Duration,
    /// Aggregate once the oldest task waited this long; zero: no limit.
    pub max_delay: Duration,
    /// Aggregate once the group holds this many tasks, and put at most this
    /// many in one set; 0: no limit (but [`AGGREGATION_SET_MAX`]).
    pub max_size: usize,
}

/// One member of an aggregation set, as read.
#[derive(Clone, Debug, PartialEq)]
pub enum SetMember {
    /// A task whose message decoded.
    Task(Box<TaskMessage>),
    /// A task whose `msg` is not a valid TaskMessage: the id and why.
    Undecodable {
        /// The task id.
        id: String,
        /// The decode error.
        reason: String,
    },
}

/// An aggregation set as [`Broker::read_aggregation_set`] returns it.
#[derive(Clone, Debug, PartialEq)]
pub struct AggregationSet {
    /// Members in the group's order (oldest first); members whose task hash
    /// is gone are left out.
    pub members: Vec<SetMember>,
    /// When the recoverer gives the set back to its group (UTC, whole
    /// seconds); `None` when the set is no longer listed.
    pub deadline: Option<DateTime<Utc>>,
}

impl Broker {
    /// Every group name of `queue` (`SSCAN` of `asynq:{<queue>}:groups` in
    /// steps of 1,000; Go `ListGroups`), sorted. A key of another type reads
    /// as no groups. Errors: [`Error::Redis`].
    pub async fn list_groups(&self, queue: &str) -> Result<Vec<String>> {
        let mut conn = self.conn();
        let key = keys::all_groups_key(queue);
        let kind: String = redis::cmd("TYPE").arg(&key).query_async(&mut conn).await?;
        if kind != "set" {
            return Ok(Vec::new());
        }
        let mut cursor = 0u64;
        let mut out = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SSCAN")
                .arg(&key)
                .arg(cursor)
                .arg("COUNT")
                .arg(GROUPS_SCAN_COUNT)
                .query_async(&mut conn)
                .await?;
            out.extend(batch);
            cursor = next;
            if cursor == 0 {
                break;
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Checks `group` of `queue` at `at` (Go `AggregationCheck`): when the
    /// group holds at least `max_size` tasks, its oldest waited `max_delay`
    /// or its newest waited the grace period, its oldest tasks (at most
    /// `max_size` and [`AGGREGATION_SET_MAX`]) move into a new set
    /// `asynq:{<queue>}:g:<group>:<set id>` whose deadline is `at` + 2 min.
    /// Returns the set id, or `None` when the group is not ready (or gone).
    /// Errors: [`Error::Redis`]; [`Error::Internal`] when the group key is
    /// not a sorted set.
    pub async fn aggregation_check(
        &self,
        queue: &str,
        group: &str,
        at: DateTime<Utc>,
        rules: GroupRules,
    ) -> Result<Option<String>> {
        let set_id = uuid::Uuid::new_v4().to_string();
        let deadline = at.timestamp() + AGGREGATION_SET_TIMEOUT.as_secs() as i64;
        let moved: i64 = scripts::AGGREGATION_CHECK
            .key(keys::group_key(queue, group))
            .key(keys::aggregation_set_key(queue, group, &set_id))
            .key(keys::all_aggregation_sets_key(queue))
            .key(keys::all_groups_key(queue))
            .arg(rules.max_size)
            .arg(rules.max_delay.as_secs())
            .arg(rules.grace_period.as_secs())
            .arg(deadline)
            .arg(at.timestamp())
            .arg(group)
            .arg(AGGREGATION_SET_MAX)
            .invoke_async(&mut self.conn())
            .await?;
        match moved {
            0 => Ok(None),
            n if n > 0 => Ok(Some(set_id)),
            _ => Err(Error::Internal(format!(
                "group key {} is not a sorted set",
                keys::group_key(queue, group)
            ))),
        }
    }

    /// Reads set `set_id` of `group` (Go `ReadAggregationSet`), in chunks
    /// of [`AGGREGATION_CHUNK`]: every member's message, oldest first, and
    /// the set's deadline. A member whose message does not decode comes
    /// back as [`SetMember::Undecodable`]; one whose task hash is gone is
    /// left out (Go passes an empty task). Errors: [`Error::Redis`].
    pub async fn read_aggregation_set(
        &self,
        queue: &str,
        group: &str,
        set_id: &str,
    ) -> Result<AggregationSet> {
        let set_key = keys::aggregation_set_key(queue, group, set_id);
        let prefix = keys::task_key_prefix(queue);
        let mut members = Vec::new();
        let mut deadline;
        let mut first = 0usize;
        loop {
            let (score, entries): (Option<f64>, Vec<IdAndMsg>) = scripts::READ_AGGREGATION_SET
                .key(&set_key)
                .key(keys::all_aggregation_sets_key(queue))
                .arg(first)
                .arg(first + AGGREGATION_CHUNK - 1)
                .arg(&prefix)
                .invoke_async(&mut self.conn())
                .await?;
            deadline = score.and_then(|s| DateTime::from_timestamp(s as i64, 0));
            let n = entries.len();
            for (id, msg) in entries {
                let Some(bytes) = msg else { continue };
                if let Some(kind) = bytes.strip_prefix(b"wrongtype:") {
                    members.push(SetMember::Undecodable {
                        id,
                        reason: format!(
                            "the task key is a {}, not a hash",
                            String::from_utf8_lossy(kind)
                        ),
                    });
                    continue;
                }
                members.push(match WireTask::decode(&bytes) {
                    Ok(w) => SetMember::Task(Box::new(w.msg)),
                    Err(reason) => SetMember::Undecodable { id, reason },
                });
            }
            if n < AGGREGATION_CHUNK {
                break;
            }
            first += AGGREGATION_CHUNK;
        }
        Ok(AggregationSet { members, deadline })
    }

    /// Deletes set `set_id` of `group` and its tasks' hashes once their
    /// aggregated task is enqueued (Go `DeleteAggregationSet`), in chunks of
    /// [`AGGREGATION_CHUNK`]; the first chunk takes the set out of
    /// `asynq:{<queue>}:aggregation_sets`, so the recoverer never gives an
    /// aggregated set back. The tasks in `keep` (ids whose message did not
    /// decode) are archived instead of deleted. Uniqueness locks stay, as
    /// Go leaves them. Errors: [`Error::Redis`].
    pub async fn delete_aggregation_set(
        &self,
        queue: &str,
        group: &str,
        set_id: &str,
        keep: &[String],
    ) -> Result<()> {
        let set_key = keys::aggregation_set_key(queue, group, set_id);
        loop {
            let mut inv = scripts::DELETE_AGGREGATION_SET.prepare_invoke();
            inv.key(&set_key)
                .key(keys::all_aggregation_sets_key(queue))
                .key(keys::archived_key(queue))
                .arg(keys::task_key_prefix(queue))
                .arg(AGGREGATION_CHUNK)
                .arg(self.now().timestamp());
            for id in keep {
                inv.arg(id);
            }
            let left: i64 = inv.invoke_async(&mut self.conn()).await?;
            if left == 0 {
                return Ok(());
            }
        }
    }
}
