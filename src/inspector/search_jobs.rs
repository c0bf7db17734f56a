//! Bulk actions on a search's matches (issue 17 item 1): one background job
//! per queue tab in the search's scope, each filtered by the search's
//! filters ([`TabFilter::search`]), so together they act on exactly the
//! tasks the search matches (as each job finds them when it reaches them).
//!
//! [`Inspector::plan_search_jobs`] picks the tabs from the statistics
//! snapshot (non-empty tabs whose state allows the action, at most
//! [`SEARCH_JOB_TABS`]); [`Inspector::preview_search_jobs`] counts the
//! matches over a bounded scan (at most [`SEARCH_PREVIEW_STEPS`] search
//! steps); [`Inspector::start_search_jobs`] starts the jobs.

use super::jobs::{JobPreview, JobSpec, JobStatus};
use super::search_query::SearchQuery;
use super::tab::state_count;
use super::{Inspector, SEARCH_BUDGET, Snapshot, TabFilter, TaskAction};
use crate::error::{Error, Result};
use crate::task::TaskState;

/// Most tabs (queue, state) one search's bulk action starts jobs on.
pub const SEARCH_JOB_TABS: usize = 50;
/// Most search steps (each at most [`SEARCH_BUDGET`] tasks) a preview reads.
pub const SEARCH_PREVIEW_STEPS: usize = 5;

/// The jobs a bulk action on a search would start.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchJobPlan {
    /// What each job does.
    pub action: TaskAction,
    /// The search's filters (no scope); `None` when the search filters
    /// nothing: each job then takes its whole tab.
    pub filters: Option<SearchQuery>,
    /// The tabs (queue, state), in search order.
    pub tabs: Vec<(String, TaskState)>,
    /// States in scope the action does not apply to (left alone).
    pub left_alone: Vec<TaskState>,
}

impl SearchJobPlan {
    /// The job of each tab.
    pub fn specs(&self) -> Vec<JobSpec> {
        self.tabs
            .iter()
            .map(|(queue, state)| JobSpec {
                queue: queue.clone(),
                state: *state,
                group: None,
                action: self.action,
                filter: self.filters.clone().map(|q| TabFilter {
                    search: Some(q),
                    ..TabFilter::default()
                }),
            })
            .collect()
    }
}

impl Inspector {
    /// The tabs `action` on `query`'s matches acts on: every queue in scope
    /// (the query's, else every queue of `snapshot`) × every state in scope
    /// that allows `action` and that the snapshot counts non-empty.
    ///
    /// Errors: [`Error::InvalidArgument`] when no state in scope allows the
    /// action, or for more than [`SEARCH_JOB_TABS`] tabs (narrow the search
    /// with `queue:` or `state:`), or when the snapshot could not read the
    /// queue list.
    pub fn plan_search_jobs(
        &self,
        query: &SearchQuery,
        snapshot: &Snapshot,
        action: TaskAction,
    ) -> Result<SearchJobPlan> {
        if let Some(e) = &snapshot.error {
            return Err(Error::InvalidArgument(format!(
                "the queue statistics cannot be read, so the tabs to act on are unknown: {e}"
            )));
        }
        let (states, left_alone): (Vec<TaskState>, Vec<TaskState>) = query
            .scope_states()
            .into_iter()
            .partition(|s| action.allowed_in(*s));
        if states.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{} does not apply to {} tasks",
                action.as_str(),
                left_alone
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(" or ")
            )));
        }
        let mut tabs = Vec::new();
        for row in &snapshot.queues {
            if !query.queues.is_empty() && !query.queues.contains(&row.name) {
                continue;
            }
            let Ok(info) = &row.info else { continue };
            for s in &states {
                if state_count(info, *s) > 0 {
                    tabs.push((row.name.clone(), *s));
                }
            }
        }
        if tabs.len() > SEARCH_JOB_TABS {
            return Err(Error::InvalidArgument(format!(
                "this search spans {} queue tabs; a bulk action takes at most {SEARCH_JOB_TABS}: narrow it with queue: or state:",
                tabs.len()
            )));
        }
        let filters = Some(query.clone().filters_only()).filter(|q| !q.is_unfiltered());
        Ok(SearchJobPlan {
            action,
            filters,
            tabs,
            left_alone,
        })
    }

    /// How many tasks `plan` would act on: `query` run over the plan's
    /// tabs for at most [`SEARCH_PREVIEW_STEPS`] steps; exact when the scan
    /// completes, else extrapolated from the tasks scanned. Corrupt rows
    /// count only for an unfiltered plan (a filtered job skips them).
    ///
    /// Errors: those of [`Inspector::search`].
    pub async fn preview_search_jobs(
        &self,
        plan: &SearchJobPlan,
        query: &SearchQuery,
        snapshot: &Snapshot,
    ) -> Result<JobPreview> {
        let mut scoped = query.clone();
        scoped.queues = plan.tabs.iter().map(|(q, _)| q.clone()).collect();
        scoped.queues.dedup();
        scoped.states = query
            .scope_states()
            .into_iter()
            .filter(|s| plan.tabs.iter().any(|(_, t)| t == s))
            .collect();
        if plan.tabs.is_empty() {
            return Ok(JobPreview {
                count: 0,
                exact: true,
                scanned: 0,
                total: 0,
            });
        }
        let (mut count, mut cursor, mut total, mut scanned) = (0u64, None, 0, 0);
        for _ in 0..SEARCH_PREVIEW_STEPS {
            let page = self
                .search(&scoped, snapshot, cursor.as_ref(), SEARCH_BUDGET)
                .await?;
            count += page
                .hits
                .iter()
                .filter(|h| plan.filters.is_none() || h.row.task().is_some())
                .count() as u64;
            (total, scanned) = (page.total as u64, page.scanned as u64);
            cursor = page.cursor;
            if cursor.is_none() {
                break;
            }
        }
        Ok(JobPreview::counted(count, cursor.is_none(), scanned, total))
    }

    /// Starts `plan`'s jobs (one per tab) as `actor`, in tab order, and
    /// returns them. Errors: those of [`Inspector::start_job`] (the jobs
    /// started before the error keep running).
    pub async fn start_search_jobs(
        &self,
        plan: &SearchJobPlan,
        actor: Option<&str>,
    ) -> Result<Vec<JobStatus>> {
        let mut jobs = Vec::new();
        for spec in plan.specs() {
            jobs.push(self.start_job(spec, actor).await?);
        }
        Ok(jobs)
    }
}
