//! Test support: a private redis-server per test binary, a fresh database
//! per test, and the Go asynq peer (`interop/`).
//!
//! Tests never touch a Redis they did not start: the server listens on a
//! free loopback port, keeps nothing on disk, and dies with the test binary.
#![allow(dead_code)]

pub mod htmx;
pub mod http;
pub mod restartable;
pub mod routes;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Number of logical databases the private server has; each test takes one.
const DATABASES: u32 = 4096;

struct Server {
    port: u16,
}

static SERVER: OnceLock<Server> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(1);

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .unwrap()
        .port()
}

fn start_server() -> Server {
    let port = free_port();
    let dir = std::env::temp_dir().join(format!("asynqdeck-test-redis-{port}"));
    std::fs::create_dir_all(&dir).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    // The child is spawned from a thread that lives as long as the process,
    // with PR_SET_PDEATHSIG, so it dies with the test binary (a parent
    // *thread* exiting would also kill it, hence the dedicated thread).
    std::thread::spawn(move || {
        use std::os::unix::process::CommandExt;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string()])
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--databases", &DATABASES.to_string()])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .expect("redis-server must be installed (the README test command installs it)");
        tx.send(()).unwrap();
        let _keep = child;
        loop {
            std::thread::park();
        }
    });
    rx.recv().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "redis-server did not start on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    Server { port }
}

/// A fresh, empty logical database on the private server.
#[derive(Clone, Debug)]
pub struct TestDb {
    /// Server port on 127.0.0.1.
    pub port: u16,
    /// Database index.
    pub db: u32,
}

impl TestDb {
    /// `redis://127.0.0.1:<port>/<db>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/{}", self.port, self.db)
    }

    /// A raw redis-rs connection for checking keys directly.
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection()
            .await
            .unwrap()
    }

    /// Runs the Go peer against this database and parses its JSON output.
    /// Returns `Err(json)` when the peer exits non-zero with an error object.
    pub fn peer(&self, args: &[&str]) -> Result<serde_json::Value, serde_json::Value> {
        let out = Command::new(go_peer())
            .args(["--redis", &format!("127.0.0.1:{}", self.port)])
            .args(["--db", &self.db.to_string()])
            .args(args)
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

    /// Runs a Go peer command that prints one JSON document per line
    /// (`work`, `schedule`) to its end and returns the lines.
    pub fn peer_lines(&self, args: &[&str]) -> Vec<serde_json::Value> {
        let out = Command::new(go_peer())
            .args(["--redis", &format!("127.0.0.1:{}", self.port)])
            .args(["--db", &self.db.to_string()])
            .args(args)
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

    /// Starts a long-running Go peer command (`work`) in the background; the
    /// returned guard kills it when dropped.
    pub fn peer_spawn(&self, args: &[&str]) -> PeerProcess {
        let child = Command::new(go_peer())
            .args(["--redis", &format!("127.0.0.1:{}", self.port)])
            .args(["--db", &self.db.to_string()])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn asynq-peer");
        PeerProcess(child)
    }

    /// Like [`TestDb::peer`] but panics on a peer error.
    pub fn peer_ok(&self, args: &[&str]) -> serde_json::Value {
        self.peer(args)
            .unwrap_or_else(|e| panic!("asynq-peer {args:?} failed: {e}"))
    }
}

/// Takes a fresh database on the private redis-server (started on first use).
pub fn redis() -> TestDb {
    let server = SERVER.get_or_init(start_server);
    let db = NEXT_DB.fetch_add(1, Ordering::SeqCst);
    assert!(db < DATABASES, "more tests than databases");
    TestDb {
        port: server.port,
        db,
    }
}

/// Database 0 of a redis-server of its own (started now, killed with the
/// test binary), for a test that reads server-wide figures (`INFO
/// commandstats`, `CLIENT LIST`) or changes server-wide settings.
pub fn private_redis() -> TestDb {
    TestDb {
        port: start_server().port,
        db: 0,
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

/// Polls `f` every 50 ms until it returns `Some` or `timeout` passes.
pub async fn eventually<T, F, Fut>(timeout: Duration, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
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
