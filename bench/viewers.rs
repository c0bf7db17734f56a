//! Redis commands per minute of `asynqdeck serve` with 0, 1 and 10 viewers
//! polling the queues page (issue 4: "ten open browser tabs must not mean
//! ten times the Redis work").
//!
//! ```text
//! cargo build --release --bin asynqdeck
//! cargo run --release --example bench_viewers -- [--queues 50] [--seconds 60]
//! ```
//!
//! What it does (Markdown on stdout, progress on stderr):
//! 1. Starts a private redis-server on a free loopback port (`--save ""
//!    --appendonly no`), killed when the bench ends, and seeds `--queues`
//!    queues, each with 100 pending, 20 scheduled (in 1 h), 20 retry (in
//!    1 h) and 20 archived tasks, so each state has more tasks than the
//!    memory estimate samples.
//!    Each queue also gets a full hour of outage samples (720, one per 5 s,
//!    as the engine's sampler writes them), so every snapshot reads a
//!    realistic series whether the engine runs or not.
//! 2. Calibration, engine off: the commands of one statistics snapshot (a
//!    view after two idle 1 s slots computes it inline; no growth samples or
//!    memory run are due then) and of a fresh process's first view plus 1 s
//!    (a snapshot with the growth samples, and the memory run of every
//!    queue), and the `MEMORY USAGE` calls of one memory run.
//! 3. For each scenario (engine off × 0, 1, 10, 50 viewers; on × 0, 1, 10) starts
//!    `target/release/asynqdeck serve --poll-interval 5s` (plus
//!    `--no-engine` where off), waits 6 s (start-up ticks), runs
//!    `CONFIG RESETSTAT`, then runs the viewers for `--seconds`: each viewer
//!    loads `/` once, then requests the live fragment (`GET /` with
//!    `HX-Request: true`, what htmx sends) every 5 s; viewer i starts
//!    i × 5 s / n after the others, so the tabs poll out of phase as real
//!    ones do. Then `INFO commandstats` gives every command Redis ran
//!    (commands inside Lua scripts included), minus the INFO itself, scaled
//!    to one minute, and the Redis CPU (used_cpu_user + used_cpu_sys) per
//!    minute. "snapshots / min" counts the snapshots by their `PING` (no
//!    queue changed since the last, key tracking) and `EXEC` calls (one per
//!    transaction; a snapshot that finds a key kind it did not expect takes
//!    two) per 100 queues; nothing else `serve` sends either; "memory runs /
//!    min" is the `MEMORY USAGE` calls per minute
//!    over those of one run. The dashboard is stopped with SIGTERM.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use asynqdeck::broker::Broker;
use asynqdeck::{Client, EnqueueOptions, Task};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

const POLL: Duration = Duration::from_secs(5);

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: u64| -> anyhow::Result<u64> {
        match args.iter().position(|a| a == name) {
            Some(i) => args
                .get(i + 1)
                .context("missing value")?
                .parse()
                .with_context(|| format!("{name} takes a number")),
            None => Ok(default),
        }
    };
    let queues = flag("--queues", 50)? as usize;
    let seconds = flag("--seconds", 60)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(run(queues, Duration::from_secs(seconds)))
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

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn start_redis() -> anyhow::Result<Redis> {
    let port = free_port()?;
    let dir = std::env::temp_dir().join(format!("asynqdeck-bench-viewers-{port}"));
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

async fn seed(url: &str, queues: usize) -> anyhow::Result<()> {
    let client = Client::connect(url).await?;
    let broker = Broker::connect(url).await?;
    let task = Task::new(
        "bench:view",
        br#"{"user":42,"note":"viewer bench"}"#.to_vec(),
    );
    for q in 0..queues {
        let queue = format!("queue-{q:02}");
        let opts = EnqueueOptions::new().queue(&queue);
        // 40 to fail (20 retry, 20 archived), then 100 pending, 20 scheduled.
        for _ in 0..40 {
            client.enqueue(&task, opts.clone()).await?;
        }
        let now = chrono::Utc::now();
        let leased = broker
            .dequeue(&queue, 40, now + chrono::Duration::seconds(30))
            .await?;
        for (i, t) in leased.into_iter().enumerate() {
            let t = t.map_err(|(id, e)| anyhow::anyhow!("{id}: {e}"))?;
            if i < 20 {
                broker
                    .retry(&t, now + chrono::Duration::hours(1), "boom", true)
                    .await?;
            } else {
                broker.archive(&t, "boom").await?;
            }
        }
        for _ in 0..100 {
            client.enqueue(&task, opts.clone()).await?;
        }
        for _ in 0..20 {
            client
                .enqueue(&task, opts.clone().process_in(Duration::from_secs(3600)))
                .await?;
        }
    }
    let mut conn = redis::Client::open(url)?
        .get_multiplexed_async_connection()
        .await?;
    let now = chrono::Utc::now().timestamp();
    for q in 0..queues {
        let key = asynqdeck::broker::samples_key(&format!("queue-{q:02}"));
        let mut pipe = redis::pipe();
        for i in 0..720i64 {
            let t = now - i * 5;
            pipe.cmd("ZADD")
                .arg(&key)
                .arg(t)
                .arg(format!("{t}:20:20"))
                .ignore();
        }
        pipe.cmd("EXPIRE").arg(&key).arg(7200).ignore();
        let _: () = pipe.query_async(&mut conn).await?;
    }
    Ok(())
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

/// `GET path` over HTTP/1.0; returns the status.
async fn get(addr: &str, path: &str, htmx: bool) -> anyhow::Result<u16> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    let hx = if htmx { "HX-Request: true\r\n" } else { "" };
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n{hx}\r\n").as_bytes())
        .await?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let head = String::from_utf8_lossy(&raw[..raw.len().min(64)]).into_owned();
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("bad response {head:?}"))
}

async fn commandstats(
    conn: &mut redis::aio::MultiplexedConnection,
) -> anyhow::Result<BTreeMap<String, u64>> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    let mut out = BTreeMap::new();
    for line in info.lines() {
        if let Some(rest) = line.strip_prefix("cmdstat_")
            && let Some((name, stats)) = rest.split_once(':')
            && let Some(calls) = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))
        {
            out.insert(name.to_string(), calls.parse()?);
        }
    }
    Ok(out)
}

struct Outcome {
    total: u64,
    /// Redis CPU per minute, ms.
    cpu_ms: f64,
    per_command: BTreeMap<String, u64>,
    requests: u64,
}

async fn scenario(
    bin: &std::path::Path,
    url: &str,
    conn: &mut redis::aio::MultiplexedConnection,
    engine: bool,
    viewers: usize,
    span: Duration,
) -> anyhow::Result<Outcome> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(["serve", "--redis-url", url, "--listen", "127.0.0.1:0"])
        .args(["--poll-interval", "5s"])
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
    tokio::time::sleep(Duration::from_secs(6)).await;

    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await?;
    let cpu_before = redis_cpu(conn).await?;
    let start = tokio::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..viewers {
        let addr = addr.clone();
        let offset = POLL.mul_f64(i as f64 / viewers as f64);
        tasks.push(tokio::spawn(async move {
            let mut n = 0u64;
            tokio::time::sleep(offset).await;
            let mut first = true;
            let mut next = tokio::time::Instant::now();
            while next < start + span {
                tokio::time::sleep_until(next).await;
                let status = get(&addr, "/", !first).await?;
                anyhow::ensure!(status == 200, "GET / answered {status}");
                first = false;
                n += 1;
                next += POLL;
            }
            anyhow::Ok(n)
        }));
    }
    tokio::time::sleep_until(start + span).await;
    let per_command = commandstats(conn).await?;
    let cpu = redis_cpu(conn).await? - cpu_before;
    let elapsed = start.elapsed();
    let mut requests = 0;
    for t in tasks {
        requests += t.await??;
    }
    // The INFO just sent counts itself.
    let total = per_command.values().sum::<u64>().saturating_sub(1);
    let scale = 60.0 / elapsed.as_secs_f64();
    if let Some(pid) = child.id() {
        // SIGTERM for a clean stop (the heartbeat deletes its entry).
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let _ = child.wait().await;
    Ok(Outcome {
        total: (total as f64 * scale).round() as u64,
        cpu_ms: cpu * 1e3 * scale,
        per_command: per_command
            .into_iter()
            .map(|(k, v)| (k, (v as f64 * scale).round() as u64))
            .collect(),
        requests,
    })
}

/// Starts `serve --no-engine --poll-interval <poll>`; returns it and its address.
async fn serve_no_engine(
    bin: &std::path::Path,
    url: &str,
    poll: &str,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let mut child = tokio::process::Command::new(bin)
        .args(["serve", "--redis-url", url, "--listen", "127.0.0.1:0"])
        .args(["--poll-interval", poll, "--no-engine"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut out = BufReader::new(child.stdout.take().context("stdout")?);
    let mut line = String::new();
    out.read_line(&mut line).await?;
    let addr = line
        .split_whitespace()
        .nth(2)
        .and_then(|u| u.strip_prefix("http://"))
        .map(|a| a.trim_end_matches('/').to_string())
        .with_context(|| format!("unexpected first line {line:?}"))?;
    Ok((child, addr))
}

/// Sleeps until 20 ms after the next whole second (a new 1 s slot).
async fn next_second() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(Duration::from_secs(1) - into + Duration::from_millis(20)).await;
}

/// What one statistics snapshot and a process's first view cost Redis.
struct Calibration {
    /// Commands of one snapshot (counts of every queue, no growth samples).
    snapshot: u64,
    /// Commands of a fresh process's first view and its background work:
    /// a snapshot with the growth samples, and the memory run of every queue.
    first_view: u64,
    /// `MEMORY USAGE` calls of one memory run.
    memory_usage_calls: u64,
}

/// Measures [`Calibration`] with the engine off, nothing else running.
async fn calibrate(
    bin: &std::path::Path,
    url: &str,
    conn: &mut redis::aio::MultiplexedConnection,
) -> anyhow::Result<Calibration> {
    // First view of a fresh process: a snapshot with the growth samples,
    // then the memory run.
    let (mut child, addr) = serve_no_engine(bin, url, "1s").await?;
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await?;
    anyhow::ensure!(get(&addr, "/", false).await? == 200);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first = commandstats(conn).await?;
    // Three slot starts later no usable snapshot is left: a view computes
    // one inline, without growth samples (read every 30 s) or memory run
    // (every 5 min).
    next_second().await;
    next_second().await;
    next_second().await;
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(conn)
        .await?;
    anyhow::ensure!(get(&addr, "/", false).await? == 200);
    let inline = commandstats(conn).await?;
    let _ = child.kill().await;
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>().saturating_sub(1);
    Ok(Calibration {
        snapshot: total(&inline),
        first_view: total(&first),
        memory_usage_calls: first.get("memory|usage").copied().unwrap_or(0),
    })
}

async fn run(queues: usize, span: Duration) -> anyhow::Result<()> {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/release/asynqdeck");
    if !bin.exists() {
        bail!("build it first: cargo build --release --bin asynqdeck");
    }
    let redis = start_redis()?;
    let url = format!("redis://127.0.0.1:{}/0", redis.port);
    eprintln!("seeding {queues} queues ...");
    seed(&url, queues).await?;
    let mut conn = redis::Client::open(url.as_str())?
        .get_multiplexed_async_connection()
        .await?;

    let cal = calibrate(&bin, &url, &mut conn).await?;
    println!(
        "One statistics snapshot of {queues} queues with no key changed since the previous (key tracking) costs Redis {} commands; the first view of a process (every queue read, with the growth samples, and the memory run of every queue, {} of them MEMORY USAGE) {} commands.\n",
        cal.snapshot, cal.memory_usage_calls, cal.first_view
    );
    println!(
        "| engine | viewers | page requests | Redis commands / min | Redis CPU ms / min | snapshots / min | memory runs / min | top commands / min |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |");
    for (engine, viewers) in [
        (false, 0),
        (false, 1),
        (false, 10),
        (false, 50),
        (true, 0),
        (true, 1),
        (true, 10),
    ] {
        eprintln!("engine {engine}, {viewers} viewers, {span:?} ...");
        let o = scenario(&bin, &url, &mut conn, engine, viewers, span).await?;
        // A snapshot sends per 100 queues one PING (no queue changed: key
        // tracking) or one or more MULTI/EXEC (queues read); nothing else
        // `serve` runs sends either (its engine PINGs only with a health
        // check, which `serve` has not).
        let per_command = |c: &str| o.per_command.get(c).copied().unwrap_or(0) as f64;
        let snapshots = (per_command("ping") + per_command("exec")) / queues.div_ceil(100) as f64;
        let runs = o.per_command.get("memory|usage").copied().unwrap_or(0) as f64
            / cal.memory_usage_calls.max(1) as f64;
        let mut top: Vec<(&String, &u64)> = o.per_command.iter().collect();
        top.sort_by_key(|(_, n)| std::cmp::Reverse(**n));
        let top: Vec<String> = top
            .iter()
            .filter(|(name, _)| name.as_str() != "info" && name.as_str() != "config|resetstat")
            .take(5)
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        println!(
            "| {} | {viewers} | {} | {} | {:.1} | {snapshots:.1} | {runs:.1} | {} |",
            if engine { "on" } else { "off" },
            o.requests,
            o.total,
            o.cpu_ms,
            top.join(", ")
        );
    }
    drop(redis);
    Ok(())
}
