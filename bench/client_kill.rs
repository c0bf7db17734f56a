//! Throughput under a `CLIENT KILL` storm (issue 12 R5; RELIABILITY.md):
//! `cargo run --release --example bench_client_kill [-- --tasks 5000]`.
//!
//! Starts its own redis-server on a free loopback port (no persistence,
//! killed at the end). For each worker — ours (in this process) and Go
//! asynq v0.26.0 (`target/asynq-peer work`, built by the tests) — and each
//! condition — undisturbed, and `CLIENT KILL TYPE normal` every 2 s — it
//! enqueues `--tasks` tasks whose handler sleeps 60 ms, runs the worker at
//! concurrency 10, and reports the time from the worker's start until the
//! queue's processed counter reached the task count. The killing
//! connection also reads the counter (`CLIENT KILL` skips its caller).
//! `--only-ours` skips Go's runs.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use asynqdeck::server::{Config, ServeMux, Server, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Task};

const CONCURRENCY: usize = 10;
const HANDLER_SLEEP: Duration = Duration::from_millis(60);
const KILL_EVERY: Duration = Duration::from_secs(2);

struct Redis(Child, u16);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis() -> Redis {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = std::env::temp_dir().join(format!("asynqdeck-bench-kill-{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    let child = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "redis-server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Redis(child, port)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Worker {
    Ours,
    Go,
}

/// One run: seconds until `tasks` were processed, and kills made.
async fn run(port: u16, worker: Worker, kill: bool, tasks: usize) -> (f64, u32) {
    let url = format!("redis://127.0.0.1:{port}/0");
    let mut conn = redis::Client::open(url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    let client = Client::connect(&url).await.unwrap();
    for i in 0..tasks {
        client
            .enqueue(
                &Task::new("sleep", vec![]),
                EnqueueOptions::new().task_id(format!("t{i}")),
            )
            .await
            .unwrap();
    }
    let started = Instant::now();
    let mut ours = None;
    let mut go = None;
    match worker {
        Worker::Ours => {
            let mut mux = ServeMux::new();
            mux.handle_fn("sleep", |_ctx: TaskContext, _t: Task| async {
                tokio::time::sleep(HANDLER_SLEEP).await;
                Ok(())
            });
            let config = Config {
                concurrency: CONCURRENCY,
                ..Config::default()
            };
            let server = Server::connect(&url, config).await.unwrap();
            let handle = server.shutdown_handle();
            let join = tokio::spawn(server.run_until(mux, std::future::pending()));
            ours = Some((handle, join));
        }
        Worker::Go => {
            let peer = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/asynq-peer");
            let child = Command::new(peer)
                .args(["--redis", &format!("127.0.0.1:{port}"), "--db", "0", "work"])
                .args([
                    "--queues",
                    "default=1",
                    "--concurrency",
                    &CONCURRENCY.to_string(),
                ])
                .args([
                    "--behaviour",
                    &format!("sleep:{}ms", HANDLER_SLEEP.as_millis()),
                ])
                .args(["--max-duration", "10m"])
                .stdout(Stdio::null())
                .spawn()
                .expect("target/asynq-peer (built by `cargo test --test integration interop`)");
            go = Some(child);
        }
    }
    let mut kills = 0;
    let mut next_kill = started + KILL_EVERY;
    let key = asynqdeck::broker::keys::processed_total_key("default");
    loop {
        let n: Option<i64> = redis::cmd("GET")
            .arg(&key)
            .query_async(&mut conn)
            .await
            .unwrap();
        if n.unwrap_or(0) >= tasks as i64 {
            break;
        }
        if kill && Instant::now() >= next_kill {
            let _: i64 = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("TYPE")
                .arg("normal")
                .query_async(&mut conn)
                .await
                .unwrap();
            kills += 1;
            next_kill += KILL_EVERY;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = started.elapsed().as_secs_f64();
    if let Some((handle, join)) = ours {
        handle.shutdown();
        let _ = join.await;
    }
    if let Some(mut child) = go {
        let _ = child.kill();
        let _ = child.wait();
    }
    (took, kills)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tasks: usize = args
        .iter()
        .position(|a| a == "--tasks")
        .and_then(|i| args.get(i + 1))
        .map_or(5000, |v| v.parse().expect("--tasks N"));
    let redis = Arc::new(start_redis());
    println!(
        "{tasks} tasks, handler sleeps {HANDLER_SLEEP:?}, concurrency {CONCURRENCY}, CLIENT KILL TYPE normal every {KILL_EVERY:?}"
    );
    let workers: &[Worker] = if args.iter().any(|a| a == "--only-ours") {
        &[Worker::Ours]
    } else {
        &[Worker::Ours, Worker::Go]
    };
    for &worker in workers {
        for kill in [false, true] {
            let (took, kills) = run(redis.1, worker, kill, tasks).await;
            println!(
                "{worker:?} {}: {took:.1} s, {:.0} tasks/s, {kills} kills",
                if kill { "with kills" } else { "undisturbed" },
                tasks as f64 / took
            );
        }
    }
}
