//! Producer cost (`--batch-enqueue N`): N small pending tasks enqueued by
//! Go v0.26.0's `Client.Enqueue` (the Go peer's `bench-enqueue`, 128 in
//! flight), by our `Client::enqueue` (128 in flight, as Go) and by our
//! `Client::enqueue_batch` (one call, pipelines of 1,000); tasks/s, Redis
//! CPU per task (INFO cpu) and Redis command time per task (INFO
//! commandstats `usec` of the scripts and other commands the client
//! sent), and the commands Redis ran. Go's
//! `BatchEnqueueContext` exists only on Go master, which the Go module proxy
//! refuses, so it is not measured here (BENCHMARKS.md).

use std::time::Instant;

use anyhow::{Context, bail};
use asynqdeck::broker::keys;
use asynqdeck::{Client, EnqueueOptions, Task};

use crate::harness::{Env, enqueue_all, now_ns};
use crate::redis_stats::{command_delta, redis_snap};
use crate::sampling::wait_quiet;
use crate::{QUEUE, TASK_TYPE};

/// How the N tasks were enqueued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Producer {
    GoEnqueue,
    OurEnqueue,
    OurBatch,
}

impl Producer {
    const ALL: [Producer; 3] = [
        Producer::GoEnqueue,
        Producer::OurEnqueue,
        Producer::OurBatch,
    ];

    fn name(self) -> &'static str {
        match self {
            Producer::GoEnqueue => "Go v0.26.0 `Client.Enqueue`, 128 in flight",
            Producer::OurEnqueue => "asynqdeck `Client::enqueue`, 128 in flight",
            Producer::OurBatch => "asynqdeck `Client::enqueue_batch`, one call",
        }
    }
}

pub struct BatchResult {
    pub producer: Producer,
    pub n: usize,
    pub tasks_per_s: f64,
    pub redis_cpu_us: f64,
    /// INFO commandstats `usec` of the commands a client sends (scripts,
    /// `SADD`, script loads, handshakes), not of the commands scripts run
    /// inside (their time is within their script's).
    pub redis_cmd_us: f64,
    pub commands: Vec<(String, u64, u64)>,
}

/// Runs the three producers, each on a flushed database.
pub async fn run(env: &mut Env, n: usize) -> anyhow::Result<Vec<BatchResult>> {
    let mut out = Vec::new();
    for producer in Producer::ALL {
        eprintln!("bench: batch enqueue, {} N={n}", producer.name());
        wait_quiet(env.quiet_wait).await;
        env.flush().await?;
        let client = Client::connect(&env.redis.url()).await?;
        let before = redis_snap(&mut env.admin).await?;
        let t0 = Instant::now();
        let tasks_per_s = match producer {
            Producer::GoEnqueue => go_enqueue(env, n).await?,
            Producer::OurEnqueue => enqueue_all(&client, n).await?,
            Producer::OurBatch => {
                let tasks: Vec<(Task, EnqueueOptions)> = (0..n)
                    .map(|_| {
                        (
                            Task::new(TASK_TYPE, now_ns().to_string().into_bytes()),
                            EnqueueOptions::new(),
                        )
                    })
                    .collect();
                let results = client.enqueue_batch(&tasks).await?;
                if let Some(e) = results.into_iter().find_map(Result::err) {
                    bail!("batch enqueue: {e}");
                }
                n as f64 / t0.elapsed().as_secs_f64()
            }
        };
        let after = redis_snap(&mut env.admin).await?;
        let pending = env.llen(&keys::pending_key(QUEUE)).await?;
        if pending != n as i64 {
            bail!("{}: {pending} pending tasks, want {n}", producer.name());
        }
        let commands = command_delta(&before, &after);
        out.push(BatchResult {
            producer,
            n,
            tasks_per_s,
            redis_cpu_us: after.cpu_us - before.cpu_us,
            redis_cmd_us: commands
                .iter()
                .filter(|(name, _, _)| is_client_sent(name))
                .map(|(_, _, us)| *us as f64)
                .sum(),
            commands,
        });
        let r = out.last().expect("just pushed");
        eprintln!(
            "bench:   {:.0} tasks/s, Redis CPU {:.2} µs/task, commands {:.2} µs/task",
            r.tasks_per_s,
            r.redis_cpu_us / n as f64,
            r.redis_cmd_us / n as f64
        );
    }
    Ok(out)
}

/// Commands only a client sends here (the scripts' own `HSET`, `EXISTS`,
/// `LPUSH` are counted inside `EVALSHA`).
fn is_client_sent(cmd: &str) -> bool {
    matches!(cmd, "evalsha" | "eval" | "sadd" | "script|load" | "hello")
}

/// Go's producer: `asynq-peer bench-enqueue`; its tasks/s.
async fn go_enqueue(env: &Env, n: usize) -> anyhow::Result<f64> {
    let out = tokio::process::Command::new(&env.go_peer)
        .args(["--redis", &env.redis.addr(), "bench-enqueue"])
        .args(["--count", &n.to_string(), "--queue", QUEUE])
        .output()
        .await
        .context("run asynq-peer bench-enqueue")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!("asynq-peer bench-enqueue failed: {text}");
    }
    let v: serde_json::Value = serde_json::from_str(text.trim())?;
    let count = v["count"].as_i64().unwrap_or(0);
    if count != n as i64 {
        bail!("asynq-peer bench-enqueue enqueued {count} of {n}: {text}");
    }
    let elapsed_ns = v["elapsed_ns"].as_i64().unwrap_or(1).max(1);
    Ok(n as f64 / (elapsed_ns as f64 / 1e9))
}

/// The producer table and the commands each producer made Redis run.
pub fn print(results: &[BatchResult]) {
    println!("### Batch enqueue\n");
    println!(
        "| producer | tasks | tasks/s | Redis CPU µs/task | Redis µs/task in client commands |"
    );
    println!("|---|---:|---:|---:|---:|");
    for r in results {
        println!(
            "| {} | {} | {:.0} | {:.2} | {:.2} |",
            r.producer.name(),
            r.n,
            r.tasks_per_s,
            r.redis_cpu_us / r.n as f64,
            r.redis_cmd_us / r.n as f64
        );
    }
    for r in results {
        println!("\n{} — commands (INFO commandstats):\n", r.producer.name());
        println!("| command | calls | calls/task | µs/call |");
        println!("|---|---:|---:|---:|");
        for (name, calls, us) in &r.commands {
            println!(
                "| `{name}` | {calls} | {:.3} | {:.2} |",
                *calls as f64 / r.n as f64,
                *us as f64 / (*calls).max(1) as f64
            );
        }
    }
    println!();
}
