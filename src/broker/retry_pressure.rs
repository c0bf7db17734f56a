//! Retry pressure (issue 17 item 3): how many of a queue's retries fall due
//! soon. Three `ZCOUNT`s on `asynq:{<queue>}:retry`, whose scores are the
//! retry times in unix seconds: `(now now+60]`, `(now now+300]` and
//! `(now now+3600]`. Each `ZCOUNT` is O(log n) at any size, and the three
//! keys of one queue are one key, so they travel in one pipeline on every
//! deployment (many queues: [`Broker::each_command`], one pipeline on a
//! single server, per key concurrently on a cluster).
//!
//! Read-only; asynqdeck only (Go asynq and asynqmon show no such figure).

use redis::Value;

use super::{Broker, keys};
use crate::error::{Error, Result};

/// The horizons of [`RetryPressure`], in seconds: 1, 5 and 60 minutes.
pub const RETRY_PRESSURE_HORIZONS: [i64; 3] = [60, 300, 3600];

/// Commands one queue's [`RetryPressure`] costs: one `ZCOUNT` per horizon.
pub const RETRY_PRESSURE_COMMANDS: u64 = RETRY_PRESSURE_HORIZONS.len() as u64;

/// Most commands per pipeline when reading many queues (150 queues, the
/// overview's largest page, fit in one).
const PIPELINE: usize = 450;

/// Retries of one queue that fall due soon, counted at one instant `now`
/// (the broker's clock, whole unix seconds). The counts are cumulative:
/// a retry due in 30 s counts in all three. Retries already due (score at
/// or before `now`, waiting for the forwarder) are in none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetryPressure {
    /// Retries with a retry time in `(now, now + 60 s]`.
    pub next_1m: i64,
    /// Retries with a retry time in `(now, now + 300 s]`.
    pub next_5m: i64,
    /// Retries with a retry time in `(now, now + 3600 s]`.
    pub next_60m: i64,
}

/// The three `ZCOUNT`s of `queue` at `now` (unix s).
fn commands(queue: &str, now: i64) -> impl Iterator<Item = redis::Cmd> {
    let key = keys::retry_key(queue);
    RETRY_PRESSURE_HORIZONS.into_iter().map(move |h| {
        let mut cmd = redis::cmd("ZCOUNT");
        cmd.arg(&key).arg(format!("({now}")).arg(now + h);
        cmd
    })
}

/// Reads three `ZCOUNT` replies; a missing or non-integer reply (a key of
/// the wrong type) is an error.
fn parse(queue: &str, replies: &[Value]) -> Result<RetryPressure> {
    match replies {
        [Value::Int(a), Value::Int(b), Value::Int(c)] => Ok(RetryPressure {
            next_1m: *a,
            next_5m: *b,
            next_60m: *c,
        }),
        other => Err(Error::Internal(format!(
            "retry pressure of queue {queue:?}: ZCOUNT replied {other:?}"
        ))),
    }
}

impl Broker {
    /// [`RetryPressure`] of each queue of `queues` at the broker's `now`,
    /// in the same order: three `ZCOUNT`s per queue, sent
    /// [`Broker::each_command`]'s way (one pipeline for up to 150 queues on
    /// a single server). A queue whose retry key is of the wrong type gets
    /// its own error; a queue that does not exist counts 0.
    ///
    /// Errors: [`Error::Redis`] when Redis cannot be reached.
    pub(crate) async fn retry_pressure(
        &self,
        queues: &[String],
    ) -> Result<Vec<Result<RetryPressure>>> {
        let now = self.now().timestamp();
        let cmds: Vec<redis::Cmd> = queues.iter().flat_map(|q| commands(q, now)).collect();
        let replies = self.each_command(cmds, PIPELINE).await?;
        Ok(queues
            .iter()
            .zip(replies.chunks(RETRY_PRESSURE_HORIZONS.len()))
            .map(|(q, r)| parse(q, r))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_exclusive_below_and_inclusive_above() {
        let cmds: Vec<_> = commands("q", 1000).collect();
        let args: Vec<Vec<u8>> = cmds[2]
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.to_vec(),
                _ => Vec::new(),
            })
            .collect();
        assert_eq!(
            args,
            [&b"ZCOUNT"[..], b"asynq:{q}:retry", b"(1000", b"4600"]
        );
        assert_eq!(cmds.len(), 3);
    }

    #[test]
    fn parse_needs_three_integers() {
        let ok = parse("q", &[Value::Int(1), Value::Int(2), Value::Int(3)]).unwrap();
        assert_eq!(
            ok,
            RetryPressure {
                next_1m: 1,
                next_5m: 2,
                next_60m: 3
            }
        );
        assert!(parse("q", &[Value::Nil, Value::Int(2), Value::Int(3)]).is_err());
        assert!(parse("q", &[]).is_err());
    }
}
