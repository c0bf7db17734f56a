//! asynqdeck: a Rust implementation of the asynq task queue (Go
//! `github.com/hibiken/asynq` v0.26.0), wire-compatible with it, plus a
//! dashboard.
//!
//! Go producers, Go workers, Go's Inspector and asynqdeck share one Redis:
//! same keys, hash fields, protobuf messages and state transitions.
//!
//! # Layout
//! - [`task`]: [`Task`], [`EnqueueOptions`], [`TaskInfo`], [`TaskState`].
//! - [`client`]: [`Client`] enqueues tasks (Go `client.go`).
//! - [`inspector`]: [`Inspector`] reads and changes queues and tasks (Go `inspector.go`).
//! - [`broker`]: the only module that speaks Redis: key names, protobuf
//!   messages and one Lua script per operation (Go `internal/rdb`, `internal/base`).
//! - [`server`]: the worker side: [`Handler`], [`ServeMux`], [`TaskContext`],
//!   handler error markers ([`SkipRetry`], [`RevokeTask`]) and retry policies.
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
pub mod broker;
pub mod cli;
pub mod client;
pub mod clock;
pub mod demo;
pub mod error;
pub mod inspector;
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
