//! Formatting of payloads, results and times for pages.
//!
//! Payloads are shown as pretty JSON when they parse as JSON, as text when
//! they are UTF-8 (newlines and non-ASCII shown as they are, unlike
//! asynqmon's "non-printable bytes"), else as hex. Templates escape all of
//! it: text from Redis is never trusted.

use chrono::{DateTime, Utc};

/// How a payload or result reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preview {
    /// `json`, `text`, `binary` or `empty`.
    pub kind: &'static str,
    /// The text to show (possibly cut).
    pub text: String,
    /// Whether `text` was cut to the limit.
    pub truncated: bool,
}

/// Formats `bytes` for display, cut to `max_chars` characters.
pub fn preview(bytes: &[u8], max_chars: usize, pretty: bool) -> Preview {
    if bytes.is_empty() {
        return Preview {
            kind: "empty",
            text: String::new(),
            truncated: false,
        };
    }
    let (kind, text) = match std::str::from_utf8(bytes) {
        Ok(s) => match serde_json::from_str::<serde_json::Value>(s) {
            Ok(v) if pretty => (
                "json",
                serde_json::to_string_pretty(&v).unwrap_or_else(|_| s.to_string()),
            ),
            Ok(v) => (
                "json",
                serde_json::to_string(&v).unwrap_or_else(|_| s.to_string()),
            ),
            Err(_) => ("text", s.to_string()),
        },
        Err(_) => ("binary", hex_spaced(bytes)),
    };
    let count = text.chars().count();
    if count > max_chars {
        let cut: String = text.chars().take(max_chars).collect();
        Preview {
            kind,
            text: cut,
            truncated: true,
        }
    } else {
        Preview {
            kind,
            text,
            truncated: false,
        }
    }
}

fn hex_spaced(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// `2026-11-29 19:50:01 UTC`.
pub fn utc(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// RFC 3339 for `<time datetime=...>` (the browser adds local time).
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Distance from `now` to `t` in words: `in 4m 10s`, `3h 2m ago`, `now`.
pub fn relative(t: DateTime<Utc>, now: DateTime<Utc>) -> String {
    let secs = (t - now).num_seconds();
    if secs == 0 {
        return "now".to_string();
    }
    let span = human_duration(secs.unsigned_abs());
    if secs > 0 {
        format!("in {span}")
    } else {
        format!("{span} ago")
    }
}

/// `1d 2h`, `3h 4m`, `5m 6s`, `7s`: the two largest units.
pub fn human_duration(secs: u64) -> String {
    let (d, h, m, s) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60, secs % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m {s}s"),
        (0, _, _) => format!("{h}h {m}m"),
        _ => format!("{d}d {h}h"),
    }
}

/// Bytes as `12.3 KB` (powers of 1000, as asynqmon).
pub fn bytes(n: i64) -> String {
    let n = n.max(0) as f64;
    match n {
        n if n >= 1e9 => format!("{:.2} GB", n / 1e9),
        n if n >= 1e6 => format!("{:.2} MB", n / 1e6),
        n if n >= 1e3 => format!("{:.2} KB", n / 1e3),
        n => format!("{n} B"),
    }
}

/// failed / processed as a percentage with two decimals; `0.00%` when nothing ran.
pub fn error_rate(failed: i64, processed: i64) -> String {
    if processed <= 0 {
        "0.00%".to_string()
    } else {
        format!("{:.2}%", failed as f64 * 100.0 / processed as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// JSON is pretty-printed, text with newlines and non-ASCII stays text,
    /// invalid UTF-8 is hex; cuts count characters, not bytes.
    #[test]
    fn previews() {
        assert_eq!(preview(br#"{"a":1}"#, 100, true).text, "{\n  \"a\": 1\n}");
        assert_eq!(preview(br#"{"a":1}"#, 100, false).text, r#"{"a":1}"#);
        let t = preview("line1\nпривет".as_bytes(), 100, true);
        assert_eq!((t.kind, t.text.as_str()), ("text", "line1\nпривет"));
        let b = preview(&[0xff, 0x00, 0x41], 100, true);
        assert_eq!((b.kind, b.text.as_str()), ("binary", "ff 00 41"));
        let cut = preview("привет мир".as_bytes(), 6, true);
        assert_eq!((cut.text.as_str(), cut.truncated), ("привет", true));
        assert_eq!(preview(b"", 10, true).kind, "empty");
    }

    #[test]
    fn times_and_numbers() {
        let now = DateTime::from_timestamp(1_000_000, 0).unwrap();
        assert_eq!(
            relative(now + chrono::Duration::seconds(250), now),
            "in 4m 10s"
        );
        assert_eq!(
            relative(now - chrono::Duration::seconds(3 * 3600 + 120), now),
            "3h 2m ago"
        );
        assert_eq!(relative(now, now), "now");
        assert_eq!(human_duration(90_000), "1d 1h");
        assert_eq!(bytes(12_345), "12.35 KB");
        assert_eq!(error_rate(1, 3), "33.33%");
        assert_eq!(error_rate(0, 0), "0.00%");
        assert_eq!(utc(now), "1970-01-12 13:46:40 UTC");
    }
}
