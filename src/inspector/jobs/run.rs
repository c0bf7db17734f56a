//! Driving one job: claim its lease, run chunk after chunk with a pause
//! after each, stop when it is finished, cancelled, lost to another owner
//! or told to stop (the lease is then given back so another runner resumes
//! at once from the stored progress).

use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::JobConfig;
use super::store::{self, Loaded};
use crate::Inspector;
use crate::broker::{ChunkLease, ChunkOutcome, ChunkStep, Claim};
use crate::error::{Error, Result};
use crate::inspector::TaskAction;
use crate::task::TaskInfo;

/// How a drive ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Driven {
    /// The job is finished (done, cancelled or failed).
    Finished,
    /// Another owner holds it, or this owner lost its lease.
    NotOurs,
    /// Told to stop; the lease was given back.
    Stopped,
}

/// A fresh owner id for one drive: `<pid>:<uuid>`.
pub(super) fn new_owner() -> String {
    format!("{}:{}", std::process::id(), uuid::Uuid::new_v4())
}

fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Runs job `id` of `queue` as `owner` until it is finished, lost or
/// `stop` is cancelled. Errors: [`Error::Redis`] when Redis fails (the
/// lease then lapses and a runner resumes the job later); any other error
/// of a chunk fails the job (phase failed, its text in `error`) and is
/// not returned.
pub(super) async fn drive(
    ins: &Inspector,
    queue: &str,
    id: &str,
    owner: &str,
    stop: &CancellationToken,
) -> Result<Driven> {
    let cfg = ins.job_config();
    let broker = ins.broker();
    let now = ins.now();
    let lease_ms = now.timestamp_millis() + ms(cfg.lease);
    match broker
        .job_claim(queue, id, owner, now.timestamp_millis(), lease_ms)
        .await?
    {
        Claim::Claimed => {}
        Claim::Held(until) => {
            broker.job_open_at(id, until).await?;
            return Ok(Driven::NotOurs);
        }
        Claim::Finished | Claim::Missing => {
            broker.job_closed(id).await?;
            return Ok(Driven::Finished);
        }
    }
    broker.job_open_at(id, lease_ms).await?;
    let Some(stored) = broker.job_read(queue, id).await? else {
        broker.job_closed(id).await?;
        return Ok(Driven::Finished);
    };
    let loaded = match store::load(queue, id, stored) {
        Ok(l) => l,
        Err(e) => return fail(ins, queue, id, owner, &e).await,
    };
    let mut job = Job::new(loaded);
    let mut n = cfg.chunk_max.max(1);
    loop {
        if stop.is_cancelled() {
            broker.job_release(queue, id, owner).await?;
            broker.job_open_at(id, 0).await?;
            return Ok(Driven::Stopped);
        }
        let started = Instant::now();
        let outcome = match job.chunk(ins, owner, n, &cfg).await {
            Ok(o) => o,
            Err(e) if e.is_redis_unavailable() => return Err(e),
            Err(e) => return fail(ins, queue, id, owner, &e).await,
        };
        let took = started.elapsed();
        match outcome.step {
            ChunkStep::More => {}
            ChunkStep::Done | ChunkStep::Cancelled => {
                broker.job_closed(id).await?;
                return Ok(Driven::Finished);
            }
            ChunkStep::Lost => return Ok(Driven::NotOurs),
        }
        n = next_size(n, took, &cfg);
        let pause = took.mul_f64(cfg.pause_ratio.max(0.0));
        if !pause.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                _ = stop.cancelled() => {}
            }
        }
    }
}

/// The next chunk's size: halved after a chunk over the target, doubled
/// after one under half of it, within 1..=chunk_max.
fn next_size(n: usize, took: Duration, cfg: &JobConfig) -> usize {
    let max = cfg.chunk_max.max(1);
    if took > cfg.chunk_target {
        (n / 2).max(1)
    } else if took < cfg.chunk_target / 2 {
        n.saturating_mul(2).min(max)
    } else {
        n.min(max)
    }
}

async fn fail(ins: &Inspector, queue: &str, id: &str, owner: &str, e: &Error) -> Result<Driven> {
    tracing::warn!(job = %id, queue = %queue, error = %e, "background job failed");
    let ttl = ins.job_config().retention.as_secs();
    let now = ins.now().timestamp_millis();
    let broker = ins.broker();
    broker
        .job_fail(queue, id, owner, now, ttl, &e.to_string())
        .await?;
    broker.job_closed(id).await?;
    Ok(Driven::Finished)
}

/// A job being driven: what it does and how far it got (kept here between
/// chunks; every chunk also stores it).
struct Job {
    loaded: Loaded,
    handled: u64,
}

impl Job {
    fn new(loaded: Loaded) -> Job {
        let handled = loaded.status.handled();
        Job { loaded, handled }
    }

    async fn chunk(
        &mut self,
        ins: &Inspector,
        owner: &str,
        n: usize,
        cfg: &JobConfig,
    ) -> Result<ChunkOutcome> {
        let now = ins.now();
        let lease = ChunkLease {
            owner,
            now,
            lease_ms: now.timestamp_millis() + ms(cfg.lease),
            report_cap: super::REPORT_IDS,
            ttl_s: cfg.retention.as_secs(),
        };
        let st = &self.loaded.status;
        let spec = &st.spec;
        let (queue, id) = (spec.queue.as_str(), st.id.as_str());
        let group = spec.group.as_deref();
        let broker = ins.broker();
        if spec.filter.is_none() && spec.action != TaskAction::Cancel {
            let out = broker
                .job_chunk(queue, id, spec.state, group, spec.action.as_str(), n, lease)
                .await?;
            self.handled += out.done + out.skipped;
            return Ok(out);
        }
        // Filtered (or cancel): read, pick, apply by id.
        let budget = (st.total.saturating_sub(self.handled) as usize).min(n);
        let by_id = spec.filter.as_ref().filter(|f| !f.id.is_empty());
        let (picked, read, last) = if let Some(f) = by_id {
            let picked = if self.handled == 0 {
                vec![f.id.clone()]
            } else {
                Vec::new()
            };
            let read = picked.len() as u64;
            (picked, read, true)
        } else if budget == 0 {
            (Vec::new(), 0, true)
        } else {
            let (tasks, stopped) = broker
                .job_read_tasks(queue, spec.state, group, self.loaded.cursor, budget)
                .await?;
            let read = tasks.len() as u64;
            let kept: Vec<(String, TaskInfo)> = tasks
                .into_iter()
                .filter_map(|(task_id, msg)| {
                    let msg = msg?.ok()?;
                    let info = TaskInfo::from_message(msg, spec.state, None, None, false);
                    let keep = spec.filter.as_ref().is_none_or(|f| f.matches(&info));
                    keep.then_some((task_id, info))
                })
                .collect();
            let picked = match spec.filter.as_ref().and_then(|f| f.search.as_ref()) {
                Some(q) if q.older_than.is_some() => {
                    let infos: Vec<&TaskInfo> = kept.iter().map(|(_, t)| t).collect();
                    let old = ins.age_keeps(q, queue, spec.state, &infos).await?;
                    kept.into_iter()
                        .zip(old)
                        .filter_map(|((id, _), keep)| keep.then_some(id))
                        .collect()
                }
                _ => kept.into_iter().map(|(id, _)| id).collect::<Vec<_>>(),
            };
            // A read the byte budget stopped is short, not the end.
            let last = (!stopped && (read as usize) < budget) || self.handled + read >= st.total;
            (picked, read, last)
        };
        if spec.action == TaskAction::Cancel {
            for task_id in &picked {
                ins.cancel_processing(task_id).await?;
            }
        }
        let left_alone = read - picked.len() as u64;
        let cursor_after = self.loaded.cursor + read;
        let out = broker
            .job_apply(
                queue,
                id,
                spec.state,
                group,
                spec.action.as_str(),
                &picked,
                left_alone,
                cursor_after,
                last,
                lease,
            )
            .await?;
        if out.step == ChunkStep::More {
            let removed = if spec.action == TaskAction::Cancel {
                0
            } else {
                out.done
            };
            self.loaded.cursor = cursor_after.saturating_sub(removed);
            self.handled += read;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks shrink when slow, grow when fast, within 1..=chunk_max.
    #[test]
    fn chunk_size_adapts() {
        let cfg = JobConfig {
            chunk_max: 100,
            chunk_target: Duration::from_millis(4),
            ..JobConfig::default()
        };
        assert_eq!(next_size(100, Duration::from_millis(9), &cfg), 50);
        assert_eq!(next_size(1, Duration::from_millis(9), &cfg), 1);
        assert_eq!(next_size(50, Duration::from_millis(1), &cfg), 100);
        assert_eq!(next_size(100, Duration::from_millis(1), &cfg), 100);
        assert_eq!(next_size(30, Duration::from_millis(3), &cfg), 30);
    }
}
