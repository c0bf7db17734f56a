//! Issue 15 target 5: pages at any depth of a 10-million-task queue and the
//! queue's statistics, timed in process (the dashboard's router driven with
//! `tower::ServiceExt::oneshot`, no socket), on a Redis already seeded.
//!
//! ```text
//! cargo run --release --example bench_deep_tabs -- redis://127.0.0.1:7399 big [samples]
//! ```
//!
//! For each non-empty tab of the queue (sizes from `Inspector::queue_info`)
//! it times the htmx fragment `GET /queues/<q>/<tab>?page=N&size=20` and
//! the asynqmon route `GET /api/queues/<q>/<tab>_tasks?page=N&size=20` at
//! the first, middle and last page, then `Inspector::queue_info` (the
//! memory estimate cached after the first call), `GET /api/queues/<q>` and
//! the statistics read alone (`Inspector::queues_stats` of that queue). Each figure is the
//! median of `samples` (default 20) runs, in ms, Markdown on stdout. It
//! writes nothing to Redis.

use std::time::Instant;

use asynqdeck::web::{AppState, WebConfig, router};
use asynqdeck::{Inspector, TaskState};
use axum::body::Body;
use axum::http::Request;
use tower::ServiceExt;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

async fn time_get(app: &axum::Router, uri: &str, htmx: bool, samples: usize) -> (f64, u16) {
    let mut times = Vec::with_capacity(samples);
    let mut status = 0;
    for _ in 0..samples {
        let mut req = Request::get(uri);
        if htmx {
            req = req.header("HX-Request", "true");
        }
        let req = req.body(Body::empty()).unwrap();
        let t = Instant::now();
        let resp = app.clone().oneshot(req).await.unwrap();
        status = resp.status().as_u16();
        let _ = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .unwrap();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    (median(times), status)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let url = args.get(1).map_or("redis://127.0.0.1:7399", String::as_str);
    let queue = args.get(2).map_or("big", String::as_str);
    let samples: usize = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(20);
    let inspector = Inspector::connect(url).await?;
    let info = inspector.queue_info(queue).await?;
    let app = router(AppState::new(inspector.clone(), WebConfig::default()));
    // Warm the dashboard's snapshot (the tab's banner reads it).
    let _ = time_get(&app, &format!("/queues/{queue}/pending"), true, 1).await;
    println!("| Tab | Tasks | Page | HTML fragment ms | /api ms |");
    println!("|---|---:|---|---:|---:|");
    let tabs: [(TaskState, i64, &str); 6] = [
        (TaskState::Pending, info.pending, "pending"),
        (TaskState::Active, info.active, "active"),
        (TaskState::Scheduled, info.scheduled, "scheduled"),
        (TaskState::Retry, info.retry, "retry"),
        (TaskState::Archived, info.archived, "archived"),
        (TaskState::Completed, info.completed, "completed"),
    ];
    for (_, size, name) in tabs {
        if size <= 0 {
            continue;
        }
        let last = (size as usize).div_ceil(20);
        for (label, page) in [("first", 1), ("middle", last.div_ceil(2)), ("last", last)] {
            let (html, s1) = time_get(
                &app,
                &format!("/queues/{queue}/{name}?page={page}&size=20"),
                true,
                samples,
            )
            .await;
            let (api, s2) = time_get(
                &app,
                &format!("/api/queues/{queue}/{name}_tasks?page={page}&size=20"),
                false,
                samples,
            )
            .await;
            println!(
                "| {name} | {size} | {label} ({page}) | {html:.2} (HTTP {s1}) | {api:.2} (HTTP {s2}) |"
            );
        }
    }
    let mut stats = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        inspector.queue_info(queue).await?;
        stats.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let names = vec![queue.to_string()];
    let mut bare = Vec::new();
    for _ in 0..samples {
        let t = Instant::now();
        inspector.queues_stats(&names, false).await?;
        bare.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (api, s) = time_get(&app, &format!("/api/queues/{queue}"), false, samples).await;
    println!();
    println!("| Statistics | ms |");
    println!("|---|---:|");
    println!(
        "| `Inspector::queue_info` (memory estimate cached) | {:.2} |",
        median(stats)
    );
    println!(
        "| statistics read alone (`Inspector::queues_stats` of the queue) | {:.2} |",
        median(bare)
    );
    println!("| `GET /api/queues/{queue}` | {api:.2} (HTTP {s}) |");
    Ok(())
}
