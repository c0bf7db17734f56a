//! Path segments for queue names and task ids in the dashboard's links
//! (issue 12 R9).
//!
//! Go accepts every queue name that is not blank (`ValidateQueueName`), and
//! task ids are free strings too, so a segment may be `..`, `.`, contain
//! `/`, `?`, `#`, `%`, spaces or any Unicode. Percent-encoding handles all
//! of them but two: browsers (WHATWG URL parsing, also `url::Url`) remove
//! the dot segments `.` and `..` *and* their encoded forms `%2E`, `.%2E`,
//! `%2e%2e`, so no percent-encoding of `..` survives a click. Such a segment
//! gets one `~` appended instead (`..` → `..~`), and to keep the mapping
//! one-to-one every segment that is one or two dots followed by tildes gets
//! one more (`..~` → `..~~`). [`unescape_request`] removes that `~` before
//! routing, so handlers see the name itself.
//!
//! Only the HTML dashboard uses this; `/api` keeps asynqmon's plain
//! percent-encoding. asynq divergence: COMPATIBILITY.md#r9

use axum::extract::Request;

/// Percent-encodes everything but RFC 3986 unreserved characters
/// (`A-Z a-z 0-9 - . _ ~`): query values and `/api` paths. Dashboard path
/// segments use [`segment`], which also escapes dot segments.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes `s` as one path segment: every byte but RFC 3986
/// unreserved characters (`A-Z a-z 0-9 - . _ ~`) as `%XX`, and a segment
/// made of one or two dots and then only tildes gets one `~` appended (see
/// the module docs). `".."` → `"..~"`, `"a/b"` → `"a%2Fb"`, `"ü"` →
/// `"%C3%BC"`.
pub fn segment(s: &str) -> String {
    let mut out = encode(s);
    if is_dot_escape(s.as_bytes(), 0) {
        out.push('~');
    }
    out
}

/// Whether `s` is `.` or `..` followed by at least `tildes` `~` and nothing
/// else.
fn is_dot_escape(s: &[u8], tildes: usize) -> bool {
    let dots = s.iter().take_while(|&&b| b == b'.').count();
    (1..=2).contains(&dots) && s.len() - dots >= tildes && s[dots..].iter().all(|&b| b == b'~')
}

pub(crate) fn percent_decode(raw: &str) -> Vec<u8> {
    let b = raw.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

/// The inverse of [`segment`]'s `~` on one raw (still percent-encoded)
/// segment of a request path: `..~` → `%2E%2E`, `..~~` → `%2E%2E~`; other
/// segments are returned unchanged (`None`).
fn unescape_segment(raw: &str) -> Option<String> {
    let decoded = percent_decode(raw);
    if !is_dot_escape(&decoded, 1) {
        return None;
    }
    let mut out = String::new();
    for &b in &decoded[..decoded.len() - 1] {
        out.push_str(if b == b'.' { "%2E" } else { "~" });
    }
    Some(out)
}

/// Rewrites the path of a dashboard request so that segments written by
/// [`segment`] reach the handlers as the names they encode. Paths under
/// `{root}/api/` and `{root}/static/` are left alone. `root` is the
/// dashboard's root path (`""` or `/prefix`).
pub fn unescape_request(root: &str, req: &mut Request) {
    let path = req.uri().path();
    let Some(rest) = path.strip_prefix(root) else {
        return;
    };
    if ["/api", "/static"]
        .iter()
        .any(|p| rest == *p || rest.starts_with(&format!("{p}/")))
    {
        return;
    }
    if !path.contains('~') && !path.contains("%7E") && !path.contains("%7e") {
        return;
    }
    let mut changed = false;
    let rewritten: Vec<String> = path
        .split('/')
        .map(|seg| match unescape_segment(seg) {
            Some(s) => {
                changed = true;
                s
            }
            None => seg.to_string(),
        })
        .collect();
    if !changed {
        return;
    }
    let mut pq = rewritten.join("/");
    if let Some(q) = req.uri().query() {
        pq.push('?');
        pq.push_str(q);
    }
    if let Ok(uri) = pq.parse() {
        *req.uri_mut() = uri;
    }
}

/// Template filters: `{{ name|seg }}` is [`segment`]. Page modules bring
/// this module into scope with `use crate::web::urls::filters;`.
pub mod filters {
    use std::fmt::Display;

    /// [`super::segment`] of the value's text.
    #[askama::filter_fn]
    pub fn seg(value: impl Display, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(super::segment(&value.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments() {
        assert_eq!(segment(".."), "..~");
        assert_eq!(segment("."), ".~");
        assert_eq!(segment("..~"), "..~~");
        assert_eq!(segment("...~"), "...~");
        assert_eq!(segment("..."), "...");
        assert_eq!(segment("~"), "~");
        assert_eq!(segment("a/b?c#d%"), "a%2Fb%3Fc%23d%25");
        assert_eq!(segment("%2E%2E"), "%252E%252E");
        assert_eq!(segment("ü x"), "%C3%BC%20x");
        assert_eq!(unescape_segment("..~").as_deref(), Some("%2E%2E"));
        assert_eq!(unescape_segment(".~").as_deref(), Some("%2E"));
        assert_eq!(unescape_segment("..~~").as_deref(), Some("%2E%2E~"));
        assert_eq!(unescape_segment("%2E.%7E").as_deref(), Some("%2E%2E"));
        for plain in ["..", "~", "...~", "a~", "queues"] {
            assert_eq!(unescape_segment(plain), None, "{plain}");
        }
    }

    #[test]
    fn requests() {
        let rewrite = |root: &str, uri: &str| {
            let mut req = Request::builder()
                .uri(uri)
                .body(axum::body::Body::empty())
                .unwrap();
            unescape_request(root, &mut req);
            req.uri().to_string()
        };
        assert_eq!(
            rewrite("", "/queues/..~/pending?x=1"),
            "/queues/%2E%2E/pending?x=1"
        );
        assert_eq!(
            rewrite("", "/queues/..~/tasks/.~"),
            "/queues/%2E%2E/tasks/%2E"
        );
        assert_eq!(
            rewrite("/asynq", "/asynq/queues/..~~"),
            "/asynq/queues/%2E%2E~"
        );
        assert_eq!(rewrite("", "/api/queues/..~"), "/api/queues/..~");
        assert_eq!(rewrite("", "/queues/a~"), "/queues/a~");
    }
}
