//! Arbitrary Redis replies for the property tests of the script reply
//! parsers (issue 12): every [`redis::Value`] variant a RESP2 or RESP3
//! server can send, nested up to four levels, with small integers and
//! short strings weighted in so that well-shaped replies come up too.

use proptest::prelude::*;
use redis::{PushKind, Value, VerbatimFormat};

/// A leaf value: integers (small, negative, extreme), bulk and simple
/// strings (digits, text, bytes), nil, OK, doubles, booleans, verbatim
/// strings, big numbers and error replies.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => (-3i64..5).prop_map(Value::Int),
        2 => any::<i64>().prop_map(Value::Int),
        2 => Just(Value::Nil),
        3 => "[0-9]{0,12}".prop_map(|s| Value::BulkString(s.into_bytes())),
        2 => "[0-9a-z:-]{0,16}".prop_map(|s| Value::BulkString(s.into_bytes())),
        2 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(Value::BulkString),
        1 => ".{0,12}".prop_map(Value::SimpleString),
        1 => Just(Value::Okay),
        1 => any::<f64>().prop_map(Value::Double),
        1 => any::<bool>().prop_map(Value::Boolean),
        1 => ".{0,8}".prop_map(|text| Value::VerbatimString {
            format: VerbatimFormat::Text,
            text,
        }),
        1 => "[0-9]{1,30}".prop_map(|s| Value::BigNumber(s.into_bytes())),
        1 => "[A-Z]{3,8} .{0,12}".prop_map(|line| {
            redis::parse_redis_value(format!("-{line}\r\n").as_bytes())
                .unwrap_or(Value::Nil)
        }),
    ]
}

/// Any reply: a leaf, or arrays, sets, maps, attributes and pushes of them.
pub(crate) fn any_value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(4, 64, 16, |inner| {
        prop_oneof![
            4 => proptest::collection::vec(inner.clone(), 0..16).prop_map(Value::Array),
            1 => proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Set),
            1 => proptest::collection::vec((inner.clone(), inner.clone()), 0..4)
                .prop_map(Value::Map),
            1 => (inner.clone(), proptest::collection::vec((inner.clone(), inner.clone()), 0..2))
                .prop_map(|(data, attributes)| Value::Attribute {
                    data: Box::new(data),
                    attributes,
                }),
            1 => proptest::collection::vec(inner, 0..4).prop_map(|data| Value::Push {
                kind: PushKind::Message,
                data,
            }),
        ]
    })
}

/// A flat list of replies (what a script's array reply holds).
pub(crate) fn any_values(max: usize) -> impl Strategy<Value = Vec<Value>> {
    proptest::collection::vec(any_value(), 0..max)
}
