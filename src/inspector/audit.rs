//! The audit log (issue 17 item 5): who changed what, from the dashboard
//! or `/api`. Entries live in a capped Redis stream
//! (`asynqdeck:{audit}:log`, 10,000 entries; `broker/audit.rs`) and are
//! read newest first, in bounded chunks, with optional filters.

use chrono::{DateTime, Utc};
use serde::Serialize;

use super::Inspector;
use crate::broker::StoredAuditEntry;
use crate::broker::keys::AUDIT_LOG_MAX;
use crate::error::Result;

/// Entries read per Redis call while filtering.
const READ_CHUNK: usize = 200;

/// Most entries one [`Inspector::audit_log`] call returns.
pub const AUDIT_PAGE_MAX: usize = 500;

/// One audited action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// Stream id (`<unix ms>-<seq>`); empty before it is stored.
    pub id: String,
    /// When it was recorded (UTC, ms; from the stream id).
    pub at: DateTime<Utc>,
    /// Who: the basic-auth user, the trusted proxy's header value, or
    /// `anonymous`.
    pub actor: String,
    /// What: `pause`, `resume`, `delete`, `run`, `archive`, `run_all`,
    /// `batch_delete`, `cancel`, `enqueue`, …
    pub verb: String,
    /// The queue acted on; empty when none (jobs, schedulers).
    pub queue: String,
    /// On what within the queue: a tab (`archived`), a task
    /// (`tasks/<id>`), a selection (`archived/batch`), matches
    /// (`retry/matching`), a job (`jobs/<id>`), …
    pub scope: String,
    /// How many tasks it concerned, when known.
    pub count: Option<u64>,
    /// `ok`, or `error: <text>`.
    pub result: String,
    /// The HTTP status answered.
    pub status: u16,
}

impl AuditEntry {
    fn fields(&self) -> Vec<(&'static str, String)> {
        let mut f = vec![
            ("actor", self.actor.clone()),
            ("verb", self.verb.clone()),
            ("queue", self.queue.clone()),
            ("scope", self.scope.clone()),
            ("result", self.result.clone()),
            ("status", self.status.to_string()),
        ];
        if let Some(n) = self.count {
            f.push(("count", n.to_string()));
        }
        f
    }

    fn from_stored((id, mut fields): StoredAuditEntry) -> AuditEntry {
        let ms = id
            .split('-')
            .next()
            .and_then(|ms| ms.parse::<i64>().ok())
            .unwrap_or(0);
        let mut take = |k: &str| fields.remove(k).unwrap_or_default();
        AuditEntry {
            at: DateTime::from_timestamp_millis(ms).unwrap_or_default(),
            actor: take("actor"),
            verb: take("verb"),
            queue: take("queue"),
            scope: take("scope"),
            count: take("count").parse().ok(),
            result: take("result"),
            status: take("status").parse().unwrap_or(0),
            id,
        }
    }
}

/// Which entries [`Inspector::audit_log`] returns: each set field must be
/// equal (actor, verb, queue). Empty strings are taken as unset.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuditFilter {
    /// Only this actor's entries.
    pub actor: Option<String>,
    /// Only this verb.
    pub verb: Option<String>,
    /// Only this queue.
    pub queue: Option<String>,
}

impl AuditFilter {
    fn matches(&self, e: &AuditEntry) -> bool {
        let ok = |want: &Option<String>, have: &str| {
            want.as_deref().is_none_or(|w| w.is_empty() || w == have)
        };
        ok(&self.actor, &e.actor) && ok(&self.verb, &e.verb) && ok(&self.queue, &e.queue)
    }
}

/// One page of the audit log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditPage {
    /// Matching entries, newest first.
    pub entries: Vec<AuditEntry>,
    /// Where the next (older) page starts (a stream id), `None` at the end.
    pub next: Option<String>,
    /// Entries read to find these (at most the whole log, 10,000).
    pub scanned: usize,
}

impl Inspector {
    /// Appends `entry` (its `id` and `at` are set by Redis) and returns the
    /// stored id. Errors: [`crate::Error::Redis`].
    pub async fn record_audit(&self, entry: &AuditEntry) -> Result<String> {
        self.broker.append_audit(&entry.fields()).await
    }

    /// Up to `limit` (at most [`AUDIT_PAGE_MAX`]) entries matching
    /// `filter`, newest first, starting at stream id `from` (inclusive;
    /// `None`: the newest). Reads the stream backwards 200 entries per call
    /// until the page is full or the log ends (at most 10,000 entries).
    /// Errors: [`crate::Error::Redis`].
    pub async fn audit_log(
        &self,
        filter: &AuditFilter,
        from: Option<&str>,
        limit: usize,
    ) -> Result<AuditPage> {
        let limit = limit.clamp(1, AUDIT_PAGE_MAX);
        let mut entries = Vec::new();
        let mut cursor = from.map(str::to_string);
        let mut scanned = 0;
        loop {
            // One more than needed: the last one read starts the next call.
            let chunk = self
                .broker
                .read_audit(cursor.as_deref(), READ_CHUNK + 1)
                .await?;
            let more = chunk.len() > READ_CHUNK;
            let mut it = chunk.into_iter();
            for stored in it.by_ref().take(READ_CHUNK) {
                scanned += 1;
                let e = AuditEntry::from_stored(stored);
                if filter.matches(&e) {
                    entries.push(e);
                    if entries.len() == limit {
                        // The next page starts at the entry after this one.
                        return Ok(AuditPage {
                            next: it.next().map(|(id, _)| id),
                            entries,
                            scanned,
                        });
                    }
                }
            }
            cursor = it.next().map(|(id, _)| id);
            if !more || cursor.is_none() || scanned >= AUDIT_LOG_MAX {
                return Ok(AuditPage {
                    next: cursor.filter(|_| more && scanned < AUDIT_LOG_MAX),
                    entries,
                    scanned,
                });
            }
        }
    }
}
