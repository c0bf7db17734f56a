//! What the scenarios' handlers record, and the figures read from it.
//!
//! In-process workers (the Redis restart and CLIENT KILL scenarios) record
//! in memory ([`Recorder`]), so the record survives the Redis outage it
//! measures; worker processes record in Redis hashes (`worker.rs`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use asynqdeck::server::{ServeMux, TaskContext};
use asynqdeck::{Client, EnqueueOptions, Task};

/// One task id's record.
#[derive(Clone, Debug, Default)]
pub struct Entry {
    /// Handler calls started.
    pub attempts: u32,
    /// Handler calls that returned `Ok`.
    pub done: u32,
    /// When the first call started.
    pub first_start: Option<Instant>,
    /// When the first call returned `Ok`.
    pub first_done: Option<Instant>,
}

/// Per-task-id attempts and completions of in-process handlers.
#[derive(Clone, Default)]
pub struct Recorder(Arc<Mutex<HashMap<String, Entry>>>);

impl Recorder {
    /// A mux whose handler for `chaos:` records the call's start, sleeps
    /// `work`, records its completion and returns `Ok`.
    pub fn mux(&self, work: Duration) -> ServeMux {
        let mut mux = ServeMux::new();
        let rec = self.clone();
        mux.handle_fn("chaos:", move |ctx: TaskContext, _task: Task| {
            let rec = rec.clone();
            async move {
                let id = ctx.task_id().to_string();
                rec.started(&id);
                tokio::time::sleep(work).await;
                rec.finished(&id);
                Ok(())
            }
        });
        mux
    }

    /// Records that a handler call of task `id` started now (the Go
    /// worker's stdout reader calls it too).
    pub fn started(&self, id: &str) {
        let mut map = self.0.lock().unwrap();
        let e = map.entry(id.to_string()).or_default();
        e.attempts += 1;
        e.first_start.get_or_insert_with(Instant::now);
    }

    fn finished(&self, id: &str) {
        let mut map = self.0.lock().unwrap();
        let e = map.entry(id.to_string()).or_default();
        e.done += 1;
        e.first_done.get_or_insert_with(Instant::now);
    }

    /// A copy of the record.
    pub fn snapshot(&self) -> HashMap<String, Entry> {
        self.0.lock().unwrap().clone()
    }

    /// How many distinct ids completed at least once.
    pub fn done_ids(&self) -> usize {
        self.0
            .lock()
            .unwrap()
            .values()
            .filter(|e| e.done > 0)
            .count()
    }
}

/// Enqueues `n` tasks of type `chaos:task` to `queue` (payload = their
/// index, id `<queue>-<index>`) and returns their ids in order. An enqueue
/// that fails (a reply timeout on a loaded machine) is tried again with the
/// same id, so a retry never makes a second task.
pub async fn enqueue_n(client: &Client, queue: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::with_capacity(n);
    for i in 0..n {
        let id = format!("{queue}-{i}");
        let task = Task::new("chaos:task", i.to_string().into_bytes());
        let mut tries = 0;
        loop {
            match client
                .enqueue(&task, EnqueueOptions::new().queue(queue).task_id(&id))
                .await
            {
                Ok(_) | Err(asynqdeck::Error::TaskIdConflict) => break,
                Err(e) => {
                    tries += 1;
                    assert!(tries < 20, "enqueue {id}: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        ids.push(id);
    }
    ids
}

/// Polls `f` every 20 ms until it is true or `timeout` passes; returns
/// whether it became true.
pub async fn wait_until<F, Fut>(timeout: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A raw connection for the scenario's own reads (a new one per call, so a
/// killed connection never sticks).
pub async fn raw(url: &str) -> redis::RedisResult<redis::aio::MultiplexedConnection> {
    // A generous reply timeout: the machine may be loaded (the library's
    // own connections keep their defaults).
    let config =
        redis::AsyncConnectionConfig::new().set_response_timeout(Some(Duration::from_secs(10)));
    redis::Client::open(url)?
        .get_multiplexed_async_connection_with_config(&config)
        .await
}

/// Prints one figure line (`figure <scenario> <name> = <value>`), the
/// lines RELIABILITY.md quotes.
pub fn figure(scenario: &str, name: &str, value: impl std::fmt::Display) {
    println!("figure {scenario} {name} = {value}");
}
