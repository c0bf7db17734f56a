//! The two deployments the bench compares: one standalone redis-server, and
//! a 3-master local Redis Cluster (`redis-server --cluster-enabled yes` ×3
//! plus `redis-cli --cluster create --cluster-replicas 0`), on free loopback
//! ports with nothing kept on disk, killed when the bench ends. INFO
//! snapshots are taken on every node over plain per-node connections and
//! summed.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use redis::aio::MultiplexedConnection;

/// Which deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Standalone,
    Cluster,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Standalone => "standalone",
            Kind::Cluster => "cluster (3 masters)",
        }
    }
}

/// A running deployment; its processes die on drop (and with the bench).
pub struct Deployment {
    pub kind: Kind,
    /// Ports of the servers (masters) on 127.0.0.1.
    pub ports: Vec<u16>,
    children: Vec<Child>,
    dir: PathBuf,
    /// One plain connection per node, for INFO, FLUSHALL, CLUSTER KEYSLOT.
    nodes: Vec<MultiplexedConnection>,
}

impl Drop for Deployment {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn spawn_server(port: u16, dir: &PathBuf, extra: &[&str]) -> anyhow::Result<Child> {
    use std::os::unix::process::CommandExt;
    std::fs::create_dir_all(dir)?;
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    // SAFETY: prctl is async-signal-safe; the server dies with the bench.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().context("redis-server must be installed")
}

fn wait_port(port: u16) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            bail!("redis-server did not start on port {port}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

impl Deployment {
    /// Starts `kind` and returns once it serves (a cluster: every node says
    /// `cluster_state:ok` and knows the others).
    pub async fn start(kind: Kind) -> anyhow::Result<Deployment> {
        let n = match kind {
            Kind::Standalone => 1,
            Kind::Cluster => 3,
        };
        let ports: Vec<u16> = (0..n).map(|_| free_port()).collect::<anyhow::Result<_>>()?;
        let dir = std::env::temp_dir().join(format!("asynqdeck-bench-cluster-{}", ports[0]));
        let mut children = Vec::new();
        for &p in &ports {
            let extra: &[&str] = match kind {
                Kind::Standalone => &[],
                Kind::Cluster => &[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "5000",
                ],
            };
            children.push(spawn_server(p, &dir.join(p.to_string()), extra)?);
        }
        for &p in &ports {
            wait_port(p)?;
        }
        if kind == Kind::Cluster {
            let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
            let status = Command::new("redis-cli")
                .args(["--cluster", "create"])
                .args(&addrs)
                .args(["--cluster-replicas", "0", "--cluster-yes"])
                .stdout(Stdio::null())
                .status()
                .context("redis-cli must be installed")?;
            if !status.success() {
                bail!("redis-cli --cluster create failed");
            }
        }
        let mut nodes = Vec::new();
        for &p in &ports {
            let conn = redis::Client::open(format!("redis://127.0.0.1:{p}"))?
                .get_multiplexed_async_connection_with_config(
                    &redis::AsyncConnectionConfig::new().set_response_timeout(None),
                )
                .await?;
            nodes.push(conn);
        }
        let mut d = Deployment {
            kind,
            ports,
            children,
            dir,
            nodes,
        };
        if kind == Kind::Cluster {
            d.wait_cluster_ok().await?;
        }
        Ok(d)
    }

    async fn wait_cluster_ok(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let known = format!("cluster_known_nodes:{}", self.ports.len());
        loop {
            let mut ok = true;
            for c in &mut self.nodes {
                let info: String = redis::cmd("CLUSTER").arg("INFO").query_async(c).await?;
                ok &= info.contains("cluster_state:ok") && info.contains(&known);
            }
            if ok {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!("cluster did not become ok");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The URL asynqdeck takes: `redis://h:p/0` or `redis-cluster://h:p,...`.
    pub fn url(&self) -> String {
        match self.kind {
            Kind::Standalone => format!("redis://127.0.0.1:{}/0", self.ports[0]),
            Kind::Cluster => format!("redis-cluster://{}", self.addrs()),
        }
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...`.
    pub fn addrs(&self) -> String {
        self.ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The Go peer's global connection flags (`--redis` or, helper D's
    /// form, `--cluster-nodes`).
    pub fn go_flags(&self) -> Vec<String> {
        match self.kind {
            Kind::Standalone => vec!["--redis".into(), format!("127.0.0.1:{}", self.ports[0])],
            Kind::Cluster => vec!["--cluster-nodes".into(), self.addrs()],
        }
    }

    /// FLUSHALL on every node.
    pub async fn flush(&mut self) -> anyhow::Result<()> {
        for c in &mut self.nodes {
            redis::cmd("FLUSHALL").query_async::<()>(c).await?;
        }
        Ok(())
    }

    /// Which node (index into `ports`) holds queue `q`'s keys
    /// (`asynq:{q}:...`); always 0 on a standalone server.
    pub async fn node_of_queue(&mut self, q: &str) -> anyhow::Result<usize> {
        if self.kind == Kind::Standalone {
            return Ok(0);
        }
        let slot: i64 = redis::cmd("CLUSTER")
            .arg("KEYSLOT")
            .arg(format!("asynq:{{{q}}}:pending"))
            .query_async(&mut self.nodes[0])
            .await?;
        for (i, c) in self.nodes.iter_mut().enumerate() {
            let nodes: String = redis::cmd("CLUSTER").arg("NODES").query_async(c).await?;
            for line in nodes.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() > 8 && f[2].contains("myself") && f[2].contains("master") {
                    for range in &f[8..] {
                        let (a, b) = range.split_once('-').unwrap_or((range, range));
                        if let (Ok(a), Ok(b)) = (a.parse::<i64>(), b.parse::<i64>())
                            && (a..=b).contains(&slot)
                        {
                            return Ok(i);
                        }
                    }
                }
            }
        }
        bail!("no master serves slot {slot}")
    }

    /// INFO cpu, stats and commandstats on every node, summed.
    pub async fn snap(&mut self) -> anyhow::Result<Snap> {
        let mut s = Snap::default();
        for c in &mut self.nodes {
            let info: String = redis::cmd("INFO")
                .arg("cpu")
                .arg("stats")
                .arg("commandstats")
                .query_async(c)
                .await?;
            let field = |name: &str| -> f64 {
                info.lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0.0)
            };
            s.cpu_us += (field("used_cpu_sys:") + field("used_cpu_user:")) * 1e6;
            s.connections += field("total_connections_received:") as u64;
            for line in info.lines() {
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
                let e = s.commands.entry(name.to_string()).or_default();
                e.0 += get("calls=");
                e.1 += get("usec=");
            }
        }
        Ok(s)
    }
}

/// Counters of every node at one moment, summed.
#[derive(Debug, Default, Clone)]
pub struct Snap {
    /// used_cpu_user + used_cpu_sys, µs.
    pub cpu_us: f64,
    /// total_connections_received.
    pub connections: u64,
    /// command → (calls, usec).
    pub commands: BTreeMap<String, (u64, u64)>,
}

impl Snap {
    /// Commands run since `before` (name, calls), most calls first; the
    /// bench's own INFO and CONFIG calls left out.
    pub fn commands_since(&self, before: &Snap) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = self
            .commands
            .iter()
            .filter(|(name, _)| !(name.as_str() == "info" || name.starts_with("config|")))
            .filter_map(|(name, (calls, _))| {
                let c0 = before.commands.get(name).map_or(0, |c| c.0);
                (*calls > c0).then(|| (name.clone(), calls - c0))
            })
            .collect();
        out.sort_by_key(|e| std::cmp::Reverse(e.1));
        out
    }
}
