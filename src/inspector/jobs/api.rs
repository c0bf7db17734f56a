//! The inspector's job calls. INTERFACE STUB (issue 15): the job engine's
//! helper replaces every body; the signatures are the contract.

use super::{JobPreview, JobSpec, JobStatus};
use crate::Inspector;
use crate::error::{Error, Result};

fn unbuilt() -> Error {
    Error::FailedPrecondition("background jobs are not built yet".into())
}

impl Inspector {
    /// How many tasks `spec` would act on (no filter: the tab's size; a
    /// filter: counted over a bounded scan, extrapolated beyond it).
    ///
    /// Errors: [`Error::InvalidArgument`] when the action is not allowed in
    /// the state; [`Error::QueueNotFound`]; [`Error::Redis`].
    pub async fn preview_job(&self, spec: &JobSpec) -> Result<JobPreview> {
        let _ = spec;
        Err(unbuilt())
    }

    /// Creates the job (phase `queued`) and returns it at once; a runner
    /// (this process's or another dashboard's) claims it.
    ///
    /// Errors: as [`Inspector::preview_job`].
    pub async fn start_job(&self, spec: JobSpec, actor: Option<&str>) -> Result<JobStatus> {
        let _ = (spec, actor);
        Err(unbuilt())
    }

    /// The job `id`. Errors: an unknown id (the engine adds
    /// `Error::JobNotFound`, answered 404); [`Error::Redis`].
    pub async fn job(&self, id: &str) -> Result<JobStatus> {
        let _ = id;
        Err(unbuilt())
    }

    /// The newest jobs first, at most `limit`.
    pub async fn jobs(&self, limit: usize) -> Result<Vec<JobStatus>> {
        let _ = limit;
        Err(unbuilt())
    }

    /// Asks the job to stop after its chunk in progress (phase
    /// `cancelling`, then `cancelled`); a finished job is returned as is.
    pub async fn cancel_job(&self, id: &str) -> Result<JobStatus> {
        let _ = id;
        Err(unbuilt())
    }
}
