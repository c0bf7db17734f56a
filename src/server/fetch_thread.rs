//! The fetch loop's own thread, runtime and Redis connection.
//!
//! Why: with Redis on the same host, most of what a lease call costs Redis
//! beyond the script is waking the worker that waits for the reply: Redis's
//! `write` of the reply finds the worker's thread asleep and the kernel
//! wakes it on Redis's time (on the 2-vCPU bench VM ≈ 30–50 µs of Redis
//! kernel CPU per round trip with a sleeping client, ≈ 10 µs with a
//! spinning one; BENCHMARKS.md). So the fetch loop runs on a thread of its
//! own (a one-worker tokio runtime that also owns the loop's Redis
//! connection) and, after sending a lease call, keeps that thread awake
//! polling for the reply for up to [`Config::fetch_spin`] instead of
//! sleeping. On a shared multi-thread runtime that would not work: another
//! worker thread, asleep in `epoll_wait`, would still be the one Redis
//! wakes.
//!
//! The busy-poll itself is [`ReplySpin`](super::reply_spin::ReplySpin).
//!
//! Handlers still run on the caller's runtime: workers are spawned there,
//! and the inline first polls of quick task types
//! ([`inline_start`](super::inline_start)) enter its context.
//!
//! [`Config::fetch_spin`]: super::Config::fetch_spin

use std::sync::{Arc, Mutex};

use super::processor::{Processor, RunControl};

/// Runs `processor` (see [`Processor::run`]) on a thread of its own with a
/// one-worker runtime and a Redis connection of its own; workers are
/// spawned on the calling runtime. Completes when the loop has ended.
/// Falls back to a task on the calling runtime (and the shared connection)
/// when the thread or its runtime cannot be made, and to the shared
/// connection when its own cannot be opened. Dropped before it completes
/// (the calling runtime shuts down), it abandons the loop
/// ([`RunControl::abandon`]): no worker can run any more.
pub(crate) async fn run_processor(processor: Processor, ctl: RunControl) {
    tracing::debug!(spin = ?processor.spin.budget(), "fetch loop starting on its own thread");
    // Dropped in reverse order: abandon is set before stop is seen.
    let _stop_on_drop = ctl.stop.clone().drop_guard();
    let _abandon_on_drop = ctl.abandon.clone().drop_guard();
    // The thread takes the processor out; when it cannot start, it is
    // still here for the fallback.
    let slot = Arc::new(Mutex::new(Some(processor)));
    // `Some` back: the thread could not run it.
    let (ended_tx, ended_rx) = tokio::sync::oneshot::channel::<Option<Processor>>();
    let (thread_slot, thread_ctl) = (slot.clone(), ctl.clone());
    let spawned = std::thread::Builder::new()
        .name("asynqdeck-fetch".into())
        .spawn(move || {
            let Some(processor) = thread_slot.lock().expect("processor slot").take() else {
                return;
            };
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("asynqdeck-fetch")
                .enable_all()
                .build();
            let rt = match rt {
                Ok(rt) => rt,
                Err(err) => {
                    tracing::warn!(%err, "no runtime for the fetch loop; it runs on the server's");
                    let _ = ended_tx.send(Some(processor));
                    return;
                }
            };
            rt.block_on(async move {
                // Spawned, not run by block_on: the loop must run on the
                // runtime's worker, the thread that polls its I/O.
                let _ = tokio::spawn(run_on_own_connection(processor, thread_ctl)).await;
            });
            let _ = ended_tx.send(None);
        });
    let fallback = match spawned {
        // A panic on the thread (Err) ends the loop as a panicking task would.
        Ok(_) => ended_rx.await.ok().flatten(),
        Err(err) => {
            tracing::warn!(%err, "no thread for the fetch loop; it runs on the server's runtime");
            slot.lock().expect("processor slot").take()
        }
    };
    if let Some(processor) = fallback {
        processor.run(ctl).await;
    }
}

/// Runs `processor` on a connection opened on this runtime (or the shared
/// one when that fails).
async fn run_on_own_connection(mut processor: Processor, ctl: RunControl) {
    match processor.broker.own_connection().await {
        Ok(own) => processor.broker = own,
        Err(err) => {
            tracing::warn!(%err, "no connection of its own for the fetch loop; sharing the server's");
        }
    }
    processor.run(ctl).await;
}
