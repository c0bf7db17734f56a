//! Statistics of many queues at once, for a dashboard: one row per queue
//! ([`QueueStatsRow`]) from one Redis transaction per 100 queues, the
//! [`StatsHints`] a caller keeps between calls so the next one costs Redis
//! less, and the memory estimates of many queues. asynqdeck only (Go reads
//! queue by queue).

use std::collections::HashMap;
use std::sync::Arc;

use super::Inspector;
use crate::broker::{KeyKinds, QueueInfo, RedisBudget, StatsRequest, StatsTracking};
use crate::error::{Error, Result};

/// One queue's row of [`Inspector::queues_stats`].
#[derive(Debug)]
pub struct QueueStatsRow {
    /// Queue name.
    pub queue: String,
    /// Its statistics as [`Inspector::queue_info`] returns them but with
    /// `memory_usage` 0 (not estimated here), or why they could not be read.
    pub info: Result<QueueInfo>,
    /// The samples of its outage series that [`retry_growth`](super::retry_growth)
    /// looks at, oldest first (at most 5; empty without a series or when
    /// `info` failed), or why the series could not be read; `None` when not
    /// asked for.
    pub samples: Option<Result<Vec<super::QueueSample>>>,
}

/// What [`Inspector::queues_stats_with`] carries from one call to the next
/// to do less Redis work: which of each queue's keys besides `pending` held
/// something (those it reads again; the others it only proves absent), and
/// the queue list as last read (the queues to read next, when the caller
/// has no fresher list). Hints never change the numbers: a wrong guess
/// costs a second transaction. Empty at first.
///
/// Hints made by [`StatsHints::tracked`] also keep a Redis connection with
/// key tracking on (Redis ≥ 6, client-side caching): a queue none of whose
/// keys changed since the last call is not read again (`src/broker/stats/tracking.rs`).
#[derive(Debug, Default)]
pub struct StatsHints {
    present: HashMap<String, KeyKinds>,
    members: Option<Vec<String>>,
    transactions: usize,
    tracking: Option<Box<StatsTracking>>,
    budget: Option<Arc<RedisBudget>>,
}

impl StatsHints {
    /// Empty hints that also track keys: each call reads only the queues
    /// whose keys changed since the previous one (any change, by any
    /// client, before the call's last reply is heard of, so the numbers are
    /// as fresh as a full read), and the others cost Redis one `PING` per
    /// 100 queues. Holds one more Redis connection (RESP3, `CLIENT TRACKING
    /// ON`) from the first call on. Where Redis refuses that (Redis < 6, an
    /// ACL without `client`, a proxy without RESP3), calls read everything
    /// as with [`StatsHints::default`], trying again every 10 minutes.
    pub fn tracked() -> StatsHints {
        StatsHints {
            tracking: Some(Box::default()),
            ..StatsHints::default()
        }
    }

    /// These hints with every Redis command of the reads made with them
    /// metered by `budget` (waiting for its tokens, charging its round
    /// trips: [`RedisBudget`]).
    pub fn with_budget(mut self, budget: Arc<RedisBudget>) -> StatsHints {
        self.budget = Some(budget);
        self
    }

    /// The budget the reads are metered by, if any.
    pub fn budget(&self) -> Option<&Arc<RedisBudget>> {
        self.budget.as_ref()
    }

    /// Forgets what was learned, keeping the kind of hints (tracked or not)
    /// and the budget.
    pub fn reset(&mut self) {
        let budget = self.budget.take();
        *self = if self.tracking.is_some() {
            StatsHints::tracked()
        } else {
            StatsHints::default()
        };
        self.budget = budget;
    }

    /// How many Redis transactions the last call took: one per 100 queues
    /// when the hints were right.
    pub fn last_transactions(&self) -> usize {
        self.transactions
    }

    /// `asynq:queues` as the last call read it (sorted), `None` before the
    /// first call.
    pub fn members(&self) -> Option<&[String]> {
        self.members.as_deref()
    }
}

impl Inspector {
    /// Statistics of several queues at once, for a dashboard: for each queue
    /// what [`Inspector::queue_info`] returns, except `memory_usage`, which
    /// is 0 here (see [`Inspector::queues_memory_usage`]), and with
    /// `with_samples` the samples of its outage series that
    /// [`retry_growth`](super::retry_growth) needs. One Redis transaction
    /// per 100 queues instead of three calls per queue; one row per queue,
    /// in the order given. asynqdeck only (Go reads queue by queue).
    ///
    /// A queue that cannot be read does not fail the others: its row holds
    /// the error ([`Error::InvalidQueueName`], [`Error::InvalidArgument`]
    /// for a name a Redis Cluster cannot hold, read by no script
    /// ([`Broker::check_queue_name`](crate::broker::Broker::check_queue_name)),
    /// [`Error::QueueNotFound`] when
    /// it was deleted since listed, [`Error::Corrupt`], [`Error::Redis`] for
    /// a key of the wrong type, with Redis's text). The samples are those
    /// of the last hour ([`SAMPLE_WINDOW`](crate::broker::SAMPLE_WINDOW))
    /// that the growth figures look at: the newest, the oldest, and the
    /// newest at least 5 min, 15 min and 1 h older than the newest
    /// ([`GROWTH_WINDOWS`](super::GROWTH_WINDOWS)) when the series reaches
    /// back that far; `retry_growth` of them equals `retry_growth` of
    /// [`Inspector::queue_samples`] (as long as every sample parses).
    ///
    /// Errors of the whole call: [`Error::Redis`] (Redis unreachable),
    /// [`Error::Internal`].
    pub async fn queues_stats(
        &self,
        queues: &[String],
        with_samples: bool,
    ) -> Result<Vec<QueueStatsRow>> {
        self.read_queues_stats(queues, with_samples, &|_| KeyKinds::ALL, None, None)
            .await
            .map(|(rows, _, _)| rows)
    }

    /// [`Inspector::queues_stats`] for a caller that reads the same queues
    /// again and again (the dashboard): `hints` from the previous call let
    /// Redis skip the keys that held nothing then (proving them still
    /// absent is cheaper than reading them), and are updated for the next
    /// call, with the queue list this call read. The rows are exactly those
    /// of [`Inspector::queues_stats`] whatever the hints.
    pub async fn queues_stats_with(
        &self,
        queues: &[String],
        with_samples: bool,
        hints: &mut StatsHints,
    ) -> Result<Vec<QueueStatsRow>> {
        let present = &hints.present;
        let (rows, members, transactions) = self
            .read_queues_stats(
                queues,
                with_samples,
                &|q| present.get(q).copied().unwrap_or(KeyKinds::NONE),
                hints.tracking.as_deref_mut(),
                hints.budget.as_deref(),
            )
            .await?;
        hints.transactions = transactions;
        hints.present = rows
            .iter()
            .map(|r| {
                let kinds = match &r.info {
                    Ok(info) => KeyKinds::present_in_info(info),
                    // Read everything again, so the error shows again at
                    // the first try.
                    Err(_) => KeyKinds::ALL,
                };
                (r.queue.clone(), kinds)
            })
            .collect();
        hints.members = Some(members);
        Ok(rows)
    }

    /// The rows of [`Inspector::queues_stats`], reading for each valid queue
    /// the kinds of keys `expected` says (the others are proved absent or
    /// read after all), and `asynq:queues` as read (sorted); through key
    /// tracking when given its state, metered by `budget` when given.
    async fn read_queues_stats(
        &self,
        queues: &[String],
        with_samples: bool,
        expected: &(dyn Fn(&str) -> KeyKinds + Sync),
        tracking: Option<&mut StatsTracking>,
        budget: Option<&RedisBudget>,
    ) -> Result<(Vec<QueueStatsRow>, Vec<String>, usize)> {
        let valid: Vec<String> = queues
            .iter()
            .filter(|q| self.broker.check_queue_name(q).is_ok())
            .cloned()
            .collect();
        let window = chrono::Duration::from_std(crate::broker::SAMPLE_WINDOW)
            .unwrap_or(chrono::Duration::zero());
        let since = self.broker.now() - window;
        let req = StatsRequest {
            expected,
            since,
            windows: &super::GROWTH_WINDOWS,
            with_samples,
            budget,
        };
        let read = match tracking {
            Some(t) => self.broker.queues_stats_tracked(t, &valid, &req).await?,
            None => self.broker.queues_stats(&valid, &req).await?,
        };
        let (members, transactions) = (read.members, read.transactions);
        let mut read = read.entries.into_iter();
        let mut rows = Vec::with_capacity(queues.len());
        for queue in queues {
            if let Err(e) = self.broker.check_queue_name(queue) {
                rows.push(QueueStatsRow {
                    queue: queue.clone(),
                    info: Err(e),
                    samples: with_samples.then(|| Ok(Vec::new())),
                });
                continue;
            }
            let e = read.next().ok_or_else(|| {
                Error::Internal("queues_stats returned fewer rows than queues".into())
            })?;
            rows.push(QueueStatsRow {
                info: e.stats.map(|s| s.info(queue, 0)),
                samples: e.samples.map(|r| {
                    r.map(|v| {
                        v.into_iter()
                            .map(|(at, retry, archived)| super::QueueSample {
                                at,
                                retry,
                                archived,
                            })
                            .collect()
                    })
                }),
                queue: e.queue,
            });
        }
        Ok((rows, members, transactions))
    }

    /// The memory estimates of several queues at once (each what
    /// [`Inspector::queue_memory_usage`] returns, without the existence
    /// check: a queue that does not exist estimates 0), one Redis script
    /// call per 10 queues, so Redis is never busy with one call for long.
    /// One `(queue, estimate)` per queue, in the order given; a queue whose
    /// estimate fails ([`Error::InvalidQueueName`], [`Error::InvalidArgument`]
    /// as in [`Inspector::queues_stats`], [`Error::Redis`] for a
    /// key of the wrong type or a refused `MEMORY USAGE`) does not fail the
    /// others. asynqdeck only.
    ///
    /// Errors of the whole call: [`Error::Redis`] (Redis unreachable),
    /// [`Error::Internal`].
    pub async fn queues_memory_usage(
        &self,
        queues: &[String],
    ) -> Result<Vec<(String, Result<i64>)>> {
        let valid: Vec<String> = queues
            .iter()
            .filter(|q| self.broker.check_queue_name(q).is_ok())
            .cloned()
            .collect();
        let mut read = self.broker.queues_memory_usage(&valid).await?.into_iter();
        let mut out = Vec::with_capacity(queues.len());
        for queue in queues {
            if let Err(e) = self.broker.check_queue_name(queue) {
                out.push((queue.clone(), Err(e)));
                continue;
            }
            out.push(read.next().ok_or_else(|| {
                Error::Internal("queues_memory_usage returned fewer rows than queues".into())
            })?);
        }
        Ok(out)
    }

    /// [`Inspector::queues_memory_usage`] within `budget`: one script call
    /// per 10 queues (per queue on a Redis Cluster), each waiting until the
    /// budget is half full (background work: the refreshes come first) and
    /// charged its round trip. Same rows and errors.
    pub async fn queues_memory_usage_within(
        &self,
        queues: &[String],
        budget: &RedisBudget,
    ) -> Result<Vec<(String, Result<i64>)>> {
        let per_call = crate::broker::QUEUES_PER_MEMORY_CALL;
        let cluster = self.broker.conn().is_cluster();
        let mut out = Vec::with_capacity(queues.len());
        for slice in queues.chunks(per_call) {
            let commands = if cluster { slice.len() } else { 1 } as u64;
            out.extend(
                budget
                    .metered_background(commands, self.queues_memory_usage(slice))
                    .await?,
            );
        }
        Ok(out)
    }
}
