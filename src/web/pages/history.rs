//! Daily history of one queue: processed and failed per UTC day for the
//! last 7, 30 or 90 days, as a server-rendered SVG bar chart (succeeded =
//! processed − failed, stacked under failed) and a table (Go
//! `Inspector.History`; wire spec §9.7; asynqmon's "Tasks Processed" chart).
//!
//! The counters count attempts: a failed attempt counts as processed and as
//! failed, so one task that fails twice and then succeeds adds 3 processed
//! and 2 failed. Daily counters expire after 90 days.

use askama::Template;
use askama_web::WebTemplate;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::Layout;
use crate::inspector::DailyStats;
use crate::web::AppState;
use crate::web::chart::{self, BarChart, Column, Series};
use crate::web::error::PageError;
use crate::web::format;
use crate::web::urls::filters;

/// The ranges offered, in days.
const RANGES: [usize; 3] = [7, 30, 90];
/// Colour of the succeeded segments.
const SUCCEEDED_FILL: &str = "#2f855a";
/// Colour of the failed segments.
const FAILED_FILL: &str = "#c0392b";

/// One day of the table.
pub struct DayRow {
    /// `2026-11-29`.
    pub date: String,
    pub processed: i64,
    /// processed − failed, never below 0.
    pub succeeded: i64,
    pub failed: i64,
    pub error_rate: String,
}

#[derive(Template, WebTemplate)]
#[template(path = "history.html")]
struct HistoryPage {
    layout: Layout,
    queue: String,
    days: usize,
    ranges: [usize; 3],
    chart: BarChart,
    /// Newest (today) first.
    rows: Vec<DayRow>,
    total_processed: i64,
    total_succeeded: i64,
    total_failed: i64,
    total_error_rate: String,
}

pub fn routes() -> Router<AppState> {
    Router::new().route("/queues/{queue}/history", get(view_history_get))
}

#[derive(Deserialize)]
struct HistoryQuery {
    days: Option<String>,
}

/// Chart columns, oldest day first, from `stats` (today first).
fn columns(stats: &[DailyStats]) -> Vec<Column> {
    stats
        .iter()
        .rev()
        .map(|d| {
            let processed = d.processed.max(0) as u64;
            let failed = d.failed.max(0) as u64;
            let succeeded = processed.saturating_sub(failed);
            Column {
                label: d.date.format("%m-%d").to_string(),
                title: format!(
                    "{}: {} processed, {} succeeded, {} failed",
                    d.date, d.processed, succeeded, d.failed
                ),
                values: vec![succeeded, failed],
            }
        })
        .collect()
}

/// `GET /queues/{queue}/history?days=7|30|90` (default 7). Unknown queue →
/// 404; another number of days → 400.
async fn view_history_get(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Response {
    let root = &state.config.root_path;
    let days = match q.days.as_deref().map(str::trim) {
        None | Some("") => 7,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if RANGES.contains(&n) => n,
            _ => {
                return PageError {
                    status: StatusCode::BAD_REQUEST,
                    message: format!("days must be 7, 30 or 90, got {v:?}"),
                    root: root.clone(),
                }
                .into_response();
            }
        },
    };
    let stats = match state.inspector.history(&queue, days).await {
        Ok(s) => s,
        Err(e) => return PageError::from_error(e, root).into_response(),
    };
    let series = vec![
        Series {
            name: "succeeded",
            fill: SUCCEEDED_FILL,
        },
        Series {
            name: "failed",
            fill: FAILED_FILL,
        },
    ];
    let chart = chart::stacked_bars(series, &columns(&stats), 900.0, 240.0);
    let rows: Vec<DayRow> = stats
        .iter()
        .map(|d| DayRow {
            date: d.date.to_string(),
            processed: d.processed,
            succeeded: (d.processed - d.failed).max(0),
            failed: d.failed,
            error_rate: format::error_rate(d.failed, d.processed),
        })
        .collect();
    let total_processed: i64 = stats.iter().map(|d| d.processed).sum();
    let total_failed: i64 = stats.iter().map(|d| d.failed).sum();
    let total_succeeded: i64 = rows.iter().map(|r| r.succeeded).sum();
    HistoryPage {
        layout: Layout::new(&state, format!("{queue} · history"), "queues"),
        days,
        ranges: RANGES,
        chart,
        rows,
        total_succeeded,
        total_error_rate: format::error_rate(total_failed, total_processed),
        total_processed,
        total_failed,
        queue,
    }
    .into_response()
}
