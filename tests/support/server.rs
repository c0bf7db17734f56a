//! Our [`Server`] run inside a test ([`start`], [`start_on`], stopped with
//! [`Running::shutdown`]) and the waits for what it does to a task
//! ([`wait_until`], [`wait_state`], [`wait_gone`]), each failing the test
//! with the last state seen once [`WAIT`] has passed.

use std::time::Duration;

use asynqdeck::broker::Broker;
use asynqdeck::server::{Config, Handler, Server, ShutdownHandle};
use asynqdeck::{Error, Inspector, TaskInfo, TaskState};

use super::TestDb;

/// How long any single wait may take before it fails the test.
pub const WAIT: Duration = Duration::from_secs(10);

/// A server running in a tokio task.
pub struct Running {
    pub handle: ShutdownHandle,
    pub join: tokio::task::JoinHandle<asynqdeck::Result<()>>,
}

impl Running {
    /// Graceful shutdown; fails the test if it takes longer than [`WAIT`].
    pub async fn shutdown(self) {
        self.shutdown_within(WAIT).await;
    }

    /// Graceful shutdown, waited for however long it takes.
    pub async fn stop(self) {
        self.handle.shutdown();
        self.join.await.unwrap().unwrap();
    }

    /// Graceful shutdown; fails the test if it takes longer than `wait`.
    pub async fn shutdown_within(self, wait: Duration) {
        self.handle.shutdown();
        tokio::time::timeout(wait, self.join)
            .await
            .expect("server shuts down in time")
            .unwrap()
            .unwrap();
    }
}

/// Runs `handler` on a server for `db` with `config` (`Server::connect`).
pub async fn start(db: &TestDb, config: Config, handler: impl Handler) -> Running {
    start_on(Broker::connect(&db.url()).await.unwrap(), config, handler)
}

/// Runs `handler` on a server over `broker` (its clock, say) with `config`.
pub fn start_on(broker: Broker, config: Config, handler: impl Handler) -> Running {
    let server = Server::new(broker, config);
    let handle = server.shutdown_handle();
    let join = tokio::spawn(server.run_until(handler, std::future::pending()));
    Running { handle, join }
}

/// Waits until the task satisfies `pred`; panics with the last state seen.
pub async fn wait_until(
    inspector: &Inspector,
    queue: &str,
    id: &str,
    what: &str,
    pred: impl Fn(&TaskInfo) -> bool,
) -> TaskInfo {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let last = match inspector.get_task_info(queue, id).await {
            Ok(info) if pred(&info) => return info,
            other => other,
        };
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} never became {what}; last seen: {last:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until the task is in `state`.
pub async fn wait_state(
    inspector: &Inspector,
    queue: &str,
    id: &str,
    state: TaskState,
) -> TaskInfo {
    wait_until(inspector, queue, id, state.as_str(), |t| t.state == state).await
}

/// Waits until the task's hash is gone (done or revoked).
pub async fn wait_gone(inspector: &Inspector, queue: &str, id: &str) {
    let gone = super::eventually(WAIT, || async {
        matches!(
            inspector.get_task_info(queue, id).await,
            Err(Error::TaskNotFound { .. })
        )
        .then_some(())
    })
    .await;
    assert!(gone.is_some(), "task {id} still exists");
}
