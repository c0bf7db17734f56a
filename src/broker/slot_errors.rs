//! Errors that say a call touched keys of more than one slot: a `CROSSSLOT`
//! reply (a multi-key command or a transaction over two slots), or a
//! script stopped by Redis Cluster for reaching outside its slot (`ERR
//! Script attempted to access keys that do not hash to the same slot` in
//! the strict form, `... a non local key in a cluster node` in the plain
//! one), or redis-rs refusing a pipeline over two slots. Every key of one
//! call must share a hash tag (issue 14), so each is a bug: it is logged at
//! error level and counted, and the cluster pass of the tests asserts the
//! count stays 0 (tests/zz_cluster_audit.rs).

use std::sync::atomic::{AtomicU64, Ordering};

static SLOT_ERRORS: AtomicU64 = AtomicU64::new(0);

/// Whether `e` says the keys of one call crossed slots.
fn crossed_slots(e: &redis::RedisError) -> bool {
    if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::CrossSlot) {
        return true;
    }
    let text = e.to_string();
    text.to_ascii_lowercase().contains("crossslot")
        || text.contains("do not hash to the same slot")
        || text.contains("non local key")
        || text.contains("crossed slots")
}

/// Counts and logs `e` when it says keys crossed slots (called for every
/// Redis error the crate's [`Error`](crate::Error) wraps).
pub(crate) fn note_slot_error(e: &redis::RedisError) {
    if crossed_slots(e) {
        SLOT_ERRORS.fetch_add(1, Ordering::Relaxed);
        tracing::error!(error = %e, "a Redis call touched keys of more than one slot");
    }
}

/// How many Redis errors this process saw that say one call's keys
/// crossed slots (see the module doc); 0 is the only right number.
pub fn slot_errors() -> u64 {
    SLOT_ERRORS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use redis::{ErrorKind, RedisError, ServerErrorKind};

    fn err(desc: &'static str, detail: &str) -> RedisError {
        RedisError::from((
            ErrorKind::Server(ServerErrorKind::ResponseError),
            desc,
            detail.to_string(),
        ))
    }

    /// The replies Redis 7.0 and redis-rs give for keys of two slots are
    /// recognised; other errors are not.
    #[test]
    fn slot_errors_are_recognised() {
        for e in [
            err(
                "An error was signalled by the server",
                "Script attempted to access keys that do not hash to the same slot script: x",
            ),
            err(
                "An error was signalled by the server",
                "Script attempted to access a non local key in a cluster node",
            ),
            RedisError::from((
                ErrorKind::Server(ServerErrorKind::CrossSlot),
                "Received crossed slots in pipeline",
            )),
        ] {
            assert!(super::crossed_slots(&e), "{e}");
        }
        assert!(!super::crossed_slots(&err(
            "An error was signalled by the server",
            "WRONGTYPE Operation against a key holding the wrong kind of value"
        )));
        let before = super::slot_errors();
        super::note_slot_error(&err("x", "do not hash to the same slot"));
        assert_eq!(super::slot_errors(), before + 1);
    }
}
