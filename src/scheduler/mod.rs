//! Periodic tasks: the [`Scheduler`] (Go `scheduler.go`), cron specs as
//! robfig/cron v3 accepts them ([`cron`]), Go's option strings
//! ([`options`]), the [`PeriodicTaskManager`] with its config providers
//! (Go `periodic_task_manager.go`; [`manager`], [`config_file`]) and,
//! beyond Go, one active scheduler among replicas ([`SchedulerOpts::replica_group`]).
//!
//! Layers: the scheduler sits beside [`crate::server`]: it enqueues through
//! [`crate::Client`] and writes its entries, history and lease through
//! [`crate::broker`] (the only module that speaks Redis).

pub mod config_file;
pub mod cron;
mod engine;
pub mod manager;
pub mod options;

pub use config_file::FileConfigProvider;
pub use cron::CronSchedule;
pub use engine::{
    DEFAULT_SCHEDULER_HEARTBEAT, EntrySnapshot, PostEnqueueFunc, PreEnqueueFunc, Scheduler,
    SchedulerOpts,
};
pub use manager::{
    DEFAULT_SYNC_INTERVAL, PeriodicTaskConfig, PeriodicTaskConfigProvider, PeriodicTaskManager,
};
pub use options::{option_strings, parse_option_strings};
