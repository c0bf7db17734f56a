//! Throughput, latency, memory and Redis-cost benchmark of asynqdeck's
//! [`Server`] against Go asynq v0.26.0, on one private redis-server.
//!
//! ```text
//! cargo run --release --example bench -- [--tasks N] [--concurrency 10,100]
//!     [--pickup-tasks 200] [--pickup-interval-ms 20] [--archive-ops 20000]
//!     [--profile] [--quiet-wait 60] [--no-script-costs] [--only-ours]
//! ```
//!
//! What it does (results go to stdout as Markdown, progress to stderr):
//! 1. Builds the Go peer (`interop/cmd/asynq-peer`) into `target/` and starts
//!    a redis-server on a free loopback port (`--save "" --appendonly no`),
//!    killed when the bench ends.
//! 2. Throughput: for each concurrency and engine (Go, then ours), flushes
//!    the database, enqueues N no-op tasks with [`Client`] (payload = enqueue
//!    time in unix ns, decimal), then runs ONE worker process until it has
//!    handled N tasks. Go's worker is `asynq-peer bench-work`; ours is this
//!    same binary in its hidden `worker` mode. Each worker prints one JSON
//!    line: count, first start and last end (unix ns), p50/p99
//!    enqueue-to-start latency (µs), peak RSS (VmHWM, kB) and its own CPU
//!    time. The bench adds Redis CPU (INFO cpu delta over the worker's life)
//!    and the commands Redis ran (INFO commandstats delta).
//! 3. Idle-to-busy pickup: a worker idles on the empty queue for 2 s, then
//!    tasks are enqueued one at a time every 20 ms; p50/p99 enqueue-to-start.
//! 4. Archive cost: 10,000 archived tasks (with hashes) are seeded, then
//!    20,000 × (enqueue, dequeue, `Broker::archive`); client µs per archive
//!    call and Redis CPU per iteration; a second pass with SLOWLOG on gives
//!    the Redis execution time of each script.
//!
//! Before each measured step the bench waits (up to `--quiet-wait` s,
//! default 60) for a second in which other processes use < 10 % of a CPU,
//! and each throughput row reports the CPU the rest of the machine used
//! meanwhile ("other load"), so a noisy neighbour shows in the results.
//!
//! `--profile` turns SLOWLOG on during the throughput runs too and prints,
//! per engine, what each script call costs Redis (use fewer tasks: every
//! command is kept in memory). `--no-script-costs` skips the script cost
//! model; `--only-ours` skips Go's runs (for quick iterations).
//!
//! Hidden mode: `bench worker --redis URL --concurrency C --count N`. For
//! profiling, `BENCH_WORKER_PREFIX="perf record -g --"` runs our worker
//! under that command (its RSS and CPU figures are then not comparable).
//! `BENCH_FETCH_SPIN_US=N` sets our worker's `Config::fetch_spin` (0: no
//! busy-polling for lease replies), `BENCH_WORKER_RUNTIME=current` runs it
//! on a current-thread runtime instead of a multi-thread one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use asynqdeck::broker::{Broker, keys};
use asynqdeck::server::{Config, Server, TaskContext, handler_fn};
use asynqdeck::{Client, EnqueueOptions, Task};
use futures_util::{StreamExt, TryStreamExt};
use redis::aio::MultiplexedConnection;
use serde_json::{Value, json};

const QUEUE: &str = "default";
const TASK_TYPE: &str = "bench:noop";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("worker") {
        let rt = if std::env::var("BENCH_WORKER_RUNTIME").as_deref() == Ok("current") {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()?
        };
        return rt.block_on(worker_main(&args[1..]));
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let opts = Options::parse(&args)?;
    rt.block_on(orchestrate(opts))
}

/// Unix time in nanoseconds (wall clock, shared with the Go peer).
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// Nearest-rank percentile of a sorted slice (0 when empty); the Go peer
/// uses the same rule.
fn percentile(sorted: &[i64], p: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (p * sorted.len()).div_ceil(100).max(1);
    sorted[rank - 1]
}

/// Value of the flag `name` in `args` (`--name value`).
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn parse_flag<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> anyhow::Result<T>
where
    T::Err: std::fmt::Display,
{
    match flag(args, name) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|e| anyhow::anyhow!("{name} {v}: {e}")),
    }
}

// ---------------------------------------------------------------------------
// Worker mode (our engine, one process per run)
// ---------------------------------------------------------------------------

/// What the no-op handler records: one latency slot per task, preallocated.
struct Recorder {
    latencies: Box<[AtomicI64]>,
    started: AtomicUsize,
    ended: AtomicUsize,
    first_start: AtomicI64,
    last_end: AtomicI64,
    done: tokio::sync::Notify,
}

impl Recorder {
    fn new(count: usize) -> Self {
        Recorder {
            latencies: (0..count).map(|_| AtomicI64::new(0)).collect(),
            started: AtomicUsize::new(0),
            ended: AtomicUsize::new(0),
            first_start: AtomicI64::new(0),
            last_end: AtomicI64::new(0),
            done: tokio::sync::Notify::new(),
        }
    }

    fn record(&self, payload: &[u8]) {
        let now = now_ns();
        let _ = self
            .first_start
            .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        let i = self.started.fetch_add(1, Ordering::Relaxed);
        if let Some(slot) = self.latencies.get(i)
            && let Some(enq) = std::str::from_utf8(payload)
                .ok()
                .and_then(|s| s.parse::<i64>().ok())
        {
            slot.store(now - enq, Ordering::Relaxed);
        }
        self.last_end.fetch_max(now_ns(), Ordering::Relaxed);
        if self.ended.fetch_add(1, Ordering::AcqRel) + 1 == self.latencies.len() {
            self.done.notify_one();
        }
    }
}

/// Runs our [`Server`] with a no-op handler until `--count` tasks were
/// handled, then shuts it down and prints one JSON summary line (the same
/// shape as `asynq-peer bench-work`).
async fn worker_main(args: &[String]) -> anyhow::Result<()> {
    let url = flag(args, "--redis").context("worker: --redis URL is required")?;
    let concurrency: usize = parse_flag(args, "--concurrency", 10)?;
    let count: usize = parse_flag(args, "--count", 0)?;
    if count == 0 {
        bail!("worker: --count must be > 0");
    }
    let rec = Arc::new(Recorder::new(count));
    let r = rec.clone();
    let handler = handler_fn(move |_ctx: TaskContext, task: Task| {
        r.record(task.payload());
        async { Ok(()) }
    });
    let config = Config {
        concurrency,
        queues: [(QUEUE.to_string(), 1)].into(),
        fetch_spin: std::env::var("BENCH_FETCH_SPIN_US")
            .ok()
            .and_then(|v| v.parse().ok())
            .map(Duration::from_micros),
        ..Config::default()
    };
    let server = Server::connect(url, config).await?;
    let r = rec.clone();
    server
        .run_until(handler, async move { r.done.notified().await })
        .await?;

    let got = rec.started.load(Ordering::Relaxed).min(count);
    let mut lat: Vec<i64> = rec.latencies[..got]
        .iter()
        .map(|a| a.load(Ordering::Relaxed))
        .collect();
    lat.sort_unstable();
    let (user_ms, sys_ms) = self_cpu_ms();
    let line = json!({
        "count": rec.ended.load(Ordering::Relaxed),
        "first_start_ns": rec.first_start.load(Ordering::Relaxed),
        "last_end_ns": rec.last_end.load(Ordering::Relaxed),
        "p50_us": percentile(&lat, 50) / 1000,
        "p99_us": percentile(&lat, 99) / 1000,
        "max_us": lat.last().copied().unwrap_or(0) / 1000,
        "over_100ms": lat.iter().filter(|&&l| l > 100_000_000).count(),
        "max_rss_kb": vm_hwm_kb(),
        "cpu_user_ms": user_ms,
        "cpu_sys_ms": sys_ms,
    });
    println!("{line}");
    Ok(())
}

/// Peak resident set size of this process (VmHWM, kB); 0 when unreadable.
fn vm_hwm_kb() -> i64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// User and system CPU time of this process so far, in ms.
fn self_cpu_ms() -> (i64, i64) {
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we pass and nothing else.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let ms = |t: libc::timeval| t.tv_sec * 1000 + t.tv_usec / 1000;
    (ms(ru.ru_utime), ms(ru.ru_stime))
}

// ---------------------------------------------------------------------------
// Orchestrator
// ---------------------------------------------------------------------------

/// Busy CPU time of the whole machine so far, in ms (/proc/stat `cpu` line:
/// user + nice + system + irq + softirq + steal).
fn machine_busy_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().find(|l| l.starts_with("cpu ")) else {
        return 0.0;
    };
    let f: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: f64 = [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| f.get(i)).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    busy * 1000.0 / hz
}

/// Waits (up to `max`) for a 1 s window in which the rest of the machine
/// used less than 10 % of one CPU, so other work does not skew a run.
async fn wait_quiet(max: Duration) {
    let until = Instant::now() + max;
    loop {
        let b0 = machine_busy_ms();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let busy = machine_busy_ms() - b0;
        if busy < 100.0 {
            return;
        }
        if Instant::now() > until {
            eprintln!("bench: machine still busy ({busy:.0} ms CPU/s); running anyway");
            return;
        }
    }
}

struct Options {
    tasks: usize,
    concurrency: Vec<usize>,
    pickup_tasks: usize,
    pickup_interval: Duration,
    archive_ops: usize,
    script_costs: bool,
    profile: bool,
    quiet_wait: Duration,
    engines: Vec<Engine>,
}

impl Options {
    fn parse(args: &[String]) -> anyhow::Result<Self> {
        let known = [
            "--tasks",
            "--concurrency",
            "--pickup-tasks",
            "--pickup-interval-ms",
            "--archive-ops",
            "--profile",
            "--quiet-wait",
            "--no-script-costs",
            "--only-ours",
        ];
        for a in args.iter().filter(|a| a.starts_with("--")) {
            if !known.contains(&a.as_str()) {
                bail!("unknown flag {a}; flags: {known:?}");
            }
        }
        let concurrency = flag(args, "--concurrency")
            .unwrap_or("10,100")
            .split(',')
            .map(|c| c.trim().parse::<usize>())
            .collect::<Result<Vec<_>, _>>()
            .context("--concurrency: comma-separated numbers")?;
        Ok(Options {
            tasks: parse_flag(args, "--tasks", 100_000)?,
            concurrency,
            pickup_tasks: parse_flag(args, "--pickup-tasks", 200)?,
            pickup_interval: Duration::from_millis(parse_flag(args, "--pickup-interval-ms", 20)?),
            archive_ops: parse_flag(args, "--archive-ops", 20_000)?,
            profile: args.iter().any(|a| a == "--profile"),
            script_costs: !args.iter().any(|a| a == "--no-script-costs"),
            quiet_wait: Duration::from_secs(parse_flag(args, "--quiet-wait", 60)?),
            engines: if args.iter().any(|a| a == "--only-ours") {
                vec![Engine::Ours]
            } else {
                vec![Engine::Go, Engine::Ours]
            },
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Engine {
    Go,
    Ours,
}

impl Engine {
    fn name(self) -> &'static str {
        match self {
            Engine::Go => "Go asynq v0.26.0",
            Engine::Ours => "asynqdeck",
        }
    }
}

/// The private redis-server, killed on drop.
struct RedisServer {
    child: std::process::Child,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    fn start() -> anyhow::Result<Self> {
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

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn addr(&self) -> String {
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
fn build_go_peer() -> anyhow::Result<PathBuf> {
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

struct Env {
    quiet_wait: Duration,
    redis: RedisServer,
    go_peer: PathBuf,
    admin: MultiplexedConnection,
}

impl Env {
    async fn flush(&mut self) -> anyhow::Result<()> {
        redis::cmd("FLUSHALL")
            .query_async::<()>(&mut self.admin)
            .await?;
        Ok(())
    }

    /// The worker command for `engine`.
    fn worker(&self, engine: Engine, concurrency: usize, count: usize) -> tokio::process::Command {
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

    async fn get_i64(&mut self, key: &str) -> anyhow::Result<i64> {
        let v: Option<i64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.admin)
            .await?;
        Ok(v.unwrap_or(0))
    }

    async fn llen(&mut self, key: &str) -> anyhow::Result<i64> {
        Ok(redis::cmd("LLEN")
            .arg(key)
            .query_async(&mut self.admin)
            .await?)
    }

    async fn config_set(&mut self, name: &str, value: &str) -> anyhow::Result<()> {
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
struct WorkerSummary {
    count: i64,
    first_start_ns: i64,
    last_end_ns: i64,
    p50_us: i64,
    p99_us: i64,
    max_us: i64,
    /// Tasks that waited more than 100 ms.
    over_100ms: i64,
    max_rss_kb: i64,
    cpu_ms: i64,
}

fn parse_summary(stdout: &[u8]) -> anyhow::Result<WorkerSummary> {
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

/// Redis counters at one moment: main-process CPU and per-command stats.
#[derive(Debug, Default, Clone)]
struct RedisSnap {
    cpu_us: f64,
    /// Of `cpu_us`, the part spent in the kernel (`used_cpu_sys`).
    sys_us: f64,
    /// command → (calls, usec)
    commands: BTreeMap<String, (u64, u64)>,
}

async fn redis_snap(conn: &mut MultiplexedConnection) -> anyhow::Result<RedisSnap> {
    let cpu: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    let field = |name: &str| -> f64 {
        cpu.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0.0)
    };
    let cpu_us = (field("used_cpu_sys:") + field("used_cpu_user:")) * 1e6;
    let sys_us = field("used_cpu_sys:") * 1e6;
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut commands = BTreeMap::new();
    for line in stats.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let get = |k: &str| -> u64 {
            rest.split(',')
                .find_map(|kv| kv.strip_prefix(k))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        commands.insert(name.to_string(), (get("calls="), get("usec=")));
    }
    Ok(RedisSnap {
        cpu_us,
        sys_us,
        commands,
    })
}

/// Commands Redis ran between two snapshots: (name, calls, usec), most
/// time first; the bench's own INFO calls are left out.
fn command_delta(before: &RedisSnap, after: &RedisSnap) -> Vec<(String, u64, u64)> {
    let mut out: Vec<(String, u64, u64)> = after
        .commands
        .iter()
        .filter(|(name, _)| name.as_str() != "info")
        .filter_map(|(name, (calls, usec))| {
            let (c0, u0) = before.commands.get(name).copied().unwrap_or((0, 0));
            (calls > &c0).then(|| (name.clone(), calls - c0, usec - u0))
        })
        .collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.2));
    out
}

/// Script calls and blocking waits: commands only a client sends (the
/// plain commands a worker sends outside scripts, such as the heartbeat's,
/// cannot be told apart from script-issued ones in INFO commandstats and
/// are left out; they are a few per second).
fn is_client_call(cmd: &str) -> bool {
    matches!(cmd, "evalsha" | "eval" | "blmove" | "brpoplpush")
}

/// Enqueues `n` no-op tasks, 128 in flight; returns tasks per second.
async fn enqueue_all(client: &Client, n: usize) -> anyhow::Result<f64> {
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

/// SLOWLOG entries grouped by command and key count, e.g.
/// `EVALSHA 4 keys, asynq:{default}:pending`: (label, calls, µs total).
async fn slowlog_groups(
    conn: &mut MultiplexedConnection,
) -> anyhow::Result<Vec<(String, u64, u64)>> {
    let entries: redis::Value = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await?;
    let mut groups: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let text = |v: &redis::Value| match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(i) => i.to_string(),
        _ => String::new(),
    };
    if let redis::Value::Array(entries) = entries {
        for e in entries {
            let redis::Value::Array(fields) = e else {
                continue;
            };
            let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) =
                (fields.get(2), fields.get(3))
            else {
                continue;
            };
            // Commands a script issues are logged too, from the client "?:0".
            if fields.get(4).map(text).as_deref() == Some("?:0") {
                continue;
            }
            let cmd = args.first().map(text).unwrap_or_default().to_uppercase();
            let label = match cmd.as_str() {
                "EVALSHA" | "EVAL" => {
                    let nkeys = args.get(2).map(text).unwrap_or_default();
                    let key = args.get(3).map(text).unwrap_or_default();
                    // Task hash keys differ per task: keep only the prefix.
                    let key = match key.find(":t:") {
                        Some(i) => format!("{}:t:<id>", &key[..i]),
                        None => key,
                    };
                    format!("{cmd} {nkeys} keys, KEYS[1] {key}")
                }
                "SLOWLOG" | "CONFIG" | "INFO" => continue,
                _ => cmd,
            };
            let g = groups.entry(label).or_default();
            g.0 += 1;
            g.1 += *us as u64;
        }
    }
    let mut out: Vec<(String, u64, u64)> =
        groups.into_iter().map(|(k, (c, u))| (k, c, u)).collect();
    out.sort_by_key(|e| std::cmp::Reverse(e.1));
    Ok(out)
}

async fn slowlog_on(env: &mut Env, max_len: usize) -> anyhow::Result<()> {
    env.config_set("slowlog-max-len", &max_len.to_string())
        .await?;
    env.config_set("slowlog-log-slower-than", "0").await?;
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(&mut env.admin)
        .await?;
    Ok(())
}

async fn slowlog_off(env: &mut Env) -> anyhow::Result<()> {
    env.config_set("slowlog-log-slower-than", "10000").await?;
    redis::cmd("SLOWLOG")
        .arg("RESET")
        .query_async::<()>(&mut env.admin)
        .await?;
    env.config_set("slowlog-max-len", "128").await
}

// --- throughput -------------------------------------------------------------

struct ThroughputResult {
    engine: Engine,
    concurrency: usize,
    enqueue_per_s: f64,
    worker: WorkerSummary,
    redis_cpu_us: f64,
    /// Of `redis_cpu_us`, the kernel's part (syscalls, wake-ups).
    redis_sys_us: f64,
    /// CPU the rest of the machine used during the run, in CPUs (0.05 = 5 %
    /// of one core): busy time minus Redis, the worker and this bench.
    other_cpus: f64,
    commands: Vec<(String, u64, u64)>,
    profile: Vec<(String, u64, u64)>,
}

impl ThroughputResult {
    fn tasks_per_s(&self) -> f64 {
        let span = (self.worker.last_end_ns - self.worker.first_start_ns).max(1) as f64;
        self.worker.count as f64 / (span / 1e9)
    }

    fn redis_cpu_per_task(&self) -> f64 {
        self.redis_cpu_us / self.worker.count.max(1) as f64
    }

    fn redis_sys_per_task(&self) -> f64 {
        self.redis_sys_us / self.worker.count.max(1) as f64
    }

    fn worker_cpu_per_task(&self) -> f64 {
        self.worker.cpu_ms as f64 * 1000.0 / self.worker.count.max(1) as f64
    }

    /// Script calls (and blocking waits) the worker sent per task.
    fn round_trips_per_task(&self) -> f64 {
        let n: u64 = self
            .commands
            .iter()
            .filter(|(c, _, _)| is_client_call(c))
            .map(|(_, calls, _)| calls)
            .sum();
        n as f64 / self.worker.count.max(1) as f64
    }
}

async fn throughput(
    env: &mut Env,
    engine: Engine,
    concurrency: usize,
    n: usize,
    profile: bool,
) -> anyhow::Result<ThroughputResult> {
    // Quiet before the enqueue: the backlog's wait is part of the latency.
    wait_quiet(env.quiet_wait).await;
    env.flush().await?;
    let client = Client::connect(&env.redis.url()).await?;
    let enqueue_per_s = enqueue_all(&client, n).await?;
    drop(client);
    if profile {
        slowlog_on(env, 30 * n + 10_000).await?;
    }
    let before = redis_snap(&mut env.admin).await?;
    let (busy0, self0, t0) = (machine_busy_ms(), self_cpu_ms(), Instant::now());
    let out = env
        .worker(engine, concurrency, n)
        .output()
        .await
        .context("run worker")?;
    let (busy1, self1, wall) = (machine_busy_ms(), self_cpu_ms(), t0.elapsed());
    let after = redis_snap(&mut env.admin).await?;
    if !out.status.success() {
        bail!(
            "{} worker exited with {}: {}",
            engine.name(),
            out.status,
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let worker = parse_summary(&out.stdout)?;
    let redis_cpu_us = after.cpu_us - before.cpu_us;
    let own_ms = (self1.0 + self1.1 - self0.0 - self0.1) as f64;
    let other_ms = busy1 - busy0 - redis_cpu_us / 1000.0 - worker.cpu_ms as f64 - own_ms;
    let other_cpus = (other_ms / wall.as_secs_f64() / 1000.0).max(0.0);
    let profile_groups = if profile {
        let g = slowlog_groups(&mut env.admin).await?;
        slowlog_off(env).await?;
        g
    } else {
        Vec::new()
    };
    // Every task must be finished in Redis, not only handled.
    let pending = env.llen(&keys::pending_key(QUEUE)).await?;
    let active = env.llen(&keys::active_key(QUEUE)).await?;
    let processed = env.get_i64(&keys::processed_total_key(QUEUE)).await?;
    if worker.count != n as i64 || pending != 0 || active != 0 || processed != n as i64 {
        bail!(
            "{} C={concurrency}: handled {}, pending {pending}, active {active}, processed {processed} (want {n})",
            engine.name(),
            worker.count
        );
    }
    Ok(ThroughputResult {
        engine,
        concurrency,
        enqueue_per_s,
        worker,
        redis_cpu_us,
        redis_sys_us: after.sys_us - before.sys_us,
        other_cpus,
        commands: command_delta(&before, &after),
        profile: profile_groups,
    })
}

// --- pickup -----------------------------------------------------------------

struct PickupResult {
    engine: Engine,
    worker: WorkerSummary,
}

async fn pickup(
    env: &mut Env,
    engine: Engine,
    tasks: usize,
    interval: Duration,
) -> anyhow::Result<PickupResult> {
    env.flush().await?;
    wait_quiet(env.quiet_wait).await;
    let child = env
        .worker(engine, 10, tasks)
        .spawn()
        .context("spawn worker")?;
    // Wait until the worker has registered itself, then let it idle.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let n: i64 = redis::cmd("ZCARD")
            .arg(keys::ALL_SERVERS)
            .query_async(&mut env.admin)
            .await?;
        if n > 0 {
            break;
        }
        if Instant::now() > deadline {
            bail!("{} worker did not register", engine.name());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let client = Client::connect(&env.redis.url()).await?;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for _ in 0..tasks {
        tick.tick().await;
        let task = Task::new(TASK_TYPE, now_ns().to_string().into_bytes());
        client.enqueue(&task, EnqueueOptions::new()).await?;
    }
    let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
        .await
        .context("pickup worker did not finish")??;
    if !out.status.success() {
        bail!("{} pickup worker exited with {}", engine.name(), out.status);
    }
    Ok(PickupResult {
        engine,
        worker: parse_summary(&out.stdout)?,
    })
}

// --- archive ----------------------------------------------------------------

struct ArchiveResult {
    ops: usize,
    /// Pass with archive calls.
    with: ArchivePass,
    /// The same pass on an empty archive (nothing to trim).
    empty: ArchivePass,
    /// The same pass without archive calls (tasks stay leased).
    without: ArchivePass,
    /// SLOWLOG groups of a shorter pass with archive calls.
    profile: Vec<(String, u64, u64)>,
    profile_ops: usize,
    archived_after: i64,
}

struct ArchivePass {
    /// Client-side duration of each archive call, sorted.
    archive_us: Vec<i64>,
    /// Wall time per iteration.
    wall_us: f64,
    /// Redis CPU per iteration (INFO cpu).
    cpu_us: f64,
    /// Redis script execution per iteration (INFO commandstats evalsha usec).
    script_us: f64,
}

/// Seeds `n` archived tasks (zset member + hash) in one script call.
async fn seed_archive(conn: &mut MultiplexedConnection, n: usize) -> anyhow::Result<()> {
    let script = redis::Script::new(
        r#"for i = 1, tonumber(ARGV[1]) do
             local id = "seeded-" .. i
             redis.call("ZADD", KEYS[1], tonumber(ARGV[2]) + i, id)
             redis.call("HSET", KEYS[2] .. id, "msg", "x", "state", "archived")
           end
           return 1"#,
    );
    let oldest = chrono::Utc::now().timestamp() - 86_400 - n as i64;
    let _: i64 = script
        .key(keys::archived_key(QUEUE))
        .key(keys::task_key_prefix(QUEUE))
        .arg(n)
        .arg(oldest)
        .invoke_async(conn)
        .await?;
    Ok(())
}

/// One pass of `ops` × (enqueue, dequeue, archive if `archive`) on an
/// archive seeded with `seed` tasks; with `slowlog` also the SLOWLOG groups.
async fn archive_pass(
    env: &mut Env,
    ops: usize,
    seed: usize,
    archive: bool,
    slowlog: bool,
) -> anyhow::Result<(ArchivePass, Vec<(String, u64, u64)>)> {
    env.flush().await?;
    if seed > 0 {
        seed_archive(&mut env.admin, seed).await?;
    }
    let broker = Broker::connect(&env.redis.url()).await?;
    let client = Client::from_broker(broker.clone());
    if slowlog {
        slowlog_on(env, 30 * ops + 1_000).await?;
    }
    wait_quiet(env.quiet_wait).await;
    let before = redis_snap(&mut env.admin).await?;
    let mut archive_us = Vec::with_capacity(ops);
    let t0 = Instant::now();
    for _ in 0..ops {
        let task = Task::new("bench:fail", b"x".to_vec());
        client.enqueue(&task, EnqueueOptions::new()).await?;
        let lease = chrono::Utc::now() + chrono::Duration::seconds(30);
        let leased = broker
            .dequeue(QUEUE, 1, lease)
            .await?
            .pop()
            .context("dequeue returned nothing")?
            .map_err(|(id, e)| anyhow::anyhow!("task {id}: {e}"))?;
        if archive {
            let t = Instant::now();
            broker.archive(&leased, "bench failure").await?;
            archive_us.push(t.elapsed().as_micros() as i64);
        }
    }
    let wall_us = t0.elapsed().as_secs_f64() * 1e6 / ops as f64;
    let after = redis_snap(&mut env.admin).await?;
    let groups = if slowlog {
        let g = slowlog_groups(&mut env.admin).await?;
        slowlog_off(env).await?;
        g
    } else {
        Vec::new()
    };
    let evalsha_usec = |s: &RedisSnap| s.commands.get("evalsha").map_or(0, |c| c.1);
    archive_us.sort_unstable();
    Ok((
        ArchivePass {
            archive_us,
            wall_us,
            cpu_us: (after.cpu_us - before.cpu_us) / ops as f64,
            script_us: (evalsha_usec(&after) - evalsha_usec(&before)) as f64 / ops as f64,
        },
        groups,
    ))
}

async fn archive_cost(env: &mut Env, ops: usize) -> anyhow::Result<ArchiveResult> {
    const FULL: usize = 10_000;
    let (with, _) = archive_pass(env, ops, FULL, true, false).await?;
    let archived_after: i64 = redis::cmd("ZCARD")
        .arg(keys::archived_key(QUEUE))
        .query_async(&mut env.admin)
        .await?;
    // Fewer than 10,000 archived tasks in total: nothing is ever trimmed.
    let (empty, _) = archive_pass(env, ops.min(9_000), 0, true, false).await?;
    let (without, _) = archive_pass(env, ops, FULL, false, false).await?;
    // SLOWLOG keeps every command (script-issued ones too) in memory.
    let profile_ops = ops.min(5_000);
    let (_, profile) = archive_pass(env, profile_ops, FULL, true, true).await?;
    Ok(ArchiveResult {
        ops,
        with,
        empty,
        without,
        profile,
        profile_ops,
        archived_after,
    })
}

// --- script cost model -------------------------------------------------------

/// Redis execution time of our dequeue and done scripts at one batch size.
struct ScriptCost {
    batch: usize,
    dequeue_us_per_call: f64,
    done_us_per_call: f64,
}

/// Execution time (INFO commandstats `evalsha` usec, no SLOWLOG) of
/// `Broker::dequeue` and `Broker::done` at several batch sizes, called
/// directly in rounds of 200 tasks so the active list stays as short as in
/// a running server.
async fn script_costs(env: &mut Env, n: usize) -> anyhow::Result<Vec<ScriptCost>> {
    const ROUND: usize = 200;
    let mut out = Vec::new();
    for batch in [1, 5, 10, 50, 100] {
        env.flush().await?;
        let client = Client::connect(&env.redis.url()).await?;
        enqueue_all(&client, n).await?;
        let broker = Broker::connect(&env.redis.url()).await?;
        let evalsha = |a: &RedisSnap, b: &RedisSnap| {
            let (c0, u0) = a.commands.get("evalsha").copied().unwrap_or((0, 0));
            let (c1, u1) = b.commands.get("evalsha").copied().unwrap_or((0, 0));
            (c1 - c0, u1 - u0)
        };
        let (mut deq, mut done) = ((0u64, 0u64), (0u64, 0u64));
        let mut left = n;
        while left > 0 {
            let round = left.min(ROUND);
            let lease = chrono::Utc::now() + chrono::Duration::seconds(60);
            let s0 = redis_snap(&mut env.admin).await?;
            let mut leased = Vec::with_capacity(round);
            while leased.len() < round {
                let want = batch.min(round - leased.len());
                for t in broker.dequeue(QUEUE, want, lease).await? {
                    leased.push(t.map_err(|(id, e)| anyhow::anyhow!("task {id}: {e}"))?);
                }
            }
            let s1 = redis_snap(&mut env.admin).await?;
            for chunk in leased.chunks(batch) {
                let msgs: Vec<_> = chunk.iter().map(|t| &t.msg).collect();
                broker.done(QUEUE, &msgs).await?;
            }
            let s2 = redis_snap(&mut env.admin).await?;
            let (c, u) = evalsha(&s0, &s1);
            deq = (deq.0 + c, deq.1 + u);
            let (c, u) = evalsha(&s1, &s2);
            done = (done.0 + c, done.1 + u);
            left -= round;
        }
        out.push(ScriptCost {
            batch,
            dequeue_us_per_call: deq.1 as f64 / deq.0.max(1) as f64,
            done_us_per_call: done.1 as f64 / done.0.max(1) as f64,
        });
    }
    Ok(out)
}

// --- report -----------------------------------------------------------------

fn kb_to_mib(kb: i64) -> f64 {
    kb as f64 / 1024.0
}

fn print_profile(title: &str, groups: &[(String, u64, u64)], per: usize) {
    println!("\n{title}\n");
    println!("| command (SLOWLOG) | calls | calls/task | Redis µs/call | Redis µs/task |");
    println!("|---|---:|---:|---:|---:|");
    for (label, calls, us) in groups {
        println!(
            "| `{label}` | {calls} | {:.3} | {:.1} | {:.2} |",
            *calls as f64 / per as f64,
            *us as f64 / (*calls).max(1) as f64,
            *us as f64 / per as f64
        );
    }
}

async fn orchestrate(opts: Options) -> anyhow::Result<()> {
    eprintln!("bench: building the Go peer");
    let go_peer = build_go_peer()?;
    let redis = RedisServer::start()?;
    let admin = redis::Client::open(redis.url())?
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;
    let mut env = Env {
        quiet_wait: opts.quiet_wait,
        redis,
        go_peer,
        admin,
    };
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut env.admin)
        .await?;
    let version = info
        .lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let started = Instant::now();

    let mut runs = Vec::new();
    for &c in opts.concurrency.iter().filter(|_| opts.tasks > 0) {
        for &engine in &opts.engines {
            eprintln!("bench: throughput {} C={c} N={}", engine.name(), opts.tasks);
            let r = throughput(&mut env, engine, c, opts.tasks, opts.profile).await?;
            eprintln!(
                "bench:   {:.0} tasks/s, Redis {:.1} µs/task ({:.1} kernel), worker {:.1} µs/task, RSS {:.1} MiB, enqueue {:.0}/s, other load {:.2} CPU",
                r.tasks_per_s(),
                r.redis_cpu_per_task(),
                r.redis_sys_per_task(),
                r.worker_cpu_per_task(),
                kb_to_mib(r.worker.max_rss_kb),
                r.enqueue_per_s,
                r.other_cpus
            );
            runs.push(r);
        }
    }
    let mut pickups = Vec::new();
    if opts.pickup_tasks > 0 {
        for &engine in &opts.engines {
            eprintln!("bench: pickup {}", engine.name());
            pickups.push(pickup(&mut env, engine, opts.pickup_tasks, opts.pickup_interval).await?);
        }
    }
    let costs = if opts.script_costs {
        eprintln!("bench: script cost model");
        script_costs(&mut env, 10_000).await?
    } else {
        Vec::new()
    };
    let archive = if opts.archive_ops > 0 {
        eprintln!("bench: archive cost, {} ops", opts.archive_ops);
        Some(archive_cost(&mut env, opts.archive_ops).await?)
    } else {
        None
    };

    // ---- Markdown ----
    println!(
        "Machine: {cpus} CPUs, Redis {version}; {} tasks per run; whole bench took {:.0} s.\n",
        opts.tasks,
        started.elapsed().as_secs_f64()
    );
    println!("### Throughput\n");
    println!(
        "| engine | C | tasks/s | ours/Go | p50 enqueue→start | p99 enqueue→start | peak RSS | Redis CPU µs/task | of which kernel | worker CPU µs/task | script calls/task | enqueue rate (ours, before the run) | other load |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &runs {
        let go = runs
            .iter()
            .find(|g| g.engine == Engine::Go && g.concurrency == r.concurrency);
        let ratio = go.map_or("–".to_string(), |g| {
            format!("{:.2}×", r.tasks_per_s() / g.tasks_per_s())
        });
        println!(
            "| {} | {} | {:.0} | {} | {:.0} ms | {:.0} ms | {:.1} MiB | {:.1} | {:.1} | {:.1} | {:.2} | {:.0}/s | {:.2} CPU |",
            r.engine.name(),
            r.concurrency,
            r.tasks_per_s(),
            ratio,
            r.worker.p50_us as f64 / 1000.0,
            r.worker.p99_us as f64 / 1000.0,
            kb_to_mib(r.worker.max_rss_kb),
            r.redis_cpu_per_task(),
            r.redis_sys_per_task(),
            r.worker_cpu_per_task(),
            r.round_trips_per_task(),
            r.enqueue_per_s,
            r.other_cpus
        );
    }
    println!(
        "\nRedis commands per run (INFO commandstats delta, includes commands run inside scripts):\n"
    );
    println!("| engine | C | command | calls/task | usec/call | usec/task |");
    println!("|---|---:|---|---:|---:|---:|");
    for r in &runs {
        let per = r.worker.count.max(1) as f64;
        for (cmd, calls, usec) in r.commands.iter().take(8) {
            println!(
                "| {} | {} | {cmd} | {:.3} | {:.2} | {:.2} |",
                r.engine.name(),
                r.concurrency,
                *calls as f64 / per,
                *usec as f64 / (*calls).max(1) as f64,
                *usec as f64 / per
            );
        }
    }
    for r in runs.iter().filter(|r| !r.profile.is_empty()) {
        print_profile(
            &format!("Profile: {} C={}", r.engine.name(), r.concurrency),
            &r.profile,
            r.worker.count.max(1) as usize,
        );
    }
    if !pickups.is_empty() {
        println!(
            "\n### Idle-to-busy pickup ({} tasks, one every {} ms, after ≥ 2 s idle, C=10)\n",
            opts.pickup_tasks,
            opts.pickup_interval.as_millis()
        );
        println!(
            "| engine | p50 enqueue→start | p99 enqueue→start | max | tasks > 100 ms | peak RSS |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        for p in &pickups {
            println!(
                "| {} | {:.2} ms | {:.2} ms | {:.2} ms | {} | {:.1} MiB |",
                p.engine.name(),
                p.worker.p50_us as f64 / 1000.0,
                p.worker.p99_us as f64 / 1000.0,
                p.worker.max_us as f64 / 1000.0,
                p.worker.over_100ms,
                kb_to_mib(p.worker.max_rss_kb)
            );
        }
    }
    if !costs.is_empty() {
        println!(
            "\n### Our worker scripts: Redis execution time by batch size (INFO commandstats, 10,000 tasks, rounds of 200)\n"
        );
        println!(
            "| tasks per call | dequeue µs/call | dequeue µs/task | done µs/call | done µs/task |"
        );
        println!("|---:|---:|---:|---:|---:|");
        for c in &costs {
            println!(
                "| {} | {:.1} | {:.2} | {:.1} | {:.2} |",
                c.batch,
                c.dequeue_us_per_call,
                c.dequeue_us_per_call / c.batch as f64,
                c.done_us_per_call,
                c.done_us_per_call / c.batch as f64
            );
        }
    }
    if let Some(a) = archive {
        let w = &a.with;
        let mean = w.archive_us.iter().sum::<i64>() as f64 / a.ops.max(1) as f64;
        println!(
            "\n### Archive writes into a full archive ({} × enqueue, dequeue, archive; 10,000 seeded)\n",
            a.ops
        );
        println!(
            "- `Broker::archive` round trip: mean {mean:.1} µs, p50 {} µs, p99 {} µs; archive size after: {}",
            percentile(&w.archive_us, 50),
            percentile(&w.archive_us, 99),
            a.archived_after
        );
        println!(
            "\n| pass | wall µs/iteration | Redis CPU µs/iteration | script execution µs/iteration |"
        );
        println!("|---|---:|---:|---:|");
        for (name, p) in [
            ("enqueue + dequeue + archive (full archive)", &a.with),
            (
                "enqueue + dequeue + archive (empty archive, ≤ 9,000 iterations: no trim)",
                &a.empty,
            ),
            (
                "enqueue + dequeue (full archive, no archive call)",
                &a.without,
            ),
        ] {
            println!(
                "| {name} | {:.1} | {:.1} | {:.1} |",
                p.wall_us, p.cpu_us, p.script_us
            );
        }
        println!(
            "| **difference: the archive call into the full archive** | **{:.1}** | **{:.1}** | **{:.1}** |",
            a.with.wall_us - a.without.wall_us,
            a.with.cpu_us - a.without.cpu_us,
            a.with.script_us - a.without.script_us
        );
        print_profile(
            &format!(
                "Split by script ({} iterations with SLOWLOG at 0 µs; logging every script-issued command inflates these times):",
                a.profile_ops
            ),
            &a.profile,
            a.profile_ops,
        );
    }
    Ok(())
}
