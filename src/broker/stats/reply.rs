//! Reading the statistics scripts' replies: integers and stored counters,
//! the 14 values of one queue's numbers (`lib/queue_counts.lua`), one
//! queue's part of the flat `queues_stats` reply and its growth samples,
//! RESP3 values in RESP2 shapes, and errors a script caught.

use chrono::{DateTime, Utc};
use redis::Value;

use super::{KeyKinds, QueueStats, QueueStatsEntry, Sample, latency_at};
use crate::broker::keys;
use crate::error::{Error, Result};

/// Reads an integer reply.
pub(super) fn int_of(v: &Value, what: &str) -> Result<i64> {
    match v {
        Value::Int(n) => Ok(*n),
        other => Err(Error::Internal(format!(
            "{what}: expected an integer, got {other:?}"
        ))),
    }
}

/// Reads a stored decimal counter: nil is 0; anything but an integer is corrupt.
// asynq divergence: COMPATIBILITY.md#q4
pub(in crate::broker) fn counter_of(v: &Value, key: &str) -> Result<i64> {
    let bytes = match v {
        Value::Nil => return Ok(0),
        Value::Int(n) => return Ok(*n),
        Value::BulkString(b) => b,
        other => {
            return Err(Error::Internal(format!(
                "{key}: expected a counter, got {other:?}"
            )));
        }
    };
    std::str::from_utf8(bytes)
        .ok()
        .and_then(|s| s.parse::<i64>().ok())
        .ok_or_else(|| Error::Corrupt {
            key: key.to_string(),
            reason: format!(
                "counter is not an integer: {:?}",
                String::from_utf8_lossy(bytes)
            ),
        })
}

/// A script's reply of the wrong shape for `queue`.
pub(super) fn shape_error(script: &str, queue: &str, what: &Value) -> Error {
    Error::Internal(format!(
        "{script} script replied {what:?} for queue {queue:?}"
    ))
}

/// Reads the 14 values of `lib/queue_counts.lua` for `queue`, taken at `now`.
pub(super) fn parse_stats(
    queue: &str,
    now: DateTime<Utc>,
    reply: Vec<Value>,
) -> Result<QueueStats> {
    let [
        pending,
        active,
        scheduled,
        retry,
        archived,
        completed,
        processed,
        failed,
        processed_total,
        failed_total,
        paused,
        pending_since,
        groups,
        aggregating,
    ] = <[Value; 14]>::try_from(reply).map_err(|r| {
        Error::Internal(format!(
            "queue_stats script replied {} values, expected 14",
            r.len()
        ))
    })?;
    let today = now.date_naive();
    let since_key = format!(
        "{}<next pending> pending_since",
        keys::task_key_prefix(queue)
    );
    let pending_since = counter_of(&pending_since, &since_key)?;
    Ok(QueueStats {
        pending: int_of(&pending, "pending")?,
        active: int_of(&active, "active")?,
        scheduled: int_of(&scheduled, "scheduled")?,
        retry: int_of(&retry, "retry")?,
        archived: int_of(&archived, "archived")?,
        completed: int_of(&completed, "completed")?,
        processed: counter_of(&processed, &keys::processed_key(queue, today))?,
        failed: counter_of(&failed, &keys::failed_key(queue, today))?,
        processed_total: counter_of(&processed_total, &keys::processed_total_key(queue))?,
        failed_total: counter_of(&failed_total, &keys::failed_total_key(queue))?,
        paused: int_of(&paused, "paused")? == 1,
        latency: latency_at(now, pending_since),
        pending_since,
        groups: int_of(&groups, "groups")?,
        aggregating: int_of(&aggregating, "aggregating")?,
        timestamp: now,
    })
}

/// `v` in the shapes of RESP2: sets as arrays, booleans as Lua's `true`
/// and `false` come back there (1 and nil), inside arrays too.
pub(super) fn resp2(v: Value) -> Value {
    match v {
        Value::Set(items) | Value::Array(items) => {
            Value::Array(items.into_iter().map(resp2).collect())
        }
        Value::Boolean(true) => Value::Int(1),
        Value::Boolean(false) => Value::Nil,
        other => other,
    }
}

/// Text of a bulk or simple string reply.
pub(super) fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// An error a script caught with `pcall` (`WRONGTYPE Operation against
/// ...`), as the [`Error::Redis`] the same error reply would have given
/// uncaught: read as an error line, so its code and kind are Redis's.
pub(super) fn caught_error(text: &str) -> Error {
    let line = format!("-{}\r\n", text.replace(['\r', '\n'], " "));
    match redis::parse_redis_value(line.as_bytes()).and_then(Value::extract_error) {
        Err(e) => Error::Redis(e),
        Ok(_) => Error::Internal(format!("script error {text:?} did not read as an error")),
    }
}

/// The Redis error of an error reply inside the transaction, or an
/// internal error for any other unexpected value.
pub(super) fn value_error(v: Value) -> redis::RedisError {
    match v.extract_error() {
        Err(e) => e,
        Ok(other) => redis::RedisError::from((
            redis::ErrorKind::Client,
            "unexpected reply in the statistics transaction",
            format!("{other:?}"),
        )),
    }
}

/// A script's reply of the wrong shape at `what`.
pub(super) fn flat_error(what: &str) -> Error {
    Error::Internal(format!("queues_stats script reply: {what}"))
}

/// Reads one queue's part of the flat `queues_stats` reply (see its header)
/// starting at `*at`, advancing `*at` past it: its counts (`read` says which
/// kinds the script read, the others are 0), merged with `strings` (its
/// five values of the MGET: today's processed and failed, the all-time
/// counters, paused), and with `with_samples` its samples.
pub(super) fn parse_queue(
    queue: &str,
    now: DateTime<Utc>,
    flat: &[Value],
    at: &mut usize,
    read: KeyKinds,
    strings: &[Value],
    with_samples: bool,
) -> Result<QueueStatsEntry> {
    let mut next = || {
        let v = flat.get(*at).ok_or_else(|| flat_error("too short"))?;
        *at += 1;
        Ok::<&Value, Error>(v)
    };
    let failed = |e: Error| QueueStatsEntry {
        queue: queue.to_string(),
        stats: Err(e),
        samples: with_samples.then(|| Ok(Vec::new())),
        next_id: None,
    };
    let pending = next()?;
    if let Value::Int(-1) = pending {
        let msg = next()?;
        let text = text_of(msg).ok_or_else(|| shape_error("queues_stats", queue, msg))?;
        return Ok(failed(caught_error(&text)));
    }
    let pending = pending.clone();
    let pending_since = next()?.clone();
    let next_id = match next()? {
        Value::BulkString(id) => Some(id.clone()),
        _ => None,
    };
    let zero = || Value::Int(0);
    let mut sizes = [zero(), zero(), zero(), zero(), zero(), zero(), zero()];
    for (i, kind) in KeyKinds::EACH.into_iter().enumerate() {
        if read.contains(kind) {
            sizes[i] = next()?.clone();
            if kind == KeyKinds::GROUPS {
                sizes[6] = next()?.clone();
            }
        }
    }
    let [
        active,
        scheduled,
        retry,
        archived,
        completed,
        groups,
        aggregating,
    ] = sizes;
    let [
        processed,
        failed_today,
        processed_total,
        failed_total,
        paused,
    ] = <[Value; 5]>::try_from(strings.to_vec())
        .map_err(|_| flat_error("MGET replied too few values"))?;
    let paused = Value::Int(i64::from(paused != Value::Nil));
    let stats = parse_stats(
        queue,
        now,
        vec![
            pending,
            active,
            scheduled,
            retry,
            archived,
            completed,
            processed,
            failed_today,
            processed_total,
            failed_total,
            paused,
            pending_since,
            groups,
            aggregating,
        ],
    );
    let samples = if with_samples {
        Some(parse_samples_part(queue, flat, at)?)
    } else {
        None
    };
    Ok(QueueStatsEntry {
        queue: queue.to_string(),
        stats,
        samples,
        next_id,
    })
}

/// Reads the samples part of one queue's `queues_stats` reply at `*at`,
/// advancing `*at` past it: the samples, or why the series could not be
/// read.
pub(super) fn parse_samples_part(
    queue: &str,
    flat: &[Value],
    at: &mut usize,
) -> Result<Result<Vec<Sample>>> {
    let v = flat.get(*at).ok_or_else(|| flat_error("too short"))?;
    *at += 1;
    Ok(match v {
        Value::Int(-1) => {
            let msg = flat.get(*at).ok_or_else(|| flat_error("too short"))?;
            *at += 1;
            Err(caught_error(
                &text_of(msg).ok_or_else(|| shape_error("queues_stats", queue, msg))?,
            ))
        }
        Value::Int(n) if *n >= 0 => {
            let end = *at + *n as usize;
            let members = flat.get(*at..end).ok_or_else(|| flat_error("too short"))?;
            *at = end;
            Ok(parse_samples(queue, members)?)
        }
        other => return Err(shape_error("queues_stats", queue, other)),
    })
}

/// Reads the sample members of a `queues_stats` entry: deduplicated and
/// ordered by time then member (the order of a full read of the series),
/// unparsable members skipped (logged).
fn parse_samples(queue: &str, members: &[Value]) -> Result<Vec<Sample>> {
    let key = crate::broker::samples_key(queue);
    let mut parsed = Vec::with_capacity(members.len());
    for m in members {
        let Value::BulkString(m) = m else {
            return Err(shape_error("queues_stats", queue, m));
        };
        match crate::broker::samples::parse_sample(m) {
            Some(sample) => parsed.push((sample, m.clone())),
            None => {
                tracing::warn!(%key, member = %String::from_utf8_lossy(m), "skipping unparsable sample")
            }
        }
    }
    parsed.sort_by(|a, b| a.0.0.cmp(&b.0.0).then_with(|| a.1.cmp(&b.1)));
    parsed.dedup_by(|a, b| a.1 == b.1);
    Ok(parsed.into_iter().map(|(sample, _)| sample).collect())
}
