//! Property tests (issue 12): decoding any bytes never panics, encoding
//! round-trips, and fields this version does not know survive a decode and
//! re-encode byte for byte (COMPATIBILITY.md P1).

use std::collections::BTreeMap;

use proptest::prelude::*;
use prost::Message;

use super::{SchedulerEnqueueEvent, SchedulerEntry, ServerInfo, TaskMessage, WireTask, WorkerInfo};

fn task_message() -> impl Strategy<Value = TaskMessage> {
    (
        (
            ".{0,12}",
            proptest::collection::vec(any::<u8>(), 0..64),
            ".{0,12}",
            ".{0,12}",
        ),
        (
            any::<i32>(),
            any::<i32>(),
            ".{0,16}",
            any::<i64>(),
            any::<i64>(),
        ),
        (
            ".{0,12}",
            any::<i64>(),
            any::<i64>(),
            any::<i64>(),
            ".{0,8}",
        ),
        proptest::collection::btree_map(".{0,6}", ".{0,6}", 0..4),
    )
        .prop_map(
            |(
                (r#type, payload, id, queue),
                (retry, retried, error_msg, timeout, deadline),
                (unique_key, last_failed_at, retention, completed_at, group_key),
                headers,
            )| TaskMessage {
                r#type,
                payload,
                id,
                queue,
                retry,
                retried,
                error_msg,
                timeout,
                deadline,
                unique_key,
                last_failed_at,
                retention,
                completed_at,
                group_key,
                headers: headers.into_iter().collect::<BTreeMap<_, _>>(),
            },
        )
}

/// One field with a tag `TaskMessage` does not declare (16 up to the
/// largest protobuf tag), of any wire type but groups, as encoded bytes.
fn unknown_field() -> impl Strategy<Value = Vec<u8>> {
    use prost::encoding::{WireType, encode_key, encode_varint};
    (
        16u32..=536_870_911,
        0u8..4,
        any::<u64>(),
        proptest::collection::vec(any::<u8>(), 0..20),
    )
        .prop_map(|(tag, kind, n, bytes)| {
            let mut out = Vec::new();
            match kind {
                0 => {
                    encode_key(tag, WireType::Varint, &mut out);
                    encode_varint(n, &mut out);
                }
                1 => {
                    encode_key(tag, WireType::SixtyFourBit, &mut out);
                    out.extend_from_slice(&n.to_le_bytes());
                }
                2 => {
                    encode_key(tag, WireType::ThirtyTwoBit, &mut out);
                    out.extend_from_slice(&(n as u32).to_le_bytes());
                }
                _ => {
                    encode_key(tag, WireType::LengthDelimited, &mut out);
                    encode_varint(bytes.len() as u64, &mut out);
                    out.extend_from_slice(&bytes);
                }
            }
            out
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Any bytes: every decoder returns (Ok or Err), none panics.
    #[test]
    fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = WireTask::decode(&bytes);
        let _ = ServerInfo::decode(&bytes[..]);
        let _ = WorkerInfo::decode(&bytes[..]);
        let _ = SchedulerEntry::decode(&bytes[..]);
        let _ = SchedulerEnqueueEvent::decode(&bytes[..]);
    }

    /// A valid message with a few bytes flipped: decode still returns.
    #[test]
    fn decode_of_damaged_message_never_panics(
        msg in task_message(),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
    ) {
        let mut bytes = msg.encode_to_vec();
        if !bytes.is_empty() {
            for (at, b) in flips {
                let i = at % bytes.len();
                bytes[i] ^= b;
            }
        }
        let _ = WireTask::decode(&bytes);
    }

    /// What we encode decodes to the same message, with no unknown fields.
    #[test]
    fn encode_round_trips(msg in task_message()) {
        let wire = WireTask { msg, unknown: Vec::new() };
        let again = WireTask::decode(&wire.encode()).expect("decode what we encoded");
        prop_assert_eq!(again, wire);
    }

    /// Unknown fields after the known ones come back byte for byte, and a
    /// re-encode reproduces the input exactly.
    #[test]
    fn unknown_fields_are_kept(
        msg in task_message(),
        fields in proptest::collection::vec(unknown_field(), 1..5),
    ) {
        let unknown: Vec<u8> = fields.concat();
        let mut bytes = msg.encode_to_vec();
        bytes.extend_from_slice(&unknown);
        let wire = WireTask::decode(&bytes).expect("decode with unknown fields");
        prop_assert_eq!(&wire.msg, &msg);
        prop_assert_eq!(&wire.unknown, &unknown);
        prop_assert_eq!(wire.encode(), bytes);
    }

    /// Unknown fields between known ones (as a newer peer may write them)
    /// are kept in their order, and the known fields still decode.
    #[test]
    fn interleaved_unknown_fields_are_kept(
        msg in task_message(),
        front in unknown_field(),
        back in unknown_field(),
    ) {
        let mut bytes = front.clone();
        bytes.extend_from_slice(&msg.encode_to_vec());
        bytes.extend_from_slice(&back);
        let wire = WireTask::decode(&bytes).expect("decode interleaved");
        prop_assert_eq!(&wire.msg, &msg);
        prop_assert_eq!(wire.unknown, [front, back].concat());
    }
}
