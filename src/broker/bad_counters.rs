//! Statistics counters that could not be incremented (issue 12 R6;
//! COMPATIBILITY.md#r6).
//!
//! A daily or all-time counter whose value is not an integer (say
//! `asynq:{q}:processed:<date>` = `notanumber`) or whose key is of another
//! type is left as it is by the scripts that finish attempts
//! (`lib/count_stats.lua`): the attempt finishes, that counter does not
//! count it, and the script names the key in its reply. Each such key is
//! logged once per process (a `warn` line), not once per task, and listed
//! by [`bad_counters`].

use std::collections::BTreeSet;
use std::sync::Mutex;

/// Most distinct bad keys remembered; later ones are still skipped by the
/// scripts but logged at `debug` only.
const MAX_REMEMBERED: usize = 4096;

static REPORTED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The counter keys found bad since the process started, sorted (at most
/// 4,096). A key repaired since is still listed.
pub fn bad_counters() -> Vec<String> {
    REPORTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .cloned()
        .collect()
}

/// Logs `key` as a bad counter unless it was logged before.
fn report(key: String) {
    let mut reported = REPORTED.lock().unwrap_or_else(|e| e.into_inner());
    if reported.contains(&key) {
        return;
    }
    if reported.len() >= MAX_REMEMBERED {
        tracing::debug!(key, "statistics counter is not an integer; not counted");
        return;
    }
    tracing::warn!(
        key,
        "statistics counter is not an integer (or not a string key); it is left as it is \
         and does not count; set it to an integer or delete it (reported once)"
    );
    reported.insert(key);
}

/// The reply of a counting script (`counted(reply)` of
/// `lib/count_stats.lua`) without its bad-counter report: `{{keys...},
/// reply}` becomes `reply`, the keys reported; any other value is returned
/// as it is.
pub(crate) fn unwrap_counted(reply: redis::Value) -> redis::Value {
    match reply {
        redis::Value::Array(mut parts)
            if parts.len() == 2 && matches!(parts[0], redis::Value::Array(_)) =>
        {
            let inner = parts.pop().expect("two parts");
            if let Some(redis::Value::Array(keys)) = parts.pop() {
                for k in keys {
                    if let redis::Value::BulkString(k) = k {
                        report(String::from_utf8_lossy(&k).into_owned());
                    }
                }
            }
            inner
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::Value;

    #[test]
    fn a_counted_reply_is_unwrapped_and_its_keys_reported_once() {
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(unwrap_counted(Value::Int(1)), Value::Int(1));
        let codes = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert_eq!(unwrap_counted(codes.clone()), codes);
        let wrapped = || {
            Value::Array(vec![
                Value::Array(vec![bulk("unit:{q}:processed:x"), bulk("unit:{q}:failed")]),
                codes.clone(),
            ])
        };
        assert_eq!(unwrap_counted(wrapped()), codes);
        assert_eq!(unwrap_counted(wrapped()), codes);
        let ours: Vec<String> = bad_counters()
            .into_iter()
            .filter(|k| k.starts_with("unit:"))
            .collect();
        assert_eq!(ours, ["unit:{q}:failed", "unit:{q}:processed:x"]);
    }
}
