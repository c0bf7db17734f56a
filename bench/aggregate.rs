//! Group aggregation throughput (issue 16 item 8, BENCHMARKS.md "Group
//! aggregator"): asynqdeck's `Server` with a group aggregator against Go
//! asynq v0.26.0's, on one private redis-server.
//!
//! ```text
//! cargo run --release --example bench_aggregate -- [--groups 1000] [--per-group 10] [--rounds 3]
//! ```
//!
//! Each round, for each engine (Go, then ours): flush, enqueue
//! `groups × per-group` tasks into groups of queue `agg` (our `Client`),
//! wait past the 1 s grace period so every group is ready, then start ONE
//! server (concurrency 10, grace 1 s, so its first check comes 1 s after
//! start; aggregate = the payloads joined by `\n`, handled by a no-op
//! handler) and time until it has handled one aggregate per group. Go's
//! server is `asynq-peer work --aggregate`; ours runs in this process.
//! Reported: the time from start to the last aggregate handled, groups/s
//! over that time less the 1 s before the first check, Redis CPU (INFO
//! cpu) and Redis commands (INFO commandstats) per group.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use asynqdeck::server::{Config, Server, TaskContext, handler_fn};
use asynqdeck::{Client, EnqueueOptions, Task};
use redis::aio::MultiplexedConnection;

const QUEUE: &str = "agg";
/// Time before a server's first aggregation check (grace 1 s: interval 1 s).
const FIRST_CHECK: Duration = Duration::from_secs(1);

struct Redis {
    child: std::process::Child,
    port: u16,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_redis() -> anyhow::Result<Redis> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .stdout(Stdio::null());
    // SAFETY: prctl is async-signal-safe; the server dies with the bench.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let child = cmd.spawn().context("redis-server must be installed")?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("redis-server did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Redis { child, port })
}

fn go_peer() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("target").join("asynq-peer-bench");
    let ok = Command::new("go")
        .current_dir(root.join("interop"))
        .args(["build", "-o"])
        .arg(&out)
        .arg("./cmd/asynq-peer")
        .status()
        .context("go must be installed")?
        .success();
    if !ok {
        bail!("go build ./cmd/asynq-peer failed");
    }
    Ok(out)
}

/// Redis's CPU seconds and commandstats calls so far.
async fn redis_usage(conn: &mut MultiplexedConnection) -> anyhow::Result<(f64, u64)> {
    let cpu: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    let secs: f64 = cpu
        .lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split(':').nth(1)?.trim().parse::<f64>().ok())
        .sum();
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let calls = stats
        .lines()
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum();
    Ok((secs, calls))
}

async fn seed(url: &str, groups: usize, per_group: usize) -> anyhow::Result<()> {
    let client = Client::connect(url).await?;
    for g in 0..groups {
        let mut batch = Vec::new();
        for i in 0..per_group {
            let client = client.clone();
            batch.push(async move {
                client
                    .enqueue(
                        &Task::new("bench:member", format!("{g}-{i}").into_bytes()),
                        EnqueueOptions::new().queue(QUEUE).group(format!("g{g}")),
                    )
                    .await
            });
        }
        for r in futures_util::future::join_all(batch).await {
            r?;
        }
    }
    Ok(())
}

async fn run_ours(url: &str, groups: usize) -> anyhow::Result<Duration> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let config = Config {
        concurrency: 10,
        queues: [(QUEUE.to_string(), 1)].into(),
        group_aggregator: Some(Arc::new(|_: &str, tasks: Vec<Task>| {
            let lines: Vec<&[u8]> = tasks.iter().map(|t| t.payload()).collect();
            Task::new("bench:aggregated", lines.join(&b'\n'))
        })),
        group_grace_period: Duration::from_secs(1),
        ..Config::default()
    };
    let server = Server::connect(url, config).await?;
    let handle = server.shutdown_handle();
    let start = Instant::now();
    let join = tokio::spawn(server.run_until(
        handler_fn(move |_ctx: TaskContext, _t: Task| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(());
                Ok(())
            }
        }),
        std::future::pending(),
    ));
    for _ in 0..groups {
        rx.recv().await.context("server stopped early")?;
    }
    let took = start.elapsed();
    handle.shutdown();
    join.await??;
    Ok(took)
}

fn run_go(peer: &Path, addr: &str, groups: usize) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let out = Command::new(peer)
        .args(["--redis", addr, "work", "--queues", QUEUE, "--aggregate"])
        .args(["--group-grace-period", "1s", "--concurrency", "10"])
        .args(["--count", &groups.to_string(), "--max-duration", "600s"])
        .stderr(Stdio::null())
        .output()?;
    let took = start.elapsed();
    let handled = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("\"aggregated\""))
        .count();
    if handled != groups {
        bail!("Go handled {handled} aggregates of {groups}");
    }
    Ok(took)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: usize| -> anyhow::Result<usize> {
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(args.get(i + 1).context("flag value")?.parse()?),
            None => Ok(default),
        }
    };
    let (groups, per_group, rounds) = (
        flag("--groups", 1000)?,
        flag("--per-group", 10)?,
        flag("--rounds", 3)?,
    );
    let peer = go_peer()?;
    let redis = start_redis()?;
    let addr = format!("127.0.0.1:{}", redis.port);
    let url = format!("redis://{addr}/0");
    let mut admin = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;
    println!(
        "| engine | round | groups × tasks | start → last aggregate (s) | groups/s (less the 1 s before the first check) | Redis CPU µs/group | Redis commands/group |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let mut summary: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for round in 1..=rounds {
        for engine in ["go", "ours"] {
            let _: () = redis::cmd("FLUSHALL").query_async(&mut admin).await?;
            seed(&url, groups, per_group).await?;
            tokio::time::sleep(Duration::from_millis(1100)).await;
            let (cpu0, calls0) = redis_usage(&mut admin).await?;
            let took = match engine {
                "go" => run_go(&peer, &addr, groups)?,
                _ => run_ours(&url, groups).await?,
            };
            let (cpu1, calls1) = redis_usage(&mut admin).await?;
            let working = took.saturating_sub(FIRST_CHECK).as_secs_f64();
            let rate = groups as f64 / working;
            summary.entry(engine).or_default().push(rate);
            println!(
                "| {engine} | {round} | {groups} × {per_group} | {:.2} | {rate:.0} | {:.0} | {:.1} |",
                took.as_secs_f64(),
                (cpu1 - cpu0) * 1e6 / groups as f64,
                (calls1 - calls0) as f64 / groups as f64,
            );
        }
    }
    for (engine, mut rates) in summary {
        rates.sort_by(f64::total_cmp);
        println!(
            "\n{engine}: median {:.0} groups/s over {} rounds",
            rates[rates.len() / 2],
            rates.len()
        );
    }
    Ok(())
}
