//! The JSON shapes of asynqmon's API, with its field names, and the
//! conversions from inspector types. asynqmon v0.7.2 `conversion_helpers.go`
//! is the reference for every name and format here.
//!
//! Time formats follow asynqmon's two conventions: fields typed `time.Time`
//! in Go serialise as RFC 3339 with as many fraction digits as needed
//! ([`go_time`]; Go's zero time `0001-01-01T00:00:00Z` when unset), fields
//! typed `string` use whole-second RFC 3339 ([`rfc3339`]) with `""` or `-`
//! where asynqmon uses them. asynqdeck always writes UTC (`Z`).
// asynqmon divergence: COMPATIBILITY.md#a3

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;

use crate::inspector::{
    DailyStats, GroupInfo, QueueInfo, SchedulerEnqueueEvent, SchedulerEntry, ServerInfo, TaskRow,
    WorkerInfo,
};
use crate::task::{TaskInfo, TaskState};

/// Go's zero `time.Time` as JSON and RFC 3339 render it.
pub const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// What asynqmon shows for a payload or result it cannot print.
pub const NON_PRINTABLE: &str = "non-printable bytes";

/// Go's zero time as a chrono value (for TTL arithmetic on a missing time).
fn go_zero() -> DateTime<Utc> {
    NaiveDate::from_ymd_opt(1, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .unwrap_or(DateTime::UNIX_EPOCH)
}

/// A Go `time.Time` field as `encoding/json` writes it (RFC 3339 with the
/// fraction trimmed of trailing zeros), UTC; [`GO_ZERO_TIME`] for `None`.
pub fn go_time(t: Option<DateTime<Utc>>) -> String {
    let Some(t) = t else {
        return GO_ZERO_TIME.to_string();
    };
    let mut s = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    }
    s.push('Z');
    s
}

/// Go `t.Format(time.RFC3339)`: whole seconds, UTC; [`GO_ZERO_TIME`] for
/// `None` (Go formats the zero time).
pub fn rfc3339(t: Option<DateTime<Utc>>) -> String {
    match t {
        Some(t) => t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        None => GO_ZERO_TIME.to_string(),
    }
}

/// asynqmon's `formatTimeInRFC3339`: `""` for an unset time.
fn rfc3339_or_empty(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| rfc3339(Some(t))).unwrap_or_default()
}

/// Go `time.Duration.String()` (`0s`, `150ms`, `1.5s`, `2m3.45s`, `1h0m0s`).
pub fn go_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_string();
    }
    // Integer part and fraction digits (trailing zeros trimmed) of
    // `value / 10^digits`.
    fn decimal(value: u128, digits: u32) -> String {
        let scale = 10u128.pow(digits);
        let (int, frac) = (value / scale, value % scale);
        if frac == 0 {
            return int.to_string();
        }
        let frac = format!("{frac:0width$}", width = digits as usize);
        format!("{int}.{}", frac.trim_end_matches('0'))
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", decimal(nanos, 3));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", decimal(nanos, 6));
    }
    let secs_total = nanos / 1_000_000_000;
    let sub = nanos % 1_000_000_000;
    let (h, m, s) = (secs_total / 3600, secs_total / 60 % 60, secs_total % 60);
    let secs = decimal(s * 1_000_000_000 + sub, 9);
    match (h, m) {
        (0, 0) => format!("{secs}s"),
        (0, _) => format!("{m}m{secs}s"),
        _ => format!("{h}h{m}m{secs}s"),
    }
}

/// Go `d.Round(m)`: to the nearest multiple of `m`, halves away from zero.
pub fn go_round(d: Duration, m: Duration) -> Duration {
    let (n, m) = (d.as_nanos(), m.as_nanos());
    if m == 0 {
        return d;
    }
    let r = n % m;
    let rounded = if r * 2 < m { n - r } else { n + (m - r) };
    Duration::from_nanos(u64::try_from(rounded).unwrap_or(u64::MAX))
}

/// How many leading bytes of a payload [`format_bytes`] reads with a limit
/// of `n` characters: `4 × (n + 1)` (`n` UTF-8 characters and one more,
/// which tells a cut). Saturates.
pub fn format_head_len(n: usize) -> usize {
    n.saturating_add(1).saturating_mul(4)
}

/// A payload or result as asynqmon's default formatter shows it, with two
/// fixes: text with newlines or tabs is shown as text (asynqmon #244), and
/// empty bytes are `""`. Valid UTF-8 without other control characters is
/// the text itself; anything else is `non-printable bytes`. With `limit`,
/// cut to that many characters plus `…` (asynqmon's `--max-payload-length`),
/// deciding on the first [`format_head_len`] bytes only, so a listing row
/// costs O(limit) whatever the payload size (R10; asynqmon checks the whole
/// payload, COMPATIBILITY.md#r10). Without a limit (the task detail) the
/// whole payload is checked.
// asynqmon divergence: COMPATIBILITY.md#a4
pub fn format_bytes(bytes: &[u8], limit: Option<usize>) -> String {
    let (head, whole) = match limit {
        Some(n) if format_head_len(n) < bytes.len() => (&bytes[..format_head_len(n)], false),
        _ => (bytes, true),
    };
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // The head's end split a character: the text before it.
        Err(e) if !whole && e.error_len().is_none() => {
            match std::str::from_utf8(&head[..e.valid_up_to()]) {
                Ok(text) => text,
                Err(_) => return NON_PRINTABLE.to_string(),
            }
        }
        Err(_) => return NON_PRINTABLE.to_string(),
    };
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return NON_PRINTABLE.to_string();
    }
    match limit {
        Some(n) => match text.char_indices().nth(n) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None if !whole => format!("{text}…"),
            None => text.to_string(),
        },
        None => text.to_string(),
    }
}

/// asynqmon `queueStateSnapshot`: one queue's numbers.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct QueueSnapshot {
    pub queue: String,
    pub memory_usage_bytes: i64,
    pub size: i64,
    pub groups: i64,
    /// Latency in whole milliseconds (truncated).
    pub latency_msec: i64,
    /// Latency rounded to 10 ms in Go's duration notation (`1.23s`).
    pub display_latency: String,
    pub active: i64,
    pub pending: i64,
    pub aggregating: i64,
    pub scheduled: i64,
    pub retry: i64,
    pub archived: i64,
    pub completed: i64,
    /// Today's (UTC) processed count, successes and failures.
    pub processed: i64,
    /// processed − failed.
    pub succeeded: i64,
    pub failed: i64,
    pub paused: bool,
    /// When the numbers were read.
    pub timestamp: String,
}

impl From<&QueueInfo> for QueueSnapshot {
    fn from(i: &QueueInfo) -> Self {
        QueueSnapshot {
            queue: i.queue.clone(),
            memory_usage_bytes: i.memory_usage,
            size: i.size,
            groups: i.groups,
            latency_msec: i64::try_from(i.latency.as_millis()).unwrap_or(i64::MAX),
            display_latency: go_duration(go_round(i.latency, Duration::from_millis(10))),
            active: i.active,
            pending: i.pending,
            aggregating: i.aggregating,
            scheduled: i.scheduled,
            retry: i.retry,
            archived: i.archived,
            completed: i.completed,
            processed: i.processed,
            succeeded: i.processed - i.failed,
            failed: i.failed,
            paused: i.paused,
            timestamp: go_time(Some(i.timestamp)),
        }
    }
}

/// asynqmon `dailyStats`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DailyStatsJson {
    pub queue: String,
    pub processed: i64,
    pub succeeded: i64,
    pub failed: i64,
    /// `YYYY-MM-DD` (UTC day).
    pub date: String,
}

impl From<&DailyStats> for DailyStatsJson {
    fn from(s: &DailyStats) -> Self {
        DailyStatsJson {
            queue: s.queue.clone(),
            processed: s.processed,
            succeeded: s.processed - s.failed,
            failed: s.failed,
            date: s.date.format("%Y-%m-%d").to_string(),
        }
    }
}

/// asynqmon `groupInfo`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct GroupJson {
    pub group: String,
    pub size: i64,
}

impl From<&GroupInfo> for GroupJson {
    fn from(g: &GroupInfo) -> Self {
        GroupJson {
            group: g.group.clone(),
            size: g.size,
        }
    }
}

/// asynqmon `baseTask`: the fields every task row has.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct BaseTask {
    pub id: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub payload: String,
    pub queue: String,
    pub max_retry: i32,
    pub retried: i32,
    pub error_message: String,
    /// Only on a task whose stored message does not decode: why (asynq
    /// leaves such tasks out of listings). Its other fields are then empty.
    // asynqmon divergence: COMPATIBILITY.md#a5
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<String>,
}

/// One row of a task listing, shaped per state as asynqmon's
/// `activeTask`, `pendingTask`, `scheduledTask`, `retryTask`,
/// `archivedTask`, `completedTask` and `aggregatingTask`.
#[derive(Clone, Debug, Serialize, PartialEq)]
#[serde(untagged)]
pub enum TaskRowJson {
    /// `start_time`/`deadline` come from the worker running it (RFC 3339,
    /// or `-` when no server reports it).
    Active {
        #[serde(flatten)]
        base: BaseTask,
        start_time: String,
        deadline: String,
        is_orphaned: bool,
    },
    /// Pending: the base fields only.
    Pending {
        #[serde(flatten)]
        base: BaseTask,
    },
    /// Scheduled and retry: when it is due.
    Due {
        #[serde(flatten)]
        base: BaseTask,
        next_process_at: String,
    },
    /// Archived: when it last failed.
    Archived {
        #[serde(flatten)]
        base: BaseTask,
        last_failed_at: String,
    },
    /// Completed: when, its result and the seconds of retention left.
    Completed {
        #[serde(flatten)]
        base: BaseTask,
        completed_at: String,
        result: String,
        ttl_seconds: i64,
    },
    /// Aggregating: its group.
    Aggregating {
        #[serde(flatten)]
        base: BaseTask,
        group: String,
    },
}

/// Seconds of retention left for a completed task: completed_at +
/// retention − now, truncated toward zero; 0 for other states (asynqmon
/// `taskTTL`).
fn ttl_seconds(t: &TaskInfo, now: DateTime<Utc>) -> i64 {
    if t.state != TaskState::Completed {
        return 0;
    }
    let retention = chrono::Duration::from_std(t.retention).unwrap_or(chrono::Duration::zero());
    (t.completed_at.unwrap_or_else(go_zero) + retention - now).num_seconds()
}

/// Limits for previews in listings.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Characters of payload shown (`--max-payload-length`).
    pub payload: usize,
    /// Characters of result shown (`--max-result-length`).
    pub result: usize,
}

/// A listing row in the shape of `state`. `now` is for the completed TTL.
pub fn task_row(
    row: &TaskRow,
    state: TaskState,
    limits: Limits,
    now: DateTime<Utc>,
) -> TaskRowJson {
    let (base, info) = match row {
        TaskRow::Task(t) => (
            BaseTask {
                id: t.id.clone(),
                task_type: t.task_type.clone(),
                payload: format_bytes(&t.payload, Some(limits.payload)),
                queue: t.queue.clone(),
                max_retry: t.max_retry,
                retried: t.retried,
                error_message: t.last_err.clone(),
                corrupt: None,
            },
            Some(t),
        ),
        TaskRow::Corrupt { id, error, .. } => (
            BaseTask {
                id: id.clone(),
                task_type: String::new(),
                payload: String::new(),
                queue: String::new(),
                max_retry: 0,
                retried: 0,
                error_message: String::new(),
                corrupt: Some(error.clone()),
            },
            None,
        ),
    };
    match state {
        TaskState::Active => TaskRowJson::Active {
            base,
            start_time: "-".to_string(),
            deadline: "-".to_string(),
            is_orphaned: info.is_some_and(|t| t.is_orphaned),
        },
        TaskState::Pending => TaskRowJson::Pending { base },
        TaskState::Scheduled | TaskState::Retry => TaskRowJson::Due {
            base,
            next_process_at: go_time(info.and_then(|t| t.next_process_at)),
        },
        TaskState::Archived => TaskRowJson::Archived {
            base,
            last_failed_at: go_time(info.and_then(|t| t.last_failed_at)),
        },
        TaskState::Completed => TaskRowJson::Completed {
            base,
            completed_at: go_time(info.and_then(|t| t.completed_at)),
            result: info
                .map(|t| format_bytes(t.result.as_deref().unwrap_or_default(), Some(limits.result)))
                .unwrap_or_default(),
            ttl_seconds: info.map(|t| ttl_seconds(t, now)).unwrap_or(0),
        },
        TaskState::Aggregating => TaskRowJson::Aggregating {
            base,
            group: info.map(|t| t.group.clone()).unwrap_or_default(),
        },
    }
}

/// asynqmon `taskInfo`: the task detail (`GET /queues/{q}/tasks/{id}`).
/// Payload and result are shown whole (asynqmon cuts them, #301).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TaskDetail {
    pub id: String,
    pub queue: String,
    #[serde(rename = "type")]
    pub task_type: String,
    pub payload: String,
    pub state: String,
    pub max_retry: i32,
    pub retried: i32,
    pub error_message: String,
    /// RFC 3339, `""` when it never failed.
    pub last_failed_at: String,
    pub timeout_seconds: i64,
    /// RFC 3339, `""` when none.
    pub deadline: String,
    /// RFC 3339, `""` when not applicable.
    pub next_process_at: String,
    /// RFC 3339, `""` when not completed.
    pub completed_at: String,
    pub result: String,
    pub ttl_seconds: i64,
}

impl TaskDetail {
    /// The detail of `t`, with the TTL computed against `now`.
    pub fn new(t: &TaskInfo, now: DateTime<Utc>) -> Self {
        TaskDetail {
            id: t.id.clone(),
            queue: t.queue.clone(),
            task_type: t.task_type.clone(),
            payload: format_bytes(&t.payload, None),
            state: t.state.as_str().to_string(),
            max_retry: t.max_retry,
            retried: t.retried,
            error_message: t.last_err.clone(),
            last_failed_at: rfc3339_or_empty(t.last_failed_at),
            timeout_seconds: i64::try_from(t.timeout.as_secs()).unwrap_or(i64::MAX),
            deadline: rfc3339_or_empty(t.deadline),
            next_process_at: rfc3339_or_empty(t.next_process_at),
            completed_at: rfc3339_or_empty(t.completed_at),
            result: format_bytes(t.result.as_deref().unwrap_or_default(), None),
            ttl_seconds: ttl_seconds(t, now),
        }
    }
}

/// asynqmon `workerInfo` (inside a server).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct WorkerJson {
    pub task_id: String,
    pub queue: String,
    pub task_type: String,
    pub task_payload: String,
    /// RFC 3339.
    pub start_time: String,
}

impl WorkerJson {
    fn new(w: &WorkerInfo, limits: Limits) -> Self {
        WorkerJson {
            task_id: w.task_id.clone(),
            queue: w.queue.clone(),
            task_type: w.task_type.clone(),
            task_payload: format_bytes(&w.task_payload, Some(limits.payload)),
            start_time: rfc3339(w.started),
        }
    }
}

/// asynqmon `serverInfo`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ServerJson {
    pub id: String,
    pub host: String,
    pub pid: i32,
    pub concurrency: i32,
    pub queue_priorities: BTreeMap<String, i32>,
    pub strict_priority_enabled: bool,
    /// RFC 3339.
    pub start_time: String,
    pub status: String,
    pub active_workers: Vec<WorkerJson>,
}

impl ServerJson {
    /// The server with its workers' payloads cut to `limits.payload`.
    pub fn new(s: &ServerInfo, limits: Limits) -> Self {
        ServerJson {
            id: s.server_id.clone(),
            host: s.host.clone(),
            pid: s.pid,
            concurrency: s.concurrency,
            queue_priorities: s.queues.clone(),
            strict_priority_enabled: s.strict_priority,
            start_time: rfc3339(s.started),
            status: s.status.clone(),
            active_workers: s
                .active_workers
                .iter()
                .map(|w| WorkerJson::new(w, limits))
                .collect(),
        }
    }
}

/// asynqmon `schedulerEntry`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SchedulerEntryJson {
    pub id: String,
    pub spec: String,
    pub task_type: String,
    pub task_payload: String,
    /// Enqueue options in Go's `String()` form, as stored.
    pub options: Vec<String>,
    /// RFC 3339.
    pub next_enqueue_at: String,
    /// RFC 3339; absent when the entry never fired.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prev_enqueue_at: Option<String>,
}

impl SchedulerEntryJson {
    /// The entry with its payload cut to `limits.payload`.
    pub fn new(e: &SchedulerEntry, limits: Limits) -> Self {
        SchedulerEntryJson {
            id: e.id.clone(),
            spec: e.spec.clone(),
            task_type: e.task_type.clone(),
            task_payload: format_bytes(&e.payload, Some(limits.payload)),
            options: e.options.clone(),
            next_enqueue_at: rfc3339(e.next_enqueue_at),
            prev_enqueue_at: e.prev_enqueue_at.map(|t| rfc3339(Some(t))),
        }
    }
}

/// asynqmon `schedulerEnqueueEvent`.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EnqueueEventJson {
    pub task_id: String,
    /// RFC 3339.
    pub enqueued_at: String,
}

impl From<&SchedulerEnqueueEvent> for EnqueueEventJson {
    fn from(e: &SchedulerEnqueueEvent) -> Self {
        EnqueueEventJson {
            task_id: e.task_id.clone(),
            enqueued_at: rfc3339(Some(e.enqueued_at)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// R10: with a limit, only the first [`format_head_len`] bytes decide
    /// the listing text: a 5 MB payload with a text head and a binary tail
    /// shows its first 200 characters and `…`, the same as with any other
    /// tail; a binary head is `non-printable bytes`.
    #[test]
    fn r10_listing_payload_reads_only_the_head() {
        let head = format_head_len(200);
        assert_eq!(head, 4 * 201);
        let mut big = vec![b'a'; 5_000_000];
        big[head..].fill(0);
        let want = format!("{}…", "a".repeat(200));
        assert_eq!(format_bytes(&big, Some(200)), want);
        big[head..].fill(b'b');
        assert_eq!(format_bytes(&big, Some(200)), want);
        let bin = vec![0xffu8; 5_000_000];
        assert_eq!(format_bytes(&bin, Some(200)), NON_PRINTABLE);
        // The detail (no limit) still checks the whole payload.
        big[head..].fill(0);
        assert_eq!(format_bytes(&big, None), NON_PRINTABLE);
        let cyr = "я".repeat(300);
        assert_eq!(
            format_bytes(cyr.as_bytes(), Some(200)),
            format!("{}…", "я".repeat(200))
        );
        assert_eq!(
            format_bytes("я".repeat(200).as_bytes(), Some(200)),
            "я".repeat(200)
        );
    }

    /// Go's `Duration.String()` after `Round(10ms)`, as asynqmon's
    /// `display_latency`.
    #[test]
    fn go_durations() {
        let ms = Duration::from_millis;
        let r = |d| go_duration(go_round(d, ms(10)));
        assert_eq!(r(Duration::ZERO), "0s");
        assert_eq!(r(ms(4)), "0s");
        assert_eq!(r(ms(5)), "10ms");
        assert_eq!(r(ms(150)), "150ms");
        assert_eq!(r(ms(1_234)), "1.23s");
        assert_eq!(r(ms(1_235)), "1.24s");
        assert_eq!(r(ms(60_000)), "1m0s");
        assert_eq!(r(ms(123_450)), "2m3.45s");
        assert_eq!(r(ms(3_600_000)), "1h0m0s");
        assert_eq!(r(ms(3_661_500)), "1h1m1.5s");
        assert_eq!(go_duration(Duration::from_nanos(1_500)), "1.5µs");
        assert_eq!(go_duration(Duration::from_nanos(7)), "7ns");
        assert_eq!(go_duration(Duration::from_micros(2_500)), "2.5ms");
    }

    #[test]
    fn go_times() {
        let t = DateTime::from_timestamp(1_773_144_000, 120_000_000).unwrap();
        assert_eq!(go_time(Some(t)), "2026-03-10T12:00:00.12Z");
        assert_eq!(rfc3339(Some(t)), "2026-03-10T12:00:00Z");
        let whole = DateTime::from_timestamp(1_773_144_000, 0).unwrap();
        assert_eq!(go_time(Some(whole)), "2026-03-10T12:00:00Z");
        assert_eq!(go_time(None), GO_ZERO_TIME);
        assert_eq!(rfc3339(None), GO_ZERO_TIME);
        assert_eq!(rfc3339_or_empty(None), "");
        assert_eq!(go_zero().format("%Y-%m-%d").to_string(), "0001-01-01");
    }

    /// Text (newlines and non-ASCII included) is shown, control bytes and
    /// invalid UTF-8 are not; cuts count characters.
    #[test]
    fn payload_text() {
        assert_eq!(format_bytes(b"", None), "");
        assert_eq!(format_bytes("a\nпривет\t".as_bytes(), None), "a\nпривет\t");
        assert_eq!(format_bytes(&[0xff, 0x41], None), NON_PRINTABLE);
        assert_eq!(format_bytes(&[0x00, 0x41], None), NON_PRINTABLE);
        assert_eq!(format_bytes("привет".as_bytes(), Some(3)), "при…");
        assert_eq!(format_bytes(b"abc", Some(3)), "abc");
    }
}
