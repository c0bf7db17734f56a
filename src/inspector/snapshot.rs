//! The dashboard's statistics of every queue at one moment ([`Snapshot`]):
//! reading it ([`Inspector::stats_snapshot`]: the queue list and every
//! queue's numbers through [`Inspector::queues_stats_with`]), and putting
//! into it the growth figures and memory estimates read on their own
//! cadence ([`Snapshot::attach_growth`], [`Snapshot::attach_memory`];
//! [`Inspector::attach_memory_now`] reads and attaches them at once). The
//! web layer's cache (`src/web/state.rs`) decides when each is read.

use std::collections::HashMap;

use chrono::{DateTime, Utc};

use super::{Inspector, QueueInfo, QueueSample, RetryGrowth, StatsHints, retry_growth};

/// The growth samples of each queue, as [`Inspector::stats_snapshot`] read
/// them (queues whose series could not be read are absent).
pub type GrowthSamples = HashMap<String, Vec<QueueSample>>;

/// A queue's memory estimate as a dashboard last computed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Estimated bytes ([`Inspector::queue_memory_usage`]), or why the
    /// estimate failed (e.g. `MEMORY USAGE` refused by a managed Redis).
    pub bytes: Result<i64, String>,
    /// When it was computed (UTC, the inspector's clock).
    pub at: DateTime<Utc>,
}

/// One queue's row in a snapshot: its statistics, or why they could not be read.
#[derive(Clone, Debug)]
pub struct QueueRow {
    /// Queue name.
    pub name: String,
    /// Statistics, or the error text (the row then shows "n/a"). Their
    /// `memory_usage` is the last estimate's bytes ([`QueueRow::memory`]),
    /// 0 while there is none or it failed.
    pub info: Result<QueueInfo, String>,
    /// The queue's last memory estimate: `None` until the first one is
    /// computed in the background (shortly after the queue first appears).
    pub memory: Option<MemoryEstimate>,
    /// Retry growth from the outage sampler's series, as of the samples
    /// last read (the dashboard's cache reads them every 30 s,
    /// `web::GROWTH_REFRESH`; `None` until two samples exist, when the
    /// series cannot be read, or for a queue that appeared since).
    pub growth: Option<RetryGrowth>,
}

/// Statistics of every queue at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// When it was taken (UTC).
    pub taken_at: DateTime<Utc>,
    /// One row per queue, sorted by name.
    pub queues: Vec<QueueRow>,
    /// Set when the queue list itself could not be read (Redis down).
    pub error: Option<String>,
}

impl MemoryEstimate {
    /// The estimate computed `at`: its bytes, or the error's text.
    pub fn of(bytes: crate::Result<i64>, at: DateTime<Utc>) -> Self {
        MemoryEstimate {
            bytes: bytes.map_err(|e| e.to_string()),
            at,
        }
    }
}

impl Snapshot {
    /// Computes each row's growth figures from `samples` (the samples last
    /// read), as of the snapshot's time.
    pub fn attach_growth(&mut self, samples: &GrowthSamples) {
        for row in &mut self.queues {
            row.growth = samples
                .get(&row.name)
                .and_then(|s| retry_growth(s, self.taken_at));
        }
    }

    /// Puts each queue's known memory estimate (`memory(queue)`) into its
    /// row, and its bytes into the row's `memory_usage` (0 without an
    /// estimate or when it failed).
    pub fn attach_memory<'a>(&mut self, memory: impl Fn(&str) -> Option<&'a MemoryEstimate>) {
        for row in &mut self.queues {
            row.memory = memory(&row.name).cloned();
            if let Ok(info) = &mut row.info {
                info.memory_usage = match &row.memory {
                    Some(MemoryEstimate { bytes: Ok(b), .. }) => *b,
                    _ => 0,
                };
            }
        }
    }
}

impl Inspector {
    /// Reads the queue list and every queue's statistics (no memory
    /// estimate, no growth: rows hold `None` for both), and with
    /// `with_samples` every queue's growth samples (queues whose series
    /// could not be read left out). With the queue list of `hints` (the
    /// last call's), reads those queues and `asynq:queues` in one
    /// transaction, and reads again only when the list changed; without it,
    /// reads the list first. Never fails: an error reading the list or the
    /// numbers is the snapshot's `error` (the hints are then reset).
    pub async fn stats_snapshot(
        &self,
        with_samples: bool,
        hints: &mut StatsHints,
    ) -> (Snapshot, Option<GrowthSamples>) {
        let inspector = self;
        let taken_at = Utc::now();
        let failed = |e: crate::Error| {
            (
                Snapshot {
                    taken_at,
                    queues: Vec::new(),
                    error: Some(e.to_string()),
                },
                None,
            )
        };
        // An empty list is read again: with no queue to read, no transaction
        // would read `asynq:queues` and see the first queue appear.
        let names = match hints.members().filter(|m| !m.is_empty()) {
            Some(names) => names.to_vec(),
            None => match match hints.budget().cloned() {
                Some(b) => b.metered(1, inspector.queues()).await,
                None => inspector.queues().await,
            } {
                Ok(n) => n,
                Err(e) => return failed(e),
            },
        };
        let mut rows = match inspector
            .queues_stats_with(&names, with_samples, hints)
            .await
        {
            Ok(rows) => rows,
            Err(e) => {
                hints.reset();
                return failed(e);
            }
        };
        if let Some(members) = hints.members().filter(|m| *m != names.as_slice()) {
            // Queues came or went since the list was read: read the new list
            // (its rows are those of one transaction again).
            let names = members.to_vec();
            rows = match inspector
                .queues_stats_with(&names, with_samples, hints)
                .await
            {
                Ok(rows) => rows,
                Err(e) => {
                    hints.reset();
                    return failed(e);
                }
            };
        }
        let mut samples = with_samples.then(HashMap::new);
        let queues = rows
            .into_iter()
            .map(|row| {
                if let (Some(all), Some(Ok(s))) = (samples.as_mut(), row.samples) {
                    all.insert(row.queue.clone(), s);
                }
                QueueRow {
                    name: row.queue,
                    info: row.info.map_err(|e| e.to_string()),
                    memory: None,
                    growth: None,
                }
            })
            .collect();
        (
            Snapshot {
                taken_at,
                queues,
                error: None,
            },
            samples,
        )
    }

    /// Estimates the memory of every queue of `snap` now
    /// ([`Inspector::queues_memory_usage`]) and attaches the estimates,
    /// dated when the read began; when the read fails as a whole, every
    /// queue gets its error. Returns how many queues were estimated. For a
    /// dashboard without a cache (poll interval zero).
    pub async fn attach_memory_now(&self, snap: &mut Snapshot) -> u64 {
        let names: Vec<String> = snap.queues.iter().map(|r| r.name.clone()).collect();
        let at = self.now();
        let estimates = match self.queues_memory_usage(&names).await {
            Ok(estimates) => estimates,
            Err(e) => names
                .into_iter()
                .map(|q| (q, Err(crate::Error::Internal(e.to_string()))))
                .collect(),
        };
        let estimated = estimates.len() as u64;
        let memory: HashMap<String, MemoryEstimate> = estimates
            .into_iter()
            .map(|(queue, bytes)| (queue, MemoryEstimate::of(bytes, at)))
            .collect();
        snap.attach_memory(|q| memory.get(q));
        estimated
    }
}
