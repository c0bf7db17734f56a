//! The inspector's job calls: preview, start, read, list, cancel, and
//! running one job in the caller's task ([`Inspector::run_job`]).

use tokio_util::sync::CancellationToken;

use super::runner::CREATED;
use super::store;
use super::{JobPreview, JobSpec, JobStatus, run};
use crate::Inspector;
use crate::broker::PAGE_READ_BYTES;
use crate::error::{Error, Result};
use crate::inspector::{SCAN_BYTES, SCAN_LIMIT, SCAN_PAGE, TaskRow};
use crate::task::{TaskInfo, TaskState};

/// Checks that `spec` names an action its state allows, a group for the
/// aggregating tab, and a valid queue name.
fn validate(ins: &Inspector, spec: &JobSpec) -> Result<()> {
    ins.broker().check_queue_name(&spec.queue)?;
    if !spec.action.allowed_in(spec.state) {
        return Err(Error::InvalidArgument(format!(
            "cannot {} {} tasks",
            spec.action.as_str(),
            spec.state
        )));
    }
    match (spec.state, spec.group.as_deref()) {
        (TaskState::Aggregating, None | Some("")) => Err(Error::InvalidArgument(
            "aggregating tasks live in groups: name the group".into(),
        )),
        (TaskState::Aggregating, Some(_)) | (_, None) => Ok(()),
        (_, Some(_)) => Err(Error::InvalidArgument(
            "a group names aggregating tasks only".into(),
        )),
    }
}

/// `spec`'s filter when it filters anything (type, payload, error or id).
fn active_filter(spec: &JobSpec) -> Option<&crate::inspector::TabFilter> {
    spec.filter
        .as_ref()
        .filter(|f| f.scans() || !f.id.is_empty())
}

impl Inspector {
    /// How many tasks `spec` would act on (no filter: the tab's size; a
    /// filter: counted over a scan of up to [`SCAN_LIMIT`] tasks,
    /// extrapolated beyond it; an id filter: 1 when the task is in the
    /// tab, else 0).
    ///
    /// Errors: [`Error::InvalidArgument`] when the action is not allowed in
    /// the state (or aggregating without a group); [`Error::QueueNotFound`];
    /// [`Error::Redis`].
    pub async fn preview_job(&self, spec: &JobSpec) -> Result<JobPreview> {
        validate(self, spec)?;
        let group = spec.group.as_deref();
        let total = self
            .broker()
            .container_size(&spec.queue, spec.state, group)
            .await?;
        let Some(filter) = active_filter(spec) else {
            return Ok(JobPreview {
                count: total,
                exact: true,
                scanned: 0,
                total,
            });
        };
        if !filter.id.is_empty() {
            let here = match self.get_task_info(&spec.queue, &filter.id).await {
                Ok(t) => t.state == spec.state && group.is_none_or(|g| t.group == g),
                Err(Error::TaskNotFound { .. }) => false,
                Err(e) => return Err(e),
            };
            return Ok(JobPreview {
                count: u64::from(here),
                exact: true,
                scanned: 1,
                total,
            });
        }
        // Read as the tab's scans: at most SCAN_LIMIT tasks, SCAN_PAGE and
        // 1 MiB per call, and SCAN_BYTES in all (one read held at a time),
        // taking a turn among the process's scans.
        let _turn = crate::inspector::tab::SCANS
            .acquire()
            .await
            .map_err(|e| Error::Internal(e.to_string()))?;
        let (mut scanned, mut matching, mut offset, mut bytes) = (0u64, 0u64, 0usize, 0u64);
        while offset < SCAN_LIMIT && bytes < SCAN_BYTES {
            let want = (SCAN_LIMIT - offset).min(SCAN_PAGE);
            let (rows, ids, stopped) = self
                .read_tasks_from(
                    &spec.queue,
                    spec.state,
                    group,
                    offset,
                    want,
                    PAGE_READ_BYTES,
                )
                .await?;
            offset += ids;
            bytes += rows.iter().map(TaskRow::data_bytes).sum::<u64>();
            scanned += rows.len() as u64;
            let kept: Vec<&TaskInfo> = rows
                .iter()
                .filter_map(|r| r.task())
                .filter(|t| filter.matches(t))
                .collect();
            matching += match filter.search.as_ref() {
                Some(q) if q.older_than.is_some() => self
                    .age_keeps(q, &spec.queue, spec.state, &kept)
                    .await?
                    .into_iter()
                    .filter(|k| *k)
                    .count() as u64,
                _ => kept.len() as u64,
            };
            if ids == 0 || (!stopped && ids < want) {
                break;
            }
        }
        Ok(JobPreview::counted(
            matching,
            scanned >= total,
            scanned,
            total.max(scanned),
        ))
    }

    /// Creates the job (phase `queued`) and returns it at once. With
    /// [`JobConfig::run_on_start`](super::JobConfig::run_on_start) (the
    /// default) a task of this process starts running it right away;
    /// otherwise (or should this process stop) a [`JobRunner`](super::JobRunner)
    /// claims it. `total` is the tab's size now (1 for an id filter).
    ///
    /// Errors: as [`Inspector::preview_job`].
    pub async fn start_job(&self, spec: JobSpec, actor: Option<&str>) -> Result<JobStatus> {
        self.start_job_at_most(spec, actor, None).await
    }

    /// [`Inspector::start_job`], acting on at most `at_most` tasks when
    /// given and the job has no filter: the count the person confirmed
    /// on the preview, so tasks that arrived since are left alone.
    ///
    /// Errors: as [`Inspector::start_job`].
    pub async fn start_job_at_most(
        &self,
        spec: JobSpec,
        actor: Option<&str>,
        at_most: Option<u64>,
    ) -> Result<JobStatus> {
        let status = self.create_job_bounded(spec, actor, at_most).await?;
        if self.job_config().run_on_start {
            let ins = self.clone();
            let (queue, id) = (status.spec.queue.clone(), status.id.clone());
            tokio::spawn(async move {
                let owner = run::new_owner();
                let stop = CancellationToken::new();
                if let Err(e) = run::drive(&ins, &queue, &id, &owner, &stop).await {
                    tracing::warn!(job = %id, error = %e, "background job paused; a runner resumes it");
                }
            });
        }
        Ok(status)
    }

    /// Creates the job (phase `queued`) without running it: the caller
    /// runs it ([`Inspector::run_job`]) or leaves it to a runner.
    ///
    /// Errors: as [`Inspector::preview_job`].
    pub async fn create_job(&self, spec: JobSpec, actor: Option<&str>) -> Result<JobStatus> {
        self.create_job_bounded(spec, actor, None).await
    }

    /// [`Inspector::create_job`] with the bound of
    /// [`Inspector::start_job_at_most`].
    async fn create_job_bounded(
        &self,
        spec: JobSpec,
        actor: Option<&str>,
        at_most: Option<u64>,
    ) -> Result<JobStatus> {
        validate(self, &spec)?;
        let mut spec = spec;
        if spec
            .filter
            .as_ref()
            .is_some_and(|f| !f.scans() && f.id.is_empty())
        {
            spec.filter = None;
        }
        let total = self
            .broker()
            .container_size(&spec.queue, spec.state, spec.group.as_deref())
            .await?;
        let total = match (active_filter(&spec), at_most) {
            (Some(f), _) if !f.id.is_empty() => 1,
            (None, Some(n)) => total.min(n),
            _ => total,
        };
        let cfg = self.job_config();
        let now = self.now();
        let id = uuid::Uuid::new_v4().to_string();
        let fields = store::new_fields(&spec, total, actor.filter(|a| !a.is_empty()), now);
        let trim_before = now.timestamp_millis()
            - i64::try_from(cfg.retention.as_millis()).unwrap_or(i64::MAX / 2);
        self.broker()
            .job_create(
                &spec.queue,
                &id,
                now.timestamp_millis(),
                trim_before,
                &fields,
            )
            .await?;
        CREATED.notify_waiters();
        self.job_in(&spec.queue, &id).await
    }

    /// Runs job `id` in the caller's task until it is finished, another
    /// runner holds it, or `stop` is cancelled (the lease is then given
    /// back); returns the job as it is then. asynqmon's synchronous bulk
    /// routes use it for small sets.
    ///
    /// Errors: [`Error::JobNotFound`], [`Error::Redis`].
    pub async fn run_job(&self, id: &str, stop: &CancellationToken) -> Result<JobStatus> {
        let queue = self.job_queue(id).await?;
        run::drive(self, &queue, id, &run::new_owner(), stop).await?;
        self.job_in(&queue, id).await
    }

    /// The job `id`. Errors: [`Error::JobNotFound`] for an unknown or
    /// expired id; [`Error::Corrupt`] for a hash that cannot be read back;
    /// [`Error::Redis`].
    pub async fn job(&self, id: &str) -> Result<JobStatus> {
        let queue = self.job_queue(id).await?;
        self.job_in(&queue, id).await
    }

    /// The newest jobs first, at most `limit` (expired ones left out; one
    /// whose hash cannot be read back is left out and logged).
    ///
    /// Errors: [`Error::Redis`].
    pub async fn jobs(&self, limit: usize) -> Result<Vec<JobStatus>> {
        let ids = self.broker().job_ids_newest(limit).await?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            match self.job(&id).await {
                Ok(j) => out.push(j),
                Err(Error::JobNotFound { .. }) => {}
                // A job whose keys hold the wrong data (corrupt fields, a
                // key of another type) is left out; only Redis being
                // unreachable fails the list.
                Err(e) if !e.is_redis_unavailable() => {
                    tracing::warn!(job = %id, error = %e, "unreadable job left out");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Asks the job to stop after its chunk in progress (phase
    /// `cancelling`, then `cancelled`; a queued job is cancelled at once);
    /// a finished job is returned as is.
    ///
    /// Errors: [`Error::JobNotFound`], [`Error::Redis`].
    pub async fn cancel_job(&self, id: &str) -> Result<JobStatus> {
        let queue = self.job_queue(id).await?;
        let ttl = self.job_config().retention.as_secs();
        let now = self.now().timestamp_millis();
        if !self.broker().job_cancel(&queue, id, now, ttl).await? {
            return Err(Error::JobNotFound { id: id.to_string() });
        }
        let job = self.job_in(&queue, id).await?;
        if job.phase.is_finished() {
            self.broker().job_closed(id).await?;
        }
        Ok(job)
    }

    async fn job_queue(&self, id: &str) -> Result<String> {
        self.broker()
            .job_queue_of(id)
            .await?
            .ok_or_else(|| Error::JobNotFound { id: id.to_string() })
    }

    async fn job_in(&self, queue: &str, id: &str) -> Result<JobStatus> {
        let stored = self
            .broker()
            .job_read(queue, id)
            .await?
            .ok_or_else(|| Error::JobNotFound { id: id.to_string() })?;
        Ok(store::load(queue, id, stored)?.status)
    }
}
