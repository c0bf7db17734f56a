//! Left-behind task hashes: a hash whose `state` names a zset (scheduled,
//! retry, archived, completed) or a group that does not hold its id. Go's
//! inspector archive paths trim the archive with `ZREMRANGEBY*` and keep the
//! trimmed tasks' hashes (wire spec §14.7), so real deployments hold
//! millions of them; Go can neither show nor delete them (R12).
//!
//! The sweep walks `asynq:{<q>}:t:*` with `SCAN … COUNT` [`SWEEP_SCAN_COUNT`]
//! (never `KEYS`), one bounded step per call, and judges each step's keys
//! in the `left_behind` script. Pending and active hashes are not judged
//! (their membership would cost a scan of the list).
// asynq divergence: COMPATIBILITY.md#r12

use super::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// Keys asked of each `SCAN` step (Redis may return somewhat more or fewer).
pub const SWEEP_SCAN_COUNT: usize = 100;

/// What one sweep step (or a whole sweep) found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepCount {
    /// Keys matching `asynq:{<q>}:t:*` looked at (task hashes, and any other
    /// key that happens to match, e.g. of a queue named `<q>}:t:…`).
    pub scanned: u64,
    /// Left-behind tasks among them.
    pub found: u64,
    /// Left-behind tasks deleted (0 when only counting).
    pub deleted: u64,
}

impl SweepCount {
    /// Adds `other`'s numbers to these, saturating at `u64::MAX` (running
    /// totals come back from the browser between slices: a forged one must
    /// not overflow).
    pub fn add(&mut self, other: SweepCount) {
        self.scanned = self.scanned.saturating_add(other.scanned);
        self.found = self.found.saturating_add(other.found);
        self.deleted = self.deleted.saturating_add(other.deleted);
    }
}

/// `s` with the glob characters of a `SCAN MATCH` pattern escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

impl Broker {
    /// One step of the left-behind sweep of `queue` from SCAN cursor
    /// `cursor` (0 starts): scans about [`SWEEP_SCAN_COUNT`] keys matching
    /// `asynq:{<q>}:t:*`, counts the left-behind tasks among them and, when
    /// `delete`, deletes them (releasing their uniqueness locks). Returns the
    /// next cursor (0: the sweep is done) and the step's numbers. A key
    /// created or deleted meanwhile may or may not be seen (SCAN's rule).
    /// On a cluster the `SCAN` goes to the master serving the queue's slot,
    /// where all its task hashes are ([`Broker::scan_slot_of`]).
    ///
    /// Errors: [`Error::Redis`]; [`Error::Internal`] for a malformed reply.
    pub(crate) async fn left_behind_step(
        &self,
        queue: &str,
        cursor: u64,
        delete: bool,
    ) -> Result<(u64, SweepCount)> {
        let prefix = keys::task_key_prefix(queue);
        let pattern = format!("{}*", glob_escape(&prefix));
        let (next, found_keys) = self
            .scan_slot_of(&prefix, cursor, &pattern, SWEEP_SCAN_COUNT)
            .await?;
        let mut count = SweepCount {
            scanned: found_keys.len() as u64,
            ..SweepCount::default()
        };
        if found_keys.is_empty() {
            return Ok((next, count));
        }
        let mut inv = scripts::LEFT_BEHIND.prepare_invoke();
        for k in &found_keys {
            inv.key(k);
        }
        inv.arg(keys::queue_prefix(queue))
            .arg(&prefix)
            .arg(queue)
            .arg(if delete { "delete" } else { "count" });
        let reply: Vec<i64> = inv.invoke_async(&mut self.conn()).await?;
        match reply[..] {
            [found, deleted] if found >= 0 && deleted >= 0 => {
                count.found = found as u64;
                count.deleted = deleted as u64;
                Ok((next, count))
            }
            _ => Err(Error::Internal(format!(
                "left_behind script replied {reply:?}"
            ))),
        }
    }

    /// Whether task `id` of `queue` is left behind (see the module docs);
    /// `false` when its hash is missing, pending or active, or in its
    /// container. Errors: [`Error::Redis`], [`Error::Internal`].
    pub(crate) async fn is_left_behind(&self, queue: &str, id: &str) -> Result<bool> {
        let reply: Vec<i64> = scripts::LEFT_BEHIND
            .key(keys::task_key(queue, id))
            .arg(keys::queue_prefix(queue))
            .arg(keys::task_key_prefix(queue))
            .arg(queue)
            .arg("count")
            .invoke_async(&mut self.conn())
            .await?;
        match reply[..] {
            [found, _] => Ok(found == 1),
            _ => Err(Error::Internal(format!(
                "left_behind script replied {reply:?}"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{SweepCount, glob_escape};

    #[test]
    fn forged_totals_saturate() {
        let mut total = SweepCount {
            scanned: u64::MAX,
            found: u64::MAX - 1,
            deleted: 3,
        };
        total.add(SweepCount {
            scanned: 5,
            found: 5,
            deleted: 4,
        });
        assert_eq!(
            (total.scanned, total.found, total.deleted),
            (u64::MAX, u64::MAX, 7)
        );
    }

    #[test]
    fn scan_patterns_escape_globs() {
        assert_eq!(
            glob_escape("asynq:{a*b?[c]\\}:t:"),
            "asynq:{a\\*b\\?\\[c\\]\\\\}:t:"
        );
    }
}
