//! Starting a worker without a spawn when its task type is known to be quick.
//!
//! A spawned task per worker makes the runtime wake another thread for each
//! batch, and those threads park again as soon as short handlers end: at
//! concurrency 10 about 20 context switches per batch of 10 no-op tasks on
//! a multi-thread runtime, more CPU than the work (BENCHMARKS.md). So for a
//! task type seen to be quick the fetch loop polls a new worker once itself:
//! one that finishes in that poll needs no task at all; one that waits is
//! spawned and goes on like any other (the spawn polls it again, so no
//! wake-up is lost).
//!
//! Only learned-quick types: a handler may compute, or block its thread
//! (even on a sibling task, which the `Handler` docs warn against), before
//! its first `.await`, and that must not hold up the fetch loop. Workers of a new type are spawned, with their
//! first poll timed; after [`QUICK_STREAK`] first polls in a row under
//! [`QUICK_FIRST_POLL`] the type is quick. A first poll over
//! [`SLOW_FIRST_POLL`], spawned or inline, makes the type slow: spawned
//! until [`SLOW_RELEARN_STREAK`] first polls in a row were quick again (a
//! poll can be slow only because its thread was preempted, and on a busy
//! host that must not cost the type its inline start for good). The inline
//! polls of one batch stop once they used [`BATCH_BUDGET`].

// asynq divergence: COMPATIBILITY.md#w12
use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// A first poll at most this long counts towards a type being quick.
pub const QUICK_FIRST_POLL: Duration = Duration::from_micros(100);
/// Quick first polls in a row that make a type quick.
pub const QUICK_STREAK: u32 = 64;
/// A first poll longer than this makes its type slow: spawned until
/// [`SLOW_RELEARN_STREAK`] quick first polls in a row.
pub const SLOW_FIRST_POLL: Duration = Duration::from_millis(1);
/// Quick first polls in a row that make a slow type quick again.
pub const SLOW_RELEARN_STREAK: u32 = 1024;
/// Most time the fetch loop spends in inline polls per batch.
pub const BATCH_BUDGET: Duration = Duration::from_millis(2);

/// A worker's future.
pub type Worker = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What is known of a task type's first polls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Quick first polls in a row so far.
    Learning(u32),
    Quick,
    /// Quick first polls in a row since the last slow one.
    Slow(u32),
}

/// The kind after a first poll that took `took` (at most
/// [`SLOW_FIRST_POLL`]) of a type with `n` quick first polls in a row:
/// quick once the streak reaches `needed`, else `counting` the streak (0
/// again after a poll that was not quick).
fn streak(n: u32, took: Duration, needed: u32, counting: fn(u32) -> Kind) -> Kind {
    if took > QUICK_FIRST_POLL {
        counting(0)
    } else if n + 1 >= needed {
        Kind::Quick
    } else {
        counting(n + 1)
    }
}

/// The task types' kinds, shared by the fetch loop and the workers.
#[derive(Default)]
pub struct InlineStart {
    kinds: Mutex<HashMap<String, Kind>>,
}

impl InlineStart {
    fn kind(&self, task_type: &str) -> Kind {
        let kinds = self.kinds.lock().expect("task kinds");
        kinds.get(task_type).copied().unwrap_or(Kind::Learning(0))
    }

    /// Records how long a first poll of `task_type` took.
    fn record(&self, task_type: &str, took: Duration) {
        let mut kinds = self.kinds.lock().expect("task kinds");
        let kind = kinds
            .entry(task_type.to_string())
            .or_insert(Kind::Learning(0));
        *kind = match *kind {
            // Logged once per turn to slow, not for every slow poll.
            Kind::Slow(_) if took > SLOW_FIRST_POLL => Kind::Slow(0),
            _ if took > SLOW_FIRST_POLL => {
                tracing::debug!(task_type, ?took, "slow first poll; its workers are spawned");
                Kind::Slow(0)
            }
            Kind::Quick => Kind::Quick,
            Kind::Slow(n) => streak(n, took, SLOW_RELEARN_STREAK, Kind::Slow),
            Kind::Learning(n) => streak(n, took, QUICK_STREAK, Kind::Learning),
        };
    }

    /// Starts `worker` for a task of `task_type`: polls it once here when
    /// the type is quick and `budget` is left (charging the poll's time to
    /// it), else spawns it on `workers`, on runtime `rt` (timing its first
    /// poll while the type is still learned); a worker still pending after
    /// the inline poll is spawned there. An inline poll runs inside `rt`'s
    /// context, so what the handler spawns or registers (tasks, timers,
    /// sockets) belongs to `rt` as if the worker had been spawned. A panic
    /// escaping an inline poll is logged and the worker dropped, as a
    /// spawned task's would end.
    pub fn start(
        self: &Arc<Self>,
        workers: &mut tokio::task::JoinSet<()>,
        rt: &tokio::runtime::Handle,
        task_type: &str,
        mut worker: Worker,
        budget: &mut Duration,
    ) {
        match self.kind(task_type) {
            Kind::Quick if !budget.is_zero() => {}
            Kind::Learning(_) | Kind::Slow(_) => {
                let (me, task_type) = (self.clone(), task_type.to_string());
                let mut first = true;
                workers.spawn_on(
                    std::future::poll_fn(move |cx| {
                        if !first {
                            return worker.as_mut().poll(cx);
                        }
                        first = false;
                        let started = Instant::now();
                        let polled = worker.as_mut().poll(cx);
                        me.record(&task_type, started.elapsed());
                        polled
                    }),
                    rt,
                );
                return;
            }
            _ => {
                workers.spawn_on(worker, rt);
                return;
            }
        }
        let _in_rt = rt.enter();
        let started = Instant::now();
        let mut cx = Context::from_waker(futures_util::task::noop_waker_ref());
        let polled = std::panic::catch_unwind(AssertUnwindSafe(|| worker.as_mut().poll(&mut cx)));
        let took = started.elapsed();
        *budget = budget.saturating_sub(took);
        self.record(task_type, took);
        match polled {
            Ok(Poll::Ready(())) => {}
            Ok(Poll::Pending) => {
                workers.spawn_on(worker, rt);
            }
            Err(_) => tracing::error!(task_type, "worker panicked outside its handler"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    fn rt() -> tokio::runtime::Handle {
        tokio::runtime::Handle::current()
    }

    /// A fresh registry, a completion counter and an empty worker set.
    fn fixture() -> (Arc<InlineStart>, Arc<AtomicUsize>, tokio::task::JoinSet<()>) {
        (
            Arc::new(InlineStart::default()),
            Arc::new(AtomicUsize::new(0)),
            tokio::task::JoinSet::new(),
        )
    }

    fn quick_streak(inline: &InlineStart, task_type: &str, n: u32) {
        inline
            .kinds
            .lock()
            .unwrap()
            .insert(task_type.to_string(), Kind::Learning(n));
    }

    fn quick(inline: &InlineStart, task_type: &str) {
        inline
            .kinds
            .lock()
            .unwrap()
            .insert(task_type.to_string(), Kind::Quick);
    }

    #[tokio::test]
    async fn a_new_type_is_spawned_until_its_first_polls_were_quick_in_a_row() {
        let (inline, done, mut workers) = fixture();
        let mut budget = BATCH_BUDGET;
        inline.start(
            &mut workers,
            &rt(),
            "t",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!(workers.len(), 1, "spawned while learning");
        workers.join_next().await.unwrap().unwrap();
        // The spawned worker's first poll was timed and recorded (`start`
        // itself records nothing). Its kind is Learning(1) when that poll
        // took ≤ QUICK_FIRST_POLL, as on an idle machine; a loaded one can
        // preempt it past that (seen in CI), so the streak below starts
        // from a set state instead of from the measured one.
        assert!(inline.kinds.lock().unwrap().contains_key("t"), "recorded");
        quick_streak(&inline, "t", 1);
        // A first poll between quick and slow restarts the streak.
        inline.record("t", QUICK_FIRST_POLL * 2);
        assert_eq!(inline.kind("t"), Kind::Learning(0));
        for _ in 0..QUICK_STREAK - 1 {
            inline.record("t", Duration::from_micros(5));
        }
        assert_eq!(inline.kind("t"), Kind::Learning(QUICK_STREAK - 1));
        inline.record("t", Duration::from_micros(5));
        assert_eq!(inline.kind("t"), Kind::Quick);
        assert_eq!(budget, BATCH_BUDGET, "spawned workers cost no budget");
    }

    #[tokio::test]
    async fn a_quick_worker_ends_in_its_inline_poll_and_a_waiting_one_is_spawned() {
        let (inline, done, mut workers) = fixture();
        quick(&inline, "t");
        let mut budget = BATCH_BUDGET;
        inline.start(
            &mut workers,
            &rt(),
            "t",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (1, 0));
        inline.start(
            &mut workers,
            &rt(),
            "t",
            counting(&done, Duration::ZERO, true),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (1, 1));
        workers.join_next().await.unwrap().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 2, "the spawned worker resumed");
        assert!(budget < BATCH_BUDGET, "the inline polls were charged");
    }

    #[tokio::test]
    async fn a_slow_first_poll_spawned_or_inline_spawns_its_type_until_quick_again() {
        let (inline, done, mut workers) = fixture();
        let mut budget = Duration::from_secs(1);
        let slow = SLOW_FIRST_POLL * 3;
        // Spawned (learning): its timed first poll marks the type.
        inline.start(
            &mut workers,
            &rt(),
            "a",
            counting(&done, slow, false),
            &mut budget,
        );
        workers.join_next().await.unwrap().unwrap();
        assert_eq!(inline.kind("a"), Kind::Slow(0));
        // Inline (quick): the same.
        quick(&inline, "b");
        inline.start(
            &mut workers,
            &rt(),
            "b",
            counting(&done, slow, false),
            &mut budget,
        );
        assert_eq!((inline.kind("b"), workers.len()), (Kind::Slow(0), 0));
        // Quick first polls again: spawned (and timed) until a streak of
        // SLOW_RELEARN_STREAK; a slow one restarts it.
        for _ in 0..SLOW_RELEARN_STREAK - 2 {
            inline.record("b", Duration::ZERO);
        }
        inline.start(
            &mut workers,
            &rt(),
            "b",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!(workers.len(), 1, "still spawned");
        workers.join_next().await.unwrap().unwrap();
        assert_eq!(inline.kind("b"), Kind::Slow(SLOW_RELEARN_STREAK - 1));
        inline.record("b", QUICK_FIRST_POLL * 2);
        assert_eq!(inline.kind("b"), Kind::Slow(0), "not quick: restarts");
        for _ in 0..SLOW_RELEARN_STREAK {
            inline.record("b", Duration::ZERO);
        }
        assert_eq!(inline.kind("b"), Kind::Quick);
        inline.start(
            &mut workers,
            &rt(),
            "b",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!(workers.len(), 0, "inline again");
        assert_eq!(done.load(Ordering::SeqCst), 4);
    }

    /// A handler that blocks its thread until a sibling task runs (bad
    /// practice, but it works with spawned tasks) is not polled inline
    /// while its first spawned polls are slow.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_handler_waiting_for_a_sibling_is_never_polled_inline() {
        let inline = Arc::new(InlineStart::default());
        let mut workers = tokio::task::JoinSet::new();
        let mut budget = BATCH_BUDGET;
        let barrier = Arc::new(std::sync::Barrier::new(2));
        for _ in 0..2 {
            let b = barrier.clone();
            inline.start(
                &mut workers,
                &rt(),
                "pair",
                Box::pin(async move {
                    std::thread::sleep(SLOW_FIRST_POLL * 2);
                    b.wait();
                }),
                &mut budget,
            );
        }
        while let Some(r) = workers.join_next().await {
            r.unwrap();
        }
        assert_eq!(inline.kind("pair"), Kind::Slow(0));
    }

    #[tokio::test]
    async fn a_spent_budget_spawns_the_rest_of_the_batch() {
        let (inline, done, mut workers) = fixture();
        quick(&inline, "t");
        let mut budget = Duration::from_micros(500);
        // 0.8 ms: above the budget (and maybe marked slow; either way the
        // next one is spawned).
        inline.start(
            &mut workers,
            &rt(),
            "t",
            counting(&done, Duration::from_micros(800), false),
            &mut budget,
        );
        assert_eq!(budget, Duration::ZERO);
        inline.start(
            &mut workers,
            &rt(),
            "t",
            counting(&done, Duration::ZERO, false),
            &mut budget,
        );
        assert_eq!((done.load(Ordering::SeqCst), workers.len()), (1, 1));
        workers.join_next().await.unwrap().unwrap();
        assert_eq!(done.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_panic_in_an_inline_poll_ends_that_worker_only() {
        let inline = Arc::new(InlineStart::default());
        quick(&inline, "t");
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
            &rt(),
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

    /// Polled inline on the fetch loop's thread, a worker is in the
    /// workers' runtime: `Handle::current`, `tokio::spawn` and (on the
    /// fetch loop's one-worker multi-thread runtime) `block_in_place` work
    /// as for a spawned worker; still pending, it goes on there.
    #[test]
    fn an_inline_poll_belongs_to_the_workers_runtime() {
        let build = |name: &str| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name(name)
                .enable_all()
                .build()
                .unwrap()
        };
        let (workers_rt, fetch_rt) = (build("test-workers"), build("test-fetch"));
        let handle = workers_rt.handle().clone();
        let want = handle.id();
        let seen = fetch_rt.block_on(async move {
            tokio::spawn(async move {
                let (inline, _, mut workers) = fixture();
                quick(&inline, "t");
                let seen = Arc::new(Mutex::new(Vec::new()));
                let s = seen.clone();
                let (go, wait) = tokio::sync::oneshot::channel::<()>();
                let worker: Worker = Box::pin(async move {
                    let first = std::thread::current().name().map(String::from);
                    tokio::task::block_in_place(|| {});
                    let here = tokio::runtime::Handle::current().id();
                    let there = tokio::spawn(async { tokio::runtime::Handle::current().id() });
                    wait.await.unwrap();
                    let there = there.await.unwrap();
                    let after = std::thread::current().name().map(String::from);
                    s.lock().unwrap().push((here, there, first, after));
                });
                let mut budget = BATCH_BUDGET;
                inline.start(&mut workers, &handle, "t", worker, &mut budget);
                assert_eq!(workers.len(), 1, "pending after its inline poll: spawned");
                go.send(()).unwrap();
                workers.join_next().await.unwrap().unwrap();
                Arc::try_unwrap(seen).unwrap().into_inner().unwrap()
            })
            .await
            .unwrap()
        });
        let name = |n: &str| Some(n.to_string());
        assert_eq!(
            seen,
            vec![(want, want, name("test-fetch"), name("test-workers"))]
        );
    }
}
