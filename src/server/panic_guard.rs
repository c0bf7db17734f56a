//! Catching panics in user code: task handlers (while they build their
//! future and while it is polled), middleware, the error handler and the
//! health-check callback (S25; issue 12 R1, R3).
//!
//! A panic caught here is a failure of that piece of user code, not of the
//! server: the process-wide hook ([`install_panic_hook`]) logs it as one
//! `error` line naming the user code and its `file:line` (no backtrace),
//! and remembers the location for the worker that turns it into a
//! [`PanicError`](super::PanicError) (Go `processor.perform`'s `recover`).
//! Panics anywhere else go to the previous hook as usual.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Once;
use std::task::{Context, Poll};

thread_local! {
    /// `file:line` of the last panic caught in user code on this thread.
    static PANIC_LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
    /// Set (to what runs) while this thread runs guarded user code.
    static IN_USER_CODE: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// Installs (once per process) the hook that logs a panic in guarded user
/// code as one line and records its location; other panics go to the
/// previous hook.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let Some(what) = IN_USER_CODE.with(|h| h.get()) else {
                previous(info);
                return;
            };
            let location = info
                .location()
                .map(|l| format!("{}:{}", l.file(), l.line()));
            let message = payload_text(info.payload());
            tracing::error!(
                location = location.as_deref().unwrap_or("?"),
                "{what} panicked: {message}"
            );
            PANIC_LOCATION.with(|l| *l.borrow_mut() = location);
        }));
    });
}

/// The text of a panic payload: the `&str` or `String` it carries, else
/// `"unknown panic"`.
pub(crate) fn payload_text(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// The location recorded for the last panic caught on this thread, taken.
pub(crate) fn take_panic_location() -> Option<String> {
    PANIC_LOCATION.with(|l| l.borrow_mut().take())
}

/// Runs `f` marked as user code `what` (e.g. `"error handler"`), with
/// panics caught: `Err(payload)` when it panicked (already logged by the
/// hook once [`install_panic_hook`] ran).
pub(crate) fn call_user<R>(what: &'static str, f: impl FnOnce() -> R) -> std::thread::Result<R> {
    let outer = IN_USER_CODE.with(|h| h.replace(Some(what)));
    let r = std::panic::catch_unwind(AssertUnwindSafe(f));
    IN_USER_CODE.with(|h| h.set(outer));
    r
}

/// A handler call: builds the handler's future on its first poll and polls
/// it, each step inside [`call_user`]. So a handler (or a middleware) that
/// panics before it returns its future fails its task exactly as one whose
/// future panics, whichever thread runs the first poll (a spawned worker or
/// the fetch loop's inline start, `inline_start.rs`). Completes with the
/// handler's output, or `Err(payload)` when any step panicked.
pub(crate) struct HandlerCall<B, F> {
    state: State<B, F>,
}

enum State<B, F> {
    Build(Option<B>),
    Run(F),
    Done,
}

impl<B, F> HandlerCall<B, F>
where
    B: FnOnce() -> F,
    F: Future + Unpin,
{
    /// A call that runs `build` on its first poll.
    pub(crate) fn new(build: B) -> Self {
        HandlerCall {
            state: State::Build(Some(build)),
        }
    }
}

impl<B, F> Future for HandlerCall<B, F>
where
    B: FnOnce() -> F + Unpin,
    F: Future + Unpin,
{
    type Output = std::thread::Result<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let r = call_user("task handler", || {
            if let State::Build(build) = &mut this.state {
                let build = build.take().expect("built once");
                this.state = State::Run(build());
            }
            match &mut this.state {
                State::Run(fut) => Pin::new(fut).poll(cx),
                _ => unreachable!("polled after it completed"),
            }
        });
        match r {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(v)) => {
                this.state = State::Done;
                Poll::Ready(Ok(v))
            }
            Err(payload) => {
                this.state = State::Done;
                Poll::Ready(Err(payload))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_while_building_or_polling_is_caught_and_located() {
        install_panic_hook();
        let built: HandlerCall<_, std::future::Ready<u8>> =
            HandlerCall::new(|| -> std::future::Ready<u8> { panic!("while building") });
        let payload = built.await.unwrap_err();
        assert_eq!(payload_text(&*payload), "while building");
        let at = take_panic_location().expect("located");
        assert!(at.starts_with("src/server/panic_guard.rs:"), "{at}");
        let polled = HandlerCall::new(|| {
            Box::pin(async {
                tokio::task::yield_now().await;
                if true {
                    panic!("while polling {}", 7)
                }
            })
        });
        let payload = polled.await.unwrap_err();
        assert_eq!(payload_text(&*payload), "while polling 7");
        assert!(take_panic_location().is_some());
        assert_eq!(HandlerCall::new(|| std::future::ready(3)).await.unwrap(), 3);
        // Outside guarded code nothing is recorded.
        assert!(take_panic_location().is_none());
        assert_eq!(call_user("x", || 1).unwrap(), 1);
    }
}
