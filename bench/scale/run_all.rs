//! Scenario 3: run every one of `--retry` (200,000) retry tasks of queue
//! `q` (due in a day, so no forwarder moves them meanwhile), ours and
//! asynqmon's in turn, each on freshly seeded data (see `bulk.rs`).
//! asynqmon's route is `POST /api/queues/q/retry_tasks:run_all`; ours is
//! `POST /api/jobs` `{"queue":"q","state":"retry","action":"run"}` when it
//! answers 202, else that same asynqmon route on ours. "Empty" is the retry
//! set's; the tasks end up pending.

use std::time::Instant;

use crate::Env;
use crate::bulk::{self, Action, QUEUE};
use crate::seed;

pub const ACTION: Action = Action {
    state: "retry",
    action: "run",
    method: "POST",
    path: "/api/queues/q/retry_tasks:run_all",
};

pub async fn run(env: &mut Env, n: usize) -> anyhow::Result<Vec<bulk::Run>> {
    let mut runs = Vec::new();
    for side in env.sides() {
        seed::flush(&mut env.admin).await?;
        eprintln!("bench_scale: run_all, seeding {n} retry tasks");
        let t = Instant::now();
        seed::one_queue(&mut env.admin, QUEUE, "retry", n).await?;
        eprintln!(
            "bench_scale:   seeded in {:.1} s; {} runs them",
            t.elapsed().as_secs_f64(),
            side.name()
        );
        env.quiet().await;
        runs.push(bulk::run(env, side, &ACTION).await?);
    }
    Ok(runs)
}
