//! The hidden worker mode (`bench worker --redis URL --concurrency C
//! --count N`): our engine, one process per run, with a no-op handler that
//! records each task's enqueue-to-start latency, then one JSON summary line.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use asynqdeck::Task;
use asynqdeck::server::{Config, Server, TaskContext, handler_fn};
use serde_json::json;

use crate::QUEUE;
use crate::harness::{now_ns, percentile};
use crate::options::{flag, parse_flag};
use crate::sampling::{self_cpu_ms, vm_hwm_kb};

/// What the no-op handler records: one latency slot per task, preallocated.
pub struct Recorder {
    pub latencies: Box<[AtomicI64]>,
    pub started: AtomicUsize,
    pub ended: AtomicUsize,
    pub first_start: AtomicI64,
    pub last_end: AtomicI64,
    pub done: tokio::sync::Notify,
}

impl Recorder {
    pub fn new(count: usize) -> Self {
        Recorder {
            latencies: (0..count).map(|_| AtomicI64::new(0)).collect(),
            started: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            first_start: AtomicI64::new(0),
            last_end: AtomicI64::new(0),
            done: tokio::sync::Notify::new(),
        }
    }

    pub fn record(&self, payload: &[u8]) {
        let now = now_ns();
        let _ = self
            .first_start
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        let i = self.started.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = self.latencies.get(i)
            && let Some(enq) = std::str::from_utf8(payload)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
        {
            slot.store(now - enq, Ordering::Relaxed);
        }
        self.last_end.fetch_max(now_ns(), Ordering::Relaxed);
        if self.ended.fetch_add(1, Ordering::AcqRel) + 1 == self.latencies.len() {
            self.done.notify_one();
        }
    }
}

/// Runs our [`Server`] with a no-op handler until `--count` tasks were
/// handled, then shuts it down and prints one JSON summary line (the same
/// shape as `asynq-peer bench-work`).
pub async fn main(args: &[String]) -> anyhow::Result<()> {
    let url = flag(args, "--redis").context("worker: --redis URL is required")?;
    let concurrency: usize = parse_flag(args, "--concurrency", 10)?;
    let count: usize = parse_flag(args, "--count", 0)?;
    if count == 0 {
        bail!("worker: --count must be > 0");
    }
    let rec = Arc::new(Recorder::new(count));
    let r = rec.clone();
    let handler = handler_fn(move |_ctx: TaskContext, task: Task| {
        r.record(task.payload());
        async { Ok(()) }
    });
    let config = Config {
        concurrency,
        queues: [(QUEUE.to_string(), 1)].into(),
        fetch_spin: std::env::var("BENCH_FETCH_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_micros),
        ..Config::default()
    };
    let server = Server::connect(url, config).await?;
    let r = rec.clone();
    server
        .run_until(handler, async move { r.done.notified().await })
        .await?;

    let got = rec.started.load(Ordering::Relaxed).min(count);
    let mut lat: Vec<i64> = rec.latencies[..got]
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    lat.sort_unstable();
    let (user_ms, sys_ms) = self_cpu_ms();
    let line = json!({
        "count": rec.ended.load(Ordering::Relaxed),
        "first_start_ns": rec.first_start.load(Ordering::Relaxed),
        "last_end_ns": rec.last_end.load(Ordering::Relaxed),
        "p50_us": percentile(&lat, 50) / 1000,
        "p99_us": percentile(&lat, 99) / 1000,
        "max_us": lat.last().copied().unwrap_or(0) / 1000,
        "over_100ms": lat.iter().filter(|&&l| l > 100_000_000).count(),
        "max_rss_kb": vm_hwm_kb(),
        "cpu_user_ms": user_ms,
        "cpu_sys_ms": sys_ms,
    });
    println!("{line}");
    Ok(())
}
