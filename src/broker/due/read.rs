//! The index's reads: eight plain commands per queue, in pipelines of
//! [`CHUNK_QUEUES`] queues, over the tracked connection (tracking mode) or
//! the broker's own (polling mode, also on a cluster).

use redis::Value;
use redis::aio::MultiplexedConnection;

use super::{CHUNK_QUEUES, QueueHeads};
use crate::broker::{Broker, keys};
use crate::error::{Error, Result};

/// The key kinds the index reads, in command order after the five heads.
pub(super) const KINDS: [&str; 7] = [
    "scheduled",
    "retry",
    "lease",
    "completed",
    "aggregation_sets",
    "archived",
    "active",
];

/// Members per `SSCAN` step of `asynq:queues`: 1,000.
const MEMBERS_STEP: usize = 1000;

/// Commands per queue.
const PER_QUEUE: usize = 8;

/// Where the reads go.
pub(super) enum Via<'a> {
    /// The tracked connection: every read arms tracking of its key.
    Tracked(&'a mut MultiplexedConnection),
    /// The broker's connection (any deployment).
    Broker(&'a Broker),
}

fn head(key: String) -> redis::Cmd {
    let mut c = redis::cmd("ZRANGE");
    c.arg(key).arg(0).arg(0).arg("WITHSCORES");
    c
}

fn commands(q: &str) -> [redis::Cmd; PER_QUEUE] {
    let mut retry_size = redis::cmd("ZCARD");
    retry_size.arg(keys::retry_key(q));
    let mut archived = redis::cmd("ZCARD");
    archived.arg(keys::archived_key(q));
    let mut active = redis::cmd("LLEN");
    active.arg(keys::active_key(q));
    [
        head(keys::scheduled_key(q)),
        head(keys::retry_key(q)),
        head(keys::lease_key(q)),
        head(keys::completed_key(q)),
        head(keys::all_aggregation_sets_key(q)),
        retry_size,
        archived,
        active,
    ]
}

/// A score reply (RESP3 double, RESP2 bulk string).
fn score(v: &Value) -> Option<f64> {
    match v {
        Value::Double(d) => Some(*d),
        Value::Int(i) => Some(*i as f64),
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

/// The score of a `ZRANGE … 0 0 WITHSCORES` reply: RESP2 `[member, score]`,
/// RESP3 `[[member, score]]`; `None` when empty or an error (a key of
/// another type: nothing the maintenance scripts could work on).
fn head_score(v: &Value) -> Option<f64> {
    match v {
        Value::Array(items) => match items.as_slice() {
            [Value::Array(pair)] => pair.get(1).and_then(score),
            [_, s] => score(s),
            _ => None,
        },
        _ => None,
    }
}

fn size(v: &Value) -> u64 {
    match v {
        Value::Int(i) => (*i).max(0) as u64,
        _ => 0,
    }
}

fn parse(replies: &[Value]) -> QueueHeads {
    QueueHeads {
        scheduled: head_score(&replies[0]),
        retry: head_score(&replies[1]),
        lease: head_score(&replies[2]),
        completed: head_score(&replies[3]),
        aggregation: head_score(&replies[4]),
        retry_size: size(&replies[5]),
        archived_size: size(&replies[6]),
        active: size(&replies[7]),
    }
}

/// Reads `queues`, [`CHUNK_QUEUES`] per pipeline, one pipeline after the
/// other. Errors: [`Error::Redis`] when Redis cannot be reached.
pub(super) async fn read_queues(
    via: &mut Via<'_>,
    queues: &[String],
) -> Result<Vec<(String, QueueHeads)>> {
    let mut out = Vec::with_capacity(queues.len());
    for part in queues.chunks(CHUNK_QUEUES) {
        let cmds: Vec<redis::Cmd> = part.iter().flat_map(|q| commands(q)).collect();
        let replies: Vec<Value> = match via {
            Via::Tracked(conn) => {
                let mut pipe = redis::pipe();
                pipe.ignore_errors();
                for c in cmds {
                    pipe.add_command(c);
                }
                pipe.query_async(&mut **conn).await?
            }
            Via::Broker(b) => b.each_command(cmds, CHUNK_QUEUES * PER_QUEUE).await?,
        };
        if replies.len() != part.len() * PER_QUEUE {
            return Err(Error::Internal(format!(
                "due index: {} replies for {} queues",
                replies.len(),
                part.len()
            )));
        }
        for (q, r) in part.iter().zip(replies.chunks(PER_QUEUE)) {
            out.push((q.clone(), parse(r)));
        }
    }
    Ok(out)
}

/// `asynq:queues`, without the names this deployment cannot hold
/// ([`Broker::check_queue_name`]), sorted.
pub(super) async fn read_members(via: &mut Via<'_>, broker: &Broker) -> Result<Vec<String>> {
    match via {
        Via::Tracked(conn) => {
            // SSCAN in steps (tracked like any read): one SMEMBERS of
            // 25,000 names holds Redis ~28 ms.
            let mut names: Vec<String> = Vec::new();
            let mut cursor = 0u64;
            loop {
                let (next, part): (u64, Vec<String>) = redis::cmd("SSCAN")
                    .arg(keys::ALL_QUEUES)
                    .arg(cursor)
                    .arg("COUNT")
                    .arg(MEMBERS_STEP)
                    .query_async(&mut **conn)
                    .await?;
                names.extend(part);
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
            names.sort();
            names.dedup();
            names.retain(|q| broker.check_queue_name(q).is_ok());
            names.sort();
            Ok(names)
        }
        Via::Broker(b) => b.workable_queues().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_parse_in_both_protocols() {
        let resp2 = Value::Array(vec![
            Value::BulkString(b"id".to_vec()),
            Value::BulkString(b"1700000000".to_vec()),
        ]);
        assert_eq!(head_score(&resp2), Some(1_700_000_000.0));
        let resp3 = Value::Array(vec![Value::Array(vec![
            Value::BulkString(b"id".to_vec()),
            Value::Double(17.0),
        ])]);
        assert_eq!(head_score(&resp3), Some(17.0));
        assert_eq!(head_score(&Value::Array(vec![])), None);
        assert_eq!(head_score(&Value::Nil), None);
        assert_eq!(size(&Value::Int(4)), 4);
        assert_eq!(size(&Value::Nil), 0);
    }
}
