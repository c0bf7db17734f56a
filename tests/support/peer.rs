//! The Go asynq v0.26.0 peer (`interop/cmd/asynq-peer`) the interop tests
//! run against a test database, a local Redis Cluster or a Sentinel set
//! (`peer_calls!`): built once per test binary ([`go_peer`]), run to its
//! end (`peer`, `peer_lines`) or in the
//! background (`peer_spawn`, killed with its [`PeerProcess`]).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use super::cluster::{LocalCluster, SentinelSet};
use super::redis::TestDb;

/// `asynq-peer <global> <args>`.
fn peer_command(global: &[String], args: &[&str]) -> Command {
    let mut cmd = Command::new(go_peer());
    cmd.args(global).args(args);
    cmd
}

/// Runs the peer to its end and parses its one JSON document; `Err(json)`
/// when it exits non-zero with an error object.
fn run_json(global: &[String], args: &[&str]) -> Result<serde_json::Value, serde_json::Value> {
    let out = peer_command(global, args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run asynq-peer");
    let text = String::from_utf8_lossy(&out.stdout);
    let value: serde_json::Value = serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("asynq-peer {args:?} printed non-JSON ({e}): {text}"));
    if out.status.success() {
        Ok(value)
    } else {
        Err(value)
    }
}

/// Runs the peer to its end and parses its JSON lines (`work`, `schedule`).
fn run_lines(global: &[String], args: &[&str]) -> Vec<serde_json::Value> {
    let out = peer_command(global, args)
        .stderr(Stdio::inherit())
        .output()
        .expect("run asynq-peer");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "asynq-peer {args:?} failed: {text}");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line ({e}): {l}")))
        .collect()
}

/// Starts the peer in the background with stdout piped.
fn spawn(global: &[String], args: &[&str]) -> PeerProcess {
    let child = peer_command(global, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn asynq-peer");
    PeerProcess(child)
}

/// The calls on the peer for a deployment type with an inherent
/// `peer_globals(&self) -> Vec<String>` (one implementation for a test
/// database, a local cluster and a sentinel set; inherent, so callers
/// import nothing).
macro_rules! peer_calls {
    ($ty:ty) => {
        impl $ty {
            /// Runs the Go peer and parses its JSON output. Returns
            /// `Err(json)` when the peer exits non-zero with an error object.
            pub fn peer(&self, args: &[&str]) -> Result<serde_json::Value, serde_json::Value> {
                run_json(&self.peer_globals(), args)
            }

            /// Runs a Go peer command that prints one JSON document per
            /// line (`work`, `schedule`) to its end and returns the lines.
            pub fn peer_lines(&self, args: &[&str]) -> Vec<serde_json::Value> {
                run_lines(&self.peer_globals(), args)
            }

            /// Starts a long-running Go peer command (`work`) in the
            /// background; the returned guard kills it when dropped.
            pub fn peer_spawn(&self, args: &[&str]) -> PeerProcess {
                spawn(&self.peer_globals(), args)
            }

            /// Like `peer` but panics on a peer error.
            pub fn peer_ok(&self, args: &[&str]) -> serde_json::Value {
                self.peer(args)
                    .unwrap_or_else(|e| panic!("asynq-peer {args:?} failed: {e}"))
            }
        }
    };
}

peer_calls!(TestDb);
peer_calls!(LocalCluster);
peer_calls!(SentinelSet);

impl TestDb {
    /// `--redis 127.0.0.1:<port> --db <db>` (Go `RedisClientOpt`); in
    /// cluster mode the shared cluster's `--cluster-nodes`
    /// (Go `RedisClusterClientOpt`).
    pub fn peer_globals(&self) -> Vec<String> {
        if self.cluster {
            return super::redis::shared_cluster().peer_globals();
        }
        vec![
            "--redis".into(),
            format!("127.0.0.1:{}", self.port),
            "--db".into(),
            self.db.to_string(),
        ]
    }
}

impl TestDb {
    /// [`TestDb::peer_ok`] off the async runtime (the peer is a blocking
    /// process call), so what the test runs meanwhile keeps running.
    pub async fn peer_ok_async(&self, args: &[&str]) -> serde_json::Value {
        let (db, args) = (self.clone(), owned(args));
        tokio::task::spawn_blocking(move || db.peer_ok(&borrowed(&args)))
            .await
            .unwrap()
    }

    /// [`TestDb::peer_lines`] off the async runtime.
    pub async fn peer_lines_async(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let (db, args) = (self.clone(), owned(args));
        tokio::task::spawn_blocking(move || db.peer_lines(&borrowed(&args)))
            .await
            .unwrap()
    }
}

fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn borrowed(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

impl LocalCluster {
    /// `--cluster-nodes 127.0.0.1:p1,...` (Go `RedisClusterClientOpt`).
    pub fn peer_globals(&self) -> Vec<String> {
        vec!["--cluster-nodes".into(), self.nodes()]
    }
}

impl SentinelSet {
    /// `--sentinel-addrs 127.0.0.1:s1,... --sentinel-master deckmaster`
    /// (Go `RedisFailoverClientOpt`).
    pub fn peer_globals(&self) -> Vec<String> {
        vec![
            "--sentinel-addrs".into(),
            self.addrs(),
            "--sentinel-master".into(),
            SentinelSet::MASTER.into(),
        ]
    }
}

/// A background Go peer process, killed on drop.
pub struct PeerProcess(pub std::process::Child);

impl PeerProcess {
    /// Sends SIGTERM (graceful shutdown of the Go server) and waits for exit.
    pub fn terminate(mut self) -> std::process::Output {
        unsafe {
            libc::kill(self.0.id() as i32, libc::SIGTERM);
        }
        let child = std::mem::replace(&mut self.0, Command::new("true").spawn().unwrap());
        child.wait_with_output().expect("wait for asynq-peer")
    }
}

impl Drop for PeerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

static GO_PEER: OnceLock<PathBuf> = OnceLock::new();

/// Builds the Go peer (`interop/cmd/asynq-peer`, Go asynq v0.26.0) once per
/// test binary and returns its path.
pub fn go_peer() -> &'static PathBuf {
    GO_PEER.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let out = root.join("target").join("asynq-peer");
        let status = Command::new("go")
            .current_dir(root.join("interop"))
            .args(["build", "-o"])
            .arg(&out)
            .arg("./cmd/asynq-peer")
            .status()
            .expect("go must be installed to build the interop peer");
        assert!(status.success(), "building interop/cmd/asynq-peer failed");
        out
    })
}
