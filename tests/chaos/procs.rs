//! Child processes of the chaos suite: private redis-servers that can be
//! killed and started again on the same port and directory
//! (`tests/support/restartable.rs`), worker processes (this binary
//! re-executed, see `worker.rs`), the Go peer and `asynqdeck serve`.
//!
//! Every child is forked by one spawner thread that lives as long as the
//! test process, with `PR_SET_PDEATHSIG = SIGKILL`: the kernel sends that
//! signal when the forking *thread* ends, so a child dies with the suite
//! however the suite ends, and never outlives it.

use std::process::Child;

pub use super::support::restartable::{RedisProc, free_port, kill9, spawn};

/// A child process killed (SIGKILL) and reaped on drop.
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        kill9(&mut self.0);
    }
}
