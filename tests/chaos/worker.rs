//! The worker process of the SIGKILL scenario: this test binary re-executed
//! with `ASYNQDECK_CHAOS_ROLE=worker` runs an asynqdeck [`Server`] (the
//! library, as users run it) and nothing else, until it is killed.
//!
//! Its handler records in Redis, per task id, one attempt when it starts
//! (`HINCRBY <attempts key> <id> 1`) and one completion just before it
//! returns `Ok` (`HINCRBY <done key> <id> 1`), after `work_ms` of simulated
//! work. The scenario reads both hashes (see `sigkill.rs` for how a
//! completion recorded twice is judged).

use std::process::{Command, Stdio};
use std::time::Duration;

use asynqdeck::Task;
use asynqdeck::server::{Config, ServeMux, Server, TaskContext};

/// Environment variable that selects the worker role.
pub const ROLE_VAR: &str = "ASYNQDECK_CHAOS_ROLE";

/// What a worker process runs with (passed through the environment).
#[derive(Clone, Debug)]
pub struct WorkerSpec {
    /// Redis URL.
    pub url: String,
    /// The one queue served.
    pub queue: String,
    /// `Config::concurrency`.
    pub concurrency: usize,
    /// Simulated work per task, in ms.
    pub work_ms: u64,
    /// Hash of attempts per task id.
    pub attempts_key: String,
    /// Hash of completions per task id.
    pub done_key: String,
}

impl WorkerSpec {
    fn from_env() -> WorkerSpec {
        let var = |name: &str| {
            std::env::var(format!("ASYNQDECK_CHAOS_{name}"))
                .unwrap_or_else(|_| panic!("worker role needs ASYNQDECK_CHAOS_{name}"))
        };
        WorkerSpec {
            url: var("URL"),
            queue: var("QUEUE"),
            concurrency: var("CONCURRENCY").parse().unwrap(),
            work_ms: var("WORK_MS").parse().unwrap(),
            attempts_key: var("ATTEMPTS_KEY"),
            done_key: var("DONE_KEY"),
        }
    }

    /// Starts a worker process (this binary in the worker role).
    pub fn spawn(&self) -> super::procs::Guard {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.env(ROLE_VAR, "worker")
            .env("ASYNQDECK_CHAOS_URL", &self.url)
            .env("ASYNQDECK_CHAOS_QUEUE", &self.queue)
            .env("ASYNQDECK_CHAOS_CONCURRENCY", self.concurrency.to_string())
            .env("ASYNQDECK_CHAOS_WORK_MS", self.work_ms.to_string())
            .env("ASYNQDECK_CHAOS_ATTEMPTS_KEY", &self.attempts_key)
            .env("ASYNQDECK_CHAOS_DONE_KEY", &self.done_key)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        super::procs::Guard(super::procs::spawn(cmd))
    }
}

/// The server configuration of the chaos workers: the library defaults
/// (lease 30 s, recoverer every minute, heartbeat 5 s) except a retry
/// delay of 0 (a recovered task is due at once: the scenarios measure
/// recovery, not backoff) and the forwarder checking every second.
pub fn chaos_config(queue: &str, concurrency: usize) -> Config {
    Config {
        concurrency,
        queues: [(queue.to_string(), 1)].into(),
        retry_delay_func: std::sync::Arc::new(|_, _, _| Duration::ZERO),
        forwarder_interval: Duration::from_secs(1),
        ..Config::default()
    }
}

/// Runs the worker role; never returns (the process is killed).
pub fn run_role() -> ! {
    let spec = WorkerSpec::from_env();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        // A reply timeout would fail a handler whose write did land (then
        // it runs again): a long one, the machine may be loaded.
        let config =
            redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
        let redis = redis::Client::open(spec.url.as_str())
            .unwrap()
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .expect("worker: connect to Redis");
        let mut mux = ServeMux::new();
        let work = Duration::from_millis(spec.work_ms);
        let (attempts_key, done_key) = (spec.attempts_key.clone(), spec.done_key.clone());
        mux.handle_fn("chaos:", move |ctx: TaskContext, _task: Task| {
            let mut redis = redis.clone();
            let (attempts_key, done_key) = (attempts_key.clone(), done_key.clone());
            async move {
                let id = ctx.task_id().to_string();
                redis::cmd("HINCRBY")
                    .arg(&attempts_key)
                    .arg(&id)
                    .arg(1)
                    .query_async::<i64>(&mut redis)
                    .await?;
                tokio::time::sleep(work).await;
                redis::cmd("HINCRBY")
                    .arg(&done_key)
                    .arg(&id)
                    .arg(1)
                    .query_async::<i64>(&mut redis)
                    .await?;
                Ok(())
            }
        });
        let server = Server::connect(&spec.url, chaos_config(&spec.queue, spec.concurrency))
            .await
            .expect("worker: connect the server");
        server.run(mux).await.expect("worker: server failed");
    });
    std::process::exit(0)
}
