//! Redis instructions per task of the worker's script calls, counted by
//! valgrind (callgrind) inside a private redis-server: a measure that does
//! not drift with the host's speed, unlike the CPU times of `bench`.
//!
//! ```text
//! cargo run --release --example bench_instructions -- [--tasks 10200] [--calls 100] [--layout 10x1]... [--keep]
//! ```
//!
//! Needs `redis-server` and `valgrind` on the PATH. For each layout it starts
//! a redis-server under `valgrind --tool=callgrind
//! --toggle-collect=evalShaCommand` (only EVALSHA's work is counted: the
//! script, the commands it runs, the reply), enqueues `--tasks` tasks with
//! our `Client`, zeroes the counters (`callgrind_control -z`), then makes
//! `--calls` steady-state `Broker::done_and_dequeue` calls: each finishes the
//! tasks the previous call leased and leases B more, as the fetch loop does
//! with no-op handlers. Layouts: B = 1, 10, 50 with one batch in flight
//! (active and lease hold just that batch: the fetch loop at concurrency
//! C = B), and B = 10, 50 with two batches in flight (the other batch stays
//! in active: concurrency ≥ 64 pipelines two calls, or another server shares
//! the queue). `--layout BxF` (repeatable) runs only the layouts named.
//! `SHUTDOWN NOSAVE` writes the counts; Markdown goes to stdout. `--keep`
//! keeps each callgrind output (its path goes to stderr) for
//! `callgrind_annotate --inclusive=yes`.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use asynqdeck::broker::Broker;
use asynqdeck::broker::proto::TaskMessage;
use asynqdeck::{Client, EnqueueOptions, Task};
use futures_util::stream::{self, StreamExt};

const QUEUE: &str = "default";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str, default: usize| -> anyhow::Result<usize> {
        match args.iter().position(|a| a == name) {
            Some(i) => args
                .get(i + 1)
                .context("missing value")?
                .parse()
                .with_context(|| format!("{name} takes a number")),
            None => Ok(default),
        }
    };
    let (tasks, calls) = (flag("--tasks", 10200)?, flag("--calls", 100)?);
    let keep = args.iter().any(|a| a == "--keep");
    let mut layouts = Vec::new();
    for (i, a) in args.iter().enumerate() {
        if a == "--layout" {
            let v = args.get(i + 1).context("--layout takes BxF")?;
            let (b, f) = v.split_once('x').context("--layout takes BxF")?;
            layouts.push((b.parse()?, f.parse()?));
        }
    }
    if layouts.is_empty() {
        layouts = vec![(1, 1), (10, 1), (50, 1), (10, 2), (50, 2)];
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!(
        "### Redis instructions per task of `done_and_dequeue` (callgrind, {calls} calls per layout)\n"
    );
    println!("| batch B | batches in flight | instructions per call | instructions per task |");
    println!("|---:|---:|---:|---:|");
    for (batch, in_flight) in layouts {
        if tasks < batch * in_flight * (calls + 2) {
            bail!("--tasks {tasks} is too few for {calls} calls of {batch} × {in_flight}");
        }
        let total = rt.block_on(layout(tasks, calls, batch, in_flight, keep))?;
        let per_call = total as f64 / calls as f64;
        println!(
            "| {batch} | {in_flight} | {per_call:.0} | {:.0} |",
            per_call / batch as f64
        );
    }
    Ok(())
}

/// Instructions counted in EVALSHA over `calls` steady-state calls.
async fn layout(
    tasks: usize,
    calls: usize,
    batch: usize,
    in_flight: usize,
    keep: bool,
) -> anyhow::Result<u64> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let dir = std::env::temp_dir().join(format!("asynqdeck-bench-instr-{port}"));
    std::fs::create_dir_all(&dir)?;
    let out: PathBuf = dir.join("callgrind.out");
    let mut redis = std::process::Command::new("valgrind")
        .args(["--tool=callgrind", "--toggle-collect=evalShaCommand"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .args([
            "redis-server",
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
        ])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("valgrind and redis-server must be installed")?;
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            let _ = redis.kill();
            bail!("redis-server under valgrind did not start");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let url = format!("redis://127.0.0.1:{port}/0");
    let broker = Broker::connect(&url).await?;
    let client = Client::from_broker(broker.clone());
    eprintln!("bench: B={batch} × {in_flight}: enqueueing {tasks} tasks under valgrind");
    stream::iter(0..tasks)
        .map(|i| {
            let client = client.clone();
            async move {
                client
                    .enqueue(
                        &Task::new("bench:noop", i.to_string().into_bytes()),
                        EnqueueOptions::new(),
                    )
                    .await
            }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let lease_until = chrono::Utc::now() + chrono::Duration::seconds(600);
    // Batches in flight: each entry is what one call leased last.
    let mut held: Vec<Vec<TaskMessage>> = Vec::new();
    for _ in 0..in_flight {
        held.push(lease(&broker, &[], batch, lease_until).await?);
    }
    let zeroed = std::process::Command::new("callgrind_control")
        .args(["-z", &redis.id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()?;
    if !zeroed.success() {
        bail!("callgrind_control -z failed");
    }
    for call in 0..calls {
        let slot = call % in_flight;
        let finishing = std::mem::take(&mut held[slot]);
        held[slot] = lease(&broker, &finishing, batch, lease_until).await?;
    }
    let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query_async(
            &mut redis::Client::open(url.as_str())?
                .get_multiplexed_async_connection()
                .await?,
        )
        .await;
    redis.wait()?;
    let text = std::fs::read_to_string(&out).context("callgrind output")?;
    if keep {
        eprintln!("bench: B={batch} × {in_flight}: kept {}", out.display());
    } else {
        let _ = std::fs::remove_dir_all(&dir);
    }
    // The part written after the zeroing: its "summary:" (or "totals:") line.
    text.lines()
        .rev()
        .find_map(|l| {
            l.strip_prefix("summary: ")
                .or_else(|| l.strip_prefix("totals: "))
        })
        .and_then(|v| v.trim().parse().ok())
        .context("no totals in the callgrind output")
}

/// One fetch-loop call: finishes `finishing`, leases up to `batch`.
async fn lease(
    broker: &Broker,
    finishing: &[TaskMessage],
    batch: usize,
    lease_until: chrono::DateTime<chrono::Utc>,
) -> anyhow::Result<Vec<TaskMessage>> {
    let refs: Vec<&TaskMessage> = finishing.iter().collect();
    let (outcomes, leased) = broker
        .done_and_dequeue(QUEUE, &refs, batch, lease_until)
        .await?;
    if outcomes
        .iter()
        .any(|o| *o != asynqdeck::broker::DoneOutcome::Done)
    {
        bail!("a finish failed: {outcomes:?}");
    }
    let leased: Vec<TaskMessage> = leased
        .into_iter()
        .map(|r| {
            r.map(|w| w.msg)
                .map_err(|(id, e)| anyhow::anyhow!("{id}: {e}"))
        })
        .collect::<anyhow::Result<_>>()?;
    if leased.len() != batch {
        bail!("leased {} of {batch}", leased.len());
    }
    Ok(leased)
}
