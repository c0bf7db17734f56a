//! Reads of the scheduler replica groups (issue 16): which replicas of a
//! group are alive and which one holds the lease. The writes (lease,
//! heartbeat, tick claims) are in `scheduler_lease.rs`. Key layout:
//! [`keys::scheduler_leader_key`].

use chrono::{DateTime, Utc};

use super::{Broker, from_unix_s, keys};
use crate::error::Result;

/// Most replica groups read by [`Broker::scheduler_groups`].
pub const SCHEDULER_GROUPS_MAX: usize = 1_000;

/// One live replica of a scheduler replica group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulerReplica {
    /// Its scheduler id (`<host>:<pid>:<uuid>`), also the key of its
    /// published entries when active (`asynq:schedulers:{<id>}`).
    pub scheduler_id: String,
    /// Whether it holds the group's lease.
    pub active: bool,
    /// When its registration lapses unless renewed (UTC, whole seconds).
    pub expires_at: Option<DateTime<Utc>>,
}

impl Broker {
    /// The names of the scheduler replica groups in use (`SSCAN` of
    /// `asynqdeck:{scheduler}:groups`, at most [`SCHEDULER_GROUPS_MAX`]),
    /// sorted. Errors: [`crate::Error::Redis`].
    pub async fn scheduler_groups(&self) -> Result<Vec<String>> {
        let mut conn = self.conn();
        let mut cursor = 0u64;
        let mut out = Vec::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SSCAN")
                .arg(keys::SCHEDULER_GROUPS)
                .arg(cursor)
                .arg("COUNT")
                .arg(200)
                .query_async(&mut conn)
                .await?;
            out.extend(batch);
            cursor = next;
            if cursor == 0 || out.len() >= SCHEDULER_GROUPS_MAX {
                break;
            }
        }
        out.sort();
        out.dedup();
        out.truncate(SCHEDULER_GROUPS_MAX);
        Ok(out)
    }

    /// The live replicas of `group` (registration not lapsed), the active
    /// one first, then by id; plus the lease holder's id even when it has
    /// no live registration. One transaction on the group's slot.
    /// Errors: [`crate::Error::Redis`].
    pub async fn scheduler_replicas(&self, group: &str) -> Result<Vec<SchedulerReplica>> {
        let now = self.now().timestamp();
        let (leader, live): (Option<String>, Vec<(String, f64)>) = redis::pipe()
            .atomic()
            .cmd("GET")
            .arg(keys::scheduler_leader_key(group))
            .cmd("ZRANGE")
            .arg(keys::scheduler_replicas_key(group))
            .arg(now)
            .arg("+inf")
            .arg("BYSCORE")
            .arg("LIMIT")
            .arg(0)
            .arg(SCHEDULER_GROUPS_MAX)
            .arg("WITHSCORES")
            .query_async(&mut self.conn())
            .await?;
        let mut out: Vec<SchedulerReplica> = live
            .into_iter()
            .map(|(id, score)| SchedulerReplica {
                active: leader.as_deref() == Some(id.as_str()),
                expires_at: from_unix_s(score as i64),
                scheduler_id: id,
            })
            .collect();
        if let Some(leader) = leader
            && !out.iter().any(|r| r.scheduler_id == leader)
        {
            out.push(SchedulerReplica {
                scheduler_id: leader,
                active: true,
                expires_at: None,
            });
        }
        out.sort_by(|a, b| {
            b.active
                .cmp(&a.active)
                .then_with(|| a.scheduler_id.cmp(&b.scheduler_id))
        });
        Ok(out)
    }
}
