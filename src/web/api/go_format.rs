//! Go's formatting as asynqmon's JSON shows it: `time.Time` fields
//! ([`go_time`]), `string` time fields ([`rfc3339`]), `time.Duration`
//! ([`go_duration`], [`go_round`]) and payload and result bytes
//! ([`format_bytes`]). asynqmon v0.7.2 `conversion_helpers.go`. Every time
//! is written in UTC (`Z`).

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};

/// Go's zero `time.Time` as JSON and RFC 3339 render it.
pub const GO_ZERO_TIME: &str = "0001-01-01T00:00:00Z";

/// What asynqmon shows for a payload or result it cannot print.
pub const NON_PRINTABLE: &str = "non-printable bytes";

/// Go's zero time as a chrono value (for TTL arithmetic on a missing time).
pub(super) fn go_zero() -> DateTime<Utc> {
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
pub(super) fn rfc3339_or_empty(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| rfc3339(Some(t))).unwrap_or_default()
}

pub use crate::scheduler::go_duration::go_duration;

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
