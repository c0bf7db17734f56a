//! The export record of a task (S31): what the archive export writes for
//! each task, as one NDJSON line or one CSV row. Used by the dashboard's
//! `…/{state}/export` route, `asynqdeck export` and the engine's archive
//! exporter (`--archive-export-dir`).
//!
//! # Fields
//! Everything the task page shows, in this order (the CSV header row is
//! [`COLUMNS`]):
//!
//! | Field | Value |
//! | --- | --- |
//! | `id`, `queue`, `type`, `state` | text |
//! | `payload` | the payload as text when it is UTF-8, else base64 (standard alphabet, padded) |
//! | `payload_encoding` | `text` or `base64` |
//! | `headers` | an object of text values (CSV: that object as JSON text) |
//! | `max_retry`, `retried` | integers |
//! | `last_err` | text, empty when none |
//! | `last_failed_at`, `deadline`, `next_process_at`, `completed_at`, `kept_until` | RFC 3339 UTC (`2026-12-05T23:12:00Z`), `null` (CSV: empty) when none |
//! | `timeout`, `retention` | whole seconds |
//! | `group` | text, empty when none |
//! | `result` | as the payload; `null` (CSV: empty) when the task has none |
//! | `result_encoding` | `text`, `base64`, or `null` (CSV: empty) without a result |
//! | `is_orphaned` | boolean (CSV: `true`/`false`) |
//!
//! `kept_until` is `completed_at + retention` (the task page's "Kept
//! until"). A task whose record cannot be read (its `msg` is absent or does
//! not decode) becomes `{"id":…,"state":…,"error":…}` (CSV: a row with only
//! `id`, `state` and the last column, `error`, filled); the `error` column
//! is empty for every other row and the key is absent from their lines.
//!
//! CSV text cells that a spreadsheet would run as a formula (starting with
//! `=`, `+`, `-`, `@`, a tab or a CR) are written with a leading `'`
//! ([`csv_text`]); NDJSON values are written as they are.

use std::fmt::Write as _;
use std::time::Duration;

use base64::Engine as _;
use chrono::{DateTime, SecondsFormat, Utc};
use serde_json::{Map, Value, json};

use crate::task::{TaskInfo, TaskRow};

/// Most tasks read per Redis call while exporting.
pub const EXPORT_CHUNK: u64 = 500;

/// Byte budget of one Redis call while exporting: the msg and result bytes
/// it reads, 1 MiB. A call always reads one task, then the next ones only
/// while their total stays within this, so tasks of a few hundred bytes go
/// [`EXPORT_CHUNK`] per call, tasks of 200 KB 5 per call and tasks of 4 MB
/// one per call: no call holds Redis for long whatever the tasks' size
/// (COMPATIBILITY.md#n1).
pub const EXPORT_CHUNK_BYTES: u64 = 1 << 20;

/// The output format of an export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// One JSON object per line (`application/x-ndjson`).
    Ndjson,
    /// RFC 4180 CSV with a header row ([`COLUMNS`]), CRLF line ends.
    Csv,
}

impl ExportFormat {
    /// `ndjson` or `csv` (case-insensitive); `None` for anything else.
    pub fn parse(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "ndjson" | "jsonl" => Some(ExportFormat::Ndjson),
            "csv" => Some(ExportFormat::Csv),
            _ => None,
        }
    }

    /// The file extension: `ndjson` or `csv`.
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Ndjson => "ndjson",
            ExportFormat::Csv => "csv",
        }
    }

    /// The HTTP content type.
    pub fn content_type(self) -> &'static str {
        match self {
            ExportFormat::Ndjson => "application/x-ndjson; charset=utf-8",
            ExportFormat::Csv => "text/csv; charset=utf-8",
        }
    }

    /// What comes before the first row: the CSV header row, nothing for NDJSON.
    pub fn prologue(self) -> String {
        match self {
            ExportFormat::Ndjson => String::new(),
            ExportFormat::Csv => csv_line(COLUMNS.iter().map(|c| c.to_string())),
        }
    }

    /// One row in this format, line end included.
    pub fn row(self, row: &TaskRow) -> String {
        match self {
            ExportFormat::Ndjson => ndjson_line(row),
            ExportFormat::Csv => csv_row(row),
        }
    }
}

/// The columns of the CSV export, in order (the NDJSON keys are the same,
/// less `error` on readable tasks).
pub const COLUMNS: [&str; 22] = [
    "id",
    "queue",
    "type",
    "state",
    "payload",
    "payload_encoding",
    "headers",
    "max_retry",
    "retried",
    "last_err",
    "last_failed_at",
    "timeout",
    "deadline",
    "group",
    "next_process_at",
    "retention",
    "completed_at",
    "kept_until",
    "result",
    "result_encoding",
    "is_orphaned",
    "error",
];

/// Bytes as text when they are UTF-8, else base64: `(text, encoding)`.
pub fn encode_bytes(bytes: &[u8]) -> (String, &'static str) {
    match std::str::from_utf8(bytes) {
        Ok(s) => (s.to_string(), "text"),
        Err(_) => (
            base64::engine::general_purpose::STANDARD.encode(bytes),
            "base64",
        ),
    }
}

/// A time as RFC 3339 UTC with whole seconds (`2026-12-05T23:12:00Z`).
pub fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn time(t: Option<DateTime<Utc>>) -> Value {
    t.map_or(Value::Null, |t| Value::String(rfc3339(t)))
}

fn secs(d: Duration) -> Value {
    json!(d.as_secs())
}

/// `completed_at + retention` (the task page's "Kept until").
fn kept_until(t: &TaskInfo) -> Option<DateTime<Utc>> {
    t.completed_at.and_then(|c| {
        chrono::Duration::from_std(t.retention)
            .ok()
            .and_then(|r| c.checked_add_signed(r))
    })
}

/// The record of a readable task, keys in [`COLUMNS`] order (without `error`).
fn record(t: &TaskInfo) -> Vec<(&'static str, Value)> {
    let (payload, payload_encoding) = encode_bytes(&t.payload);
    let (result, result_encoding) = match &t.result {
        Some(r) => {
            let (text, enc) = encode_bytes(r);
            (Value::String(text), Value::String(enc.into()))
        }
        None => (Value::Null, Value::Null),
    };
    let headers: Map<String, Value> = t
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    vec![
        ("id", json!(t.id)),
        ("queue", json!(t.queue)),
        ("type", json!(t.task_type)),
        ("state", json!(t.state.as_str())),
        ("payload", json!(payload)),
        ("payload_encoding", json!(payload_encoding)),
        ("headers", Value::Object(headers)),
        ("max_retry", json!(t.max_retry)),
        ("retried", json!(t.retried)),
        ("last_err", json!(t.last_err)),
        ("last_failed_at", time(t.last_failed_at)),
        ("timeout", secs(t.timeout)),
        ("deadline", time(t.deadline)),
        ("group", json!(t.group)),
        ("next_process_at", time(t.next_process_at)),
        ("retention", secs(t.retention)),
        ("completed_at", time(t.completed_at)),
        ("kept_until", time(kept_until(t))),
        ("result", result),
        ("result_encoding", result_encoding),
        ("is_orphaned", json!(t.is_orphaned)),
    ]
}

/// One NDJSON line (with its `\n`) for a row: the task's record, or
/// `{"id","state","error"}` for a row that cannot be read.
pub fn ndjson_line(row: &TaskRow) -> String {
    // Keys are written in COLUMNS order (serde_json's Map sorts them).
    let mut out = String::from("{");
    let mut first = true;
    let mut put = |k: &str, v: &Value| {
        if !first {
            out.push(',');
        }
        first = false;
        let _ = write!(out, "{}:{}", Value::String(k.into()), v);
    };
    match row {
        TaskRow::Task(t) => record(t).iter().for_each(|(k, v)| put(k, v)),
        TaskRow::Corrupt { id, state, error } => {
            put("id", &json!(id));
            put("state", &json!(state.as_str()));
            put("error", &json!(error));
        }
    }
    out.push_str("}\n");
    out
}

/// One CSV row (with its CRLF) for a row, columns as [`COLUMNS`].
pub fn csv_row(row: &TaskRow) -> String {
    let cells: Vec<String> = match row {
        TaskRow::Task(t) => record(t)
            .into_iter()
            .map(|(_, v)| cell(v))
            .chain(std::iter::once(String::new()))
            .collect(),
        TaskRow::Corrupt { id, state, error } => COLUMNS
            .iter()
            .map(|c| match *c {
                "id" => csv_text(id.clone()),
                "state" => state.as_str().to_string(),
                "error" => csv_text(error.clone()),
                _ => String::new(),
            })
            .collect(),
    };
    csv_line(cells.into_iter())
}

/// A JSON value as a CSV cell: text as [`csv_text`], `null` empty, numbers,
/// booleans and objects as JSON.
fn cell(v: Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => csv_text(s),
        other => other.to_string(),
    }
}

/// A text cell of the CSV export, safe to open in a spreadsheet: text that
/// starts with `=`, `+`, `-`, `@`, a tab or a CR (what spreadsheets read as
/// a formula) gets a leading `'` (OWASP's advice against CSV injection);
/// other text is unchanged. A reader of the CSV strips that `'` to get the
/// value back (base64 text may start with `+`). NDJSON is never changed.
pub fn csv_text(text: String) -> String {
    if text.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{text}")
    } else {
        text
    }
}

/// Cells joined by commas, quoted when they hold a comma, a quote, CR or
/// LF (quotes doubled), ended by CRLF (RFC 4180).
fn csv_line(cells: impl Iterator<Item = String>) -> String {
    let mut out = String::new();
    for (i, c) in cells.enumerate() {
        if i > 0 {
            out.push(',');
        }
        if c.contains([',', '"', '\r', '\n']) {
            out.push('"');
            out.push_str(&c.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&c);
        }
    }
    out.push_str("\r\n");
    out
}

/// Parses a `since` bound: an RFC 3339 time (`2026-12-01T00:00:00Z`), a
/// UTC date (`2026-12-01`, its midnight), unix seconds (`1764547200`), or
/// an age before `now`: a number with `s`, `m`, `h` or `d` (`90m`, `7d`).
///
/// Errors: a message naming the accepted forms.
pub fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>, String> {
    let t = text.trim();
    if let Ok(d) = DateTime::parse_from_rfc3339(t) {
        return Ok(d.with_timezone(&Utc));
    }
    if let Ok(d) = chrono::NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return Ok(d.and_time(chrono::NaiveTime::MIN).and_utc());
    }
    if let Ok(secs) = t.parse::<i64>()
        && let Some(d) = DateTime::from_timestamp(secs, 0)
    {
        return Ok(d);
    }
    let unit = match t.chars().last() {
        Some('s') => 1,
        Some('m') => 60,
        Some('h') => 3600,
        Some('d') => 86_400,
        _ => 0,
    };
    if unit > 0
        && let Ok(n) = t[..t.len() - 1].parse::<i64>()
        && n >= 0
        && let Some(ago) = n.checked_mul(unit).and_then(chrono::Duration::try_seconds)
        && let Some(d) = now.checked_sub_signed(ago)
    {
        return Ok(d);
    }
    Err(format!(
        "since {text:?}: give an RFC 3339 time (2026-12-01T00:00:00Z), a date (2026-12-01), unix seconds, or an age such as 90m, 24h or 7d"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskState;

    fn task() -> TaskInfo {
        TaskInfo {
            id: "t1".into(),
            queue: "q".into(),
            task_type: "email:send".into(),
            payload: vec![0xff, 0x00],
            headers: [("k".to_string(), "v,\"w\"".to_string())].into(),
            state: TaskState::Completed,
            max_retry: 3,
            retried: 1,
            last_err: "boom".into(),
            last_failed_at: DateTime::from_timestamp(1_700_000_000, 0),
            timeout: Duration::from_secs(60),
            deadline: None,
            group: String::new(),
            next_process_at: None,
            is_orphaned: false,
            retention: Duration::from_secs(3600),
            completed_at: DateTime::from_timestamp(1_700_000_100, 0),
            result: Some(b"ok".to_vec()),
        }
    }

    #[test]
    fn ndjson_of_a_task_and_of_a_corrupt_row() {
        assert_eq!(
            ndjson_line(&TaskRow::Task(task())),
            concat!(
                r#"{"id":"t1","queue":"q","type":"email:send","state":"completed","#,
                r#""payload":"/wA=","payload_encoding":"base64","headers":{"k":"v,\"w\""},"#,
                r#""max_retry":3,"retried":1,"last_err":"boom","last_failed_at":"2023-11-14T22:13:20Z","#,
                r#""timeout":60,"deadline":null,"group":"","next_process_at":null,"retention":3600,"#,
                r#""completed_at":"2023-11-14T22:15:00Z","kept_until":"2023-11-14T23:15:00Z","#,
                r#""result":"ok","result_encoding":"text","is_orphaned":false}"#,
                "\n"
            )
        );
        let bad = TaskRow::Corrupt {
            id: "x".into(),
            state: TaskState::Archived,
            error: "bad msg".into(),
        };
        assert_eq!(
            ndjson_line(&bad),
            "{\"id\":\"x\",\"state\":\"archived\",\"error\":\"bad msg\"}\n"
        );
    }

    #[test]
    fn csv_quotes_and_columns() {
        assert_eq!(
            ExportFormat::Csv.prologue(),
            format!("{}\r\n", COLUMNS.join(","))
        );
        assert_eq!(
            csv_row(&TaskRow::Task(task())),
            "t1,q,email:send,completed,/wA=,base64,\"{\"\"k\"\":\"\"v,\\\"\"w\\\"\"\"\"}\",3,1,boom,\
             2023-11-14T22:13:20Z,60,,,,3600,2023-11-14T22:15:00Z,2023-11-14T23:15:00Z,ok,text,false,\r\n"
        );
        let bad = TaskRow::Corrupt {
            id: "x".into(),
            state: TaskState::Archived,
            error: "bad, msg".into(),
        };
        assert_eq!(
            csv_row(&bad),
            "x,,,archived,,,,,,,,,,,,,,,,,,\"bad, msg\"\r\n"
        );
        assert_eq!(ExportFormat::parse(" CSV "), Some(ExportFormat::Csv));
        assert_eq!(ExportFormat::parse("xml"), None);
    }

    #[test]
    fn csv_cells_that_a_spreadsheet_would_run_get_a_quote() {
        let mut t = task();
        t.task_type = "=HYPERLINK(\"http://x\")".into();
        t.payload = b"+1+cmd|' /C calc'!A0".to_vec();
        t.last_err = "-2+3".into();
        t.group = "@SUM(A1)".into();
        t.headers = Default::default();
        t.result = Some(b"\tx".to_vec());
        assert_eq!(
            csv_row(&TaskRow::Task(t.clone())),
            "t1,q,\"'=HYPERLINK(\"\"http://x\"\")\",completed,'+1+cmd|' /C calc'!A0,text,{},3,1,'-2+3,\
             2023-11-14T22:13:20Z,60,,'@SUM(A1),,3600,2023-11-14T22:15:00Z,2023-11-14T23:15:00Z,'\tx,text,false,\r\n"
        );
        // NDJSON keeps the values as they are.
        let line = ndjson_line(&TaskRow::Task(t));
        assert!(
            line.contains(r#""type":"=HYPERLINK(\"http://x\")""#),
            "{line}"
        );
        assert!(line.contains(r#""last_err":"-2+3""#), "{line}");
        let bad = TaskRow::Corrupt {
            id: "=x".into(),
            state: TaskState::Archived,
            error: "\rboom".into(),
        };
        assert_eq!(
            csv_row(&bad),
            "'=x,,,archived,,,,,,,,,,,,,,,,,,\"'\rboom\"\r\n"
        );
        assert_eq!(csv_text("a=b".into()), "a=b");
        assert_eq!(csv_text(String::new()), "");
    }

    #[test]
    fn since_forms() {
        let now = DateTime::from_timestamp(1_700_000_000, 0).unwrap();
        let at = |s| parse_since(s, now).map(|d| d.timestamp());
        assert_eq!(at("2023-11-14T22:13:20Z"), Ok(1_700_000_000));
        assert_eq!(at("2023-11-14"), Ok(1_699_920_000));
        assert_eq!(at("1699999000"), Ok(1_699_999_000));
        assert_eq!(at("90m"), Ok(1_700_000_000 - 5400));
        assert_eq!(at("7d"), Ok(1_700_000_000 - 7 * 86_400));
        assert!(at("yesterday").is_err());
    }
}
