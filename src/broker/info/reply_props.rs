//! Property tests (issue 12): the `CLUSTER SLOTS` reply parser never
//! panics, whatever Redis replies.

use proptest::prelude::*;

use super::{as_int, as_text, parse_slots};
use crate::broker::test_values::any_value;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// `parse_slots` returns on any reply; every range it returns came from
    /// an entry of the reply.
    #[test]
    fn parse_slots_never_panics(reply in any_value(), host in "[a-z0-9.:]{0,12}") {
        let ranges = parse_slots(&reply, &host);
        let entries = match &reply {
            redis::Value::Array(v) => v.len(),
            _ => 0,
        };
        prop_assert!(ranges.len() <= entries);
    }

    /// The scalar readers return on any value.
    #[test]
    fn scalar_readers_never_panic(v in any_value()) {
        let _ = as_int(&v);
        let _ = as_text(&v);
    }
}
