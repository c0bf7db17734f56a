//! Formatting of payloads, results and times for pages.
//!
//! Payloads are shown as pretty JSON when they parse as JSON, as text when
//! they are UTF-8 (newlines and non-ASCII shown as they are, unlike
//! asynqmon's "non-printable bytes"), else as hex. Templates escape all of
//! it: text from Redis is never trusted.

use chrono::{DateTime, Utc};

/// Most characters of a LastErr shown in a list (a tab's rows, search
/// results): an error can be a whole HTML page of tens of KB, and 500 rows
/// of them made pages of hundreds of MB. The task page shows it whole.
pub const LIST_ERROR_CHARS: usize = 500;

/// `s` cut to `max` characters, with `…` appended when it was longer.
pub fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_string(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

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

/// How many leading bytes of a payload [`preview`] reads for a preview of
/// `max_chars` characters: `4 × (max_chars + 1)`, enough for `max_chars`
/// UTF-8 characters and one more (which tells a cut), and for the spaced
/// hex of `max_chars / 3 + 1` bytes. Saturates (`usize::MAX` reads all).
pub fn preview_head_len(max_chars: usize) -> usize {
    max_chars.saturating_add(1).saturating_mul(4)
}

/// Formats `bytes` for display, cut to `max_chars` characters.
///
/// Costs O(`max_chars`) whatever the payload size (R10): only the first
/// [`preview_head_len`] bytes are looked at. The kind is decided on that
/// head: UTF-8 text (a character cut by the head's end does not count),
/// else `binary` (spaced hex of the first bytes). JSON is parsed, and
/// pretty-printed when `pretty`, only when the whole payload fits in the
/// head; a longer document is shown as its text.
pub fn preview(bytes: &[u8], max_chars: usize, pretty: bool) -> Preview {
    if bytes.is_empty() {
        return Preview {
            kind: "empty",
            text: String::new(),
            truncated: false,
        };
    }
    let head = &bytes[..bytes.len().min(preview_head_len(max_chars))];
    let whole = head.len() == bytes.len();
    let text = match std::str::from_utf8(head) {
        Ok(s) => Some(s),
        // The head's end split a character: the text before it.
        Err(e) if !whole && e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).ok()
        }
        Err(_) => None,
    };
    let Some(text) = text else {
        return binary_preview(bytes, max_chars);
    };
    if whole && let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let json = if pretty {
            serde_json::to_string_pretty(&v)
        } else {
            serde_json::to_string(&v)
        };
        return cut("json", json.as_deref().unwrap_or(text), max_chars, false);
    }
    cut("text", text, max_chars, !whole)
}

/// `text` cut to `max_chars` characters; `more` says bytes follow it.
fn cut(kind: &'static str, text: &str, max_chars: usize, more: bool) -> Preview {
    match text.char_indices().nth(max_chars) {
        Some((at, _)) => Preview {
            kind,
            text: text[..at].to_string(),
            truncated: true,
        },
        None => Preview {
            kind,
            text: text.to_string(),
            truncated: more,
        },
    }
}

/// Spaced hex of the first bytes of `bytes`, cut to `max_chars`
/// characters: reads at most `max_chars / 3 + 1` bytes.
fn binary_preview(bytes: &[u8], max_chars: usize) -> Preview {
    let shown = bytes.len().min(max_chars / 3 + 1);
    let mut text = hex_spaced(&bytes[..shown]);
    // Full hex length: 3 characters a byte, less the last separator.
    let full_len = bytes.len().saturating_mul(3) - 1;
    text.truncate(max_chars);
    Preview {
        kind: "binary",
        text,
        truncated: full_len > max_chars,
    }
}

fn hex_spaced(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(bytes.len() * 3);
    for (i, b) in bytes.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        let _ = write!(s, "{b:02x}");
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

    /// R10: a listing preview depends only on the first
    /// [`preview_head_len`] bytes of the payload: a 5 MB payload whose tail
    /// differs gives the same preview as its head alone, so no byte past
    /// the head is read (hex-encoded, validated or copied).
    #[test]
    fn r10_list_preview_reads_only_the_head() {
        let max = 200;
        let head = preview_head_len(max);
        assert_eq!(head, 4 * (max + 1));
        // Text head, binary tail: still text, cut at 200 characters.
        let mut big = vec![b'a'; 5_000_000];
        big[head..].fill(0xff);
        let p = preview(&big, max, true);
        assert_eq!(
            (p.kind, p.text.as_str(), p.truncated),
            ("text", "a".repeat(max).as_str(), true)
        );
        let mut other_tail = big.clone();
        other_tail[head..].fill(b'a');
        assert_eq!(preview(&other_tail, max, true), p);
        // Binary: the first 200 characters of the spaced hex.
        let bin: Vec<u8> = (0..5_000_000u32).map(|i| (i % 251) as u8 | 0x80).collect();
        let p = preview(&bin, max, true);
        let want: Vec<String> = bin[..67].iter().map(|b| format!("{b:02x}")).collect();
        let want = want.join(" ");
        assert_eq!((p.kind, p.truncated), ("binary", true));
        assert_eq!(p.text, want[..max]);
        let mut bin_tail = bin.clone();
        bin_tail[head..].fill(b'z');
        assert_eq!(preview(&bin_tail, max, true), p);
        // A whole JSON document that fits the head is still pretty-printed;
        // a cut one is text.
        assert_eq!(preview(br#"{"a":1}"#, max, true).kind, "json");
        let long_json = format!("[{}1]", "1,".repeat(1000));
        let p = preview(long_json.as_bytes(), max, true);
        assert_eq!((p.kind, p.text.as_str()), ("text", &long_json[..max]));
        // A multi-byte character cut by the head boundary is not binary.
        let cyr = "я".repeat(3000);
        let p = preview(cyr.as_bytes(), max, true);
        assert_eq!(
            (p.kind, p.text, p.truncated),
            ("text", "я".repeat(max), true)
        );
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
