//! The subscriber: cancels running tasks named on `asynq:cancel` (Go
//! `subscriber.go`; wire spec §6.18, §7.6, §12).
//!
//! `Inspector::cancel_processing` (Go `Inspector.CancelProcessing`)
//! publishes a task id; every server's subscriber hears it, and the one
//! running that task cancels its handler's context with
//! [`CancelReason::Canceled`] (stored text `context canceled`). Ids of tasks
//! not running here are ignored. When the subscription cannot be made or the
//! connection drops, the subscriber waits (Go: 5 s) and subscribes again.
//! Cancellations published while it is not subscribed are lost, as in Go.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;

use super::inflight::{CancelReason, InFlight};
use super::ticker::sleep_unless_shutdown;
use crate::broker::Broker;

pub use super::defaults::DEFAULT_RESUBSCRIBE_WAIT;

/// Listens on `asynq:cancel` and cancels the named running tasks.
#[derive(Debug)]
pub struct Subscriber {
    broker: Broker,
    inflight: Arc<InFlight>,
    retry_wait: Duration,
}

impl Subscriber {
    /// A subscriber cancelling tasks of `inflight`, waiting `retry_wait`
    /// (Go: 5 s, [`DEFAULT_RESUBSCRIBE_WAIT`]) before each new subscription
    /// attempt. Go `newSubscriber`.
    pub fn new(broker: Broker, inflight: Arc<InFlight>, retry_wait: Duration) -> Self {
        Subscriber {
            broker,
            inflight,
            retry_wait,
        }
    }

    /// Subscribes and handles each published id until `shutdown` is
    /// cancelled; on a failed subscription or a lost connection it logs,
    /// waits `retry_wait` and subscribes again. Go `subscriber.start`.
    pub async fn run(self, shutdown: CancellationToken) {
        loop {
            match self.broker.subscribe_cancellations().await {
                Ok(mut ids) => loop {
                    tokio::select! {
                        biased;
                        _ = shutdown.cancelled() => {
                            tracing::debug!("subscriber done");
                            return;
                        }
                        next = ids.next() => match next {
                            Some(id) => {
                                self.handle(&id);
                            }
                            None => {
                                tracing::warn!("subscriber: lost the asynq:cancel subscription; subscribing again");
                                break;
                            }
                        },
                    }
                },
                Err(e) => {
                    tracing::warn!(error = %e, "subscriber: cannot subscribe to asynq:cancel");
                }
            }
            if !sleep_unless_shutdown(&shutdown, self.retry_wait).await {
                break;
            }
        }
        tracing::debug!("subscriber done");
    }

    /// Handles one published id: cancels the running task with that id
    /// ([`CancelReason::Canceled`]) and returns true; returns false when no
    /// such task runs here.
    pub fn handle(&self, task_id: &str) -> bool {
        match self.inflight.get(task_id) {
            Some(running) => {
                tracing::debug!(id = %task_id, "subscriber: cancelling the task");
                running.cancel_with(CancelReason::Canceled);
                true
            }
            None => false,
        }
    }
}
