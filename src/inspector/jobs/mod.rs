//! Bulk actions as background jobs (issue 15): "all" and "all matching the
//! filter" actions (run, archive, delete, cancel) on a set of any size run
//! as a job in bounded chunks, throttled, with progress kept in hash-tagged
//! Redis keys so a job survives a dashboard restart and two dashboards never
//! run the same job twice.
//!
//! This file is the interface shared by the job engine (`store`, `runner`,
//! the broker's chunk scripts) and the web (the preview and job pages, the
//! `/api/jobs` routes). Times are UTC; rates are tasks per second.
//!
//! Files: `api.rs` (the [`Inspector`](crate::Inspector) calls: preview,
//! start, read, list, cancel, run), `store.rs` (a job to and from its Redis
//! hash), `run.rs` (driving one job chunk by chunk, throttled),
//! `runner.rs` ([`JobRunner`]: finds queued jobs and jobs whose lease
//! lapsed, and runs them). The Redis side is the broker's `jobs.rs` and
//! `jobs_chunks.rs` (scripts `job_*.lua`).
//!
//! How a job runs: a chunk is one Lua script acting on at most
//! [`JobConfig::chunk_max`] tasks (fewer when a chunk takes longer than
//! [`JobConfig::chunk_target`]) and writing the job's progress in the same
//! call. Between chunks the driver pauses [`JobConfig::pause_ratio`] times
//! as long as the chunk took, so Redis spends at most about half its time
//! on the job. An "all" job takes the oldest tasks first (a list from its
//! tail, a zset by ascending score) and stops after `total` tasks, the
//! tab's size when it was created: it never chases new arrivals. A filtered
//! job reads chunks of the tab from a cursor stored in the job, filters
//! them here ([`TabFilter::matches`]) and applies the action by id, each id
//! re-checked to be still in the tab. A runner holds a job's lease
//! ([`JobConfig::lease`]), renewed by every chunk; a cancel stops the job
//! after the chunk in progress.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;

mod api;
mod run;
mod runner;
mod store;

pub use runner::JobRunner;

use super::{TabFilter, TaskAction};
use crate::task::TaskState;

/// What a job does: `action` on every task of `queue`'s `state` tab (of
/// `group`, for the aggregating tab), or only on those `filter` matches.
#[derive(Clone, Debug)]
pub struct JobSpec {
    /// The queue.
    pub queue: String,
    /// The tab: pending, active (cancel only), scheduled, retry, archived,
    /// completed or aggregating.
    pub state: TaskState,
    /// Aggregating tab only: the group.
    pub group: Option<String>,
    /// What to do to each task ([`TaskAction::allowed_in`] must allow it).
    pub action: TaskAction,
    /// `None`: every task of the tab. `Some`: only the tasks the filter
    /// matches (type, payload, error group; an id filter is one task).
    pub filter: Option<TabFilter>,
}

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum JobPhase {
    /// Created, not claimed by a runner yet.
    Queued,
    /// A runner holds its lease and works through chunks.
    Running,
    /// Cancel was asked; the runner stops after the chunk in progress.
    Cancelling,
    /// Stopped by a cancel (the report says how far it got).
    Cancelled,
    /// Every task was handled.
    Done,
    /// Stopped by an error it cannot get past (`error` says which).
    Failed,
}

impl JobPhase {
    /// Whether the job will not change any more.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            JobPhase::Cancelled | JobPhase::Done | JobPhase::Failed
        )
    }

    /// `queued`, `running`, … (the JSON form).
    pub fn as_str(self) -> &'static str {
        match self {
            JobPhase::Queued => "queued",
            JobPhase::Running => "running",
            JobPhase::Cancelling => "cancelling",
            JobPhase::Cancelled => "cancelled",
            JobPhase::Done => "done",
            JobPhase::Failed => "failed",
        }
    }
}

/// Most ids kept in a job's report per kind (skipped, failed); the counts
/// are exact whatever their number.
pub const REPORT_IDS: usize = 1_000;

/// A job as stored: its spec, progress and report.
#[derive(Clone, Debug)]
pub struct JobStatus {
    /// The job id (a UUID).
    pub id: String,
    pub spec: JobSpec,
    pub phase: JobPhase,
    /// Tasks the job will look at: the tab's size when it started (for a
    /// filtered job, the tasks scanned so far plus those left to scan).
    pub total: u64,
    /// Tasks the action was applied to.
    pub done: u64,
    /// Tasks looked at and left alone: no longer in the tab, or not
    /// matching the filter.
    pub skipped: u64,
    /// Tasks the action failed on.
    pub failed: u64,
    /// Up to [`REPORT_IDS`] skipped ids (a filter's non-matches are
    /// counted, not listed).
    pub skipped_ids: Vec<String>,
    /// Up to [`REPORT_IDS`] failed ids, each with its error.
    pub failed_ids: Vec<(String, String)>,
    /// Who asked for it (basic-auth user), when known.
    pub actor: Option<String>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    /// Last progress write.
    pub updated_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Why it failed ([`JobPhase::Failed`]).
    pub error: Option<String>,
}

impl JobStatus {
    /// Tasks looked at so far: done + skipped + failed.
    pub fn handled(&self) -> u64 {
        self.done + self.skipped + self.failed
    }

    /// Progress in per cent (0–100) of `total`: 100 when done or the total
    /// is 0; a cancelled or failed job shows how far it got.
    pub fn percent(&self) -> u8 {
        if self.phase == JobPhase::Done || self.total == 0 {
            return 100;
        }
        ((self.handled().min(self.total) * 100) / self.total) as u8
    }

    /// Tasks handled per second since it started, when it has.
    pub fn rate(&self) -> Option<f64> {
        let start = self.started_at?;
        let end = self.finished_at.unwrap_or(self.updated_at);
        let secs = (end - start).num_milliseconds() as f64 / 1000.0;
        (secs > 0.0).then(|| self.handled() as f64 / secs)
    }

    /// Time left at the current rate, while running.
    pub fn eta(&self) -> Option<Duration> {
        if self.phase.is_finished() {
            return None;
        }
        let rate = self.rate().filter(|r| *r > 0.0)?;
        let left = self.total.saturating_sub(self.handled()) as f64;
        Some(Duration::from_secs_f64(left / rate))
    }
}

/// What a job would touch, shown before the person confirms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct JobPreview {
    /// Tasks the job would act on: exact when `exact`, else the matches
    /// found in the tasks scanned, a lower bound (an extrapolation said
    /// "about 0" when the matches sat past the scan).
    pub count: u64,
    /// Whether `count` is exact (no filter, or the whole tab was scanned).
    pub exact: bool,
    /// Tasks read to count (0 without a filter).
    pub scanned: u64,
    /// Tasks in the tab.
    pub total: u64,
}

impl JobPreview {
    /// The preview of `matching` tasks found in `scanned` of `total`, exact
    /// when the whole set was read, else a lower bound.
    pub fn counted(matching: u64, exact: bool, scanned: u64, total: u64) -> JobPreview {
        JobPreview {
            count: matching,
            exact,
            scanned,
            total,
        }
    }
}

/// How jobs run: chunk size, throttle, lease and retention.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct JobConfig {
    /// Most tasks one chunk script acts on. Default 200 (under 1 ms of
    /// Redis time for a pending delete, so a chunk stays far below 10 ms
    /// even when the machine takes the CPU from Redis mid-script).
    pub chunk_max: usize,
    /// A chunk taking longer than this (wall time, round trip and client
    /// scheduling included) halves the next one; one under half of it
    /// doubles the next, up to `chunk_max`. Default 3 ms. Measured on a
    /// loaded 2-CPU machine (debug build, 1,000,000 pending deletes):
    /// 3 ms gave 82 s and 3 SLOWLOG entries ≥ 10 ms, 8 ms gave 63 s and 8;
    /// the entries were chunks of 24–200 tasks whose Redis lost the CPU
    /// mid-script, so the smaller chunks a busy machine gets are kept.
    pub chunk_target: Duration,
    /// Pause after each chunk, as a multiple of the time it took (1.0:
    /// Redis busy with the job at most half the time). Default 1.0.
    pub pause_ratio: f64,
    /// How long a claimed job stays this runner's without a chunk; a
    /// dashboard that died loses its jobs to another runner after it.
    /// Default 30 s.
    pub lease: Duration,
    /// How long a finished job (and its report) is kept. Default 7 days.
    pub retention: Duration,
    /// Whether [`Inspector::start_job`](crate::Inspector::start_job) runs
    /// the job in this process at once (a task of its own) rather than
    /// leaving it to a [`JobRunner`]. Default true.
    pub run_on_start: bool,
    /// How often a [`JobRunner`] looks for jobs to run. Default 1 s.
    pub poll: Duration,
    /// Jobs one [`JobRunner`] runs at once. Default 2.
    pub concurrency: usize,
}

impl Default for JobConfig {
    fn default() -> Self {
        JobConfig {
            chunk_max: 200,
            chunk_target: Duration::from_millis(3),
            pause_ratio: 1.0,
            lease: Duration::from_secs(30),
            retention: Duration::from_secs(7 * 24 * 60 * 60),
            run_on_start: true,
            poll: Duration::from_secs(1),
            concurrency: 2,
        }
    }
}
