//! The idle waker: wakes the fetch loop as soon as a queue it found empty
//! gets pending work (a blocking `BLMOVE` per queue; Redis ≥ 6.2), so idle
//! workers need not poll every `task_check_interval`.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::broker::Broker;

/// Wakes the idle fetch loop as soon as any queue has pending work: one
/// blocking [`PendingWaiter`](crate::broker::PendingWaiter) per queue,
/// armed each time a fetch comes back empty. Without it (Redis < 6.2) the
/// loop polls every `task_check_interval`, as Go does.
///
/// Each waiter has its own `Notify` and is armed with `notify_one`, which
/// stores a permit when the waiter is still blocked in its previous BLMOVE:
/// it re-blocks as soon as that one times out, so no arming is lost between
/// the loop's sleep and the waiter's timeout.
pub(super) struct Waker {
    arms: Vec<Arc<tokio::sync::Notify>>,
    wake: Arc<tokio::sync::Notify>,
}

impl Waker {
    pub(super) async fn start(
        broker: &Broker,
        queues: &[String],
        interval: Duration,
        stop: &CancellationToken,
    ) -> Waker {
        let mut waker = Waker {
            arms: Vec::new(),
            wake: Arc::new(tokio::sync::Notify::new()),
        };
        for queue in queues {
            let mut waiter = match broker.pending_waiter(queue).await {
                Ok(Some(w)) => w,
                Ok(None) => {
                    tracing::info!("Redis < 6.2: idle workers poll every {interval:?}");
                    break;
                }
                Err(err) => {
                    tracing::warn!(queue, %err, "no blocking wake-up; polling instead");
                    continue;
                }
            };
            let arm = Arc::new(tokio::sync::Notify::new());
            waker.arms.push(arm.clone());
            let (wake, stop) = (waker.wake.clone(), stop.clone());
            tokio::spawn(async move {
                loop {
                    let round = async {
                        arm.notified().await;
                        match waiter.wait(interval).await {
                            Ok(true) => wake.notify_one(),
                            Ok(false) => {}
                            Err(err) => {
                                tracing::warn!(%err, "pending waiter failed");
                                tokio::time::sleep(interval).await;
                            }
                        }
                    };
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = round => {}
                    }
                }
            });
        }
        waker
    }

    /// Lets every waiter block on its queue once more (now, or right after
    /// its current wait ends).
    pub(super) fn arm(&self) {
        for arm in &self.arms {
            arm.notify_one();
        }
    }

    /// Completes when a waiter saw pending work.
    pub(super) async fn woken(&self) {
        self.wake.notified().await;
    }
}
