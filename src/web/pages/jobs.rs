//! The pages of background bulk jobs (issue 15 target 4): `GET /jobs` (the
//! newest jobs with phase and progress), `GET /jobs/{id}` (one job: its
//! spec, phase, a progress bar with done/total, rate and ETA refreshed
//! every second while it runs, a Cancel button, and the final report with
//! the skipped and failed ids), and `POST /jobs/{id}/cancel`.
//!
//! A job is started from a queue tab's confirmation page
//! (`queue_tab/bulk.rs`); the engine that runs it is the inspector's
//! ([`Inspector::start_job`](crate::Inspector::start_job)). Each handler is
//! one inspector call. Text from Redis (task ids, errors, filter values) is
//! escaped by askama.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use chrono::{DateTime, Utc};

use super::queue_tab::{Op, OpText, TimeView, trigger};
use super::{Layout, is_htmx};
use crate::inspector::jobs::{JobPhase, JobSpec, JobStatus};
use crate::web::AppState;
use crate::web::error::{PageError, action_error};
use crate::web::format;
use crate::web::urls::{self, filters};

/// Jobs listed on `/jobs`.
pub const JOBS_LISTED: usize = 25;

/// `GET /jobs`, `GET /jobs/{id}` (the page, or its live fragment for htmx),
/// `POST /jobs/{id}/cancel`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/jobs", get(jobs_get))
        .route("/jobs/{id}", get(job_get))
        .route("/jobs/{id}/cancel", post(cancel_post))
}

/// `1,234,567`: a count with thousands separators.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The verb of an action as the confirmation and job pages say it
/// (`delete`, `run`, …; cancel asks the workers to stop).
pub fn verb(op: Op) -> &'static str {
    match op {
        Op::Run => "run",
        Op::Archive => "archive",
        Op::Delete => "delete",
        Op::Cancel => "cancel",
    }
}

/// What a spec's filter selects, as text (`type = email:send, payload
/// contains "x"`); empty without a filter.
pub fn filter_text(spec: &JobSpec) -> String {
    let Some(f) = &spec.filter else {
        return String::new();
    };
    let mut parts = Vec::new();
    if !f.task_type.is_empty() {
        parts.push(format!("type = {}", f.task_type));
    }
    if !f.id.is_empty() {
        parts.push(format!("id = {}", f.id));
    }
    if !f.payload.is_empty() {
        parts.push(format!("payload contains {:?}", f.payload));
    }
    if !f.err.is_empty() {
        parts.push(format!("error group {}", f.err));
    }
    if let Some(q) = &f.search {
        parts.push(format!("search {}", q.to_text()));
    }
    parts.join(", ")
}

/// The tasks a spec names, without the verb: `pending tasks of queue q`,
/// `aggregating tasks of group g in queue q`, with ` matching <filter>`.
pub fn target_text(spec: &JobSpec) -> String {
    let mut s = match &spec.group {
        Some(g) => format!("{} tasks of group {g} in queue {}", spec.state, spec.queue),
        None => format!("{} tasks of queue {}", spec.state, spec.queue),
    };
    let f = filter_text(spec);
    if !f.is_empty() {
        s.push_str(" matching ");
        s.push_str(&f);
    }
    s
}

/// A job's one-line title: `Delete every pending task of queue q`, or
/// `Run the retry tasks of queue q matching type = x`.
pub fn title_text(spec: &JobSpec) -> String {
    let which = if filter_text(spec).is_empty() {
        "all"
    } else {
        "the"
    };
    format!("{} {which} {}", spec.action.label(), target_text(spec))
}

/// A job as its page and the list show it.
pub struct JobView {
    pub id: String,
    /// `{root}/jobs/{id}`.
    pub url: String,
    pub title: String,
    pub queue: String,
    /// `{root}/queues/{queue}`.
    pub queue_url: String,
    pub state: &'static str,
    /// `{root}/queues/{queue}/{state}` (with the group).
    pub tab_url: String,
    pub group: String,
    pub action: &'static str,
    pub filter: String,
    pub phase: &'static str,
    pub finished: bool,
    /// Whether the Cancel button is offered (queued or running).
    pub cancellable: bool,
    pub percent: u8,
    pub total: String,
    pub handled: String,
    pub done: String,
    pub skipped: String,
    pub failed: String,
    /// `1,234 tasks/s`, or `-` before the first chunk.
    pub rate: String,
    /// `3m 2s`, or `-` when unknown or finished.
    pub eta: String,
    pub actor: String,
    pub created: TimeView,
    pub started: Option<TimeView>,
    pub updated: TimeView,
    pub finished_at: Option<TimeView>,
    pub error: String,
    /// `{root}/queues/{queue}/tasks/`: report links append the encoded id.
    pub task_base: String,
    pub skipped_ids: Vec<String>,
    pub failed_ids: Vec<(String, String)>,
    /// The skipped count is more than the ids listed (only a bounded
    /// number is kept, and a filter's non-matches are counted, not listed).
    pub skipped_more: bool,
    pub failed_more: bool,
}

impl JobView {
    /// `j` as seen at `now`, with links under `root`.
    pub fn of(j: &JobStatus, root: &str, now: DateTime<Utc>) -> Self {
        let spec = &j.spec;
        let queue_url = format!("{root}/queues/{}", urls::segment(&spec.queue));
        let mut tab_url = format!("{queue_url}/{}", spec.state);
        if let Some(g) = &spec.group {
            tab_url.push_str(&format!("?group={}", urls::encode(g)));
        }
        let rate = match j.rate() {
            Some(r) => format!("{} tasks/s", thousands(r.round() as u64)),
            None => "-".into(),
        };
        let eta = match j.eta() {
            Some(d) => format::human_duration(d.as_secs_f64().ceil() as u64),
            None => "-".into(),
        };
        JobView {
            id: j.id.clone(),
            url: format!("{root}/jobs/{}", urls::segment(&j.id)),
            title: title_text(spec),
            queue: spec.queue.clone(),
            queue_url: queue_url.clone(),
            state: spec.state.as_str(),
            tab_url,
            group: spec.group.clone().unwrap_or_default(),
            action: spec.action.label(),
            filter: filter_text(spec),
            phase: j.phase.as_str(),
            finished: j.phase.is_finished(),
            cancellable: matches!(j.phase, JobPhase::Queued | JobPhase::Running),
            percent: j.percent(),
            total: thousands(j.total),
            handled: thousands(j.handled()),
            done: thousands(j.done),
            skipped: thousands(j.skipped),
            failed: thousands(j.failed),
            rate,
            eta,
            actor: j.actor.clone().unwrap_or_default(),
            created: TimeView::new(j.created_at, now),
            started: TimeView::opt(j.started_at, now),
            updated: TimeView::new(j.updated_at, now),
            finished_at: TimeView::opt(j.finished_at, now),
            error: j.error.clone().unwrap_or_default(),
            task_base: format!("{queue_url}/tasks/"),
            skipped_ids: j.skipped_ids.clone(),
            failed_ids: j.failed_ids.clone(),
            skipped_more: j.skipped > j.skipped_ids.len() as u64,
            failed_more: j.failed > j.failed_ids.len() as u64,
        }
    }
}

/// The live part of a job's page: phase, progress, Cancel, report.
#[derive(Template, WebTemplate)]
#[template(path = "_job.html")]
pub struct JobFragment {
    pub layout: Layout,
    pub job: JobView,
}

#[derive(Template, WebTemplate)]
#[template(path = "job.html")]
struct JobPage {
    layout: Layout,
    job: JobFragment,
}

/// The list of `/jobs` (its live fragment, refreshed every poll interval:
/// one read per listed job, so the list is short).
#[derive(Template, WebTemplate)]
#[template(path = "_jobs_list.html")]
struct JobsList {
    layout: Layout,
    jobs: Vec<JobView>,
    limit: usize,
}

#[derive(Template, WebTemplate)]
#[template(path = "jobs.html")]
struct JobsPage {
    layout: Layout,
    list: JobsList,
}

fn root_of(state: &AppState) -> String {
    state.config.root_path.trim_end_matches('/').to_string()
}

async fn jobs_get(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let root = root_of(&state);
    let jobs = match state.inspector.jobs(JOBS_LISTED).await {
        Ok(j) => j,
        Err(e) => return PageError::from_error(e, &root).into_response(),
    };
    let now = state.inspector.now();
    let list = JobsList {
        layout: Layout::new(&state, "Jobs", "jobs"),
        jobs: jobs.iter().map(|j| JobView::of(j, &root, now)).collect(),
        limit: JOBS_LISTED,
    };
    if is_htmx(&headers) {
        return list.into_response();
    }
    JobsPage {
        layout: Layout::new(&state, "Jobs", "jobs"),
        list,
    }
    .into_response()
}

/// The fragment of job `id`, or its error page (an unknown id is 404).
async fn fragment(state: &AppState, id: &str) -> Result<JobFragment, PageError> {
    let root = root_of(state);
    let job = state
        .inspector
        .job(id)
        .await
        .map_err(|e| PageError::from_error(e, &root))?;
    Ok(JobFragment {
        layout: Layout::new(state, format!("Job {id}"), "jobs"),
        job: JobView::of(&job, &root, state.inspector.now()),
    })
}

async fn job_get(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let job = match fragment(&state, &id).await {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    if is_htmx(&headers) {
        return job.into_response();
    }
    JobPage {
        layout: Layout::new(&state, job.job.title.clone(), "jobs"),
        job,
    }
    .into_response()
}

/// Asks the job to stop; answers its re-rendered fragment with a toast.
async fn cancel_post(State(state): State<AppState>, Path(id): Path<String>) -> Response {
    if let Err(e) = state.inspector.cancel_job(&id).await {
        return action_error(e);
    }
    match fragment(&state, &id).await {
        Ok(f) => {
            let message = if f.job.finished {
                format!("Job {id} had already finished ({}).", f.job.phase)
            } else {
                format!("Job {id}: cancel requested; it stops after its current chunk.")
            };
            ([trigger(&message, false)], f).into_response()
        }
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskState;
    use crate::inspector::TabFilter;

    fn layout(read_only: bool) -> Layout {
        Layout {
            root: "/r".into(),
            csrf_token: "t".into(),
            read_only,
            poll_secs: 5,
            title: "job".into(),
            nav: "jobs",
        }
    }

    fn status(phase: JobPhase) -> JobStatus {
        let t0 = chrono::DateTime::parse_from_rfc3339("2026-12-02T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let started = phase != JobPhase::Queued;
        JobStatus {
            id: "j1".into(),
            spec: JobSpec {
                queue: "q".into(),
                state: TaskState::Pending,
                group: None,
                action: Op::Delete,
                filter: None,
            },
            phase,
            total: 2_000,
            done: if started { 1_000 } else { 0 },
            skipped: if started { 1 } else { 0 },
            failed: if started { 1 } else { 0 },
            skipped_ids: if started {
                vec!["<script>alert(1)</script>".into()]
            } else {
                Vec::new()
            },
            failed_ids: if started {
                vec![("f/1".into(), "<b>boom</b>".into())]
            } else {
                Vec::new()
            },
            actor: None,
            created_at: t0,
            started_at: started.then_some(t0),
            updated_at: t0 + chrono::Duration::seconds(10),
            finished_at: phase
                .is_finished()
                .then_some(t0 + chrono::Duration::seconds(10)),
            error: (phase == JobPhase::Failed).then(|| "Redis went away".to_string()),
        }
    }

    fn render(phase: JobPhase, read_only: bool) -> String {
        let now = Utc::now();
        JobFragment {
            layout: layout(read_only),
            job: JobView::of(&status(phase), "/r", now),
        }
        .render()
        .unwrap()
    }

    /// Each phase: the badge; polling and Cancel only while it can change;
    /// the report (escaped ids linking to their task pages) once finished.
    #[test]
    fn fragment_per_phase() {
        use JobPhase::*;
        for phase in [Queued, Running, Cancelling, Cancelled, Done, Failed] {
            let html = render(phase, false);
            let name = phase.as_str();
            assert!(
                html.contains(&format!("<span class=\"badge phase {name}\">{name}</span>")),
                "{name}: {html}"
            );
            assert_eq!(
                html.contains("hx-trigger=\"every 1s\""),
                !phase.is_finished(),
                "{name} polls while not finished"
            );
            assert_eq!(
                html.contains("hx-post=\"/r/jobs/j1/cancel\""),
                matches!(phase, Queued | Running),
                "{name}: Cancel button"
            );
            assert_eq!(
                html.contains("<h2>Report</h2>"),
                phase.is_finished(),
                "{name}"
            );
            assert_eq!(
                html.contains("The job failed: Redis went away"),
                phase == Failed,
                "{name}"
            );
            assert!(!html.contains("<script>"), "{name}: escaped");
            assert!(!html.contains("<b>boom</b>"), "{name}: escaped");
        }
        let running = render(Running, false);
        assert!(running.contains("<progress class=\"job-bar\" max=\"100\" value=\"50\""));
        assert!(running.contains("<b class=\"percent\">50 %</b>"));
        assert!(running.contains("1,002 of 2,000 tasks handled"));
        // 1,002 tasks in 10 s: 100 tasks/s, 998 left: 10 s.
        assert!(
            running.contains("<dd class=\"rate\">100 tasks/s</dd>"),
            "{running}"
        );
        assert!(running.contains("<dd class=\"eta\">10s</dd>"), "{running}");
        let done = render(Done, false);
        assert!(done.contains("<progress class=\"job-bar\" max=\"100\" value=\"100\""));
        assert!(done.contains("<dd class=\"eta\">-</dd>"));
        assert!(done.contains(
            "<a class=\"mono\" href=\"/r/queues/q/tasks/%3Cscript%3Ealert%281%29%3C%2Fscript%3E\">&#60;script&#62;alert(1)&#60;/script&#62;</a>"
        ), "{done}");
        assert!(done.contains("<a class=\"mono\" href=\"/r/queues/q/tasks/f%2F1\">f/1</a>"));
        assert!(done.contains("<pre class=\"err\">&#60;b&#62;boom&#60;/b&#62;</pre>"));
        assert!(done.contains("<b class=\"done\">1,000</b> done"));
        // Read-only: no Cancel button.
        assert!(!render(Running, true).contains("/cancel"));
    }

    #[test]
    fn counts_have_separators() {
        let cases = [
            (0, "0"),
            (999, "999"),
            (1_000, "1,000"),
            (12_345, "12,345"),
            (1_000_000, "1,000,000"),
        ];
        for (n, want) in cases {
            assert_eq!(thousands(n), want);
        }
    }

    #[test]
    fn titles() {
        let mut spec = JobSpec {
            queue: "q".into(),
            state: TaskState::Pending,
            group: None,
            action: Op::Delete,
            filter: None,
        };
        assert_eq!(title_text(&spec), "Delete all pending tasks of queue q");
        spec.filter = Some(TabFilter {
            task_type: "email:send".into(),
            payload: "x".into(),
            ..TabFilter::default()
        });
        assert_eq!(
            title_text(&spec),
            "Delete the pending tasks of queue q matching type = email:send, payload contains \"x\""
        );
        spec.state = TaskState::Aggregating;
        spec.group = Some("g".into());
        spec.filter = None;
        spec.action = Op::Run;
        assert_eq!(
            title_text(&spec),
            "Run all aggregating tasks of group g in queue q"
        );
    }
}
