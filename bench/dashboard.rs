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
//!    appended as field 3 by the script).
//! 2. Times `GET` requests from the client side (HTTP/1.0 over a fresh
//!    loopback TCP connection, connect to last byte), median of `--samples`:
//!    - against `serve --poll-interval 5s` with the engine on: warm views of
//!      `/` and `/api/queues` (the snapshot of the current slot already
//!      exists), the history page, `/api/queue_stats` and three pages
//!      (first, middle, last) of the `deep` queue's pending tab; then the
//!      serve process's VmHWM and VmRSS;
//!    - against `serve --poll-interval 1s` with the engine on: cold views of
//!      `/` and `/api/queues`, each sent 20 ms after a new 1 s slot starts,
//!      so each computes the statistics snapshot.
//! 3. Redis work per view, against `serve --poll-interval 1s --no-engine`
//!    (so no engine command lands in the measured window): `CONFIG
//!    RESETSTAT` and `INFO cpu` before one request, `INFO commandstats` and
//!    `INFO cpu` after; commands are the `calls` (commands inside Lua
//!    scripts included, minus the INFO itself), "Redis exec" is the sum of
//!    commandstats `usec`, "Redis CPU" the used_cpu_user + used_cpu_sys
//!    delta (whole process, includes the INFO calls). Mean of 5 views.

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

/// Sleeps until 20 ms after the next whole second (a new 1 s stats slot).
async fn next_second() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(Duration::from_secs(1) - into + Duration::from_millis(20)).await;
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

/// Redis work of one view, averaged over [`REDIS_SAMPLES`] views.
struct Work {
    commands: f64,
    exec_ms: f64,
    cpu_ms: f64,
    top: String,
}

/// Measures the Redis work of `path`; `cold` waits for a new 1 s slot first,
/// otherwise the snapshot is primed in the current slot beforehand.
async fn redis_work(
    serve: &Serve,
    conn: &mut redis::aio::MultiplexedConnection,
    path: &str,
    cold: bool,
) -> anyhow::Result<Work> {
    let (mut commands, mut exec, mut cpu) = (0u64, 0u64, 0.0);
    let mut per: BTreeMap<String, u64> = BTreeMap::new();
    for _ in 0..REDIS_SAMPLES {
        if cold {
            next_second().await;
        } else {
            next_second().await;
            serve.get(path).await?;
        }
        let _: () = redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query_async(conn)
            .await?;
        let before = redis_cpu(conn).await?;
        serve.get(path).await?;
        let (calls, usec) = commandstats(conn).await?;
        cpu += redis_cpu(conn).await? - before;
        exec += usec;
        for (name, n) in calls {
            if name == "info" || name == "config|resetstat" {
                continue;
            }
            commands += n;
            *per.entry(name).or_default() += n;
        }
    }
    let n = REDIS_SAMPLES as f64;
    let mut top: Vec<(String, u64)> = per.into_iter().collect();
    top.sort_by_key(|(_, c)| std::cmp::Reverse(*c));
    let top = top
        .iter()
        .take(4)
        .map(|(name, c)| format!("{name} {}", (*c as f64 / n).round()))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(Work {
        commands: commands as f64 / n,
        exec_ms: exec as f64 / n / 1e3,
        cpu_ms: cpu * 1e3 / n,
        top,
    })
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

    // Cold views, engine on, 1 s slots.
    eprintln!("cold views, engine on, --poll-interval 1s ...");
    let serve = Serve::start(&bin, &url, "1s", true).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    for path in ["/", "/api/queues"] {
        let mut v = Vec::new();
        for _ in 0..samples {
            next_second().await;
            v.push(serve.get(path).await?);
        }
        times.push((
            path.to_string(),
            "cold (computes the snapshot; --poll-interval 1s)",
            median(v),
        ));
    }
    let (hwm1, rss1) = serve.memory()?;
    serve.stop().await;

    // Redis work per view, engine off so nothing else talks to Redis.
    eprintln!("Redis work per view, --no-engine, --poll-interval 1s ...");
    let serve = Serve::start(&bin, &url, "1s", false).await?;
    let mut work = Vec::new();
    for (path, cold) in [
        ("/", true),
        ("/", false),
        ("/api/queues", true),
        ("/api/queues", false),
    ] {
        let label = if cold { "cold" } else { "warm" };
        work.push((
            format!("`{path}` {label}"),
            redis_work(&serve, &mut conn, path, cold).await?,
        ));
    }
    for path in others.iter().chain(tabs.iter()) {
        work.push((
            format!("`{path}`"),
            redis_work(&serve, &mut conn, path, false).await?,
        ));
    }
    serve.stop().await;

    println!("### Response times (client side, median of {samples})\n");
    println!("| request | case | median ms |");
    println!("|---|---|---:|");
    for (path, case, ms) in &times {
        println!("| `{path}` | {case} | {ms:.2} |");
    }
    println!(
        "\n### Redis work per view (mean of {REDIS_SAMPLES}, `--no-engine`)\n\n\
         | request | commands | Redis exec ms | Redis CPU ms | top commands |\n\
         |---|---:|---:|---:|---|"
    );
    for (label, w) in &work {
        println!(
            "| {label} | {:.0} | {:.2} | {:.2} | {} |",
            w.commands, w.exec_ms, w.cpu_ms, w.top
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
        "- `--poll-interval 1s`, after {} cold views: VmHWM {:.1} MB, VmRSS {:.1} MB",
        2 * samples,
        hwm1 as f64 / 1024.0,
        rss1 as f64 / 1024.0
    );
    drop(redis);
    Ok(())
}
