//! The private redis-server of a test binary and a fresh logical database
//! per test ([`redis`]), or a server of its own for a test that reads or
//! changes server-wide state ([`private_redis`]).
//!
//! Tests never touch a Redis they did not start: the server listens on a
//! free loopback port, keeps nothing on disk, and dies with the test binary.

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
    wait_for_port(port, Duration::from_secs(10), "redis-server");
    Server { port }
}

/// Waits until something listens on `127.0.0.1:port`; panics naming
/// `what` once `timeout` has passed.
pub fn wait_for_port(port: u16, timeout: Duration, what: &str) {
    let deadline = Instant::now() + timeout;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
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

    /// A raw redis-rs connection for seeding and checking keys directly.
    /// It waits for every reply: redis-rs's default 500 ms response timeout
    /// failed seeding scripts (10,000 hashes in one call) on a loaded
    /// machine, and tests wait for states, not durations.
    pub async fn raw(&self) -> redis::aio::MultiplexedConnection {
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        redis::Client::open(self.url())
            .unwrap()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .unwrap()
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
