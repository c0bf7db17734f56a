//! Error signatures as the retry and archived tabs show them (issue 17
//! item 2; computed by [`crate::inspector::signatures`]): per task type and
//! normalised LastErr, the count, first and last seen, the last hour
//! against the hour before with a 10-minute histogram, and the links that
//! filter the tab by the signature or start a bulk job on it.

use chrono::{DateTime, Utc};

use super::view::TimeView;
use crate::inspector::ErrSignature;
use crate::inspector::signatures::TREND_BINS;

/// Width and height of the histogram (SVG user units).
const BAR_W: f64 = 7.0;
const GAP: f64 = 1.0;
const HEIGHT: f64 = 14.0;

/// One bar of the last hour's histogram.
pub struct Bar {
    pub x: f64,
    pub y: f64,
    pub h: f64,
    pub count: usize,
}

/// One signature, formatted.
pub struct SignatureView {
    pub task_type: String,
    pub err_id: String,
    pub key: String,
    pub count: usize,
    pub example: String,
    pub first_seen: Option<TimeView>,
    pub last_seen: Option<TimeView>,
    pub last_hour: usize,
    pub hour_before: usize,
    /// `up` (more failures this hour than the hour before), `down`, or
    /// `flat`.
    pub direction: &'static str,
    /// The last hour per 10 minutes, oldest first.
    pub bars: Vec<Bar>,
    pub width: f64,
    pub height: f64,
    /// `3, 0, 0, 1, 4, 9` (oldest first), for the histogram's title.
    pub bins_text: String,
}

impl SignatureView {
    /// `s` as seen at `now`.
    pub fn of(s: &ErrSignature, now: DateTime<Utc>) -> Self {
        let max = s.last_hour_bins.iter().copied().max().unwrap_or(0).max(1) as f64;
        let bars = s
            .last_hour_bins
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                // At least 1 unit for a non-empty bucket, so one failure shows.
                let h = if n == 0 {
                    0.0
                } else {
                    (n as f64 / max * (HEIGHT - 1.0)).max(1.0).round()
                };
                Bar {
                    x: i as f64 * (BAR_W + GAP),
                    y: HEIGHT - h,
                    h,
                    count: n,
                }
            })
            .collect();
        SignatureView {
            task_type: s.task_type.clone(),
            err_id: s.err_id.clone(),
            key: s.key.clone(),
            count: s.count,
            example: s.example.clone(),
            first_seen: TimeView::opt(s.first_seen, now),
            last_seen: TimeView::opt(s.last_seen, now),
            last_hour: s.last_hour,
            hour_before: s.hour_before,
            direction: match s.last_hour.cmp(&s.hour_before) {
                std::cmp::Ordering::Greater => "up",
                std::cmp::Ordering::Less => "down",
                std::cmp::Ordering::Equal => "flat",
            },
            bars,
            width: TREND_BINS as f64 * (BAR_W + GAP) - GAP,
            height: HEIGHT,
            bins_text: s
                .last_hour_bins
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }
}
