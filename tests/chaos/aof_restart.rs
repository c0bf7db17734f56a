//! Redis restarted under load (issue 12): a private redis-server with
//! `appendonly yes` and `appendfsync always` is SIGKILLed while an
//! in-process asynqdeck [`Server`] works through a backlog and a producer
//! keeps enqueuing, then started again on the same port and directory.
//!
//! Asserts 0 lost (every task whose enqueue returned `Ok` is processed)
//! and that processing resumes within 2 s of Redis answering again:
//! measured as the first handler call, after Redis is back, of a task
//! no handler had started before (the backlog guarantees there is one).
//! Also reports when the producer's first enqueue after the restart
//! returned, tasks handled twice, and when every task was done.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use asynqdeck::server::Server;
use asynqdeck::{Client, EnqueueOptions, Task};
use tokio::sync::Mutex;

use super::procs::RedisProc;
use super::record::{Recorder, enqueue_n, figure, wait_until};
use super::worker::chaos_config;

const QUEUE: &str = "chaos";
const BACKLOG: usize = 3000;
const CONCURRENCY: usize = 10;
const WORK: Duration = Duration::from_millis(5);

/// Ids whose enqueue returned `Ok`, with when it returned.
type Enqueued = Arc<Mutex<HashMap<String, Instant>>>;

/// A producer enqueuing one task every 5 ms until `stop`; failed enqueues
/// are tried again (a new task) 10 ms later.
fn producer(
    client: Client,
    enqueued: Enqueued,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut i = 0u64;
        let mut tick = tokio::time::interval(Duration::from_millis(5));
        while !stop.load(Ordering::SeqCst) {
            tick.tick().await;
            i += 1;
            let task = Task::new("chaos:live", format!("live-{i}").into_bytes());
            match client
                .enqueue(&task, EnqueueOptions::new().queue(QUEUE))
                .await
            {
                Ok(info) => {
                    enqueued.lock().await.insert(info.id, Instant::now());
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            }
        }
    })
}

pub async fn run() {
    let name = "aof_restart";
    let mut redis = RedisProc::start(true);
    let url = redis.url();
    let client = Client::connect(&url).await.unwrap();
    let backlog = enqueue_n(&client, QUEUE, BACKLOG).await;
    let enqueued: Enqueued = Arc::default();
    {
        let mut e = enqueued.lock().await;
        let now = Instant::now();
        for id in &backlog {
            e.insert(id.clone(), now);
        }
    }

    let rec = Recorder::default();
    let server = Server::connect(&url, chaos_config(QUEUE, CONCURRENCY))
        .await
        .unwrap();
    let shutdown = server.shutdown_handle();
    let mux = rec.mux(WORK);
    let worker = tokio::spawn(async move { server.run_until(mux, std::future::pending()).await });
    let stop = Arc::new(AtomicBool::new(false));
    let produce = producer(client.clone(), enqueued.clone(), stop.clone());

    let started = wait_until(Duration::from_secs(60), || async { rec.done_ids() >= 500 }).await;
    assert!(started, "500 tasks were not processed");
    redis.kill();
    let up = tokio::task::spawn_blocking(move || {
        let at = redis.up();
        (redis, at)
    });
    let (redis, back_at) = up.await.unwrap();
    figure(name, "done_before_kill", rec.done_ids());

    // Resumption: a handler call, after Redis is back, of a task never
    // started before.
    let resumed = wait_until(Duration::from_secs(30), || async {
        rec.snapshot()
            .values()
            .any(|e| e.first_start.is_some_and(|t| t > back_at))
    })
    .await;
    let snap = rec.snapshot();
    let resume = snap
        .values()
        .filter_map(|e| e.first_start.filter(|t| *t > back_at))
        .min()
        .map(|t| t - back_at);

    // Keep producing for 2 s more after the restart, then stop.
    let _ = wait_until(Duration::from_secs(5), || async {
        back_at.elapsed() >= Duration::from_secs(2)
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    produce.await.unwrap();
    let enqueued = enqueued.lock().await.clone();

    let all_done = wait_until(Duration::from_secs(150), || async {
        let snap = rec.snapshot();
        enqueued
            .keys()
            .all(|id| snap.get(id).is_some_and(|e| e.done > 0))
    })
    .await;
    let all_done_after = back_at.elapsed();
    let snap = rec.snapshot();
    let lost = enqueued
        .keys()
        .filter(|id| snap.get(*id).is_none_or(|e| e.done == 0))
        .count();
    let twice = snap.values().filter(|e| e.done > 1).count();
    let first_enqueue = enqueued
        .values()
        .filter(|at| **at > back_at)
        .min()
        .map(|t| *t - back_at);
    shutdown.shutdown();
    let _ = worker.await;
    drop(redis);

    let secs =
        |d: Option<Duration>| d.map_or("never".into(), |d| format!("{:.3}", d.as_secs_f64()));
    figure(name, "enqueued_ok", enqueued.len());
    figure(name, "lost", lost);
    figure(name, "handled_twice", twice);
    figure(name, "resume_after_redis_back_s", secs(resume));
    figure(
        name,
        "first_enqueue_after_redis_back_s",
        secs(first_enqueue),
    );
    figure(
        name,
        "all_done_after_redis_back_s",
        format!("{:.1}", all_done_after.as_secs_f64()),
    );

    assert!(
        resumed,
        "no task started within 30 s of Redis answering again"
    );
    assert!(all_done, "{lost} tasks not processed within 150 s");
    assert_eq!(lost, 0, "tasks lost");
    let resume = resume.unwrap();
    assert!(
        resume <= Duration::from_secs(2),
        "processing resumed {:.3} s after Redis answered again (limit 2 s)",
        resume.as_secs_f64()
    );
}
