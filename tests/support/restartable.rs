//! A private redis-server a test can kill and start again on the same port
//! (Redis going away and coming back), killed on drop.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server on a free loopback port, nothing on disk.
pub struct RestartableRedis {
    /// Port on 127.0.0.1.
    pub port: u16,
    child: Option<Child>,
}

impl RestartableRedis {
    /// Starts a server and waits until it answers `PING`.
    pub fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("bind a free port")
            .local_addr()
            .unwrap()
            .port();
        let mut r = RestartableRedis { port, child: None };
        r.up();
        r
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Starts the server (again) on its port; returns once it answers `PING`.
    pub fn up(&mut self) {
        use std::os::unix::process::CommandExt;
        assert!(self.child.is_none(), "redis-server already running");
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(std::env::temp_dir())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        // Dies with the test binary's thread that started it, at the latest.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        self.child = Some(cmd.spawn().expect("redis-server must be installed"));
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.ping() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not answer on port {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// SIGKILLs the server and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether `PING` answers `+PONG` right now.
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

impl Drop for RestartableRedis {
    fn drop(&mut self) {
        self.kill();
    }
}
