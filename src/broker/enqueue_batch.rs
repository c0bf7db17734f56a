//! Client batch writes: many new pending or scheduled tasks in pipelined
//! round trips.
//!
//! Go master (after v0.26.0): `Client.BatchEnqueueContext` over
//! `rdb.EnqueueBatch` (wire spec §6.20): a pipeline, no `MULTI`, of the
//! very scripts single enqueue sends (§6.1 Enqueue, §6.3 Schedule), one per
//! task, plus the `SADD asynq:queues`. Each task's script succeeds or
//! fails alone; nothing is rolled back.
//!
//! Pipelines hold [`BATCH_CHUNK`] scripts at most, so Redis serves other
//! clients between two chunks and each script stays a few microseconds.
//! On a Redis Cluster a pipeline cannot span slots (redis-rs routes a
//! pipeline to the node of its first key and refuses crossed slots), so
//! the tasks are grouped by their queue's slot (every key of a queue
//! carries the `{<queue>}` tag), and the groups' pipelines run
//! concurrently.
// asynq divergence: COMPATIBILITY.md#c6

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures_util::stream::{self, StreamExt};
use redis::Value;

use super::enqueue::script_call;
use super::per_key::CLUSTER_IN_FLIGHT;
use super::scripts::Lua;
use super::{Broker, EnqueueTarget, key_slot, keys, proto::TaskMessage};
use crate::error::{Error, Result};

/// Most tasks (scripts) in one pipeline of [`Broker::enqueue_batch`].
pub const BATCH_CHUNK: usize = 1000;

/// One task's script call, and where its reply goes.
struct Call {
    /// Index in the caller's slice.
    at: usize,
    cmd: redis::Cmd,
    /// Its script, to load on `NOSCRIPT`.
    script: &'static Lua,
}

impl Broker {
    /// Writes new tasks, each as [`Broker::enqueue`] would without a
    /// uniqueness lock: `(message, target)` pairs whose target is
    /// [`EnqueueTarget::Pending`] or [`EnqueueTarget::Scheduled`]. First
    /// one `SADD asynq:queues` with every distinct queue, then the
    /// Enqueue/Schedule scripts pipelined, [`BATCH_CHUNK`] per round trip
    /// (per slot on a cluster). Not atomic: each task is written or not on
    /// its own.
    ///
    /// Returns one result per task, in input order: `Ok(())` written;
    /// [`Error::TaskIdConflict`] when a task with its id exists (that task
    /// is left untouched; the others go on); [`Error::InvalidArgument`]
    /// for a group target (batch enqueue takes none); [`Error::Redis`] for
    /// an error reply to its script, or for every task of a round trip
    /// that failed (Redis unreachable: those tasks may or may not be
    /// written) and of the round trips not sent after it.
    ///
    /// Errors (nothing written): [`Error::Redis`] when the `SADD` fails.
    pub async fn enqueue_batch(
        &self,
        tasks: &[(TaskMessage, EnqueueTarget)],
    ) -> Result<Vec<Result<()>>> {
        let mut out: Vec<Option<Result<()>>> = (0..tasks.len()).map(|_| None).collect();
        let mut queues: Vec<&str> = tasks.iter().map(|(m, _)| m.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        if queues.is_empty() {
            return Ok(Vec::new());
        }
        // Every time, as single enqueue does (COMPATIBILITY.md#c5).
        let _: i64 = redis::cmd("SADD")
            .arg(keys::ALL_QUEUES)
            .arg(&queues)
            .query_async(&mut self.conn())
            .await?;

        let now = self.now();
        // Calls per slot on a cluster; all in one line elsewhere.
        let cluster = self.conn().is_cluster();
        let mut lines: BTreeMap<u16, Vec<Call>> = BTreeMap::new();
        for (at, (msg, target)) in tasks.iter().enumerate() {
            if let EnqueueTarget::Group(_) = target {
                out[at] = Some(Err(Error::InvalidArgument(
                    "batch enqueue takes no group task".into(),
                )));
                continue;
            }
            let call = script_call(msg, target, None, now);
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(call.script.get_hash())
                .arg(call.keys.len())
                .arg(&call.keys)
                .arg(&call.args);
            let line = if cluster {
                key_slot(call.keys[0].as_bytes())
            } else {
                0
            };
            lines.entry(line).or_default().push(Call {
                at,
                cmd,
                script: call.script,
            });
        }

        // After a round trip fails (Redis unreachable), the chunks not yet
        // sent are not sent; their tasks get that error.
        let first_failure: Mutex<Option<redis::RedisError>> = Mutex::new(None);
        // Slots run concurrently on a cluster; a slot's chunks run one
        // after the other, so tasks of one queue are written in input
        // order, as single enqueues one after the other would be.
        let in_flight = if cluster { CLUSTER_IN_FLIGHT } else { 1 };
        let mut lines = stream::iter(lines.into_values())
            .map(|calls| {
                let first_failure = &first_failure;
                async move {
                    let mut results = Vec::with_capacity(calls.len());
                    for chunk in calls.chunks(BATCH_CHUNK) {
                        let earlier = first_failure.lock().expect("not poisoned").clone();
                        let replies = match earlier {
                            Some(e) => Err(e),
                            None => self.send_chunk(chunk).await.inspect_err(|e| {
                                // Counted once, not once per task.
                                super::note_slot_error(e);
                                let mut first = first_failure.lock().expect("not poisoned");
                                first.get_or_insert_with(|| e.clone());
                            }),
                        };
                        for (i, call) in chunk.iter().enumerate() {
                            results.push((
                                call.at,
                                match &replies {
                                    Err(e) => Err(Error::Redis(e.clone())),
                                    Ok(r) => r.get(i).map_or_else(
                                        || Err(Error::Internal("pipeline reply missing".into())),
                                        outcome,
                                    ),
                                },
                            ));
                        }
                    }
                    results
                }
            })
            .buffer_unordered(in_flight);
        while let Some(results) = lines.next().await {
            for (at, result) in results {
                out[at] = Some(result);
            }
        }
        Ok(out
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::Internal("batch task not sent".into()))))
            .collect())
    }

    /// One pipeline of script calls (one slot on a cluster); the replies in
    /// order. Calls answered `NOSCRIPT` are sent once more after loading
    /// their script (they wrote nothing).
    async fn send_chunk(&self, chunk: &[Call]) -> redis::RedisResult<Vec<Value>> {
        let mut replies = self.pipeline(chunk.iter()).await?;
        let missing: Vec<usize> = (0..chunk.len())
            .filter(|&i| is_noscript(&replies[i]))
            .collect();
        if missing.is_empty() {
            return Ok(replies);
        }
        let mut loaded: Vec<&str> = Vec::new();
        for &i in &missing {
            let script = chunk[i].script;
            if !loaded.contains(&script.get_hash()) {
                script.load_async(&mut self.conn()).await?;
                loaded.push(script.get_hash());
            }
        }
        let again = self.pipeline(missing.iter().map(|&i| &chunk[i])).await?;
        for (i, reply) in missing.into_iter().zip(again) {
            replies[i] = reply;
        }
        Ok(replies)
    }

    /// Sends `calls` as one pipeline, an error reply kept per call.
    async fn pipeline<'a>(
        &self,
        calls: impl Iterator<Item = &'a Call>,
    ) -> redis::RedisResult<Vec<Value>> {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for call in calls {
            pipe.add_command(call.cmd.clone());
        }
        pipe.query_async(&mut self.conn()).await
    }
}

fn is_noscript(v: &Value) -> bool {
    matches!(v, Value::ServerError(e) if e.kind() == Some(redis::ServerErrorKind::NoScript))
}

/// A script's reply as the task's result (codes of `enqueue.lua` and
/// `schedule.lua`; no lock is passed, so -1 never comes).
fn outcome(reply: &Value) -> Result<()> {
    match reply {
        Value::Int(1) => Ok(()),
        Value::Int(0) => Err(Error::TaskIdConflict),
        // Through `From`, so that an error saying keys crossed slots is counted.
        Value::ServerError(e) => Err(redis::RedisError::from(e.clone()).into()),
        other => Err(Error::Internal(format!("enqueue script replied {other:?}"))),
    }
}
