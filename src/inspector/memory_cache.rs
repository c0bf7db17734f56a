//! The per-queue cache of the memory estimate (issue 15 target 5,
//! COMPATIBILITY.md L11): [`Inspector::queue_info`] and
//! [`Inspector::queue_memory_estimate`] run the sampled `MEMORY USAGE`
//! estimate of a queue at most once per [`MEMORY_CACHE_TTL`] per inspector
//! (and its clones), not on every view. Go `Inspector.GetQueueInfo`
//! estimates on every call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::Inspector;
use crate::error::Result;

/// How long a queue's memory estimate is reused: 5 minutes, the
/// dashboard's overview cadence (`web::MEMORY_REFRESH`).
pub const MEMORY_CACHE_TTL: Duration = Duration::from_secs(300);

/// Most queues the cache holds; past it, expired entries are dropped, and
/// if none were, the whole cache (so it stays bounded with any number of
/// queues).
const MEMORY_CACHE_MAX: usize = 50_000;

/// A queue's memory estimate and when it was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CachedMemory {
    /// Estimated bytes (see [`Inspector::queue_memory_usage`]).
    pub bytes: i64,
    /// When the estimate ran (UTC, the inspector's clock).
    pub taken_at: DateTime<Utc>,
}

impl CachedMemory {
    /// The estimate's age at `now` (0 when `now` is earlier).
    pub fn age(&self, now: DateTime<Utc>) -> Duration {
        (now - self.taken_at).to_std().unwrap_or(Duration::ZERO)
    }
}

/// Shared by an inspector and its clones.
#[derive(Clone, Debug, Default)]
pub(super) struct MemoryCache(Arc<Mutex<HashMap<String, CachedMemory>>>);

impl MemoryCache {
    fn fresh(&self, queue: &str, now: DateTime<Utc>) -> Option<CachedMemory> {
        let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        map.get(queue)
            .copied()
            .filter(|c| c.age(now) < MEMORY_CACHE_TTL && c.taken_at <= now)
    }

    fn put(&self, queue: &str, entry: CachedMemory) {
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MEMORY_CACHE_MAX && !map.contains_key(queue) {
            map.retain(|_, c| c.age(entry.taken_at) < MEMORY_CACHE_TTL);
            if map.len() >= MEMORY_CACHE_MAX {
                map.clear();
            }
        }
        map.insert(queue.to_string(), entry);
    }
}

impl Inspector {
    /// The queue's memory estimate ([`Inspector::queue_memory_usage`]),
    /// reused for [`MEMORY_CACHE_TTL`] after it ran: a view within that time
    /// sends no `MEMORY USAGE`. The age to show is
    /// [`CachedMemory::age`] at [`Inspector::now`].
    ///
    /// Errors: those of [`Inspector::queue_memory_usage`] (not cached).
    pub async fn queue_memory_estimate(&self, queue: &str) -> Result<CachedMemory> {
        let now = self.now();
        if let Some(hit) = self.memory_cache.fresh(queue, now) {
            return Ok(hit);
        }
        let bytes = self.queue_memory_usage(queue).await?;
        let entry = CachedMemory {
            bytes,
            taken_at: now,
        };
        self.memory_cache.put(queue, entry);
        Ok(entry)
    }

    /// [`Inspector::queue_memory_estimate`] for a queue whose existence was
    /// just checked (no second check).
    pub(super) async fn cached_memory_of_existing(&self, queue: &str) -> Result<i64> {
        let now = self.now();
        if let Some(hit) = self.memory_cache.fresh(queue, now) {
            return Ok(hit.bytes);
        }
        let bytes = self.broker.queue_memory_usage(queue).await?;
        self.memory_cache.put(
            queue,
            CachedMemory {
                bytes,
                taken_at: now,
            },
        );
        Ok(bytes)
    }
}
