//! Server and scheduler state, scheduler history, task cancellation.
//!
//! Go: `rdb.WriteServerState`, `ClearServerState`, `WriteSchedulerEntries`,
//! `ClearSchedulerEntries`, `RecordSchedulerEnqueueEvent`,
//! `ClearSchedulerHistory`, `PublishCancelation` (`internal/rdb/rdb.go`) and
//! the readers `ListServers`, `ListWorkers`, `ListSchedulerEntries`,
//! `ListSchedulerEnqueueEvents` (`internal/rdb/inspect.go`); wire spec §2.1,
//! §4.2–4.5, §6.16–6.18, §9.9–9.10.
//!
//! The registries `asynq:servers`, `asynq:workers` and `asynq:schedulers`
//! map key names to an expiry (unix s); readers prune expired members.

use std::time::Duration;

use prost::Message;
use redis::Value;

use super::{Broker, Page, keys, proto, scripts};
use crate::error::{Error, Result};

/// Events kept per scheduler entry (Go `maxEvents`; wire spec §6.17).
const SCHEDULER_HISTORY_CAP: i64 = 1000;
/// Keys read per pipeline by the registry readers.
const READ_CHUNK: usize = 100;
/// `asynq:servers:` and `asynq:workers:`: what precedes a server's
/// `{<host>:<pid>:<server id>}` in its two key names.
const SERVERS_KEY_PREFIX: &str = "asynq:servers:";
const WORKERS_KEY_PREFIX: &str = "asynq:workers:";

/// The sort key of a server key name `asynq:servers:{<host>:<pid>:<id>}`:
/// (host, pid, id) as Go writes them (the pid and id are the last two
/// `:`-separated parts, a host may hold `:`); a name of another form sorts
/// after them, by name.
fn server_order(key: &str) -> (bool, &str, i64, &str) {
    let inner = key
        .strip_prefix(SERVERS_KEY_PREFIX)
        .and_then(|r| r.strip_prefix('{'))
        .and_then(|r| r.strip_suffix('}'));
    if let Some(inner) = inner {
        let mut parts = inner.rsplitn(3, ':');
        if let (Some(id), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next())
            && let Ok(pid) = pid.parse::<i64>()
        {
            return (false, host, pid, id);
        }
    }
    (true, key, 0, "")
}

/// Scheduler entries read per `LRANGE` at most (one entry is ~100–600 bytes).
const ENTRIES_CHUNK: usize = 500;

/// Whole seconds of a heartbeat TTL; Go passes `ttl.Seconds()` and needs it
/// integral, so a sub-second remainder is dropped and less than 1 s refused.
// asynq divergence: COMPATIBILITY.md#q10
fn ttl_seconds(ttl: Duration) -> Result<u64> {
    match ttl.as_secs() {
        0 => Err(Error::InvalidArgument(format!(
            "TTL must be at least 1s, got {ttl:?}"
        ))),
        s => Ok(s),
    }
}

impl Broker {
    /// Expiry score for a registry entry written now with `ttl`: (now + ttl)
    /// in whole unix seconds, as Go.
    fn expiry_score(&self, ttl: Duration) -> i64 {
        chrono::Duration::from_std(ttl)
            .ok()
            .and_then(|d| self.now().checked_add_signed(d))
            .map_or(i64::MAX, |t| t.timestamp())
    }

    /// Publishes a server's state for `ttl` (Go `rdb.WriteServerState`; wire
    /// spec §6.16): ZADD `asynq:servers` and `asynq:workers` with score
    /// now + ttl (unix s), then the `write_server_state` script stores the
    /// `ServerInfo` (SETEX) and replaces the workers hash (task id →
    /// `WorkerInfo`). `ttl` is used in whole seconds.
    ///
    /// Errors: [`Error::InvalidArgument`] when `ttl` is under 1 s;
    /// [`Error::Internal`]; [`Error::Redis`].
    pub async fn write_server_state(
        &self,
        info: &proto::ServerInfo,
        workers: &[proto::WorkerInfo],
        ttl: Duration,
    ) -> Result<()> {
        let ttl_s = ttl_seconds(ttl)?;
        let score = self.expiry_score(ttl);
        let server_key = keys::server_info_key(&info.host, info.pid, &info.server_id);
        let workers_key = keys::workers_key(&info.host, info.pid, &info.server_id);
        let mut conn = self.conn();
        let _: i64 = redis::cmd("ZADD")
            .arg(keys::ALL_SERVERS)
            .arg(score)
            .arg(&server_key)
            .query_async(&mut conn)
            .await?;
        let _: i64 = redis::cmd("ZADD")
            .arg(keys::ALL_WORKERS)
            .arg(score)
            .arg(&workers_key)
            .query_async(&mut conn)
            .await?;
        let mut inv = scripts::WRITE_SERVER_STATE.prepare_invoke();
        inv.key(&server_key)
            .key(&workers_key)
            .arg(ttl_s)
            .arg(info.encode_to_vec());
        for w in workers {
            inv.arg(&w.task_id).arg(w.encode_to_vec());
        }
        let code: i64 = inv.invoke_async(&mut conn).await?;
        match code {
            1 => Ok(()),
            other => Err(Error::Internal(format!(
                "write_server_state script replied {other}"
            ))),
        }
    }

    /// Removes a server's state (Go `rdb.ClearServerState`; wire spec
    /// §6.16): ZREM from `asynq:servers` and `asynq:workers`, then one
    /// `DEL` of the info key and the workers hash (both keys share the
    /// `{host:pid:server id}` hash tag, so the single command is atomic).
    /// Errors: [`Error::Redis`].
    // asynq divergence: COMPATIBILITY.md#q10
    pub async fn clear_server_state(&self, host: &str, pid: i32, server_id: &str) -> Result<()> {
        let server_key = keys::server_info_key(host, pid, server_id);
        let workers_key = keys::workers_key(host, pid, server_id);
        let mut conn = self.conn();
        let _: i64 = redis::cmd("ZREM")
            .arg(keys::ALL_SERVERS)
            .arg(&server_key)
            .query_async(&mut conn)
            .await?;
        let _: i64 = redis::cmd("ZREM")
            .arg(keys::ALL_WORKERS)
            .arg(&workers_key)
            .query_async(&mut conn)
            .await?;
        let _: i64 = redis::cmd("DEL")
            .arg(&server_key)
            .arg(&workers_key)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Publishes a scheduler's entries for `ttl` (Go
    /// `rdb.WriteSchedulerEntries`; wire spec §6.17): ZADD `asynq:schedulers`
    /// with score now + ttl (unix s), then the `write_scheduler_entries`
    /// script replaces the list `asynq:schedulers:{<scheduler id>}` (entries
    /// LPUSHed in order, so stored newest-registered first). `ttl` is used in
    /// whole seconds.
    ///
    /// Errors: [`Error::InvalidArgument`] when `ttl` is under 1 s;
    /// [`Error::Internal`]; [`Error::Redis`].
    pub async fn write_scheduler_entries(
        &self,
        scheduler_id: &str,
        entries: &[proto::SchedulerEntry],
        ttl: Duration,
    ) -> Result<()> {
        let ttl_s = ttl_seconds(ttl)?;
        let key = keys::scheduler_entries_key(scheduler_id);
        let mut conn = self.conn();
        let _: i64 = redis::cmd("ZADD")
            .arg(keys::ALL_SCHEDULERS)
            .arg(self.expiry_score(ttl))
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        let mut inv = scripts::WRITE_SCHEDULER_ENTRIES.prepare_invoke();
        inv.key(&key).arg(ttl_s);
        for e in entries {
            inv.arg(e.encode_to_vec());
        }
        let code: i64 = inv.invoke_async(&mut conn).await?;
        match code {
            1 => Ok(()),
            other => Err(Error::Internal(format!(
                "write_scheduler_entries script replied {other}"
            ))),
        }
    }

    /// Removes a scheduler's entries (Go `rdb.ClearSchedulerEntries`; wire
    /// spec §6.17): ZREM from `asynq:schedulers`, then DEL the list.
    /// Errors: [`Error::Redis`].
    pub async fn clear_scheduler_entries(&self, scheduler_id: &str) -> Result<()> {
        let key = keys::scheduler_entries_key(scheduler_id);
        let mut conn = self.conn();
        let _: i64 = redis::cmd("ZREM")
            .arg(keys::ALL_SCHEDULERS)
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        let _: i64 = redis::cmd("DEL").arg(&key).query_async(&mut conn).await?;
        Ok(())
    }

    /// Adds one enqueue to the entry's history (Go
    /// `rdb.RecordSchedulerEnqueueEvent`; wire spec §6.17): the
    /// `record_scheduler_enqueue_event` script trims the zset to the 999
    /// newest events, then adds this one with score = its enqueue time (unix
    /// s; 0 when the event has none), so at most 1000 remain.
    ///
    /// Errors: [`Error::Internal`]; [`Error::Redis`].
    pub async fn record_scheduler_enqueue_event(
        &self,
        entry_id: &str,
        event: &proto::SchedulerEnqueueEvent,
    ) -> Result<()> {
        let score = event.enqueue_time.map(|t| t.seconds).unwrap_or(0);
        let code: i64 = scripts::RECORD_SCHEDULER_ENQUEUE_EVENT
            .key(keys::scheduler_history_key(entry_id))
            .arg(score)
            .arg(event.encode_to_vec())
            .arg(SCHEDULER_HISTORY_CAP)
            .invoke_async(&mut self.conn())
            .await?;
        match code {
            1 => Ok(()),
            other => Err(Error::Internal(format!(
                "record_scheduler_enqueue_event script replied {other}"
            ))),
        }
    }

    /// Deletes the entry's enqueue history (Go `rdb.ClearSchedulerHistory`;
    /// wire spec §6.17). Errors: [`Error::Redis`].
    pub async fn clear_scheduler_history(&self, entry_id: &str) -> Result<()> {
        let _: i64 = redis::cmd("DEL")
            .arg(keys::scheduler_history_key(entry_id))
            .query_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// `PUBLISH asynq:cancel <task id>` (Go `rdb.PublishCancelation`; wire
    /// spec §6.18). Best effort: no check that the task exists or runs.
    /// Errors: [`Error::Redis`].
    pub async fn publish_cancelation(&self, task_id: &str) -> Result<()> {
        let _: i64 = redis::cmd("PUBLISH")
            .arg(keys::CANCEL_CHANNEL)
            .arg(task_id)
            .query_async(&mut self.conn())
            .await?;
        Ok(())
    }

    /// Live members of a registry zset, pruning expired ones (the
    /// `list_live_members` script; wire spec §9.9).
    pub(super) async fn live_members(&self, registry: &str) -> Result<Vec<String>> {
        let members: Vec<String> = scripts::LIST_LIVE_MEMBERS
            .key(registry)
            .arg(self.now().timestamp())
            .invoke_async(&mut self.conn())
            .await?;
        Ok(members)
    }

    /// Runs `command` on every key, [`READ_CHUNK`] keys per pipeline (on a
    /// cluster, the keys being of many slots, concurrent single commands:
    /// [`Broker::each_command`]), and returns the replies in key order.
    pub(super) async fn read_each(
        &self,
        command: &str,
        extra: &[&str],
        keys: &[String],
    ) -> Result<Vec<Value>> {
        // A key of the wrong type answers Nil, skipped by the callers.
        let cmds = keys
            .iter()
            .map(|key| {
                let mut cmd = redis::cmd(command);
                cmd.arg(key).arg(extra);
                cmd
            })
            .collect();
        self.each_command(cmds, READ_CHUNK).await
    }

    /// Live servers and the in-flight tasks of live workers hashes (Go
    /// `rdb.ListServers` + `rdb.ListWorkers`; wire spec §9.9): every page of
    /// [`Broker::servers_and_workers_page`] at once, read the same bounded
    /// way. Errors: [`Error::Redis`].
    pub(crate) async fn list_servers_and_workers(
        &self,
    ) -> Result<(Vec<proto::ServerInfo>, Vec<proto::WorkerInfo>)> {
        let all = Page {
            number: 1,
            size: usize::MAX,
        };
        let (servers, workers, _) = self.servers_and_workers_page(all).await?;
        Ok((servers, workers))
    }

    /// One page of the live servers, in the order of their key names'
    /// (host, pid, server id), with the in-flight tasks of their live
    /// workers hashes, and how many live servers there are (issue 15).
    /// Reads both registries (one `list_live_members` script each, pruning
    /// expired members), then only the page's `asynq:servers:{…}` (GET) and
    /// `asynq:workers:{…}` (HVALS) keys, [`READ_CHUNK`] per pipeline, so a
    /// page costs O(servers in the registry + page), never one command over
    /// all keys. Missing keys and values that fail to decode are skipped
    /// (logged): that page is shorter, the total still counts them. Workers
    /// are in HVALS order. Errors: [`Error::InvalidArgument`] for a zero
    /// page number or size; [`Error::Redis`].
    pub(crate) async fn servers_and_workers_page(
        &self,
        page: Page,
    ) -> Result<(Vec<proto::ServerInfo>, Vec<proto::WorkerInfo>, usize)> {
        page.validate()?;
        let mut server_keys = self.live_members(keys::ALL_SERVERS).await?;
        server_keys.sort_by(|a, b| server_order(a).cmp(&server_order(b)));
        let total = server_keys.len();
        let start = page.first().min(total);
        let end = start.saturating_add(page.size).min(total);
        let server_keys = &server_keys[start..end];
        let mut servers = Vec::new();
        for (key, value) in server_keys
            .iter()
            .zip(self.read_each("GET", &[], server_keys).await?)
        {
            if let Value::BulkString(bytes) = value {
                match proto::ServerInfo::decode(&bytes[..]) {
                    Ok(info) => servers.push(info),
                    Err(e) => tracing::warn!(%key, error = %e, "skipping undecodable ServerInfo"),
                }
            }
        }
        // The page's workers hashes: those the workers registry lists live.
        let live_workers: std::collections::HashSet<String> = self
            .live_members(keys::ALL_WORKERS)
            .await?
            .into_iter()
            .collect();
        let worker_keys: Vec<String> = server_keys
            .iter()
            .filter_map(|k| k.strip_prefix(SERVERS_KEY_PREFIX))
            .map(|rest| format!("{WORKERS_KEY_PREFIX}{rest}"))
            .filter(|k| live_workers.contains(k))
            .collect();
        let mut workers = Vec::new();
        for (key, value) in worker_keys
            .iter()
            .zip(self.read_each("HVALS", &[], &worker_keys).await?)
        {
            let Value::Array(values) = value else {
                continue;
            };
            for value in values {
                let Value::BulkString(bytes) = value else {
                    continue;
                };
                match proto::WorkerInfo::decode(&bytes[..]) {
                    Ok(w) => workers.push(w),
                    Err(e) => tracing::warn!(%key, error = %e, "skipping undecodable WorkerInfo"),
                }
            }
        }
        Ok((servers, workers, total))
    }

    /// Entries of every live scheduler (Go `rdb.ListSchedulerEntries`; wire
    /// spec §9.10): schedulers in registry order (ascending expiry), each
    /// scheduler's entries as stored (newest registered first). Expired
    /// registry members are pruned; undecodable entries are skipped
    /// (logged). Read in bounded commands (at most [`ENTRIES_CHUNK`] entries
    /// each). Errors: [`Error::Redis`].
    pub(crate) async fn list_scheduler_entries(&self) -> Result<Vec<proto::SchedulerEntry>> {
        let all = Page {
            number: 1,
            size: usize::MAX,
        };
        Ok(self.scheduler_entries_page(all).await?.0)
    }

    /// The published entry with id `entry_id`, from the entries of every
    /// live scheduler (read as [`Broker::list_scheduler_entries`] reads
    /// them, in bounded commands); `None` when no scheduler lists it.
    /// Errors: [`Error::Redis`].
    pub(crate) async fn scheduler_entry(
        &self,
        entry_id: &str,
    ) -> Result<Option<proto::SchedulerEntry>> {
        let entries = self.list_scheduler_entries().await?;
        Ok(entries.into_iter().find(|e| e.id == entry_id))
    }

    /// The entries of `page` (ranks `size·(number−1)` to `size·number − 1`)
    /// of the order of [`Broker::list_scheduler_entries`], and how many
    /// entries there are in all (R11). Reads the registry, one `LLEN` per live scheduler, then
    /// only the list ranges the page covers, in `LRANGE`s of at most
    /// [`ENTRIES_CHUNK`] entries, so a page costs O(schedulers + page), not
    /// O(all entries). Undecodable entries are skipped (logged): that page
    /// is shorter, the total still counts them. Errors:
    /// [`Error::InvalidArgument`] for a zero page number or size;
    /// [`Error::Redis`].
    pub(crate) async fn scheduler_entries_page(
        &self,
        page: Page,
    ) -> Result<(Vec<proto::SchedulerEntry>, usize)> {
        page.validate()?;
        let (start, count) = (page.first(), page.size);
        let scheduler_keys = self.live_members(keys::ALL_SCHEDULERS).await?;
        let lens: Vec<usize> = self
            .read_each("LLEN", &[], &scheduler_keys)
            .await?
            .into_iter()
            .map(|v| match v {
                Value::Int(n) => usize::try_from(n).unwrap_or(0),
                _ => 0, // a key of another type
            })
            .collect();
        let total: usize = lens.iter().sum();
        let end = start.saturating_add(count).min(total);
        // (key, first index, last index) of each LRANGE to send.
        let mut ranges: Vec<(&str, usize, usize)> = Vec::new();
        let mut offset = 0usize;
        for (key, len) in scheduler_keys.iter().zip(&lens) {
            let (lo, hi) = (start.max(offset), end.min(offset + len));
            let mut from = lo;
            while from < hi {
                let to = hi.min(from + ENTRIES_CHUNK);
                ranges.push((key, from - offset, to - offset - 1));
                from = to;
            }
            offset += len;
        }
        let mut entries = Vec::new();
        for chunk in ranges.chunks(READ_CHUNK) {
            let cmds = chunk
                .iter()
                .map(|(key, from, to)| {
                    let mut cmd = redis::cmd("LRANGE");
                    cmd.arg(*key).arg(*from).arg(*to);
                    cmd
                })
                .collect();
            let replies = self.each_command(cmds, READ_CHUNK).await?;
            for ((key, _, _), value) in chunk.iter().zip(replies) {
                let Value::Array(values) = value else {
                    continue;
                };
                for value in values {
                    let Value::BulkString(bytes) = value else {
                        continue;
                    };
                    match proto::SchedulerEntry::decode(&bytes[..]) {
                        Ok(e) => entries.push(e),
                        Err(e) => {
                            tracing::warn!(%key, error = %e, "skipping undecodable SchedulerEntry")
                        }
                    }
                }
            }
        }
        Ok((entries, total))
    }

    /// One page of a scheduler entry's events, newest first: ranks
    /// `size·(number−1)` to `size·number − 1` of `ZREVRANGE
    /// asynq:scheduler_history:<entry id>` (Go
    /// `rdb.ListSchedulerEnqueueEvents`; wire spec §9.10); a page past the
    /// end is empty. No existence check. Undecodable events are skipped
    /// (logged; Go fails the whole call). Errors: [`Error::InvalidArgument`]
    /// for a zero page number or size; [`Error::Redis`].
    pub(crate) async fn list_scheduler_enqueue_events(
        &self,
        entry_id: &str,
        page: Page,
    ) -> Result<Vec<proto::SchedulerEnqueueEvent>> {
        page.validate()?;
        let Some((start, stop)) = page.zset_range() else {
            return Ok(Vec::new());
        };
        let key = keys::scheduler_history_key(entry_id);
        let members: Vec<Vec<u8>> = redis::cmd("ZREVRANGE")
            .arg(&key)
            .arg(start)
            .arg(stop)
            .query_async(&mut self.conn())
            .await?;
        // asynq divergence: COMPATIBILITY.md#q9
        let mut events = Vec::with_capacity(members.len());
        for bytes in members {
            match proto::SchedulerEnqueueEvent::decode(&bytes[..]) {
                Ok(e) => events.push(e),
                Err(e) => {
                    tracing::warn!(%key, error = %e, "skipping undecodable SchedulerEnqueueEvent")
                }
            }
        }
        Ok(events)
    }
}

#[cfg(test)]
mod tests {
    use super::server_order;

    /// Go's key names sort by host, then pid as a number, then id; a host
    /// may hold `:` (the pid and id are the last two parts); other names
    /// sort after them.
    #[test]
    fn server_keys_sort_by_host_pid_id() {
        let mut names = vec![
            "asynq:servers:{b:1:x}",
            "asynq:servers:{a:10:x}",
            "asynq:servers:{a:9:y}",
            "asynq:servers:{a:9:x}",
            "asynq:servers:{::1:7:z}",
            "odd",
            "asynq:servers:{a:notapid:x}",
        ];
        names.sort_by(|a, b| server_order(a).cmp(&server_order(b)));
        assert_eq!(
            names,
            [
                "asynq:servers:{::1:7:z}",
                "asynq:servers:{a:9:x}",
                "asynq:servers:{a:9:y}",
                "asynq:servers:{a:10:x}",
                "asynq:servers:{b:1:x}",
                "asynq:servers:{a:notapid:x}",
                "odd",
            ]
        );
        assert_eq!(
            server_order("asynq:servers:{::1:7:z}"),
            (false, "::1", 7, "z")
        );
    }
}
