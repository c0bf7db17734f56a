//! Error signatures (issue 17 item 2): the retry and archived tabs' tasks
//! grouped by task type and normalised LastErr
//! ([`errgroups::normalise`]), each with its count, when it was first and
//! last seen and its trend over the last hour.
//!
//! S14: many tasks of one type with one signature mean an external
//! service is down; many different signatures point at our own code. The
//! type is part of the signature because one outage shows as one error per
//! caller, and a filter or bulk action on a signature should touch only
//! the tasks that failed that way.
//!
//! "Seen" is a task's `last_failed_at` (Go's `LastFailedAt`): the time of
//! its latest failure, the only failure time a task keeps. The figures
//! cover the tasks the tab's bounded scan read ([`SCAN_LIMIT`], in tab
//! order); the page says "of the first N scanned" when that is not all.
//!
//! [`SCAN_LIMIT`]: super::SCAN_LIMIT

use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};

use super::errgroups;
use crate::task::TaskInfo;

/// Buckets of [`ErrSignature::last_hour_bins`]: six of 10 minutes.
pub const TREND_BINS: usize = 6;

/// Tasks of one type whose LastErr normalises to one text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrSignature {
    /// The task type.
    pub task_type: String,
    /// [`errgroups::group_id`] of `key`: what the tab's `err` filter takes
    /// (with `type` = `task_type`, it selects exactly this signature).
    pub err_id: String,
    /// The normalised LastErr; empty for tasks without an error.
    pub key: String,
    /// Tasks with this signature.
    pub count: usize,
    /// One original LastErr of the signature (the most recent failure's).
    pub example: String,
    /// Earliest and latest `last_failed_at` among its tasks (`None` when
    /// no task records one).
    pub first_seen: Option<DateTime<Utc>>,
    pub last_seen: Option<DateTime<Utc>>,
    /// Tasks whose last failure lies in `(now − 1 h, now]`.
    pub last_hour: usize,
    /// Tasks whose last failure lies in `(now − 2 h, now − 1 h]`.
    pub hour_before: usize,
    /// `last_hour` split into [`TREND_BINS`] buckets of 10 minutes, oldest
    /// first: bucket `i` holds failures in
    /// `(now − 60 min + 10 i min, now − 50 min + 10 i min]`.
    pub last_hour_bins: [usize; TREND_BINS],
}

/// [`signatures`] of tasks.
pub fn of_tasks<'a>(
    tasks: impl IntoIterator<Item = &'a TaskInfo>,
    now: DateTime<Utc>,
) -> Vec<ErrSignature> {
    signatures(
        tasks
            .into_iter()
            .map(|t| (t.task_type.as_str(), t.last_err.as_str(), t.last_failed_at)),
        now,
    )
}

/// The signatures of `(task type, LastErr, last failed at)` triples judged
/// at `now`: most tasks first, then the most recently seen, then by type
/// and text.
pub fn signatures<'a>(
    tasks: impl IntoIterator<Item = (&'a str, &'a str, Option<DateTime<Utc>>)>,
    now: DateTime<Utc>,
) -> Vec<ErrSignature> {
    let hour = Duration::hours(1);
    let bin = Duration::minutes(10);
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    let mut out: Vec<ErrSignature> = Vec::new();
    for (task_type, last_err, last_failed_at) in tasks {
        let key = errgroups::normalise(last_err);
        let at = *index
            .entry((task_type.to_string(), key.clone()))
            .or_insert_with(|| {
                out.push(ErrSignature {
                    task_type: task_type.to_string(),
                    err_id: errgroups::group_id(&key),
                    key,
                    count: 0,
                    example: errgroups::example_of(last_err),
                    first_seen: None,
                    last_seen: None,
                    last_hour: 0,
                    hour_before: 0,
                    last_hour_bins: [0; TREND_BINS],
                });
                out.len() - 1
            });
        let s = &mut out[at];
        s.count += 1;
        let Some(failed) = last_failed_at else {
            continue;
        };
        if s.last_seen.is_none_or(|l| failed > l) {
            s.last_seen = Some(failed);
            s.example = errgroups::example_of(last_err);
        }
        if s.first_seen.is_none_or(|f| failed < f) {
            s.first_seen = Some(failed);
        }
        let ago = now - failed;
        if ago >= Duration::zero() && ago < hour {
            s.last_hour += 1;
            // Bucket 5 holds (now − 10 min, now].
            let back = (ago.num_seconds() / bin.num_seconds()) as usize;
            s.last_hour_bins[TREND_BINS - 1 - back.min(TREND_BINS - 1)] += 1;
        } else if ago >= hour && ago < hour * 2 {
            s.hour_before += 1;
        }
    }
    out.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| b.last_seen.cmp(&a.last_seen))
            .then_with(|| a.task_type.cmp(&b.task_type))
            .then_with(|| a.key.cmp(&b.key))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    type T = (&'static str, &'static str, Option<DateTime<Utc>>);

    fn task(_id: &str, ty: &'static str, err: &'static str, failed: Option<DateTime<Utc>>) -> T {
        (ty, err, failed)
    }

    /// Type + normalised text make the signature; counts, first and last
    /// seen, the hour against the hour before and the 10-minute bins are
    /// exact at their boundaries.
    #[test]
    fn groups_by_type_and_text_with_times_and_trend() {
        let now = DateTime::parse_from_rfc3339("2026-03-10T12:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let m = |min: i64, s: i64| Some(now - Duration::minutes(min) - Duration::seconds(s));
        let tasks = [
            task("a", "email", "dial tcp 10.0.0.1:25: refused", m(0, 0)),
            task("b", "email", "dial tcp 10.0.0.2:25: refused", m(9, 59)),
            task("c", "email", "dial tcp 10.0.0.3:25: refused", m(10, 0)),
            task("d", "email", "dial tcp 10.0.0.4:25: refused", m(59, 59)),
            task("e", "email", "dial tcp 10.0.0.5:25: refused", m(60, 0)),
            task("f", "email", "dial tcp 10.0.0.6:25: refused", m(119, 59)),
            task("g", "email", "dial tcp 10.0.0.7:25: refused", m(120, 0)),
            task("h", "sms", "dial tcp 10.0.0.8:25: refused", m(5, 0)),
            task("i", "sms", "quota 5 exceeded", None),
        ];
        let s = signatures(tasks, now);
        assert_eq!(s.len(), 3);
        let e = &s[0];
        assert_eq!(
            (e.task_type.as_str(), e.key.as_str(), e.count),
            ("email", "dial tcp <ip>:<n>: refused", 7)
        );
        assert_eq!(e.err_id, errgroups::group_id("dial tcp <ip>:<n>: refused"));
        assert_eq!(e.first_seen, m(120, 0));
        assert_eq!(e.last_seen, m(0, 0));
        assert_eq!(e.example, "dial tcp 10.0.0.1:25: refused");
        assert_eq!((e.last_hour, e.hour_before), (4, 2));
        assert_eq!(e.last_hour_bins, [1, 0, 0, 0, 1, 2]);
        // Same count: the most recently seen first.
        assert_eq!((s[1].task_type.as_str(), s[1].count), ("sms", 1));
        assert_eq!(s[1].key, "dial tcp <ip>:<n>: refused");
        assert_eq!(s[1].last_hour_bins, [0, 0, 0, 0, 0, 1]);
        assert_eq!(
            (s[2].key.as_str(), s[2].last_seen),
            ("quota <n> exceeded", None)
        );
        assert_eq!((s[2].last_hour, s[2].hour_before), (0, 0));
    }
}
