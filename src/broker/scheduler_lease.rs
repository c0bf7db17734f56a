//! Writes of the scheduler replica groups (issue 16, beyond Go): the lease
//! that picks the one active scheduler of a group, the replicas'
//! registrations and the tick claims. Key layout:
//! [`keys::scheduler_leader_key`]; reads: `scheduler_replicas.rs`.

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{Broker, keys, scripts};
use crate::error::Result;

impl Broker {
    /// Registers `scheduler_id` in `group` until now + `registration` and
    /// takes or renews the group's lease for `lease` (`scheduler_lease`
    /// script; plus `SADD asynqdeck:{scheduler}:groups`). Returns whether
    /// this replica holds the lease. Errors: [`crate::Error::Redis`].
    pub async fn scheduler_lease(
        &self,
        group: &str,
        scheduler_id: &str,
        lease: Duration,
        registration: Duration,
    ) -> Result<bool> {
        let mut conn = self.conn();
        let _: i64 = redis::cmd("SADD")
            .arg(keys::SCHEDULER_GROUPS)
            .arg(group)
            .query_async(&mut conn)
            .await?;
        let now = self.now().timestamp();
        let held: i64 = scripts::SCHEDULER_LEASE
            .key(keys::scheduler_leader_key(group))
            .key(keys::scheduler_replicas_key(group))
            .arg(scheduler_id)
            .arg(lease.as_millis().max(1) as u64)
            .arg(now + registration.as_secs().max(1) as i64)
            .arg(now)
            .invoke_async(&mut conn)
            .await?;
        Ok(held == 1)
    }

    /// Drops `scheduler_id` from `group` and its lease if it holds it
    /// (`scheduler_release` script). Returns whether it held the lease.
    /// Errors: [`crate::Error::Redis`].
    pub async fn scheduler_release(&self, group: &str, scheduler_id: &str) -> Result<bool> {
        let held: i64 = scripts::SCHEDULER_RELEASE
            .key(keys::scheduler_leader_key(group))
            .key(keys::scheduler_replicas_key(group))
            .arg(scheduler_id)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(held == 1)
    }

    /// Claims the fire ticks `(entry hash, tick)` for the lease holder
    /// `scheduler_id` (`scheduler_claim_ticks` script; ticks in unix ms).
    /// Returns the indexes into `ticks` claimed: none when it does not hold
    /// the lease, and only ticks later than the entry's last claimed one.
    /// Errors: [`crate::Error::Redis`].
    pub async fn scheduler_claim_ticks(
        &self,
        group: &str,
        scheduler_id: &str,
        ticks: &[(String, DateTime<Utc>)],
    ) -> Result<Vec<usize>> {
        if ticks.is_empty() {
            return Ok(Vec::new());
        }
        let mut inv = scripts::SCHEDULER_CLAIM_TICKS.prepare_invoke();
        inv.key(keys::scheduler_leader_key(group))
            .key(keys::scheduler_fired_key(group))
            .arg(scheduler_id);
        for (hash, tick) in ticks {
            inv.arg(hash).arg(tick.timestamp_millis());
        }
        let claimed: Vec<usize> = inv.invoke_async(&mut self.conn()).await?;
        Ok(claimed
            .into_iter()
            .filter_map(|n| n.checked_sub(1))
            .collect())
    }
}
