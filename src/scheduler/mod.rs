//! Periodic tasks: the [`Scheduler`] (Go `scheduler.go`), cron specs as
//! robfig/cron v3 accepts them ([`cron`]) and Go's option strings
//! ([`options`]), and the [`PeriodicTaskManager`] with the YAML schedule
//! file provider ([`manager`], [`config_file`]; Go `periodic_task_manager.go`).
//!
//! Layers: the scheduler sits beside [`crate::server`]: it enqueues through
//! [`crate::Client`] and writes its entries and history through
//! [`crate::broker`] (the only module that speaks Redis).

pub mod config_file;
pub mod cron;
mod engine;
pub mod go_duration;
pub mod manager;
pub mod options;

pub use config_file::{FileConfigProvider, parse_schedule};
pub use cron::CronSchedule;
pub use engine::{
    DEFAULT_SCHEDULER_HEARTBEAT, EntrySnapshot, PostEnqueueFunc, PreEnqueueFunc, Scheduler,
    SchedulerOpts,
};
pub use go_duration::parse_go_duration;
pub use manager::{
    DEFAULT_SYNC_INTERVAL, PeriodicTaskConfig, PeriodicTaskConfigProvider, PeriodicTaskManager,
    SyncReport,
};
pub use options::{go_inspector_option_strings, option_strings, parse_option_strings};
