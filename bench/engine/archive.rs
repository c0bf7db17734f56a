//! Archive cost: 10,000 archived tasks (with hashes) are seeded, then
//! `--archive-ops` × (enqueue, dequeue, `Broker::archive`); client µs per
//! archive call and Redis CPU per iteration, against the same passes on an
//! empty archive and without the archive call; a last pass with SLOWLOG on
//! gives the Redis execution time of each script.

use std::time::Instant;

use anyhow::Context;
use asynqdeck::broker::{Broker, keys};
use asynqdeck::{Client, EnqueueOptions, Task};
use redis::aio::MultiplexedConnection;

use crate::QUEUE;
use crate::harness::{Env, percentile};
use crate::redis_stats::{RedisSnap, redis_snap, slowlog_groups, slowlog_off, slowlog_on};
use crate::report::print_profile;
use crate::sampling::wait_quiet;

pub struct ArchiveResult {
    pub ops: usize,
    /// Pass with archive calls.
    pub with: ArchivePass,
    /// The same pass on an empty archive (nothing to trim).
    pub empty: ArchivePass,
    /// The same pass without archive calls (tasks stay leased).
    pub without: ArchivePass,
    /// SLOWLOG groups of a shorter pass with archive calls.
    pub profile: Vec<(String, u64, u64)>,
    pub profile_ops: usize,
    pub archived_after: i64,
}

pub struct ArchivePass {
    /// Client-side duration of each archive call, sorted.
    pub archive_us: Vec<i64>,
    /// Wall time per iteration.
    pub wall_us: f64,
    /// Redis CPU per iteration (INFO cpu).
    pub cpu_us: f64,
    /// Redis script execution per iteration (INFO commandstats evalsha usec).
    pub script_us: f64,
}

/// Seeds `n` archived tasks (zset member + hash) in one script call.
pub async fn seed_archive(conn: &mut MultiplexedConnection, n: usize) -> anyhow::Result<()> {
    let script = redis::Script::new(
        r#"for i = 1, tonumber(ARGV[1]) do
             local id = "seeded-" .. i
             redis.call("ZADD", KEYS[1], tonumber(ARGV[2]) + i, id)
             redis.call("HSET", KEYS[2] .. id, "msg", "x", "state", "archived")
           end
           return 1"#,
    );
    let oldest = chrono::Utc::now().timestamp() - 86_400 - n as i64;
    let _: i64 = script
        .key(keys::archived_key(QUEUE))
        .key(keys::task_key_prefix(QUEUE))
        .arg(n)
        .arg(oldest)
        .invoke_async(conn)
        .await?;
    Ok(())
}

/// One pass of `ops` × (enqueue, dequeue, archive if `archive`) on an
/// archive seeded with `seed` tasks; with `slowlog` also the SLOWLOG groups.
pub async fn archive_pass(
    env: &mut Env,
    ops: usize,
    seed: usize,
    archive: bool,
    slowlog: bool,
) -> anyhow::Result<(ArchivePass, Vec<(String, u64, u64)>)> {
    env.flush().await?;
    if seed > 0 {
        seed_archive(&mut env.admin, seed).await?;
    }
    let broker = Broker::connect(&env.redis.url()).await?;
    let client = Client::from_broker(broker.clone());
    if slowlog {
        slowlog_on(env, 30 * ops + 1_000).await?;
    }
    wait_quiet(env.quiet_wait).await;
    let before = redis_snap(&mut env.admin).await?;
    let mut archive_us = Vec::with_capacity(ops);
    let t0 = Instant::now();
    for _ in 0..ops {
        let task = Task::new("bench:fail", b"x".to_vec());
        client.enqueue(&task, EnqueueOptions::new()).await?;
        let lease = chrono::Utc::now() + chrono::Duration::seconds(30);
        let leased = broker
            .dequeue(QUEUE, 1, lease)
            .await?
            .pop()
            .context("dequeue returned nothing")?
            .map_err(|(id, e)| anyhow::anyhow!("task {id}: {e}"))?;
        if archive {
            let t = Instant::now();
            broker.archive(&leased, "bench failure").await?;
            archive_us.push(t.elapsed().as_micros() as i64);
        }
    }
    let wall_us = t0.elapsed().as_secs_f64() * 1e6 / ops as f64;
    let after = redis_snap(&mut env.admin).await?;
    let groups = if slowlog {
        let g = slowlog_groups(&mut env.admin).await?;
        slowlog_off(env).await?;
        g
    } else {
        Vec::new()
    };
    let evalsha_usec = |s: &RedisSnap| s.commands.get("evalsha").map_or(0, |c| c.1);
    archive_us.sort_unstable();
    Ok((
        ArchivePass {
            archive_us,
            wall_us,
            cpu_us: (after.cpu_us - before.cpu_us) / ops as f64,
            script_us: (evalsha_usec(&after) - evalsha_usec(&before)) as f64 / ops as f64,
        },
        groups,
    ))
}

/// The archive measurement: three passes of `ops` iterations (full archive,
/// empty archive, no archive call) and a shorter one under SLOWLOG.
pub async fn run(env: &mut Env, ops: usize) -> anyhow::Result<ArchiveResult> {
    const FULL: usize = 10_000;
    let (with, _) = archive_pass(env, ops, FULL, true, false).await?;
    let archived_after: i64 = redis::cmd("ZCARD")
        .arg(keys::archived_key(QUEUE))
        .query_async(&mut env.admin)
        .await?;
    // Fewer than 10,000 archived tasks in total: nothing is ever trimmed.
    let (empty, _) = archive_pass(env, ops.min(9_000), 0, true, false).await?;
    let (without, _) = archive_pass(env, ops, FULL, false, false).await?;
    // SLOWLOG keeps every command (script-issued ones too) in memory.
    let profile_ops = ops.min(5_000);
    let (_, profile) = archive_pass(env, profile_ops, FULL, true, true).await?;
    Ok(ArchiveResult {
        ops,
        with,
        empty,
        without,
        profile,
        profile_ops,
        archived_after,
    })
}

/// The archive section: round-trip figures, the per-pass table and the
/// split by script.
pub fn print(a: &ArchiveResult) {
    let w = &a.with;
    let mean = w.archive_us.iter().sum::<i64>() as f64 / a.ops.max(1) as f64;
    println!(
        "\n### Archive writes into a full archive ({} × enqueue, dequeue, archive; 10,000 seeded)\n",
        a.ops
    );
    println!(
        "- `Broker::archive` round trip: mean {mean:.1} µs, p50 {} µs, p99 {} µs; archive size after: {}",
        percentile(&w.archive_us, 50),
        percentile(&w.archive_us, 99),
        a.archived_after
    );
    println!(
        "\n| pass | wall µs/iteration | Redis CPU µs/iteration | script execution µs/iteration |"
    );
    println!("|---|---:|---:|---:|");
    for (name, p) in [
        ("enqueue + dequeue + archive (full archive)", &a.with),
        (
            "enqueue + dequeue + archive (empty archive, ≤ 9,000 iterations: no trim)",
            &a.empty,
        ),
        (
            "enqueue + dequeue (full archive, no archive call)",
            &a.without,
        ),
    ] {
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} |",
            p.wall_us, p.cpu_us, p.script_us
        );
    }
    println!(
        "| **difference: the archive call into the full archive** | **{:.1}** | **{:.1}** | **{:.1}** |",
        a.with.wall_us - a.without.wall_us,
        a.with.cpu_us - a.without.cpu_us,
        a.with.script_us - a.without.script_us
    );
    print_profile(
        &format!(
            "Split by script ({} iterations with SLOWLOG at 0 µs; logging every script-issued command inflates these times):",
            a.profile_ops
        ),
        &a.profile,
        a.profile_ops,
    );
}
