//! The dashboard's cost per overview view on one deployment: `asynqdeck
//! serve --no-engine --poll-interval 1s` (the release binary) on Q seeded
//! queues; Redis commands (INFO commandstats, every node) and Redis CPU
//! (used_cpu_user + used_cpu_sys, every node) around single views of `/`
//! (the full page) and `/api/queues` (asynqmon's JSON).
//!
//! Per path, two kinds of view, each repeated `--views` times and averaged,
//! every view three 1 s slots after the previous one, so no snapshot is
//! fresh and the view computes one inline:
//! - *unchanged*: no queue key changed since the last snapshot (key
//!   tracking may answer it with a PING);
//! - *changed*: one task enqueued into every queue just before the view
//!   (outside the measured window), so every queue is read again.
//!
//! Also the first view of a fresh process (`/`, then 1 s for its background
//! work: growth samples and the memory run of every queue). The INFO calls
//! are left out of the command counts. From the CPU, the nodes' own
//! background work is subtracted: their CPU per second over 2 s idle
//! windows (serverCron and, on a cluster, the cluster bus), times the
//! window's length; so is the cost of the INFO snapshots (an empty window).

use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::Context;
use asynqdeck::{Client, EnqueueOptions, Task};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::deploy::{Deployment, Snap};

/// One measured row.
pub struct ViewCost {
    pub deployment: &'static str,
    pub queues: usize,
    pub what: String,
    /// HTTP statuses seen (all 200 when it worked).
    pub statuses: Vec<u16>,
    pub commands: f64,
    pub cpu_us: f64,
    pub top: Vec<(String, f64)>,
}

/// `GET path` over HTTP/1.0; returns the status.
async fn get(addr: &str, path: &str) -> anyhow::Result<u16> {
    let mut s = tokio::net::TcpStream::connect(addr).await?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await?;
    let head = String::from_utf8_lossy(&raw[..raw.len().min(64)]).into_owned();
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("bad response {head:?}"))
}

/// Sleeps until 20 ms after the next whole second (a new 1 s slot).
async fn next_second() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let into = Duration::from_nanos(u64::from(now.subsec_nanos()));
    tokio::time::sleep(Duration::from_secs(1) - into + Duration::from_millis(20)).await;
}

fn queue_names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("view-{i:03}")).collect()
}

/// 20 pending and 5 scheduled (in 1 h) tasks in each of `n` queues.
async fn seed(url: &str, n: usize) -> anyhow::Result<()> {
    let client = Client::connect(url).await?;
    let task = Task::new("bench:view", br#"{"user":42}"#.to_vec());
    for q in queue_names(n) {
        let opts = EnqueueOptions::new().queue(&q);
        for _ in 0..20 {
            client.enqueue(&task, opts.clone()).await?;
        }
        for _ in 0..5 {
            client
                .enqueue(&task, opts.clone().process_in(Duration::from_secs(3600)))
                .await?;
        }
    }
    Ok(())
}

async fn serve(
    bin: &std::path::Path,
    url: &str,
) -> anyhow::Result<(tokio::process::Child, String)> {
    let mut child = tokio::process::Command::new(bin)
        .args(["serve", "--redis-url", url, "--listen", "127.0.0.1:0"])
        .args(["--poll-interval", "1s", "--no-engine"])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("start asynqdeck serve")?;
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

/// Sums of several windows.
#[derive(Default)]
struct Acc {
    n: usize,
    cpu_us: f64,
    /// Wall time of the windows, s.
    secs: f64,
    commands: std::collections::BTreeMap<String, u64>,
    statuses: Vec<u16>,
}

impl Acc {
    fn add(&mut self, before: &Snap, after: &Snap, secs: f64) {
        self.n += 1;
        self.secs += secs;
        self.cpu_us += after.cpu_us - before.cpu_us;
        for (c, k) in after.commands_since(before) {
            *self.commands.entry(c).or_default() += k;
        }
    }

    /// The mean row; `base` = (CPU µs of an empty window, background CPU
    /// µs per second).
    fn row(self, d: &Deployment, queues: usize, what: &str, base: (f64, f64)) -> ViewCost {
        let n = self.n.max(1) as f64;
        let idle_cpu = base.0 + base.1 * self.secs / n;
        let mut top: Vec<(String, f64)> = self
            .commands
            .iter()
            .map(|(c, k)| (c.clone(), *k as f64 / n))
            .collect();
        top.sort_by(|a, b| b.1.total_cmp(&a.1));
        top.truncate(6);
        ViewCost {
            deployment: d.kind.name(),
            queues,
            what: what.to_string(),
            statuses: self.statuses,
            commands: self.commands.values().sum::<u64>() as f64 / n,
            cpu_us: (self.cpu_us / n - idle_cpu).max(0.0),
            top,
        }
    }
}

/// Every row for `queues` queues on `d`.
pub async fn run(
    d: &mut Deployment,
    bin: &std::path::Path,
    queues: usize,
    views: usize,
) -> anyhow::Result<Vec<ViewCost>> {
    d.flush().await?;
    seed(&d.url(), queues).await?;
    let client = Client::connect(&d.url()).await?;
    let names = queue_names(queues);

    // The INFO snapshots' own CPU (empty windows), and the nodes'
    // background CPU per second (2 s idle windows).
    let mut empty = Acc::default();
    let mut idle = Acc::default();
    for _ in 0..views {
        let b = d.snap().await?;
        let a = d.snap().await?;
        empty.add(&b, &a, 0.0);
    }
    let empty_cpu = empty.cpu_us / empty.n.max(1) as f64;
    for _ in 0..3 {
        let b = d.snap().await?;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let a = d.snap().await?;
        idle.add(&b, &a, 2.0);
    }
    let per_sec = ((idle.cpu_us / idle.n as f64 - empty_cpu) / 2.0).max(0.0);
    let base = (empty_cpu, per_sec);

    let mut rows = Vec::new();
    let (mut child, addr) = serve(bin, &d.url()).await?;
    let mut first = Acc::default();
    let t0 = Instant::now();
    let b = d.snap().await?;
    first.statuses.push(get(&addr, "/").await?);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let a = d.snap().await?;
    first.add(&b, &a, t0.elapsed().as_secs_f64());
    rows.push(first.row(d, queues, "first view of a process, `/` + 1 s", base));

    for path in ["/", "/api/queues"] {
        for changed in [false, true] {
            let mut acc = Acc::default();
            for _ in 0..views {
                for _ in 0..3 {
                    next_second().await;
                }
                if changed {
                    for q in &names {
                        let t = Task::new("bench:view", b"x".to_vec());
                        client.enqueue(&t, EnqueueOptions::new().queue(q)).await?;
                    }
                }
                let t0 = Instant::now();
                let b = d.snap().await?;
                acc.statuses.push(get(&addr, path).await?);
                let a = d.snap().await?;
                acc.add(&b, &a, t0.elapsed().as_secs_f64());
            }
            let what = format!(
                "`{path}`, {}",
                if changed {
                    "every queue changed"
                } else {
                    "nothing changed"
                }
            );
            rows.push(acc.row(d, queues, &what, base));
        }
    }
    if let Some(pid) = child.id() {
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    let _ = child.wait().await;
    Ok(rows)
}

/// The cost-per-view table.
pub fn print(rows: &[ViewCost]) {
    println!(
        "### Dashboard: Redis cost per overview view (`serve --no-engine --poll-interval 1s`)\n"
    );
    println!(
        "| deployment | queues | view | HTTP | Redis commands / view | Redis CPU µs / view (all nodes) | top commands / view |"
    );
    println!("|---|---:|---|---|---:|---:|---|");
    for r in rows {
        let mut st = r.statuses.clone();
        st.sort_unstable();
        st.dedup();
        let st: Vec<String> = st.iter().map(u16::to_string).collect();
        let top: Vec<String> = r.top.iter().map(|(c, n)| format!("{c} {n:.1}")).collect();
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.0} | {} |",
            r.deployment,
            r.queues,
            r.what,
            st.join(","),
            r.commands,
            r.cpu_us,
            top.join(", ")
        );
    }
    println!();
}
