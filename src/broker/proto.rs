//! The protobuf messages asynq stores in Redis (package `asynq`, proto3).
//!
//! Go: `internal/proto/asynq.proto`. Field numbers are exactly Go's (wire spec
//! §4). Messages are hand-derived with prost, so no `protoc` is needed.
//!
//! [`TaskMessage`] is re-encoded on retry, archive, completion and payload
//! update. Go drops fields it does not know when it does that (a 0.25 peer
//! loses 0.26's `headers`); we keep them: [`WireTask`] carries the unknown
//! fields' raw bytes and appends them on encode, byte for byte.

use std::collections::BTreeMap;

use prost::Message;
use prost::bytes::Buf;

/// `google.protobuf.Timestamp`: seconds and nanoseconds since the Unix epoch (UTC).
#[derive(Clone, Copy, PartialEq, Eq, Message)]
pub struct Timestamp {
    /// Whole seconds since 1970-01-01T00:00:00Z (may be negative).
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    /// Nanoseconds within the second, 0..=999_999_999.
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

/// Go's zero `time.Time` as `timestamppb.New` encodes it: 0001-01-01T00:00:00Z.
/// Go writes it for "never" (e.g. a scheduler entry's previous enqueue time).
pub const GO_ZERO_TIME_SECONDS: i64 = -62_135_596_800;

impl Timestamp {
    /// Converts to UTC; `None` for Go's zero time and for an out-of-range value.
    // asynq divergence: COMPATIBILITY.md#p3
    pub fn to_utc(self) -> Option<chrono::DateTime<chrono::Utc>> {
        if self.seconds == GO_ZERO_TIME_SECONDS && self.nanos == 0 {
            return None;
        }
        chrono::DateTime::from_timestamp(self.seconds, self.nanos.max(0) as u32)
    }

    /// Encodes a time; `None` becomes Go's zero time (spec §4.4).
    pub fn from_utc(t: Option<chrono::DateTime<chrono::Utc>>) -> Self {
        match t {
            Some(t) => Timestamp {
                seconds: t.timestamp(),
                nanos: t.timestamp_subsec_nanos() as i32,
            },
            None => Timestamp {
                seconds: GO_ZERO_TIME_SECONDS,
                nanos: 0,
            },
        }
    }
}

/// The task record stored in hash field `msg` (Go `base.TaskMessage`).
///
/// Times are unix seconds (0 = unset); `timeout` and `retention` are seconds.
#[derive(Clone, PartialEq, Message)]
pub struct TaskMessage {
    /// Task type name (never blank).
    #[prost(string, tag = "1")]
    pub r#type: String,
    /// Opaque payload bytes.
    #[prost(bytes = "vec", tag = "2")]
    pub payload: Vec<u8>,
    /// Task id (UUIDv4 unless the enqueuer chose one).
    #[prost(string, tag = "3")]
    pub id: String,
    /// Queue name.
    #[prost(string, tag = "4")]
    pub queue: String,
    /// Max retry count (Go `MaxRetry`, default 25).
    #[prost(int32, tag = "5")]
    pub retry: i32,
    /// Retries made so far.
    #[prost(int32, tag = "6")]
    pub retried: i32,
    /// Text of the last failure.
    #[prost(string, tag = "7")]
    pub error_msg: String,
    /// Timeout in seconds; 0 = none.
    #[prost(int64, tag = "8")]
    pub timeout: i64,
    /// Deadline, unix seconds; 0 = none.
    #[prost(int64, tag = "9")]
    pub deadline: i64,
    /// Uniqueness lock key name, empty when not unique.
    #[prost(string, tag = "10")]
    pub unique_key: String,
    /// Time of the last failure, unix seconds; 0 = never.
    #[prost(int64, tag = "11")]
    pub last_failed_at: i64,
    /// Seconds to keep the task after success; 0 = delete on success.
    #[prost(int64, tag = "12")]
    pub retention: i64,
    /// Completion time, unix seconds; 0 = not completed.
    #[prost(int64, tag = "13")]
    pub completed_at: i64,
    /// Group name for aggregation, empty when none.
    #[prost(string, tag = "14")]
    pub group_key: String,
    /// Task headers (new in asynq 0.26).
    #[prost(btree_map = "string, string", tag = "15")]
    pub headers: BTreeMap<String, String>,
}

/// A decoded `TaskMessage` plus the raw bytes of any fields this version does
/// not know, re-emitted verbatim by [`WireTask::encode`].
// asynq divergence: COMPATIBILITY.md#p1
#[derive(Clone, Debug, PartialEq, Default)]
pub struct WireTask {
    /// The known fields.
    pub msg: TaskMessage,
    /// Unknown fields, each as its original key + value bytes, in order.
    pub unknown: Vec<u8>,
}

/// Field numbers `TaskMessage` declares (1..=15).
const TASK_MESSAGE_TAGS: std::ops::RangeInclusive<u32> = 1..=15;

impl WireTask {
    /// Decodes the `msg` hash field. Errors (with a reason) on malformed protobuf.
    pub fn decode(bytes: &[u8]) -> Result<Self, String> {
        let msg = TaskMessage::decode(bytes).map_err(|e| e.to_string())?;
        let unknown = unknown_fields(bytes, |tag| TASK_MESSAGE_TAGS.contains(&tag))?;
        Ok(WireTask { msg, unknown })
    }

    /// Encodes the known fields (ascending field order, as Go) then the
    /// preserved unknown fields.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = self.msg.encode_to_vec();
        out.extend_from_slice(&self.unknown);
        out
    }
}

/// Returns the raw bytes of every field whose tag `known` rejects.
fn unknown_fields(mut buf: &[u8], known: impl Fn(u32) -> bool) -> Result<Vec<u8>, String> {
    use prost::encoding::{WireType, decode_key, decode_varint};
    let mut out = Vec::new();
    while buf.has_remaining() {
        let start = buf;
        let (tag, wire_type) = decode_key(&mut buf).map_err(|e| e.to_string())?;
        let value_len = match wire_type {
            WireType::Varint => {
                decode_varint(&mut buf).map_err(|e| e.to_string())?;
                0
            }
            WireType::SixtyFourBit => 8,
            WireType::ThirtyTwoBit => 4,
            WireType::LengthDelimited => {
                decode_varint(&mut buf).map_err(|e| e.to_string())? as usize
            }
            // asynq divergence: COMPATIBILITY.md#p2
            WireType::StartGroup | WireType::EndGroup => {
                return Err(format!("field {tag}: protobuf groups are not supported"));
            }
        };
        if buf.remaining() < value_len {
            return Err(format!("field {tag}: buffer underflow"));
        }
        buf.advance(value_len);
        if !known(tag) {
            let used = start.len() - buf.len();
            out.extend_from_slice(&start[..used]);
        }
    }
    Ok(out)
}

/// A running server's state (value of `asynq:servers:{...}`; Go `base.ServerInfo`).
#[derive(Clone, PartialEq, Message)]
pub struct ServerInfo {
    /// OS host name.
    #[prost(string, tag = "1")]
    pub host: String,
    /// Process id.
    #[prost(int32, tag = "2")]
    pub pid: i32,
    /// UUIDv4 generated per server start.
    #[prost(string, tag = "3")]
    pub server_id: String,
    /// Worker count.
    #[prost(int32, tag = "4")]
    pub concurrency: i32,
    /// Queue name -> priority.
    #[prost(btree_map = "string, int32", tag = "5")]
    pub queues: BTreeMap<String, i32>,
    /// Strict priority ordering of queues.
    #[prost(bool, tag = "6")]
    pub strict_priority: bool,
    /// `active` while running, `stopped` after Stop.
    #[prost(string, tag = "7")]
    pub status: String,
    /// When the server started.
    #[prost(message, optional, tag = "8")]
    pub start_time: Option<Timestamp>,
    /// Number of in-flight tasks.
    #[prost(int32, tag = "9")]
    pub active_worker_count: i32,
}

/// One in-flight task of a server (values of `asynq:workers:{...}`; Go `base.WorkerInfo`).
#[derive(Clone, PartialEq, Message)]
pub struct WorkerInfo {
    /// OS host name.
    #[prost(string, tag = "1")]
    pub host: String,
    /// Process id.
    #[prost(int32, tag = "2")]
    pub pid: i32,
    /// Id of the server running it.
    #[prost(string, tag = "3")]
    pub server_id: String,
    /// Task id.
    #[prost(string, tag = "4")]
    pub task_id: String,
    /// Task type.
    #[prost(string, tag = "5")]
    pub task_type: String,
    /// Task payload.
    #[prost(bytes = "vec", tag = "6")]
    pub task_payload: Vec<u8>,
    /// Queue the task came from.
    #[prost(string, tag = "7")]
    pub queue: String,
    /// When a worker started it.
    #[prost(message, optional, tag = "8")]
    pub start_time: Option<Timestamp>,
    /// The task context's deadline.
    #[prost(message, optional, tag = "9")]
    pub deadline: Option<Timestamp>,
}

/// A periodic task registered with a scheduler (Go `base.SchedulerEntry`).
#[derive(Clone, PartialEq, Message)]
pub struct SchedulerEntry {
    /// Entry UUID.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Cron spec as registered.
    #[prost(string, tag = "2")]
    pub spec: String,
    /// Task type.
    #[prost(string, tag = "3")]
    pub task_type: String,
    /// Task payload.
    #[prost(bytes = "vec", tag = "4")]
    pub task_payload: Vec<u8>,
    /// Enqueue options in Go's `String()` form, e.g. `MaxRetry(5)`.
    #[prost(string, repeated, tag = "5")]
    pub enqueue_options: Vec<String>,
    /// Next fire time.
    #[prost(message, optional, tag = "6")]
    pub next_enqueue_time: Option<Timestamp>,
    /// Last fire time; Go's zero time when never fired.
    #[prost(message, optional, tag = "7")]
    pub prev_enqueue_time: Option<Timestamp>,
}

/// One enqueue made by a scheduler entry (Go `base.SchedulerEnqueueEvent`).
#[derive(Clone, PartialEq, Message)]
pub struct SchedulerEnqueueEvent {
    /// Id of the task enqueued.
    #[prost(string, tag = "1")]
    pub task_id: String,
    /// When it was enqueued.
    #[prost(message, optional, tag = "2")]
    pub enqueue_time: Option<Timestamp>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex_of(m: &impl Message) -> String {
        hex::encode(m.encode_to_vec())
    }

    /// Golden A of wire spec §4.1: what a Go client writes for a plain enqueue.
    #[test]
    fn task_message_golden_a() {
        let m = TaskMessage {
            r#type: "email:send".into(),
            payload: br#"{"to":"a@b.c"}"#.to_vec(),
            id: "7a1c1c3e-1c5d-4a3e-9f0e-000000000001".into(),
            queue: "default".into(),
            retry: 25,
            timeout: 1800,
            ..Default::default()
        };
        let golden = "0a0a656d61696c3a73656e64120e7b22746f223a226140622e63227d1a2437613163316333652d316335642d346133652d396630652d303030303030303030303031220764656661756c74281940880e";
        assert_eq!(hex_of(&m), golden);
        assert_eq!(
            TaskMessage::decode(&hex::decode(golden).unwrap()[..]).unwrap(),
            m
        );
    }

    /// Golden B (one header) and C (every field) of wire spec §4.1.
    #[test]
    fn task_message_golden_b_and_c() {
        let b = TaskMessage {
            r#type: "t".into(),
            id: "id1".into(),
            queue: "q".into(),
            retry: 3,
            retried: 1,
            error_msg: "boom".into(),
            timeout: 60,
            last_failed_at: 1_700_000_000,
            headers: [("k".to_string(), "v".to_string())].into(),
            ..Default::default()
        };
        assert_eq!(
            hex_of(&b),
            "0a01741a03696431220171280330013a04626f6f6d403c5880e2cfaa067a060a016b120176"
        );
        let c = TaskMessage {
            r#type: "t".into(),
            payload: vec![1, 2],
            id: "id2".into(),
            queue: "q".into(),
            retry: 5,
            retried: 2,
            error_msg: "e".into(),
            timeout: 10,
            deadline: 1_700_000_100,
            unique_key: "asynq:{q}:unique:t:abc".into(),
            last_failed_at: 1_700_000_000,
            retention: 3600,
            completed_at: 1_700_000_050,
            group_key: "g1".into(),
            headers: [("a".to_string(), "1".to_string())].into(),
        };
        let golden_c = "0a0174120201021a03696432220171280530023a0165400a48e4e2cfaa0652166173796e713a7b717d3a756e697175653a743a6162635880e2cfaa0660901c68b2e2cfaa06720267317a060a0161120131";
        assert_eq!(hex_of(&c), golden_c);
        assert_eq!(
            TaskMessage::decode(&hex::decode(golden_c).unwrap()[..]).unwrap(),
            c
        );
    }

    /// A negative int32 is a 10-byte varint, as Go encodes it (spec §4.1).
    #[test]
    fn negative_retry_is_ten_byte_varint() {
        let m = TaskMessage {
            r#type: "t".into(),
            id: "id3".into(),
            queue: "q".into(),
            retry: -1,
            ..Default::default()
        };
        assert_eq!(hex_of(&m), "0a01741a0369643322017128ffffffffffffffffff01");
    }

    /// ServerInfo, WorkerInfo and SchedulerEnqueueEvent goldens (spec §4.2–4.5).
    #[test]
    fn server_worker_event_goldens() {
        let s = ServerInfo {
            host: "h".into(),
            pid: 42,
            server_id: "sid".into(),
            concurrency: 10,
            queues: [("default".to_string(), 1)].into(),
            strict_priority: false,
            status: "active".into(),
            start_time: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 123_456_789,
            }),
            active_worker_count: 0,
        };
        assert_eq!(
            hex_of(&s),
            "0a0168102a1a03736964200a2a0b0a0764656661756c7410013a06616374697665420b0880e2cfaa0610959aef3a"
        );
        let w = WorkerInfo {
            host: "h".into(),
            pid: 42,
            server_id: "sid".into(),
            task_id: "id1".into(),
            task_type: "t".into(),
            task_payload: b"p".to_vec(),
            queue: "default".into(),
            start_time: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            deadline: Some(Timestamp {
                seconds: 1_700_001_800,
                nanos: 0,
            }),
        };
        assert_eq!(
            hex_of(&w),
            "0a0168102a1a0373696422036964312a01743201703a0764656661756c7442060880e2cfaa064a060888f0cfaa06"
        );
        let e = SchedulerEnqueueEvent {
            task_id: "id1".into(),
            enqueue_time: Some(Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
        };
        assert_eq!(hex_of(&e), "0a0369643112060880e2cfaa06");
    }

    /// "Never" is Go's zero time on the wire and decodes back to `None` (spec §4.4).
    #[test]
    fn zero_time_golden() {
        let e = SchedulerEntry {
            id: "x".into(),
            prev_enqueue_time: Some(Timestamp::from_utc(None)),
            ..Default::default()
        };
        assert_eq!(hex_of(&e), "0a01783a0b088092b8c398feffffff01");
        let back =
            SchedulerEntry::decode(&hex::decode("0a01783a0b088092b8c398feffffff01").unwrap()[..])
                .unwrap();
        assert_eq!(back.prev_enqueue_time.unwrap().to_utc(), None);
    }

    /// Fields from a newer peer (tags this version does not know) survive a
    /// decode/modify/encode cycle byte for byte.
    #[test]
    fn unknown_fields_survive_reencode() {
        let base = TaskMessage {
            r#type: "t".into(),
            id: "id".into(),
            queue: "q".into(),
            retry: 25,
            ..Default::default()
        };
        let mut bytes = base.encode_to_vec();
        // field 16, length-delimited "future"; field 17 varint 300; field 18 fixed64.
        let future: Vec<u8> = [
            &[0x82, 0x01, 6][..],
            b"future",
            &[0x88, 0x01, 0xac, 0x02],
            &[0x91, 0x01, 1, 2, 3, 4, 5, 6, 7, 8],
        ]
        .concat();
        bytes.extend_from_slice(&future);
        let mut wire = WireTask::decode(&bytes).unwrap();
        assert_eq!(wire.unknown, future);
        wire.msg.retried = 3;
        wire.msg.error_msg = "boom".into();
        let out = wire.encode();
        assert!(out.ends_with(&future));
        let again = WireTask::decode(&out).unwrap();
        assert_eq!(again.msg.retried, 3);
        assert_eq!(again.unknown, future);
    }

    #[test]
    fn truncated_message_is_an_error() {
        assert!(WireTask::decode(&[0x0a, 0x05, b'a']).is_err());
    }
}

/// Property tests: decode, round trip, unknown fields (issue 12).
#[cfg(test)]
mod props;
