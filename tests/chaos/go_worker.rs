//! A Go asynq v0.26.0 worker process for the `go_` scenarios: the peer's
//! `work` command (`interop/cmd/asynq-peer`) with a `sleep:` handler that
//! records, in Redis, one completion per handler call that returns nil
//! (`--record-done`, `HINCRBY <key> <task id> 1`; a failed write fails the
//! call, so the task is retried).
//!
//! The peer prints one JSON line per handler call as it starts; a thread
//! reads them into a [`Recorder`] (the start times survive a Redis outage,
//! the completions are read from Redis). Another thread keeps the peer's
//! stderr (its server logs at error level) for the scenario to report.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::procs::{Guard, spawn};
use super::record::Recorder;

/// A running Go worker: the process, its handler starts and its stderr.
pub struct GoWorker {
    /// The peer process (SIGKILLed on drop).
    pub proc: Guard,
    /// One `started` per handler call, from the peer's stdout.
    pub rec: Recorder,
    /// The peer's stderr lines so far.
    pub stderr: Arc<Mutex<Vec<String>>>,
}

impl GoWorker {
    /// Starts `asynq-peer --redis <addr> work` over `queues` (`q1=1,q2=3`)
    /// with `concurrency`, `work` of sleep per task, retry delay 0 and the
    /// forwarder every second (as `worker::chaos_config`), recording
    /// completions in hash `done_key`.
    pub fn start(
        addr: &str,
        queues: &str,
        concurrency: usize,
        work: Duration,
        done_key: &str,
    ) -> GoWorker {
        let mut cmd = Command::new(super::support::go_peer());
        cmd.args(["--redis", addr, "work"])
            .args(["--queues", queues])
            .args(["--concurrency", &concurrency.to_string()])
            .args(["--behaviour", &format!("sleep:{}ms", work.as_millis())])
            .args(["--retry-delay", "0s", "--delayed-check-interval", "1s"])
            .args(["--max-duration", "10m"])
            .args(["--record-done", done_key])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut proc = Guard(spawn(cmd));
        let rec = Recorder::default();
        let stdout = proc.0.stdout.take().unwrap();
        let r = rec.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("peer line {line:?}: {e}"));
                if let Some(id) = v["id"].as_str() {
                    r.started(id);
                }
            }
        });
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let err_pipe = proc.0.stderr.take().unwrap();
        let lines = stderr.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err_pipe).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        });
        GoWorker { proc, rec, stderr }
    }

    /// Whether the peer process has exited (and how), without waiting.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.proc.0.try_wait().ok().flatten()
    }

    /// Prints how many stderr lines the peer wrote and the first `n`
    /// distinct ones (timestamps cut off).
    pub fn report_stderr(&self, scenario: &str, n: usize) -> usize {
        let lines = self.stderr.lock().unwrap().clone();
        super::record::figure(scenario, "go_stderr_lines", lines.len());
        let mut seen: Vec<String> = Vec::new();
        for l in &lines {
            // Go's log lines start with "asynq: pid=N YYYY/MM/DD hh:mm:ss.uuuuuu".
            let text = l
                .splitn(5, ' ')
                .nth(4)
                .map_or(l.as_str(), |s| s)
                .to_string();
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        for t in seen.iter().take(n) {
            println!("  go stderr: {t}");
        }
        lines.len()
    }
}
