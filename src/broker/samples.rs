//! The outage-signal series: samples of each queue's retry and archived
//! sizes, written by the embedded engine's sampler and read by the
//! dashboard (S14, S29). asynqdeck only; Go asynq has no counterpart.
//!
//! # Key
//! `asynqdeck:{<queue>}:samples` (see [`samples_key`]): a ZSET whose members
//! are `<unix s>:<retry size>:<archived size>` with score `<unix s>` (the
//! time makes every member distinct, the score orders them). The prefix
//! `asynqdeck:` never collides with asynq's `asynq:` keys, and the hash tag
//! `{<queue>}` puts the series in the queue's cluster slot, so one script
//! reads the queue's zsets and appends to the series atomically.
//!
//! Every write appends one sample, drops samples older than the window (one
//! hour by default) and beyond a count cap, and refreshes a TTL (two
//! windows), so a queue that is deleted or no longer sampled leaves nothing
//! behind. Several engines on one Redis each append their own samples; the
//! readers work by time, so extra samples only add resolution.

use std::time::Duration;

use chrono::{DateTime, Utc};
use redis::Value;

use super::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// How far back the series reaches: samples older than this are trimmed on
/// every write (one hour).
pub const SAMPLE_WINDOW: Duration = Duration::from_secs(3600);
/// Most samples kept per queue (one per second for an hour), whatever the
/// interval and however many engines write.
pub const MAX_SAMPLES: usize = 3600;

/// `asynqdeck:{<queue>}:samples`: ZSET of outage-signal samples, member
/// `<unix s>:<retry size>:<archived size>`, score = unix s. TTL two windows,
/// refreshed on every write. Not an asynq key: Go asynq never reads it.
pub fn samples_key(queue: &str) -> String {
    format!("asynqdeck:{{{queue}}}:samples")
}

/// Parses a sample member `<unix s>:<retry>:<archived>`.
pub(super) fn parse_sample(member: &[u8]) -> Option<(DateTime<Utc>, i64, i64)> {
    let text = std::str::from_utf8(member).ok()?;
    let mut parts = text.split(':');
    let at = parts.next()?.parse::<i64>().ok()?;
    let retry = parts.next()?.parse::<i64>().ok()?;
    let archived = parts.next()?.parse::<i64>().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((DateTime::from_timestamp(at, 0)?, retry, archived))
}

impl Broker {
    /// Reads the queue's retry and archived sizes (ZCARD) and appends them
    /// as a sample stamped now to [`samples_key`], then drops samples older
    /// than `window` and all but the newest `max_samples`, and sets the
    /// key's TTL to two windows (the `record_queue_sample` script, one round
    /// trip). Returns `(retry size, archived size)` as recorded.
    ///
    /// No existence check: the sampler only samples queues listed in
    /// `asynq:queues`.
    ///
    /// Errors: [`Error::InvalidArgument`] when `window` is under 1 s or
    /// `max_samples` is 0; [`Error::Internal`] on a reply of the wrong
    /// shape; [`Error::Redis`].
    pub async fn record_queue_sample(
        &self,
        queue: &str,
        window: Duration,
        max_samples: usize,
    ) -> Result<(i64, i64)> {
        if window.as_secs() == 0 || max_samples == 0 {
            return Err(Error::InvalidArgument(format!(
                "sample window must be at least 1s and the cap at least 1, got {window:?} and {max_samples}"
            )));
        }
        let now_unix_s = self.now().timestamp();
        let window_s = i64::try_from(window.as_secs()).unwrap_or(i64::MAX / 4);
        let reply: Value = scripts::RECORD_QUEUE_SAMPLE
            .key(keys::retry_key(queue))
            .key(keys::archived_key(queue))
            .key(samples_key(queue))
            .arg(now_unix_s)
            .arg(now_unix_s.saturating_sub(window_s))
            .arg(max_samples)
            .arg(window_s.saturating_mul(2))
            .invoke_async(&mut self.conn())
            .await?;
        match reply {
            Value::Array(v) => match v.as_slice() {
                [Value::Int(retry), Value::Int(archived)] => Ok((*retry, *archived)),
                other => Err(Error::Internal(format!(
                    "record_queue_sample script replied {other:?}"
                ))),
            },
            other => Err(Error::Internal(format!(
                "record_queue_sample script replied {other:?}"
            ))),
        }
    }

    /// The queue's samples taken at or after `since`, oldest first, as
    /// `(time, retry size, archived size)`: `ZREVRANGEBYSCORE` of
    /// [`samples_key`] limited to the newest [`MAX_SAMPLES`], reversed.
    /// Members that do not parse are skipped (logged).
    ///
    /// Errors: [`Error::QueueNotFound`] unless the queue is in
    /// `asynq:queues`; [`Error::Redis`].
    pub(crate) async fn queue_samples(
        &self,
        queue: &str,
        since: DateTime<Utc>,
    ) -> Result<Vec<(DateTime<Utc>, i64, i64)>> {
        let key = samples_key(queue);
        // Two slots (asynq:queues and the queue's): two commands, sent
        // together on the multiplexed connection.
        let (mut c1, mut c2) = (self.conn(), self.conn());
        let mut member = redis::cmd("SISMEMBER");
        member.arg(keys::ALL_QUEUES).arg(queue);
        let listed = member.query_async::<bool>(&mut c1);
        let mut range = redis::cmd("ZREVRANGEBYSCORE");
        range
            .arg(&key)
            .arg("+inf")
            .arg(since.timestamp())
            .arg("LIMIT")
            .arg(0)
            .arg(MAX_SAMPLES);
        let members = range.query_async::<Vec<Vec<u8>>>(&mut c2);
        let (exists, members) = futures_util::try_join!(listed, members)?;
        if !exists {
            return Err(Error::QueueNotFound {
                queue: queue.to_string(),
            });
        }
        let mut samples: Vec<_> = members
            .iter()
            .filter_map(|m| {
                let parsed = parse_sample(m);
                if parsed.is_none() {
                    tracing::warn!(%key, member = %String::from_utf8_lossy(m), "skipping unparsable sample");
                }
                parsed
            })
            .collect();
        samples.reverse();
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The series lives outside asynq's namespace, in the queue's slot.
    #[test]
    fn key_is_ours_and_shares_the_queue_hash_tag() {
        assert_eq!(samples_key("critical"), "asynqdeck:{critical}:samples");
        assert!(!samples_key("q").starts_with("asynq:"));
    }

    #[test]
    fn members_parse_or_are_rejected() {
        let t = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        assert_eq!(parse_sample(b"1700000000:12:3"), Some((t, 12, 3)));
        assert_eq!(parse_sample(b"1700000000:12"), None);
        assert_eq!(parse_sample(b"1700000000:12:3:4"), None);
        assert_eq!(parse_sample(b"x:1:2"), None);
        assert_eq!(parse_sample(&[0xff]), None);
    }
}
