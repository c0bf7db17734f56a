//! The outage signal of one queue (S14, S29): a live fragment with a
//! sparkline of the retry set's size over the last hour, its growth over 5
//! and 15 minutes and the hour, and a banner when it grows fast (many tasks
//! failing now). The fragment does not poll by itself: the queue page's
//! retry tab holds a container that loads and refreshes it,
//! `<div id="outage" class="live" hx-get="{root}/queues/{queue}/outage"
//! hx-trigger="load, every Ns" hx-swap="innerHTML">`, so one request per
//! interval serves it and a failed poll marks the container stale.
//!
//! The samples come from the embedded engine's sampler
//! (`asynqdeck:{<queue>}:samples`, see `server::sampler`); the decision is
//! [`retry_growth`](crate::inspector::retry_growth), which the queues
//! overview shares. Beside the sparkline: the retry pressure, retries due
//! in the next 1, 5 and 60 minutes ([`crate::web::PressureCache`]).

use std::time::Duration;

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use chrono::{DateTime, Utc};

use super::Layout;
use super::servers::When;
use crate::broker::SAMPLE_WINDOW;
use crate::inspector::{Growth, QueueSample, RetryGrowth, retry_growth};
use crate::web::AppState;
use crate::web::chart::{self, Sparkline};
use crate::web::error::PageError;

/// `+12`, `−3` (a real minus sign), `±0`.
pub fn signed(n: i64) -> String {
    match n {
        0 => "±0".to_string(),
        n if n > 0 => format!("+{n}"),
        n => format!("−{}", n.unsigned_abs()),
    }
}

/// A span in words for the growth figures: whole minutes from one minute
/// up (`5 min`), else seconds (`45 s`).
pub fn span_words(span: Duration) -> String {
    let secs = span.as_secs();
    if secs >= 60 {
        format!("{} min", (secs + 30) / 60)
    } else {
        format!("{secs} s")
    }
}

/// One growth figure, formatted: `+40 in 5 min`.
pub struct Figure {
    pub delta: String,
    pub span: String,
    /// Positive growth (shown in the warning colour).
    pub up: bool,
}

impl From<Growth> for Figure {
    fn from(g: Growth) -> Self {
        Figure {
            delta: signed(g.delta()),
            span: span_words(g.span),
            up: g.delta() > 0,
        }
    }
}

/// What the fragment shows once there are two samples to compare.
pub struct Signal {
    pub fast: bool,
    pub retry_now: i64,
    pub archived_now: i64,
    pub last_5m: Figure,
    /// Shown only when the series reaches further back than 5 minutes.
    pub last_15m: Option<Figure>,
    /// Shown only when the series reaches further back than 15 minutes.
    pub last_1h: Option<Figure>,
    /// Archived growth over the whole series.
    pub archived_growth: String,
    /// Span of the whole series, in words.
    pub series_span: String,
    pub latest: When,
    pub line: Sparkline,
}

fn signal(samples: &[QueueSample], g: RetryGrowth, now: DateTime<Utc>) -> Signal {
    let t1 = now.timestamp() as f64;
    let t0 = t1 - SAMPLE_WINDOW.as_secs() as f64;
    let points: Vec<(f64, u64)> = samples
        .iter()
        .map(|s| (s.at.timestamp() as f64, s.retry.max(0) as u64))
        .collect();
    let first_archived = samples
        .iter()
        .min_by_key(|s| s.at)
        .map_or(g.latest.archived, |s| s.archived);
    Signal {
        fast: g.fast,
        retry_now: g.latest.retry,
        archived_now: g.latest.archived,
        last_5m: g.last_5m.into(),
        last_15m: (g.last_15m.span > g.last_5m.span).then(|| g.last_15m.into()),
        last_1h: (g.last_1h.span > g.last_15m.span).then(|| g.last_1h.into()),
        archived_growth: signed(g.latest.archived - first_archived),
        series_span: span_words(g.last_1h.span),
        latest: When::new(g.latest.at, now),
        line: chart::sparkline(&points, t0, t1, 240.0, 36.0),
    }
}

#[derive(Template, WebTemplate)]
#[template(path = "_outage.html")]
struct OutageFragment {
    layout: Layout,
    queue: String,
    /// `None` while collecting (fewer than two samples in the last hour).
    signal: Option<Signal>,
    /// Samples in the last hour.
    count: usize,
    /// Retries due in the next 1 / 5 / 60 min (`3 · 40 · 200`), its
    /// tooltip, and whether it is stale (over the Redis budget).
    pressure: String,
    pressure_title: String,
    pressure_stale: bool,
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/queues/{queue}/outage", get(view_outage_get))
}

/// `GET /queues/{queue}/outage`: the fragment (always a fragment; it lives
/// inside the queue page). Unknown queue → 404.
async fn view_outage_get(State(state): State<AppState>, Path(queue): Path<String>) -> Response {
    let samples = match state.inspector.queue_samples(&queue).await {
        Ok(s) => s,
        Err(e) => return PageError::from_error(e, &state.config.root_path).into_response(),
    };
    let now = state.inspector.now();
    let signal = retry_growth(&samples, now).map(|g| signal(&samples, g, now));
    let cell = state
        .pressure
        .get(&state.inspector, std::slice::from_ref(&queue))
        .await
        .pop()
        .unwrap_or(crate::web::PressureCell::Unknown);
    OutageFragment {
        pressure: cell.text(),
        pressure_title: cell.title(),
        pressure_stale: cell.stale(),
        layout: Layout::new(&state, format!("{queue} · retry growth"), "queues"),
        count: samples.len(),
        signal,
        queue,
    }
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words() {
        assert_eq!(signed(0), "±0");
        assert_eq!(signed(12), "+12");
        assert_eq!(signed(-3), "−3");
        assert_eq!(span_words(Duration::from_secs(300)), "5 min");
        assert_eq!(span_words(Duration::from_secs(305)), "5 min");
        assert_eq!(span_words(Duration::from_secs(45)), "45 s");
        assert_eq!(span_words(Duration::from_secs(3600)), "60 min");
    }
}
