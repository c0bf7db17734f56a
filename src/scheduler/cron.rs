//! Cron specs as robfig/cron v3's standard parser accepts them (Go asynq
//! `cron.New(cron.WithLocation(loc))`): five fields (minute, hour, day of
//! month, month, day of week), the descriptors `@yearly`/`@annually`,
//! `@monthly`, `@weekly`, `@daily`/`@midnight`, `@hourly`, `@every <Go
//! duration>`, and a `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix. Five-field
//! specs are parsed and stepped by the `croner` crate (seconds and years
//! refused, as robfig's standard parser refuses them); this file is the
//! thin layer for Go's descriptors and time zones.

use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};

use super::go_duration::parse_go_duration;
use crate::error::{Error, Result};

#[derive(Clone, Debug)]
enum Kind {
    /// A five-field spec (descriptors other than `@every` become one).
    Fields(Box<croner::Cron>, Tz),
    /// `@every d`: robfig's `ConstantDelaySchedule`.
    Every(Duration),
}

/// A parsed cron spec.
#[derive(Clone, Debug)]
pub struct CronSchedule {
    spec: String,
    kind: Kind,
}

impl CronSchedule {
    /// Parses `spec`; `location` is the zone for specs without a
    /// `CRON_TZ=`/`TZ=` prefix (Go `SchedulerOpts.Location`, default UTC).
    ///
    /// Errors: [`Error::InvalidArgument`] naming what is wrong, e.g.
    /// `expected exactly 5 fields, found 4: "* * * *"` (robfig's wording),
    /// `provided bad location Mars/Base: ...`, `failed to parse duration
    /// @every 3x: ...`.
    pub fn parse(spec: &str, location: Tz) -> Result<Self> {
        let bad = |m: String| Error::InvalidArgument(m);
        let mut rest = spec.trim();
        let mut tz = location;
        for prefix in ["CRON_TZ=", "TZ="] {
            if let Some(after) = rest.strip_prefix(prefix) {
                let (zone, tail) = after.split_once(' ').unwrap_or((after, ""));
                tz = zone
                    .parse::<Tz>()
                    .map_err(|e| bad(format!("provided bad location {zone}: {e}")))?;
                rest = tail.trim();
                break;
            }
        }
        if rest.is_empty() {
            return Err(bad("empty spec string".into()));
        }
        let fields = if let Some(d) = rest.strip_prefix("@every ") {
            let d = parse_go_duration(d.trim())
                .map_err(|e| bad(format!("failed to parse duration {rest}: {e}")))?;
            return Ok(CronSchedule {
                spec: spec.to_string(),
                kind: Kind::Every(every_delay(d)),
            });
        } else if rest.starts_with('@') {
            match rest {
                "@yearly" | "@annually" => "0 0 1 1 *",
                "@monthly" => "0 0 1 * *",
                "@weekly" => "0 0 * * 0",
                "@daily" | "@midnight" => "0 0 * * *",
                "@hourly" => "0 * * * *",
                other => return Err(bad(format!("unrecognized descriptor: {other}"))),
            }
            .to_string()
        } else {
            let n = rest.split_whitespace().count();
            if n != 5 {
                return Err(bad(format!(
                    "expected exactly 5 fields, found {n}: {rest:?}"
                )));
            }
            rest.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        let cron = CronParser::builder()
            .seconds(Seconds::Disallowed)
            .year(Year::Disallowed)
            .build()
            .parse(&fields)
            .map_err(|e| bad(format!("cron spec {rest:?}: {e}")))?;
        Ok(CronSchedule {
            spec: spec.to_string(),
            kind: Kind::Fields(Box::new(cron), tz),
        })
    }

    /// The spec as given (what Go publishes in `SchedulerEntry.spec`).
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// The first fire time strictly after `t` (robfig `Schedule.Next`),
    /// `None` when there is none (e.g. `0 0 30 2 *`). `@every d` fires at
    /// `t + d` with the sub-second part of `t` dropped, as robfig's
    /// `ConstantDelaySchedule` does.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.kind {
            Kind::Every(d) => {
                let whole =
                    t - chrono::Duration::nanoseconds(i64::from(t.timestamp_subsec_nanos()));
                Some(whole + chrono::Duration::from_std(*d).ok()?)
            }
            Kind::Fields(cron, tz) => cron
                .find_next_occurrence(&t.with_timezone(tz), false)
                .ok()
                .map(|n| n.with_timezone(&Utc)),
        }
    }
}

/// robfig `Every(d)`: under a second becomes one second, otherwise the
/// sub-second part is dropped.
fn every_delay(d: Duration) -> Duration {
    if d < Duration::from_secs(1) {
        Duration::from_secs(1)
    } else {
        Duration::from_secs(d.as_secs())
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeZone;

    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().to_utc()
    }

    fn next(spec: &str, t: &str) -> Option<DateTime<Utc>> {
        CronSchedule::parse(spec, Tz::UTC)
            .unwrap()
            .next_after(at(t))
    }

    #[test]
    fn descriptors() {
        let t = "2026-03-10T11:58:30.250Z";
        assert_eq!(next("@hourly", t), Some(at("2026-03-10T12:00:00Z")));
        assert_eq!(next("@daily", t), Some(at("2026-03-11T00:00:00Z")));
        assert_eq!(next("@midnight", t), Some(at("2026-03-11T00:00:00Z")));
        assert_eq!(next("@weekly", t), Some(at("2026-03-15T00:00:00Z")));
        assert_eq!(next("@monthly", t), Some(at("2026-04-01T00:00:00Z")));
        assert_eq!(next("@yearly", t), Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(next("@annually", t), Some(at("2027-01-01T00:00:00Z")));
        assert_eq!(next("@every 30s", t), Some(at("2026-03-10T11:59:00Z")));
        assert_eq!(next("@every 1m30s", t), Some(at("2026-03-10T12:00:00Z")));
        assert_eq!(next("@every 1.5s", t), Some(at("2026-03-10T11:58:31Z")));
        assert_eq!(next("@every 100ms", t), Some(at("2026-03-10T11:58:31Z")));
    }

    #[test]
    fn five_fields() {
        let t = "2026-03-10T11:58:30Z"; // a Tuesday
        assert_eq!(next("*/5 * * * *", t), Some(at("2026-03-10T12:00:00Z")));
        assert_eq!(next("0 9 * * MON-FRI", t), Some(at("2026-03-11T09:00:00Z")));
        assert_eq!(next("30 8 1 JAN *", t), Some(at("2027-01-01T08:30:00Z")));
        assert_eq!(next("0 0 1,15 * *", t), Some(at("2026-03-15T00:00:00Z")));
        // Day of month and day of week both restricted: either matches (robfig).
        assert_eq!(next("0 0 1 * MON", t), Some(at("2026-03-16T00:00:00Z")));
        assert_eq!(next("0 0 13 * MON", t), Some(at("2026-03-13T00:00:00Z")));
        assert_eq!(next("0 0 30 2 *", t), None);
    }

    #[test]
    fn zones() {
        // 09:00 in New York: EST (UTC-5) before 2026-03-08, EDT (UTC-4) after.
        let ny = "CRON_TZ=America/New_York 0 9 * * *";
        assert_eq!(
            next(ny, "2026-03-06T15:00:00Z"),
            Some(at("2026-03-07T14:00:00Z"))
        );
        assert_eq!(
            next(ny, "2026-03-07T15:00:00Z"),
            Some(at("2026-03-08T13:00:00Z"))
        );
        assert_eq!(
            next("TZ=Asia/Tokyo 0 9 * * *", "2026-03-10T01:00:00Z"),
            Some(at("2026-03-11T00:00:00Z"))
        );
        let tokyo = CronSchedule::parse("0 9 * * *", Tz::Asia__Tokyo).unwrap();
        assert_eq!(
            tokyo.next_after(Utc.with_ymd_and_hms(2026, 3, 10, 1, 0, 0).unwrap()),
            Some(at("2026-03-11T00:00:00Z"))
        );
        assert_eq!(tokyo.spec(), "0 9 * * *");
    }

    #[test]
    fn bad_specs() {
        let err = |s: &str| match CronSchedule::parse(s, Tz::UTC) {
            Err(Error::InvalidArgument(m)) => m,
            other => panic!("{s}: {other:?}"),
        };
        assert_eq!(
            err("* * * *"),
            "expected exactly 5 fields, found 4: \"* * * *\""
        );
        assert_eq!(
            err("0 * * * * *"),
            "expected exactly 5 fields, found 6: \"0 * * * * *\""
        );
        assert_eq!(err("@fortnightly"), "unrecognized descriptor: @fortnightly");
        assert!(err("@every 3x").starts_with("failed to parse duration @every 3x"));
        assert!(err("CRON_TZ=Mars/Base * * * * *").starts_with("provided bad location Mars/Base"));
        assert!(err("61 * * * *").starts_with("cron spec \"61 * * * *\""));
        assert_eq!(err(""), "empty spec string");
    }
}
