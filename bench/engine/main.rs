//! Throughput, latency, memory and Redis-cost benchmark of asynqdeck's
//! [`Server`] against Go asynq v0.26.0, on one private redis-server.
//!
//! ```text
//! cargo run --release --example bench -- [--tasks N] [--concurrency 10,100]
//!     [--pickup-tasks 200] [--pickup-interval-ms 20] [--archive-ops 20000]
//!     [--profile] [--quiet-wait 60] [--no-script-costs] [--only-ours]
//!     [--schedule-entries 1000] [--schedule-secs 30]
//!     [--batch-enqueue N]
//! ```
//!
//! What it does (results go to stdout as Markdown, progress to stderr):
//! 1. Builds the Go peer (`interop/cmd/asynq-peer`) into `target/` and starts
//!    a redis-server on a free loopback port (`--save "" --appendonly no`),
//!    killed when the bench ends.
//! 2. Throughput: for each concurrency and engine (Go, then ours), flushes
//!    the database, enqueues N no-op tasks with [`Client`] (payload = enqueue
//!    time in unix ns, decimal), then runs ONE worker process until it has
//!    handled N tasks. Go's worker is `asynq-peer bench-work`; ours is this
//!    same binary in its hidden `worker` mode. Each worker prints one JSON
//!    line: count, first start and last end (unix ns), p50/p99
//!    enqueue-to-start latency (µs), peak RSS (VmHWM, kB) and its own CPU
//!    time. The bench adds Redis CPU (INFO cpu delta over the worker's life)
//!    and the commands Redis ran (INFO commandstats delta).
//! 3. Idle-to-busy pickup: a worker idles on the empty queue for 2 s, then
//!    tasks are enqueued one at a time every 20 ms; p50/p99 enqueue-to-start.
//! 4. Archive cost: 10,000 archived tasks (with hashes) are seeded, then
//!    20,000 × (enqueue, dequeue, `Broker::archive`); client µs per archive
//!    call and Redis CPU per iteration; a second pass with SLOWLOG on gives
//!    the Redis execution time of each script.
//! 5. Scheduler (issue 16): one scheduler process per engine with
//!    `--schedule-entries` entries on `@every 1s` for `--schedule-secs`
//!    seconds (Go: `asynq-peer bench-schedule`; ours: the hidden
//!    `schedule` mode); drift of each fire past its tick's second, fires
//!    against entries × ticks, Redis calls, µs and CPU per tick
//!    (`schedule.rs`). `--schedule-entries 0` skips it.
//! 6. Batch enqueue (`--batch-enqueue N`, off by default): N pending tasks
//!    by Go's `Client.Enqueue`, our `Client::enqueue` and our
//!    `Client::enqueue_batch`; tasks/s and Redis µs per task. Alone:
//!    `-- --tasks 0 --pickup-tasks 0 --archive-ops 0 --no-script-costs
//!    --batch-enqueue 100000`.
//!
//! Before each measured step the bench waits (up to `--quiet-wait` s,
//! default 60) for a second in which other processes use < 10 % of a CPU,
//! and each throughput row reports the CPU the rest of the machine used
//! meanwhile ("other load"), so a noisy neighbour shows in the results.
//!
//! `--profile` turns SLOWLOG on during the throughput runs too and prints,
//! per engine, what each script call costs Redis (use fewer tasks: every
//! command is kept in memory). `--no-script-costs` skips the script cost
//! model; `--only-ours` skips Go's runs (for quick iterations).
//!
//! Files: `options.rs` (command line), `harness.rs` (the private
//! redis-server, the Go peer, worker processes and their summary line),
//! `sampling.rs` (CPU, RSS and quiet-machine waits), `redis_stats.rs`
//! (INFO and SLOWLOG snapshots), `worker.rs` (the hidden worker mode), one
//! file per measurement (`throughput.rs`, `pickup.rs`, `script_costs.rs`,
//! `archive.rs`, `schedule.rs`, `batch_enqueue.rs`), each with its part of the report, and `report.rs`
//! (shared report helpers).
//!
//! Hidden modes: `bench schedule --redis URL --entries N --for SECS`
//! (`schedule_mode.rs`) and `bench worker --redis URL --concurrency C --count N`. For
//! profiling, `BENCH_WORKER_PREFIX="perf record -g --"` runs our worker
//! under that command (its RSS and CPU figures are then not comparable).
//! `BENCH_FETCH_SPIN_US=N` sets our worker's `Config::fetch_spin` (0: no
//! busy-polling for lease replies), `BENCH_WORKER_RUNTIME=current` runs it
//! on a current-thread runtime instead of a multi-thread one.

mod archive;
mod batch_enqueue;
mod harness;
mod options;
mod pickup;
mod redis_stats;
mod report;
mod sampling;
mod schedule;
mod schedule_mode;
mod script_costs;
mod throughput;
mod worker;

use std::time::Instant;

use harness::Env;
use options::Options;
use report::kb_to_mib;

/// The queue every measurement uses.
const QUEUE: &str = "default";
/// Type of the no-op tasks.
const TASK_TYPE: &str = "bench:noop";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        let rt = if std::env::var("BENCH_WORKER_RUNTIME").as_deref() == Ok("current") {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
        };
        return rt.block_on(worker::main(&args[1..]));
    }
    if args.first().map(String::as_str) == Some("schedule") {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        return rt.block_on(schedule_mode::main(&args[1..]));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let opts = Options::parse(&args)?;
    rt.block_on(orchestrate(opts))
}

/// Runs the measurements `opts` asks for, in order, then prints the report.
async fn orchestrate(opts: Options) -> anyhow::Result<()> {
    eprintln!("bench: building the Go peer");
    let go_peer = harness::build_go_peer()?;
    let redis = harness::RedisServer::start()?;
    let admin = redis::Client::open(redis.url())?
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    let mut env = Env {
        quiet_wait: opts.quiet_wait,
        redis,
        go_peer,
        admin,
    };
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut env.admin)
        .await?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let started = Instant::now();

    let mut runs = Vec::new();
    for &c in opts.concurrency.iter().filter(|_| opts.tasks > 0) {
        for &engine in &opts.engines {
            eprintln!("bench: throughput {} C={c} N={}", engine.name(), opts.tasks);
            let r = throughput::run(&mut env, engine, c, opts.tasks, opts.profile).await?;
            eprintln!(
                "bench:   {:.0} tasks/s, Redis {:.1} µs/task ({:.1} kernel), worker {:.1} µs/task, RSS {:.1} MiB, enqueue {:.0}/s, other load {:.2} CPU",
                r.tasks_per_s(),
                r.redis_cpu_per_task(),
                r.redis_sys_per_task(),
                r.worker_cpu_per_task(),
                kb_to_mib(r.worker.max_rss_kb),
                r.enqueue_per_s,
                r.other_cpus
            );
            runs.push(r);
        }
    }
    let mut pickups = Vec::new();
    if opts.pickup_tasks > 0 {
        for &engine in &opts.engines {
            eprintln!("bench: pickup {}", engine.name());
            pickups.push(
                pickup::run(&mut env, engine, opts.pickup_tasks, opts.pickup_interval).await?,
            );
        }
    }
    let costs = if opts.script_costs {
        eprintln!("bench: script cost model");
        script_costs::run(&mut env, 10_000).await?
    } else {
        Vec::new()
    };
    let archive = if opts.archive_ops > 0 {
        eprintln!("bench: archive cost, {} ops", opts.archive_ops);
        Some(archive::run(&mut env, opts.archive_ops).await?)
    } else {
        None
    };

    let mut schedules = Vec::new();
    if opts.schedule_entries > 0 {
        for &engine in &opts.engines {
            eprintln!(
                "bench: scheduler {} with {} entries for {} s",
                engine.name(),
                opts.schedule_entries,
                opts.schedule_secs
            );
            schedules.push(
                schedule::run(&mut env, engine, opts.schedule_entries, opts.schedule_secs).await?,
            );
        }
    }
    let batches = if opts.batch_enqueue > 0 {
        batch_enqueue::run(&mut env, opts.batch_enqueue).await?
    } else {
        Vec::new()
    };

    // ---- Markdown ----
    println!(
        "Machine: {cpus} CPUs, Redis {version}; {} tasks per run; whole bench took {:.0} s.\n",
        opts.tasks,
        started.elapsed().as_secs_f64()
    );
    throughput::print(&runs);
    if !pickups.is_empty() {
        pickup::print(&pickups, opts.pickup_tasks, opts.pickup_interval);
    }
    if !costs.is_empty() {
        script_costs::print(&costs);
    }
    if let Some(a) = archive {
        archive::print(&a);
    }
    if !schedules.is_empty() {
        schedule::print(&schedules, opts.schedule_entries, opts.schedule_secs);
    }
    if !batches.is_empty() {
        batch_enqueue::print(&batches);
    }
    Ok(())
}
