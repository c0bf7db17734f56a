//! Handles shared by every request, and the queue-statistics cache.
//!
//! Queue statistics (two scripts per queue) are computed at most once per
//! poll interval and shared by all viewers: ten open tabs cost Redis what one
//! does. Snapshots belong to wall-clock slots of one interval (slot =
//! unix time / interval), not to the moment a viewer asked, so one viewer
//! and ten viewers polling at that interval both cause exactly one
//! computation per slot. A request that finds the snapshot stale recomputes
//! it while holding the cache lock, so concurrent requests wait for that one
//! computation instead of starting their own.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::WebConfig;
use crate::Inspector;
use crate::inspector::QueueInfo;

/// State every handler gets: cheap to clone.
#[derive(Clone, Debug)]
pub struct AppState {
    /// The inspector all pages and API routes read and act through.
    pub inspector: Inspector,
    /// Dashboard settings.
    pub config: Arc<WebConfig>,
    /// Token every HTML mutation must carry (`X-CSRF-Token` header); random
    /// per process.
    pub csrf_token: Arc<str>,
    /// The shared queue-statistics snapshot.
    pub stats: Arc<StatsCache>,
}

impl AppState {
    /// State for `inspector` with `config` and a fresh CSRF token.
    pub fn new(inspector: Inspector, config: WebConfig) -> Self {
        let token = format!("{:032x}", rand::random::<u128>());
        let interval = config.poll_interval;
        AppState {
            inspector,
            config: Arc::new(config),
            csrf_token: token.into(),
            stats: Arc::new(StatsCache::new(interval)),
        }
    }
}

/// One queue's row in a snapshot: its statistics, or why they could not be read.
#[derive(Clone, Debug)]
pub struct QueueRow {
    /// Queue name.
    pub name: String,
    /// Statistics, or the error text (the row then shows "n/a").
    pub info: Result<QueueInfo, String>,
    /// Retry growth from the outage sampler's series (`None` until two
    /// samples exist, or when the series cannot be read).
    pub growth: Option<crate::inspector::RetryGrowth>,
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

/// The once-per-interval cache of [`Snapshot`].
#[derive(Debug)]
pub struct StatsCache {
    interval: Duration,
    /// The snapshot with the wall-clock slot it belongs to.
    slot: tokio::sync::Mutex<Option<(u128, Arc<Snapshot>)>>,
    /// How many snapshots were computed (each costs Redis two scripts per queue).
    computed: std::sync::atomic::AtomicU64,
}

impl StatsCache {
    /// A cache whose snapshots live `interval`.
    pub fn new(interval: Duration) -> Self {
        StatsCache {
            interval,
            slot: tokio::sync::Mutex::new(None),
            computed: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The wall-clock slot `now` falls in.
    fn current_slot(&self) -> u128 {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        now.as_millis() / self.interval.as_millis().max(1)
    }

    /// The snapshot of the current slot, computed by the first request in
    /// it. Never fails: errors are inside the snapshot.
    pub async fn get(&self, inspector: &Inspector) -> Arc<Snapshot> {
        let mut slot = self.slot.lock().await;
        let current = self.current_slot();
        if let Some((at, snap)) = slot.as_ref()
            && *at == current
        {
            return snap.clone();
        }
        let snap = Arc::new(Self::compute(inspector).await);
        self.computed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A failed read is not cached, so the page recovers with Redis.
        if snap.error.is_none() {
            *slot = Some((current, snap.clone()));
        }
        snap
    }

    /// How many snapshots this cache has computed since it was made.
    pub fn computations(&self) -> u64 {
        self.computed.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops the cached snapshot (after an action changed the numbers).
    pub async fn invalidate(&self) {
        *self.slot.lock().await = None;
    }

    async fn compute(inspector: &Inspector) -> Snapshot {
        let taken_at = Utc::now();
        let names = match inspector.queues().await {
            Ok(n) => n,
            Err(e) => {
                return Snapshot {
                    taken_at,
                    queues: Vec::new(),
                    error: Some(e.to_string()),
                };
            }
        };
        let infos =
            futures_util::future::join_all(names.iter().map(|q| inspector.queue_info(q))).await;
        let samples =
            futures_util::future::join_all(names.iter().map(|q| inspector.queue_samples(q))).await;
        let queues = names
            .into_iter()
            .zip(infos.into_iter().zip(samples))
            .map(|(name, (info, samples))| QueueRow {
                name,
                info: info.map_err(|e| e.to_string()),
                growth: samples
                    .ok()
                    .and_then(|s| crate::inspector::retry_growth(&s, taken_at)),
            })
            .collect();
        Snapshot {
            taken_at,
            queues,
            error: None,
        }
    }
}
