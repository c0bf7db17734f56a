//! The fields of the enqueue form (issue 17 item 8) as the browser sends
//! them, their parsing into a [`Task`] and [`EnqueueOptions`] (every error
//! named by its field), and the prefill of "Clone" from an existing task.
//!
//! Field formats: durations in Go's form (`30s`, `1h30m`); times as RFC
//! 3339 (`2026-12-06T09:00:00Z`) or as a browser's `datetime-local` value
//! (`2026-12-06T09:00`, read as UTC); headers one `key: value` per line;
//! the payload as text, as JSON (checked, stored as typed) or as base64
//! (for binary payloads).

use std::collections::BTreeMap;
use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, NaiveDateTime, Utc};
use serde::Deserialize;

use crate::scheduler::parse_go_duration;
use crate::task::{EnqueueOptions, Task, TaskInfo};

/// How the payload field is read.
pub const PAYLOAD_FORMATS: [&str; 3] = ["text", "json", "base64"];

/// The form as posted (every field a string; blank = not set).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default)]
pub struct EnqueueForm {
    pub task_type: String,
    pub payload: String,
    /// `text`, `json` or `base64`.
    pub payload_format: String,
    pub queue: String,
    pub max_retry: String,
    pub timeout: String,
    pub deadline: String,
    pub process_at: String,
    pub process_in: String,
    pub unique: String,
    pub task_id: String,
    pub retention: String,
    pub group: String,
    /// One `key: value` per line.
    pub headers: String,
}

/// The payload field's bytes per `format` (`text`, `json`, `base64`).
/// Errors name the field.
pub fn payload_bytes(payload: &str, format: &str) -> Result<Vec<u8>, String> {
    match format {
        "json" => serde_json::from_str::<serde_json::Value>(payload)
            .map(|_| payload.as_bytes().to_vec())
            .map_err(|e| format!("payload: not valid JSON: {e}")),
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(payload.split_whitespace().collect::<String>())
            .map_err(|e| format!("payload: not valid base64: {e}")),
        "text" | "" => Ok(payload.as_bytes().to_vec()),
        other => Err(format!(
            "payload: unknown format {other:?} (text, json or base64)"
        )),
    }
}

/// `(text, format)` showing `bytes` in the form: text when UTF-8 (`json`
/// when it also parses as JSON), else base64.
pub fn payload_field(bytes: &[u8]) -> (String, &'static str) {
    // A browser's textarea turns CR LF into LF and NUL into U+FFFD, so text
    // with control characters other than newline and tab goes as base64 to
    // come back byte for byte.
    let safe = |s: &str| !s.chars().any(|c| c.is_control() && c != '\n' && c != '\t');
    match std::str::from_utf8(bytes).ok().filter(|s| safe(s)) {
        None => (
            base64::engine::general_purpose::STANDARD.encode(bytes),
            "base64",
        ),
        Some(s) if !s.trim().is_empty() && serde_json::from_str::<serde_json::Value>(s).is_ok() => {
            (s.to_string(), "json")
        }
        Some(s) => (s.to_string(), "text"),
    }
}

/// A time field: RFC 3339, or `YYYY-MM-DDTHH:MM[:SS]` read as UTC.
fn parse_time(field: &str, s: &str) -> Result<DateTime<Utc>, String> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    ["%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M"]
        .iter()
        .find_map(|f| NaiveDateTime::parse_from_str(s, f).ok())
        .map(|t| t.and_utc())
        .ok_or_else(|| {
            format!("{field}: {s:?} is not a time (RFC 3339, or YYYY-MM-DDTHH:MM in UTC)")
        })
}

fn parse_duration(field: &str, s: &str) -> Result<Duration, String> {
    parse_go_duration(s).map_err(|e| format!("{field}: {e}"))
}

impl EnqueueForm {
    /// The task and its options, or every problem found (one line each,
    /// named by field).
    pub fn parse(&self) -> Result<(Task, EnqueueOptions), Vec<String>> {
        let mut errors = Vec::new();
        let mut opts = EnqueueOptions::new();
        let t = |s: &str| s.trim().to_string();
        if t(&self.task_type).is_empty() {
            errors.push("type: required".to_string());
        }
        let payload =
            payload_bytes(&self.payload, self.payload_format.trim()).unwrap_or_else(|e| {
                errors.push(e);
                Vec::new()
            });
        let mut set =
            |field: &str, value: &str, apply: &mut dyn FnMut(&str) -> Result<(), String>| {
                let v = value.trim();
                if !v.is_empty()
                    && let Err(e) = apply(v)
                {
                    errors.push(if e.starts_with(field) {
                        e
                    } else {
                        format!("{field}: {e}")
                    });
                }
            };
        set("queue", &self.queue, &mut |v| {
            opts = std::mem::take(&mut opts).queue(v);
            Ok(())
        });
        set("max retry", &self.max_retry, &mut |v| {
            let n: i32 = v
                .parse()
                .map_err(|_| format!("{v:?} is not a whole number"))?;
            opts = std::mem::take(&mut opts).max_retry(n);
            Ok(())
        });
        set("timeout", &self.timeout, &mut |v| {
            opts = std::mem::take(&mut opts).timeout(parse_duration("timeout", v)?);
            Ok(())
        });
        set("deadline", &self.deadline, &mut |v| {
            opts = std::mem::take(&mut opts).deadline(parse_time("deadline", v)?);
            Ok(())
        });
        set("process at", &self.process_at, &mut |v| {
            opts = std::mem::take(&mut opts).process_at(parse_time("process at", v)?);
            Ok(())
        });
        set("process in", &self.process_in, &mut |v| {
            opts = std::mem::take(&mut opts).process_in(parse_duration("process in", v)?);
            Ok(())
        });
        set("unique", &self.unique, &mut |v| {
            opts = std::mem::take(&mut opts).unique(parse_duration("unique", v)?);
            Ok(())
        });
        set("task id", &self.task_id, &mut |v| {
            opts = std::mem::take(&mut opts).task_id(v);
            Ok(())
        });
        set("retention", &self.retention, &mut |v| {
            opts = std::mem::take(&mut opts).retention(parse_duration("retention", v)?);
            Ok(())
        });
        set("group", &self.group, &mut |v| {
            opts = std::mem::take(&mut opts).group(v);
            Ok(())
        });
        let mut headers = BTreeMap::new();
        for (i, line) in self.headers.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match line.split_once(':') {
                Some((k, v)) if !k.trim().is_empty() => {
                    headers.insert(k.trim().to_string(), v.trim().to_string());
                }
                _ => errors.push(format!(
                    "headers: line {} is not \"key: value\": {:?}",
                    i + 1,
                    line.trim()
                )),
            }
        }
        if !self.process_at.trim().is_empty() && !self.process_in.trim().is_empty() {
            errors.push("process at / process in: give one, not both".to_string());
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok((
            Task::new(t(&self.task_type), payload).with_headers(headers),
            opts,
        ))
    }

    /// A form for a clone of `task`: its type, payload, queue, max retry,
    /// timeout, deadline, retention, group and headers; not its id (a new
    /// one is made), uniqueness (its TTL is not stored) or process time.
    pub fn clone_of(task: &TaskInfo) -> EnqueueForm {
        let (payload, format) = payload_field(&task.payload);
        let d = |d: Duration| {
            if d.is_zero() {
                String::new()
            } else {
                crate::scheduler::go_duration::go_duration(d)
            }
        };
        EnqueueForm {
            task_type: task.task_type.clone(),
            payload,
            payload_format: format.to_string(),
            queue: task.queue.clone(),
            max_retry: task.max_retry.to_string(),
            timeout: d(task.timeout),
            deadline: task
                .deadline
                .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
                .unwrap_or_default(),
            retention: d(task.retention),
            group: task.group.clone(),
            headers: task
                .headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}"))
                .collect::<Vec<_>>()
                .join("\n"),
            ..EnqueueForm::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field parses into its option; errors name their field.
    #[test]
    fn fields_parse_and_errors_name_the_field() {
        let f = EnqueueForm {
            task_type: " email:send ".into(),
            payload: r#"{"to":"a@b.c"}"#.into(),
            payload_format: "json".into(),
            queue: "critical".into(),
            max_retry: "3".into(),
            timeout: "1m30s".into(),
            deadline: "2026-12-06T10:00".into(),
            process_in: "2h".into(),
            unique: "1h".into(),
            task_id: "id-1".into(),
            retention: "24h".into(),
            group: "".into(),
            headers: "trace: abc\n\nx-user: eve ".into(),
            ..EnqueueForm::default()
        };
        let (task, o) = f.parse().unwrap();
        assert_eq!(task.type_name(), "email:send");
        assert_eq!(task.payload(), br#"{"to":"a@b.c"}"#);
        assert_eq!(
            task.headers()
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect::<Vec<_>>(),
            [("trace", "abc"), ("x-user", "eve")]
        );
        let want = EnqueueOptions::new()
            .queue("critical")
            .max_retry(3)
            .timeout(Duration::from_secs(90))
            .deadline("2026-12-06T10:00:00Z".parse().unwrap())
            .process_in(Duration::from_secs(7200))
            .unique(Duration::from_secs(3600))
            .task_id("id-1")
            .retention(Duration::from_secs(86400));
        assert_eq!(o, want);

        let bad = EnqueueForm {
            payload: "{nope".into(),
            payload_format: "json".into(),
            max_retry: "x".into(),
            timeout: "3x".into(),
            process_at: "tomorrow".into(),
            process_in: "1h".into(),
            headers: "novalue".into(),
            ..EnqueueForm::default()
        };
        let errs = bad.parse().unwrap_err();
        assert_eq!(errs.len(), 7, "{errs:?}");
        assert_eq!(errs[0], "type: required");
        assert!(errs[1].starts_with("payload: not valid JSON: "), "{errs:?}");
        assert_eq!(errs[2], "max retry: \"x\" is not a whole number");
        assert_eq!(
            errs[3],
            "timeout: time: unknown unit \"x\" in duration \"3x\""
        );
        assert_eq!(
            errs[4],
            "process at: \"tomorrow\" is not a time (RFC 3339, or YYYY-MM-DDTHH:MM in UTC)"
        );
        assert_eq!(
            errs[5],
            "headers: line 1 is not \"key: value\": \"novalue\""
        );
        assert_eq!(errs[6], "process at / process in: give one, not both");
    }

    /// Binary payloads go through base64 both ways; UTF-8 stays text.
    #[test]
    fn payload_formats_round_trip() {
        let bin = vec![0u8, 159, 146, 150];
        let (text, fmt) = payload_field(&bin);
        assert_eq!(fmt, "base64");
        assert_eq!(payload_bytes(&text, fmt).unwrap(), bin);
        assert_eq!(payload_field(b"hello"), ("hello".to_string(), "text"));
        assert_eq!(payload_field(b"[1,2]"), ("[1,2]".to_string(), "json"));
        // CR and NUL would not survive a textarea: base64.
        assert_eq!(payload_field(b"a\r\nb"), ("YQ0KYg==".to_string(), "base64"));
        assert_eq!(payload_field(b"a\0"), ("YQA=".to_string(), "base64"));
        assert_eq!(payload_field(b"\nx\ty"), ("\nx\ty".to_string(), "text"));
        assert_eq!(payload_bytes("aGk=\n", "base64").unwrap(), b"hi".to_vec());
    }
}
