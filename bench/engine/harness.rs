//! The shared harness: the private redis-server, the Go peer, the worker
//! processes of either engine ([`Env::worker`]) and their JSON summary
//! line, enqueueing the no-op tasks, and the clock and percentile rule the
//! Go peer shares.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use asynqdeck::{Client, EnqueueOptions, Task};
use futures_util::{StreamExt, TryStreamExt};
use redis::aio::MultiplexedConnection;
use serde_json::Value;

use crate::options::Engine;
use crate::{QUEUE, TASK_TYPE};

/// Unix time in nanoseconds (wall clock, shared with the Go peer).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Nearest-rank percentile of a sorted slice (0 when empty); the Go peer
/// uses the same rule.
pub fn percentile(sorted: &[i64], p: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// The private redis-server, killed on drop.
pub struct RedisServer {
    pub child: std::process::Child,
    pub port: u16,
    pub dir: PathBuf,
}

impl RedisServer {
    pub fn start() -> anyhow::Result<Self> {
        use std::os::unix::process::CommandExt;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let dir = std::env::temp_dir().join(format!("asynqdeck-bench-redis-{port}"));
        std::fs::create_dir_all(&dir)?;
        let mut cmd = std::process::Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // SAFETY: prctl is async-signal-safe; the server dies with the bench.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().context("redis-server must be installed")?;
        let server = RedisServer { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                bail!("redis-server did not start on port {port}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Builds the Go peer into `target/asynq-peer-bench`.
pub fn build_go_peer() -> anyhow::Result<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = root.join("target").join("asynq-peer-bench");
    let status = std::process::Command::new("go")
        .current_dir(root.join("interop"))
        .args(["build", "-o"])
        .arg(&out)
        .arg("./cmd/asynq-peer")
        .status()
        .context("go must be installed to build the Go peer")?;
    if !status.success() {
        bail!("go build ./cmd/asynq-peer failed");
    }
    Ok(out)
}

pub struct Env {
    pub quiet_wait: Duration,
    pub redis: RedisServer,
    pub go_peer: PathBuf,
    pub admin: MultiplexedConnection,
}

impl Env {
    pub async fn flush(&mut self) -> anyhow::Result<()> {
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut self.admin)
            .await?;
        Ok(())
    }

    /// The worker command for `engine`.
    pub fn worker(
        &self,
        engine: Engine,
        concurrency: usize,
        count: usize,
    ) -> tokio::process::Command {
        let mut cmd = match engine {
            Engine::Go => {
                let mut c = tokio::process::Command::new(&self.go_peer);
                c.args(["--redis", &self.redis.addr(), "bench-work"])
                    .args(["--queues", &format!("{QUEUE}=1")]);
                c
            }
            Engine::Ours => {
                let exe = std::env::current_exe().expect("current exe");
                // For profiling only, e.g. BENCH_WORKER_PREFIX="perf record -g --".
                let prefix = std::env::var("BENCH_WORKER_PREFIX").unwrap_or_default();
                let mut words = prefix.split_whitespace();
                let mut c = match words.next() {
                    Some(program) => {
                        let mut c = tokio::process::Command::new(program);
                        c.args(words).arg(exe);
                        c
                    }
                    None => tokio::process::Command::new(exe),
                };
                c.args(["worker", "--redis", &self.redis.url()]);
                c
            }
        };
        cmd.args(["--concurrency", &concurrency.to_string()])
            .args(["--count", &count.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        cmd
    }

    pub async fn get_i64(&mut self, key: &str) -> anyhow::Result<i64> {
        let v: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.admin)
            .await?;
        Ok(v.unwrap_or(0))
    }

    pub async fn llen(&mut self, key: &str) -> anyhow::Result<i64> {
        Ok(redis::cmd("LLEN")
            .arg(key)
            .query_async(&mut self.admin)
            .await?)
    }

    pub async fn config_set(&mut self, name: &str, value: &str) -> anyhow::Result<()> {
        redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query_async::<()>(&mut self.admin)
            .await?;
        Ok(())
    }
}

/// One worker's summary line.
#[derive(Debug, Default, Clone)]
pub struct WorkerSummary {
    pub count: i64,
    pub first_start_ns: i64,
    pub last_end_ns: i64,
    pub p50_us: i64,
    pub p99_us: i64,
    pub max_us: i64,
    /// Tasks that waited more than 100 ms.
    pub over_100ms: i64,
    pub max_rss_kb: i64,
    pub cpu_ms: i64,
}

pub fn parse_summary(stdout: &[u8]) -> anyhow::Result<WorkerSummary> {
    let text = String::from_utf8_lossy(stdout);
    let line = text
        .lines()
        .rfind(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("worker printed no JSON: {text}"))?;
    let v: Value = serde_json::from_str(line)?;
    if let Some(err) = v.get("error") {
        bail!("worker failed: {err}");
    }
    let i = |k: &str| v.get(k).and_then(Value::as_i64).unwrap_or(0);
    Ok(WorkerSummary {
        count: i("count"),
        first_start_ns: i("first_start_ns"),
        last_end_ns: i("last_end_ns"),
        p50_us: i("p50_us"),
        p99_us: i("p99_us"),
        max_us: i("max_us"),
        over_100ms: i("over_100ms"),
        max_rss_kb: i("max_rss_kb"),
        cpu_ms: i("cpu_user_ms") + i("cpu_sys_ms"),
    })
}

/// Enqueues `n` no-op tasks, 128 in flight; returns tasks per second.
pub async fn enqueue_all(client: &Client, n: usize) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    futures_util::stream::iter(0..n)
        .map(|_| {
            let client = client.clone();
            async move {
                let task = Task::new(TASK_TYPE, now_ns().to_string().into_bytes());
                client.enqueue(&task, EnqueueOptions::new()).await
            }
        })
        .buffer_unordered(128)
        .try_for_each(|_| async { Ok(()) })
        .await?;
    Ok(n as f64 / t0.elapsed().as_secs_f64())
}
