//! The private redis-server of a test binary and a fresh logical database
//! per test ([`redis`]), or a server of its own for a test that reads or
//! changes server-wide state ([`private_redis`]).
//!
//! Tests never touch a Redis they did not start: the server listens on a
//! free loopback port, keeps nothing on disk, and dies with the test binary.
//!
//! **Cluster mode** (issue 14): with `ASYNQDECK_TEST_REDIS=cluster` in the
//! environment, [`redis`] hands out the one process-wide 3-master
//! [`LocalCluster`] (started on first use) instead of a database: the URL
//! is `redis-cluster://...` and [`TestDb::raw`] a cluster connection
//! ([`RawConn::Cluster`]). A cluster has database 0 only, so isolation is
//! by time: the cluster pass runs with `--test-threads=1` and [`redis`]
//! `FLUSHALL`s every master before it returns. A test that calls [`redis`]
//! twice (two databases at once) cannot run in cluster mode and is in the
//! `--skip` list of `scripts/test.sh`, as are tests of a server's own
//! state ([`private_redis`] stays a standalone server in both modes).
//! Test-side pipelines over keys of several queues are split per queue
//! (one slot each); `MGET`/`DEL`/`EXISTS` over several slots are split by
//! redis-rs itself.

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

use super::cluster::LocalCluster;
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
    wait_for_port(port, Duration::from_secs(60), "redis-server");
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

/// A fresh, empty logical database on the private server, or (cluster
/// mode) the flushed local cluster.
#[derive(Clone, Debug)]
pub struct TestDb {
    /// Server port on 127.0.0.1 (a cluster: its first master).
    pub port: u16,
    /// Database index (a cluster: 0).
    pub db: u32,
    /// Whether this is the local cluster of cluster mode.
    pub cluster: bool,
}

/// Whether `ASYNQDECK_TEST_REDIS=cluster` is set (see the module doc).
pub fn cluster_mode() -> bool {
    std::env::var("ASYNQDECK_TEST_REDIS").is_ok_and(|v| v == "cluster")
}

static CLUSTER: OnceLock<LocalCluster> = OnceLock::new();

/// Strict-form script hashes seen loaded on the cluster so far (cluster
/// mode): gathered before each flush, since a test may `SCRIPT FLUSH`.
static SEEN_SCRIPTS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The tests [`redis`] handed the cluster to (cluster mode), by name
/// (libtest names each test's thread after the test).
static CLUSTER_TAKEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// How many tests ran on the cluster so far (cluster mode).
pub fn cluster_taken() -> usize {
    CLUSTER_TAKEN.lock().unwrap().len()
}

/// Records that the current test takes the cluster; panics when it took
/// it before (a second [`redis`] would flush the first one's keys).
fn take_cluster() {
    let name = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_string();
    if !name.contains("::") {
        return; // not a test's own thread
    }
    let first = CLUSTER_TAKEN.lock().unwrap().insert(name.clone());
    assert!(
        first,
        "{name} called support::redis() twice: it cannot run in cluster mode \
         (skip it in scripts/test.sh's cluster pass)"
    );
}

/// Adds the strict-form scripts loaded on the cluster now to those seen.
fn gather_loaded_scripts(cluster: &LocalCluster) {
    let hashes: Vec<String> = asynqdeck::broker::strict_hashes()
        .into_iter()
        .map(|(_, h)| h)
        .collect();
    let loaded = cluster.loaded_scripts(&hashes);
    SEEN_SCRIPTS.lock().unwrap().extend(loaded);
}

/// The strict-form scripts that ran on the cluster in this process
/// (cluster mode): `(registry name, SHA1)` of every registered script,
/// with whether it was seen loaded.
pub fn scripts_run_on_cluster() -> Vec<(&'static str, bool)> {
    gather_loaded_scripts(shared_cluster());
    let seen = SEEN_SCRIPTS.lock().unwrap();
    asynqdeck::broker::strict_hashes()
        .into_iter()
        .map(|(name, h)| (name, seen.contains(&h)))
        .collect()
}

/// The process-wide cluster of cluster mode (started on first use).
pub fn shared_cluster() -> &'static LocalCluster {
    CLUSTER.get_or_init(|| LocalCluster::start(3))
}

/// A test-side connection: one server's, or a cluster's (commands routed
/// by slot). Cheap to clone.
#[derive(Clone)]
pub enum RawConn {
    /// One server (a database of the private server).
    Single(MultiplexedConnection),
    /// The local cluster of cluster mode.
    Cluster(ClusterConnection),
}

impl ConnectionLike for RawConn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            RawConn::Single(c) => c.req_packed_command(cmd),
            RawConn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            RawConn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            RawConn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            RawConn::Single(c) => c.get_db(),
            RawConn::Cluster(c) => c.get_db(),
        }
    }
}

impl TestDb {
    /// `redis://127.0.0.1:<port>/<db>`, or the cluster's
    /// `redis-cluster://127.0.0.1:p1,...`.
    pub fn url(&self) -> String {
        if self.cluster {
            shared_cluster().url()
        } else {
            format!("redis://127.0.0.1:{}/{}", self.port, self.db)
        }
    }

    /// [`TestDb::url`] logged in as ACL user `user` with `password`.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        if self.cluster {
            format!(
                "redis-cluster://{user}:{password}@{}",
                shared_cluster().nodes()
            )
        } else {
            format!(
                "redis://{user}:{password}@127.0.0.1:{}/{}",
                self.port, self.db
            )
        }
    }

    /// `redis://127.0.0.1:<port>/<db>`: one server (a cluster: its first
    /// master), for what needs a server's own connection (pub/sub: a
    /// cluster delivers `PUBLISH` to every node's subscribers).
    pub fn node_url(&self) -> String {
        format!("redis://127.0.0.1:{}/{}", self.port, self.db)
    }

    /// Ports of every server holding this database's keys: the private
    /// server's, or every master of the cluster.
    pub fn node_ports(&self) -> Vec<u16> {
        if self.cluster {
            shared_cluster().ports.clone()
        } else {
            vec![self.port]
        }
    }

    /// Every key matching `pattern`, by `SCAN` on each server holding
    /// this database (every master of a cluster).
    pub async fn scan_keys(&self, pattern: &str) -> BTreeSet<String> {
        let mut found = BTreeSet::new();
        for port in self.node_ports() {
            let mut conn = redis::Client::open(format!("redis://127.0.0.1:{port}/{}", self.db))
                .unwrap()
                .get_multiplexed_async_connection()
                .await
                .unwrap();
            let mut iter: redis::AsyncIter<String> =
                redis::AsyncCommands::scan_match(&mut conn, pattern)
                    .await
                    .unwrap();
            while let Some(k) = iter.next_item().await {
                found.insert(k.unwrap());
            }
        }
        found
    }

    /// A raw redis-rs connection for seeding and checking keys directly.
    /// It waits for every reply: redis-rs's default 500 ms response timeout
    /// failed seeding scripts (10,000 hashes in one call) on a loaded
    /// machine, and tests wait for states, not durations.
    pub async fn raw(&self) -> RawConn {
        if self.cluster {
            let nodes: Vec<String> = shared_cluster()
                .ports
                .iter()
                .map(|p| format!("redis://127.0.0.1:{p}"))
                .collect();
            let client = redis::cluster::ClusterClientBuilder::new(nodes)
                .response_timeout(Duration::from_secs(3600))
                .build()
                .unwrap();
            return RawConn::Cluster(client.get_async_connection().await.unwrap());
        }
        let config = redis::AsyncConnectionConfig::new().set_response_timeout(None);
        RawConn::Single(
            redis::Client::open(self.url())
                .unwrap()
                .get_multiplexed_async_connection_with_config(&config)
                .await
                .unwrap(),
        )
    }
}

/// Sets `n` string keys `<prefix><i>` to `i` (filler spread over the
/// keyspace: on a cluster over every slot), 1,000 a `MSET` (redis-rs splits
/// a cluster's `MSET` by slot).
pub async fn fill(conn: &mut RawConn, prefix: &str, n: usize) {
    let mut i = 0;
    while i < n {
        let end = (i + 1000).min(n);
        let pairs: Vec<(String, usize)> = (i..end).map(|k| (format!("{prefix}{k}"), k)).collect();
        let () = redis::AsyncCommands::mset(conn, &pairs).await.unwrap();
        i = end;
    }
}

/// Takes a fresh database on the private redis-server (started on first
/// use); in cluster mode the local cluster, every master flushed.
pub fn redis() -> TestDb {
    if cluster_mode() {
        let cluster = shared_cluster();
        gather_loaded_scripts(cluster);
        take_cluster();
        cluster.flush();
        return TestDb {
            port: cluster.ports[0],
            db: 0,
            cluster: true,
        };
    }
    let server = SERVER.get_or_init(start_server);
    let db = NEXT_DB.fetch_add(1, Ordering::SeqCst);
    assert!(db < DATABASES, "more tests than databases");
    TestDb {
        port: server.port,
        db,
        cluster: false,
    }
}

/// Database 0 of a redis-server of its own (started now, killed with the
/// test binary), for a test that reads server-wide figures (`INFO
/// commandstats`, `CLIENT LIST`) or changes server-wide settings.
pub fn private_redis() -> TestDb {
    TestDb {
        port: start_server().port,
        db: 0,
        cluster: false,
    }
}
