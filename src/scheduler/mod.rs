//! Periodic tasks: the [`Scheduler`] (Go `scheduler.go`), cron specs as
//! robfig/cron v3 accepts them ([`cron`]) and Go's option strings
//! ([`options`]).
//!
//! Layers: the scheduler sits beside [`crate::server`]: it enqueues through
//! [`crate::Client`] and writes its entries and history through
//! [`crate::broker`] (the only module that speaks Redis).

pub mod cron;
mod engine;
pub mod options;

pub use cron::CronSchedule;
pub use engine::{
    DEFAULT_SCHEDULER_HEARTBEAT, EntrySnapshot, PostEnqueueFunc, PreEnqueueFunc, Scheduler,
    SchedulerOpts,
};
pub use options::{option_strings, parse_option_strings};
