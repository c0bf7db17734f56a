//! The search box's query language ([`SearchQuery`]), shared by `/search`
//! and `/api/search`.
//!
//! A query is words separated by spaces; a word in double quotes keeps its
//! spaces (`error~"connection refused"`). Filters:
//!
//! | Word | Meaning |
//! | --- | --- |
//! | `queue:q1` | only these queues (repeatable, or `queue:q1,q2`); default every queue |
//! | `state:retry` | only these states (repeatable or a comma list); default pending, active, scheduled, retry, archived and completed |
//! | `type:email:send` | the exact task type; `type:email:*` a type prefix |
//! | `error~timeout` | LastErr contains the text, case-insensitive |
//! | `payload~user42` | the payload bytes contain the text (case-sensitive, as the tab filter) |
//! | `age>1h` | the task entered its state more than this long ago ([`SearchQuery::older_than`]) |
//! | `retried>3` | the task was retried more than 3 times |
//!
//! Other words (free text) are joined by single spaces into an `error~`
//! text: `connection refused` finds tasks whose LastErr contains
//! "connection refused". A word that starts like a filter (letters then
//! `:`, `~` or `>`) but names none is an error, so a typo never turns into
//! a silent text search; quote it to search for it (`"db:"`).

use std::time::Duration;

use crate::error::{Error, Result};
use crate::task::TaskState;

/// The states searched when the query names none, in scan order.
/// Aggregating tasks live in groups and are searched per group on the
/// queue's aggregating tab, not here.
pub const SEARCH_STATES: [TaskState; 6] = [
    TaskState::Pending,
    TaskState::Active,
    TaskState::Scheduled,
    TaskState::Retry,
    TaskState::Archived,
    TaskState::Completed,
];

/// A parsed search: every set field must match (an unset one matches all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchQuery {
    /// Queues in scope, sorted, no duplicates; empty = every queue.
    pub queues: Vec<String>,
    /// States in scope, in [`SEARCH_STATES`] order; empty = all of them.
    pub states: Vec<TaskState>,
    /// Task type: exact, or a prefix when it ends with `*`.
    pub task_type: Option<String>,
    /// Substring of LastErr, as typed (matched case-insensitively).
    pub error: Option<String>,
    /// Substring of the payload bytes (case-sensitive).
    pub payload: Option<String>,
    /// The task entered its state more than this long ago: pending tasks
    /// by their `pending_since`, scheduled tasks by their due time (the
    /// zset score: `age>` finds overdue ones), retry and archived tasks by
    /// `LastFailedAt`, completed tasks by `CompletedAt`. Active tasks, and
    /// tasks without that time (a pending task run by hand has no
    /// `pending_since`), never match an age filter.
    pub older_than: Option<Duration>,
    /// The task was retried more than this many times.
    pub retried_over: Option<i32>,
}

impl SearchQuery {
    /// Parses the search box's text (see the module docs). Errors with
    /// [`Error::InvalidArgument`] naming the bad word.
    pub fn parse(text: &str) -> Result<SearchQuery> {
        let mut q = SearchQuery::default();
        let mut free: Vec<String> = Vec::new();
        for word in words(text)? {
            match split_filter(&word.text).filter(|_| !word.quoted) {
                Some((key, op, value)) => q.apply(key, op, value, &word.text)?,
                None => free.push(unmask(&word.text)),
            }
        }
        if !free.is_empty() {
            if q.error.is_some() {
                return Err(bad(
                    &free.join(" "),
                    "free text is an error~ search, and error~ is already given",
                ));
            }
            q.error = Some(free.join(" "));
        }
        Ok(q)
    }

    /// Adds one filter given apart from the text (a query parameter of
    /// `/search` or `/api/search`): `key` is `queue`, `state`, `type`,
    /// `error`, `payload`, `age` or `retried`; a blank value adds nothing.
    ///
    /// Errors: [`Error::InvalidArgument`] naming the parameter.
    pub fn add_param(&mut self, key: &str, value: &str) -> Result<()> {
        let value = value.trim();
        if value.is_empty() {
            return Ok(());
        }
        // A parameter's comma list may have spaces around its items.
        let listed;
        let value = if key == "queue" {
            listed = value
                .split(',')
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(",");
            listed.as_str()
        } else {
            value
        };
        let op = match key {
            "queue" | "state" | "type" => ':',
            "error" | "payload" => '~',
            "age" | "retried" => '>',
            _ => return Err(bad(key, "unknown parameter")),
        };
        self.apply(key, op, value, &format!("{key}={value}"))
    }

    /// The query without its scope (queues, states): the filters a job
    /// applies in each tab it acts on.
    pub fn filters_only(mut self) -> SearchQuery {
        self.queues.clear();
        self.states.clear();
        self
    }

    /// Whether nothing but the scope (queues, states) is set.
    pub fn is_unfiltered(&self) -> bool {
        self.task_type.is_none()
            && self.error.is_none()
            && self.payload.is_none()
            && self.older_than.is_none()
            && self.retried_over.is_none()
    }

    /// The states in scope, in scan order.
    pub fn scope_states(&self) -> Vec<TaskState> {
        if self.states.is_empty() {
            SEARCH_STATES.to_vec()
        } else {
            self.states.clone()
        }
    }

    /// Whether `task_type` passes the type filter.
    pub fn type_matches(&self, task_type: &str) -> bool {
        match self.task_type.as_deref() {
            None => true,
            Some(t) => match t.strip_suffix('*') {
                Some(prefix) => task_type.starts_with(prefix),
                None => task_type == t,
            },
        }
    }

    /// The query as text that [`SearchQuery::parse`] reads back to the
    /// same query (values with spaces or quotes are quoted).
    pub fn to_text(&self) -> String {
        let mut out: Vec<String> = Vec::new();
        for q in &self.queues {
            out.push(format!("queue:{}", quote(q)));
        }
        if !self.states.is_empty() {
            let s: Vec<&str> = self.states.iter().map(|s| s.as_str()).collect();
            out.push(format!("state:{}", s.join(",")));
        }
        if let Some(t) = &self.task_type {
            out.push(format!("type:{}", quote(t)));
        }
        if let Some(e) = &self.error {
            out.push(format!("error~{}", quote(e)));
        }
        if let Some(p) = &self.payload {
            out.push(format!("payload~{}", quote(p)));
        }
        if let Some(d) = self.older_than {
            out.push(format!("age>{}s", d.as_secs()));
        }
        if let Some(n) = self.retried_over {
            out.push(format!("retried>{n}"));
        }
        out.join(" ")
    }

    fn apply(&mut self, key: &str, op: char, value: &str, word: &str) -> Result<()> {
        let want = match key {
            "queue" | "state" | "type" => ':',
            "error" | "payload" => '~',
            "age" | "retried" => '>',
            _ => {
                return Err(bad(
                    word,
                    "unknown filter: use queue:, state:, type:, error~, payload~, age> or retried>",
                ));
            }
        };
        if op != want {
            return Err(bad(word, &format!("write {key}{want}…")));
        }
        if value.is_empty() {
            return Err(bad(word, "no value"));
        }
        let once = |set: bool| {
            if set {
                Err(bad(word, &format!("{key} is given twice")))
            } else {
                Ok(())
            }
        };
        match key {
            "queue" => {
                // Unquoted whitespace ends a word, so whitespace here was
                // quoted: part of the name, kept (`queue:" q"` is " q").
                for name in value.split(',') {
                    if name.is_empty() {
                        return Err(bad(word, "empty queue name"));
                    }
                    self.queues.push(unmask(name));
                }
                self.queues.sort();
                self.queues.dedup();
            }
            "state" => {
                for name in value.split(',').map(str::trim) {
                    let state: TaskState = name.parse().map_err(|_| {
                        bad(
                            word,
                            "states are pending, active, scheduled, retry, archived, completed",
                        )
                    })?;
                    if !SEARCH_STATES.contains(&state) {
                        return Err(bad(
                            word,
                            "aggregating tasks are searched per group, on the queue's aggregating tab",
                        ));
                    }
                    if !self.states.contains(&state) {
                        self.states.push(state);
                    }
                }
                self.states
                    .sort_by_key(|s| SEARCH_STATES.iter().position(|x| x == s));
            }
            "type" => {
                once(self.task_type.is_some())?;
                if value == "*" {
                    return Err(bad(word, "a type prefix needs at least one character"));
                }
                self.task_type = Some(unmask(value));
            }
            "error" => {
                once(self.error.is_some())?;
                self.error = Some(unmask(value));
            }
            "payload" => {
                once(self.payload.is_some())?;
                self.payload = Some(unmask(value));
            }
            "age" => {
                once(self.older_than.is_some())?;
                self.older_than = Some(parse_duration(value).ok_or_else(|| {
                    bad(word, "a duration is digits and units s, m, h, d (1h30m)")
                })?);
            }
            "retried" => {
                once(self.retried_over.is_some())?;
                self.retried_over = Some(
                    value
                        .parse::<i32>()
                        .ok()
                        .filter(|n| *n >= 0)
                        .ok_or_else(|| bad(word, "retried> takes a whole number"))?,
                );
            }
            _ => unreachable!("checked above"),
        }
        Ok(())
    }
}

fn bad(word: &str, why: &str) -> Error {
    Error::InvalidArgument(format!("bad search term {word:?}: {why}"))
}

fn quote(s: &str) -> String {
    if s.chars()
        .any(|c| c.is_whitespace() || matches!(c, '"' | ',' | '\\'))
        || s.is_empty()
    {
        format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        s.to_string()
    }
}

/// Stands for a comma inside double quotes while a word is split into a
/// list (`queue:"a,b",c` names the queues `a,b` and `c`); put back by
/// [`unmask`].
const QUOTED_COMMA: char = '\u{1F}';

/// `s` with its quoted commas put back.
fn unmask(s: &str) -> String {
    s.replace(QUOTED_COMMA, ",")
}

/// One word of the text, and whether it was quoted as a whole.
struct Word {
    text: String,
    quoted: bool,
}

/// Splits on whitespace outside double quotes; quotes are removed.
fn words(text: &str) -> Result<Vec<Word>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_quote = false;
    let mut started = false;
    let mut quoted_whole = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // Inside quotes, \" is a quote and \\ a backslash.
            '\\' if in_quote && matches!(chars.peek(), Some('"' | '\\')) => {
                cur.extend(chars.next());
            }
            ',' if in_quote => cur.push(QUOTED_COMMA),
            '"' => {
                if !started {
                    quoted_whole = true;
                }
                in_quote = !in_quote;
                started = true;
            }
            c if c.is_whitespace() && !in_quote => {
                if started {
                    out.push(Word {
                        text: std::mem::take(&mut cur),
                        quoted: quoted_whole,
                    });
                }
                started = false;
                quoted_whole = false;
            }
            c => {
                cur.push(c);
                started = true;
            }
        }
    }
    if in_quote {
        return Err(bad(&cur, "unclosed double quote"));
    }
    if started {
        out.push(Word {
            text: cur,
            quoted: quoted_whole,
        });
    }
    Ok(out.into_iter().filter(|w| !w.text.is_empty()).collect())
}

/// `(key, op, value)` when `word` starts with letters followed by `:`, `~`
/// or `>`.
fn split_filter(word: &str) -> Option<(&str, char, &str)> {
    let end = word.find(|c: char| !c.is_ascii_alphabetic())?;
    if end == 0 {
        return None;
    }
    let op = word[end..].chars().next()?;
    if !matches!(op, ':' | '~' | '>') {
        return None;
    }
    Some((&word[..end], op, &word[end + 1..]))
}

/// `90s`, `15m`, `1h30m`, `2d`; a bare number is seconds.
fn parse_duration(s: &str) -> Option<Duration> {
    if let Ok(n) = s.parse::<u64>() {
        return Some(Duration::from_secs(n));
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in s.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            _ => return None,
        };
        let n: u64 = num.parse().ok()?;
        num.clear();
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    num.is_empty().then_some(Duration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_filter() {
        let q = SearchQuery::parse(
            "queue:b,a queue:c state:archived,retry type:email:* error~TimeOut payload~user42 age>1h30m retried>3",
        )
        .unwrap();
        assert_eq!(q.queues, ["a", "b", "c"]);
        assert_eq!(q.states, [TaskState::Retry, TaskState::Archived]);
        assert_eq!(q.task_type.as_deref(), Some("email:*"));
        assert_eq!(q.error.as_deref(), Some("TimeOut"));
        assert_eq!(q.payload.as_deref(), Some("user42"));
        assert_eq!(q.older_than, Some(Duration::from_secs(5_400)));
        assert_eq!(q.retried_over, Some(3));
        assert!(q.type_matches("email:send") && !q.type_matches("sms:send"));
        assert_eq!(SearchQuery::parse(&q.to_text()).unwrap(), q);
    }

    /// Inside quotes a comma is part of the name (not a list separator),
    /// `\"` a quote and `\\` a backslash; the text round-trips.
    #[test]
    fn quoted_commas_quotes_and_backslashes() {
        let q = SearchQuery::parse(r#"queue:"we ird,q",x queue:"ird\"x" error~"a,b" "free, text""#);
        assert!(q.is_err(), "error~ and free text together");
        let q = SearchQuery::parse(r#"queue:"we ird,q",x queue:"ird\"x" queue:"b\\s" error~"a,b""#)
            .unwrap();
        assert_eq!(q.queues, ["b\\s", "ird\"x", "we ird,q", "x"]);
        assert_eq!(q.error.as_deref(), Some("a,b"));
        assert_eq!(
            q.to_text(),
            r#"queue:"b\\s" queue:"ird\"x" queue:"we ird,q" queue:x error~"a,b""#
        );
        assert_eq!(SearchQuery::parse(&q.to_text()).unwrap(), q);
        let free = SearchQuery::parse(r#""refused, again""#).unwrap();
        assert_eq!(free.error.as_deref(), Some("refused, again"));
        // Quoted whitespace is part of the name, any whitespace is quoted
        // back, and parameters trim their list items.
        let q = SearchQuery::parse("queue:\" q\" queue:\"a\tb\" queue:\"x\u{a0}y\"").unwrap();
        assert_eq!(q.queues, [" q", "a\tb", "x\u{a0}y"]);
        assert_eq!(SearchQuery::parse(&q.to_text()).unwrap(), q);
        let mut p = SearchQuery::default();
        p.add_param("queue", " a , b ").unwrap();
        assert_eq!(p.queues, ["a", "b"]);
    }

    #[test]
    fn free_words_and_quotes_are_an_error_search() {
        let q = SearchQuery::parse("Connection  refused").unwrap();
        assert_eq!(q.error.as_deref(), Some("Connection refused"));
        let q = SearchQuery::parse(r#"error~"dial tcp: refused" "db:""#);
        assert!(q.is_err(), "free text beside error~ is refused");
        let q = SearchQuery::parse(r#""db:" type:x"#).unwrap();
        assert_eq!(q.error.as_deref(), Some("db:"));
        assert_eq!(q.task_type.as_deref(), Some("x"));
        let q = SearchQuery::parse(r#"error~"dial tcp: refused""#).unwrap();
        assert_eq!(q.error.as_deref(), Some("dial tcp: refused"));
        assert_eq!(SearchQuery::parse("").unwrap(), SearchQuery::default());
        assert!(SearchQuery::parse("").unwrap().is_unfiltered());
    }

    #[test]
    fn errors_name_the_bad_word() {
        let cases = [
            ("quue:a", "\"quue:a\""),
            ("state:bogus", "\"state:bogus\""),
            ("state:aggregating", "aggregating tasks"),
            ("age>soon", "\"age>soon\""),
            ("retried>-1", "\"retried>-1\""),
            ("type:a type:b", "type is given twice"),
            ("error:x", "write error~"),
            ("queue:", "no value"),
            ("error~\"open", "unclosed"),
        ];
        for (text, want) in cases {
            let e = SearchQuery::parse(text).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn params_use_the_same_rules() {
        let mut q = SearchQuery::default();
        q.add_param("queue", "a,b").unwrap();
        q.add_param("state", "retry").unwrap();
        q.add_param("error", "").unwrap();
        q.add_param("age", "2d").unwrap();
        assert_eq!(q.queues, ["a", "b"]);
        assert_eq!(q.states, [TaskState::Retry]);
        assert_eq!(q.error, None);
        assert_eq!(q.older_than, Some(Duration::from_secs(172_800)));
        let e = q.add_param("retried", "many").unwrap_err().to_string();
        assert!(e.contains("retried=many"), "{e}");
        assert!(q.add_param("colour", "x").is_err());
    }

    #[test]
    fn exact_type_and_durations() {
        let q = SearchQuery::parse("type:email:send").unwrap();
        assert!(q.type_matches("email:send") && !q.type_matches("email:send2"));
        assert_eq!(parse_duration("90"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("1d2h"), Some(Duration::from_secs(93_600)));
        assert_eq!(parse_duration("1h5"), None);
        assert_eq!(parse_duration("h"), None);
    }
}
