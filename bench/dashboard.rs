//! Dashboard response times, Redis work per view and memory of `asynqdeck
//! serve` on a large data set (issue 4, "Done when": BENCHMARKS.md figures).
//!
//! ```text
//! cargo build --release --bin asynqdeck
//! cargo run --release --example bench_dashboard -- [--samples 20]
//! ```
//!
//! What it does (Markdown on stdout, progress on stderr):
//! 1. Starts a private redis-server on a free loopback port (`--save ""
//!    --appendonly no`), killed when the bench ends, and seeds 50 queues
//!    (`queue-00` … `queue-49`) with 20,000 pending tasks each (1,000,000 in
//!    all) plus a queue `deep` with 110,000 pending tasks. Seeding is one Lua
//!    script per queue writing the task hashes (`msg`, `state` = pending,
//!    `pending_since`) and LPUSHing ids in chunks of 500; `msg` is a valid
//!    `TaskMessage` (one template encoded here, with the task's own id
//!    appended as field 3 by the script). Each queue also gets a full hour of
//!    outage samples (720, one per 5 s, as the engine's sampler writes at the
//!    default poll interval), so snapshots read a realistic series.
//! 2. Times `GET` requests from the client side (HTTP/1.0 over a fresh
//!    loopback TCP connection, connect to last byte), median of `--samples`:
//!    - against `serve --poll-interval 5s` with the engine on: warm views of
//!      `/` and `/api/queues` (the snapshot of the current slot already
//!      exists), the history page, `/api/queue_stats` and three pages
//!      (first, middle, last) of the `deep` queue's pending tab; then the
//!      serve process's VmHWM and VmRSS;
//!    - against `serve --poll-interval 1s` with the engine on: the view of a
//!      viewer polling once per slot (sent 20 ms after each new 1 s slot
//!      starts: the slot-start refresh has run or is running, the view never
//!      waits for it), and the inline view (the first after two whole slots
//!      without views, which finds no usable snapshot and computes the counts
//!      itself: the worst case a view can meet).
//! 3. Redis work, against `serve --no-engine` (so no engine command lands in
//!    the measured window), with every command in the slow log
//!    (`slowlog-log-slower-than 0`): `SLOWLOG RESET`, `CONFIG RESETSTAT` and
//!    `INFO cpu` before, `INFO commandstats`, `INFO cpu` and `SLOWLOG GET`
//!    after. "Commands" are the commandstats `calls` (commands inside Lua
//!    scripts included; the bench's own INFO, CONFIG and SLOWLOG left out);
//!    "Redis exec" is the sum of the slow log's durations of the top-level
//!    commands (a script's time includes its inner commands, counted once);
//!    "Redis CPU" the used_cpu_user + used_cpu_sys delta of the whole
//!    process less the idle CPU of a window that long (measured first: 10 s
//!    with nothing connected; includes the bench's INFO and SLOWLOG calls,
//!    ≈0.1–0.2 ms). Mean of 5:
//!    - `--poll-interval 1s`, after one priming view and its memory run:
//!      the polling viewer's view (window: the request alone), the inline
//!      view (window: the request alone), and the background refresh of one
//!      poll interval: 40 one-slot windows with one viewer polling each,
//!      those that include a read of the growth samples (every 30 s) kept
//!      apart; their difference is the cost of a growth read; then 10 such
//!      windows each after the bench incremented a counter of every queue
//!      (outside the window), so the refresh reads every queue again (key
//!      tracking spares only unchanged queues: `src/broker/tracking.rs`);
//!    - the memory run: a fresh `serve --poll-interval 1h` process per
//!      sample, window from before its first view to 1 s after (a snapshot
//!      reading every queue with growth read, then the background memory
//!      run of every queue), less a refresh of every queue and a growth
//!      read;
//!    - the other pages as before (warm snapshot).
//!
//!    Then the Redis cost per queues view of one viewer at the default 5 s
//!    poll interval: one background refresh per view, a growth read every
//!    6 views (30 s) and a memory run every 60 views (`MEMORY_REFRESH`,
//!    5 min), as it would be with a memory run every minute, and as it
//!    would be were every queue changing every interval.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use asynqdeck::broker::proto::TaskMessage;
use prost::Message;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

/// Queues of the wide data set and tasks in each.
const QUEUES: usize = 50;
const PER_QUEUE: usize = 20_000;
/// Tasks of the `deep` queue.
const DEEP: usize = 110_000;
/// Views per Redis-work measurement.
const REDIS_SAMPLES: usize = 5;
/// One-slot windows measuring the background refresh.
const REFRESH_WINDOWS: usize = 40;

/// Creates ARGV[3] pending tasks `t-1` … in one queue.
const SEED_LUA: &str = r#"
-- KEYS[1] asynq:{<q>}:pending  list
-- KEYS[2] asynq:queues         set
-- ARGV[1] encoded TaskMessage without its id field
-- ARGV[2] key prefix asynq:{<q>}:t:
-- ARGV[3] number of tasks
-- ARGV[4] pending_since, unix ns
-- ARGV[5] queue name
local ids = {}
for i = 1, tonumber(ARGV[3]) do
    local id = "t-" .. i
    redis.call("HSET", ARGV[2] .. id, "msg", ARGV[1] .. string.char(26, #id) .. id,
        "state", "pending", "pending_since", ARGV[4])
    ids[#ids + 1] = id
    if #ids == 500 then
        redis.call("LPUSH", KEYS[1], unpack(ids))
        ids = {}
    end
end
if #ids > 0 then
    redis.call("LPUSH", KEYS[1], unpack(ids))
end
redis.call("SADD", KEYS[2], ARGV[5])
return tonumber(ARGV[3])
"#;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let samples = match args.iter().position(|a| a == "--samples") {
        Some(i) => args
            .get(i + 1)
            .context("missing value")?
            .parse()
            .context("--samples takes a number")?,
        None => 20,
    };
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(samples))
}

struct Redis {
    child: std::process::Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_redis() -> anyhow::Result<Redis> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let dir = std::env::temp_dir().join(format!("asynqdeck-bench-dashboard-{port}"));
    std::fs::create_dir_all(&dir)?;
    let child = std::process::Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .spawn()
        .context("redis-server must be installed")?;
    let redis = Redis { child, port, dir };
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("redis-server did not start");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(redis)
}

/// Seeds one queue with `n` pending tasks.
async fn seed_queue(
    conn: &mut redis::aio::MultiplexedConnection,
    queue: &str,
    n: usize,
) -> anyhow::Result<()> {
    let template = TaskMessage {
        r#type: "bench:dashboard".into(),
        payload: br#"{"user":42,"note":"dashboard bench"}"#.to_vec(),
        queue: queue.into(),
        retry: 25,
        timeout: 1800,
        ..Default::default()
    }
    .encode_to_vec();
    let now_ns = chrono::Utc::now()
        .timestamp_nanos_opt()
        .context("time out of range")?;
    let created: u64 = redis::Script::new(SEED_LUA)
        .key(format!("asynq:{{{queue}}}:pending"))
        .key("asynq:queues")
        .arg(template)
        .arg(format!("asynq:{{{queue}}}:t:"))
        .arg(n)
        .arg(now_ns)
        .arg(queue)
        .invoke_async(conn)
        .await?;
    anyhow::ensure!(created == n as u64);
    Ok(())
}

/// Writes a full hour of outage samples for `queue` (one per 5 s, ending
/// now), as the embedded engine's sampler does at the default interval.
async fn seed_samples(
    conn: &mut redis::aio::MultiplexedConnection,
    queue: &str,
) -> anyhow::Result<()> {
    let now = chrono::Utc::now().timestamp();
    let mut pipe = redis::pipe();
    for i in 0..720i64 {
        let t = now - i * 5;
        pipe.cmd("ZADD")
            .arg(asynqdeck::broker::samples_key(queue))
            .arg(t)
            .arg(format!("{t}:{}:0", i % 7))
            .ignore();
    }
    pipe.cmd("EXPIRE")
        .arg(asynqdeck::broker::samples_key(queue))
        .arg(7200)
        .ignore();
    let _: () = pipe.query_async(conn).await?;
    Ok(())
}

struct Serve {
    child: tokio::process::Child,
    addr: String,
}

impl Serve {
    async fn start(bin: &Path, url: &str, poll: &str, engine: bool) -> anyhow::Result<Self> {
        let mut cmd = tokio::process::Command::new(bin);
        cmd.args(["serve", "--redis-url", url, "--listen", "127.0.0.1:0"])
            .args(["--poll-interval", poll])
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        if !engine {
            cmd.arg("--no-engine");
        }
        let mut child = cmd.spawn().context("start asynqdeck serve")?;
        let mut out = BufReader::new(child.stdout.take().context("stdout")?);
        let mut line = String::new();
        out.read_line(&mut line).await?;
        let addr = line
            .split_whitespace()
            .nth(2)
            .and_then(|u| u.strip_prefix("http://"))
            .map(|a| a.trim_end_matches('/').to_string())
            .with_context(|| format!("unexpected first line {line:?}"))?;
        Ok(Serve { child, addr })
    }

    /// `(VmHWM, VmRSS)` in kB.
    fn memory(&self) -> anyhow::Result<(u64, u64)> {
        let pid = self.child.id().context("no pid")?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let field = |name: &str| -> anyhow::Result<u64> {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse().ok())
                .with_context(|| format!("no {name} in /proc/{pid}/status"))
        };
        Ok((field("VmHWM:")?, field("VmRSS:")?))
    }

    async fn stop(mut self) {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let _ = self.child.wait().await;
    }

    /// `GET path` over HTTP/1.0; the time from connect to the last byte.
    async fn get(&self, path: &str) -> anyhow::Result<Duration> {
        let start = Instant::now();
        let mut s = tokio::net::TcpStream::connect(&self.addr).await?;
        s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).as_bytes())
            .await?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        let took = start.elapsed();
        let head = String::from_utf8_lossy(&raw[..raw.len().min(64)]).into_owned();
        let status: u16 = head
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("bad response {head:?}"))?;
        anyhow::ensure!(status == 200, "GET {path} answered {status}");
        Ok(took)
    }
}

/// Sleeps until `offset` after the next whole second (a new 1 s stats slot).
async fn next_second_at(offset: Duration) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(Duration::from_secs(1) - into + offset).await;
}

/// Sleeps until 20 ms after the next whole second.
async fn next_second() {
    next_second_at(Duration::from_millis(20)).await;
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let n = v.len();
    if n % 2 == 1 {
        ms(v[n / 2])
    } else {
        (ms(v[n / 2 - 1]) + ms(v[n / 2])) / 2.0
    }
}

/// `(calls per command, total usec)` since the last RESETSTAT.
async fn commandstats(
    conn: &mut redis::aio::MultiplexedConnection,
) -> anyhow::Result<(BTreeMap<String, u64>, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut calls = BTreeMap::new();
    let mut usec = 0;
    for line in info.lines() {
        if let Some(rest) = line.strip_prefix("cmdstat_")
            && let Some((name, stats)) = rest.split_once(':')
        {
            for kv in stats.split(',') {
                if let Some(v) = kv.strip_prefix("calls=") {
                    calls.insert(name.to_string(), v.parse()?);
                } else if let Some(v) = kv.strip_prefix("usec=")
                    && name != "info"
                    && name != "config|resetstat"
                {
                    usec += v.parse::<u64>()?;
                }
            }
        }
    }
    Ok((calls, usec))
}

/// used_cpu_user + used_cpu_sys, seconds.
async fn redis_cpu(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<f64> {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    let mut total = 0.0;
    for line in info.lines() {
        if let Some(v) = line
            .strip_prefix("used_cpu_user:")
            .or_else(|| line.strip_prefix("used_cpu_sys:"))
        {
            total += v.trim().parse::<f64>()?;
        }
    }
    Ok(total)
}

/// Redis work of one or more measured windows, summed.
#[derive(Default, Clone)]
struct Work {
    /// Commands per name.
    per: BTreeMap<String, f64>,
    exec_ms: f64,
    cpu_ms: f64,
    /// Windows summed.
    n: f64,
}

impl Work {
    fn commands(&self) -> f64 {
        self.per.values().sum::<f64>() / self.n
    }
    fn exec(&self) -> f64 {
        self.exec_ms / self.n
    }
    fn cpu(&self) -> f64 {
        self.cpu_ms / self.n
    }
    /// The four most frequent commands per window.
    fn top(&self) -> String {
        let mut top: Vec<(&String, &f64)> = self.per.iter().collect();
        top.sort_by(|a, b| b.1.total_cmp(a.1));
        top.iter()
            .take(4)
            .map(|(name, c)| format!("{name} {}", (**c / self.n).round()))
            .collect::<Vec<_>>()
            .join(", ")
    }
    /// Adds `other`'s windows to this one's.
    fn add(&mut self, other: &Work) {
        for (k, v) in &other.per {
            *self.per.entry(k.clone()).or_default() += v;
        }
        self.exec_ms += other.exec_ms;
        self.cpu_ms += other.cpu_ms;
        self.n += other.n;
    }
    /// This work less `other` (per window).
    fn minus(&self, other: &Work) -> Work {
        if self.n == 0.0 || other.n == 0.0 {
            eprintln!("warning: a difference of Redis work with an empty side");
            return Work {
                n: 1.0,
                ..Work::default()
            };
        }
        let mut per = BTreeMap::new();
        for (k, v) in &self.per {
            per.insert(k.clone(), v / self.n);
        }
        for (k, v) in &other.per {
            *per.entry(k.clone()).or_default() -= v / other.n;
        }
        per.retain(|_, v| v.abs() >= 0.5);
        Work {
            per,
            exec_ms: self.exec() - other.exec(),
            cpu_ms: self.cpu() - other.cpu(),
            n: 1.0,
        }
    }
    /// `self + other × k` (per window).
    fn plus_scaled(&self, other: &Work, k: f64) -> Work {
        let mut per = BTreeMap::new();
        for (key, v) in &self.per {
            per.insert(key.clone(), v / self.n);
        }
        for (key, v) in &other.per {
            *per.entry(key.clone()).or_default() += v / other.n * k;
        }
        Work {
            per,
            exec_ms: self.exec() + other.exec() * k,
            cpu_ms: self.cpu() + other.cpu() * k,
            n: 1.0,
        }
    }
}

/// Redis CPU of the idle server (serverCron and the like), ms per second of
/// wall time, measured once before the Redis work and taken out of every
/// window.
static IDLE_CPU_MS_PER_S: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

/// A measured window: the Redis CPU when it began, and when.
struct Window {
    cpu: f64,
    at: Instant,
}

/// Starts a measured window: `SLOWLOG RESET` (every command is logged, see
/// [`run`]) and `CONFIG RESETSTAT` in one `MULTI`, then the Redis CPU so far.
async fn begin(conn: &mut redis::aio::MultiplexedConnection) -> anyhow::Result<Window> {
    // In one transaction, so no command falls between the two resets.
    let _: () = redis::pipe()
        .atomic()
        .cmd("SLOWLOG")
        .arg("RESET")
        .ignore()
        .cmd("CONFIG")
        .arg("RESETSTAT")
        .ignore()
        .query_async(conn)
        .await?;
    Ok(Window {
        cpu: redis_cpu(conn).await?,
        at: Instant::now(),
    })
}

/// Ends a window and adds it to `work`: commands from commandstats (those
/// inside scripts included), exec time from the slow log (top-level
/// commands only, so a script's inner commands are not counted twice), and
/// the CPU delta less the idle CPU of the window's length.
async fn end(
    conn: &mut redis::aio::MultiplexedConnection,
    window: Window,
    work: &mut Work,
) -> anyhow::Result<()> {
    let (calls, _) = commandstats(conn).await?;
    let cpu = (redis_cpu(conn).await? - window.cpu) * 1e3;
    let idle = IDLE_CPU_MS_PER_S.get().copied().unwrap_or(0.0) * window.at.elapsed().as_secs_f64();
    let log: Vec<redis::Value> = redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query_async(conn)
        .await?;
    let mut exec_us = 0i64;
    for entry in &log {
        if let redis::Value::Array(fields) = entry
            && let [_, _, redis::Value::Int(us), redis::Value::Array(args), ..] = fields.as_slice()
        {
            let name = match args.first() {
                Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).to_lowercase(),
                _ => String::new(),
            };
            if !matches!(
                name.as_str(),
                "slowlog" | "info" | "config" | "multi" | "exec"
            ) {
                exec_us += us;
            }
        }
    }
    work.cpu_ms += cpu - idle;
    work.exec_ms += exec_us as f64 / 1e3;
    work.n += 1.0;
    for (name, n) in calls {
        if matches!(name.as_str(), "info" | "multi" | "exec")
            || name.starts_with("config|")
            || name.starts_with("slowlog|")
        {
            continue;
        }
        *work.per.entry(name).or_default() += n as f64;
    }
    Ok(())
}

/// Redis work of `path` with the current slot's snapshot primed first.
async fn warm_work(
    serve: &Serve,
    conn: &mut redis::aio::MultiplexedConnection,
    path: &str,
) -> anyhow::Result<Work> {
    let mut work = Work::default();
    for _ in 0..REDIS_SAMPLES {
        // Well after the slot-start refresh, so none of it is measured; the
        // priming view may find only the previous slot's snapshot and start
        // a refresh, hence the pause before the window.
        next_second_at(Duration::from_millis(300)).await;
        serve.get(path).await?;
        tokio::time::sleep(Duration::from_millis(100)).await;
        let window = begin(conn).await?;
        serve.get(path).await?;
        end(conn, window, &mut work).await?;
    }
    Ok(work)
}

async fn run(samples: usize) -> anyhow::Result<()> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/asynqdeck");
    if !bin.exists() {
        bail!("build it first: cargo build --release --bin asynqdeck");
    }
    let redis = start_redis()?;
    let url = format!("redis://127.0.0.1:{}/0", redis.port);
    // No response timeout: a seeding script runs for seconds.
    let mut conn = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection_with_config(
            &redis::AsyncConnectionConfig::new().set_response_timeout(None),
        )
        .await?;

    eprintln!("seeding {QUEUES} × {PER_QUEUE} + {DEEP} pending tasks ...");
    let t = Instant::now();
    for q in 0..QUEUES {
        seed_queue(&mut conn, &format!("queue-{q:02}"), PER_QUEUE).await?;
    }
    seed_queue(&mut conn, "deep", DEEP).await?;
    let used: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(&mut conn)
        .await?;
    let used = used
        .lines()
        .find_map(|l| l.strip_prefix("used_memory_human:"))
        .unwrap_or("?")
        .trim()
        .to_string();
    println!(
        "Seeded {} pending tasks ({QUEUES} queues × {PER_QUEUE} + `deep` {DEEP}) in {:.1} s; Redis used_memory {used}.\n",
        QUEUES * PER_QUEUE + DEEP,
        t.elapsed().as_secs_f64()
    );

    let deep_last = DEEP.div_ceil(20);
    let tabs = [
        "/queues/deep/pending?page=1&size=20".to_string(),
        format!("/queues/deep/pending?page={}&size=20", deep_last / 2),
        format!("/queues/deep/pending?page={deep_last}&size=20"),
    ];
    let others = [
        "/queues/queue-00/history?days=90".to_string(),
        "/api/queue_stats".to_string(),
    ];

    for q in 0..QUEUES {
        seed_samples(&mut conn, &format!("queue-{q:02}")).await?;
    }
    seed_samples(&mut conn, "deep").await?;

    // Timings, engine on, 5 s slots.
    eprintln!("timings, engine on, --poll-interval 5s ...");
    let serve = Serve::start(&bin, &url, "5s", true).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut times: Vec<(String, &str, f64)> = Vec::new();
    for path in ["/", "/api/queues"] {
        let mut v = Vec::new();
        for _ in 0..samples {
            // Prime the current slot, then time a view that shares it.
            serve.get(path).await?;
            v.push(serve.get(path).await?);
        }
        times.push((path.to_string(), "warm (snapshot shared)", median(v)));
    }
    for path in others.iter().chain(tabs.iter()) {
        let mut v = Vec::new();
        serve.get(path).await?;
        for _ in 0..samples {
            v.push(serve.get(path).await?);
        }
        times.push((path.clone(), "", median(v)));
    }
    let (hwm, rss) = serve.memory()?;
    serve.stop().await;

    // Polling and inline views, engine on, 1 s slots.
    eprintln!("polling and inline views, engine on, --poll-interval 1s ...");
    let serve = Serve::start(&bin, &url, "1s", true).await?;
    serve.get("/").await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for path in ["/", "/api/queues"] {
        let mut v = Vec::new();
        for _ in 0..samples {
            next_second().await;
            v.push(serve.get(path).await?);
        }
        times.push((
            path.to_string(),
            "polling viewer: one view per slot, 20 ms into it (--poll-interval 1s)",
            median(v),
        ));
    }
    for path in ["/", "/api/queues"] {
        let mut v = Vec::new();
        for _ in 0..samples {
            // Two whole slots without a view: no usable snapshot is left.
            next_second().await;
            next_second().await;
            next_second().await;
            v.push(serve.get(path).await?);
        }
        times.push((
            path.to_string(),
            "inline: first view after two idle slots computes the counts (--poll-interval 1s)",
            median(v),
        ));
    }
    let (hwm1, rss1) = serve.memory()?;
    serve.stop().await;

    // Redis work, engine off so nothing else talks to Redis. Every command
    // goes to the slow log (its duration is the command's execution time).
    for (k, v) in [
        ("slowlog-log-slower-than", "0"),
        ("slowlog-max-len", "1000000"),
    ] {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(k)
            .arg(v)
            .query_async(&mut conn)
            .await?;
    }
    eprintln!("idle Redis CPU, 10 s ...");
    let mut idle = Work::default();
    let window = begin(&mut conn).await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let secs = window.at.elapsed().as_secs_f64();
    end(&mut conn, window, &mut idle).await?;
    let idle_rate = idle.cpu_ms / secs;
    IDLE_CPU_MS_PER_S.set(idle_rate).ok();
    println!(
        "Idle Redis CPU (nothing connected but the bench): {idle_rate:.3} ms per second of wall time; taken out of every CPU figure below.\n"
    );
    eprintln!("Redis work of other pages, --no-engine, --poll-interval 1s ...");
    let serve = Serve::start(&bin, &url, "1s", false).await?;
    // Prime: first snapshot and its memory run, which then rests a minute.
    serve.get("/").await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut work: Vec<(String, Work)> = Vec::new();
    work.push(("`/` warm".into(), warm_work(&serve, &mut conn, "/").await?));
    work.push((
        "`/api/queues` warm".into(),
        warm_work(&serve, &mut conn, "/api/queues").await?,
    ));
    for path in others.iter().chain(tabs.iter()) {
        work.push((
            format!("`{path}`"),
            warm_work(&serve, &mut conn, path).await?,
        ));
    }
    serve.stop().await;

    eprintln!("Redis work of the statistics, --no-engine, --poll-interval 1s ...");
    let serve = Serve::start(&bin, &url, "1s", false).await?;
    serve.get("/").await?;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // One view per slot from here on, so the refresher runs at each slot start.
    next_second_at(Duration::from_millis(200)).await;
    serve.get("/").await?;
    let mut polling = Work::default();
    for _ in 0..REDIS_SAMPLES {
        next_second_at(Duration::from_millis(200)).await;
        let window = begin(&mut conn).await?;
        serve.get("/").await?;
        end(&mut conn, window, &mut polling).await?;
    }
    let mut inline = Work::default();
    for _ in 0..REDIS_SAMPLES {
        next_second().await;
        next_second().await;
        next_second().await;
        let window = begin(&mut conn).await?;
        serve.get("/").await?;
        end(&mut conn, window, &mut inline).await?;
    }
    // One window per slot, a viewer polling each: one background refresh per
    // window; those that also read the growth samples (every 30 s) apart.
    next_second_at(Duration::from_millis(200)).await;
    serve.get("/").await?;
    let (mut plain, mut with_growth) = (Work::default(), Work::default());
    for _ in 0..REFRESH_WINDOWS {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let window = begin(&mut conn).await?;
        next_second_at(Duration::from_millis(200)).await;
        serve.get("/").await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut one = Work::default();
        end(&mut conn, window, &mut one).await?;
        let target = if one.per.contains_key("zrevrange") {
            &mut with_growth
        } else {
            &mut plain
        };
        target.add(&one);
    }
    // The same with every queue changed before each window (a counter of
    // each incremented, outside the window): the refresh reads them all.
    let names: Vec<String> = (0..QUEUES)
        .map(|i| format!("queue-{i:02}"))
        .chain(["deep".to_string()])
        .collect();
    let mut changed = Work::default();
    let mut changed_n = 0;
    while changed_n < REDIS_SAMPLES * 2 {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut pipe = redis::pipe();
        for q in &names {
            pipe.cmd("INCR")
                .arg(asynqdeck::broker::keys::processed_total_key(q))
                .ignore();
        }
        let _: () = pipe.query_async(&mut conn).await?;
        let window = begin(&mut conn).await?;
        next_second_at(Duration::from_millis(200)).await;
        serve.get("/").await?;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut one = Work::default();
        end(&mut conn, window, &mut one).await?;
        if !one.per.contains_key("zrevrange") {
            changed.add(&one);
            changed_n += 1;
        }
    }
    serve.stop().await;
    let growth_read = with_growth.minus(&plain);

    eprintln!("Redis work of the memory run, fresh serve processes ...");
    let mut first = Work::default();
    let mut first_ms = Vec::new();
    for _ in 0..REDIS_SAMPLES {
        let serve = Serve::start(&bin, &url, "1h", false).await?;
        let window = begin(&mut conn).await?;
        first_ms.push(serve.get("/").await?);
        tokio::time::sleep(Duration::from_secs(1)).await;
        end(&mut conn, window, &mut first).await?;
        serve.stop().await;
    }
    times.push((
        "/".to_string(),
        "first view of a fresh process (inline counts; memory run starts after it)",
        median(first_ms),
    ));
    // The first view reads every queue with the growth samples; the memory
    // run follows it.
    let memory_run = first.minus(&changed).minus(&growth_read);
    // One viewer at the default 5 s interval: a refresh per view, a growth
    // read every 30 s (6 views) and a memory run every MEMORY_REFRESH
    // (5 min: 60 views); also as it would be with a memory run every minute.
    let memory_every = asynqdeck::web::MEMORY_REFRESH.as_secs_f64();
    let growth_every = asynqdeck::web::GROWTH_REFRESH.as_secs_f64();
    let per_view_5s = plain
        .plus_scaled(&growth_read, 5.0 / growth_every)
        .plus_scaled(&memory_run, 5.0 / memory_every);
    let per_view_5s_1min = plain
        .plus_scaled(&growth_read, 5.0 / growth_every)
        .plus_scaled(&memory_run, 5.0 / 60.0);
    let per_view_5s_changed = changed
        .plus_scaled(&growth_read, 5.0 / growth_every)
        .plus_scaled(&memory_run, 5.0 / memory_every);

    println!("### Response times (client side, median of {samples})\n");
    println!("| request | case | median ms |");
    println!("|---|---|---:|");
    for (path, case, ms) in &times {
        println!("| `{path}` | {case} | {ms:.2} |");
    }
    println!(
        "\n### Redis work (mean of {REDIS_SAMPLES}, `--no-engine`)\n\n\
         | what | commands | Redis exec ms | Redis CPU ms | top commands |\n\
         |---|---:|---:|---:|---|"
    );
    let stats_rows = [
        ("`/` polling viewer's view (its own window)", &polling),
        ("`/` inline view (computes the counts)", &inline),
        (
            "background refresh of one poll interval (one-slot windows with one viewer)",
            &plain,
        ),
        (
            "background refresh when every queue changed in the interval (a counter of each incremented before the window)",
            &changed,
        ),
        (
            "growth-sample read (every 30 s; windows with one, less a plain refresh)",
            &growth_read,
        ),
        (
            "memory run of all 51 queues (first view + 1 s, less a refresh of every queue and a growth read)",
            &memory_run,
        ),
        (
            "**per queues view, one viewer at 5 s**: refresh + growth read × 5/30 + memory run × 5/300",
            &per_view_5s,
        ),
        (
            "the same were the memory run every minute: … + memory run × 5/60",
            &per_view_5s_1min,
        ),
        (
            "the same were every queue changing every interval: refresh of every queue + growth read × 5/30 + memory run × 5/300",
            &per_view_5s_changed,
        ),
    ];
    for (label, w) in stats_rows
        .iter()
        .map(|(l, w)| (l.to_string(), *w))
        .chain(work.iter().map(|(l, w)| (l.clone(), w)))
    {
        println!(
            "| {label} | {:.0} | {:.2} | {:.2} | {} |",
            w.commands(),
            w.exec(),
            w.cpu(),
            w.top()
        );
    }
    println!("\n### Memory of `asynqdeck serve` (engine on)\n");
    println!(
        "- `--poll-interval 5s`, after {} requests: VmHWM {:.1} MB, VmRSS {:.1} MB",
        2 * 2 * samples + 6 * (samples + 1),
        hwm as f64 / 1024.0,
        rss as f64 / 1024.0
    );
    println!(
        "- `--poll-interval 1s`, after {} polling and inline views: VmHWM {:.1} MB, VmRSS {:.1} MB",
        4 * samples + 1,
        hwm1 as f64 / 1024.0,
        rss1 as f64 / 1024.0
    );
    drop(redis);
    Ok(())
}
