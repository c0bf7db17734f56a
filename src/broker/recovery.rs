//! The recoverer's Redis steps beyond Go's `ListLeaseExpired`: the orphan
//! scan of `active` (issue 12 R4) and the earliest lease of a queue, which
//! schedules the next look at it (issue 12 R8).
//!
//! Every call here costs O(chunk) in Redis, whatever the size of the queue:
//! `active` is read with `LRANGE` on tail-relative indices in chunks, and
//! the lease zset with `ZRANGEBYSCORE … LIMIT 0 1`.

use chrono::{DateTime, Utc};

use super::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// Ids of `active` read per orphan-scan call (each call is well under
/// 1 ms of Redis time).
pub const ORPHAN_SCAN_CHUNK: usize = 100;

/// What an active id lacks, as the orphan scan saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lacks {
    /// No entry in `asynq:{<q>}:lease`.
    pub lease: bool,
    /// No task key `asynq:{<q>}:t:<id>`.
    pub task: bool,
}

/// One chunk of the orphan scan of `active`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ActiveChunk {
    /// Length of `active` when the chunk was read (0 when it is not a list).
    pub len: usize,
    /// The ids of the chunk that lack a lease entry or a task key.
    pub suspects: Vec<(String, Lacks)>,
}

/// What [`Broker::adopt_orphan`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Adopted {
    /// The task had no lease: it now has one that already expired, so the
    /// lease-expired recovery takes it.
    Leased,
    /// The task key was gone: the id left `active` and `lease`.
    Dropped,
    /// Nothing to do: it has a lease and a task key now, or left `active`.
    Healthy,
}

impl Broker {
    /// Reads up to [`ORPHAN_SCAN_CHUNK`] ids of `queue`'s `active` list,
    /// starting `offset` ids from its oldest end (the tail), and returns
    /// those without a lease entry or without a task key (script
    /// `scan_active`). An `active` key of another type reads as empty.
    /// Errors: [`Error::Redis`], [`Error::Internal`] for a reply of the
    /// wrong shape.
    pub async fn scan_active(&self, queue: &str, offset: usize) -> Result<ActiveChunk> {
        let reply: Vec<redis::Value> = scripts::SCAN_ACTIVE
            .key(keys::active_key(queue))
            .key(keys::lease_key(queue))
            .arg(offset)
            .arg(ORPHAN_SCAN_CHUNK)
            .arg(keys::task_key_prefix(queue))
            .invoke_async(&mut self.conn())
            .await?;
        let bad = |what: &str| Error::Internal(format!("scan_active replied {what}"));
        let mut values = reply.into_iter();
        let len = match values.next() {
            Some(redis::Value::Int(n)) if n < 0 => return Ok(ActiveChunk::default()),
            Some(redis::Value::Int(n)) => n as usize,
            other => return Err(bad(&format!("{other:?} for the length"))),
        };
        let mut suspects = Vec::new();
        while let Some(id) = values.next() {
            let (redis::Value::BulkString(id), Some(redis::Value::Int(flags))) =
                (id, values.next())
            else {
                return Err(bad("an entry that is not an id and flags"));
            };
            let lacks = Lacks {
                lease: flags & 1 != 0,
                task: flags & 2 != 0,
            };
            suspects.push((String::from_utf8_lossy(&id).into_owned(), lacks));
        }
        Ok(ActiveChunk { len, suspects })
    }

    /// Settles an active id of `queue` that the orphan scan found lacking
    /// a grace period ago, if it still does (script `adopt_orphan`): an id
    /// whose task key is gone leaves `active` and `lease`
    /// ([`Adopted::Dropped`]); a task without a lease entry gets one scored
    /// `expired_at` ([`Adopted::Leased`]), which the caller passes at or
    /// before the recoverer's cutoff so that the lease-expired path retries
    /// or archives it as it would a crashed worker's task.
    /// Errors: [`Error::Redis`], [`Error::Internal`] for an unknown code.
    pub async fn adopt_orphan(
        &self,
        queue: &str,
        id: &str,
        expired_at: DateTime<Utc>,
    ) -> Result<Adopted> {
        let code: i64 = scripts::ADOPT_ORPHAN
            .key(keys::active_key(queue))
            .key(keys::lease_key(queue))
            .key(keys::task_key(queue, id))
            .arg(id)
            .arg(expired_at.timestamp())
            .invoke_async(&mut self.conn())
            .await?;
        match code {
            2 => Ok(Adopted::Dropped),
            1 => Ok(Adopted::Leased),
            0 => Ok(Adopted::Healthy),
            other => Err(Error::Internal(format!("adopt_orphan replied {other}"))),
        }
    }

    /// The earliest lease expiry of `queue` strictly after `after` (unix
    /// s), or `None` when no lease ends later (`ZRANGEBYSCORE lease
    /// (after +inf WITHSCORES LIMIT 0 1`). Leases at or before `after` are
    /// the recoverer's to take (or ones it could not move) and are skipped,
    /// so one stuck entry cannot make it look again every second.
    /// Errors: [`Error::Redis`] (also for a lease key of another type).
    pub async fn earliest_lease_after(
        &self,
        queue: &str,
        after: DateTime<Utc>,
    ) -> Result<Option<DateTime<Utc>>> {
        let first: Vec<(String, f64)> = redis::cmd("ZRANGEBYSCORE")
            .arg(keys::lease_key(queue))
            .arg(format!("({}", after.timestamp()))
            .arg("+inf")
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(1)
            .query_async(&mut self.conn())
            .await?;
        Ok(first
            .first()
            .and_then(|(_, score)| DateTime::from_timestamp(*score as i64, 0)))
    }
}
