//! The programs the bench runs: the `asynqdeck` binary (`serve`, engine on),
//! asynqmon v0.7.2 (built from the Go module proxy with `go install
//! github.com/hibiken/asynqmon/cmd/asynqmon@v0.7.2`, which builds it with its
//! own go.mod: asynq v0.24.1, the embedded React UI) and the Go peer
//! (`interop/cmd/asynq-peer`, its `latency` producer). Every child dies with
//! the bench (`PR_SET_PDEATHSIG`) and on drop.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The asynqmon release the issue compares against.
pub const ASYNQMON_VERSION: &str = "v0.7.2";

/// Paths of the programs, and why asynqmon is missing when it is.
pub struct Tools {
    pub asynqdeck: PathBuf,
    pub go_peer: PathBuf,
    pub asynqmon: Option<PathBuf>,
    pub asynqmon_note: String,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Finds or builds the three programs. `BENCH_ASYNQDECK`, `BENCH_GO_PEER`
/// and `BENCH_ASYNQMON` name built ones (e.g. a debug `asynqdeck` while
/// developing); otherwise `target/release/asynqdeck` (build it first), the
/// Go peer built into `target/asynq-peer-bench` and asynqmon installed into
/// `target/asynqmon-v0.7.2/` (kept between runs). Errors: no asynqdeck
/// binary, or the Go peer does not build; asynqmon failing to build only
/// leaves it out (`asynqmon_note` says why).
pub fn tools(with_asynqmon: bool) -> anyhow::Result<Tools> {
    let asynqdeck = match std::env::var("BENCH_ASYNQDECK") {
        Ok(p) => PathBuf::from(p),
        Err(_) => root().join("target/release/asynqdeck"),
    };
    if !asynqdeck.exists() {
        bail!(
            "{} is missing: cargo build --release --bin asynqdeck",
            asynqdeck.display()
        );
    }
    let go_peer = match std::env::var("BENCH_GO_PEER") {
        Ok(p) => PathBuf::from(p),
        Err(_) => {
            let out = root().join("target/asynq-peer-bench");
            eprintln!("bench_scale: building the Go peer");
            let status = std::process::Command::new("go")
                .current_dir(root().join("interop"))
                .args(["build", "-o"])
                .arg(&out)
                .arg("./cmd/asynq-peer")
                .status()
                .context("go must be installed to build the Go peer")?;
            if !status.success() {
                bail!("go build ./cmd/asynq-peer failed");
            }
            out
        }
    };
    let (asynqmon, asynqmon_note) = if !with_asynqmon {
        (None, "left out (--no-asynqmon)".to_string())
    } else if let Ok(p) = std::env::var("BENCH_ASYNQMON") {
        (Some(PathBuf::from(&p)), format!("{ASYNQMON_VERSION} ({p})"))
    } else {
        match build_asynqmon() {
            Ok(p) => (
                Some(p),
                format!(
                    "{ASYNQMON_VERSION} (`go install github.com/hibiken/asynqmon/cmd/asynqmon@{ASYNQMON_VERSION}`)"
                ),
            ),
            Err(e) => {
                eprintln!("bench_scale: asynqmon left out: {e:#}");
                (None, format!("not built: {e:#}"))
            }
        }
    };
    Ok(Tools {
        asynqdeck,
        go_peer,
        asynqmon,
        asynqmon_note,
    })
}

/// `go install …/cmd/asynqmon@v0.7.2` into `target/asynqmon-v0.7.2/`
/// unless it is there already.
fn build_asynqmon() -> anyhow::Result<PathBuf> {
    let dir = root().join(format!("target/asynqmon-{ASYNQMON_VERSION}"));
    let bin = dir.join("asynqmon");
    if bin.exists() {
        return Ok(bin);
    }
    eprintln!("bench_scale: building asynqmon {ASYNQMON_VERSION} from the Go module proxy");
    std::fs::create_dir_all(&dir)?;
    // Outside any module, so only asynqmon's own go.mod counts.
    let status = std::process::Command::new("go")
        .current_dir(std::env::temp_dir())
        .env("GOBIN", &dir)
        .env("GOFLAGS", "-buildvcs=false")
        .args(["install"])
        .arg(format!(
            "github.com/hibiken/asynqmon/cmd/asynqmon@{ASYNQMON_VERSION}"
        ))
        .status()
        .context("go must be installed to build asynqmon")?;
    if !status.success() || !bin.exists() {
        bail!("go install github.com/hibiken/asynqmon/cmd/asynqmon@{ASYNQMON_VERSION} failed");
    }
    Ok(bin)
}

/// Which dashboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Ours,
    Asynqmon,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Ours => "asynqdeck serve (engine on)",
            Side::Asynqmon => "asynqmon v0.7.2",
        }
    }
}

/// A running dashboard on `addr` (`127.0.0.1:PORT`).
pub struct Dashboard {
    pub side: Side,
    pub addr: String,
    child: tokio::process::Child,
}

fn dies_with_us(cmd: &mut tokio::process::Command) {
    // SAFETY: prctl is async-signal-safe; the child dies with the bench.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl Dashboard {
    /// Starts `side` on the Redis at `redis_port` and returns once it
    /// accepts connections (ours: once it printed its URL; asynqmon: once
    /// its port answers a TCP connect; no HTTP request is sent, so the
    /// first one is cold).
    pub async fn start(tools: &Tools, side: Side, redis_port: u16) -> anyhow::Result<Self> {
        match side {
            Side::Ours => Self::ours(&tools.asynqdeck, redis_port).await,
            Side::Asynqmon => {
                let bin = tools.asynqmon.as_ref().context("asynqmon is not built")?;
                Self::asynqmon(bin, redis_port).await
            }
        }
    }

    /// `asynqdeck serve --redis-url redis://127.0.0.1:P/0 --listen
    /// 127.0.0.1:0` (engine on, default poll interval 5 s).
    async fn ours(bin: &Path, redis_port: u16) -> anyhow::Result<Self> {
        let mut cmd = tokio::process::Command::new(bin);
        cmd.arg("serve")
            .args(["--redis-url", &format!("redis://127.0.0.1:{redis_port}/0")])
            .args(["--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        dies_with_us(&mut cmd);
        let mut child = cmd.spawn().context("start asynqdeck serve")?;
        let mut out = BufReader::new(child.stdout.take().context("stdout")?);
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(60), out.read_line(&mut line))
            .await
            .context("asynqdeck serve printed no URL within 60 s")??;
        let addr = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("http://"))
            .map(|a| a.trim_end_matches('/').to_string())
            .with_context(|| format!("unexpected first line {line:?}"))?;
        // Keep reading (and dropping) its stdout so it never blocks on it.
        tokio::spawn(async move {
            let mut sink = String::new();
            while out.read_line(&mut sink).await.unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        Ok(Dashboard {
            side: Side::Ours,
            addr,
            child,
        })
    }

    /// `asynqmon --port P --redis-addr 127.0.0.1:R` (it has no listen
    /// address flag: it listens on every interface, on a free port); its
    /// log goes to `asynqmon-<port>.log` in the temp directory.
    async fn asynqmon(bin: &Path, redis_port: u16) -> anyhow::Result<Self> {
        let port = free_port()?;
        let log = std::fs::File::create(std::env::temp_dir().join(format!("asynqmon-{port}.log")))?;
        let mut cmd = tokio::process::Command::new(bin);
        cmd.args(["--port", &port.to_string()])
            .args(["--redis-addr", &format!("127.0.0.1:{redis_port}")])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true);
        dies_with_us(&mut cmd);
        let mut child = cmd.spawn().context("start asynqmon")?;
        let deadline = Instant::now() + Duration::from_secs(30);
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            if let Some(status) = child.try_wait()? {
                bail!("asynqmon exited at start: {status}");
            }
            if Instant::now() > deadline {
                bail!("asynqmon did not listen on {port} within 30 s");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Dashboard {
            side: Side::Asynqmon,
            addr: format!("127.0.0.1:{port}"),
            child,
        })
    }

    /// VmRSS of the process, kB (0 when it cannot be read).
    pub fn rss_kb(&self) -> u64 {
        let Some(pid) = self.child.id() else {
            return 0;
        };
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or(0)
    }

    /// SIGTERM, then waits (SIGKILL after 10 s).
    pub async fn stop(mut self) {
        terminate(&mut self.child).await;
    }
}

/// SIGTERM `child` and wait for it (SIGKILL after 10 s).
pub async fn terminate(child: &mut tokio::process::Child) {
    if let Some(pid) = child.id() {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) };
    }
    if tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// The Go producer of `asynq-peer latency`: enqueues `rate` tasks/s into
/// queue `other` with Go's asynq Client until [`Producer::finish`].
pub struct Producer {
    child: tokio::process::Child,
}

/// What the producer saw: latency from the scheduled send to Enqueue's
/// return (ms) over every enqueue (a failed one with its time to fail),
/// the p99 of the successful ones alone, and the failures.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    pub sent: u64,
    pub errors: u64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub ok_p99_ms: f64,
    pub over_20ms: u64,
    pub error_samples: Vec<String>,
}

impl Producer {
    pub fn start(tools: &Tools, redis_port: u16, rate: u32) -> anyhow::Result<Self> {
        let mut cmd = tokio::process::Command::new(&tools.go_peer);
        cmd.args(["--redis", &format!("127.0.0.1:{redis_port}"), "latency"])
            .args([
                "--rate",
                &rate.to_string(),
                "--for",
                "1h",
                "--queue",
                "other",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        dies_with_us(&mut cmd);
        Ok(Producer {
            child: cmd.spawn().context("start asynq-peer latency")?,
        })
    }

    /// Stops it (SIGTERM) and reads its JSON line.
    pub async fn finish(mut self) -> anyhow::Result<Latency> {
        use tokio::io::AsyncReadExt;
        let mut stdout = self.child.stdout.take().context("stdout")?;
        terminate(&mut self.child).await;
        let mut text = String::new();
        stdout.read_to_string(&mut text).await?;
        let v: serde_json::Value = serde_json::from_str(text.trim())
            .with_context(|| format!("asynq-peer latency printed {text:?}"))?;
        if let Some(e) = v.get("error") {
            bail!("asynq-peer latency failed: {e}");
        }
        let f = |k: &str| v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
        Ok(Latency {
            sent: f("sent") as u64,
            errors: f("errors") as u64,
            p50_ms: f("p50_ms"),
            p99_ms: f("p99_ms"),
            max_ms: f("max_ms"),
            ok_p99_ms: f("ok_p99_ms"),
            over_20ms: f("over_20ms") as u64,
            error_samples: v
                .get("error_samples")
                .and_then(serde_json::Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| s.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}
