//! Issue 15 benchmark ("Scale"): asynqdeck's dashboard and asynqmon v0.7.2
//! side by side on the same data, in one run, on thousands of queues and
//! millions of tasks (BENCHMARKS.md).
//!
//! ```text
//! cargo build --release --bin asynqdeck
//! cargo run --release --example bench_scale -- [--queues 5000,25000]
//!     [--tasks 1000000] [--retry 200000] [--deep 10000000]
//!     [--only overview|delete_all|run_all|deep] [--idle-secs 20] [--warm 20]
//!     [--rate 200] [--bulk-timeout 600] [--quiet-wait 30] [--no-asynqmon]
//! ```
//!
//! What it does (Markdown on stdout, progress on stderr):
//! 1. Finds or builds the programs (`procs.rs`): `target/release/asynqdeck`
//!    (or `BENCH_ASYNQDECK`), the Go peer into `target/asynq-peer-bench`
//!    (or `BENCH_GO_PEER`), asynqmon v0.7.2 with `go install
//!    github.com/hibiken/asynqmon/cmd/asynqmon@v0.7.2` from the Go module
//!    proxy into `target/asynqmon-v0.7.2/` (or `BENCH_ASYNQMON`; if it
//!    cannot be built, its columns are left out and the header says why).
//! 2. Starts a private redis-server on a free loopback port (`--save ""
//!    --appendonly no`, killed with the bench; `bench/cluster/deploy.rs`'s
//!    standalone deployment), prints the machine (CPUs, memory, load,
//!    Redis version, the asynqdeck commit).
//! 3. Runs the scenarios, one file and one Markdown table each, every
//!    dashboard started fresh for each measurement and alone on Redis
//!    (`asynqdeck serve --redis-url … --listen 127.0.0.1:0` with its engine
//!    on; `asynqmon --port P --redis-addr …`):
//!    - `overview.rs`: `--queues` queues × 3 pending tasks: idle Redis cost
//!      (CPU % of a core, commands/s, EVALSHA/s) with no viewer, the
//!      overview's bytes, cold and warm times, RSS;
//!    - `delete_all.rs`: `--tasks` pending tasks in queue `q`, delete all;
//!    - `run_all.rs`: `--retry` retry tasks in `q`, run all;
//!      both through `bulk.rs`: the answer, the time until the set is
//!      empty, SLOWLOG entries ≥ 10 ms, and the enqueue latency of a Go
//!      producer (`asynq-peer latency`, `--rate`/s) meanwhile;
//!    - `deep.rs` (only with `--deep N`): one queue with N pending plus
//!      N/10 retry and N/10 archived tasks (N = 10,000,000: about 3 min to
//!      seed and 5.4 GB of Redis memory; 1,000,000 took 17 s and 537 MB
//!      here), every tab's first/middle/last page and the queue statistics.
//!
//! Data is seeded straight into Redis by Lua scripts in chunks (`seed.rs`),
//! laid out as Go asynq v0.26.0 writes it. It measures whatever the binary
//! does: on today's main the bulk actions go through asynqmon's synchronous
//! routes (ours has no `/api/jobs` yet, which answers 404); once
//! `POST /api/jobs` answers 202 the job is followed to its end.
//! Before each measured window the bench waits (up to `--quiet-wait` s)
//! for a second in which the machine is otherwise nearly idle, and reports
//! the machine's busy CPU during the idle windows.
//!
//! Files: `procs.rs` (programs), `http.rs` (the timed HTTP/1.0 client),
//! `redis_stats.rs` (INFO and SLOWLOG), `seed.rs`, one file per scenario.

#[path = "../cluster/deploy.rs"]
#[allow(dead_code)]
mod deploy;
#[path = "../engine/sampling.rs"]
#[allow(dead_code)]
mod sampling;

mod bulk;
mod deep;
mod delete_all;
mod http;
mod overview;
mod procs;
mod redis_stats;
mod run_all;
mod seed;

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use redis::aio::MultiplexedConnection;

use procs::{Side, Tools};

/// The command line.
pub struct Options {
    pub queues: Vec<usize>,
    pub tasks: usize,
    pub retry: usize,
    pub deep: usize,
    pub only: Option<String>,
    pub idle: Duration,
    pub warm: usize,
    pub rate: u32,
    pub bulk_timeout: Duration,
    pub quiet_wait: Duration,
    pub asynqmon: bool,
}

const SCENARIOS: [&str; 4] = ["overview", "delete_all", "run_all", "deep"];

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn num<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> anyhow::Result<T> {
    match flag(args, name) {
        None => Ok(default),
        Some(v) => v
            .replace('_', "")
            .parse()
            .map_err(|_| anyhow::anyhow!("{name} takes a number, not {v:?}")),
    }
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let valued = [
            "--queues",
            "--tasks",
            "--retry",
            "--deep",
            "--only",
            "--idle-secs",
            "--warm",
            "--rate",
            "--bulk-timeout",
            "--quiet-wait",
        ];
        let mut i = 0;
        while i < args.len() {
            match args[i].as_str() {
                a if valued.contains(&a) => i += 2,
                "--no-asynqmon" => i += 1,
                a => bail!("unknown argument {a}; flags: {valued:?} --no-asynqmon"),
            }
        }
        let queues = flag(args, "--queues")
            .unwrap_or("5000,25000")
            .split(',')
            .map(|v| v.trim().replace('_', "").parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .context("--queues: comma-separated numbers")?;
        let only = flag(args, "--only").map(str::to_string);
        if let Some(o) = &only
            && !SCENARIOS.contains(&o.as_str())
        {
            bail!("--only takes one of {SCENARIOS:?}");
        }
        let deep = num(args, "--deep", 0)?;
        if only.as_deref() == Some("deep") && deep == 0 {
            bail!("--only deep needs --deep N");
        }
        Ok(Options {
            queues,
            tasks: num(args, "--tasks", 1_000_000)?,
            retry: num(args, "--retry", 200_000)?,
            deep,
            only,
            idle: Duration::from_secs(num(args, "--idle-secs", 20)?),
            warm: num(args, "--warm", 20)?,
            rate: num(args, "--rate", 200)?,
            bulk_timeout: Duration::from_secs(num(args, "--bulk-timeout", 600)?),
            quiet_wait: Duration::from_secs(num(args, "--quiet-wait", 30)?),
            asynqmon: !args.iter().any(|a| a == "--no-asynqmon"),
        })
    }

    fn wants(&self, scenario: &str) -> bool {
        self.only.as_deref().is_none_or(|o| o == scenario)
    }
}

/// What every scenario uses: the options, the programs, the private Redis
/// (port and an admin connection without a response timeout, as seeding
/// scripts run for a while).
pub struct Env {
    pub opts: Options,
    pub tools: Tools,
    pub port: u16,
    pub admin: MultiplexedConnection,
}

impl Env {
    /// The dashboards to measure: ours, and asynqmon when it was built.
    pub fn sides(&self) -> Vec<Side> {
        let mut v = vec![Side::Ours];
        if self.tools.asynqmon.is_some() {
            v.push(Side::Asynqmon);
        }
        v
    }

    /// Waits (up to `--quiet-wait`) for a quiet second on the machine.
    pub async fn quiet(&self) {
        sampling::wait_quiet(self.opts.quiet_wait).await;
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = Options::parse(&args)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(orchestrate(opts))
}

/// Machine facts for the report's first lines.
fn machine() -> (usize, String, String) {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or("?".into(), |kb| format!("{:.1} GB", kb / 1024.0 / 1024.0));
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default();
    (cpus, mem, load)
}

fn commit() -> String {
    std::process::Command::new("git")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

async fn orchestrate(opts: Options) -> anyhow::Result<()> {
    let started = Instant::now();
    let tools = procs::tools(opts.asynqmon)?;
    let redis = deploy::Deployment::start(deploy::Kind::Standalone).await?;
    let port = redis.ports[0];
    let admin = redis::Client::open(redis.url())?
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    let mut env = Env {
        opts,
        tools,
        port,
        admin,
    };
    let version = redis_stats::redis_version(&mut env.admin).await?;
    let (cpus, mem, load) = machine();
    println!(
        "Machine: {cpus} CPUs, {mem} RAM, load average {load} at the start; Redis {version}; \
         asynqdeck {} (bench built from commit {}); asynqmon {}.\n",
        env.tools.asynqdeck.display(),
        commit(),
        env.tools.asynqmon_note
    );

    if env.opts.wants("overview") {
        let mut runs = Vec::new();
        for q in env.opts.queues.clone() {
            runs.push(overview::run(&mut env, q).await?);
        }
        overview::print(&runs, env.opts.idle);
    }
    if env.opts.wants("delete_all") && env.opts.tasks > 0 {
        let n = env.opts.tasks;
        let runs = delete_all::run(&mut env, n).await?;
        bulk::print(
            "2. Delete all pending tasks",
            env.opts.tasks,
            &runs,
            env.opts.rate,
        );
    }
    if env.opts.wants("run_all") && env.opts.retry > 0 {
        let n = env.opts.retry;
        let runs = run_all::run(&mut env, n).await?;
        bulk::print(
            "3. Run all retry tasks",
            env.opts.retry,
            &runs,
            env.opts.rate,
        );
    }
    if env.opts.wants("deep") && env.opts.deep > 0 {
        let n = env.opts.deep;
        let run = deep::run(&mut env, n).await?;
        deep::print(&run);
    }
    println!("Whole bench took {:.0} s.", started.elapsed().as_secs_f64());
    drop(redis);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn options() {
        let o = Options::parse(&[]).unwrap();
        assert_eq!(o.queues, [5_000, 25_000]);
        assert_eq!((o.tasks, o.retry, o.deep), (1_000_000, 200_000, 0));
        assert_eq!((o.idle.as_secs(), o.warm, o.rate), (20, 20, 200));
        assert!(o.asynqmon && o.wants("overview") && o.wants("deep"));

        let o = Options::parse(&args(
            "--queues 200 --tasks 20_000 --only run_all --no-asynqmon",
        ))
        .unwrap();
        assert_eq!((o.queues.as_slice(), o.tasks), (&[200][..], 20_000));
        assert!(!o.asynqmon && o.wants("run_all") && !o.wants("overview"));

        for bad in ["--bogus", "--only nope", "--only deep", "--tasks many"] {
            assert!(Options::parse(&args(bad)).is_err(), "{bad}");
        }
        assert!(Options::parse(&args("--only deep --deep 100")).is_ok());
    }
}
