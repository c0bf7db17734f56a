//! Throughput on one deployment: N no-op tasks enqueued round-robin over
//! the bench's queues (on a cluster, every master holds some), then ONE
//! worker process (Go asynq's `asynq-peer bench-work` or ours) on all the
//! queues until it has handled N. Tasks/s (first handler start to last
//! handler end), Redis CPU per task summed over every node, connections
//! the worker opened (summed over nodes), worker CPU per task.

use std::process::Stdio;
use std::time::Instant;

use anyhow::{Context, bail};
use asynqdeck::{Client, EnqueueOptions, Inspector, Task};
use futures_util::{StreamExt, TryStreamExt};
use serde_json::Value;

use crate::deploy::Deployment;
use crate::sampling::wait_quiet;
use crate::worker::now_ns;

/// Go asynq or asynqdeck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Go,
    Ours,
}

impl Engine {
    pub fn name(self) -> &'static str {
        match self {
            Engine::Go => "Go asynq",
            Engine::Ours => "asynqdeck",
        }
    }
}

/// One run's figures.
pub struct Run {
    pub deployment: &'static str,
    pub engine: Engine,
    pub concurrency: usize,
    pub count: i64,
    pub span_ns: i64,
    pub redis_cpu_us: f64,
    pub worker_cpu_ms: i64,
    pub max_rss_kb: i64,
    pub connections: u64,
    pub enqueue_per_s: f64,
    /// (command, calls) the run sent Redis, most first.
    pub commands: Vec<(String, u64)>,
}

impl Run {
    pub fn tasks_per_s(&self) -> f64 {
        self.count as f64 / (self.span_ns.max(1) as f64 / 1e9)
    }
    pub fn redis_us_per_task(&self) -> f64 {
        self.redis_cpu_us / self.count.max(1) as f64
    }
    pub fn worker_us_per_task(&self) -> f64 {
        self.worker_cpu_ms as f64 * 1000.0 / self.count.max(1) as f64
    }
}

/// Enqueues `n` no-op tasks round-robin over `queues`, 128 in flight;
/// returns tasks per second.
async fn enqueue_all(client: &Client, queues: &[String], n: usize) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    futures_util::stream::iter(0..n)
        .map(|i| {
            let client = client.clone();
            let q = queues[i % queues.len()].clone();
            async move {
                let task = Task::new("bench:noop", now_ns().to_string().into_bytes());
                client.enqueue(&task, EnqueueOptions::new().queue(&q)).await
            }
        })
        .buffer_unordered(128)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}

/// One run of `engine` at concurrency `c` on `d`.
pub async fn run(
    d: &mut Deployment,
    go_peer: &std::path::Path,
    engine: Engine,
    queues: &[String],
    c: usize,
    n: usize,
    quiet: std::time::Duration,
) -> anyhow::Result<Run> {
    wait_quiet(quiet).await;
    d.flush().await?;
    let client = Client::connect(&d.url()).await?;
    let enqueue_per_s = enqueue_all(&client, queues, n).await?;
    drop(client);
    let mut cmd = match engine {
        Engine::Go => {
            let mut cmd = tokio::process::Command::new(go_peer);
            let prio: Vec<String> = queues.iter().map(|q| format!("{q}=1")).collect();
            cmd.args(d.go_flags())
                .arg("bench-work")
                .args(["--queues", &prio.join(",")]);
            cmd
        }
        Engine::Ours => {
            let mut cmd = tokio::process::Command::new(std::env::current_exe()?);
            cmd.args(["worker", "--redis", &d.url()])
                .args(["--queues", &queues.join(",")]);
            cmd
        }
    };
    cmd.args(["--concurrency", &c.to_string(), "--count", &n.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let before = d.snap().await?;
    let out = cmd.output().await.context("run the worker")?;
    let after = d.snap().await?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "{} worker exited with {}: {text}",
            engine.name(),
            out.status
        );
    }
    let line = text
        .lines()
        .rfind(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("worker printed no JSON: {text}"))?;
    let v: Value = serde_json::from_str(line)?;
    let i = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or(0);
    // Every task must be finished in Redis, not only handled.
    let inspector = Inspector::connect(&d.url()).await?;
    let (mut processed, mut left) = (0, 0);
    for q in queues {
        let info = inspector.queue_info(q).await?;
        processed += info.processed_total;
        left += info.pending + info.active;
    }
    if i("count") != n as i64 || processed != n as i64 || left != 0 {
        bail!(
            "{} C={c}: handled {}, processed {processed}, left {left} (want {n})",
            engine.name(),
            i("count")
        );
    }
    Ok(Run {
        deployment: d.kind.name(),
        engine,
        concurrency: c,
        count: i("count"),
        span_ns: i("last_end_ns") - i("first_start_ns"),
        redis_cpu_us: after.cpu_us - before.cpu_us,
        worker_cpu_ms: i("cpu_user_ms") + i("cpu_sys_ms"),
        max_rss_kb: i("max_rss_kb"),
        // The bench's own INFO connections are kept open: all new ones are
        // the worker's.
        connections: after.connections - before.connections,
        enqueue_per_s,
        commands: after.commands_since(&before),
    })
}

/// The throughput table and each run's top commands.
pub fn print(runs: &[Run]) {
    println!("### Throughput\n");
    println!(
        "| deployment | engine | C | tasks/s | vs standalone | Redis CPU µs/task (all nodes) | worker CPU µs/task | connections opened | peak RSS | enqueue rate (before the run) |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in runs {
        let base = runs.iter().find(|b| {
            b.deployment == "standalone" && b.engine == r.engine && b.concurrency == r.concurrency
        });
        let ratio = base.map_or("–".into(), |b| {
            format!("{:.2}×", r.tasks_per_s() / b.tasks_per_s())
        });
        println!(
            "| {} | {} | {} | {:.0} | {ratio} | {:.1} | {:.1} | {} | {:.1} MiB | {:.0}/s |",
            r.deployment,
            r.engine.name(),
            r.concurrency,
            r.tasks_per_s(),
            r.redis_us_per_task(),
            r.worker_us_per_task(),
            r.connections,
            r.max_rss_kb as f64 / 1024.0,
            r.enqueue_per_s
        );
    }
    println!(
        "\nCommands per task (INFO commandstats delta over every node, scripts' inner commands included; top 6):\n"
    );
    println!("| deployment | engine | C | commands |");
    println!("|---|---|---:|---|");
    for r in runs {
        let per = r.count.max(1) as f64;
        let top: Vec<String> = r
            .commands
            .iter()
            .take(6)
            .map(|(c, n)| format!("{c} {:.2}", *n as f64 / per))
            .collect();
        println!(
            "| {} | {} | {} | {} |",
            r.deployment,
            r.engine.name(),
            r.concurrency,
            top.join(", ")
        );
    }
    println!();
}
