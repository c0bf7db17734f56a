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
//!
//! [`go_peer`] runs the same with a Go asynq v0.26.0 worker process (the
//! peer, `go_worker.rs`) in place of the in-process server; the producer
//! stays asynqdeck's [`Client`]. Its completions are read from the hash
//! the peer's handler writes (with `appendfsync always` an acknowledged
//! write survives the kill; a write that failed fails the handler call,
//! so the task runs again).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use asynqdeck::server::Server;
use asynqdeck::{Client, EnqueueOptions, Task};
use tokio::sync::Mutex;

use super::go_worker::GoWorker;
use super::procs::RedisProc;
use super::record::{Recorder, enqueue_n, figure, raw, wait_until};
use super::worker::chaos_config;

/// The Go worker's completions hash.
const GO_DONE: &str = "chaos:{results}:done";

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

/// The scenario with an in-process asynqdeck server.
pub async fn run() {
    scenario(false).await
}

/// The same with a Go asynq v0.26.0 worker process, for RELIABILITY.md.
pub async fn go_peer() {
    scenario(true).await
}

/// Completions per task id: the in-process recorder's, or the Go
/// worker's hash (empty while Redis does not answer).
async fn done_counts(rec: &Recorder, go: Option<&str>) -> HashMap<String, u32> {
    match go {
        None => rec
            .snapshot()
            .into_iter()
            .filter(|(_, e)| e.done > 0)
            .map(|(id, e)| (id, e.done))
            .collect(),
        Some(url) => {
            let Ok(mut c) = raw(url).await else {
                return HashMap::new();
            };
            redis::cmd("HGETALL")
                .arg(GO_DONE)
                .query_async(&mut c)
                .await
                .unwrap_or_default()
        }
    }
}

async fn scenario(go: bool) {
    let name = if go { "go_aof_restart" } else { "aof_restart" };
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

    let (rec, mut go_worker, worker, shutdown) = if go {
        let w = GoWorker::start(&redis.addr(), QUEUE, CONCURRENCY, WORK, GO_DONE);
        (w.rec.clone(), Some(w), None, None)
    } else {
        let rec = Recorder::default();
        let server = Server::connect(&url, chaos_config(QUEUE, CONCURRENCY))
            .await
            .unwrap();
        let shutdown = server.shutdown_handle();
        let mux = rec.mux(WORK);
        let worker =
            tokio::spawn(async move { server.run_until(mux, std::future::pending()).await });
        (rec, None, Some(worker), Some(shutdown))
    };
    let go_url = go.then(|| url.clone());
    let go_url = go_url.as_deref();
    let stop = Arc::new(AtomicBool::new(false));
    let produce = producer(client.clone(), enqueued.clone(), stop.clone());

    let started = wait_until(Duration::from_secs(60), || async {
        done_counts(&rec, go_url).await.len() >= 500
    })
    .await;
    assert!(started, "500 tasks were not processed");
    let done_before_kill = done_counts(&rec, go_url).await.len();
    redis.kill();
    let up = tokio::task::spawn_blocking(move || {
        let at = redis.up();
        (redis, at)
    });
    let (redis, back_at) = up.await.unwrap();
    figure(name, "done_before_kill", done_before_kill);

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
        let done = done_counts(&rec, go_url).await;
        enqueued.keys().all(|id| done.contains_key(id))
    })
    .await;
    let all_done_after = back_at.elapsed();
    let done = done_counts(&rec, go_url).await;
    let lost = enqueued.keys().filter(|id| !done.contains_key(*id)).count();
    let twice = done.values().filter(|n| **n > 1).count();
    let first_enqueue = enqueued
        .values()
        .filter(|at| **at > back_at)
        .min()
        .map(|t| *t - back_at);
    if let Some(shutdown) = shutdown {
        shutdown.shutdown();
    }
    if let Some(worker) = worker {
        let _ = worker.await;
    }
    if let Some(w) = go_worker.as_mut() {
        figure(name, "go_exited", format!("{:?}", w.exited()));
        w.report_stderr(name, 5);
    }
    drop(go_worker);
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

    let within = resumed && all_done && lost == 0 && resume.unwrap() <= Duration::from_secs(2);
    figure(name, "limits_met", within);
    if go {
        // Go's figures are what RELIABILITY.md reports, not a contract of
        // ours: the run only has to have measured them.
        return;
    }
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
