//! Throughput: N no-op tasks enqueued, then ONE worker process (Go's or
//! ours) until it has handled them; tasks/s, enqueue-to-start latency, peak
//! RSS, Redis and worker CPU per task, the commands Redis ran, and the CPU
//! the rest of the machine used meanwhile.

use std::time::Instant;

use anyhow::{Context, bail};
use asynqdeck::Client;
use asynqdeck::broker::keys;

use crate::QUEUE;
use crate::harness::{Env, WorkerSummary, enqueue_all, parse_summary};
use crate::options::Engine;
use crate::redis_stats::{
    command_delta, is_client_call, redis_snap, slowlog_groups, slowlog_off, slowlog_on,
};
use crate::report::{kb_to_mib, print_profile};
use crate::sampling::{machine_busy_ms, self_cpu_ms, wait_quiet};

pub struct ThroughputResult {
    pub engine: Engine,
    pub concurrency: usize,
    pub enqueue_per_s: f64,
    pub worker: WorkerSummary,
    pub redis_cpu_us: f64,
    /// Of `redis_cpu_us`, the kernel's part (syscalls, wake-ups).
    pub redis_sys_us: f64,
    /// CPU the rest of the machine used during the run, in CPUs (0.05 = 5 %
    /// of one core): busy time minus Redis, the worker and this bench.
    pub other_cpus: f64,
    pub commands: Vec<(String, u64, u64)>,
    pub profile: Vec<(String, u64, u64)>,
}

impl ThroughputResult {
    pub fn tasks_per_s(&self) -> f64 {
        let span = (self.worker.last_end_ns - self.worker.first_start_ns).max(1) as f64;
        self.worker.count as f64 / (span / 1e9)
    }

    pub fn redis_cpu_per_task(&self) -> f64 {
        self.redis_cpu_us / self.worker.count.max(1) as f64
    }

    pub fn redis_sys_per_task(&self) -> f64 {
        self.redis_sys_us / self.worker.count.max(1) as f64
    }

    pub fn worker_cpu_per_task(&self) -> f64 {
        self.worker.cpu_ms as f64 * 1000.0 / self.worker.count.max(1) as f64
    }

    /// Script calls (and blocking waits) the worker sent per task.
    pub fn round_trips_per_task(&self) -> f64 {
        let n: u64 = self
            .commands
            .iter()
            .filter(|(c, _, _)| is_client_call(c))
            .map(|(_, calls, _)| calls)
            .sum();
        n as f64 / self.worker.count.max(1) as f64
    }
}

/// One throughput run: N tasks enqueued, then one worker process of
/// `engine` until it has handled them all.
pub async fn run(
    env: &mut Env,
    engine: Engine,
    concurrency: usize,
    n: usize,
    profile: bool,
) -> anyhow::Result<ThroughputResult> {
    // Quiet before the enqueue: the backlog's wait is part of the latency.
    wait_quiet(env.quiet_wait).await;
    env.flush().await?;
    let client = Client::connect(&env.redis.url()).await?;
    let enqueue_per_s = enqueue_all(&client, n).await?;
    drop(client);
    if profile {
        slowlog_on(env, 30 * n + 10_000).await?;
    }
    let before = redis_snap(&mut env.admin).await?;
    let (busy0, self0, t0) = (machine_busy_ms(), self_cpu_ms(), Instant::now());
    let out = env
        .worker(engine, concurrency, n)
        .output()
        .await
        .context("run worker")?;
    let (busy1, self1, wall) = (machine_busy_ms(), self_cpu_ms(), t0.elapsed());
    let after = redis_snap(&mut env.admin).await?;
    if !out.status.success() {
        bail!(
            "{} worker exited with {}: {}",
            engine.name(),
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let worker = parse_summary(&out.stdout)?;
    let redis_cpu_us = after.cpu_us - before.cpu_us;
    let own_ms = (self1.0 + self1.1 - self0.0 - self0.1) as f64;
    let other_ms = busy1 - busy0 - redis_cpu_us / 1000.0 - worker.cpu_ms as f64 - own_ms;
    let other_cpus = (other_ms / wall.as_secs_f64() / 1000.0).max(0.0);
    let profile_groups = if profile {
        let g = slowlog_groups(&mut env.admin).await?;
        slowlog_off(env).await?;
        g
    } else {
        Vec::new()
    };
    // Every task must be finished in Redis, not only handled.
    let pending = env.llen(&keys::pending_key(QUEUE)).await?;
    let active = env.llen(&keys::active_key(QUEUE)).await?;
    let processed = env.get_i64(&keys::processed_total_key(QUEUE)).await?;
    if worker.count != n as i64 || pending != 0 || active != 0 || processed != n as i64 {
        bail!(
            "{} C={concurrency}: handled {}, pending {pending}, active {active}, processed {processed} (want {n})",
            engine.name(),
            worker.count
        );
    }
    Ok(ThroughputResult {
        engine,
        concurrency,
        enqueue_per_s,
        worker,
        redis_cpu_us,
        redis_sys_us: after.sys_us - before.sys_us,
        other_cpus,
        commands: command_delta(&before, &after),
        profile: profile_groups,
    })
}

/// The throughput tables: one row per run, then the commands per run and
/// the SLOWLOG profiles of `--profile` runs.
pub fn print(runs: &[ThroughputResult]) {
    println!("### Throughput\n");
    println!(
        "| engine | C | tasks/s | ours/Go | p50 enqueue→start | p99 enqueue→start | peak RSS | Redis CPU µs/task | of which kernel | worker CPU µs/task | script calls/task | enqueue rate (ours, before the run) | other load |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in runs {
        let go = runs
            .iter()
            .find(|g| g.engine == Engine::Go && g.concurrency == r.concurrency);
        let ratio = go.map_or("–".to_string(), |g| {
            format!("{:.2}×", r.tasks_per_s() / g.tasks_per_s())
        });
        println!(
            "| {} | {} | {:.0} | {} | {:.0} ms | {:.0} ms | {:.1} MiB | {:.1} | {:.1} | {:.1} | {:.2} | {:.0}/s | {:.2} CPU |",
            r.engine.name(),
            r.concurrency,
            r.tasks_per_s(),
            ratio,
            r.worker.p50_us as f64 / 1000.0,
            r.worker.p99_us as f64 / 1000.0,
            kb_to_mib(r.worker.max_rss_kb),
            r.redis_cpu_per_task(),
            r.redis_sys_per_task(),
            r.worker_cpu_per_task(),
            r.round_trips_per_task(),
            r.enqueue_per_s,
            r.other_cpus
        );
    }
    println!(
        "\nRedis commands per run (INFO commandstats delta, includes commands run inside scripts):\n"
    );
    println!("| engine | C | command | calls/task | usec/call | usec/task |");
    println!("|---|---:|---|---:|---:|---:|");
    for r in runs {
        let per = r.worker.count.max(1) as f64;
        for (cmd, calls, usec) in r.commands.iter().take(8) {
            println!(
                "| {} | {} | {cmd} | {:.3} | {:.2} | {:.2} |",
                r.engine.name(),
                r.concurrency,
                *calls as f64 / per,
                *usec as f64 / (*calls).max(1) as f64,
                *usec as f64 / per
            );
        }
    }
    for r in runs.iter().filter(|r| !r.profile.is_empty()) {
        print_profile(
            &format!("Profile: {} C={}", r.engine.name(), r.concurrency),
            &r.profile,
            r.worker.count.max(1) as usize,
        );
    }
}
