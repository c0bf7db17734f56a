//! The index's refresh loop: opens the tracked connection (or settles for
//! polling), reads every queue, then reads again only what invalidations
//! name, what consumers touched, and everything at the safety-net times
//! (module docs of `broker::due`).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use redis::{PushInfo, PushKind, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::read::{Via, read_members, read_queues};
use super::{COALESCE, DueMode, Inner, MAX_INDEX_AGE, QueueHeads, queue_of_index_key};
use crate::broker::stats::Tracked;
use crate::broker::{Topology, keys};
use crate::error::Result;

/// How long the index polls after Redis refused tracking: 10 min.
const RETRY_TRACKING: Duration = Duration::from_secs(600);
/// How long the index polls after the tracked connection could not be
/// opened (Redis down): 5 s.
const RETRY_CONNECT: Duration = Duration::from_secs(5);
/// Wait after a failed read: 1 s.
const RETRY_READ: Duration = Duration::from_secs(1);
/// Longest sleep before the loop looks at the broker's master generation
/// again (behind Sentinel): 1 s.
const RECHECK: Duration = Duration::from_secs(1);
/// The tracked connection's name in `CLIENT LIST`.
pub const CLIENT_NAME: &str = "asynqdeck-due-index";

/// What push messages said.
#[derive(Default)]
struct Heard {
    /// Every tracked key may have changed (a flush).
    all: bool,
    /// The connection is gone.
    lost: bool,
    /// `asynq:queues` changed.
    members: bool,
}

fn hear(msg: PushInfo, dirty: &mut HashSet<String>, heard: &mut Heard) {
    match msg.kind {
        PushKind::Invalidate => {
            for v in msg.data {
                match v {
                    Value::Array(names) => {
                        for k in names {
                            match k {
                                Value::BulkString(k) if k == keys::ALL_QUEUES.as_bytes() => {
                                    heard.members = true
                                }
                                Value::BulkString(k) => {
                                    if let Some(q) = queue_of_index_key(&k) {
                                        dirty.insert(q);
                                    }
                                }
                                _ => heard.all = true,
                            }
                        }
                    }
                    // FLUSHALL / FLUSHDB: a null list.
                    _ => heard.all = true,
                }
            }
        }
        PushKind::Disconnection => heard.lost = true,
        _ => {}
    }
}

/// Opens the tracked connection; `Err` with when to try again.
async fn open(inner: &Inner) -> std::result::Result<Tracked, Duration> {
    match Tracked::open(&inner.broker).await {
        Ok(Some(mut t)) => {
            let _: redis::RedisResult<()> = redis::cmd("CLIENT")
                .arg("SETNAME")
                .arg(CLIENT_NAME)
                .query_async(&mut t.conn)
                .await;
            inner.state().stats.connections += 1;
            tracing::debug!("due index: tracking mode");
            Ok(t)
        }
        Ok(None) => {
            tracing::info!(
                "due index: Redis refused RESP3 or CLIENT TRACKING; every queue is read each forwarder interval"
            );
            Err(RETRY_TRACKING)
        }
        Err(e) => {
            tracing::warn!(error = %e, "due index: cannot open the tracked connection; polling");
            Err(RETRY_CONNECT)
        }
    }
}

/// Clears the stale marks of queues read since they were touched (those
/// touched during the read are still wanted, so stay stale).
fn settle_stale(inner: &Inner) {
    let mut st = inner.state();
    let wanted = std::mem::take(&mut st.wanted);
    st.stale.retain(|q| wanted.contains(q));
    st.wanted = wanted;
}

/// Reads every queue; returns whether the index changed.
async fn full_read(inner: &Inner, via: &mut Via<'_>, mode: DueMode) -> Result<bool> {
    {
        let mut st = inner.state();
        st.wanted.clear();
    }
    let members = read_members(via, &inner.broker).await?;
    let heads: BTreeMap<String, QueueHeads> =
        read_queues(via, &members).await?.into_iter().collect();
    let changed = {
        let mut st = inner.state();
        let changed = st.queues.as_ref() != Some(&heads) || st.mode != Some(mode);
        st.queues = Some(heads);
        st.mode = Some(mode);
        st.stats.full_reads += 1;
        changed
    };
    settle_stale(inner);
    Ok(changed)
}

/// Reads `asynq:queues` again when `members` says so, and the queues of
/// `dirty` still listed; returns whether the index changed. On error what
/// was not read stays in `dirty` and `members`.
async fn partial_read(
    inner: &Inner,
    via: &mut Via<'_>,
    dirty: &mut HashSet<String>,
    members: &mut bool,
) -> Result<bool> {
    let mut changed = false;
    if *members {
        let names = read_members(via, &inner.broker).await?;
        *members = false;
        let listed: HashSet<&String> = names.iter().collect();
        let mut st = inner.state();
        let st = &mut *st;
        let queues = st.queues.get_or_insert_with(BTreeMap::new);
        let before = queues.len();
        queues.retain(|q, _| listed.contains(q));
        changed |= queues.len() != before;
        for q in &names {
            if !queues.contains_key(q) {
                // Left out of `select` until read.
                queues.insert(q.clone(), QueueHeads::default());
                st.stale.insert(q.clone());
                st.wanted.insert(q.clone());
                dirty.insert(q.clone());
            }
        }
    }
    let list: Vec<String> = {
        let mut st = inner.state();
        let wanted = std::mem::take(&mut st.wanted);
        dirty.extend(wanted);
        let queues = st.queues.as_ref();
        let mut list: Vec<String> = dirty
            .iter()
            .filter(|q| queues.is_some_and(|m| m.contains_key(*q)))
            .cloned()
            .collect();
        list.sort();
        list
    };
    dirty.clear();
    if list.is_empty() {
        settle_stale(inner);
        return Ok(changed);
    }
    let heads = match read_queues(via, &list).await {
        Ok(h) => h,
        Err(e) => {
            dirty.extend(list);
            return Err(e);
        }
    };
    {
        let mut st = inner.state();
        st.stats.queue_rereads += heads.len() as u64;
        if let Some(queues) = st.queues.as_mut() {
            for (q, h) in heads {
                if let Some(slot) = queues.get_mut(&q) {
                    *slot = h;
                }
            }
        }
    }
    settle_stale(inner);
    // A touched queue is left out of `select` until read: reading it
    // changes what `select` says, whatever the heads.
    let _ = changed;
    Ok(true)
}

enum Woke {
    Timer,
    Touch,
    Push(Option<PushInfo>),
}

/// The loop (module docs of `broker::due`); ends with `shutdown`.
pub(super) async fn run(inner: Arc<Inner>, shutdown: CancellationToken) {
    let mut tracked: Option<Tracked> = None;
    // When to try tracking again; `None`: never (a cluster).
    let mut try_tracking_at = (inner.broker.topology() != Topology::Cluster).then(Instant::now);
    let mut full_at: Option<Instant> = None;
    let mut members = false;
    let mut dirty: HashSet<String> = HashSet::new();
    loop {
        if shutdown.is_cancelled() {
            break;
        }
        if tracked.is_none()
            && let Some(at) = try_tracking_at
            && Instant::now() >= at
        {
            match open(&inner).await {
                Ok(t) => {
                    tracked = Some(t);
                    full_at = None;
                    try_tracking_at = Some(Instant::now());
                }
                Err(wait) => try_tracking_at = Some(Instant::now() + wait),
            }
        }
        if tracked
            .as_ref()
            .is_some_and(|t| t.generation != inner.broker.master_generation())
        {
            tracing::info!("due index: the master changed; reading every queue again");
            tracked = None;
            full_at = None;
            continue;
        }
        if let Some(t) = tracked.as_mut() {
            let mut heard = Heard::default();
            while let Ok(msg) = t.pushes.try_recv() {
                hear(msg, &mut dirty, &mut heard);
            }
            if heard.lost || t.pushes.is_closed() && t.pushes.is_empty() {
                tracing::info!("due index: tracked connection lost; reading every queue again");
                tracked = None;
                full_at = None;
                continue;
            }
            if heard.all {
                full_at = None;
            }
            members |= heard.members;
        }
        let (mode, max_age) = match tracked {
            Some(_) => (DueMode::Tracking, MAX_INDEX_AGE),
            None => (DueMode::Polling, inner.poll_interval),
        };
        let full = full_at.is_none_or(|t| t.elapsed() >= max_age);
        let result = {
            let mut via = match tracked.as_mut() {
                Some(t) => Via::Tracked(&mut t.conn),
                None => Via::Broker(&inner.broker),
            };
            if full {
                let started = Instant::now();
                let r = full_read(&inner, &mut via, mode).await;
                if r.is_ok() {
                    full_at = Some(started);
                    dirty.clear();
                    members = false;
                }
                r
            } else {
                partial_read(&inner, &mut via, &mut dirty, &mut members).await
            }
        };
        match result {
            Ok(true) => inner.version.send_modify(|v| *v += 1),
            Ok(false) => {}
            Err(e) => {
                tracing::warn!(error = %e, "due index: read failed; reading every queue again");
                tracked = None;
                full_at = None;
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(RETRY_READ) => {}
                }
                continue;
            }
        }
        // Wait for a push, a touch, the next full read or the recheck.
        let until_full = full_at.map_or(Duration::ZERO, |t| max_age.saturating_sub(t.elapsed()));
        let pending = inner.state().wanted.is_empty();
        if !pending {
            continue;
        }
        let push = async {
            match tracked.as_mut() {
                Some(t) => t.pushes.recv().await,
                None => std::future::pending().await,
            }
        };
        let got = tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(until_full.min(RECHECK)) => Woke::Timer,
            _ = inner.wake.notified() => Woke::Touch,
            m = push => Woke::Push(m),
        };
        match got {
            Woke::Timer => {}
            Woke::Touch => tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(COALESCE) => {}
            },
            Woke::Push(msg) => {
                let mut heard = Heard::default();
                match msg {
                    Some(msg) => hear(msg, &mut dirty, &mut heard),
                    None => heard.lost = tracked.is_some(),
                }
                if heard.lost {
                    tracked = None;
                    full_at = None;
                } else if heard.all {
                    full_at = None;
                }
                members |= heard.members;
                // Gather what else comes in the meantime.
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(COALESCE) => {}
                }
            }
        }
    }
    tracing::debug!("due index done");
}
