//! Enqueue options as Go's `Option.String()` writes them (what a
//! `SchedulerEntry.enqueue_options` holds) and back (as Go's inspector
//! `parseOption` reads them, plus `TaskID`, `Group` and `Header`, which Go's
//! parser drops). Wire spec §4.4.

use chrono::{DateTime, NaiveDateTime, Utc};

use super::go_duration::{go_duration, parse_go_duration};
use crate::task::{EnqueueOptions, ProcessAt};

/// Go `time.UnixDate` (`Mon Jan _2 15:04:05 MST 2006`), in UTC.
fn unix_date(t: DateTime<Utc>) -> String {
    t.format("%a %b %e %H:%M:%S UTC %Y").to_string()
}

/// Reads a `time.UnixDate` text; the zone name is taken as UTC (a name
/// alone does not give an offset; asynqdeck writes UTC).
fn parse_unix_date(s: &str) -> Option<DateTime<Utc>> {
    let parts: Vec<&str> = s.split_whitespace().collect();
    let [wd, mon, day, hms, _zone, year] = parts[..] else {
        return None;
    };
    let text = format!("{wd} {mon} {day} {hms} {year}");
    NaiveDateTime::parse_from_str(&text, "%a %b %d %H:%M:%S %Y")
        .ok()
        .map(|t| t.and_utc())
}

/// Go `strconv.Quote` (`%q`): `"` and `\` escaped, `\a\b\f\n\r\t\v`,
/// other control characters as `\x..`/`\u....`, printable text kept.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c if c.is_control() || c == '\u{2028}' || c == '\u{2029}' || c == '\u{feff}' => {
                let n = c as u32;
                if n <= 0xffff {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go `strconv.Unquote` of a double-quoted text, for the escapes
/// [`go_quote`] writes. `None` when it is not such a text.
pub fn go_unquote(s: &str) -> Option<String> {
    let inner = s.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let hex = |chars: &mut std::str::Chars<'_>, n: usize| -> Option<char> {
            let digits: String = chars.take(n).collect();
            char::from_u32(u32::from_str_radix(&digits, 16).ok()?)
        };
        out.push(match chars.next()? {
            '"' => '"',
            '\\' => '\\',
            '\'' => '\'',
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            'x' => hex(&mut chars, 2)?,
            'u' => hex(&mut chars, 4)?,
            'U' => hex(&mut chars, 8)?,
            _ => return None,
        });
    }
    Some(out)
}

/// Go `json.Marshal` of a `[2]string` (HTML-safe: `<`, `>`, `&`, U+2028 and
/// U+2029 as `\u....`).
fn go_json_pair(k: &str, v: &str) -> String {
    let json = serde_json::to_string(&[k, v]).unwrap_or_default();
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

/// The option strings of `opts`, one per set option, in this order:
/// `Queue`, `MaxRetry`, `Timeout`, `Deadline`, `Unique`, `ProcessAt` or
/// `ProcessIn`, `Retention`, `TaskID`, `Group`, then one `Header([k,v])` per
/// header in key order. E.g. `Queue("low")`, `MaxRetry(3)`,
/// `Timeout(30s)`, `Deadline(Tue Nov 14 22:13:20 UTC 2023)`,
/// `Unique(1h0m0s)`, `Header(["k","v"])`. Go keeps the order the options
/// were given in; an [`EnqueueOptions`] has no order, so this fixed one is
/// used (COMPATIBILITY.md#m1).
pub fn option_strings(opts: &EnqueueOptions) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(q) = &opts.queue {
        out.push(format!("Queue({})", go_quote(q)));
    }
    if let Some(n) = opts.max_retry {
        out.push(format!("MaxRetry({n})"));
    }
    if let Some(d) = opts.timeout {
        out.push(format!("Timeout({})", go_duration(d)));
    }
    if let Some(t) = opts.deadline {
        out.push(format!("Deadline({})", unix_date(t)));
    }
    if let Some(d) = opts.unique {
        out.push(format!("Unique({})", go_duration(d)));
    }
    match opts.process_at {
        Some(ProcessAt::At(t)) => out.push(format!("ProcessAt({})", unix_date(t))),
        Some(ProcessAt::In(d)) => out.push(format!("ProcessIn({})", go_duration(d))),
        None => {}
    }
    if let Some(d) = opts.retention {
        out.push(format!("Retention({})", go_duration(d)));
    }
    if let Some(id) = &opts.task_id {
        out.push(format!("TaskID({})", go_quote(id)));
    }
    if let Some(g) = &opts.group {
        out.push(format!("Group({})", go_quote(g)));
    }
    for (k, v) in &opts.headers {
        out.push(format!("Header({})", go_json_pair(k, v)));
    }
    out
}

/// Reads option strings back into options (Go inspector `parseOption`,
/// plus `TaskID`, `Group` and `Header`). The argument is the text between
/// the first `(` and the last `)`. Returns the options and the strings it
/// could not read, in order.
pub fn parse_option_strings(strings: &[String]) -> (EnqueueOptions, Vec<String>) {
    let mut opts = EnqueueOptions::default();
    let mut unread = Vec::new();
    for s in strings {
        if !parse_one(&mut opts, s) {
            unread.push(s.clone());
        }
    }
    (opts, unread)
}

fn parse_one(opts: &mut EnqueueOptions, s: &str) -> bool {
    let Some((name, rest)) = s.split_once('(') else {
        return false;
    };
    let Some(arg) = rest.strip_suffix(')') else {
        return false;
    };
    let dur = |a: &str| parse_go_duration(a).ok();
    match name {
        "Queue" => go_unquote(arg).map(|q| opts.queue = Some(q)).is_some(),
        "MaxRetry" => arg.parse().ok().map(|n| opts.max_retry = Some(n)).is_some(),
        "Timeout" => dur(arg).map(|d| opts.timeout = Some(d)).is_some(),
        "Deadline" => parse_unix_date(arg)
            .map(|t| opts.deadline = Some(t))
            .is_some(),
        "Unique" => dur(arg).map(|d| opts.unique = Some(d)).is_some(),
        "ProcessAt" => parse_unix_date(arg)
            .map(|t| opts.process_at = Some(ProcessAt::At(t)))
            .is_some(),
        "ProcessIn" => dur(arg)
            .map(|d| opts.process_at = Some(ProcessAt::In(d)))
            .is_some(),
        "Retention" => dur(arg).map(|d| opts.retention = Some(d)).is_some(),
        "TaskID" => go_unquote(arg).map(|id| opts.task_id = Some(id)).is_some(),
        "Group" => go_unquote(arg).map(|g| opts.group = Some(g)).is_some(),
        "Header" => serde_json::from_str::<[String; 2]>(arg)
            .ok()
            .map(|[k, v]| {
                opts.headers.insert(k, v);
            })
            .is_some(),
        _ => false,
    }
}

/// The options Go's `Inspector.SchedulerEntries` returns for `strings`,
/// each in its `String()` form: what asynqmon's `/api/scheduler_entries`
/// lists. Go reads the text between the first `(` and the first `)`, knows
/// only `Queue`, `MaxRetry`, `Timeout`, `Deadline`, `Unique`, `ProcessAt`,
/// `ProcessIn` and `Retention`, and drops what it cannot read (`TaskID`,
/// `Group`, `Header`, a bad value; a string without `(`, on which Go's
/// parser panics, is dropped too). Durations and numbers come back in
/// Go's form (`Timeout(90s)` reads as `Timeout(1m30s)`); a `Deadline` or
/// `ProcessAt` that parses keeps its text (Go prints the zone it read).
pub fn go_inspector_option_strings(strings: &[String]) -> Vec<String> {
    strings
        .iter()
        .filter_map(|s| go_inspector_option(s))
        .collect()
}

fn go_inspector_option(s: &str) -> Option<String> {
    let open = s.find('(')?;
    let name = &s[..open];
    let arg = match s.find(')') {
        Some(close) if close > open => &s[open + 1..close],
        _ => "",
    };
    let dur = |a: &str| parse_go_duration(a).ok().map(go_duration);
    let text = match name {
        "Queue" => go_quote(&go_unquote(arg)?),
        "MaxRetry" => arg.parse::<i64>().ok()?.to_string(),
        "Timeout" | "Unique" | "ProcessIn" | "Retention" => dur(arg)?,
        "Deadline" | "ProcessAt" => {
            parse_unix_date(arg)?;
            arg.to_string()
        }
        _ => return None,
    };
    Some(format!("{name}({text})"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use chrono::TimeZone;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn golden_strings() {
        let deadline = Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        let opts = EnqueueOptions::new()
            .queue("crit\"ical")
            .max_retry(5)
            .timeout(Duration::from_secs(1800))
            .deadline(deadline)
            .unique(Duration::from_secs(3600))
            .process_in(Duration::from_secs(90))
            .retention(Duration::from_millis(1500))
            .task_id("id-1")
            .group("g<1>")
            .header("k", "v")
            .header("a&b", "<x>");
        let want = [
            r#"Queue("crit\"ical")"#,
            "MaxRetry(5)",
            "Timeout(30m0s)",
            "Deadline(Tue Nov 14 22:13:20 UTC 2023)",
            "Unique(1h0m0s)",
            "ProcessIn(1m30s)",
            "Retention(1.5s)",
            r#"TaskID("id-1")"#,
            r#"Group("g<1>")"#,
            r#"Header(["a\u0026b","\u003cx\u003e"])"#,
            r#"Header(["k","v"])"#,
        ];
        let got = option_strings(&opts);
        assert_eq!(got, want);
        let (back, unread) = parse_option_strings(&got);
        assert_eq!(unread, Vec::<String>::new());
        assert_eq!(back, opts);
        assert_eq!(
            option_strings(
                &EnqueueOptions::new().process_at(Utc.timestamp_opt(1_700_000_000, 0).unwrap())
            ),
            ["ProcessAt(Tue Nov 14 22:13:20 UTC 2023)"]
        );
        // The day is space-padded, as Go's `_2`.
        assert_eq!(
            unix_date(Utc.with_ymd_and_hms(2026, 3, 1, 9, 5, 7).unwrap()),
            "Sun Mar  1 09:05:07 UTC 2026"
        );
    }

    #[test]
    fn quoting_and_unread() {
        assert_eq!(go_quote("a\tb\n\u{1}é"), "\"a\\tb\\n\\x01é\"");
        assert_eq!(
            go_unquote("\"a\\tb\\n\\x01é\"").as_deref(),
            Some("a\tb\n\u{1}é")
        );
        let (o, unread) = parse_option_strings(&[
            "MaxRetry(x)".to_string(),
            "Weird(1)".to_string(),
            "Queue(low)".to_string(),
            "MaxRetry(2)".to_string(),
        ]);
        assert_eq!(o, EnqueueOptions::new().max_retry(2));
        assert_eq!(unread, ["MaxRetry(x)", "Weird(1)", "Queue(low)"]);
    }

    proptest! {
        #[test]
        fn round_trip(q in "\\PC{0,12}", secs in 0u64..400_000, retry in -3i32..100, k in "[a-z<&]{1,5}", v in "\\PC{0,8}") {
            let opts = EnqueueOptions::new()
                .queue(q)
                .max_retry(retry)
                .timeout(Duration::from_secs(secs))
                .header(k, v);
            let (back, unread) = parse_option_strings(&option_strings(&opts));
            prop_assert!(unread.is_empty());
            prop_assert_eq!(back, opts);
        }
    }
    /// Go's inspector view: unknown kinds and bad values dropped, Go's
    /// first-`)` rule, durations and numbers in Go's form, the rest as is.
    #[test]
    fn go_inspector_view_of_option_strings() {
        let stored: Vec<String> = [
            "Queue(\"low\")",
            "MaxRetry(+7)",
            "Timeout(90s)",
            "Deadline(Wed Jan  2 03:04:05 UTC 2030)",
            "Unique(1h0m0s)",
            "ProcessIn(2m0s)",
            "ProcessAt(Tue Nov 14 22:13:20 UTC 2023)",
            "Retention(24h0m0s)",
            "TaskID(\"tid\")",
            "Group(\"grp\")",
            "Header([\"k\",\"v\"])",
            "Queue(\"a)b\")",
            "MaxRetry(x)",
            "no-paren",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            go_inspector_option_strings(&stored),
            vec![
                "Queue(\"low\")",
                "MaxRetry(7)",
                "Timeout(1m30s)",
                "Deadline(Wed Jan  2 03:04:05 UTC 2030)",
                "Unique(1h0m0s)",
                "ProcessIn(2m0s)",
                "ProcessAt(Tue Nov 14 22:13:20 UTC 2023)",
                "Retention(24h0m0s)",
            ]
        );
    }
}
