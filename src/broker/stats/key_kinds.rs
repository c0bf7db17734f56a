//! [`KeyKinds`]: which of a queue's keys besides `pending` a statistics
//! read reads, and which it found holding something.

use super::QueueInfo;
use crate::broker::keys;

/// Kinds of a queue's keys besides `pending` (bit set), for
/// [`Broker::queues_stats`](crate::broker::Broker::queues_stats): which of them
/// it reads per queue, and which were found present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct KeyKinds(pub(super) u8);

impl KeyKinds {
    /// `active` (list).
    pub const ACTIVE: KeyKinds = KeyKinds(1);
    /// `scheduled` (zset).
    pub const SCHEDULED: KeyKinds = KeyKinds(2);
    /// `retry` (zset).
    pub const RETRY: KeyKinds = KeyKinds(4);
    /// `archived` (zset).
    pub const ARCHIVED: KeyKinds = KeyKinds(8);
    /// `completed` (zset).
    pub const COMPLETED: KeyKinds = KeyKinds(16);
    /// `groups` (set of group names; with it the group zsets).
    pub const GROUPS: KeyKinds = KeyKinds(32);
    /// None of them.
    pub const NONE: KeyKinds = KeyKinds(0);
    /// All of them.
    pub const ALL: KeyKinds = KeyKinds(63);
    /// Each kind, in the order the script's items and the 14 values go.
    pub(super) const EACH: [KeyKinds; 6] = [
        KeyKinds::ACTIVE,
        KeyKinds::SCHEDULED,
        KeyKinds::RETRY,
        KeyKinds::ARCHIVED,
        KeyKinds::COMPLETED,
        KeyKinds::GROUPS,
    ];

    /// Whether every kind of `other` is in `self`.
    pub fn contains(self, other: KeyKinds) -> bool {
        self.0 & other.0 == other.0
    }

    /// The kinds of `self` and `other`.
    pub fn union(self, other: KeyKinds) -> KeyKinds {
        KeyKinds(self.0 | other.0)
    }

    /// The kinds whose keys hold something in `s` (a size above 0: Redis
    /// deletes an empty list, zset or set).
    pub fn present_in_info(s: &QueueInfo) -> KeyKinds {
        let mut k = KeyKinds::NONE;
        for (kind, size) in KeyKinds::EACH.into_iter().zip([
            s.active,
            s.scheduled,
            s.retry,
            s.archived,
            s.completed,
            s.groups,
        ]) {
            if size > 0 {
                k = k.union(kind);
            }
        }
        k
    }

    /// The key of this (single) kind for `queue`.
    pub(super) fn key(self, queue: &str) -> String {
        match self {
            KeyKinds::ACTIVE => keys::active_key(queue),
            KeyKinds::SCHEDULED => keys::scheduled_key(queue),
            KeyKinds::RETRY => keys::retry_key(queue),
            KeyKinds::ARCHIVED => keys::archived_key(queue),
            KeyKinds::COMPLETED => keys::completed_key(queue),
            _ => keys::all_groups_key(queue),
        }
    }
}
