//! Scenario 1: N queues × 3 pending tasks. Per queue count:
//! - Redis alone: its load over the idle window with nothing connected
//!   but the bench (serverCron), the floor of every other row;
//! - each dashboard started fresh, left 10 s to start up, then its Redis
//!   load over the idle window with no viewer (`--idle-secs`, 20 s);
//! - each dashboard started fresh again: the first request after start
//!   (cold), then up to `--warm` (20) more, each on a new connection, of
//!   the same path, their median (warm; sampling stops after 60 s); ours
//!   `/` (the overview page) and `/api/queues` (its asynqmon-compatible
//!   JSON), asynqmon `/api/queues` (what its UI polls); then the process's
//!   VmRSS. A warm sample is taken only if, at the pace of the last
//!   request, it ends within the 60 s.

use std::time::{Duration, Instant};

use crate::Env;
use crate::http::{self, median_ms};
use crate::procs::{Dashboard, Side};
use crate::redis_stats::{Load, idle_load};
use crate::seed;

/// Pending tasks per queue.
const PER_QUEUE: usize = 3;
/// Time a fresh dashboard gets before its idle window.
const START_UP: Duration = Duration::from_secs(10);
/// Most time spent on warm samples of one path.
const WARM_BUDGET: Duration = Duration::from_secs(60);

/// One view's figures.
pub struct View {
    pub path: &'static str,
    pub status: u16,
    pub bytes: usize,
    pub cold_ms: f64,
    pub warm_ms: f64,
    pub warm_n: usize,
}

/// One dashboard at one queue count.
pub struct SideRun {
    pub side: Side,
    pub idle: Load,
    pub views: Vec<View>,
    pub rss_kb: u64,
}

/// Everything measured at one queue count.
pub struct Run {
    pub queues: usize,
    pub seed_s: f64,
    pub redis_alone: Load,
    pub sides: Vec<SideRun>,
}

pub async fn run(env: &mut Env, queues: usize) -> anyhow::Result<Run> {
    seed::flush(&mut env.admin).await?;
    eprintln!("bench_scale: overview, seeding {queues} queues × {PER_QUEUE} pending");
    let t = Instant::now();
    seed::many_queues(&mut env.admin, queues, PER_QUEUE).await?;
    let seed_s = t.elapsed().as_secs_f64();
    env.quiet().await;
    let redis_alone = idle_load(&mut env.admin, env.opts.idle).await?;
    let mut sides = Vec::new();
    for side in env.sides() {
        eprintln!(
            "bench_scale: overview, {queues} queues, {} idle",
            side.name()
        );
        let d = Dashboard::start(&env.tools, side, env.port).await?;
        tokio::time::sleep(START_UP).await;
        env.quiet().await;
        let idle = idle_load(&mut env.admin, env.opts.idle).await?;
        d.stop().await;

        eprintln!(
            "bench_scale: overview, {queues} queues, {} views",
            side.name()
        );
        let d = Dashboard::start(&env.tools, side, env.port).await?;
        let paths: &[&'static str] = match side {
            Side::Ours => &["/", "/api/queues"],
            Side::Asynqmon => &["/api/queues"],
        };
        let mut views = Vec::new();
        for &path in paths {
            views.push(view(&d, path, env.opts.warm).await);
        }
        let rss_kb = d.rss_kb();
        d.stop().await;
        sides.push(SideRun {
            side,
            idle,
            views,
            rss_kb,
        });
    }
    Ok(Run {
        queues,
        seed_s,
        redis_alone,
        sides,
    })
}

/// The cold request of `path`, then up to `warm` more; a failed request
/// (timeout, reset) shows as status 0.
async fn view(d: &Dashboard, path: &'static str, warm: usize) -> View {
    let cold = http::get(&d.addr, path).await;
    let (status, bytes, cold_ms) = match &cold {
        Ok(r) => (r.status, r.body.len(), r.ms()),
        Err(e) => {
            eprintln!("bench_scale:   {path}: {e:#}");
            (0, 0, f64::NAN)
        }
    };
    let mut times = Vec::new();
    let start = Instant::now();
    // The next request is expected to take as long as the last one: stop
    // before it would end past the budget (a cold view of minutes gets no
    // warm samples).
    let mut last = cold.as_ref().map_or(WARM_BUDGET, |r| r.took);
    while cold.is_ok() && times.len() < warm && start.elapsed() + last < WARM_BUDGET {
        match http::get(&d.addr, path).await {
            Ok(r) => {
                last = r.took;
                times.push(r.took);
            }
            Err(e) => {
                eprintln!("bench_scale:   {path} warm: {e:#}");
                break;
            }
        }
    }
    View {
        path,
        status,
        bytes,
        cold_ms,
        warm_ms: median_ms(&times),
        warm_n: times.len(),
    }
}

pub fn print(runs: &[Run], idle: Duration) {
    println!(
        "### 1. Many queues × {PER_QUEUE} pending tasks: idle Redis cost, overview, RSS\n\n\
         Idle: Redis load over {} s with no viewer, the dashboard started {} s before \
         (\"net\" = less Redis alone). Views: cold = first request after start; warm = median \
         of the next ones (n). RSS = VmRSS after the views.\n",
        idle.as_secs(),
        START_UP.as_secs()
    );
    println!(
        "| queues | process | idle Redis CPU, % of a core (net) | idle commands/s | EVALSHA/s | top commands | view | status | bytes | cold ms | warm p50 ms (n) | RSS MB |"
    );
    println!("|---:|---|---:|---:|---:|---|---|---:|---:|---:|---:|---:|");
    for r in runs {
        let a = &r.redis_alone;
        println!(
            "| {} | redis-server alone (seeded in {:.1} s) | {:.2} | {:.1} | {:.1} | {} | | | | | | |",
            r.queues,
            r.seed_s,
            a.cpu_pct,
            a.commands_per_s,
            a.scripts_per_s,
            a.top_text()
        );
        for s in &r.sides {
            for (i, v) in s.views.iter().enumerate() {
                let idle = if i == 0 {
                    format!(
                        "{:.2} ({:+.2}) | {:.1} | {:.1} | {}",
                        s.idle.cpu_pct,
                        s.idle.cpu_pct - a.cpu_pct,
                        s.idle.commands_per_s,
                        s.idle.scripts_per_s,
                        s.idle.top_text()
                    )
                } else {
                    " | | | ".into()
                };
                let rss = if i == 0 {
                    format!("{:.1}", s.rss_kb as f64 / 1024.0)
                } else {
                    String::new()
                };
                let warm = if v.warm_n == 0 {
                    "— (0)".to_string()
                } else {
                    format!("{:.2} ({})", v.warm_ms, v.warm_n)
                };
                println!(
                    "| {} | {} | {idle} | `{}` | {} | {} | {:.1} | {warm} | {rss} |",
                    r.queues,
                    s.side.name(),
                    v.path,
                    v.status,
                    v.bytes,
                    v.cold_ms,
                );
            }
        }
    }
    let busy = runs
        .iter()
        .flat_map(|r| std::iter::once(&r.redis_alone).chain(r.sides.iter().map(|s| &s.idle)))
        .map(|l| l.machine_pct)
        .fold(0.0, f64::max);
    println!(
        "\nMachine busy during the idle windows: at most {busy:.0} % of a core (all processes).\n"
    );
}
