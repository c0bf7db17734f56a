//! Issue 14 benchmark: the engine's throughput on one standalone Redis and
//! on a 3-master local Redis Cluster in the same run, ours against Go
//! asynq v0.26.0, and the dashboard's Redis cost per overview view on
//! both (BENCHMARKS.md, "Issue 14: Redis Cluster and Sentinel").
//!
//! ```text
//! cargo build --release --bin asynqdeck
//! cargo run --release --example bench_cluster -- [--tasks 50000]
//!     [--concurrency 10,100] [--queues 6] [--view-queues 10,200]
//!     [--views 5] [--only-ours] [--no-throughput] [--no-views]
//!     [--quiet-wait 30]
//! ```
//!
//! What it does (Markdown on stdout, progress on stderr):
//! 1. Builds the Go peer (`interop/cmd/asynq-peer`, which takes
//!    `--cluster-nodes` for `asynq.RedisClusterClientOpt`) into
//!    `target/asynq-peer-bench` unless `BENCH_GO_PEER` names a built one.
//! 2. Starts a standalone redis-server and a 3-master cluster
//!    (`--cluster-enabled yes`, `redis-cli --cluster create
//!    --cluster-replicas 0`), all on free loopback ports, `--save ""
//!    --appendonly no`.
//! 3. Picks `--queues` queue names (`q0`, `q1`, ...) so each master of the
//!    cluster holds the same number of them; both deployments use them.
//! 4. Throughput (see `throughput.rs`): for each deployment, concurrency
//!    and engine, flush, enqueue N no-op tasks round-robin over the queues,
//!    run ONE worker process on every queue (priority 1 each) until it has
//!    handled N; Redis CPU and commands are summed over every node.
//! 5. Dashboard cost per view (see `views.rs`) for each deployment and
//!    `--view-queues` count.
//!
//! Before each throughput run the bench waits (up to `--quiet-wait` s) for
//! a second in which the machine is otherwise nearly idle.
//!
//! Hidden mode: `bench_cluster worker --redis URL --queues q,... --concurrency C --count N`.

#[path = "../engine/sampling.rs"]
#[allow(dead_code)]
mod sampling;

mod deploy;
mod throughput;
mod views;
mod worker;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use deploy::{Deployment, Kind};
use throughput::Engine;

/// Value of the flag `name` in `args` (`--name value`).
pub fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn list(args: &[String], name: &str, default: &str) -> anyhow::Result<Vec<usize>> {
    flag(args, name)
        .unwrap_or(default)
        .split(',')
        .map(|v| v.trim().parse().with_context(|| format!("{name} {v}")))
        .collect()
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if args.first().map(String::as_str) == Some("worker") {
        return rt.block_on(worker::main(&args[1..]));
    }
    rt.block_on(orchestrate(&args))
}

fn go_peer() -> anyhow::Result<PathBuf> {
    if let Ok(p) = std::env::var("BENCH_GO_PEER") {
        return Ok(PathBuf::from(p));
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("target").join("asynq-peer-bench");
    let status = std::process::Command::new("go")
        .current_dir(root.join("interop"))
        .args(["build", "-o"])
        .arg(&out)
        .arg("./cmd/asynq-peer")
        .status()
        .context("go must be installed to build the Go peer")?;
    if !status.success() {
        bail!("go build ./cmd/asynq-peer failed");
    }
    Ok(out)
}

/// `want` queue names, the same number on each master of `cluster`.
async fn spread_queues(cluster: &mut Deployment, want: usize) -> anyhow::Result<Vec<String>> {
    let masters = cluster.ports.len();
    let per = want.div_ceil(masters);
    let mut taken = vec![0; masters];
    let mut out = Vec::new();
    for i in 0..10_000 {
        if out.len() == want {
            break;
        }
        let q = format!("q{i}");
        let node = cluster.node_of_queue(&q).await?;
        if taken[node] < per {
            taken[node] += 1;
            out.push(q);
        }
    }
    eprintln!("bench: queues {out:?}, per master {taken:?}");
    Ok(out)
}

async fn orchestrate(args: &[String]) -> anyhow::Result<()> {
    let tasks: usize = flag(args, "--tasks").unwrap_or("50000").parse()?;
    let concurrency = list(args, "--concurrency", "10,100")?;
    let queue_count: usize = flag(args, "--queues").unwrap_or("6").parse()?;
    let view_queues = list(args, "--view-queues", "10,200")?;
    let views: usize = flag(args, "--views").unwrap_or("5").parse()?;
    let quiet = Duration::from_secs(flag(args, "--quiet-wait").unwrap_or("30").parse()?);
    let has = |f: &str| args.iter().any(|a| a == f);
    let engines: &[Engine] = if has("--only-ours") {
        &[Engine::Ours]
    } else {
        &[Engine::Go, Engine::Ours]
    };
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/asynqdeck");
    if !has("--no-views") && !bin.exists() {
        bail!("build it first: cargo build --release --bin asynqdeck");
    }
    let peer = if engines.contains(&Engine::Go) && !has("--no-throughput") {
        eprintln!("bench: building the Go peer");
        go_peer()?
    } else {
        PathBuf::new()
    };
    let started = Instant::now();
    let mut standalone = Deployment::start(Kind::Standalone).await?;
    let mut cluster = Deployment::start(Kind::Cluster).await?;
    let queues = spread_queues(&mut cluster, queue_count).await?;

    let mut runs = Vec::new();
    if !has("--no-throughput") {
        for &c in &concurrency {
            for d in [&mut standalone, &mut cluster] {
                for &e in engines {
                    eprintln!("bench: {} {} C={c} N={tasks}", d.kind.name(), e.name());
                    let r = throughput::run(d, &peer, e, &queues, c, tasks, quiet).await?;
                    eprintln!(
                        "bench:   {:.0} tasks/s, Redis {:.1} µs/task, worker {:.1} µs/task, {} connections",
                        r.tasks_per_s(),
                        r.redis_us_per_task(),
                        r.worker_us_per_task(),
                        r.connections
                    );
                    runs.push(r);
                }
            }
        }
    }
    let mut rows = Vec::new();
    if !has("--no-views") {
        for &q in &view_queues {
            for d in [&mut standalone, &mut cluster] {
                eprintln!("bench: views, {} queues, {}", q, d.kind.name());
                rows.extend(views::run(d, &bin, q, views).await?);
            }
        }
    }
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!(
        "Machine: {cpus} CPUs; {tasks} tasks per run over {} queues ({queue_count} asked, spread evenly over the cluster's masters); whole bench took {:.0} s.\n",
        queues.len(),
        started.elapsed().as_secs_f64()
    );
    if !runs.is_empty() {
        throughput::print(&runs);
    }
    if !rows.is_empty() {
        views::print(&rows);
    }
    Ok(())
}
