//! The bench's command line (`--tasks`, `--concurrency`, ...; see the crate
//! doc) and the two engines it compares.

use std::time::Duration;

use anyhow::{Context, bail};

/// Value of the flag `name` in `args` (`--name value`).
pub fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

pub fn parse_flag<T: std::str::FromStr>(
    args: &[String],
    name: &str,
    default: T,
) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match flag(args, name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|e| anyhow::anyhow!("{name} {v}: {e}")),
    }
}

pub struct Options {
    pub tasks: usize,
    pub concurrency: Vec<usize>,
    pub pickup_tasks: usize,
    pub pickup_interval: Duration,
    pub archive_ops: usize,
    /// Tasks per producer of the batch-enqueue scenario; 0 skips it.
    pub batch_enqueue: usize,
    pub script_costs: bool,
    pub profile: bool,
    pub quiet_wait: Duration,
    pub engines: Vec<Engine>,
    /// Scheduler entries (0: no scheduler run).
    pub schedule_entries: usize,
    /// Seconds each engine's scheduler runs.
    pub schedule_secs: u64,
}

impl Options {
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let known = [
            "--tasks",
            "--concurrency",
            "--pickup-tasks",
            "--pickup-interval-ms",
            "--archive-ops",
            "--batch-enqueue",
            "--profile",
            "--quiet-wait",
            "--no-script-costs",
            "--only-ours",
            "--schedule-entries",
            "--schedule-secs",
        ];
        for a in args.iter().filter(|a| a.starts_with("--")) {
            if !known.contains(&a.as_str()) {
                bail!("unknown flag {a}; flags: {known:?}");
            }
        }
        let concurrency = flag(args, "--concurrency")
            .unwrap_or("10,100")
            .split(',')
            .map(|c| c.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .context("--concurrency: comma-separated numbers")?;
        Ok(Options {
            tasks: parse_flag(args, "--tasks", 100_000)?,
            concurrency,
            pickup_tasks: parse_flag(args, "--pickup-tasks", 200)?,
            pickup_interval: Duration::from_millis(parse_flag(args, "--pickup-interval-ms", 20)?),
            archive_ops: parse_flag(args, "--archive-ops", 20_000)?,
            batch_enqueue: parse_flag(args, "--batch-enqueue", 0)?,
            profile: args.iter().any(|a| a == "--profile"),
            script_costs: !args.iter().any(|a| a == "--no-script-costs"),
            quiet_wait: Duration::from_secs(parse_flag(args, "--quiet-wait", 60)?),
            schedule_entries: parse_flag(args, "--schedule-entries", 1000)?,
            schedule_secs: parse_flag(args, "--schedule-secs", 30)?,
            engines: if args.iter().any(|a| a == "--only-ours") {
                vec![Engine::Ours]
            } else {
                vec![Engine::Go, Engine::Ours]
            },
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Go,
    Ours,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Go => "Go asynq v0.26.0",
            Engine::Ours => "asynqdeck",
        }
    }
}
