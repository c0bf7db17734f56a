//! Bulk actions as background jobs (issue 15 target 4): every "all" action
//! of a tab (`…/all/{op}`, the whole tab or group) and every "matching"
//! action (`…/matching/{op}`, what the filters or an error group match,
//! over the whole tab) is a job.
//!
//! `GET` of either path is the confirmation page: the preview count
//! ([`Inspector::preview_job`](crate::Inspector::preview_job), exact, or
//! "about N" counted over a bounded scan) and a Confirm button. `POST` of
//! the same path (CSRF token, refused in read-only mode) starts the job
//! ([`Inspector::start_job`](crate::Inspector::start_job)) and sends the
//! person to its page: `HX-Redirect: {root}/jobs/{id}` for htmx, else
//! `303 See Other`. Filters ride in the query (`type`, `id`, `q`, `err`,
//! `group`); a POST body `err=<group id>` (an error group's button) acts on
//! that error group instead of the view's filters.

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::actions::{Op, OpText};
use super::query::{Filter, View, ViewQuery, encode, parse_state};
use super::routes::unknown_tab;
use crate::TaskState;
use crate::inspector::SearchQuery;
use crate::inspector::jobs::{JobPreview, JobSpec};
use crate::web::AppState;
use crate::web::error::{PageError, action_error};
use crate::web::pages::jobs::{target_text, thousands, title_text, verb};
use crate::web::pages::{Layout, is_htmx};
use crate::web::urls;

/// Which tasks of the tab a bulk action names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Scope {
    /// Every task of the tab (of the group, on the aggregating tab).
    All,
    /// What the view's filters (or the posted error group) match.
    Matching,
}

impl Scope {
    fn as_str(self) -> &'static str {
        match self {
            Scope::All => "all",
            Scope::Matching => "matching",
        }
    }
}

/// Body of a "matching" POST: an error group to act on instead of the
/// view's filters.
#[derive(Debug, Default, Deserialize)]
pub(super) struct MatchingForm {
    #[serde(default)]
    err: Option<String>,
}

/// The job `scope` of `view` with `op` on `queue` means, or the error page
/// (unknown tab or action 404; an action the tab does not allow, or the
/// aggregating tab without a group, 400).
fn spec_of(
    state: &AppState,
    queue: &str,
    tab: &str,
    op: &str,
    scope: Scope,
    query: &ViewQuery,
    err: Option<String>,
) -> Result<(JobSpec, View), PageError> {
    let root = &state.config.root_path;
    let Some(tab) = parse_state(tab) else {
        return Err(unknown_tab(state, tab));
    };
    let Some(op) = Op::parse(op) else {
        return Err(PageError::not_found(format!("no action {op:?}"), root));
    };
    let bad = |message: String| PageError {
        status: StatusCode::BAD_REQUEST,
        message,
        root: root.clone(),
    };
    if !op.allowed_in(tab) {
        return Err(bad(format!("{} does not apply to {tab} tasks", op.label())));
    }
    let mut view = View::new(tab, query);
    if let Some(err) = err.filter(|e| !e.is_empty()) {
        // An error group's button: that group exactly, whatever the view filters.
        view.filter = Filter {
            err,
            ..Filter::default()
        };
    }
    if tab == TaskState::Aggregating && view.group.is_none() {
        return Err(bad("name the group: ?group=<name>".into()));
    }
    if let Some(text) = query.search.as_deref().filter(|s| !s.trim().is_empty()) {
        let search = SearchQuery::parse(text).map_err(|e| bad(e.to_string()))?;
        if !search.queues.is_empty() || !search.states.is_empty() {
            return Err(bad(
                "search= takes filters only: the tab names the queue and the state".into(),
            ));
        }
        view.filter.search = Some(search).filter(|q| !q.is_unfiltered());
    }
    let f = &view.filter;
    let filtered = !(f.task_type.is_empty()
        && f.id.is_empty()
        && f.payload.is_empty()
        && f.err.is_empty()
        && f.search.is_none());
    let filter = (scope == Scope::Matching && filtered).then(|| view.filter.clone());
    let spec = JobSpec {
        queue: queue.to_string(),
        state: tab,
        group: view.group.clone().filter(|_| tab == TaskState::Aggregating),
        action: op,
        filter,
    };
    Ok((spec, view))
}

/// The query string naming `spec`'s group and filter (what the POST needs).
fn spec_qs(spec: &JobSpec) -> String {
    let mut parts = Vec::new();
    let mut add = |k: &str, v: &str| {
        if !v.is_empty() {
            parts.push(format!("{k}={}", encode(v)));
        }
    };
    add("group", spec.group.as_deref().unwrap_or_default());
    if let Some(f) = &spec.filter {
        add("type", &f.task_type);
        add("id", &f.id);
        add("q", &f.payload);
        add("err", &f.err);
        add(
            "search",
            &f.search.as_ref().map(|q| q.to_text()).unwrap_or_default(),
        );
    }
    parts.join("&")
}

/// The preview's sentence: `This will delete 1,000,000 pending tasks of
/// queue q.`, or `This will run at least 1,200 retry tasks of queue q
/// matching type = x: found in the first 5,000 of 20,000; …` (a lower
/// bound), `No match in the first …` when the scan found none yet;
/// `Nothing to do: …` when exactly none.
pub fn preview_text(spec: &JobSpec, p: &JobPreview) -> String {
    let target = target_text(spec);
    if p.exact && p.count == 0 {
        return format!("Nothing to do: there are no {target}.");
    }
    if p.exact {
        return format!(
            "This will {} {} {target}.",
            verb(spec.action),
            thousands(p.count)
        );
    }
    if p.count == 0 {
        return format!(
            "No match in the first {} of {} {target}; the rest was not counted: the job looks at every task.",
            thousands(p.scanned),
            thousands(p.total)
        );
    }
    format!(
        "This will {} at least {} {target}: found in the first {} of {}; the job looks at every task.",
        verb(spec.action),
        thousands(p.count),
        thousands(p.scanned),
        thousands(p.total)
    )
}

/// What the action does to each task, under the count.
fn consequence(op: Op) -> &'static str {
    match op {
        Op::Run => "Each task moves to pending, where workers pick it up.",
        Op::Archive => {
            "Each task moves to the archived tab, from where it can be run again. asynq keeps at most 10,000 archived tasks per queue (and 90 days): past that each one archived evicts the oldest."
        }
        Op::Delete => "Deleted tasks are gone for good.",
        Op::Cancel => "The servers running them are asked to cancel them.",
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "bulk_confirm.html")]
struct ConfirmPage {
    layout: Layout,
    queue: String,
    queue_url: String,
    state: &'static str,
    /// The tab with the view's filters, for "Back".
    back_url: String,
    title: String,
    preview: String,
    consequence: &'static str,
    /// The tasks a filter names are read in a bounded scan when counted.
    approximate: bool,
    /// Exactly nothing to do: no Confirm button.
    nothing: bool,
    /// The POST that starts the job.
    post_url: String,
    danger: bool,
    button: String,
}

fn tab_base(state: &AppState, queue: &str, tab: TaskState) -> (String, String) {
    let root = state.config.root_path.trim_end_matches('/');
    let queue_url = format!("{root}/queues/{}", urls::segment(queue));
    let tab_url = format!("{queue_url}/{tab}");
    (queue_url, tab_url)
}

async fn confirm_page(
    state: &AppState,
    queue: &str,
    tab: &str,
    op: &str,
    scope: Scope,
    query: &ViewQuery,
) -> Response {
    let (spec, view) = match spec_of(state, queue, tab, op, scope, query, None) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let preview = match state.inspector.preview_job(&spec).await {
        Ok(p) => p,
        Err(e) => return PageError::from_error(e, &state.config.root_path).into_response(),
    };
    let (queue_url, tab_url) = tab_base(state, queue, spec.state);
    let qs = spec_qs(&spec);
    let with_qs = |base: String| {
        if qs.is_empty() {
            base
        } else {
            format!("{base}?{qs}")
        }
    };
    let count = match (preview.exact, preview.count) {
        (true, n) => format!("{} tasks", thousands(n)),
        (false, 0) => "the matches".to_string(),
        (false, n) => format!("at least {} tasks", thousands(n)),
    };
    ConfirmPage {
        layout: Layout::new(state, format!("{} · confirm", title_text(&spec)), "queues"),
        queue: queue.to_string(),
        queue_url,
        state: spec.state.as_str(),
        back_url: format!("{tab_url}?{}", view.qs_at(1, view.size)),
        title: title_text(&spec),
        preview: preview_text(&spec, &preview),
        consequence: consequence(spec.action),
        approximate: !preview.exact,
        nothing: preview.exact && preview.count == 0,
        post_url: confirmed_url(
            with_qs(format!(
                "{tab_url}/{}/{}",
                scope.as_str(),
                spec.action.as_str()
            )),
            (preview.exact && spec.filter.is_none()).then_some(preview.count),
        ),
        danger: matches!(spec.action, Op::Delete | Op::Cancel),
        button: format!("{} {count}", spec.action.label()),
    }
    .into_response()
}

async fn start(
    state: &AppState,
    headers: &HeaderMap,
    (queue, tab, op): (String, String, String),
    scope: Scope,
    query: &ViewQuery,
    err: Option<String>,
    at_most: Option<u64>,
) -> Response {
    let (spec, _) = match spec_of(state, &queue, &tab, &op, scope, query, err) {
        Ok(x) => x,
        Err(e) => return (e.status, e.message).into_response(),
    };
    let actor = state.config.basic_auth.as_ref().map(|(u, _)| u.as_str());
    let job = match state
        .inspector
        .start_job_at_most(spec, actor, at_most)
        .await
    {
        Ok(j) => j,
        Err(e) => return action_error(e),
    };
    let root = state.config.root_path.trim_end_matches('/');
    let url = format!("{root}/jobs/{}", urls::segment(&job.id));
    let value = HeaderValue::from_str(&url).unwrap_or_else(|_| HeaderValue::from_static("/jobs"));
    if is_htmx(headers) {
        (
            StatusCode::OK,
            [(HeaderName::from_static("hx-redirect"), value)],
            format!("Job {} started.", job.id),
        )
            .into_response()
    } else {
        (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, value)],
            format!("Job {} started.", job.id),
        )
            .into_response()
    }
}

/// `GET …/{state}/all/{op}`: the confirmation page of the whole tab.
pub(super) async fn all_get(
    State(state): State<AppState>,
    Path((queue, tab, op)): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
) -> Response {
    confirm_page(&state, &queue, &tab, &op, Scope::All, &query).await
}

/// `GET …/{state}/matching/{op}`: the confirmation page of what the
/// filters match.
pub(super) async fn matching_get(
    State(state): State<AppState>,
    Path((queue, tab, op)): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
) -> Response {
    confirm_page(&state, &queue, &tab, &op, Scope::Matching, &query).await
}

/// The Confirm button's URL: `confirmed=<count>` added when the preview
/// was an exact count of a whole tab, so the job acts on at most the tasks
/// the person saw counted.
fn confirmed_url(url: String, count: Option<u64>) -> String {
    match count {
        Some(n) if url.contains('?') => format!("{url}&confirmed={n}"),
        Some(n) => format!("{url}?confirmed={n}"),
        None => url,
    }
}

/// `confirmed=<count>` of the Confirm button ([`confirmed_url`]).
#[derive(Debug, Default, Deserialize)]
pub(super) struct Confirmed {
    confirmed: Option<u64>,
}

/// `POST …/{state}/all/{op}`: starts the job on the whole tab, on at most
/// the confirmed count of tasks.
pub(super) async fn all_post(
    State(state): State<AppState>,
    Path(path): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
    Query(confirmed): Query<Confirmed>,
    headers: HeaderMap,
) -> Response {
    let mut response = start(
        &state,
        &headers,
        path,
        Scope::All,
        &query,
        None,
        confirmed.confirmed,
    )
    .await;
    if let Some(n) = confirmed.confirmed {
        response.extensions_mut().insert(crate::web::AuditCount(n));
    }
    response
}

/// `POST …/{state}/matching/{op}`: starts the job on what the filters (or
/// the posted error group) match.
pub(super) async fn matching_post(
    State(state): State<AppState>,
    Path(path): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
    headers: HeaderMap,
    body: Result<Form<MatchingForm>, axum::extract::rejection::FormRejection>,
) -> Response {
    let err = body.map(|Form(b)| b).unwrap_or_default().err;
    let search = query
        .search
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| format!("{}/matching search {s}", path.1));
    let queue = path.0.clone();
    let mut response = start(&state, &headers, path, Scope::Matching, &query, err, None).await;
    if let Some(scope) = search {
        response
            .extensions_mut()
            .insert(crate::web::audit::AuditTarget { queue, scope });
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(filter: Option<Filter>) -> JobSpec {
        JobSpec {
            queue: "q".into(),
            state: TaskState::Pending,
            group: None,
            action: Op::Delete,
            filter,
        }
    }

    /// The preview sentence: exact, approximate (with what was scanned),
    /// and nothing to do.
    #[test]
    fn preview_sentences() {
        let p = |count, exact, scanned, total| JobPreview {
            count,
            exact,
            scanned,
            total,
        };
        assert_eq!(
            preview_text(&spec(None), &p(1_000_000, true, 0, 1_000_000)),
            "This will delete 1,000,000 pending tasks of queue q."
        );
        let f = Some(Filter {
            task_type: "t".into(),
            ..Filter::default()
        });
        assert_eq!(
            preview_text(&spec(f.clone()), &p(1_200, false, 5_000, 20_000)),
            "This will delete at least 1,200 pending tasks of queue q matching type = t: found in the first 5,000 of 20,000; the job looks at every task."
        );
        assert_eq!(
            preview_text(&spec(f.clone()), &p(0, true, 3, 3)),
            "Nothing to do: there are no pending tasks of queue q matching type = t."
        );
        assert_eq!(
            preview_text(&spec(f), &p(0, false, 5_000, 30_000)),
            "No match in the first 5,000 of 30,000 pending tasks of queue q matching type = t; the rest was not counted: the job looks at every task."
        );
        let mut s = spec(None);
        s.group = Some("g/1".into());
        assert_eq!(spec_qs(&s), "group=g%2F1");
    }
}
