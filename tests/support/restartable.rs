//! Private redis-servers that a test can kill and start again on the same
//! port and directory (Redis going away and coming back, an AOF restart),
//! and the spawner they and the chaos suite's other children share.
//!
//! Every child is forked by one spawner thread that lives as long as the
//! test process, with `PR_SET_PDEATHSIG = SIGKILL`: the kernel sends that
//! signal when the forking *thread* ends, so a child dies with the tests
//! however they end, and never outlives them.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::sync::mpsc;
use std::time::{Duration, Instant};

type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

static SPAWNER: Mutex<Option<mpsc::Sender<SpawnRequest>>> = Mutex::new(None);

/// Spawns `cmd` from the spawner thread, with `PR_SET_PDEATHSIG = SIGKILL`.
pub fn spawn(mut cmd: Command) -> Child {
    use std::os::unix::process::CommandExt;
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let tx = {
        let mut guard = SPAWNER.lock().unwrap();
        guard
            .get_or_insert_with(|| {
                let (tx, rx) = mpsc::channel::<SpawnRequest>();
                std::thread::spawn(move || {
                    for (mut cmd, reply) in rx {
                        let _ = reply.send(cmd.spawn());
                    }
                    // The senders live in a static: never reached while the
                    // process runs; park so the thread (and its children's
                    // death signal) outlive everything.
                    loop {
                        std::thread::park();
                    }
                });
                tx
            })
            .clone()
    };
    let (reply_tx, reply_rx) = mpsc::channel();
    let program = format!("{:?}", cmd.get_program());
    tx.send((cmd, reply_tx)).unwrap();
    reply_rx
        .recv()
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

/// A free TCP port on 127.0.0.1 (bound then released).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .unwrap()
        .port()
}

/// SIGKILLs `child` and reaps it.
pub fn kill9(child: &mut Child) {
    unsafe {
        libc::kill(child.id() as i32, libc::SIGKILL);
    }
    let _ = child.wait();
}

/// A private redis-server on a free loopback port with its own directory,
/// which a scenario may kill and start again on the same port and
/// directory. Killed (SIGKILL) on drop; the directory is removed.
pub struct RedisProc {
    /// Port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    aof: bool,
    child: Option<Child>,
}

impl RedisProc {
    /// Starts a server; with `aof`, `appendonly yes` and `appendfsync
    /// always` (every acknowledged write is on disk before the reply).
    pub fn start(aof: bool) -> RedisProc {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!(
            "asynqdeck-restartable-redis-{}-{port}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut r = RedisProc {
            port,
            dir,
            aof,
            child: None,
        };
        r.up();
        r
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// `127.0.0.1:<port>` (the Go peer's `--redis`).
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Starts the server (again) and waits until it answers `PING` with
    /// `PONG` (not `LOADING`). Returns when it does.
    pub fn up(&mut self) -> Instant {
        assert!(self.child.is_none(), "redis-server already running");
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", if self.aof { "yes" } else { "no" }])
            .args(["--appendfsync", "always"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        self.child = Some(spawn(cmd));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if self.ping() {
                return Instant::now();
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILLs the server (no shutdown, no final save) and waits until it
    /// is gone.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            kill9(&mut child);
        }
    }

    /// Whether `PING` answers `+PONG` right now (plain RESP over TCP).
    pub fn ping(&self) -> bool {
        use std::io::{Read, Write};
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 64];
        matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
    }
}

impl Drop for RedisProc {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
