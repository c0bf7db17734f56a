//! The hidden scheduler mode (`bench schedule --redis URL --entries N
//! --for SECS`): our [`Scheduler`] with N entries on `@every 1s` (type
//! `bench:sched`, payload the entry's index, queue `default`) for SECS
//! seconds, then one JSON summary line with the keys of the Go peer's
//! `bench-schedule` (interop/cmd/asynq-peer/bench_schedule.go).
//!
//! Drift is measured on every fire as the Go peer does: "fire" when the
//! pre-enqueue hook runs, "enq" when the post-enqueue hook sees the
//! enqueue's result, each as the time past the whole second of the tick
//! (`@every 1s` ticks fall on whole seconds).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use asynqdeck::broker::Broker;
use asynqdeck::scheduler::{Scheduler, SchedulerOpts};
use asynqdeck::{EnqueueOptions, Task};
use serde_json::json;

use crate::QUEUE;
use crate::harness::{now_ns, percentile};
use crate::options::{flag, parse_flag};
use crate::sampling::{self_cpu_ms, vm_hwm_kb};

/// Drift samples (ns past the tick's second) and failed enqueues.
#[derive(Default)]
struct Samples {
    fire: Vec<i64>,
    enq: Vec<i64>,
    errors: usize,
}

fn since_second(ns: i64) -> i64 {
    ns.rem_euclid(1_000_000_000)
}

pub async fn main(args: &[String]) -> anyhow::Result<()> {
    let url = flag(args, "--redis").unwrap_or("redis://127.0.0.1:6379/0");
    let entries: usize = parse_flag(args, "--entries", 1000)?;
    let secs: u64 = parse_flag(args, "--for", 30)?;
    let samples = Arc::new(Mutex::new(Samples::default()));
    let (pre, post) = (samples.clone(), samples.clone());
    let scheduler = Scheduler::new(
        Broker::connect(url).await?,
        SchedulerOpts {
            pre_enqueue: Some(Arc::new(move |_, _| {
                let d = since_second(now_ns());
                pre.lock().unwrap().fire.push(d);
            })),
            post_enqueue: Some(Arc::new(move |r| {
                let d = since_second(now_ns());
                let mut s = post.lock().unwrap();
                match r {
                    Ok(_) => s.enq.push(d),
                    Err(_) => s.errors += 1,
                }
            })),
            ..SchedulerOpts::default()
        },
    );
    for i in 0..entries {
        scheduler.register(
            "@every 1s",
            Task::new("bench:sched", i.to_string().into_bytes()),
            EnqueueOptions::new().queue(QUEUE),
        )?;
    }
    let start = now_ns();
    scheduler.start().await?;
    tokio::time::sleep(Duration::from_secs(secs)).await;
    let stop = now_ns();
    scheduler.shutdown().await;

    let mut s = samples.lock().unwrap();
    s.fire.sort_unstable();
    s.enq.sort_unstable();
    let us = |v: &[i64], p| percentile(v, p) / 1000;
    let (user_ms, sys_ms) = self_cpu_ms();
    println!(
        "{}",
        json!({
            "entries": entries,
            "ticks": stop.div_euclid(1_000_000_000) - start.div_euclid(1_000_000_000),
            "fires": s.fire.len(),
            "errors": s.errors,
            "fire_p50_us": us(&s.fire, 50),
            "fire_p99_us": us(&s.fire, 99),
            "fire_max_us": us(&s.fire, 100),
            "enq_p50_us": us(&s.enq, 50),
            "enq_p99_us": us(&s.enq, 99),
            "enq_max_us": us(&s.enq, 100),
            "start_ns": start,
            "stop_ns": stop,
            "max_rss_kb": vm_hwm_kb(),
            "cpu_user_ms": user_ms,
            "cpu_sys_ms": sys_ms,
        })
    );
    Ok(())
}
