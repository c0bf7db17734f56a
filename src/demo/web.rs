//! The demo's control page: start or end the webhook partner's outage by
//! hand (the browser tests use it), beside the automatic windows.

use std::sync::Arc;

use askama::Template;
use askama_web::WebTemplate;
use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Extension, Router};
use serde::Deserialize;

use super::workload::Partner;
use crate::web::AppState;
use crate::web::pages::{Layout, is_htmx};

#[derive(Template, WebTemplate)]
#[template(path = "demo.html")]
struct DemoPage {
    layout: Layout,
    status: DemoStatus,
}

#[derive(Template, WebTemplate)]
#[template(path = "_demo_status.html")]
struct DemoStatus {
    layout: Layout,
    outage_left: i64,
}

/// `/demo` (page), `/demo/outage/start?seconds=N`, `/demo/outage/end` (POST).
pub fn routes(partner: Arc<Partner>) -> Router<AppState> {
    Router::new()
        .route("/demo", get(view_demo_get))
        .route("/demo/outage/start", post(start_post))
        .route("/demo/outage/end", post(end_post))
        .layer(Extension(partner))
}

fn status(state: &AppState, partner: &Partner) -> DemoStatus {
    DemoStatus {
        layout: Layout::new(state, "Demo", "demo"),
        outage_left: partner.outage_left(),
    }
}

async fn view_demo_get(
    State(state): State<AppState>,
    Extension(partner): Extension<Arc<Partner>>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let s = status(&state, &partner);
    if is_htmx(&headers) {
        return s.into_response();
    }
    DemoPage {
        layout: Layout::new(&state, "Demo", "demo"),
        status: s,
    }
    .into_response()
}

#[derive(Deserialize)]
struct StartQuery {
    seconds: Option<u64>,
}

async fn start_post(
    State(state): State<AppState>,
    Extension(partner): Extension<Arc<Partner>>,
    Query(q): Query<StartQuery>,
) -> DemoStatus {
    let secs = q.seconds.unwrap_or(60).clamp(1, 3600);
    tracing::info!("demo: partner outage started by hand ({secs} s)");
    partner.start_outage(std::time::Duration::from_secs(secs));
    status(&state, &partner)
}

async fn end_post(
    State(state): State<AppState>,
    Extension(partner): Extension<Arc<Partner>>,
) -> DemoStatus {
    tracing::info!("demo: partner outage ended by hand");
    partner.end_outage();
    status(&state, &partner)
}
