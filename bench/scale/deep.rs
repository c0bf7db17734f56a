//! Scenario 4 (opt-in, `--deep N`): one queue `deep` with N pending tasks
//! plus N/10 retry and N/10 archived ones. Each dashboard in turn, started
//! fresh and given 5 s: every tab's first, middle and last page of 20 (ours
//! the tab page `/queues/deep/<state>?page=P&size=20`, asynqmon the JSON its
//! UI reads, `/api/queues/deep/<state>_tasks?page=P&page_size=20`) and the
//! queue statistics (`/api/queues/deep` on both): the first request's time
//! and the median of the next [`SAMPLES`].

use std::time::{Duration, Instant};

use crate::Env;
use crate::http::{self, median_ms};
use crate::procs::{Dashboard, Side};
use crate::seed;

const QUEUE: &str = "deep";
const PAGE: usize = 20;
/// Timed requests per read after the first.
pub const SAMPLES: usize = 5;

/// One read's figures on one dashboard.
#[derive(Clone, Copy)]
pub struct Timing {
    pub status: u16,
    pub first_ms: f64,
    pub median_ms: f64,
    /// A page read: whether the answer names a task of the tab (ids are
    /// `p-<i>`, `r-<i>`, `a-<i>`), so an empty page cannot pass for a
    /// fast one.
    pub has_rows: bool,
}

/// One read on both dashboards.
pub struct Read {
    pub what: String,
    pub ours: Option<Timing>,
    pub asynqmon: Option<Timing>,
}

pub struct Run {
    pub sizes: Vec<(&'static str, usize)>,
    pub seed_s: f64,
    pub used_memory: String,
    pub reads: Vec<Read>,
}

fn paths(side: Side, state: &str, page: usize) -> String {
    match side {
        Side::Ours => format!("/queues/{QUEUE}/{state}?page={page}&size={PAGE}"),
        Side::Asynqmon => {
            format!("/api/queues/{QUEUE}/{state}_tasks?page={page}&page_size={PAGE}")
        }
    }
}

/// The first request of `path`, then [`SAMPLES`] more; `marker` is the id
/// prefix a page of the tab must contain (None: not a page).
async fn timed(addr: &str, path: &str, marker: Option<String>) -> Option<Timing> {
    let first = match http::get(addr, path).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("bench_scale:   {path}: {e:#}");
            return Some(Timing {
                status: 0,
                first_ms: f64::NAN,
                median_ms: f64::NAN,
                has_rows: false,
            });
        }
    };
    let has_rows = marker.is_none_or(|m| first.body.windows(m.len()).any(|w| w == m.as_bytes()));
    let mut v = Vec::new();
    for _ in 0..SAMPLES {
        if let Ok(r) = http::get(addr, path).await {
            v.push(r.took);
        }
    }
    Some(Timing {
        status: first.status,
        first_ms: first.ms(),
        median_ms: median_ms(&v),
        has_rows,
    })
}

pub async fn run(env: &mut Env, n: usize) -> anyhow::Result<Run> {
    seed::flush(&mut env.admin).await?;
    let sizes = vec![("pending", n), ("retry", n / 10), ("archived", n / 10)];
    let t = Instant::now();
    for &(state, k) in &sizes {
        eprintln!("bench_scale: deep, seeding {k} {state} tasks");
        seed::one_queue(&mut env.admin, QUEUE, state, k).await?;
    }
    let seed_s = t.elapsed().as_secs_f64();
    let used_memory = crate::redis_stats::used_memory(&mut env.admin).await?;
    let mut reads: Vec<Read> = Vec::new();
    let mut labels = Vec::new();
    for &(state, k) in &sizes {
        let last = k.div_ceil(PAGE).max(1);
        for (which, page) in [("first", 1), ("middle", last.div_ceil(2)), ("last", last)] {
            labels.push((
                format!("{state} page {page} ({which})"),
                Some((state, page)),
            ));
        }
    }
    labels.push(("queue statistics `/api/queues/deep`".into(), None));
    for (what, _) in &labels {
        reads.push(Read {
            what: what.clone(),
            ours: None,
            asynqmon: None,
        });
    }
    for side in env.sides() {
        eprintln!("bench_scale: deep, {} reads", side.name());
        let d = Dashboard::start(&env.tools, side, env.port).await?;
        tokio::time::sleep(Duration::from_secs(5)).await;
        for (i, (_, target)) in labels.iter().enumerate() {
            let (path, marker) = match target {
                Some((state, page)) => {
                    (paths(side, state, *page), Some(format!("{}-", &state[..1])))
                }
                None => (format!("/api/queues/{QUEUE}"), None),
            };
            let got = timed(&d.addr, &path, marker).await;
            match side {
                Side::Ours => reads[i].ours = got,
                Side::Asynqmon => reads[i].asynqmon = got,
            }
        }
        d.stop().await;
    }
    Ok(Run {
        sizes,
        seed_s,
        used_memory,
        reads,
    })
}

pub fn print(r: &Run) {
    let sizes: Vec<String> = r.sizes.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "### 4. One deep queue: {} (seeded in {:.0} s, Redis used_memory {})\n\n\
         Pages of {PAGE}. Ours: the tab page (HTML); asynqmon: its JSON. First request, then the \
         median of {SAMPLES}; \"no rows\": the page named no task of the tab.\n",
        sizes.join(", "),
        r.seed_s,
        r.used_memory
    );
    println!(
        "| read | asynqdeck first ms | asynqdeck median ms | asynqmon first ms | asynqmon median ms |"
    );
    println!("|---|---:|---:|---:|---:|");
    let cell = |v: &Option<Timing>| match v {
        None => "— | —".to_string(),
        Some(t) => {
            let mut notes = Vec::new();
            if t.status != 200 {
                notes.push(format!("status {}", t.status));
            }
            if !t.has_rows {
                notes.push("no rows".to_string());
            }
            let notes = if notes.is_empty() {
                String::new()
            } else {
                format!(" ({})", notes.join(", "))
            };
            format!("{:.1}{notes} | {:.2}", t.first_ms, t.median_ms)
        }
    };
    for read in &r.reads {
        println!(
            "| {} | {} | {} |",
            read.what,
            cell(&read.ours),
            cell(&read.asynqmon)
        );
    }
    println!();
}
