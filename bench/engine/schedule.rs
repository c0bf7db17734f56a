//! Scheduler cost (issue 16 item 8): 1,000 entries on `@every 1s` run by
//! one scheduler process of each engine (Go: `asynq-peer bench-schedule`;
//! ours: this binary's hidden `schedule` mode, `schedule_mode.rs`) for
//! `--schedule-secs` seconds on the flushed private redis-server.
//!
//! Measured: the drift of every fire past its tick's whole second (at the
//! pre-enqueue hook and when the enqueue returned; the process reports
//! percentiles), fires against entries × ticks, and what Redis did per
//! tick in a window of whole ticks in the steady state (INFO commandstats
//! calls and µs, INFO cpu), from 4.5 s after the start to 10·k s later, so
//! it holds the same number of 10-s heartbeats for both engines.

use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::harness::{Env, now_ns};
use crate::options::Engine;
use crate::redis_stats::{command_delta, redis_snap};
use crate::report::kb_to_mib;
use crate::sampling::wait_quiet;

/// One engine's run.
pub struct ScheduleResult {
    pub engine: Engine,
    /// The scheduler process's summary line.
    pub summary: Value,
    /// Ticks in the Redis window.
    pub window_ticks: u64,
    /// (command, calls, µs) over the window.
    pub commands: Vec<(String, u64, u64)>,
    /// Redis main-process CPU over the window, µs.
    pub redis_cpu_us: f64,
    /// Pending tasks at the end (every successful fire enqueued one).
    pub pending: i64,
}

/// Sleeps until `offset_ms` past the next whole second.
async fn sleep_to_second_plus(offset_ms: i64) {
    let now = now_ns();
    let next = (now.div_euclid(1_000_000_000) + 1) * 1_000_000_000 + offset_ms * 1_000_000;
    tokio::time::sleep(Duration::from_nanos((next - now) as u64)).await;
}

pub async fn run(
    env: &mut Env,
    engine: Engine,
    entries: usize,
    secs: u64,
) -> anyhow::Result<ScheduleResult> {
    if secs < 20 {
        bail!("--schedule-secs must be at least 20");
    }
    env.flush().await?;
    wait_quiet(env.quiet_wait).await;
    let mut cmd = match engine {
        Engine::Go => {
            let mut c = tokio::process::Command::new(&env.go_peer);
            c.args(["--redis", &env.redis.addr(), "bench-schedule"])
                .args(["--for", &format!("{secs}s")]);
            c
        }
        Engine::Ours => {
            let mut c = tokio::process::Command::new(std::env::current_exe()?);
            c.args(["schedule", "--redis", &env.redis.url()])
                .args(["--for", &secs.to_string()]);
            c
        }
    };
    cmd.args(["--entries", &entries.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .kill_on_drop(true);
    let child = cmd.spawn().context("spawn the scheduler process")?;
    // Steady state: from 4.5 s after the start, a window of whole tens of
    // ticks ending at least 3 s before the process stops.
    tokio::time::sleep(Duration::from_secs(4)).await;
    sleep_to_second_plus(500).await;
    let window_ticks = (secs - 8) / 10 * 10;
    let before = redis_snap(&mut env.admin).await?;
    tokio::time::sleep(Duration::from_secs(window_ticks)).await;
    let after = redis_snap(&mut env.admin).await?;
    let out = tokio::time::timeout(Duration::from_secs(secs + 120), child.wait_with_output())
        .await
        .context("the scheduler process did not end")??;
    if !out.status.success() {
        bail!("{} scheduler exited with {}", engine.name(), out.status);
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .rfind(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("scheduler printed no JSON: {text}"))?;
    let summary: Value = serde_json::from_str(line)?;
    if let Some(err) = summary.get("error") {
        bail!("scheduler failed: {err}");
    }
    let pending = env
        .llen(&asynqdeck::broker::keys::pending_key(crate::QUEUE))
        .await?;
    Ok(ScheduleResult {
        engine,
        summary,
        window_ticks,
        commands: command_delta(&before, &after),
        redis_cpu_us: after.cpu_us - before.cpu_us,
        pending,
    })
}

/// The scheduler tables: drift and cost per engine, then each engine's
/// commands per tick.
pub fn print(results: &[ScheduleResult], entries: usize, secs: u64) {
    println!("\n### Scheduler: {entries} entries on `@every 1s`, {secs} s per engine\n");
    println!(
        "| engine | fires / entries × ticks | errors | fire drift p50 / p99 / max | enqueued drift p50 / p99 / max | Redis calls / tick | Redis µs / tick (commandstats) | Redis CPU / tick | scheduler CPU | peak RSS |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in results {
        let s = &r.summary;
        let i = |k: &str| s.get(k).and_then(Value::as_i64).unwrap_or(0);
        let ms = |k: &str| i(k) as f64 / 1000.0;
        let ticks = r.window_ticks.max(1) as f64;
        let calls: u64 = r.commands.iter().map(|c| c.1).sum();
        let usec: u64 = r.commands.iter().map(|c| c.2).sum();
        let run_s = (i("stop_ns") - i("start_ns")) as f64 / 1e9;
        println!(
            "| {} | {} / {} ({} pending) | {} | {:.1} / {:.1} / {:.1} ms | {:.1} / {:.1} / {:.1} ms | {:.0} | {:.0} | {:.1} ms | {:.0} % of a CPU | {:.1} MiB |",
            r.engine.name(),
            i("fires"),
            i("entries") * i("ticks"),
            r.pending,
            i("errors"),
            ms("fire_p50_us"),
            ms("fire_p99_us"),
            ms("fire_max_us"),
            ms("enq_p50_us"),
            ms("enq_p99_us"),
            ms("enq_max_us"),
            calls as f64 / ticks,
            usec as f64 / ticks,
            r.redis_cpu_us / ticks / 1000.0,
            (i("cpu_user_ms") + i("cpu_sys_ms")) as f64 / 10.0 / run_s.max(1.0),
            kb_to_mib(i("max_rss_kb")),
        );
    }
    for r in results {
        println!(
            "\n{}: commands per tick ({} ticks)\n",
            r.engine.name(),
            r.window_ticks
        );
        println!("| command | calls / tick | Redis µs / tick | µs / call |");
        println!("|---|---:|---:|---:|");
        let ticks = r.window_ticks.max(1) as f64;
        for (name, calls, usec) in &r.commands {
            println!(
                "| `{name}` | {:.1} | {:.0} | {:.2} |",
                *calls as f64 / ticks,
                *usec as f64 / ticks,
                *usec as f64 / (*calls).max(1) as f64
            );
        }
    }
}
