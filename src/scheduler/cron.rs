//! Cron specs as robfig/cron v3's standard parser accepts them (Go asynq
//! `cron.New(cron.WithLocation(loc))`): five fields, the descriptors
//! `@yearly`/`@annually`/`@monthly`/`@weekly`/`@daily`/`@midnight`/`@hourly`,
//! `@every <Go duration>`, and a `CRON_TZ=<zone> ` or `TZ=<zone> ` prefix.
//! Five-field specs are parsed by the `croner` crate; this file is the thin
//! layer for Go's descriptors and time zones.

use chrono::{DateTime, Utc};
use chrono_tz::Tz;

use crate::error::{Error, Result};

/// A parsed cron spec.
#[derive(Clone, Debug)]
pub struct CronSchedule {
    spec: String,
}

impl CronSchedule {
    /// Parses `spec`; `location` is the zone for specs without a
    /// `CRON_TZ=`/`TZ=` prefix (Go `SchedulerOpts.Location`, default UTC).
    ///
    /// Errors: [`Error::InvalidArgument`] naming what is wrong, in robfig's
    /// words where it has them (e.g. `expected exactly 5 fields, found 4: [* * * *]`).
    pub fn parse(spec: &str, location: Tz) -> Result<Self> {
        let _ = location;
        Err(Error::InvalidArgument(format!(
            "cron spec {spec:?}: not yet implemented"
        )))
    }

    /// The spec as given (what Go publishes in `SchedulerEntry.spec`).
    pub fn spec(&self) -> &str {
        &self.spec
    }

    /// The first fire time strictly after `t` (robfig `Schedule.Next`),
    /// `None` when there is none (e.g. `0 0 30 2 *`). `@every d` fires at
    /// `t + d` rounded down to whole seconds, as robfig's
    /// `ConstantDelaySchedule` does.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let _ = t;
        None
    }
}
