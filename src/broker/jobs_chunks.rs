//! The chunks of a background job (asynqdeck only, issue 15): one bounded
//! script each, acting on at most the number of tasks the caller asks for
//! and writing the job's progress in the same call, so a crash never leaves
//! progress wrong. `job_chunk.lua` takes the oldest tasks of a container
//! ("all" jobs); `job_apply.lua` acts on ids the caller picked (filtered
//! jobs, cancel), each re-checked. [`Broker::job_read_tasks`] reads the
//! tasks a filtered job looks at.

use chrono::{DateTime, Utc};

use super::jobs::{job_failed_key, job_key, job_skipped_key};
use super::proto::TaskMessage;
use super::tasks::{Container, ensure_queue, listed_msg};
use super::{ARCHIVE_RETENTION, Broker, MAX_ARCHIVE_SIZE, keys, scripts};
use crate::error::{Error, Result};
use crate::task::TaskState;

/// What one chunk script did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkOutcome {
    pub step: ChunkStep,
    /// Tasks the action was applied to in this chunk.
    pub done: u64,
    /// Ids skipped in this chunk (listed in the report, capped).
    pub skipped: u64,
}

/// Where a job is after a chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkStep {
    /// Progress; more may follow.
    More,
    /// The job is done (phase `done`).
    Done,
    /// The job was cancelling and is now cancelled.
    Cancelled,
    /// This owner does not hold the job's lease: nothing changed.
    Lost,
}

/// The lease and report settings every chunk passes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChunkLease<'a> {
    pub owner: &'a str,
    pub now: DateTime<Utc>,
    /// The renewed lease deadline, unix ms.
    pub lease_ms: i64,
    /// Most ids kept per report list.
    pub report_cap: usize,
    /// Seconds a finished job is kept.
    pub ttl_s: u64,
}

/// A task a filtered job looks at: its id and its msg (`None` when the
/// hash is missing, `Some(Err)` when it cannot be decoded).
pub(crate) type ReadTask = (String, Option<Result<TaskMessage>>);

fn outcome(script: &str, reply: (i64, u64, u64)) -> Result<ChunkOutcome> {
    let step = match reply.0 {
        1 => ChunkStep::More,
        2 => ChunkStep::Done,
        3 => ChunkStep::Cancelled,
        0 => ChunkStep::Lost,
        other => return Err(Error::Internal(format!("{script} replied {other}"))),
    };
    Ok(ChunkOutcome {
        step,
        done: reply.1,
        skipped: reply.2,
    })
}

fn archive_cutoff(now: DateTime<Utc>) -> i64 {
    now.timestamp() - ARCHIVE_RETENTION.as_secs() as i64
}

impl Broker {
    /// One chunk of an "all" job `id`: `action` (`run`, `archive`,
    /// `delete`) on at most `max` of the oldest tasks of the container of
    /// `state` (or `group`), bounded by the job's `total` (the
    /// `job_chunk` script). Errors: [`Error::InvalidArgument`] for
    /// aggregating without a group, [`Error::Redis`] (e.g. WRONGTYPE).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn job_chunk(
        &self,
        queue: &str,
        id: &str,
        state: TaskState,
        group: Option<&str>,
        action: &str,
        max: usize,
        lease: ChunkLease<'_>,
    ) -> Result<ChunkOutcome> {
        let container = Container::of(state, group);
        let source = container.key(queue)?;
        let dest = match action {
            "run" => keys::pending_key(queue),
            "archive" => keys::archived_key(queue),
            _ => source.clone(),
        };
        let mut inv = scripts::JOB_CHUNK.prepare_invoke();
        inv.key(job_key(queue, id))
            .key(job_skipped_key(queue, id))
            .key(job_failed_key(queue, id))
            .key(&source)
            .key(dest)
            .key(keys::all_groups_key(queue))
            .arg(lease.owner)
            .arg(lease.now.timestamp_millis())
            .arg(lease.lease_ms)
            .arg(action)
            .arg(container.kind())
            .arg(max.max(1))
            .arg(keys::task_key_prefix(queue))
            .arg(keys::unique_key_prefix(queue))
            .arg(lease.now.timestamp())
            .arg(archive_cutoff(lease.now))
            .arg(MAX_ARCHIVE_SIZE)
            .arg(lease.report_cap)
            .arg(lease.ttl_s)
            .arg(group.unwrap_or(""));
        let reply: (i64, u64, u64) = inv.invoke_async(&mut self.conn()).await?;
        outcome("job_chunk", reply)
    }

    /// One chunk of a filtered (or cancel) job `id`: `action` on `ids`,
    /// each re-checked to be in `state` (and `group`); `left_alone` tasks
    /// counted skipped; the cursor set to `cursor_after` minus the tasks
    /// taken out; `last` ends the job (the `job_apply` script).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn job_apply(
        &self,
        queue: &str,
        id: &str,
        state: TaskState,
        group: Option<&str>,
        action: &str,
        ids: &[String],
        left_alone: u64,
        cursor_after: u64,
        last: bool,
        lease: ChunkLease<'_>,
    ) -> Result<ChunkOutcome> {
        let mut inv = scripts::JOB_APPLY.prepare_invoke();
        inv.key(job_key(queue, id))
            .key(job_skipped_key(queue, id))
            .key(job_failed_key(queue, id))
            .key(keys::pending_key(queue))
            .key(keys::archived_key(queue))
            .key(keys::all_groups_key(queue))
            .arg(lease.owner)
            .arg(lease.now.timestamp_millis())
            .arg(lease.lease_ms)
            .arg(action)
            .arg(state.as_str())
            .arg(group.unwrap_or(""))
            .arg(keys::queue_prefix(queue))
            .arg(keys::group_key_prefix(queue))
            .arg(keys::task_key_prefix(queue))
            .arg(keys::unique_key_prefix(queue))
            .arg(lease.now.timestamp())
            .arg(archive_cutoff(lease.now))
            .arg(MAX_ARCHIVE_SIZE)
            .arg(lease.report_cap)
            .arg(lease.ttl_s)
            .arg(left_alone)
            .arg(cursor_after)
            .arg(if last { "1" } else { "0" });
        for task_id in ids {
            inv.arg(task_id);
        }
        let reply: (i64, u64, u64) = inv.invoke_async(&mut self.conn()).await?;
        outcome("job_apply", reply)
    }

    /// Up to `n` tasks of the container of `state` (or `group`) from
    /// position `offset`, oldest first (a list from its tail, a zset by
    /// ascending score), with their msgs: the `list_tasks` script. Every id
    /// read is returned, also those whose hash is missing. The call reads
    /// at most [`super::PAGE_READ_BYTES`] of task data (at least one task),
    /// so it may return fewer than `n` ids before the range's end: the
    /// second value says so (true: read on from where it stopped).
    ///
    /// Errors: [`Error::QueueNotFound`], [`Error::InvalidArgument`] for
    /// aggregating without a group, [`Error::Redis`].
    pub(crate) async fn job_read_tasks(
        &self,
        queue: &str,
        state: TaskState,
        group: Option<&str>,
        offset: u64,
        n: usize,
    ) -> Result<(Vec<ReadTask>, bool)> {
        let container = Container::of(state, group);
        let key = container.key(queue)?;
        ensure_queue(self, queue).await?;
        if n == 0 {
            return Ok((Vec::new(), false));
        }
        let (first, last) = (offset as i64, offset as i64 + n as i64 - 1);
        let (start, stop) = if container.kind() == "list" {
            (-last - 1, -first - 1)
        } else {
            (first, last)
        };
        let mut inv = scripts::LIST_TASKS.prepare_invoke();
        inv.key(&key);
        if container.state() == TaskState::Active {
            inv.key(keys::lease_key(queue));
        }
        inv.arg(container.kind())
            .arg(start)
            .arg(stop)
            .arg(keys::task_key_prefix(queue))
            .arg(super::PAGE_READ_BYTES)
            // A list from its right end (oldest first), so a budget stops
            // nearest to the position reached.
            .arg("right");
        let mut flat: Vec<Option<Vec<u8>>> = inv.invoke_async(&mut self.conn()).await?;
        let stopped = flat.len() % 4 == 1 && flat.last() == Some(&Some(b"more".to_vec()));
        if stopped {
            flat.pop();
        }
        let mut out = Vec::with_capacity(flat.len() / 4);
        for row in flat.chunks_exact(4) {
            let id = String::from_utf8_lossy(row[0].as_deref().unwrap_or_default()).into_owned();
            let task_key = keys::task_key(queue, &id);
            let msg = row[1].as_deref().map(|m| listed_msg(&task_key, m));
            out.push((id, msg));
        }
        Ok((out, stopped))
    }
}
