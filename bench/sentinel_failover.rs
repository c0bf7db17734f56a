//! Recovery after a Sentinel failover (issue 14 item 8; BENCHMARKS.md
//! "Sentinel failover"): `cargo run --release --example
//! bench_sentinel_failover [-- --tasks 20000]`.
//!
//! Starts its own Sentinel set on free loopback ports (a master with
//! `min-replicas-to-write 1`, its replica, 3 sentinels with
//! `down-after-milliseconds 1000`; no persistence, killed at the end),
//! enqueues half the tasks, runs our Server (concurrency 20, handlers that
//! only count) and keeps enqueueing the other half; once a quarter is done
//! it sends `SENTINEL FAILOVER` and reports: the time from it until the
//! sentinels name the new master (`GET-MASTER-ADDR-BY-NAME`), from then
//! until the new master's `processed` counter first grows, tasks done in
//! the second before the failover and in the second after the first one
//! done on the new master, and how many tasks ran more than once
//! (COMPATIBILITY.md K15).

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use asynqdeck::server::{Config, ServeMux, Server, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Error, Task};

const MASTER: &str = "benchmaster";

struct Procs(Vec<Child>, std::path::PathBuf);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !f() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn named_master(sentinel: u16) -> u16 {
    cli(sentinel, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER])
        .lines()
        .nth(1)
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or(0)
}

/// Master, replica and 3 sentinels; returns once all is settled.
fn start_set() -> (Procs, u16, Vec<u16>) {
    let dir = std::env::temp_dir().join(format!("asynqdeck-bench-sentinel-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let server = |port: u16, extra: &[&str]| {
        let d = dir.join(port.to_string());
        std::fs::create_dir_all(&d).unwrap();
        Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&d)
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server")
    };
    let (m, r) = (free_port(), free_port());
    let mut procs = vec![server(
        m,
        &[
            "--min-replicas-to-write",
            "1",
            "--min-replicas-max-lag",
            "10",
        ],
    )];
    wait_until("master up", || cli(m, &["PING"]).contains("PONG"));
    procs.push(server(r, &["--replicaof", "127.0.0.1", &m.to_string()]));
    let sentinels: Vec<u16> = (0..3).map(|_| free_port()).collect();
    for &p in &sentinels {
        let conf = dir.join(format!("sentinel-{p}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port {p}\nbind 127.0.0.1\ndir {}\nsentinel monitor {MASTER} 127.0.0.1 {m} 2\n\
                 sentinel down-after-milliseconds {MASTER} 1000\n\
                 sentinel failover-timeout {MASTER} 10000\n",
                dir.display()
            ),
        )
        .unwrap();
        procs.push(
            Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .spawn()
                .expect("redis-sentinel"),
        );
    }
    wait_until("sentinel set settled", || {
        cli(m, &["INFO", "replication"]).contains("state=online")
            && sentinels.iter().all(|&s| {
                let info = cli(s, &["SENTINEL", "MASTER", MASTER]);
                named_master(s) == m
                    && info.contains("num-other-sentinels\n2")
                    && info.contains("num-slaves\n1")
            })
    });
    (Procs(procs, dir), m, sentinels)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let total: usize = args
        .iter()
        .position(|a| a == "--tasks")
        .and_then(|i| args.get(i + 1)?.parse().ok())
        .unwrap_or(20_000);
    let (_procs, old, sentinels) = tokio::task::spawn_blocking(start_set).await.unwrap();
    let addrs: Vec<String> = sentinels.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    let url = format!("redis-sentinel://{}?master={MASTER}", addrs.join(","));
    let client = Client::connect(&url).await.unwrap();
    let enqueue = |client: Client, from: usize, to: usize, pace: bool| async move {
        for i in from..to {
            let id = format!("t{i}");
            loop {
                let opts = EnqueueOptions::new().task_id(id.clone());
                match client
                    .enqueue(&Task::new("rec", id.clone().into_bytes()), opts)
                    .await
                {
                    Ok(_) | Err(Error::TaskIdConflict) => break,
                    Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
                }
            }
            if pace && i % 25 == 0 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };
    enqueue(client.clone(), 0, total / 2, false).await;

    let runs: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let done_at: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let mut mux = ServeMux::new();
    let (r, d) = (runs.clone(), done_at.clone());
    mux.handle_fn("rec", move |_ctx: TaskContext, t: Task| {
        let (r, d) = (r.clone(), d.clone());
        async move {
            let id = String::from_utf8_lossy(t.payload()).into_owned();
            *r.lock().unwrap().entry(id).or_default() += 1;
            d.lock().unwrap().push(Instant::now());
            Ok(())
        }
    });
    let config = Config {
        concurrency: 20,
        queues: [("default".to_string(), 1)].into_iter().collect(),
        ..Config::default()
    };
    let server = Server::connect(&url, config).await.unwrap();
    let handle = server.shutdown_handle();
    let join = tokio::spawn(server.run_until(mux, std::future::pending()));
    let during = tokio::spawn(enqueue(client.clone(), total / 2, total, true));
    let count = |runs: &Arc<Mutex<HashMap<String, usize>>>| runs.lock().unwrap().len();
    while count(&runs) < total / 4 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    let s0 = sentinels[0];
    let (sent, elected, new) = tokio::task::spawn_blocking(move || {
        let sent = Instant::now();
        assert!(cli(s0, &["SENTINEL", "FAILOVER", MASTER]).contains("OK"));
        loop {
            let now = named_master(s0);
            if now != old && now != 0 {
                return (sent, Instant::now(), now);
            }
        }
    })
    .await
    .unwrap();
    let processed = move || -> i64 {
        cli(new, &["GET", "asynq:{default}:processed"])
            .trim()
            .parse()
            .unwrap_or(0)
    };
    let at_election = processed();
    let first_done = tokio::task::spawn_blocking(move || {
        while processed() <= at_election {}
        Instant::now()
    })
    .await
    .unwrap();
    during.await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while count(&runs) < total && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all_done = Instant::now();
    handle.shutdown();
    let _ = join.await;

    let second = Duration::from_secs(1);
    let done_at = done_at.lock().unwrap().clone();
    let within = |a: Instant, b: Instant| done_at.iter().filter(|t| **t >= a && **t < b).count();
    let twice = runs.lock().unwrap().values().filter(|n| **n > 1).count();
    println!("sentinel failover, {total} tasks, concurrency 20, handler only counts");
    println!(
        "  SENTINEL FAILOVER -> new master named:     {:>7.0} ms",
        (elected - sent).as_secs_f64() * 1e3
    );
    println!(
        "  new master named -> first task done on it: {:>7.0} ms",
        first_done.saturating_duration_since(elected).as_secs_f64() * 1e3
    );
    println!(
        "  tasks done in the second before:          {:>7}",
        within(sent - second, sent)
    );
    println!(
        "  tasks done in the second after resuming:  {:>7}",
        within(first_done, first_done + second)
    );
    println!(
        "  all {total} done after the failover in:  {:>7.1} s",
        (all_done - sent).as_secs_f64()
    );
    println!("  tasks that ran more than once:            {twice:>7}");
    println!(
        "  tasks never run (lost):                   {:>7}",
        total - count(&runs)
    );
}
