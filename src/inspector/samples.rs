//! The outage signal (S14, S29): how fast a queue's retry set grows.
//!
//! A retry set that grows fast means many tasks are failing right now,
//! which is usually an external service being down (S14). The embedded
//! engine's sampler (`server::sampler`) records each queue's retry and
//! archived sizes every poll interval in asynqdeck's own key
//! `asynqdeck:{<queue>}:samples` ([`samples_key`](crate::broker::samples_key));
//! [`Inspector::queue_samples`] reads the last hour of it and
//! [`retry_growth`] turns it into growth figures and the "growing fast"
//! decision, a pure function the queue page and the queues overview share.
//!
//! asynqdeck only: Go asynq and asynqmon have no such series (asynqmon's
//! metrics page needs a Prometheus server for the same question).

use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Inspector;
use crate::broker::SAMPLE_WINDOW;
use crate::error::Result;

/// The span the "growing fast" decision looks at: 5 minutes.
pub const FAST_GROWTH_WINDOW: Duration = Duration::from_secs(5 * 60);
/// The spans the growth figures cover, in [`RetryGrowth`]'s order: 5 minutes
/// ([`FAST_GROWTH_WINDOW`]), 15 minutes, and the whole series
/// ([`SAMPLE_WINDOW`], one hour). [`Inspector::queues_stats`] reads just the
/// samples these need.
pub const GROWTH_WINDOWS: [Duration; 3] = [
    FAST_GROWTH_WINDOW,
    Duration::from_secs(15 * 60),
    SAMPLE_WINDOW,
];
/// Fewest new retry tasks within [`FAST_GROWTH_WINDOW`] that count as fast
/// growth: 20 (a handful of failures is noise).
pub const FAST_GROWTH_MIN_TASKS: i64 = 20;
/// Least growth within [`FAST_GROWTH_WINDOW`], in percent of the size at its
/// start, that counts as fast growth: 50 (a queue that always holds 10,000
/// retries and gains 20 is steady, not an outage).
pub const FAST_GROWTH_MIN_PERCENT: i64 = 50;

/// One sample of a queue's sizes, taken by the embedded engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSample {
    /// When it was taken (UTC, whole seconds).
    pub at: DateTime<Utc>,
    /// Tasks in the retry set then.
    pub retry: i64,
    /// Tasks in the archive then.
    pub archived: i64,
}

/// Change of the retry size between two samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Growth {
    /// Retry size at the start of the span.
    pub from: i64,
    /// Retry size at the end of the span (the newest sample).
    pub to: i64,
    /// Time between the two samples; shorter than asked for when the series
    /// does not reach back that far.
    pub span: Duration,
}

impl Growth {
    /// `to − from`: positive when the retry set grew.
    pub fn delta(&self) -> i64 {
        self.to - self.from
    }
}

/// Growth figures of a queue's retry set and the banner decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryGrowth {
    /// The newest sample.
    pub latest: QueueSample,
    /// Growth over the last 5 minutes ([`FAST_GROWTH_WINDOW`]).
    pub last_5m: Growth,
    /// Growth over the last 15 minutes.
    pub last_15m: Growth,
    /// Growth over the whole series (up to an hour).
    pub last_1h: Growth,
    /// Whether the retry set is growing fast: within the last 5 minutes it
    /// gained at least [`FAST_GROWTH_MIN_TASKS`] tasks and at least
    /// [`FAST_GROWTH_MIN_PERCENT`] % of its size at the start of that span,
    /// and the newest sample is at most 5 minutes old at `now`.
    pub fast: bool,
}

/// Growth of the retry size over `window` back from `latest`: against the
/// newest sample at least `window` older than `latest`, or the oldest sample
/// when the series is shorter than `window`.
fn growth_over(samples: &[QueueSample], latest: &QueueSample, window: Duration) -> Growth {
    let window = chrono::Duration::from_std(window).unwrap_or(chrono::Duration::MAX);
    let cutoff = latest.at.checked_sub_signed(window);
    let base = cutoff
        .and_then(|cutoff| {
            samples
                .iter()
                .filter(|s| s.at <= cutoff)
                .max_by_key(|s| s.at)
        })
        .or_else(|| samples.iter().min_by_key(|s| s.at))
        .unwrap_or(latest);
    Growth {
        from: base.retry,
        to: latest.retry,
        span: (latest.at - base.at).to_std().unwrap_or(Duration::ZERO),
    }
}

/// Growth figures and the "growing fast" decision for a queue's samples
/// (any order), judged at `now`. `None` while there is nothing to compare:
/// fewer than two samples, or all taken in the same second.
///
/// Fast growth: within the last [`FAST_GROWTH_WINDOW`] (5 min) the retry set
/// gained at least [`FAST_GROWTH_MIN_TASKS`] (20) tasks **and** at least
/// [`FAST_GROWTH_MIN_PERCENT`] (50 %) of its size at the start of the span
/// (from 0, any gain of 20 counts), and the newest sample is no older than
/// 5 minutes (an old series says nothing about now). When the series covers
/// less than 5 minutes, the same thresholds apply to the shorter span: the
/// growth is then faster still.
pub fn retry_growth(samples: &[QueueSample], now: DateTime<Utc>) -> Option<RetryGrowth> {
    let latest = *samples.iter().max_by_key(|s| s.at)?;
    let oldest = samples.iter().min_by_key(|s| s.at)?;
    if oldest.at == latest.at {
        return None;
    }
    let [last_5m, last_15m, last_1h] = GROWTH_WINDOWS.map(|w| growth_over(samples, &latest, w));
    let recent = (now - latest.at)
        .to_std()
        .map_or(true, |age| age <= FAST_GROWTH_WINDOW);
    let delta = last_5m.delta();
    let fast = recent
        && delta >= FAST_GROWTH_MIN_TASKS
        && delta.saturating_mul(100) >= last_5m.from.saturating_mul(FAST_GROWTH_MIN_PERCENT);
    Some(RetryGrowth {
        latest,
        last_5m,
        last_15m,
        last_1h,
        fast,
    })
}

impl Inspector {
    /// The queue's outage-signal samples of the last hour
    /// ([`SAMPLE_WINDOW`], counted back from the broker's clock), oldest
    /// first. Empty until the embedded engine's sampler has run (it records
    /// one per poll interval); unparsable samples are skipped. asynqdeck
    /// only (no Go counterpart).
    ///
    /// Errors: [`Error::InvalidQueueName`](crate::Error::InvalidQueueName),
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a name
    /// a Redis Cluster cannot hold;
    /// [`Error::QueueNotFound`](crate::Error::QueueNotFound);
    /// [`Error::Redis`](crate::Error::Redis).
    pub async fn queue_samples(&self, queue: &str) -> Result<Vec<QueueSample>> {
        self.broker.check_queue_name(queue)?;
        let window = chrono::Duration::from_std(SAMPLE_WINDOW).unwrap_or(chrono::Duration::zero());
        let since = self.broker.now() - window;
        let rows = self.broker.queue_samples(queue, since).await?;
        Ok(rows
            .into_iter()
            .map(|(at, retry, archived)| QueueSample {
                at,
                retry,
                archived,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    /// A series with one sample every 5 s from `start` with retry sizes `sizes`.
    fn series(start: i64, sizes: &[i64]) -> Vec<QueueSample> {
        sizes
            .iter()
            .enumerate()
            .map(|(i, &retry)| QueueSample {
                at: t(start + 5 * i as i64),
                retry,
                archived: 0,
            })
            .collect()
    }

    /// Nothing to compare with zero or one sample, or samples of one second.
    #[test]
    fn no_decision_without_two_times() {
        assert_eq!(retry_growth(&[], t(0)), None);
        assert_eq!(retry_growth(&series(0, &[5]), t(0)), None);
        let same = [
            QueueSample {
                at: t(0),
                retry: 1,
                archived: 0,
            },
            QueueSample {
                at: t(0),
                retry: 2,
                archived: 0,
            },
        ];
        assert_eq!(retry_growth(&same, t(0)), None);
    }

    /// +40 from 10 within 5 minutes (≥ 20 tasks and ≥ 50 %): fast (S29).
    #[test]
    fn fast_growth_fires() {
        // 61 samples, 5 s apart: 300 s; sizes 10 → 50 linearly.
        let sizes: Vec<i64> = (0..=60).map(|i| 10 + i * 40 / 60).collect();
        let s = series(0, &sizes);
        let g = retry_growth(&s, t(300)).unwrap();
        assert_eq!(
            g.last_5m,
            Growth {
                from: 10,
                to: 50,
                span: Duration::from_secs(300)
            }
        );
        assert_eq!(g.last_5m.delta(), 40);
        assert!(g.fast);
    }

    /// A flat series, a small gain, and a large but relatively small gain
    /// are quiet; a shrinking set is quiet.
    #[test]
    fn steady_series_are_quiet() {
        let flat = series(0, &[7; 61]);
        let g = retry_growth(&flat, t(300)).unwrap();
        assert_eq!((g.last_5m.delta(), g.fast), (0, false));

        // +19 from 0: under 20 tasks.
        let mut small: Vec<i64> = vec![0; 60];
        small.push(19);
        assert!(!retry_growth(&series(0, &small), t(300)).unwrap().fast);

        // +20 from 0: exactly the threshold fires.
        let mut twenty: Vec<i64> = vec![0; 60];
        twenty.push(20);
        assert!(retry_growth(&series(0, &twenty), t(300)).unwrap().fast);

        // +100 on 1,000 (10 %): big queue, steady growth.
        let mut big: Vec<i64> = vec![1000; 60];
        big.push(1100);
        assert!(!retry_growth(&series(0, &big), t(300)).unwrap().fast);
        // +500 on 1,000 (50 %): fires.
        let mut half: Vec<i64> = vec![1000; 60];
        half.push(1500);
        assert!(retry_growth(&series(0, &half), t(300)).unwrap().fast);

        let shrinking = series(0, &[100, 80, 60]);
        let g = retry_growth(&shrinking, t(10)).unwrap();
        assert_eq!((g.last_5m.delta(), g.fast), (-40, false));
    }

    /// The 5-minute baseline is the newest sample at least 5 minutes older
    /// than the latest; older growth does not count toward it. A series
    /// shorter than the window compares with its oldest sample.
    #[test]
    fn windows_pick_their_baselines() {
        // 0..=720 samples over one hour: 0 for the first 40 min (481
        // samples), then 100 flat.
        let mut sizes = vec![0; 481];
        sizes.extend(vec![100; 240]);
        let s = series(0, &sizes);
        let latest = t(5 * 720);
        let g = retry_growth(&s, latest).unwrap();
        assert_eq!(g.last_5m.delta(), 0);
        assert_eq!(g.last_5m.span, Duration::from_secs(300));
        assert_eq!(g.last_15m.delta(), 0);
        assert_eq!(g.last_1h.delta(), 100);
        assert_eq!(g.last_1h.span, Duration::from_secs(3600));
        assert!(!g.fast);

        // Two samples 10 s apart, +30 from 0: fast over the short span.
        let short = series(0, &[0, 30]);
        let g = retry_growth(&short, t(5)).unwrap();
        assert_eq!(
            g.last_5m,
            Growth {
                from: 0,
                to: 30,
                span: Duration::from_secs(5)
            }
        );
        assert!(g.fast);
    }

    /// A fast rise that ended long ago raises no banner now.
    #[test]
    fn old_series_do_not_fire() {
        let s = series(0, &[0, 50]);
        assert!(retry_growth(&s, t(5)).unwrap().fast);
        assert!(!retry_growth(&s, t(5 + 301)).unwrap().fast);
        assert!(retry_growth(&s, t(5 + 300)).unwrap().fast);
    }

    /// Order of the input does not matter.
    #[test]
    fn any_order() {
        let mut s = series(0, &[0, 10, 30]);
        s.reverse();
        let g = retry_growth(&s, t(10)).unwrap();
        assert_eq!((g.latest.retry, g.last_5m.delta()), (30, 30));
    }
}
