//! Enqueue, clone and edit from the dashboard (issue 17 item 8):
//!
//! - `GET /enqueue` (`?queue=` prefills the queue; `?clone_queue=&clone_id=`
//!   prefills everything from that task, "Clone" on the task page) and
//!   `POST /enqueue`: a form with the type, the payload (text, JSON or
//!   base64) and every option ([`EnqueueForm`]); the new task's page on
//!   success;
//! - `GET /queues/{q}/tasks/{id}/edit` and `POST` the same: the payload of
//!   a pending, scheduled, retry or archived task
//!   ([`Inspector::edit_task_payload`](crate::Inspector::edit_task_payload)).
//!
//! Both POSTs go through htmx (CSRF token) and are audited like every
//! change. Refused input answers the form again (200, swapped in by htmx),
//! the values kept and the problems listed; the audit entry records it as
//! refused (422) with the problems.
//! Read-only mode shows no form (and the security layer refuses the POST).
//! Both POSTs take bodies up to [`MAX_FORM_BODY`] (axum's default, 2 MB,
//! would refuse editing a large payload).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{DefaultBodyLimit, Form, Path, Query, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::Layout;
use super::enqueue_form::{EnqueueForm, PAYLOAD_FORMATS, payload_bytes, payload_field};
use crate::web::AppState;
use crate::web::audit::{AuditError, AuditTarget};
use crate::web::error::PageError;
use crate::web::urls;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/enqueue", get(enqueue_get).post(enqueue_post))
        .route(
            "/queues/{queue}/tasks/{id}/edit",
            get(edit_get).post(edit_post),
        )
        .layer(DefaultBodyLimit::max(MAX_FORM_BODY))
}

/// Largest request body of the enqueue and edit forms: 64 MiB, bytes as
/// sent (a URL-encoded payload takes up to three bytes per byte). Larger
/// bodies answer 413.
pub const MAX_FORM_BODY: usize = 64 * 1024 * 1024;

#[derive(Template, WebTemplate)]
#[template(path = "enqueue.html")]
struct EnqueuePage {
    layout: Layout,
    form: FormView,
}

/// The form fragment: the values and the problems of the last try.
#[derive(Template, WebTemplate)]
#[template(path = "_enqueue_form.html")]
struct FormView {
    root: String,
    f: EnqueueForm,
    formats: [&'static str; 3],
    errors: Vec<String>,
    /// "Cloned from <queue>/<id>" note, empty otherwise.
    cloned_from: String,
}

#[derive(Debug, Default, Deserialize)]
struct EnqueueQuery {
    queue: Option<String>,
    clone_queue: Option<String>,
    clone_id: Option<String>,
}

fn root(state: &AppState) -> String {
    state.config.root_path.trim_end_matches('/').to_string()
}

/// A 200 answer that makes htmx open the task's page.
fn go_to_task(state: &AppState, queue: &str, id: &str) -> Response {
    let url = format!(
        "{}/queues/{}/tasks/{}",
        root(state),
        urls::segment(queue),
        urls::segment(id)
    );
    let value = HeaderValue::from_str(&url).unwrap_or_else(|_| HeaderValue::from_static("/"));
    (
        StatusCode::OK,
        [(HeaderName::from_static("hx-redirect"), value)],
        format!("Opening {url}"),
    )
        .into_response()
}

/// The form again (200, so htmx swaps it in), recorded in the audit log
/// as refused with 422 and the problems.
fn refused(body: impl IntoResponse, errors: &[String]) -> Response {
    let mut r = body.into_response();
    r.extensions_mut().insert(AuditError(
        StatusCode::UNPROCESSABLE_ENTITY.as_u16(),
        errors.join("; "),
    ));
    r
}

async fn enqueue_get(State(state): State<AppState>, Query(q): Query<EnqueueQuery>) -> Response {
    let mut f = EnqueueForm {
        payload_format: "json".into(),
        queue: q.queue.clone().unwrap_or_default(),
        ..EnqueueForm::default()
    };
    let mut cloned_from = String::new();
    if let (Some(cq), Some(cid)) = (&q.clone_queue, &q.clone_id) {
        match state.inspector.get_task_info(cq, cid).await {
            Ok(t) => {
                f = EnqueueForm::clone_of(&t);
                cloned_from = format!("{cq}/{cid}");
            }
            Err(e) => return PageError::from_error(e, &state.config.root_path).into_response(),
        }
    }
    EnqueuePage {
        layout: Layout::new(&state, "Enqueue a task", "enqueue"),
        form: FormView {
            root: root(&state),
            f,
            formats: PAYLOAD_FORMATS,
            errors: Vec::new(),
            cloned_from,
        },
    }
    .into_response()
}

async fn enqueue_post(State(state): State<AppState>, Form(f): Form<EnqueueForm>) -> Response {
    let again = |f: EnqueueForm, errors: Vec<String>| {
        let view = FormView {
            root: root(&state),
            f,
            formats: PAYLOAD_FORMATS,
            errors: errors.clone(),
            cloned_from: String::new(),
        };
        refused(view, &errors)
    };
    let (task, options) = match f.parse() {
        Ok(x) => x,
        Err(errors) => return again(f, errors),
    };
    match state.inspector.enqueue(&task, options).await {
        Ok(info) => {
            state.stats.invalidate().await;
            let mut r = go_to_task(&state, &info.queue, &info.id);
            r.extensions_mut().insert(crate::web::AuditCount(1));
            r.extensions_mut().insert(AuditTarget {
                queue: info.queue.clone(),
                scope: format!("tasks/{}", info.id),
            });
            r
        }
        Err(e) => again(f, vec![e.to_string()]),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "task_edit.html")]
struct EditPage {
    layout: Layout,
    form: EditForm,
}

/// The payload edit fragment.
#[derive(Template, WebTemplate)]
#[template(path = "_edit_form.html")]
struct EditForm {
    action: String,
    task_url: String,
    queue: String,
    id: String,
    state: String,
    payload: String,
    payload_format: String,
    formats: [&'static str; 3],
    errors: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct EditBody {
    payload: String,
    payload_format: String,
}

fn edit_form(state: &AppState, queue: &str, id: &str) -> EditForm {
    let task_url = format!(
        "{}/queues/{}/tasks/{}",
        root(state),
        urls::segment(queue),
        urls::segment(id)
    );
    EditForm {
        action: format!("{task_url}/edit"),
        task_url,
        queue: queue.to_string(),
        id: id.to_string(),
        state: String::new(),
        payload: String::new(),
        payload_format: "text".into(),
        formats: PAYLOAD_FORMATS,
        errors: Vec::new(),
    }
}

async fn edit_get(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
) -> Response {
    let task = match state.inspector.get_task_info(&queue, &id).await {
        Ok(t) => t,
        Err(e) => return PageError::from_error(e, &state.config.root_path).into_response(),
    };
    let (payload, format) = payload_field(&task.payload);
    let mut form = edit_form(&state, &queue, &id);
    form.state = task.state.as_str().to_string();
    form.payload = payload;
    form.payload_format = format.to_string();
    EditPage {
        layout: Layout::new(&state, format!("Edit task {id}"), "queues"),
        form,
    }
    .into_response()
}

async fn edit_post(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
    Form(body): Form<EditBody>,
) -> Response {
    let again = |errors: Vec<String>| {
        let mut form = edit_form(&state, &queue, &id);
        form.payload = body.payload.clone();
        form.payload_format = body.payload_format.clone();
        form.errors = errors.clone();
        refused(form, &errors)
    };
    let bytes = match payload_bytes(&body.payload, body.payload_format.trim()) {
        Ok(b) => b,
        Err(e) => return again(vec![e]),
    };
    match state.inspector.edit_task_payload(&queue, &id, bytes).await {
        Ok(_) => {
            let mut r = go_to_task(&state, &queue, &id);
            r.extensions_mut().insert(crate::web::AuditCount(1));
            r
        }
        Err(e) => again(vec![e.to_string()]),
    }
}
