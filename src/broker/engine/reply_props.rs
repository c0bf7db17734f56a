//! Property tests (issue 12): the lease and done script reply parsers
//! never panic, whatever Redis replies, and hold their contracts on
//! well-shaped replies.

use proptest::prelude::*;
use redis::Value;

use super::{DoneOutcome, decode_leased, done_outcomes};
use crate::broker::test_values::{any_value, any_values};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `decode_leased` returns (Ok or Err) on any reply; on success it
    /// yields at most one entry per id.
    #[test]
    fn decode_leased_never_panics(reply in any_values(24)) {
        let n = reply.len();
        if let Ok(leased) = decode_leased("q", reply) {
            prop_assert!(leased.len() <= n / 2);
        }
    }

    /// A reply of ids and msgs of the documented kinds (nil, bytes, the
    /// integer 0) always parses, one entry per non-nil msg.
    #[test]
    fn decode_leased_reads_every_well_shaped_reply(
        msgs in proptest::collection::vec(
            prop_oneof![
                Just(Value::Nil),
                Just(Value::Int(0)),
                proptest::collection::vec(any::<u8>(), 0..40).prop_map(Value::BulkString),
            ],
            0..12,
        )
    ) {
        let leased_count = msgs.iter().filter(|m| **m != Value::Nil).count();
        let mut reply: Vec<Value> = (0..msgs.len())
            .map(|i| Value::BulkString(format!("id-{i}").into_bytes()))
            .collect();
        reply.extend(msgs);
        let leased = decode_leased("q", reply).expect("well-shaped lease reply");
        prop_assert_eq!(leased.len(), leased_count);
    }

    /// `done_outcomes` returns on any reply and any task count; on success
    /// exactly one outcome per task.
    #[test]
    fn done_outcomes_never_panics(reply in any_value(), tasks in 0usize..20) {
        if let Ok(outcomes) = done_outcomes(reply, tasks) {
            prop_assert_eq!(outcomes.len(), tasks);
        }
    }

    /// One code in {1, 0, -1, -2} per task always parses, in order.
    #[test]
    fn done_outcomes_reads_every_code(codes in proptest::collection::vec(-2i64..=1, 1..20)) {
        let reply = Value::Array(codes.iter().map(|c| Value::Int(*c)).collect());
        let outcomes = done_outcomes(reply, codes.len()).expect("well-shaped done reply");
        for (code, outcome) in codes.iter().zip(outcomes) {
            let want = match code {
                1 => DoneOutcome::Done,
                0 => DoneOutcome::NotActive,
                -1 => DoneOutcome::NoLease,
                _ => DoneOutcome::NoHash,
            };
            prop_assert_eq!(outcome, want);
        }
    }
}
