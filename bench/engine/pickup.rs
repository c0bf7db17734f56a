//! Idle-to-busy pickup: a worker idles on the empty queue for 2 s, then
//! tasks are enqueued one at a time (every 20 ms by default); p50/p99
//! enqueue-to-start.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use asynqdeck::broker::keys;
use asynqdeck::{Client, EnqueueOptions, Task};

use crate::TASK_TYPE;
use crate::harness::{Env, WorkerSummary, now_ns, parse_summary};
use crate::options::Engine;
use crate::report::kb_to_mib;
use crate::sampling::wait_quiet;

pub struct PickupResult {
    pub engine: Engine,
    pub worker: WorkerSummary,
}

/// One pickup run: a worker of `engine` idles on the empty queue, then
/// `tasks` tasks arrive one every `interval`.
pub async fn run(
    env: &mut Env,
    engine: Engine,
    tasks: usize,
    interval: Duration,
) -> anyhow::Result<PickupResult> {
    env.flush().await?;
    wait_quiet(env.quiet_wait).await;
    let child = env
        .worker(engine, 10, tasks)
        .spawn()
        .context("spawn worker")?;
    // Wait until the worker has registered itself, then let it idle.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let n: i64 = redis::cmd("ZCARD")
            .arg(keys::ALL_SERVERS)
            .query_async(&mut env.admin)
            .await?;
        if n > 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{} worker did not register", engine.name());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let client = Client::connect(&env.redis.url()).await?;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for _ in 0..tasks {
        tick.tick().await;
        let task = Task::new(TASK_TYPE, now_ns().to_string().into_bytes());
        client.enqueue(&task, EnqueueOptions::new()).await?;
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .context("pickup worker did not finish")??;
    if !out.status.success() {
        bail!("{} pickup worker exited with {}", engine.name(), out.status);
    }
    Ok(PickupResult {
        engine,
        worker: parse_summary(&out.stdout)?,
    })
}

/// The pickup table, one row per engine.
pub fn print(pickups: &[PickupResult], tasks: usize, interval: Duration) {
    println!(
        "\n### Idle-to-busy pickup ({} tasks, one every {} ms, after ≥ 2 s idle, C=10)\n",
        tasks,
        interval.as_millis()
    );
    println!(
        "| engine | p50 enqueue→start | p99 enqueue→start | max | tasks > 100 ms | peak RSS |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for p in pickups {
        println!(
            "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {} | {:.1} MiB |",
            p.engine.name(),
            p.worker.p50_us as f64 / 1000.0,
            p.worker.p99_us as f64 / 1000.0,
            p.worker.max_us as f64 / 1000.0,
            p.worker.over_100ms,
            kb_to_mib(p.worker.max_rss_kb)
        );
    }
}
