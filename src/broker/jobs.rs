//! Background bulk jobs in Redis (asynqdeck only, issue 15): a job's keys,
//! its creation, lease, cancel and failure, reading it back, and the global
//! index runners poll. The chunk scripts that do the work are in
//! `jobs_chunks.rs`.
//!
//! Keys (every one hash-tagged, so a job's keys share its queue's slot and
//! each script touches one slot only):
//! - `asynqdeck:{<q>}:job:<id>`: HASH, the job (fields: `queue`, `state`,
//!   `group`, `action`, `f_type`, `f_id`, `f_payload`, `f_err`, `phase`,
//!   `total`, `done`, `skipped`, `failed`, `cursor`, `actor`,
//!   `created_ms`, `started_ms`, `updated_ms`, `finished_ms`, `error`,
//!   `owner`, `lease_ms`; times unix ms);
//! - `asynqdeck:{<q>}:job:<id>:skipped`, `…:failed`: LISTs of the report
//!   (ids; `<id>\n<error>`), capped by the caller;
//! - `asynqdeck:{<q>}:jobs`: ZSET id → created (unix ms), the queue's jobs;
//! - `asynqdeck:{jobs}:index` (ZSET id → created ms), `asynqdeck:{jobs}:queues`
//!   (HASH id → queue) and `asynqdeck:{jobs}:open` (ZSET id → unix ms after
//!   which a runner should look at the job): the global index, in a slot of
//!   its own, written by a separate call.
//!
//! A finished job's three keys expire after the TTL its caller passes;
//! index entries older than that are dropped when a job is created.

use std::collections::HashMap;

use redis::AsyncCommands;

use super::tasks::{Container, ensure_queue};
use super::{Broker, scripts};
use crate::error::{Error, Result};
use crate::task::TaskState;

/// `asynqdeck:{jobs}:index`: ZSET job id → created at (unix ms).
pub const JOBS_INDEX_KEY: &str = "asynqdeck:{jobs}:index";
/// `asynqdeck:{jobs}:queues`: HASH job id → its queue.
pub const JOBS_QUEUES_KEY: &str = "asynqdeck:{jobs}:queues";
/// `asynqdeck:{jobs}:open`: ZSET job id → unix ms after which a runner
/// should look at it (0: at once); finished jobs leave it.
pub const JOBS_OPEN_KEY: &str = "asynqdeck:{jobs}:open";

/// `asynqdeck:{<queue>}:job:<id>`: the job's hash.
pub fn job_key(queue: &str, id: &str) -> String {
    format!("asynqdeck:{{{queue}}}:job:{id}")
}

/// `asynqdeck:{<queue>}:job:<id>:skipped`: the report's skipped ids.
pub fn job_skipped_key(queue: &str, id: &str) -> String {
    format!("asynqdeck:{{{queue}}}:job:{id}:skipped")
}

/// `asynqdeck:{<queue>}:job:<id>:failed`: the report's failed ids, each
/// `<id>\n<error>`.
pub fn job_failed_key(queue: &str, id: &str) -> String {
    format!("asynqdeck:{{{queue}}}:job:{id}:failed")
}

/// `asynqdeck:{<queue>}:jobs`: ZSET of the queue's job ids by creation (ms).
pub fn queue_jobs_key(queue: &str) -> String {
    format!("asynqdeck:{{{queue}}}:jobs")
}

/// A job as stored: its hash's fields and its report lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct StoredJob {
    pub fields: HashMap<String, String>,
    pub skipped: Vec<String>,
    /// `<id>\n<error>` entries.
    pub failed: Vec<String>,
}

/// A claim's outcome ([`Broker::job_claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Claim {
    /// This owner holds the lease now.
    Claimed,
    /// Another owner holds a live lease until this unix ms.
    Held(i64),
    /// The job is finished.
    Finished,
    /// No such job (expired or never created).
    Missing,
}

impl Broker {
    /// The number of tasks in the container of `state` (or `group`'s zset):
    /// LLEN or ZCARD. Errors: [`Error::QueueNotFound`],
    /// [`Error::InvalidArgument`] for aggregating without a group,
    /// [`Error::Redis`].
    pub(crate) async fn container_size(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
    ) -> Result<u64> {
        let container = Container::of(state, group);
        let key = container.key(queue)?;
        ensure_queue(self, queue).await?;
        let mut conn = self.conn();
        let n: u64 = if container.kind() == "list" {
            conn.llen(&key).await?
        } else {
            conn.zcard(&key).await?
        };
        Ok(n)
    }

    /// Stores a new job (`fields` of its hash) and adds it to its queue's
    /// index and to the global index; drops index entries created before
    /// `trim_before_ms`. Errors: [`Error::Internal`] when the id exists
    /// (a UUID collision), [`Error::Redis`].
    pub(crate) async fn job_create(
        &self,
        queue: &str,
        id: &str,
        created_ms: i64,
        trim_before_ms: i64,
        fields: &[(&str, String)],
    ) -> Result<()> {
        let mut inv = scripts::JOB_CREATE.prepare_invoke();
        inv.key(job_key(queue, id))
            .key(queue_jobs_key(queue))
            .arg(id)
            .arg(created_ms)
            .arg(trim_before_ms);
        for (k, v) in fields {
            inv.arg(*k).arg(v);
        }
        let created: i64 = inv.invoke_async(&mut self.conn()).await?;
        if created != 1 {
            return Err(Error::Internal(format!("job {id} exists already")));
        }
        let mut inv = scripts::JOB_INDEX.prepare_invoke();
        inv.key(JOBS_INDEX_KEY)
            .key(JOBS_QUEUES_KEY)
            .key(JOBS_OPEN_KEY)
            .arg(id)
            .arg(queue)
            .arg(created_ms)
            .arg(trim_before_ms);
        let _: i64 = inv.invoke_async(&mut self.conn()).await?;
        Ok(())
    }

    /// The queue of job `id` from the global index; `None` when unknown.
    pub(crate) async fn job_queue_of(&self, id: &str) -> Result<Option<String>> {
        Ok(self.conn().hget(JOBS_QUEUES_KEY, id).await?)
    }

    /// Job `id` of `queue` with its report; `None` when its hash is gone.
    pub(crate) async fn job_read(&self, queue: &str, id: &str) -> Result<Option<StoredJob>> {
        let mut conn = self.conn();
        let fields: HashMap<String, String> = conn.hgetall(job_key(queue, id)).await?;
        if fields.is_empty() {
            return Ok(None);
        }
        let skipped: Vec<String> = conn.lrange(job_skipped_key(queue, id), 0, -1).await?;
        let failed: Vec<String> = conn.lrange(job_failed_key(queue, id), 0, -1).await?;
        Ok(Some(StoredJob {
            fields,
            skipped,
            failed,
        }))
    }

    /// The newest job ids of the global index first, at most `limit`.
    pub(crate) async fn job_ids_newest(&self, limit: usize) -> Result<Vec<String>> {
        if limit == 0 {
            return Ok(Vec::new());
        }
        Ok(self
            .conn()
            .zrevrange(JOBS_INDEX_KEY, 0, limit as isize - 1)
            .await?)
    }

    /// Open jobs a runner should look at by `now_ms`, at most `limit`, with
    /// their queues (`None` when the index lost it): one ZRANGEBYSCORE and
    /// one HMGET, whatever the number of queues.
    pub(crate) async fn job_open_due(
        &self,
        now_ms: i64,
        limit: usize,
    ) -> Result<Vec<(String, Option<String>)>> {
        let mut conn = self.conn();
        let ids: Vec<String> = conn
            .zrangebyscore_limit(JOBS_OPEN_KEY, "-inf", now_ms, 0, limit as isize)
            .await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let queues: Vec<Option<String>> = redis::cmd("HMGET")
            .arg(JOBS_QUEUES_KEY)
            .arg(&ids)
            .query_async(&mut conn)
            .await?;
        Ok(ids.into_iter().zip(queues).collect())
    }

    /// Tells runners to look at job `id` again at `at_ms` (ZADD XX: a
    /// finished job that left the index stays out).
    pub(crate) async fn job_open_at(&self, id: &str, at_ms: i64) -> Result<()> {
        let _: i64 = redis::cmd("ZADD")
            .arg(JOBS_OPEN_KEY)
            .arg("XX")
            .arg(at_ms)
            .arg(id)
            .query_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Removes job `id` from the runners' open index (it finished or its
    /// hash is gone).
    pub(crate) async fn job_closed(&self, id: &str) -> Result<()> {
        let _: i64 = self.conn().zrem(JOBS_OPEN_KEY, id).await?;
        Ok(())
    }

    /// Takes job `id`'s lease for `owner` until `lease_ms` (the
    /// `job_claim` script: one claimer wins).
    pub(crate) async fn job_claim(
        &self,
        queue: &str,
        id: &str,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Claim> {
        let (code, lease): (i64, i64) = scripts::JOB_CLAIM
            .key(job_key(queue, id))
            .arg(owner)
            .arg(now_ms)
            .arg(lease_ms)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(match code {
            1 => Claim::Claimed,
            0 => Claim::Held(lease),
            -1 => Claim::Finished,
            -2 => Claim::Missing,
            other => return Err(Error::Internal(format!("job_claim replied {other}"))),
        })
    }

    /// Gives job `id`'s lease back when `owner` holds it.
    pub(crate) async fn job_release(&self, queue: &str, id: &str, owner: &str) -> Result<()> {
        let _: i64 = scripts::JOB_RELEASE
            .key(job_key(queue, id))
            .arg(owner)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Asks job `id` to stop (queued: cancelled at once; running:
    /// cancelling). Returns whether the job exists.
    pub(crate) async fn job_cancel(
        &self,
        queue: &str,
        id: &str,
        now_ms: i64,
        ttl_s: u64,
    ) -> Result<bool> {
        let code: i64 = scripts::JOB_CANCEL
            .key(job_key(queue, id))
            .key(job_skipped_key(queue, id))
            .key(job_failed_key(queue, id))
            .arg(now_ms)
            .arg(ttl_s)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(code == 1)
    }

    /// Stops job `id` with `error` when `owner` holds it.
    pub(crate) async fn job_fail(
        &self,
        queue: &str,
        id: &str,
        owner: &str,
        now_ms: i64,
        ttl_s: u64,
        error: &str,
    ) -> Result<()> {
        let _: i64 = scripts::JOB_FAIL
            .key(job_key(queue, id))
            .key(job_skipped_key(queue, id))
            .key(job_failed_key(queue, id))
            .arg(owner)
            .arg(now_ms)
            .arg(ttl_s)
            .arg(error)
            .invoke_async(&mut self.conn())
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every job key carries its queue's hash tag; the global ones `{jobs}`.
    #[test]
    fn keys_are_hash_tagged() {
        assert_eq!(job_key("q", "j1"), "asynqdeck:{q}:job:j1");
        assert_eq!(job_skipped_key("q", "j1"), "asynqdeck:{q}:job:j1:skipped");
        assert_eq!(job_failed_key("q", "j1"), "asynqdeck:{q}:job:j1:failed");
        assert_eq!(queue_jobs_key("q"), "asynqdeck:{q}:jobs");
        for k in [JOBS_INDEX_KEY, JOBS_QUEUES_KEY, JOBS_OPEN_KEY] {
            assert!(k.starts_with("asynqdeck:{jobs}:"), "{k}");
        }
    }
}
