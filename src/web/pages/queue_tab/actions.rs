//! The tab's actions: buttons (which actions a state offers comes from the
//! inspector's one table, [`TaskAction::for_state`]), toasts, and the POST
//! handler on a selection (`…/batch/{op}`, bounded by the page size). It
//! answers the re-rendered tab with a toast, or the error as a text answer
//! (htmx shows it as an error toast). Actions on the whole tab or group
//! (`…/all/{op}`) and on what the filters or an error group match
//! (`…/matching/{op}`) run as background jobs: `bulk.rs`.

use axum::extract::{Form, Path, Query, State};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::query::{View, ViewQuery, parse_state};
use super::render::render_tab;
use super::routes::unknown_tab;
use super::view::OpView;
use crate::TaskState;
use crate::web::AppState;
use crate::web::error::PageError;

pub use crate::inspector::TaskAction as Op;

/// How an action reads on buttons and in toasts.
pub trait OpText {
    /// The button label (`Run`, …).
    fn label(self) -> &'static str;
    /// What happened to several tasks (`ran`, …).
    fn past(self) -> &'static str;
    /// What happened to one task, for a toast.
    fn past_single(self) -> &'static str;
}

impl OpText for Op {
    fn label(self) -> &'static str {
        match self {
            Op::Run => "Run",
            Op::Archive => "Archive",
            Op::Delete => "Delete",
            Op::Cancel => "Cancel",
        }
    }

    fn past(self) -> &'static str {
        match self {
            Op::Run => "ran",
            Op::Archive => "archived",
            Op::Delete => "deleted",
            Op::Cancel => "cancel requested for",
        }
    }

    fn past_single(self) -> &'static str {
        match self {
            Op::Run => "moved to pending",
            Op::Archive => "archived",
            Op::Delete => "deleted",
            Op::Cancel => "cancellation requested",
        }
    }
}

/// Buttons for `ops`; `what` names the target in confirmations.
pub fn op_views(ops: &[Op], what: &str, confirm_all: bool) -> Vec<OpView> {
    ops.iter()
        .map(|op| OpView {
            op: op.as_str(),
            label: op.label(),
            danger: *op == Op::Delete,
            confirm: if confirm_all || *op == Op::Delete {
                format!("{} {what}?", op.label())
            } else {
                String::new()
            },
        })
        .collect()
}

/// `HX-Trigger` carrying a toast (an error toast when `error`) and a
/// refresh of the tab summary. JSON with every non-ASCII character escaped,
/// as header values must be ASCII.
pub fn trigger(message: &str, error: bool) -> (HeaderName, HeaderValue) {
    let event = if error { "toastError" } else { "toast" };
    let json = serde_json::json!({ event: message, "refreshSummary": true }).to_string();
    let mut ascii = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            ascii.push(c);
        } else {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                ascii.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    let value = HeaderValue::from_str(&ascii).unwrap_or_else(|_| HeaderValue::from_static("{}"));
    (HeaderName::from_static("hx-trigger"), value)
}

/// Form body of batch actions: repeated `ids`.
type Pairs = Vec<(String, String)>;

fn parse_op(state: &AppState, tab: &str, op: &str) -> Result<(TaskState, Op), PageError> {
    let Some(tab) = parse_state(tab) else {
        return Err(unknown_tab(state, tab));
    };
    match Op::parse(op) {
        Some(op) => Ok((tab, op)),
        None => Err(PageError::not_found(
            format!("no action {op:?}"),
            &state.config.root_path,
        )),
    }
}

/// Applies `op` to each id ([`Inspector::act_on_each`](crate::Inspector::act_on_each));
/// answers the re-rendered tab and a toast naming every failure.
async fn apply_each(
    state: &AppState,
    queue: &str,
    view: &View,
    op: Op,
    ids: Vec<String>,
    what: &str,
) -> Response {
    let asked = ids.len();
    let results = state.inspector.act_on_each(op, queue, ids).await;
    let mut failures: Vec<String> = Vec::new();
    let mut done = 0usize;
    for (id, result) in results {
        match result {
            Ok(()) => done += 1,
            Err(e) => failures.push(format!("{id}: {e}")),
        }
    }
    state.stats.invalidate().await;
    let message = if failures.is_empty() {
        format!("{} {done} {what}.", capitalise(op.past()))
    } else {
        format!(
            "{} {done} of {asked} {what}; {} failed: {}",
            capitalise(op.past()),
            failures.len(),
            failures.join("; ")
        )
    };
    respond_tab(state, queue, view, &message, !failures.is_empty()).await
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The re-rendered tab with a toast.
pub async fn respond_tab(
    state: &AppState,
    queue: &str,
    view: &View,
    message: &str,
    error: bool,
) -> Response {
    match render_tab(state, queue, view).await {
        Ok(tab) => ([trigger(message, error)], tab).into_response(),
        Err(e) => e.into_response(),
    }
}

pub(super) async fn batch_post(
    State(state): State<AppState>,
    Path((queue, tab, op)): Path<(String, String, String)>,
    Query(query): Query<ViewQuery>,
    Form(body): Form<Pairs>,
) -> Response {
    let (tab, op) = match parse_op(&state, &tab, &op) {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    let ids: Vec<String> = body
        .into_iter()
        .filter(|(k, v)| k == "ids" && !v.is_empty())
        .map(|(_, v)| v)
        .collect();
    if ids.is_empty() {
        return (StatusCode::BAD_REQUEST, "no task selected").into_response();
    }
    let view = View::new(tab, &query);
    let n = ids.len() as u64;
    let mut response = apply_each(&state, &queue, &view, op, ids, "selected tasks").await;
    response.extensions_mut().insert(crate::web::AuditCount(n));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers() {
        let (name, v) = trigger("Ran 1 «task»", true);
        assert_eq!(name, "hx-trigger");
        let text = v.to_str().unwrap();
        assert!(
            text.contains(r#""toastError":"Ran 1 \u00abtask\u00bb""#),
            "{text}"
        );
        let parsed: serde_json::Value = serde_json::from_str(text).unwrap();
        assert_eq!(parsed["toastError"], "Ran 1 «task»");
        assert_eq!(parsed["refreshSummary"], true);
    }

    /// Buttons: delete is dangerous and always confirmed.
    #[test]
    fn buttons() {
        let v = op_views(&Op::for_state(TaskState::Archived), "this task", false);
        let ops: Vec<(&str, &str, bool, &str)> = v
            .iter()
            .map(|o| (o.op, o.label, o.danger, o.confirm.as_str()))
            .collect();
        assert_eq!(
            ops,
            [
                ("run", "Run", false, ""),
                ("delete", "Delete", true, "Delete this task?")
            ]
        );
    }
}
