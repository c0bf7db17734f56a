//! `/search/bulk/{op}?q=<query>`: a bulk action on every match of a search
//! that spans several queue tabs (issue 17 item 1). `GET` is the
//! confirmation page: the tabs it acts on, the preview count
//! ([`Inspector::preview_search_jobs`](crate::Inspector::preview_search_jobs))
//! and a Confirm button. `POST` (CSRF token, refused in read-only mode,
//! audited with the search as its scope) starts one background job per
//! tab ([`Inspector::start_search_jobs`](crate::Inspector::start_search_jobs))
//! and sends the person to `/jobs`. A search of one tab uses that tab's job
//! pages instead (`web/search.rs`, `bulk_links`).

use std::sync::Arc;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::jobs::{thousands, verb};
use super::{Layout, is_htmx};
use crate::inspector::{SearchJobPlan, SearchQuery, Snapshot, TaskAction};
use crate::web::AppState;
use crate::web::audit::AuditTarget;
use crate::web::error::{PageError, action_error};
use crate::web::search::SearchParams;
use crate::web::urls::{encode, segment};

pub fn routes() -> Router<AppState> {
    Router::new().route("/search/bulk/{op}", get(confirm_get).post(start_post))
}

/// One tab of the plan, for the page.
pub struct TabView {
    pub queue: String,
    pub state: &'static str,
    /// The tab's path under the root.
    pub href: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "search_bulk.html")]
struct ConfirmPage {
    layout: Layout,
    title: String,
    /// The search, as text.
    q: String,
    /// Back to the search.
    back_url: String,
    tabs: Vec<TabView>,
    /// States in scope the action leaves alone, as text.
    left_alone: String,
    preview: String,
    approximate: bool,
    nothing: bool,
    post_url: String,
    danger: bool,
    /// Archive: the archive's cap is said.
    archive: bool,
    button: String,
}

fn label(op: TaskAction) -> &'static str {
    match op {
        TaskAction::Run => "Run",
        TaskAction::Archive => "Archive",
        TaskAction::Delete => "Delete",
        TaskAction::Cancel => "Cancel",
    }
}

/// The query and plan of a request, or the error (unknown action 404, a
/// bad query or plan 400).
async fn plan_of(
    state: &AppState,
    op: &str,
    pairs: Vec<(String, String)>,
) -> Result<(SearchQuery, SearchJobPlan, Arc<Snapshot>), PageError> {
    let root = &state.config.root_path;
    let Some(op) = TaskAction::parse(op) else {
        return Err(PageError::not_found(format!("no action {op:?}"), root));
    };
    let bad = |message: String| PageError {
        status: StatusCode::BAD_REQUEST,
        message,
        root: root.clone(),
    };
    let query = SearchParams::from_pairs(pairs)
        .query()
        .map_err(|e| bad(e.to_string()))?;
    let snapshot = state.stats.get(&state.inspector).await;
    let plan = state
        .inspector
        .plan_search_jobs(&query, &snapshot, op)
        .map_err(|e| bad(e.to_string()))?;
    Ok((query, plan, snapshot))
}

async fn confirm_get(
    State(state): State<AppState>,
    Path(op): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
) -> Response {
    let (query, plan, snapshot) = match plan_of(&state, &op, pairs).await {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let preview = match state
        .inspector
        .preview_search_jobs(&plan, &query, &snapshot)
        .await
    {
        Ok(p) => p,
        Err(e) => return PageError::from_error(e, &state.config.root_path).into_response(),
    };
    let root = state.config.root_path.trim_end_matches('/').to_string();
    let text = query.to_text();
    let n = plan.tabs.len();
    let what = format!(
        "tasks matching the search in {n} queue tab{}",
        if n == 1 { "" } else { "s" }
    );
    let preview_text = if preview.exact && preview.count == 0 {
        "Nothing to do: no task matches the search.".to_string()
    } else if preview.exact {
        format!(
            "This will {} {} {what}.",
            verb(plan.action),
            thousands(preview.count)
        )
    } else if preview.count == 0 {
        format!(
            "No match in the first {} of {} tasks in scope; the rest was not counted: the jobs look at every task.",
            thousands(preview.scanned),
            thousands(preview.total)
        )
    } else {
        format!(
            "This will {} at least {} {what}: found in the first {} of {}; the jobs look at every task.",
            verb(plan.action),
            thousands(preview.count),
            thousands(preview.scanned),
            thousands(preview.total)
        )
    };
    let count = match (preview.exact, preview.count) {
        (true, n) => format!("{} tasks", thousands(n)),
        (false, 0) => "the matches".to_string(),
        (false, n) => format!("at least {} tasks", thousands(n)),
    };
    ConfirmPage {
        layout: Layout::new(
            &state,
            format!("{} search matches · confirm", label(plan.action)),
            "search",
        ),
        title: format!("{} every match of the search", label(plan.action)),
        back_url: format!("{root}/search?q={}", encode(&text)),
        tabs: plan
            .tabs
            .iter()
            .map(|(q, s)| TabView {
                queue: q.clone(),
                state: s.as_str(),
                href: format!("/queues/{}/{}", segment(q), s.as_str()),
            })
            .collect(),
        left_alone: plan
            .left_alone
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        preview: preview_text,
        approximate: !preview.exact,
        nothing: preview.exact && preview.count == 0,
        post_url: format!(
            "{root}/search/bulk/{}?q={}&confirmed={}",
            plan.action.as_str(),
            encode(&text),
            preview.count
        ),
        danger: matches!(plan.action, TaskAction::Delete | TaskAction::Cancel),
        archive: plan.action == TaskAction::Archive,
        button: format!("{} {count}", label(plan.action)),
        q: text,
    }
    .into_response()
}

async fn start_post(
    State(state): State<AppState>,
    Path(op): Path<String>,
    Query(pairs): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Response {
    let (query, plan, _) = match plan_of(&state, &op, pairs).await {
        Ok(x) => x,
        Err(e) => return (e.status, e.message).into_response(),
    };
    let actor = state.config.basic_auth.as_ref().map(|(u, _)| u.as_str());
    let mut started = 0;
    let mut response = match state.inspector.start_search_jobs(&plan, actor).await {
        Ok(jobs) => {
            started = jobs.len();
            let root = state.config.root_path.trim_end_matches('/');
            let url = format!("{root}/jobs");
            let value =
                HeaderValue::from_str(&url).unwrap_or_else(|_| HeaderValue::from_static("/jobs"));
            let text = format!("{} jobs started.", jobs.len());
            if is_htmx(&headers) {
                (
                    StatusCode::OK,
                    [(HeaderName::from_static("hx-redirect"), value)],
                    text,
                )
                    .into_response()
            } else {
                (StatusCode::SEE_OTHER, [(header::LOCATION, value)], text).into_response()
            }
        }
        Err(e) => action_error(e),
    };
    let queue = match query.queues.as_slice() {
        [one] => one.clone(),
        _ => String::new(),
    };
    // The count is the jobs' to report (the preview was a lower bound):
    // the entry names the search and the jobs started.
    response.extensions_mut().insert(AuditTarget {
        queue,
        scope: format!("search {}; {started} jobs", query.to_text()),
    });
    response
}
