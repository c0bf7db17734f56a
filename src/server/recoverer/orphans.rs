//! Bookkeeping of the orphan scan (issue 12 R4): where each queue's scan of
//! `active` stands, and which ids it saw lacking a lease entry or a task
//! key, since when. An id is settled only once it was first seen at least
//! [`ORPHAN_GRACE`](super::ORPHAN_GRACE) ago, and the settling script checks
//! again that it still lacks them, so a task being leased right now (a
//! leaser that writes `active` and `lease` in two steps) is never touched.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, Utc};

/// Scan cursors and suspects, per queue.
#[derive(Debug, Default)]
pub(super) struct Orphans {
    /// Offset from the oldest end of `active` of the next chunk to read.
    cursors: HashMap<String, usize>,
    /// queue -> id -> when it was first seen lacking.
    suspects: HashMap<String, BTreeMap<String, DateTime<Utc>>>,
}

impl Orphans {
    /// Where the scan of `queue` goes on.
    pub(super) fn cursor(&self, queue: &str) -> usize {
        self.cursors.get(queue).copied().unwrap_or(0)
    }

    pub(super) fn set_cursor(&mut self, queue: &str, offset: usize) {
        self.cursors.insert(queue.to_string(), offset);
    }

    /// Records `id` as seen lacking at `now`, unless it already was.
    pub(super) fn saw(&mut self, queue: &str, id: String, now: DateTime<Utc>) {
        self.suspects
            .entry(queue.to_string())
            .or_default()
            .entry(id)
            .or_insert(now);
    }

    /// The suspects of `queue` first seen at or before `seen_by`, taken out
    /// of the book (the caller settles each one).
    pub(super) fn take_due(&mut self, queue: &str, seen_by: DateTime<Utc>) -> Vec<String> {
        let Some(ids) = self.suspects.get_mut(queue) else {
            return Vec::new();
        };
        let due: Vec<String> = ids
            .iter()
            .filter(|(_, first)| **first <= seen_by)
            .map(|(id, _)| id.clone())
            .collect();
        for id in &due {
            ids.remove(id);
        }
        if ids.is_empty() {
            self.suspects.remove(queue);
        }
        due
    }

    /// Puts back a suspect whose settling failed, to be tried again.
    pub(super) fn put_back(&mut self, queue: &str, id: String, first: DateTime<Utc>) {
        self.suspects
            .entry(queue.to_string())
            .or_default()
            .insert(id, first);
    }

    /// The queues holding a suspect first seen at or before `seen_by`.
    pub(super) fn queues_due(&self, seen_by: DateTime<Utc>) -> Vec<String> {
        self.suspects
            .iter()
            .filter(|(_, ids)| ids.values().any(|first| *first <= seen_by))
            .map(|(q, _)| q.clone())
            .collect()
    }

    /// The earliest first sighting of any suspect.
    pub(super) fn earliest(&self) -> Option<DateTime<Utc>> {
        self.suspects
            .values()
            .flat_map(|ids| ids.values())
            .min()
            .copied()
    }

    /// Forgets the queues not in `queues` (deleted, or no longer served).
    pub(super) fn retain(&mut self, queues: &[String]) {
        self.cursors.retain(|q, _| queues.contains(q));
        self.suspects.retain(|q, _| queues.contains(q));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_700_000_000 + s, 0).unwrap()
    }

    #[test]
    fn suspects_are_due_only_after_their_first_sighting() {
        let mut o = Orphans::default();
        o.saw("q", "a".into(), t(0));
        o.saw("q", "a".into(), t(20)); // a second sighting keeps the first
        o.saw("q", "b".into(), t(10));
        assert_eq!(o.earliest(), Some(t(0)));
        assert_eq!(o.queues_due(t(-1)), Vec::<String>::new());
        assert_eq!(o.queues_due(t(0)), vec!["q".to_string()]);
        assert_eq!(o.take_due("q", t(5)), vec!["a".to_string()]);
        assert_eq!(o.earliest(), Some(t(10)));
        assert_eq!(o.take_due("q", t(10)), vec!["b".to_string()]);
        assert_eq!(o.earliest(), None);
        o.put_back("q", "b".into(), t(10));
        o.set_cursor("q", 300);
        o.retain(&["other".to_string()]);
        assert_eq!(o.earliest(), None);
        assert_eq!(o.cursor("q"), 0);
    }
}
