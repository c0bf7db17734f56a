//! Every Redis key name asynq uses, built in one place.
//!
//! Go: `internal/base/base.go` (`TaskKey`, `PendingKey`, ...). Per-queue keys
//! always carry the Redis Cluster hash tag `{<queue>}`, so all keys a script
//! touches for one queue hash to one slot (wire spec §1.4, §2).

/// `asynq:queues`: SET of every queue name ever enqueued to.
pub const ALL_QUEUES: &str = "asynq:queues";
/// `asynq:servers`: ZSET of server-info key names, score = expiry (unix s).
pub const ALL_SERVERS: &str = "asynq:servers";
/// `asynq:workers`: ZSET of workers key names, score = expiry (unix s).
pub const ALL_WORKERS: &str = "asynq:workers";
/// `asynq:schedulers`: ZSET of scheduler-entries key names, score = expiry (unix s).
pub const ALL_SCHEDULERS: &str = "asynq:schedulers";
/// `asynq:cancel`: Pub/Sub channel; a message is the id of a task to cancel.
pub const CANCEL_CHANNEL: &str = "asynq:cancel";

/// Rejects a blank queue name (Go `base.ValidateQueueName`: empty or all
/// whitespace). Returns the Go error text on failure.
pub fn validate_queue_name(queue: &str) -> Result<(), &'static str> {
    if queue.trim().is_empty() {
        Err("queue name must contain one or more characters")
    } else {
        Ok(())
    }
}

/// The hash tag Redis Cluster takes from every key of `queue`, or `None`
/// when those keys carry none.
///
/// The slot rule (Redis Cluster spec, "hash tags"): a key's slot is
/// CRC16 mod 16384 of the text between its first `{` and the first `}`
/// after it, when at least one character lies between them; otherwise of
/// the whole key. Every per-queue key is `asynq:{<queue>}:<suffix>`
/// ([`queue_prefix`]); `asynq:` holds no brace, so the first `{` is always
/// the one asynq adds and the tag ends at the first `}` of `<queue>`
/// itself, or at asynq's closing brace if the name has none:
///
/// - no `}` in the name (`default`, `{`, `{x`): the tag is the whole name;
/// - a `}` after the first character (`x}:y`, `{weird}`, `{}`): the tag is
///   the name up to that `}` (`x`, `{weird`, `{`): still one slot for
///   all the queue's keys, shared with any queue named like that prefix;
/// - a name starting with `}` (`}`, `}x`): the braces enclose nothing, so
///   each key (`asynq:{}x}:pending`, `asynq:{}x}:t:<id>`, ...) hashes as
///   a whole, to a slot of its own; every script of the queue is then
///   refused by a cluster (`CROSSSLOT`).
///
/// A blank name (refused everywhere, [`validate_queue_name`]) is `None`.
pub fn cluster_hash_tag(queue: &str) -> Option<&str> {
    let tag = match queue.find('}') {
        Some(end) => &queue[..end],
        None => queue,
    };
    (!tag.is_empty()).then_some(tag)
}

/// Whether every key of `queue` hashes to one Redis Cluster slot, so the
/// queue works on a cluster ([`cluster_hash_tag`] is `Some`): false
/// exactly for a name that is empty or starts with `}`. On one server
/// (standalone, Sentinel) every non-blank name works, as in Go.
pub fn cluster_safe_queue_name(queue: &str) -> bool {
    cluster_hash_tag(queue).is_some()
}

/// `asynq:{<queue>}:`, the prefix of every per-queue key.
pub fn queue_prefix(queue: &str) -> String {
    format!("asynq:{{{queue}}}:")
}

/// `asynq:{<queue>}:t:`, the prefix of every task hash key of the queue.
pub fn task_key_prefix(queue: &str) -> String {
    format!("asynq:{{{queue}}}:t:")
}

/// `asynq:{<queue>}:t:<id>`: the task hash (fields msg, state, ...; spec §3).
pub fn task_key(queue: &str, id: &str) -> String {
    format!("asynq:{{{queue}}}:t:{id}")
}

macro_rules! queue_keys {
    ($($(#[$doc:meta])* $name:ident => $suffix:literal;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(queue: &str) -> String {
                format!("asynq:{{{queue}}}:{}", $suffix)
            }
        )*
    };
}

queue_keys! {
    /// `asynq:{<queue>}:pending`: LIST of task ids; new work LPUSHed, workers pop from the right.
    pending_key => "pending";
    /// `asynq:{<queue>}:active`: LIST of ids currently leased by a worker.
    active_key => "active";
    /// `asynq:{<queue>}:lease`: ZSET id -> lease expiry (unix s).
    lease_key => "lease";
    /// `asynq:{<queue>}:scheduled`: ZSET id -> process-at (unix s).
    scheduled_key => "scheduled";
    /// `asynq:{<queue>}:retry`: ZSET id -> next retry time (unix s).
    retry_key => "retry";
    /// `asynq:{<queue>}:archived`: ZSET id -> archived-at (unix s).
    archived_key => "archived";
    /// `asynq:{<queue>}:completed`: ZSET id -> expiry (completed_at + retention, unix s).
    completed_key => "completed";
    /// `asynq:{<queue>}:paused`: STRING present iff the queue is paused; value = pause time (unix s).
    paused_key => "paused";
    /// `asynq:{<queue>}:processed`: all-time processed counter (successes and failures).
    processed_total_key => "processed";
    /// `asynq:{<queue>}:failed`: all-time failure counter.
    failed_total_key => "failed";
    /// `asynq:{<queue>}:groups`: SET of group names holding aggregating tasks.
    all_groups_key => "groups";
    /// `asynq:{<queue>}:aggregation_sets`: ZSET set key -> set deadline (unix s).
    all_aggregation_sets_key => "aggregation_sets";
    /// `asynq:{<queue>}:g:`: prefix of the group ZSETs.
    group_key_prefix => "g:";
}

/// `asynq:{<queue>}:processed:<YYYY-MM-DD>`: processed count of one UTC day.
pub fn processed_key(queue: &str, day: chrono::NaiveDate) -> String {
    format!("asynq:{{{queue}}}:processed:{}", day.format("%Y-%m-%d"))
}

/// `asynq:{<queue>}:failed:<YYYY-MM-DD>`: failure count of one UTC day.
pub fn failed_key(queue: &str, day: chrono::NaiveDate) -> String {
    format!("asynq:{{{queue}}}:failed:{}", day.format("%Y-%m-%d"))
}

/// `asynq:{<queue>}:g:<group>`: ZSET of aggregating task ids, score = time added (unix s).
pub fn group_key(queue: &str, group: &str) -> String {
    format!("asynq:{{{queue}}}:g:{group}")
}

/// `asynq:{<queue>}:g:<group>:<set id>`: one aggregation set.
pub fn aggregation_set_key(queue: &str, group: &str, set_id: &str) -> String {
    format!("asynq:{{{queue}}}:g:{group}:{set_id}")
}

/// `asynq:{<queue>}:unique:`, the prefix of every uniqueness lock of the queue.
pub fn unique_key_prefix(queue: &str) -> String {
    format!("asynq:{{{queue}}}:unique:")
}

/// `asynq:{<queue>}:unique:<type>:<md5 hex of payload>`: the uniqueness lock.
///
/// Go `base.UniqueKey`: a `None` payload (Go `nil`) leaves the digest empty
/// (trailing colon kept); `Some(&[])` hashes to `d41d8cd9...`.
pub fn unique_key(queue: &str, task_type: &str, payload: Option<&[u8]>) -> String {
    use md5::{Digest, Md5};
    match payload {
        None => format!("asynq:{{{queue}}}:unique:{task_type}:"),
        Some(p) => format!(
            "asynq:{{{queue}}}:unique:{task_type}:{}",
            hex::encode(Md5::digest(p))
        ),
    }
}

/// `asynq:servers:{<host>:<pid>:<server id>}`: STRING holding a `ServerInfo`.
pub fn server_info_key(host: &str, pid: i32, server_id: &str) -> String {
    format!("asynq:servers:{{{host}:{pid}:{server_id}}}")
}

/// `asynq:workers:{<host>:<pid>:<server id>}`: HASH task id -> `WorkerInfo`.
pub fn workers_key(host: &str, pid: i32, server_id: &str) -> String {
    format!("asynq:workers:{{{host}:{pid}:{server_id}}}")
}

/// `asynq:schedulers:{<scheduler id>}`: LIST of `SchedulerEntry` messages.
pub fn scheduler_entries_key(scheduler_id: &str) -> String {
    format!("asynq:schedulers:{{{scheduler_id}}}")
}

/// asynqdeck's own keys for one replica group of schedulers (issue 16,
/// "one active scheduler among replicas"). Every one carries the hash tag
/// `{scheduler:<group>}`, so the lease and the tick claims of a group sit in
/// one slot and one script can touch them together:
///
/// - `asynqdeck:{scheduler:<group>}:leader`: STRING, the scheduler id
///   (`<host>:<pid>:<uuid>`) of the active replica, with a PX expiry (the
///   lease);
/// - `asynqdeck:{scheduler:<group>}:replicas`: ZSET, member = scheduler id of
///   every live replica (active or standby), score = its expiry (unix s);
/// - `asynqdeck:{scheduler:<group>}:fired`: HASH, field = an entry's config
///   hash (Go `PeriodicTaskConfig.hash`), value = the last tick claimed for
///   it (unix ms).
pub fn scheduler_leader_key(group: &str) -> String {
    format!("asynqdeck:{{scheduler:{group}}}:leader")
}

/// See [`scheduler_leader_key`].
pub fn scheduler_replicas_key(group: &str) -> String {
    format!("asynqdeck:{{scheduler:{group}}}:replicas")
}

/// See [`scheduler_leader_key`].
pub fn scheduler_fired_key(group: &str) -> String {
    format!("asynqdeck:{{scheduler:{group}}}:fired")
}

/// `asynqdeck:{scheduler}:groups`: SET of every replica group name in use
/// (so the dashboard can find the groups without a SCAN).
pub const SCHEDULER_GROUPS: &str = "asynqdeck:{scheduler}:groups";

/// `asynqdeck:{audit}:log`: STREAM of the dashboard's audit log, one entry
/// per mutating action (issue 17), capped at [`AUDIT_LOG_MAX`] entries.
/// Fields: `actor`, `verb`, `queue`, `scope`, `count`, `result`, `status`.
pub const AUDIT_LOG: &str = "asynqdeck:{audit}:log";

/// Most entries [`AUDIT_LOG`] keeps (older ones are trimmed at each append).
pub const AUDIT_LOG_MAX: usize = 10_000;

/// `asynqdeck:{alerts}:firing:<queue length>:<queue>:<signal>`: STRING
/// holding the token of the alert episode whose "firing" message a
/// dashboard sent, with a TTL of the alert cooldown (issue 17, N6). Every
/// dashboard on the Redis claims it with `SET NX` before posting, so one
/// post goes out per episode however many dashboards run (and a restart
/// does not post again). The length prefix keeps `a:b` + `c` apart from
/// `a` + `b:c`.
pub fn alert_firing_key(queue: &str, signal: &str) -> String {
    format!(
        "asynqdeck:{{alerts}}:firing:{}:{queue}:{signal}",
        queue.len()
    )
}

/// `asynqdeck:{alerts}:resolved:<episode token>`: STRING claimed with
/// `SET NX` before a "resolved" message for that episode is posted, so it
/// is posted once (see [`alert_firing_key`]).
pub fn alert_resolved_key(episode: &str) -> String {
    format!("asynqdeck:{{alerts}}:resolved:{episode}")
}

/// `asynq:scheduler_history:<entry id>`: ZSET of `SchedulerEnqueueEvent`, score = enqueue time (unix s).
pub fn scheduler_history_key(entry_id: &str) -> String {
    format!("asynq:scheduler_history:{entry_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Key names exactly as Go's base package builds them (wire spec §2).
    #[test]
    fn key_names_match_go() {
        assert_eq!(task_key("default", "abc"), "asynq:{default}:t:abc");
        assert_eq!(pending_key("q"), "asynq:{q}:pending");
        assert_eq!(active_key("q"), "asynq:{q}:active");
        assert_eq!(lease_key("q"), "asynq:{q}:lease");
        assert_eq!(scheduled_key("q"), "asynq:{q}:scheduled");
        assert_eq!(retry_key("q"), "asynq:{q}:retry");
        assert_eq!(archived_key("q"), "asynq:{q}:archived");
        assert_eq!(completed_key("q"), "asynq:{q}:completed");
        assert_eq!(paused_key("q"), "asynq:{q}:paused");
        assert_eq!(processed_total_key("q"), "asynq:{q}:processed");
        assert_eq!(failed_total_key("q"), "asynq:{q}:failed");
        assert_eq!(all_groups_key("q"), "asynq:{q}:groups");
        assert_eq!(all_aggregation_sets_key("q"), "asynq:{q}:aggregation_sets");
        assert_eq!(group_key_prefix("q"), "asynq:{q}:g:");
        assert_eq!(group_key("q", "g1"), "asynq:{q}:g:g1");
        assert_eq!(aggregation_set_key("q", "g1", "s"), "asynq:{q}:g:g1:s");
        let day = chrono::NaiveDate::from_ymd_opt(2026, 1, 5).unwrap();
        assert_eq!(processed_key("q", day), "asynq:{q}:processed:2026-01-05");
        assert_eq!(failed_key("q", day), "asynq:{q}:failed:2026-01-05");
        assert_eq!(server_info_key("h", 42, "sid"), "asynq:servers:{h:42:sid}");
        assert_eq!(workers_key("h", 42, "sid"), "asynq:workers:{h:42:sid}");
        assert_eq!(scheduler_entries_key("h:1:u"), "asynq:schedulers:{h:1:u}");
        assert_eq!(scheduler_history_key("e"), "asynq:scheduler_history:e");
    }

    /// Unique key digest: nil payload keeps the trailing colon, empty payload
    /// hashes to MD5(""), and the spec's example matches (wire spec §2.2).
    #[test]
    fn unique_key_digest() {
        assert_eq!(
            unique_key("default", "email:send", Some(br#"{"to":"a@b.c"}"#)),
            "asynq:{default}:unique:email:send:9c101e63e8b8c4cb30a5402296afa24c"
        );
        assert_eq!(
            unique_key("default", "email:send", None),
            "asynq:{default}:unique:email:send:"
        );
        assert_eq!(
            unique_key("q", "t", Some(b"")),
            "asynq:{q}:unique:t:d41d8cd98f00b204e9800998ecf8427e"
        );
    }

    /// The tag of each odd name (the slots themselves are checked against
    /// a real cluster's `CLUSTER KEYSLOT` in `tests/cluster_queue_names.rs`).
    #[test]
    fn cluster_hash_tags_of_brace_names() {
        assert_eq!(cluster_hash_tag("default"), Some("default"));
        assert_eq!(cluster_hash_tag("x}:y"), Some("x"));
        assert_eq!(cluster_hash_tag("{weird}"), Some("{weird"));
        assert_eq!(cluster_hash_tag("{}"), Some("{"));
        assert_eq!(cluster_hash_tag("{"), Some("{"));
        assert_eq!(cluster_hash_tag("{x"), Some("{x"));
        assert_eq!(cluster_hash_tag("a{b}c"), Some("a{b"));
        assert_eq!(cluster_hash_tag("}x"), None);
        assert_eq!(cluster_hash_tag("}"), None);
        assert_eq!(cluster_hash_tag(""), None);
        assert!(cluster_safe_queue_name("{}"));
        assert!(!cluster_safe_queue_name("}x"));
    }

    #[test]
    fn blank_queue_names_are_rejected() {
        assert!(validate_queue_name("").is_err());
        assert!(validate_queue_name("  ").is_err());
        assert!(validate_queue_name("critical").is_ok());
    }
}
