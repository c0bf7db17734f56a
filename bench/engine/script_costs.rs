//! The script cost model: Redis execution time of our dequeue and done
//! scripts by batch size (1 to 100 tasks per call).

use asynqdeck::Client;
use asynqdeck::broker::Broker;

use crate::QUEUE;
use crate::harness::{Env, enqueue_all};
use crate::redis_stats::{RedisSnap, redis_snap};

/// Redis execution time of our dequeue and done scripts at one batch size.
pub struct ScriptCost {
    pub batch: usize,
    pub dequeue_us_per_call: f64,
    pub done_us_per_call: f64,
}

/// Execution time (INFO commandstats `evalsha` usec, no SLOWLOG) of
/// `Broker::dequeue` and `Broker::done` at several batch sizes, called
/// directly in rounds of 200 tasks so the active list stays as short as in
/// a running server.
pub async fn run(env: &mut Env, n: usize) -> anyhow::Result<Vec<ScriptCost>> {
    const ROUND: usize = 200;
    let mut out = Vec::new();
    for batch in [1, 5, 10, 50, 100] {
        env.flush().await?;
        let client = Client::connect(&env.redis.url()).await?;
        enqueue_all(&client, n).await?;
        let broker = Broker::connect(&env.redis.url()).await?;
        let evalsha = |a: &RedisSnap, b: &RedisSnap| {
            let (c0, u0) = a.commands.get("evalsha").copied().unwrap_or((0, 0));
            let (c1, u1) = b.commands.get("evalsha").copied().unwrap_or((0, 0));
            (c1 - c0, u1 - u0)
        };
        let (mut deq, mut done) = ((0u64, 0u64), (0u64, 0u64));
        let mut left = n;
        while left > 0 {
            let round = left.min(ROUND);
            let lease = chrono::Utc::now() + chrono::Duration::seconds(60);
            let s0 = redis_snap(&mut env.admin).await?;
            let mut leased = Vec::with_capacity(round);
            while leased.len() < round {
                let want = batch.min(round - leased.len());
                for t in broker.dequeue(QUEUE, want, lease).await? {
                    leased.push(t.map_err(|(id, e)| anyhow::anyhow!("task {id}: {e}"))?);
                }
            }
            let s1 = redis_snap(&mut env.admin).await?;
            for chunk in leased.chunks(batch) {
                let msgs: Vec<_> = chunk.iter().map(|t| &t.msg).collect();
                broker.done(QUEUE, &msgs).await?;
            }
            let s2 = redis_snap(&mut env.admin).await?;
            let (c, u) = evalsha(&s0, &s1);
            deq = (deq.0 + c, deq.1 + u);
            let (c, u) = evalsha(&s1, &s2);
            done = (done.0 + c, done.1 + u);
            left -= round;
        }
        out.push(ScriptCost {
            batch,
            dequeue_us_per_call: deq.1 as f64 / deq.0.max(1) as f64,
            done_us_per_call: done.1 as f64 / done.0.max(1) as f64,
        });
    }
    Ok(out)
}

/// The script cost table, one row per batch size.
pub fn print(costs: &[ScriptCost]) {
    println!(
        "\n### Our worker scripts: Redis execution time by batch size (INFO commandstats, 10,000 tasks, rounds of 200)\n"
    );
    println!(
        "| tasks per call | dequeue µs/call | dequeue µs/task | done µs/call | done µs/task |"
    );
    println!("|---:|---:|---:|---:|---:|");
    for c in costs {
        println!(
            "| {} | {:.1} | {:.2} | {:.1} | {:.2} |",
            c.batch,
            c.dequeue_us_per_call,
            c.dequeue_us_per_call / c.batch as f64,
            c.done_us_per_call,
            c.done_us_per_call / c.batch as f64
        );
    }
}
