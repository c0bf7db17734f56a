//! asynqdeck: a Rust implementation of the asynq task queue (Go
//! `github.com/hibiken/asynq` v0.26.0), wire-compatible with it, plus a
//! dashboard.
//!
//! Go producers, Go workers, Go's Inspector and asynqdeck share one Redis:
//! same keys, hash fields, protobuf messages and state transitions.
//!
//! # Layout
//! Layers point one way: [`web`] → [`inspector`] → [`broker`], and
//! [`server`] → [`broker`]; [`app`] serves [`web`] with the engine, and
//! [`cli`] and [`demo`] call [`app`]. Only [`broker`] speaks Redis.
//! - [`task`]: [`Task`], [`EnqueueOptions`], [`TaskInfo`], [`TaskState`].
//! - [`client`]: [`Client`] enqueues tasks (Go `client.go`).
//! - [`inspector`]: [`Inspector`] reads and changes queues and tasks (Go
//!   `inspector.go`), plus what the dashboard reads: a queue tab
//!   (`inspector::tab`), error groups (`inspector::errgroups`), the table of
//!   actions each task state allows (`inspector::actions`) and the queues
//!   snapshot (`inspector::snapshot`).
//! - [`broker`]: the only module that speaks Redis (a standalone server, a
//!   Redis Cluster or a Sentinel-elected master, `broker::conn`): key names, protobuf
//!   messages, paging (`broker::page`), queue statistics (`broker::stats`)
//!   and one Lua script per operation (Go `internal/rdb`, `internal/base`).
//! - [`server`]: the worker side: [`Handler`], [`ServeMux`], [`TaskContext`],
//!   handler error markers ([`SkipRetry`], [`RevokeTask`]), retry policies,
//!   the fetch loop (`server::processor`), the worker that runs one task and
//!   writes its retry/archive/completion (`server::worker`), the fetch
//!   loop's own writes of successes and revokes (`server::acks`) and the
//!   maintenance loops on one tick helper (`server::ticker`, Go's default
//!   intervals in `server::defaults`).
//! - [`web`]: the dashboard's router: pages (`web::pages`), the
//!   asynqmon-compatible JSON API (`web::api`), security, metrics.
//! - [`app`]: serving the dashboard with the embedded engine
//!   ([`app::serve`]); [`cli`] parses the command line and dispatches;
//!   [`demo`] runs the app with demo workers and its own Redis.
//! - [`clock`]: the time source, injectable for tests.
//! - [`error`]: the public [`Error`].
//!
//! ```no_run
//! use asynqdeck::{Client, EnqueueOptions, Inspector, Task, TaskState};
//! # async fn demo() -> asynqdeck::Result<()> {
//! let client = Client::connect("redis://127.0.0.1:6379/0").await?;
//! let task = Task::new("email:send", br#"{"to":"a@b.c"}"#.to_vec());
//! let info = client.enqueue(&task, EnqueueOptions::new().max_retry(5)).await?;
//! assert_eq!(info.state, TaskState::Pending);
//!
//! let inspector = Inspector::connect("redis://127.0.0.1:6379/0").await?;
//! let found = inspector.get_task_info("default", &info.id).await?;
//! assert_eq!(found.max_retry, 5);
//! # Ok(()) }
//! ```

pub mod app;
mod app_schedule;
pub mod broker;
pub mod cli;
pub mod client;
pub mod clock;
pub mod demo;
pub mod error;
pub mod export;
pub mod inspector;
pub mod scheduler;
pub mod server;
pub mod task;
pub mod web;

pub use client::Client;
pub use error::{Error, Result};
pub use inspector::Inspector;
pub use server::{
    Backoff, Config, Handler, RetryAfter, RetryDelayFunc, RetryPolicy, RevokeTask, ServeMux,
    Server, ShutdownHandle, SkipRetry, TaskContext, TaskError, handler_fn,
};
pub use task::{EnqueueOptions, ProcessAt, Task, TaskInfo, TaskState};

/// The README's examples are compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
