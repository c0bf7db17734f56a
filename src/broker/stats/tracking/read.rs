//! The tracked statistics read ([`Broker::queues_stats_tracked`]): drain
//! what Redis pushed, re-read only the queues with a changed key (a barrier
//! for the others), cache what may be cached, and assemble the entries in
//! the order asked (the parent module's docs say why this is as fresh as a
//! full read).

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use chrono::{DateTime, NaiveDate, Utc};

use super::super::{QUEUES_PER_STATS_CALL, QueueStatsEntry, QueuesStats, Sample, StatsRequest};
use super::{
    MAX_CACHE_AGE, RETRY_CONNECT, RETRY_TRACKING, ROUNDS, StatsTracking, Tracked, lost,
    queues_of_key,
};
use crate::broker::{Broker, keys};
use crate::error::{Error, Result};

impl Broker {
    /// [`Broker::queues_stats`] through Redis key tracking (module docs):
    /// the same entries, fresh as of the call, but a queue whose keys did
    /// not change since `tracking` last read them costs Redis nothing, and
    /// `asynq:queues` is read only when it changed. `tracking` is the state
    /// kept between calls (empty at first). Falls back to
    /// [`Broker::queues_stats`] when Redis refuses tracking, and once after
    /// the tracked connection failed (`tracking` then starts empty).
    ///
    /// Errors as [`Broker::queues_stats`].
    pub(crate) async fn queues_stats_tracked(
        &self,
        tracking: &mut StatsTracking,
        queues: &[String],
        req: &StatsRequest<'_>,
    ) -> Result<QueuesStats> {
        // A cluster: no tracking (its keys live on many nodes; Redis tracks
        // per connection), every view reads per queue (COMPATIBILITY.md#k4).
        if self.conn.is_cluster() {
            return self.queues_stats(queues, req).await;
        }
        if tracking
            .conn
            .as_ref()
            .is_some_and(|t| t.generation != self.target.generation())
        {
            // Behind Sentinel the master changed: the tracked connection
            // is on the former one (stale reads, no invalidations).
            tracking.reset();
        }
        if tracking.conn.is_none() && tracking.refused_until.is_none_or(|t| Instant::now() >= t) {
            // HELLO 3, CLIENT SETINFO (twice) and CLIENT TRACKING ON.
            match super::super::metered(req.budget, 4, Tracked::open(self)).await {
                Ok(Some(t)) => {
                    tracking.conn = Some(t);
                    tracking.refused_until = None;
                }
                Ok(None) => {
                    tracing::info!(
                        "Redis refused key tracking: dashboard statistics read uncached"
                    );
                    tracking.refused_until = Some(Instant::now() + RETRY_TRACKING);
                }
                Err(e) => {
                    // Redis down or unreachable: the uncached read below
                    // says so; do not add a connection timeout to every view.
                    tracing::debug!(error = %e, "tracked statistics connection");
                    tracking.refused_until = Some(Instant::now() + RETRY_CONNECT);
                }
            }
        }
        if tracking.conn.is_some() {
            match self.tracked_stats(tracking, queues, req).await {
                Ok(out) => return Ok(out),
                Err(e) => {
                    tracing::debug!(error = %e, "tracked statistics read failed; reading uncached");
                    tracking.reset();
                }
            }
        }
        self.queues_stats(queues, req).await
    }

    /// The tracked read, chunk by chunk ([`QUEUES_PER_STATS_CALL`] queues,
    /// each chunk's numbers of one moment as without tracking).
    async fn tracked_stats(
        &self,
        tracking: &mut StatsTracking,
        queues: &[String],
        req: &StatsRequest<'_>,
    ) -> Result<QueuesStats> {
        let StatsRequest {
            since,
            windows,
            with_samples,
            budget,
            ..
        } = *req;
        let now = self.now();
        let today = now.date_naive();
        let mut out = QueuesStats {
            entries: Vec::with_capacity(queues.len()),
            members: Vec::new(),
            transactions: 0,
        };
        if tracking
            .full_read_at
            .is_none_or(|t| (now - t).to_std().unwrap_or_default() >= MAX_CACHE_AGE)
        {
            tracking.rows.clear();
            tracking.members = None;
            tracking.full_read_at = Some(now);
        }
        for (i, chunk) in queues.chunks(QUEUES_PER_STATS_CALL).enumerate() {
            let mut round = 0;
            let (members, entries) = loop {
                let conn = tracking.conn.as_mut().ok_or_else(lost)?;
                let heard = conn.drain();
                tracking.apply(heard, &HashSet::new())?;
                tracking.rows.retain(|_, (_, day)| *day == today);
                let whole = round + 1 == ROUNDS;
                let read: Vec<String> = chunk
                    .iter()
                    .filter(|q| whole || !tracking.rows.contains_key(*q))
                    .cloned()
                    .collect();
                let conn = tracking.conn.as_mut().ok_or_else(lost)?;
                let mut fresh_members = None;
                let mut fresh = Vec::new();
                if !read.is_empty() {
                    // The whole list only when it is not cached (each
                    // chunk's own queues are checked in any case).
                    let list = tracking.members.is_none();
                    let r = self
                        .queues_stats_on(&mut conn.conn, Some(&tracking.next_ids), &read, req, list)
                        .await?;
                    out.transactions += r.transactions;
                    fresh_members = list.then_some(r.members);
                    fresh = r.entries;
                } else if tracking.members.is_none() {
                    let mut m: Vec<String> = super::super::metered(
                        budget,
                        1,
                        redis::cmd("SMEMBERS")
                            .arg(keys::ALL_QUEUES)
                            .query_async(&mut conn.conn),
                    )
                    .await?;
                    m.sort();
                    out.transactions += 1;
                    fresh_members = Some(m);
                } else {
                    // The barrier: every change before it is heard of by its reply.
                    let _: () = super::super::metered(
                        budget,
                        1,
                        redis::cmd("PING").query_async(&mut conn.conn),
                    )
                    .await?;
                    out.transactions += 1;
                }
                let heard = conn.drain();
                let read_now: HashSet<&str> = read.iter().map(String::as_str).collect();
                // A push drained now may also come from a change made
                // after the read (the driver can receive it before we run):
                // what was read and invalidated is used once, not cached.
                let mut doubtful: HashSet<String> = HashSet::new();
                let mut members_doubtful = heard.all;
                for k in &heard.keys {
                    if k.as_slice() == keys::ALL_QUEUES.as_bytes() {
                        members_doubtful = true;
                    }
                    for q in queues_of_key(k, &read_now) {
                        doubtful.insert(q.to_string());
                    }
                }
                if heard.all {
                    doubtful.extend(read.iter().cloned());
                }
                let mut stale = tracking.apply(heard, &read_now)?;
                let mut members_used = None;
                match fresh_members {
                    Some(m) => {
                        if members_doubtful {
                            members_used = Some(m);
                            tracking.members = None;
                        } else {
                            tracking.members = Some(m);
                        }
                    }
                    None => stale |= tracking.members.is_none(),
                }
                let fresh = self.keep(tracking, fresh, today, &doubtful);
                if !stale || whole {
                    let members = members_used
                        .or_else(|| tracking.members.clone())
                        .unwrap_or_default();
                    let mut samples = HashMap::new();
                    if with_samples {
                        // The cached queues' samples (the series is not
                        // tracked: the sampler adds to it every interval).
                        let unread: Vec<String> = chunk
                            .iter()
                            .filter(|q| !fresh.contains_key(*q))
                            .cloned()
                            .collect();
                        if !unread.is_empty() {
                            let conn = tracking.conn.as_mut().ok_or_else(lost)?;
                            samples = self
                                .queues_samples(&mut conn.conn, &unread, since, windows, budget)
                                .await?
                                .into_iter()
                                .collect();
                            out.transactions += 1;
                        }
                    }
                    let entries = self.assemble(tracking, chunk, fresh, samples, &members, now)?;
                    break (members, entries);
                }
                round += 1;
            };
            if i == 0 {
                out.members = members;
            }
            out.entries.extend(entries);
        }
        let asked: HashSet<&str> = queues.iter().map(String::as_str).collect();
        tracking.rows.retain(|q, _| asked.contains(q.as_str()));
        tracking.next_ids.retain(|q, _| asked.contains(q.as_str()));
        Ok(out)
    }

    /// Caches the fresh entries that may be (module docs), records the next
    /// pending ids, and returns the entries by queue.
    fn keep(
        &self,
        tracking: &mut StatsTracking,
        fresh: Vec<QueueStatsEntry>,
        today: NaiveDate,
        doubtful: &HashSet<String>,
    ) -> HashMap<String, QueueStatsEntry> {
        let mut by_queue = HashMap::with_capacity(fresh.len());
        for e in fresh {
            let declared = tracking.next_ids.get(&e.queue);
            let cacheable = match &e.stats {
                Ok(s) => {
                    !doubtful.contains(&e.queue)
                        && s.groups == 0
                        && (s.pending == 0 || declared == e.next_id.as_ref())
                }
                Err(_) => false,
            };
            if cacheable && let Ok(s) = &e.stats {
                tracking.rows.insert(e.queue.clone(), (s.clone(), today));
            } else {
                tracking.rows.remove(&e.queue);
            }
            match &e.next_id {
                Some(id) => {
                    tracking.next_ids.insert(e.queue.clone(), id.clone());
                }
                None => {
                    tracking.next_ids.remove(&e.queue);
                }
            }
            by_queue.insert(e.queue.clone(), e);
        }
        by_queue
    }

    /// The entries of `chunk` in order: fresh ones as read, the others from
    /// the cache as of `now` with their `samples` when read (a queue not in
    /// `members` is gone: [`Error::QueueNotFound`]).
    fn assemble(
        &self,
        tracking: &StatsTracking,
        chunk: &[String],
        mut fresh: HashMap<String, QueueStatsEntry>,
        mut samples: HashMap<String, Result<Vec<Sample>>>,
        members: &[String],
        now: DateTime<Utc>,
    ) -> Result<Vec<QueueStatsEntry>> {
        chunk
            .iter()
            .map(|q| {
                if let Some(e) = fresh.remove(q) {
                    return Ok(e);
                }
                let mut samples = samples.remove(q);
                let stats = if members.binary_search(q).is_err() {
                    samples = samples.map(|_| Ok(Vec::new()));
                    Err(Error::QueueNotFound { queue: q.clone() })
                } else {
                    let (s, _) = tracking
                        .rows
                        .get(q)
                        .ok_or_else(|| Error::Internal(format!("no numbers for queue {q}")))?;
                    Ok(s.at(now))
                };
                Ok(QueueStatsEntry {
                    queue: q.clone(),
                    stats,
                    samples,
                    next_id: tracking.next_ids.get(q).cloned(),
                })
            })
            .collect()
    }
}
