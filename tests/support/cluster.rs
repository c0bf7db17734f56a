//! Local Redis Clusters and Sentinel sets started by the tests, from
//! Debian's redis-server package (`redis-server --cluster-enabled yes` plus
//! `redis-cli --cluster create`; `redis-server --sentinel`). Every process
//! comes from the shared spawner (`restartable::spawn`), listens on a free
//! loopback port, keeps nothing on disk that outlives the test, and dies
//! with the test binary.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::redis::wait_for_port;
use super::restartable::{free_port, spawn};

/// A running local Redis Cluster of masters only (no replicas).
pub struct LocalCluster {
    /// Ports of the masters on 127.0.0.1.
    pub ports: Vec<u16>,
    children: Vec<Child>,
    _dir: PathBuf,
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn temp_dir(what: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "asynqdeck-{what}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn redis_server(port: u16, dir: &PathBuf, extra: &[&str]) -> Child {
    let mut cmd = Command::new("redis-server");
    cmd.args(["--port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(dir)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    spawn(cmd)
}

/// A port whose cluster bus port (+10,000) is free too and below 65,536.
fn cluster_port() -> u16 {
    loop {
        let p = free_port();
        if p <= 55_535 && std::net::TcpListener::bind(("127.0.0.1", p + 10_000)).is_ok() {
            return p;
        }
    }
}

/// One cluster-enabled node listening on a free port (and its bus port),
/// started again on other ports when it exits before listening (another
/// process took a port between the pick and the bind; on a busy machine
/// the bus port, 10,000 above, can be an ephemeral port in use).
fn cluster_node(dir: &std::path::Path) -> (u16, Child) {
    for _ in 0..10 {
        let p = cluster_port();
        let node_dir = dir.join(p.to_string());
        std::fs::create_dir_all(&node_dir).unwrap();
        let mut child = redis_server(
            p,
            &node_dir,
            &[
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-node-timeout",
                "5000",
            ],
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if std::net::TcpStream::connect(("127.0.0.1", p)).is_ok() {
                return (p, child);
            }
            if child.try_wait().ok().flatten().is_some() {
                break; // exited: try other ports
            }
            assert!(
                Instant::now() < deadline,
                "cluster redis-server did not listen on port {p}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("no cluster redis-server could start in 10 tries");
}

fn cli(port: u16, args: &[&str]) -> String {
    cli_as(port, None, args)
}

/// `redis-cli` on `port`, authenticating with `password` when given.
pub fn cli_as(port: u16, password: Option<&str>, args: &[&str]) -> String {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    if let Some(pw) = password {
        cmd.args(["--no-auth-warning", "-a", pw]);
    }
    let out = cmd
        .args(args)
        .output()
        .expect("redis-cli must be installed (the README test command installs it)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl LocalCluster {
    /// Starts `masters` (≥ 3) cluster-enabled servers and joins them into
    /// one cluster covering all 16,384 slots; returns once every node
    /// reports `cluster_state:ok`.
    pub fn start(masters: usize) -> LocalCluster {
        assert!(masters >= 3, "redis-cli --cluster create needs 3 masters");
        let dir = temp_dir("cluster");
        let mut ports = Vec::new();
        let mut children = Vec::new();
        for _ in 0..masters {
            let (p, child) = cluster_node(&dir);
            ports.push(p);
            children.push(child);
        }
        let addrs: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        let status = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .status()
            .expect("redis-cli must be installed");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = LocalCluster {
            ports,
            children,
            _dir: dir,
        };
        cluster.wait_ok();
        cluster
    }

    /// Waits until every node says `cluster_state:ok` and knows every
    /// other node.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let ok = self.ports.iter().all(|&p| {
                let info = cli(p, &["CLUSTER", "INFO"]);
                info.contains("cluster_state:ok")
                    && info.contains(&format!("cluster_known_nodes:{}", self.ports.len()))
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "cluster did not become ok");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the master on `port` (SIGKILL) and waits for its exit.
    pub fn kill_node(&mut self, port: u16) {
        let i = self
            .ports
            .iter()
            .position(|p| *p == port)
            .expect("a node of this cluster");
        let _ = self.children[i].kill();
        let _ = self.children[i].wait();
    }

    /// `redis-cluster://127.0.0.1:p1,127.0.0.1:p2,...`.
    pub fn url(&self) -> String {
        format!("redis-cluster://{}", self.nodes())
    }

    /// `127.0.0.1:p1,127.0.0.1:p2,...` (`--redis-cluster-nodes`).
    pub fn nodes(&self) -> String {
        self.ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Removes every key from every master (the cluster is the test's own).
    pub fn flush(&self) {
        for &p in &self.ports {
            let r = cli(p, &["FLUSHALL"]);
            assert!(r.contains("OK"), "FLUSHALL on {p}: {r}");
        }
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`).
    pub fn keyslot(&self, key: &str) -> u16 {
        cli(self.ports[0], &["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .unwrap()
    }

    /// The port of the master serving `key`.
    pub fn port_of(&self, key: &str) -> u16 {
        let slot = self.keyslot(key);
        for &p in &self.ports {
            let shards = cli(p, &["CLUSTER", "NODES"]);
            for line in shards.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.len() > 8 && f[2].contains("myself") && f[2].contains("master") {
                    for range in &f[8..] {
                        let (a, b) = range.split_once('-').unwrap_or((range, range));
                        if let (Ok(a), Ok(b)) = (a.parse::<u16>(), b.parse::<u16>())
                            && (a..=b).contains(&slot)
                        {
                            return p;
                        }
                    }
                }
            }
        }
        panic!("no master serves slot {slot}");
    }

    /// `INFO errorstats` summed over the masters: `(error prefix, count)`.
    pub fn error_stats(&self) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for &p in &self.ports {
            for line in cli(p, &["INFO", "errorstats"]).lines() {
                if let Some(rest) = line.trim().strip_prefix("errorstat_")
                    && let Some((name, count)) = rest.split_once(":count=")
                {
                    let n: u64 = count.trim().parse().unwrap_or(0);
                    match out.iter_mut().find(|(k, _)| k == name) {
                        Some((_, c)) => *c += n,
                        None => out.push((name.to_string(), n)),
                    }
                }
            }
        }
        out
    }
}

impl LocalCluster {
    /// Which of `hashes` (script SHA1s) are loaded on at least one master
    /// (`SCRIPT EXISTS` on each).
    pub fn loaded_scripts(&self, hashes: &[String]) -> std::collections::BTreeSet<String> {
        let mut out = std::collections::BTreeSet::new();
        let mut args = vec!["SCRIPT", "EXISTS"];
        args.extend(hashes.iter().map(String::as_str));
        for &p in &self.ports {
            let reply = cli(p, &args);
            for (h, flag) in hashes.iter().zip(reply.lines()) {
                if flag.trim() == "1" {
                    out.insert(h.clone());
                }
            }
        }
        out
    }

    /// `INFO commandstats` summed over the masters, for the commands that
    /// failed or were rejected: `(command, rejected_calls, failed_calls)`.
    pub fn command_failures(&self) -> Vec<(String, u64, u64)> {
        let mut out: Vec<(String, u64, u64)> = Vec::new();
        for &p in &self.ports {
            for line in cli(p, &["INFO", "commandstats"]).lines() {
                let Some(rest) = line.trim().strip_prefix("cmdstat_") else {
                    continue;
                };
                let Some((name, fields)) = rest.split_once(':') else {
                    continue;
                };
                let field = |f: &str| -> u64 {
                    fields
                        .split(',')
                        .find_map(|kv| kv.strip_prefix(f)?.strip_prefix('='))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0)
                };
                let (rejected, failed) = (field("rejected_calls"), field("failed_calls"));
                if rejected + failed == 0 {
                    continue;
                }
                match out.iter_mut().find(|(k, _, _)| k == name) {
                    Some((_, r, f)) => {
                        *r += rejected;
                        *f += failed;
                    }
                    None => out.push((name.to_string(), rejected, failed)),
                }
            }
        }
        out
    }
}

/// A Sentinel set: a master, one replica and three sentinels monitoring
/// the master under [`SentinelSet::MASTER`], quorum 2.
pub struct SentinelSet {
    /// Port of the server that was master at start.
    pub master_port: u16,
    /// Port of the server that was its replica at start.
    pub replica_port: u16,
    /// Ports of the sentinels.
    pub sentinel_ports: Vec<u16>,
    /// How the set was configured.
    pub config: SentinelConfig,
    children: Vec<Child>,
    _dir: PathBuf,
}

/// Passwords, ACL user and write safety of a [`SentinelSet`].
#[derive(Clone, Debug, Default)]
pub struct SentinelConfig {
    /// `requirepass` of the sentinels (and `sentinel sentinel-pass`, so
    /// they reach each other).
    pub sentinel_password: Option<String>,
    /// `requirepass` of master and replica (`masterauth`, and the
    /// sentinels' `auth-pass`).
    pub master_password: Option<String>,
    /// An ACL user `(name, password)` created on master and replica with
    /// every key, channel and command.
    pub acl_user: Option<(String, String)>,
    /// `min-replicas-to-write 1` (`min-replicas-max-lag 10`) on the first
    /// master: once its replica leaves (promoted), it refuses writes
    /// (`NOREPLICAS`) instead of taking writes a failover would lose.
    pub min_replicas: bool,
}

impl Drop for SentinelSet {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl SentinelSet {
    /// The monitored master's name.
    pub const MASTER: &'static str = "deckmaster";

    /// Starts the set and returns once every sentinel knows the master,
    /// its replica and the two other sentinels, and the replica is in sync.
    pub fn start() -> SentinelSet {
        SentinelSet::start_with(SentinelConfig::default())
    }

    /// [`SentinelSet::start`] configured as `config` says.
    pub fn start_with(config: SentinelConfig) -> SentinelSet {
        let dir = temp_dir("sentinel");
        let master_port = free_port();
        let replica_port = free_port();
        std::fs::create_dir_all(dir.join("m")).unwrap();
        std::fs::create_dir_all(dir.join("r")).unwrap();
        let mut common: Vec<String> = Vec::new();
        if let Some(pw) = &config.master_password {
            common.extend([
                "--requirepass".into(),
                pw.clone(),
                "--masterauth".into(),
                pw.clone(),
            ]);
        }
        if let Some((user, pw)) = &config.acl_user {
            // redis-server joins the words after --user into one line.
            common.push("--user".into());
            common.extend(
                format!("{user} on >{pw} ~* &* +@all")
                    .split(' ')
                    .map(str::to_string),
            );
        }
        let mut master_args = common.clone();
        if config.min_replicas {
            master_args.extend([
                "--min-replicas-to-write".into(),
                "1".into(),
                "--min-replicas-max-lag".into(),
                "10".into(),
            ]);
        }
        let master_refs: Vec<&str> = master_args.iter().map(String::as_str).collect();
        let mut children = vec![redis_server(master_port, &dir.join("m"), &master_refs)];
        wait_for_port(master_port, Duration::from_secs(60), "sentinel master");
        let mp = master_port.to_string();
        let mut replica_refs: Vec<&str> = common.iter().map(String::as_str).collect();
        replica_refs.extend(["--replicaof", "127.0.0.1", &mp]);
        children.push(redis_server(replica_port, &dir.join("r"), &replica_refs));
        wait_for_port(replica_port, Duration::from_secs(60), "sentinel replica");
        let sentinel_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        for &p in &sentinel_ports {
            let conf = dir.join(format!("sentinel-{p}.conf"));
            std::fs::write(
                &conf,
                format!(
                    "port {p}\nbind 127.0.0.1\ndir {}\n\
                     sentinel monitor {m} 127.0.0.1 {master_port} 2\n\
                     sentinel down-after-milliseconds {m} 1000\n\
                     sentinel failover-timeout {m} 10000\n\
                     sentinel parallel-syncs {m} 1\n{auth}",
                    dir.display(),
                    m = Self::MASTER,
                    auth = {
                        let mut a = String::new();
                        if let Some(pw) = &config.master_password {
                            a += &format!("sentinel auth-pass {} {pw}\n", Self::MASTER);
                        }
                        if let Some(pw) = &config.sentinel_password {
                            a += &format!("requirepass {pw}\nsentinel sentinel-pass {pw}\n");
                        }
                        a
                    }
                ),
            )
            .unwrap();
            let mut cmd = Command::new("redis-server");
            cmd.arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::inherit());
            children.push(spawn(cmd));
        }
        for &p in &sentinel_ports {
            wait_for_port(p, Duration::from_secs(60), "redis-sentinel");
        }
        let set = SentinelSet {
            master_port,
            replica_port,
            sentinel_ports,
            config,
            children,
            _dir: dir,
        };
        set.wait_settled(master_port);
        set
    }

    /// Waits until every sentinel names `port` as master and sees one
    /// replica and two other sentinels, and that master sees its replica
    /// online.
    pub fn wait_settled(&self, port: u16) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let named = self.sentinel_ports.iter().all(|&s| {
                let addr = self.scli(s, &["SENTINEL", "get-master-addr-by-name", Self::MASTER]);
                let master = self.scli(s, &["SENTINEL", "master", Self::MASTER]);
                addr.lines().nth(1).map(str::trim) == Some(&port.to_string())
                    && field_after(&master, "num-slaves") == Some("1".into())
                    && field_after(&master, "num-other-sentinels") == Some("2".into())
            });
            let synced = self
                .mcli(port, &["INFO", "replication"])
                .contains("state=online");
            if named && synced {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "sentinel set did not settle on {port}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `redis-cli` on a sentinel, with the sentinels' password.
    pub fn scli(&self, port: u16, args: &[&str]) -> String {
        cli_as(port, self.config.sentinel_password.as_deref(), args)
    }

    /// `redis-cli` on master or replica, with their password.
    pub fn mcli(&self, port: u16, args: &[&str]) -> String {
        cli_as(port, self.config.master_password.as_deref(), args)
    }

    /// `redis-sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3?master=deckmaster`.
    pub fn url(&self) -> String {
        format!("redis-sentinel://{}?master={}", self.addrs(), Self::MASTER)
    }

    /// `127.0.0.1:s1,...` (`--redis-sentinel-addrs`).
    pub fn addrs(&self) -> String {
        self.sentinel_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The port the sentinels name as master now.
    pub fn current_master(&self) -> u16 {
        let addr = self.scli(
            self.sentinel_ports[0],
            &["SENTINEL", "get-master-addr-by-name", Self::MASTER],
        );
        addr.lines().nth(1).unwrap().trim().parse().unwrap()
    }

    /// `SENTINEL FAILOVER` on the first sentinel; returns the new master's
    /// port once every sentinel names it and it has no master of its own.
    pub fn failover(&self) -> u16 {
        let old = self.current_master();
        let r = self.scli(
            self.sentinel_ports[0],
            &["SENTINEL", "FAILOVER", Self::MASTER],
        );
        assert!(r.contains("OK"), "SENTINEL FAILOVER: {r}");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let now = self.current_master();
            if now != old && self.mcli(now, &["ROLE"]).starts_with("master") {
                return now;
            }
            assert!(Instant::now() < deadline, "failover did not happen");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn field_after(flat: &str, name: &str) -> Option<String> {
    let mut lines = flat.lines();
    while let Some(l) = lines.next() {
        if l.trim() == name {
            return lines.next().map(|v| v.trim().to_string());
        }
    }
    None
}
