//! The many-queue statistics read on a Redis Cluster: per queue, one
//! `MULTI`/`EXEC` on the queue's own slot (the counters' `MGET` and the
//! `queues_stats` script for that queue alone, with its keys declared as
//! the script's `KEYS` so redis-rs routes it to the queue's master), up to
//! [`CLUSTER_IN_FLIGHT`] queues at once, plus one `SMEMBERS asynq:queues`.
//! The same [`QueuesStats`] as the single-server read; each queue's numbers
//! are those of one moment, the queues' moments differ by the read's
//! duration (a cluster has no transaction across slots).
// asynq divergence: COMPATIBILITY.md#k5

use chrono::{DateTime, Utc};
use futures_util::stream::{self, StreamExt};
use redis::Value;

use super::reply::{flat_error, parse_queue, resp2, value_error};
use super::{KeyKinds, QueueStatsEntry, QueuesStats, StatsRequest};
use crate::broker::per_key::CLUSTER_IN_FLIGHT;
use crate::broker::{Broker, keys, scripts};
use crate::error::{Error, Result};

/// The keys of `queue` the `queues_stats` script reads when it reads every
/// kind, in the order it is given them (declared as its `KEYS`; the
/// script itself reads ARGV), and the samples key when asked.
fn declared_keys(queue: &str, with_samples: bool) -> Vec<String> {
    let mut out = vec![keys::pending_key(queue)];
    out.extend(KeyKinds::EACH.into_iter().map(|k| k.key(queue)));
    if with_samples {
        out.push(crate::broker::samples_key(queue));
    }
    out
}

/// The `queues_stats` invocation's arguments before the queues: the
/// samples flag, `since` and the windows.
fn head_args(cmd: &mut redis::Cmd, req: &StatsRequest<'_>) {
    cmd.arg(if req.with_samples { "1" } else { "0" })
        .arg(req.since.timestamp().to_string())
        .arg(req.windows.len().to_string());
    for w in req.windows {
        cmd.arg(w.as_secs().to_string());
    }
}

impl Broker {
    /// [`Broker::queues_stats`] on a cluster (module docs). Every kind of
    /// key is read for every queue (one queue's extra `ZCARD`s cost less
    /// than a second round trip), so `expected` is not used. A queue not
    /// in `asynq:queues` gets [`Error::QueueNotFound`].
    ///
    /// Errors of the whole call as [`Broker::queues_stats`].
    pub(super) async fn queues_stats_per_queue(
        &self,
        queues: &[String],
        req: &StatsRequest<'_>,
    ) -> Result<QueuesStats> {
        let now = self.now();
        let mut conn = self.conn();
        let mut members: Vec<String> = super::metered(
            req.budget,
            1,
            redis::cmd("SMEMBERS")
                .arg(keys::ALL_QUEUES)
                .query_async(&mut conn),
        )
        .await?;
        members.sort();
        let reads = stream::iter(queues.iter().cloned())
            .map(|q| async move {
                let mut loaded = false;
                let mut sent = 0;
                let read = async {
                    loop {
                        sent += 1;
                        match self.one_queue_stats(&q, now, req).await? {
                            Some(entry) => return Ok::<_, Error>(entry),
                            None if !loaded => {
                                super::metered(
                                    req.budget,
                                    1,
                                    scripts::QUEUES_STATS.load_async(&mut self.conn()),
                                )
                                .await?;
                                loaded = true;
                            }
                            None => {
                                return Err(Error::Internal(
                                    "queues_stats script missing right after loading it".into(),
                                ));
                            }
                        }
                    }
                }
                .await;
                // One queue's failure (its master unreachable, say) is its
                // row's error; the queues of the other masters are shown.
                let entry = read.unwrap_or_else(|e| QueueStatsEntry {
                    stats: Err(e),
                    samples: req.with_samples.then(|| Ok(Vec::new())),
                    next_id: None,
                    queue: q.clone(),
                });
                (entry, sent)
            })
            .buffered(CLUSTER_IN_FLIGHT);
        let read: Vec<(QueueStatsEntry, usize)> = reads.collect().await;
        let mut out = QueuesStats {
            entries: Vec::with_capacity(queues.len()),
            members,
            transactions: 0,
        };
        for (entry, sent) in read {
            out.transactions += sent;
            if out.members.binary_search(&entry.queue).is_ok() {
                out.entries.push(entry);
            } else {
                out.entries.push(QueueStatsEntry {
                    stats: Err(Error::QueueNotFound {
                        queue: entry.queue.clone(),
                    }),
                    samples: req.with_samples.then(|| Ok(Vec::new())),
                    next_id: None,
                    queue: entry.queue,
                });
            }
        }
        Ok(out)
    }

    /// One queue's transaction of [`Broker::queues_stats_per_queue`];
    /// `None` when the script is not loaded on the queue's master.
    async fn one_queue_stats(
        &self,
        q: &str,
        now: DateTime<Utc>,
        req: &StatsRequest<'_>,
    ) -> Result<Option<QueueStatsEntry>> {
        let today = now.date_naive();
        let mut pipe = redis::pipe();
        pipe.atomic().ignore_errors();
        pipe.cmd("MGET")
            .arg(keys::processed_key(q, today))
            .arg(keys::failed_key(q, today))
            .arg(keys::processed_total_key(q))
            .arg(keys::failed_total_key(q))
            .arg(keys::paused_key(q));
        let declared = declared_keys(q, req.with_samples);
        let mut script = redis::cmd("EVALSHA");
        script
            .arg(scripts::QUEUES_STATS.get_hash())
            .arg(declared.len())
            .arg(&declared);
        head_args(&mut script, req);
        let mut items: Vec<String> = Vec::new();
        for kind in KeyKinds::EACH {
            match kind {
                KeyKinds::ACTIVE => items.extend(["l".into(), kind.key(q)]),
                KeyKinds::GROUPS => {
                    items.extend(["g".into(), kind.key(q), keys::group_key_prefix(q)])
                }
                _ => items.extend(["z".into(), kind.key(q)]),
            }
        }
        script
            .arg(keys::pending_key(q))
            .arg(keys::task_key_prefix(q))
            .arg(items.len().to_string())
            .arg(items);
        if req.with_samples {
            script.arg(crate::broker::samples_key(q));
        }
        pipe.add_command(script);
        // MULTI, MGET, EVALSHA, EXEC.
        let replies: Vec<Value> =
            super::metered(req.budget, 4, pipe.query_async(&mut self.conn())).await?;
        let [strings, flat] = <[Value; 2]>::try_from(replies)
            .map_err(|r| flat_error(&format!("transaction replied {} values", r.len())))?;
        let strings = match resp2(strings) {
            Value::Array(v) if v.len() == 5 => v,
            other => return Err(flat_error(&format!("MGET replied {other:?}"))),
        };
        let flat = match flat {
            Value::ServerError(e) if e.kind() == Some(redis::ServerErrorKind::NoScript) => {
                return Ok(None);
            }
            Value::Array(flat) => flat.into_iter().map(resp2).collect::<Vec<_>>(),
            other => return Err(Error::Redis(value_error(other))),
        };
        let mut at = 0;
        let entry = parse_queue(
            q,
            now,
            &flat,
            &mut at,
            KeyKinds::ALL,
            &strings,
            req.with_samples,
        )?;
        if at != flat.len() {
            return Err(flat_error(&format!("{} values left over", flat.len() - at)));
        }
        Ok(Some(entry))
    }
}
