//! `/alerts` (issue 17 item 6): the configured alert webhooks (host only),
//! the cooldown, the last sends with their results, and "Send a test"
//! (`POST /alerts/test`, CSRF-protected, refused in read-only mode and
//! audited by the security and audit layers like every POST).

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::Layout;
use crate::web::AppState;
use crate::web::alerts::{SendRecord, host_of};
use crate::web::format;

/// One send, formatted.
pub struct SendRow {
    pub at: String,
    pub host: String,
    pub queue: String,
    pub signal: String,
    pub state: &'static str,
    pub ok: bool,
    pub result: String,
}

fn rows(sends: &[SendRecord]) -> Vec<SendRow> {
    sends
        .iter()
        .map(|s| SendRow {
            at: format::utc(s.at),
            host: s.host.clone(),
            queue: s.queue.clone(),
            signal: s.signal.clone(),
            state: s.state.as_str(),
            ok: s.result.is_ok(),
            result: match &s.result {
                Ok(code) => format!("{code} OK"),
                Err(e) => e.clone(),
            },
        })
        .collect()
}

#[derive(Template, WebTemplate)]
#[template(path = "_alerts_sends.html")]
struct Sends {
    sends: Vec<SendRow>,
    /// The test just sent (its rows are the first ones), when answering it.
    tested: bool,
}

#[derive(Template, WebTemplate)]
#[template(path = "alerts.html")]
struct AlertsPage {
    layout: Layout,
    hosts: Vec<String>,
    cooldown: String,
    sends: Sends,
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/alerts", get(alerts_get))
        .route("/alerts/test", post(test_post))
}

async fn alerts_get(State(state): State<AppState>) -> Response {
    let config = state.alerts.config();
    AlertsPage {
        layout: Layout::new(&state, "Alerts", "alerts"),
        hosts: config.webhooks.iter().map(|u| host_of(u)).collect(),
        cooldown: format::human_duration(config.cooldown.as_secs()),
        sends: Sends {
            sends: rows(&state.alerts.sends()),
            tested: false,
        },
    }
    .into_response()
}

async fn test_post(State(state): State<AppState>) -> Response {
    if !state.alerts.active() {
        return (
            axum::http::StatusCode::UNPROCESSABLE_ENTITY,
            "no alert webhook is configured (--alert-webhook)",
        )
            .into_response();
    }
    state.alerts.send_test().await;
    Sends {
        sends: rows(&state.alerts.sends()),
        tested: true,
    }
    .into_response()
}
