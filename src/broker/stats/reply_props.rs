//! Property tests (issue 12): the statistics script reply parsers
//! (`queue_stats`, `queues_stats` with samples) and the sample member
//! parser never panic, whatever Redis replies, and read a well-shaped
//! reply exactly.

use chrono::{DateTime, Utc};
use proptest::prelude::*;
use redis::Value;

use super::KeyKinds;
use super::reply::{counter_of, int_of, parse_queue, parse_samples_part, parse_stats, resp2};
use crate::broker::samples::parse_sample;
use crate::broker::test_values::{any_value, any_values};

fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_900_000_000, 0).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `parse_stats` returns on any reply.
    #[test]
    fn parse_stats_never_panics(reply in any_values(18)) {
        let _ = parse_stats("q", now(), reply);
    }

    /// Fourteen integers (counters as decimal strings) always parse, to
    /// the same numbers.
    #[test]
    fn parse_stats_reads_integers(n in proptest::collection::vec(0i64..1_000_000, 14)) {
        let reply: Vec<Value> = n
            .iter()
            .enumerate()
            .map(|(i, v)| match i {
                6..=9 => Value::BulkString(v.to_string().into_bytes()),
                10 => Value::Int(v % 2),
                _ => Value::Int(*v),
            })
            .collect();
        let s = parse_stats("q", now(), reply).expect("well-shaped stats reply");
        prop_assert_eq!(
            (s.pending, s.active, s.scheduled, s.retry, s.archived, s.completed),
            (n[0], n[1], n[2], n[3], n[4], n[5])
        );
        prop_assert_eq!((s.processed, s.failed, s.processed_total, s.failed_total), (n[6], n[7], n[8], n[9]));
        prop_assert_eq!(s.paused, n[10] % 2 == 1);
        prop_assert_eq!((s.groups, s.aggregating), (n[12], n[13]));
    }

    /// `parse_queue` (one queue's part of the flat `queues_stats` reply)
    /// returns on any reply, any kinds read, any MGET values, with or
    /// without samples, and never moves its cursor past the reply.
    #[test]
    fn parse_queue_never_panics(
        flat in any_values(24),
        start in 0usize..4,
        kinds in 0u8..64,
        strings in any_values(7),
        with_samples in any::<bool>(),
    ) {
        let mut at = start.min(flat.len());
        let before = at;
        let _ = parse_queue("q", now(), &flat, &mut at, KeyKinds(kinds), &strings, with_samples);
        prop_assert!(at >= before);
        prop_assert!(at <= flat.len());
    }

    /// The samples part returns on any reply, even with a huge count.
    #[test]
    fn parse_samples_part_never_panics(mut flat in any_values(12), count in any::<i64>(), first in any::<bool>()) {
        if first {
            flat.insert(0, Value::Int(count));
        }
        let mut at = 0;
        let _ = parse_samples_part("q", &flat, &mut at);
    }

    /// The value helpers return on any value.
    #[test]
    fn value_helpers_never_panic(v in any_value()) {
        let _ = int_of(&v, "x");
        let _ = counter_of(&v, "k");
        let _ = resp2(v);
    }

    /// Sample members: any bytes; a well-formed member reads back.
    #[test]
    fn parse_sample_never_panics(
        member in proptest::collection::vec(any::<u8>(), 0..40),
        at in 0i64..4_000_000_000,
        retry in 0i64..1_000_000,
        archived in 0i64..1_000_000,
    ) {
        let _ = parse_sample(&member);
        let text = format!("{at}:{retry}:{archived}");
        let (t, r, a) = parse_sample(text.as_bytes()).expect("well-formed sample");
        prop_assert_eq!((t.timestamp(), r, a), (at, retry, archived));
    }
}
