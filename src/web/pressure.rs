//! The dashboard's retry-pressure cache ([`PressureCache`]): retries due in
//! the next 1, 5 and 60 minutes per queue
//! ([`Inspector::retry_pressures`]), for the overview's page of rows and
//! the retry tab's outage fragment.
//!
//! - **Read only for what is shown:** the rows of the page a viewer sees
//!   (at most 150 queues), in one pipelined call per view, never every
//!   queue.
//! - **Short cache, no key tracking:** the figures move with time even when
//!   no key changes, so a queue's figures are reused for one poll interval
//!   (the view's refresh) and read again after it.
//! - **Within the Redis budget:** each read is metered by the statistics'
//!   [`RedisBudget`] (three commands per queue), on credit so a view never
//!   waits for tokens (its debt defers what follows). While the budget is spent
//!   nothing is read: a cell shows its last figures marked stale, or `…`
//!   when there are none, and the deferral is counted on the Redis page.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::broker::{RETRY_PRESSURE_COMMANDS, RedisBudget, RetryPressure};
use crate::inspector::Inspector;

/// Longest a view waits for the figures (Redis down or slow): the page
/// then shows "n/a" in the cells rather than waiting longer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Figures older than this many poll intervals are dropped from the cache
/// (a queue no longer viewed).
const KEEP_INTERVALS: u32 = 12;

/// A queue's retry pressure as a view shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PressureCell {
    /// Read within the last poll interval.
    Fresh(RetryPressure),
    /// Over budget: the last figures, read `age` ago.
    Stale {
        /// The figures last read.
        pressure: RetryPressure,
        /// How long ago they were read.
        age: Duration,
    },
    /// Over budget and never read: nothing to show.
    Unknown,
    /// The read failed (the error's text).
    Failed(String),
}

impl PressureCell {
    /// The cell's text: `3 · 40 · 200` (due in 1 / 5 / 60 min), `…` when
    /// unknown, `n/a` when the read failed.
    pub fn text(&self) -> String {
        match self {
            PressureCell::Fresh(p) | PressureCell::Stale { pressure: p, .. } => {
                format!("{} · {} · {}", p.next_1m, p.next_5m, p.next_60m)
            }
            PressureCell::Unknown => "…".to_string(),
            PressureCell::Failed(_) => "n/a".to_string(),
        }
    }

    /// The cell's tooltip: what the figures mean, and their age when stale.
    pub fn title(&self) -> String {
        const MEANING: &str = "Retries due in the next 1 / 5 / 60 min";
        match self {
            PressureCell::Fresh(_) => MEANING.to_string(),
            PressureCell::Stale { age, .. } => {
                format!("{MEANING} ({} s old — Redis budget)", age.as_secs())
            }
            PressureCell::Unknown => format!("{MEANING}: not read yet — Redis budget"),
            PressureCell::Failed(e) => format!("{MEANING}: cannot read: {e}"),
        }
    }

    /// Whether the figures are not fresh (stale or unknown).
    pub fn stale(&self) -> bool {
        matches!(self, PressureCell::Stale { .. } | PressureCell::Unknown)
    }
}

/// Retry pressure per queue, read for the queues a view shows, reused for
/// one poll interval, metered by the dashboard's Redis budget (module
/// docs). Shared by every viewer through [`AppState`](super::AppState).
#[derive(Debug)]
pub struct PressureCache {
    /// How long figures are reused: the poll interval (zero: read on every
    /// view).
    ttl: Duration,
    budget: Arc<RedisBudget>,
    read: Mutex<HashMap<String, (Instant, RetryPressure)>>,
}

impl PressureCache {
    /// A cache reusing figures for `ttl` and metering its reads by `budget`.
    pub fn new(ttl: Duration, budget: Arc<RedisBudget>) -> Self {
        PressureCache {
            ttl,
            budget,
            read: Mutex::new(HashMap::new()),
        }
    }

    /// The cells of `queues`, in order: figures read within the poll
    /// interval are reused; the others are read in one call, unless the
    /// budget is spent (then stale or unknown cells, and one deferral
    /// counted). A failed read, or one without a reply within
    /// [`READ_TIMEOUT`], gives failed cells.
    pub async fn get(&self, inspector: &Inspector, queues: &[String]) -> Vec<PressureCell> {
        let now = Instant::now();
        let due: Vec<String> = {
            let read = self.lock();
            queues
                .iter()
                .filter(|q| {
                    read.get(*q).is_none_or(|(at, _)| {
                        self.ttl.is_zero() || now.duration_since(*at) >= self.ttl
                    })
                })
                .cloned()
                .collect()
        };
        let mut failed: HashMap<String, String> = HashMap::new();
        let mut over = false;
        if !due.is_empty() {
            if self.budget.over() {
                over = true;
                self.budget.note_deferred();
            } else {
                let commands = RETRY_PRESSURE_COMMANDS * due.len() as u64;
                // Not over budget: read on credit (no wait for tokens; a debt
                // defers the next reads, here and in the statistics).
                let read = self.budget.on_credit(
                    self.budget
                        .metered(commands, inspector.retry_pressures(&due)),
                );
                let read = match tokio::time::timeout(READ_TIMEOUT, read).await {
                    Ok(r) => r,
                    Err(_) => Err(crate::Error::Internal(format!(
                        "no reply within {} s",
                        READ_TIMEOUT.as_secs()
                    ))),
                };
                match read {
                    Ok(all) => {
                        let at = Instant::now();
                        let mut read = self.lock();
                        for (q, r) in due.iter().zip(all) {
                            match r {
                                Ok(p) => {
                                    read.insert(q.clone(), (at, p));
                                }
                                Err(e) => {
                                    read.remove(q);
                                    failed.insert(q.clone(), e.to_string());
                                }
                            }
                        }
                        let keep = self.ttl.max(Duration::from_secs(1)) * KEEP_INTERVALS;
                        read.retain(|_, (t, _)| at.duration_since(*t) < keep);
                    }
                    Err(e) => {
                        for q in &due {
                            failed.insert(q.clone(), e.to_string());
                        }
                    }
                }
            }
        }
        let read = self.lock();
        let now = Instant::now();
        queues
            .iter()
            .map(|q| {
                if let Some(e) = failed.get(q) {
                    return PressureCell::Failed(e.clone());
                }
                match read.get(q) {
                    Some((at, p)) if over && due.contains(q) => PressureCell::Stale {
                        pressure: *p,
                        age: now.duration_since(*at),
                    },
                    Some((_, p)) => PressureCell::Fresh(*p),
                    None => PressureCell::Unknown,
                }
            })
            .collect()
    }

    /// Forgets every figure (the next view reads them again); after an
    /// action that moved retries.
    pub fn invalidate(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, RetryPressure)>> {
        self.read.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_texts() {
        let p = RetryPressure {
            next_1m: 3,
            next_5m: 40,
            next_60m: 200,
        };
        assert_eq!(PressureCell::Fresh(p).text(), "3 · 40 · 200");
        assert_eq!(
            PressureCell::Fresh(p).title(),
            "Retries due in the next 1 / 5 / 60 min"
        );
        let stale = PressureCell::Stale {
            pressure: p,
            age: Duration::from_secs(12),
        };
        assert_eq!(stale.text(), "3 · 40 · 200");
        assert!(stale.title().ends_with("(12 s old — Redis budget)"));
        assert_eq!(PressureCell::Unknown.text(), "…");
        assert_eq!(PressureCell::Failed("x".into()).text(), "n/a");
    }
}
