//! Errors returned by task handlers, and the markers that steer what happens
//! to a failed task (Go `asynq.go`: `SkipRetry`, `RevokeTask`;
//! `internal/errors`: `PanicError`; `servemux.go`: `ErrHandlerNotFound`).
//!
//! # Why `anyhow::Error`
//! A handler returns [`TaskError`], an alias of [`anyhow::Error`]:
//! - any `std::error::Error + Send + Sync + 'static` converts with `?`, so a
//!   handler can mix database, HTTP and its own errors without glue code;
//! - context is added with [`anyhow::Context::context`], which is the Rust
//!   spelling of Go's `fmt.Errorf("...: %w", err)`;
//! - the causes are walked with [`anyhow::Error::chain`], the Rust spelling of
//!   Go's `errors.Is` / `errors.As` (S5).
//!
//! # Markers
//! Return one of these (alone or wrapped in any number of contexts) to steer
//! the outcome (wire spec §7.4); detection walks the whole chain, so the
//! marker need not be the outermost error (S19):
//! - [`SkipRetry`]: archive at once, no more retries. Still a failure: the
//!   error handler runs and the failed counter grows (S19, S20). Use it for
//!   errors retrying cannot fix (bad payload, broken invariant, permission
//!   denied); keep network errors, timeouts, 5xx, locks and quotas retryable (S21).
//! - [`RevokeTask`]: no retry and no archive; the task is dropped as done.
//!   Silent, so log the decision in the handler (S23).
//! - [`RetryAfter`]: a hint for the retry policy; a [`RetryPolicy`](super::RetryPolicy)
//!   returns exactly this delay (S9).
//!
//! [`PanicError`] is made by the worker when a handler panics; [`HandlerNotFound`]
//! by [`ServeMux`](super::ServeMux) when no pattern matches.
//!
//! ```
//! use anyhow::Context;
//! use asynqdeck::server::{SkipRetry, TaskError, error_text, is_skip_retry};
//!
//! fn validate(amount: i64) -> Result<(), TaskError> {
//!     if amount < 0 {
//!         return Err(SkipRetry).context("order invalid");
//!     }
//!     Ok(())
//! }
//! let err = validate(-1).unwrap_err();
//! assert!(is_skip_retry(&err));
//! assert_eq!(error_text(&err), "order invalid: skip retry for the task");
//! ```

use std::any::Any;
use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

/// The error a handler returns: [`anyhow::Error`] (see the module doc for why).
pub type TaskError = anyhow::Error;

/// Longest error text stored in Redis as a task's `LastErr` (`error_msg`):
/// 16 KiB. Go stores the text whole; a cap keeps one runaway error (a whole
/// HTTP body, say) from bloating every retry and archive entry.
pub const MAX_ERROR_TEXT_BYTES: usize = 16 * 1024;

/// Marker: do not retry, archive the task now (Go `asynq.SkipRetry`; S19–S21).
///
/// Display: `skip retry for the task`. Wrap it with context to say why; the
/// archived `LastErr` keeps the whole text (`order invalid: skip retry for the task`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkipRetry;

impl fmt::Display for SkipRetry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("skip retry for the task")
    }
}

impl StdError for SkipRetry {}

/// Marker: neither retry nor archive; the task is removed as done (Go
/// `asynq.RevokeTask`, asynq 0.25+; S23). For duplicates and obsolete tasks.
///
/// Display: `revoke task`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RevokeTask;

impl fmt::Display for RevokeTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("revoke task")
    }
}

impl StdError for RevokeTask {}

/// Hint: retry no sooner than this (e.g. from a rate limiter's `Retry-After`).
/// A [`RetryPolicy`](super::RetryPolicy) returns exactly this delay (S9). The
/// default retry function ignores it, as Go's does.
///
/// Display: `retry after <secs>s` (`retry after 30s`, `retry after 1.5s`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub Duration);

impl fmt::Display for RetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "retry after {}s", self.0.as_secs_f64())
    }
}

impl StdError for RetryAfter {}

/// A handler panicked (Go `errors.PanicError`, asynq 0.25+; S25). The worker
/// builds it with [`panic_error`]; the failure then takes the normal path
/// (the retry policy sees it). Tell it apart with [`is_panic_error`], by type.
///
/// Display (wire spec §7.4, §12):
/// `panic error cause by: panic [<file>:<line>]: <message>`, or
/// `panic error cause by: panic: <message>` when the location is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PanicError {
    /// The panic message (`"unknown panic"` when the payload was not a string).
    pub message: String,
    /// Where it panicked, `file:line`, if known.
    pub location: Option<String>,
}

impl fmt::Display for PanicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Some(at) => write!(f, "panic error cause by: panic [{at}]: {}", self.message),
            None => write!(f, "panic error cause by: panic: {}", self.message),
        }
    }
}

impl StdError for PanicError {}

/// No handler is registered for the task's type (Go `ErrHandlerNotFound`
/// wrapped by `NotFound`; wire spec §7.3). Follows the normal failure path.
///
/// Display: `handler not found for task "<type>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerNotFound {
    /// The task type that matched no pattern.
    pub task_type: String,
}

impl fmt::Display for HandlerNotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "handler not found for task {:?}", self.task_type)
    }
}

impl StdError for HandlerNotFound {}

/// The first error of type `T` anywhere in `err`'s chain: the error itself,
/// any context wrapped around it, or any `source()` below it (Go `errors.As`; S5).
///
/// ```
/// use anyhow::Context;
/// use asynqdeck::server::{RetryAfter, find_cause};
/// use std::time::Duration;
/// let err = anyhow::Error::new(RetryAfter(Duration::from_secs(5))).context("quota");
/// assert_eq!(find_cause::<RetryAfter>(&err), Some(&RetryAfter(Duration::from_secs(5))));
/// ```
pub fn find_cause<T>(err: &TaskError) -> Option<&T>
where
    T: StdError + Send + Sync + 'static,
{
    // anyhow's own downcast also sees context values (`.context(SkipRetry)`),
    // which the plain `source()` chain hides inside its wrapper type.
    err.downcast_ref::<T>()
        .or_else(|| err.chain().find_map(|e| e.downcast_ref::<T>()))
}

/// True when [`SkipRetry`] is anywhere in the chain (Go `errors.Is(err, SkipRetry)`; S19).
pub fn is_skip_retry(err: &TaskError) -> bool {
    find_cause::<SkipRetry>(err).is_some()
}

/// True when [`RevokeTask`] is anywhere in the chain (Go `errors.Is(err, RevokeTask)`; S23).
pub fn is_revoke_task(err: &TaskError) -> bool {
    find_cause::<RevokeTask>(err).is_some()
}

/// True when a [`PanicError`] is anywhere in the chain, judged by type, not
/// text (Go `asynq.IsPanicError`; S25).
pub fn is_panic_error(err: &TaskError) -> bool {
    find_cause::<PanicError>(err).is_some()
}

/// The delay of the first [`RetryAfter`] hint in the chain, if any (S9).
pub fn retry_after(err: &TaskError) -> Option<Duration> {
    find_cause::<RetryAfter>(err).map(|hint| hint.0)
}

/// The text stored as the task's `LastErr` (hash field `error_msg`; wire spec
/// §12): every message of the chain, outermost first, joined with `": "` —
/// the same shape as Go's `%w` wrapping (anyhow's `{:#}`). Cut to at most
/// [`MAX_ERROR_TEXT_BYTES`] bytes on a character boundary.
pub fn error_text(err: &TaskError) -> String {
    let mut text = format!("{err:#}");
    if text.len() > MAX_ERROR_TEXT_BYTES {
        let mut end = MAX_ERROR_TEXT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// Turns a caught panic payload (from `std::panic::catch_unwind` or a
/// `JoinError::into_panic`) into a [`PanicError`] task error (Go
/// `processor.perform`'s `recover`; S25). A `&str` or `String` payload
/// becomes the message; anything else becomes `"unknown panic"`.
/// `location` is `file:line` when the caller captured it (e.g. in a panic hook).
pub fn panic_error(payload: Box<dyn Any + Send>, location: Option<String>) -> TaskError {
    let message = match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(s) => (*s).to_owned(),
            Err(_) => "unknown panic".to_owned(),
        },
    };
    anyhow::Error::new(PanicError { message, location })
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    fn wrapped_twice<E: StdError + Send + Sync + 'static>(e: E) -> TaskError {
        anyhow::Error::new(e)
            .context("charge card")
            .context("order 42")
    }

    /// S19, S23, S25, S9: each marker is found when wrapped two levels deep with `.context()`.
    #[test]
    fn s19_s23_s25_s9_markers_found_two_contexts_deep() {
        assert!(is_skip_retry(&wrapped_twice(SkipRetry)));
        assert!(is_revoke_task(&wrapped_twice(RevokeTask)));
        let panic = PanicError {
            message: "boom".into(),
            location: None,
        };
        assert!(is_panic_error(&wrapped_twice(panic)));
        assert_eq!(
            retry_after(&wrapped_twice(RetryAfter(Duration::from_secs(30)))),
            Some(Duration::from_secs(30))
        );
        // The marker may also be the context value itself.
        let ctx_marker = anyhow::anyhow!("io").context(SkipRetry).context("outer");
        assert!(is_skip_retry(&ctx_marker));
    }

    /// S19: a marker that is a `source()` of the user's own error type is found too.
    #[test]
    fn s19_marker_found_as_source_of_user_error() {
        #[derive(Debug)]
        struct Permanent(SkipRetry);
        impl fmt::Display for Permanent {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("permanent")
            }
        }
        impl StdError for Permanent {
            fn source(&self) -> Option<&(dyn StdError + 'static)> {
                Some(&self.0)
            }
        }
        let err = anyhow::Error::new(Permanent(SkipRetry)).context("adapter");
        assert!(is_skip_retry(&err));
        assert_eq!(
            error_text(&err),
            "adapter: permanent: skip retry for the task"
        );
    }

    /// S19, S23, S25, S9: plain errors carry no marker.
    #[test]
    fn s19_s23_s25_s9_plain_errors_have_no_marker() {
        let err = anyhow::anyhow!("connection refused").context("call payment API");
        assert!(!is_skip_retry(&err));
        assert!(!is_revoke_task(&err));
        assert!(!is_panic_error(&err));
        assert_eq!(retry_after(&err), None);
        // Same text as a marker is not the marker: detection is by type (S25).
        let lookalike = anyhow::anyhow!("panic error cause by: panic: boom");
        assert!(!is_panic_error(&lookalike));
        assert!(!is_skip_retry(&anyhow::anyhow!("skip retry for the task")));
    }

    /// S19, wire spec §12: the stored text keeps the whole wrapped chain.
    #[test]
    fn s19_error_text_of_wrapped_skip_retry() {
        let err: TaskError = Err::<(), _>(SkipRetry)
            .context("order invalid")
            .unwrap_err();
        assert_eq!(error_text(&err), "order invalid: skip retry for the task");
        assert_eq!(
            error_text(&anyhow::Error::new(SkipRetry)),
            "skip retry for the task"
        );
        assert_eq!(error_text(&anyhow::Error::new(RevokeTask)), "revoke task");
    }

    /// Wire spec §12: the stored text is capped at 16 KiB on a char boundary.
    #[test]
    fn error_text_is_capped_on_char_boundary() {
        let long = "é".repeat(MAX_ERROR_TEXT_BYTES); // 2 bytes each
        let err = anyhow::anyhow!("x{long}");
        let text = error_text(&err);
        assert!(text.len() <= MAX_ERROR_TEXT_BYTES);
        assert_eq!(text.len(), MAX_ERROR_TEXT_BYTES - 1);
        assert!(text.starts_with("xé"));
        let short = anyhow::anyhow!("short");
        assert_eq!(error_text(&short), "short");
    }

    /// S25, wire spec §7.4: panic texts with and without a location.
    #[test]
    fn s25_panic_error_texts() {
        let with = panic_error(Box::new("boom"), Some("src/jobs.rs:12".into()));
        assert_eq!(
            error_text(&with),
            "panic error cause by: panic [src/jobs.rs:12]: boom"
        );
        let without = panic_error(Box::new(String::from("index out of range")), None);
        assert_eq!(
            error_text(&without),
            "panic error cause by: panic: index out of range"
        );
        let other = panic_error(Box::new(42_u32), None);
        assert_eq!(
            error_text(&other),
            "panic error cause by: panic: unknown panic"
        );
        assert!(is_panic_error(&with) && is_panic_error(&without) && is_panic_error(&other));
    }

    /// S25: a real caught panic payload converts.
    #[test]
    fn s25_caught_panic_converts() {
        let payload = std::panic::catch_unwind(|| panic!("bad state {}", 7)).unwrap_err();
        let err = panic_error(payload, None);
        assert_eq!(error_text(&err), "panic error cause by: panic: bad state 7");
    }

    /// Wire spec §7.3, §12: not-found and retry-after texts.
    #[test]
    fn handler_not_found_and_retry_after_texts() {
        let e = HandlerNotFound {
            task_type: "email:send".into(),
        };
        assert_eq!(e.to_string(), r#"handler not found for task "email:send""#);
        assert_eq!(
            RetryAfter(Duration::from_secs(30)).to_string(),
            "retry after 30s"
        );
        assert_eq!(
            RetryAfter(Duration::from_millis(1500)).to_string(),
            "retry after 1.5s"
        );
    }
}
