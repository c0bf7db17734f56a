//! A private `redis-server` for the demo when no Redis is at hand.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server child process on a free loopback port; killed on drop
/// (and by the kernel if this process dies first).
#[derive(Debug)]
pub struct RedisChild {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl RedisChild {
    /// Starts `redis-server` on a free port, keeping nothing on disk.
    /// Errors name the install command when the binary is missing.
    pub fn start() -> Result<RedisChild, String> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| format!("cannot find a free port: {e}"))?
            .port();
        let dir = std::env::temp_dir().join(format!("asynqdeck-demo-redis-{port}"));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        #[cfg(unix)]
        {
            use std::os::unix::process::CommandExt;
            // A process group of its own: Ctrl-C in the terminal reaches the
            // demo only, which stops its workers first and then this child
            // (sharing the group, Redis quit first and the workers' last
            // writes failed).
            cmd.process_group(0);
        }
        #[cfg(target_os = "linux")]
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        let child = cmd.spawn().map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                "redis-server is not installed and no Redis answers on 127.0.0.1:6379; \
                 install it with `sudo apt-get install -y redis-server` (Debian/Ubuntu) \
                 or pass --redis-url"
                    .to_string()
            } else {
                format!("cannot start redis-server: {e}")
            }
        })?;
        let me = RedisChild { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if Instant::now() > deadline {
                return Err(format!("redis-server did not start on port {port}"));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(me)
    }

    /// `redis://127.0.0.1:<port>/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }
}

impl Drop for RedisChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
