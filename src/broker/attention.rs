//! The few bounded reads behind the attention board (issue 17 item 4,
//! COMPATIBILITY.md N5) besides the statistics snapshot: per queue, the
//! heads of its scheduled, retry and lease sets (`ZRANGE … 0 0
//! WITHSCORES`, O(log n)), the sizes of its active list and lease set
//! (`LLEN`, `ZCARD`, O(1)) and its pause time (`GET`), in one transaction
//! per queue on a single server; and the servers whose heartbeat is late
//! (`ZRANGEBYSCORE asynq:servers` with a `LIMIT`). Every command is
//! O(log n) or bounded by its `LIMIT`, so none grows with the data.
//!
//! Read-only; asynqdeck only.

use prost::Message;
use redis::Value;

use super::{Broker, keys, proto};
use crate::error::Result;

/// Commands one queue's [`AttentionHeads`] costs.
pub const QUEUE_HEADS_COMMANDS: u64 = 6;

/// Most commands per pipeline.
const PIPELINE: usize = 500;

/// What the attention board reads of one queue beyond its statistics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AttentionHeads {
    /// Score (process-at, unix s) of the earliest scheduled task.
    pub scheduled_head: Option<f64>,
    /// Score (retry time, unix s) of the earliest retry task.
    pub retry_head: Option<f64>,
    /// Length of the active list, read with `leases` in one transaction
    /// on a single server (so a task dequeued or acknowledged between the
    /// two reads cannot look orphaned); on a Cluster, one after the other.
    pub active: i64,
    /// Members of the lease set (active tasks holding a lease).
    pub leases: i64,
    /// Score (lease expiry, unix s) of the earliest lease.
    pub lease_head: Option<f64>,
    /// The value of `asynq:{<queue>}:paused` (Go stores the pause time,
    /// unix s), when present and a number.
    pub paused_since: Option<i64>,
}

/// A server registry member whose heartbeat is late.
#[derive(Clone, Debug, PartialEq)]
pub struct LateServer {
    /// The member of `asynq:servers` (`asynq:servers:{host:pid:id}`).
    pub key: String,
    /// Its expiry, unix s (the score; the heartbeat pushes it forward).
    pub expires_at: f64,
}

fn head(v: &Value) -> Option<f64> {
    match v {
        Value::Array(items) if items.len() >= 2 => match &items[1] {
            Value::Double(d) => Some(*d),
            Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
            Value::SimpleString(s) => s.parse().ok(),
            _ => None,
        },
        _ => None,
    }
}

fn int(v: &Value) -> i64 {
    match v {
        Value::Int(n) => *n,
        _ => 0,
    }
}

fn text_int(v: &Value) -> Option<i64> {
    match v {
        Value::BulkString(b) => std::str::from_utf8(b).ok()?.trim().parse().ok(),
        Value::Int(n) => Some(*n),
        _ => None,
    }
}

impl Broker {
    /// [`AttentionHeads`] of each of `queues`, in order:
    /// [`QUEUE_HEADS_COMMANDS`] commands per queue, sent
    /// [`Broker::each_command`]'s way. A key of the wrong type reads as
    /// absent.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis) when Redis cannot be
    /// reached.
    pub(crate) async fn queue_heads(&self, queues: &[String]) -> Result<Vec<AttentionHeads>> {
        let mut cmds = Vec::with_capacity(queues.len() * QUEUE_HEADS_COMMANDS as usize);
        for q in queues {
            for key in [keys::scheduled_key(q), keys::retry_key(q)] {
                let mut c = redis::cmd("ZRANGE");
                c.arg(key).arg(0).arg(0).arg("WITHSCORES");
                cmds.push(c);
            }
            let mut c = redis::cmd("LLEN");
            c.arg(keys::active_key(q));
            cmds.push(c);
            let mut c = redis::cmd("ZCARD");
            c.arg(keys::lease_key(q));
            cmds.push(c);
            let mut c = redis::cmd("ZRANGE");
            c.arg(keys::lease_key(q)).arg(0).arg(0).arg("WITHSCORES");
            cmds.push(c);
            let mut c = redis::cmd("GET");
            c.arg(keys::paused_key(q));
            cmds.push(c);
        }
        let n = QUEUE_HEADS_COMMANDS as usize;
        let replies = if self.conn().is_cluster() {
            self.each_command(cmds, PIPELINE).await?
        } else {
            // One MULTI/EXEC per queue, many per pipeline: each queue's
            // replies are of one instant.
            let mut conn = self.conn();
            let mut out = Vec::with_capacity(cmds.len());
            for part in cmds.chunks(n * (PIPELINE / n)) {
                let mut pipe = redis::pipe();
                pipe.ignore_errors();
                for one in part.chunks(n) {
                    pipe.add_command(redis::cmd("MULTI"));
                    for c in one {
                        pipe.add_command(c.clone());
                    }
                    pipe.add_command(redis::cmd("EXEC"));
                }
                let replies: Vec<Value> = pipe.query_async(&mut conn).await?;
                for block in replies.chunks(n + 2) {
                    match block.last() {
                        Some(Value::Array(items)) if items.len() == n => {
                            out.extend(items.iter().map(|v| match v {
                                Value::ServerError(_) => Value::Nil,
                                v => v.clone(),
                            }))
                        }
                        _ => out.extend(std::iter::repeat_n(Value::Nil, n)),
                    }
                }
            }
            out
        };
        Ok(replies
            .chunks(n)
            .map(|r| AttentionHeads {
                scheduled_head: head(&r[0]),
                retry_head: head(&r[1]),
                active: int(&r[2]),
                leases: int(&r[3]),
                lease_head: head(&r[4]),
                paused_since: text_int(&r[5]),
            })
            .collect())
    }

    /// The live servers' records (`GET asynq:servers:{…}`, in pipelines),
    /// and how many live servers there are; no record when there are more
    /// than `limit`. Reads the registry with the `list_live_members` script
    /// (which prunes expired members, as Go's `ListServers` does); records
    /// that are gone or do not decode are skipped. No workers are read.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis).
    pub(crate) async fn live_server_records(
        &self,
        limit: usize,
    ) -> Result<(Vec<proto::ServerInfo>, usize)> {
        let server_keys = self.live_members(keys::ALL_SERVERS).await?;
        let total = server_keys.len();
        if total > limit {
            return Ok((Vec::new(), total));
        }
        let values = self.read_each("GET", &[], &server_keys).await?;
        let records = values
            .into_iter()
            .filter_map(|v| match v {
                Value::BulkString(b) => proto::ServerInfo::decode(&b[..]).ok(),
                _ => None,
            })
            .collect();
        Ok((records, total))
    }

    /// At most `limit` members of `asynq:servers` whose expiry is at or
    /// before `before` (unix s), earliest first: one `ZRANGEBYSCORE …
    /// LIMIT 0 limit`.
    ///
    /// Errors: [`Error::Redis`](crate::Error::Redis).
    pub(crate) async fn late_servers(&self, before: i64, limit: usize) -> Result<Vec<LateServer>> {
        let mut c = redis::cmd("ZRANGEBYSCORE");
        c.arg(keys::ALL_SERVERS)
            .arg("-inf")
            .arg(before)
            .arg("WITHSCORES")
            .arg("LIMIT")
            .arg(0)
            .arg(limit);
        let reply = self.each_command(vec![c], 1).await?;
        let mut out = Vec::new();
        if let Some(Value::Array(items)) = reply.first() {
            for pair in items.chunks(2) {
                let key = match &pair[0] {
                    Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
                    _ => continue,
                };
                let score = pair
                    .get(1)
                    .and_then(|s| head(&Value::Array(vec![Value::Nil, s.clone()])));
                if let Some(expires_at) = score {
                    out.push(LateServer { key, expires_at });
                }
            }
        }
        Ok(out)
    }
}
