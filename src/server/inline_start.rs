//! Starting a worker without a spawn when its handler is quick.
//!
//! A spawned task per worker makes the runtime wake another thread for each
//! batch, and those threads park again as soon as the (short) handlers end:
//! at concurrency 10 about 20 context switches per batch of 10 no-op tasks
//! on a multi-thread runtime, more CPU than the work (BENCHMARKS.md). So the
//! fetch loop polls each new worker once itself: a worker that finishes in
//! that poll needs no task at all; one that waits is spawned and goes on
//! like any other (its next poll comes from the spawn, so no wake-up is
//! lost). Handlers that compute before their first `.await` must not hold
//! up the fetch loop, so a task type whose first poll ever took longer than
//! [`SLOW_FIRST_POLL`] is always spawned afterwards, and the inline polls of
//! one batch stop once they used [`BATCH_BUDGET`].

use std::collections::HashSet;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Mutex;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A first poll longer than this marks its task type as slow (always spawned).
pub const SLOW_FIRST_POLL: Duration = Duration::from_millis(1);
/// Most time the fetch loop spends in inline polls per batch.
pub const BATCH_BUDGET: Duration = Duration::from_millis(2);

/// A worker's future.
pub type Worker = Pin<Box<dyn Future<Output = ()> + Send>>;

/// The task types seen to be slow on their first poll.
#[derive(Default)]
pub struct InlineStart {
    slow: Mutex<HashSet<String>>,
}

impl InlineStart {
    /// Starts `worker` for a task of `task_type`: polls it once here when
    /// the type is not known slow and `budget` is left (and charges the
    /// poll's time to it), else or when it is still pending, spawns it on
    /// `workers`. A panic escaping the first poll is logged and the worker
    /// dropped, as a spawned task's would end.
    pub fn start(
        &self,
        workers: &mut tokio::task::JoinSet<()>,
        task_type: &str,
        mut worker: Worker,
        budget: &mut Duration,
    ) {
        if budget.is_zero() || self.slow.lock().expect("slow types").contains(task_type) {
            workers.spawn(worker);
            return;
        }
        let started = Instant::now();
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| worker.as_mut().poll(&mut cx)));
        let took = started.elapsed();
        *budget = budget.saturating_sub(took);
        if took > SLOW_FIRST_POLL {
            tracing::debug!(
                task_type,
                ?took,
                "slow first poll; spawning this type's workers from now on"
            );
            self.slow
                .lock()
                .expect("slow types")
                .insert(task_type.to_string());
        }
        match polled {
            Ok(Poll::Ready(())) => {}
            Ok(Poll::Pending) => {
                workers.spawn(worker);
            }
            Err(_) => tracing::error!(task_type, "worker panicked outside its handler"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn counting(done: &Arc<AtomicUsize>, sync_work: Duration, wait: bool) -> Worker {
        let done = done.clone();
        Box::pin(async move {
            std::thread::sleep(sync_work);
            if wait {
                tokio::task::yield_now().await;
            }
            done.fetch_add(1, Ordering::SeqCst);
        })
    }

    #[tokio::test]
    async fn a_quick_worker_ends_in_its_inline_poll_and_a_waiting_one_is_spawned() {
        let (inline, done) = (InlineStart::default(), Arc::new(AtomicUsize::new(0)));
        let mut workers = tokio::task::JoinSet::new();
        let mut budget = BATCH_BUDGET;
        inline.start(
            &mut workers,
            "t",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (1, 0));
        inline.start(
            &mut workers,
            "t",
            counting(&done, Duration::ZERO, true),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (1, 1));
        workers.join_next().await.unwrap().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 2, "the spawned worker resumed");
        assert!(budget < BATCH_BUDGET, "the polls were charged");
    }

    #[tokio::test]
    async fn a_slow_first_poll_makes_its_type_always_spawned() {
        let (inline, done) = (InlineStart::default(), Arc::new(AtomicUsize::new(0)));
        let mut workers = tokio::task::JoinSet::new();
        let mut budget = Duration::from_secs(1);
        let slow = SLOW_FIRST_POLL * 3;
        inline.start(
            &mut workers,
            "slow",
            counting(&done, slow, false),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (1, 0));
        assert!(inline.slow.lock().unwrap().contains("slow"));
        // Quick now, but its type is known slow: spawned; other types not.
        inline.start(
            &mut workers,
            "slow",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        inline.start(
            &mut workers,
            "quick",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (2, 1));
        workers.join_next().await.unwrap().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_spent_budget_spawns_the_rest_of_the_batch() {
        let (inline, done) = (InlineStart::default(), Arc::new(AtomicUsize::new(0)));
        let mut workers = tokio::task::JoinSet::new();
        let mut budget = Duration::from_micros(500);
        // 0.8 ms: below SLOW_FIRST_POLL, above the budget.
        inline.start(
            &mut workers,
            "t",
            counting(&done, Duration::from_micros(800), false),
            &mut budget,
        );
        assert_eq!(budget, Duration::ZERO);
        inline.start(
            &mut workers,
            "t",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (1, 1));
        workers.join_next().await.unwrap().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_panic_in_the_first_poll_ends_that_worker_only() {
        let inline = InlineStart::default();
        let mut workers = tokio::task::JoinSet::new();
        let mut budget = BATCH_BUDGET;
        let dropped = Arc::new(AtomicUsize::new(0));
        struct Guard(Arc<AtomicUsize>);
        impl Drop for Guard {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let guard = Guard(dropped.clone());
        inline.start(
            &mut workers,
            "t",
            Box::pin(async move {
                let _g = guard;
                panic!("outside the handler");
            }),
            &mut budget,
        );
        assert_eq!(
            (workers.len(), dropped.load(Ordering::SeqCst)),
            (0, 1),
            "dropped, not spawned"
        );
    }
}
