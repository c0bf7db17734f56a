//! The health checker: pings Redis and reports to a user callback (Go
//! `healthcheck.go`; wire spec §7.1, §7.6).
//!
//! It runs only when the server has a callback (Go `HealthCheckFunc`). The
//! first check is one interval after start (Go default: 15 s). A callback
//! that panics is logged and called again at the next interval (issue 12
//! R3; COMPATIBILITY.md#r3).

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::ticker::{FirstTick, Ticker};
use crate::broker::Broker;
use crate::error::{Error, Result};

pub use super::defaults::DEFAULT_HEALTH_CHECK_INTERVAL;

/// The user callback: `None` when Redis answered `PING`, else the error
/// (Go `Config.HealthCheckFunc`).
pub type HealthCheckFunc = Arc<dyn Fn(Option<&Error>) + Send + Sync>;

/// Pings Redis every interval and reports the result.
pub struct HealthChecker {
    broker: Broker,
    interval: Duration,
    callback: HealthCheckFunc,
}

impl std::fmt::Debug for HealthChecker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealthChecker")
            .field("interval", &self.interval)
            .finish_non_exhaustive()
    }
}

impl HealthChecker {
    /// A checker calling `callback` every `interval` (Go default
    /// [`DEFAULT_HEALTH_CHECK_INTERVAL`]). Go `newHealthChecker`.
    pub fn new(broker: Broker, interval: Duration, callback: HealthCheckFunc) -> Self {
        HealthChecker {
            broker,
            interval,
            callback,
        }
    }

    /// Checks every `interval` (first check after one interval) until
    /// `shutdown` is cancelled. Go `healthchecker.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        super::panic_guard::install_panic_hook();
        let mut ticks = Ticker::new(self.interval, FirstTick::AfterInterval, &shutdown);
        while ticks.next().await {
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "healthcheck: redis ping failed");
            }
        }
        tracing::debug!("healthcheck done");
    }

    /// One check: `PING`, then the callback with the outcome; returns the
    /// outcome too. A panic in the callback is caught and logged (one
    /// `error` line with its location, once the server installed its panic
    /// hook): the check goes on. Errors: [`Error::Redis`] when Redis does
    /// not answer.
    pub async fn tick(&self) -> Result<()> {
        let result = self.broker.ping().await;
        let callback = &self.callback;
        // asynq divergence: COMPATIBILITY.md#r3
        let _ = super::panic_guard::call_user("health check callback", || {
            callback(result.as_ref().err())
        });
        result
    }
}
