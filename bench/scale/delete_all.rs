//! Scenario 2: delete every one of `--tasks` (1,000,000) pending tasks of
//! queue `q`, ours and asynqmon's in turn, each on freshly seeded data (see
//! `bulk.rs` for the run: answer, time until empty, SLOWLOG ≥ 10 ms, a Go
//! producer's enqueue latency meanwhile). asynqmon's route is `DELETE
//! /api/queues/q/pending_tasks:delete_all`; ours is `POST /api/jobs`
//! `{"queue":"q","state":"pending","action":"delete"}` when it answers 202,
//! else that same asynqmon route on ours.

use std::time::Instant;

use crate::Env;
use crate::bulk::{self, Action, QUEUE};
use crate::seed;

pub const ACTION: Action = Action {
    state: "pending",
    action: "delete",
    method: "DELETE",
    path: "/api/queues/q/pending_tasks:delete_all",
};

pub async fn run(env: &mut Env, n: usize) -> anyhow::Result<Vec<bulk::Run>> {
    let mut runs = Vec::new();
    for side in env.sides() {
        seed::flush(&mut env.admin).await?;
        eprintln!("bench_scale: delete_all, seeding {n} pending tasks");
        let t = Instant::now();
        seed::one_queue(&mut env.admin, QUEUE, "pending", n).await?;
        eprintln!(
            "bench_scale:   seeded in {:.1} s; {} deletes",
            t.elapsed().as_secs_f64(),
            side.name()
        );
        env.quiet().await;
        runs.push(bulk::run(env, side, &ACTION).await?);
    }
    Ok(runs)
}
