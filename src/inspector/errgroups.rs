//! LastErr groups for the retry and archived tabs, and the one-line
//! verdict read from them (S14, S29).
//!
//! Forty tasks failing with one error read as an outage of something
//! outside (a database, an API); forty different errors read as a bug in
//! the handlers. To see which at a glance, error texts are normalised so
//! that what varies from task to task is masked and what names the failure
//! is kept, then counted per normalised text.
//!
//! Masking rules, applied left to right at every word boundary (a word is a
//! run of alphanumeric characters):
//! - a UUID (`8-4-4-4-12` hex) becomes `<uuid>`;
//! - an IPv6 address (also in brackets) or an IPv4 address becomes `<ip>`;
//!   a port after it is a number (`<ip>:<n>`), a host name is kept (it names
//!   the service that is down);
//! - `0x`-prefixed hex and hex words of 8+ characters mixing digits and
//!   letters become `<hex>` (object ids, hashes, pointers);
//! - words of 16+ characters mixing 2+ digits and 2+ letters become `<id>`
//!   (base62 / ULID-style generated ids);
//! - in a word that starts with a digit, every digit run becomes `<n>`, a
//!   decimal fraction included (`1.5ms` → `<n>ms`, `2024-01-02T15` →
//!   `<n>-<n>-<n>T<n>`); words that start with a letter (`http2`, `sha256`,
//!   `user42`) are identifiers and stay;
//! - runs of whitespace become one space.
//!
//! Quoted text is not masked as a whole (only the rules above apply inside
//! it): Go quotes URLs, hosts, file and constraint names with `%q`, and
//! those are what tell one failing dependency from another. Texts are cut to
//! [`MAX_KEY_CHARS`] after normalising.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use md5::{Digest, Md5};

use crate::task::TaskState;

/// Normalised texts are cut to this many characters (long stack traces
/// still group by their head).
pub const MAX_KEY_CHARS: usize = 500;

/// Only this many leading characters of an error text are normalised: an
/// error can be a whole HTML page of tens of KB, and 2,000 of them took
/// 1.5 s to group; the key keeps [`MAX_KEY_CHARS`] anyway.
pub const MAX_INPUT_CHARS: usize = 4_096;

/// Most characters of a group's or signature's example error kept (the
/// task page shows the whole text).
pub const MAX_EXAMPLE_CHARS: usize = 1_000;

/// `err` as an example: its first [`MAX_EXAMPLE_CHARS`] characters, with
/// `…` when cut.
pub fn example_of(err: &str) -> String {
    match err.char_indices().nth(MAX_EXAMPLE_CHARS) {
        None => err.to_string(),
        Some((at, _)) => format!("{}…", &err[..at]),
    }
}

/// The normalised form of an error text (see the module doc for the
/// rules), read from its first [`MAX_INPUT_CHARS`] characters and cut to
/// [`MAX_KEY_CHARS`].
pub fn normalise(err: &str) -> String {
    let chars: Vec<char> = err.chars().take(MAX_INPUT_CHARS).collect();
    let mut out = String::with_capacity(chars.len().min(4 * MAX_KEY_CHARS + 8));
    let mut i = 0;
    // Characters of `out` counted so far, and its bytes they span: the
    // output only grows, so once past the cut the rest cannot change it.
    let (mut emitted, mut counted) = (0usize, 0usize);
    while i < chars.len() {
        emitted += out[counted..].chars().count();
        counted = out.len();
        if emitted > MAX_KEY_CHARS {
            break;
        }
        let c = chars[i];
        if c.is_whitespace() {
            if !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            i += 1;
            continue;
        }
        let at_boundary = i == 0 || !chars[i - 1].is_alphanumeric();
        if at_boundary && let Some((len, mask)) = masked_token(&chars[i..]) {
            out.push_str(mask);
            i += len;
            continue;
        }
        if at_boundary && c.is_alphanumeric() {
            let len = chars[i..]
                .iter()
                .take_while(|c| c.is_alphanumeric())
                .count();
            i += push_word(&chars[i..], len, &mut out);
            continue;
        }
        out.push(c);
        i += 1;
    }
    let trimmed = out.trim_end();
    match trimmed.char_indices().nth(MAX_KEY_CHARS) {
        Some((cut, _)) => trimmed[..cut].to_string(),
        None => trimmed.to_string(),
    }
}

/// A UUID or an IP address starting at `s[0]`: its length in chars and its mask.
fn masked_token(s: &[char]) -> Option<(usize, &'static str)> {
    let ends_word = |len: usize| s.get(len).is_none_or(|c| !c.is_alphanumeric());
    if is_uuid(s) && ends_word(36) {
        return Some((36, "<uuid>"));
    }
    if s[0] == '['
        && let Some(close) = s.iter().take(48).position(|c| *c == ']')
        && parse_v6(&s[1..close])
    {
        return Some((close + 1, "[<ip>]"));
    }
    if s[0].is_ascii_hexdigit() || s[0] == ':' {
        let run = s
            .iter()
            .take_while(|c| c.is_ascii_hexdigit() || **c == ':' || **c == '.')
            .count();
        let mut len = run;
        while len > 0 && matches!(s[len - 1], ':' | '.') {
            len -= 1;
        }
        if len > 0 && s[..len].contains(&':') && parse_v6(&s[..len]) && ends_word(len) {
            return Some((len, "<ip>"));
        }
    }
    if s[0].is_ascii_digit() {
        let mut len = s
            .iter()
            .take_while(|c| c.is_ascii_digit() || **c == '.')
            .count();
        while len > 0 && s[len - 1] == '.' {
            len -= 1;
        }
        let text: String = s[..len].iter().collect();
        if text.parse::<Ipv4Addr>().is_ok() && ends_word(len) {
            return Some((len, "<ip>"));
        }
    }
    None
}

fn parse_v6(s: &[char]) -> bool {
    let text: String = s.iter().collect();
    text.parse::<Ipv6Addr>().is_ok()
}

/// `xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with hex digits.
fn is_uuid(s: &[char]) -> bool {
    s.len() >= 36
        && s[..36].iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

/// Writes the word `s[..len]` masked or as it is; returns the chars consumed
/// (more than `len` when a decimal fraction follows a leading number).
fn push_word(s: &[char], len: usize, out: &mut String) -> usize {
    let word = &s[..len];
    let ascii_alnum = word.iter().all(char::is_ascii_alphanumeric);
    let digits = word.iter().filter(|c| c.is_ascii_digit()).count();
    let letters = len - digits;
    if len > 2
        && (word[0] == '0')
        && matches!(word[1], 'x' | 'X')
        && word[2..].iter().all(char::is_ascii_hexdigit)
    {
        out.push_str("<hex>");
        return len;
    }
    if len >= 8 && word.iter().all(char::is_ascii_hexdigit) && digits > 0 && letters > 0 {
        out.push_str("<hex>");
        return len;
    }
    if len >= 16 && ascii_alnum && digits >= 2 && letters >= 2 {
        out.push_str("<id>");
        return len;
    }
    if !word[0].is_ascii_digit() {
        out.extend(word);
        return len;
    }
    // A number-led word: mask every digit run, keep the letters (units,
    // ordinals, the `T` of a timestamp). A fraction right after the first
    // run belongs to the number.
    let mut i = 0;
    let mut first = true;
    while i < len {
        if word[i].is_ascii_digit() {
            while i < len && word[i].is_ascii_digit() {
                i += 1;
            }
            out.push_str("<n>");
            if first
                && i == len
                && s.get(i) == Some(&'.')
                && s.get(i + 1).is_some_and(char::is_ascii_digit)
            {
                // `1.5ms`: the word stopped at the dot; take the fraction and
                // the rest of its word.
                let rest = s[i + 1..]
                    .iter()
                    .take_while(|c| c.is_alphanumeric())
                    .count();
                let frac = s[i + 1..i + 1 + rest]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count();
                out.extend(&s[i + 1 + frac..i + 1 + rest]);
                return len + 1 + rest;
            }
        } else {
            out.push(word[i]);
            i += 1;
        }
        first = false;
    }
    len
}

/// A short stable id for a normalised text, for links (`?err=<id>`): the
/// first 12 hex digits of its MD5.
pub fn group_id(key: &str) -> String {
    let digest = Md5::digest(key.as_bytes());
    hex::encode(&digest[..6])
}

/// Tasks that share one normalised error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrGroup {
    /// [`group_id`] of `key`.
    pub id: String,
    /// The normalised text; empty for tasks without an error.
    pub key: String,
    /// How many tasks are in the group.
    pub count: usize,
    /// One original error text of the group (the first seen).
    pub example: String,
    /// Ids of the tasks, in the order seen.
    pub task_ids: Vec<String>,
}

/// Groups `(task id, error text)` pairs by normalised error; largest group
/// first, ties by text.
pub fn group<'a>(items: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<ErrGroup> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut groups: Vec<ErrGroup> = Vec::new();
    for (id, err) in items {
        let key = normalise(err);
        let at = *index.entry(key.clone()).or_insert_with(|| {
            groups.push(ErrGroup {
                id: group_id(&key),
                key,
                count: 0,
                example: example_of(err),
                task_ids: Vec::new(),
            });
            groups.len() - 1
        });
        groups[at].count += 1;
        groups[at].task_ids.push(id.to_string());
    }
    groups.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
    groups
}

/// Whether the tab of `state` shows LastErr groups: retry and archived,
/// the states whose tasks carry a failure.
pub fn shown_for(state: TaskState) -> bool {
    matches!(state, TaskState::Retry | TaskState::Archived)
}

/// S14's reading of `groups` over `tasks` readable tasks: one error
/// across most tasks points outside, many different errors point at the
/// handlers. Empty with fewer than 5 tasks or no clear reading.
pub fn verdict(groups: &[ErrGroup], tasks: usize) -> String {
    if tasks < 5 || groups.is_empty() {
        return String::new();
    }
    let top = groups[0].count;
    // A permanent error (SkipRetry, a panic) shared by many tasks is one
    // cause in the data or the code, not an outage: running them again as
    // they are would only fail again (S18, S21).
    let permanent = groups[0].example.contains("skip retry for the task")
        || groups[0].example.starts_with("panic error cause by");
    if top * 5 >= tasks * 4 && permanent {
        format!(
            "One permanent error accounts for {top} of {tasks} tasks: one cause in the input data or the handler code, not an outage; fix it before running them again."
        )
    } else if top * 5 >= tasks * 4 {
        format!(
            "One error accounts for {top} of {tasks} tasks: most likely an external service is down or refusing; fix or wait for it, then run the tasks."
        )
    } else if groups.len() * 2 >= tasks {
        format!(
            "{} different errors across {tasks} tasks: this points at a bug in the task handlers rather than an outage.",
            groups.len()
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn n(s: &str) -> String {
        normalise(s)
    }

    /// A long error is cut to 500 characters after masking; only its
    /// first 4,096 characters are read, so a 54 KB HTML page groups with
    /// any text sharing its head.
    #[test]
    fn long_errors_are_cut_and_read_from_their_head() {
        let word = "partner answered <html><body>";
        let long = format!("HTTP 502 from 10.1.2.3: {}", word.repeat(2_000));
        let got = n(&long);
        assert_eq!(got.chars().count(), MAX_KEY_CHARS);
        let want: String = format!("HTTP <n> from <ip>: {}", word.repeat(20))
            .chars()
            .take(MAX_KEY_CHARS)
            .collect();
        assert_eq!(got, want);
        let head: String = long.chars().take(MAX_INPUT_CHARS).collect();
        assert_eq!(n(&format!("{head} trailing 42")), got);
        // Short texts are whole.
        assert_eq!(n("boom  at 7"), "boom at <n>");
    }

    /// UUIDs, IPv4 and IPv6 addresses (bare, bracketed, with ports) are
    /// masked; ports are numbers; host names stay.
    #[test]
    fn masks_ids_and_addresses() {
        assert_eq!(
            n("task 3f0c2a9e-1b2c-4d5e-8f90-0123456789ab failed"),
            "task <uuid> failed"
        );
        assert_eq!(
            n("dial tcp 10.0.3.17:5432: connect: connection refused"),
            "dial tcp <ip>:<n>: connect: connection refused"
        );
        assert_eq!(
            n("dial tcp [2001:db8::1]:6379: i/o timeout"),
            "dial tcp [<ip>]:<n>: i/o timeout"
        );
        assert_eq!(
            n("dial tcp [::1]:80: refused"),
            "dial tcp [<ip>]:<n>: refused"
        );
        assert_eq!(n("peer fe80::1: reset"), "peer <ip>: reset");
        assert_eq!(n("from ::1 port 22"), "from <ip> port <n>");
        assert_eq!(
            n("dial tcp db.internal:5432: connect: refused"),
            "dial tcp db.internal:<n>: connect: refused"
        );
        // A time of day is not an address.
        assert_eq!(n("at 12:30:45 today"), "at <n>:<n>:<n> today");
        // Not an IPv4 address (five parts): decimals.
        assert_eq!(n("v 1.2.3.4.5"), "v <n>.<n>.<n>");
    }

    /// Hex ids and pointers, long generated ids, numbers with units and
    /// timestamps are masked; identifiers that start with a letter stay.
    #[test]
    fn masks_hex_numbers_and_generated_ids() {
        assert_eq!(n("object 5f2b8c9e1a3d4e6f7a8b9c0d"), "object <hex>");
        assert_eq!(n("ptr=0xc000123abc"), "ptr=<hex>");
        assert_eq!(n("order_3f2a9c1e7b missing"), "order_<hex> missing");
        assert_eq!(n("charge ch_3MqLiw2eZvKYlo2C1Fz2ZRpt"), "charge ch_<id>");
        assert_eq!(n("ulid 01ARZ3NDEKTSV4RRFFQ69G5FAV"), "ulid <id>");
        assert_eq!(n("retry in 1.5ms or 30s"), "retry in <n>ms or <n>s");
        assert_eq!(n("at 2024-01-02T15:04:05Z"), "at <n>-<n>-<n>T<n>:<n>:<n>Z");
        assert_eq!(n("HTTP 503 from api"), "HTTP <n> from api");
        assert_eq!(
            n("index out of range [7] with length 3"),
            "index out of range [<n>] with length <n>"
        );
        assert_eq!(n("http2 sha256 user42 x509"), "http2 sha256 user42 x509");
        // Short hex-looking words and hex-only letters stay.
        assert_eq!(n("deadbeef cafe a1b2"), "deadbeef cafe a1b2");
        assert_eq!(n("-5 items"), "-<n> items");
    }

    /// Quoted text keeps its words (they name the dependency) but its
    /// numbers and ids are masked; whitespace collapses; non-ASCII stays.
    #[test]
    fn quotes_whitespace_and_unicode() {
        assert_eq!(
            n(r#"Get "https://api.example.com/v1/orders/12345": EOF"#),
            r#"Get "https://api.example.com/v1/orders/<n>": EOF"#
        );
        assert_eq!(n("  a \n\t b  "), "a b");
        assert_eq!(n("ошибка 42: нет связи"), "ошибка <n>: нет связи");
        assert_eq!(
            n("panic [handler.go:42]: boom"),
            "panic [handler.go:<n>]: boom"
        );
        assert_eq!(n(""), "");
        let long = "x ".repeat(1000);
        assert_eq!(n(&long).chars().count(), MAX_KEY_CHARS);
    }

    /// S14: forty tasks whose errors differ only in addresses and numbers
    /// form one group; forty different messages form forty groups.
    #[test]
    fn groups_one_outage_vs_many_bugs() {
        let outage: Vec<(String, String)> = (0..40)
            .map(|i| {
                (
                    format!("t{i}"),
                    format!(
                        "dial tcp 10.0.0.{}:5432: connect: connection refused (attempt {i})",
                        i % 4 + 1
                    ),
                )
            })
            .collect();
        let groups = group(outage.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0].count, 40);
        assert_eq!(
            groups[0].key,
            "dial tcp <ip>:<n>: connect: connection refused (attempt <n>)"
        );
        assert_eq!(
            groups[0].example,
            "dial tcp 10.0.0.1:5432: connect: connection refused (attempt 0)"
        );
        assert_eq!(groups[0].task_ids.len(), 40);
        assert_eq!(groups[0].id, group_id(&groups[0].key));
        assert_eq!(groups[0].id.len(), 12);

        let words = ["alpha", "bravo", "charlie", "delta", "echo"];
        let bugs: Vec<(String, String)> = (0..40)
            .map(|i| {
                (
                    format!("t{i}"),
                    format!(
                        "field {} of {} invalid",
                        words[i % 5],
                        words[i / 5 % 5].repeat(i / 5 + 1)
                    ),
                )
            })
            .collect();
        let groups = group(bugs.iter().map(|(a, b)| (a.as_str(), b.as_str())));
        assert_eq!(groups.len(), 40);
        assert!(groups.iter().all(|g| g.count == 1));
    }

    /// Largest group first, ties by text; an empty error is its own group.
    #[test]
    fn group_order() {
        let groups = group([("a", "b 1"), ("b", "a 2"), ("c", "b 3"), ("d", "")]);
        let keys: Vec<(&str, usize)> = groups.iter().map(|g| (g.key.as_str(), g.count)).collect();
        assert_eq!(keys, [("b <n>", 2), ("", 1), ("a <n>", 1)]);
        assert_eq!(groups[0].task_ids, ["a", "c"]);
    }
}
