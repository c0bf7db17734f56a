//! The hidden worker mode (`bench_cluster worker --redis URL --queues
//! q1,q2,... --concurrency C --count N`): our [`Server`] on every queue
//! (priority 1 each, as the Go peer's `--queues q=1,...`), a no-op handler
//! that counts, then one JSON summary line of the shape `asynq-peer
//! bench-work` prints (count, first start, last end, CPU).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use anyhow::{Context, bail};
use asynqdeck::Task;
use asynqdeck::server::{Config, Server, TaskContext, handler_fn};
use serde_json::json;

use crate::flag;
use crate::sampling::{self_cpu_ms, vm_hwm_kb};

/// Unix time in nanoseconds (wall clock, shared with the Go peer).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

#[derive(Default)]
struct Counter {
    ended: AtomicUsize,
    first_start: AtomicI64,
    last_end: AtomicI64,
    done: tokio::sync::Notify,
}

pub async fn main(args: &[String]) -> anyhow::Result<()> {
    let url = flag(args, "--redis").context("worker: --redis URL is required")?;
    let queues: Vec<String> = flag(args, "--queues")
        .context("worker: --queues is required")?
        .split(',')
        .map(str::to_string)
        .collect();
    let concurrency: usize = flag(args, "--concurrency").unwrap_or("10").parse()?;
    let count: usize = flag(args, "--count").unwrap_or("0").parse()?;
    if count == 0 {
        bail!("worker: --count must be > 0");
    }
    let c = Arc::new(Counter::default());
    let r = c.clone();
    let handler = handler_fn(move |_ctx: TaskContext, _task: Task| {
        let now = now_ns();
        let _ = r
            .first_start
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        r.last_end.fetch_max(now_ns(), Ordering::Relaxed);
        if r.ended.fetch_add(1, Ordering::AcqRel) + 1 == count {
            r.done.notify_one();
        }
        async { Ok(()) }
    });
    let config = Config {
        concurrency,
        queues: queues.iter().map(|q| (q.clone(), 1)).collect(),
        ..Config::default()
    };
    let server = Server::connect(url, config).await?;
    let r = c.clone();
    server
        .run_until(handler, async move { r.done.notified().await })
        .await?;
    let (user_ms, sys_ms) = self_cpu_ms();
    let line = json!({
        "count": c.ended.load(Ordering::Relaxed),
        "first_start_ns": c.first_start.load(Ordering::Relaxed),
        "last_end_ns": c.last_end.load(Ordering::Relaxed),
        "max_rss_kb": vm_hwm_kb(),
        "cpu_user_ms": user_ms,
        "cpu_sys_ms": sys_ms,
    });
    println!("{line}");
    Ok(())
}
