//! Reading htmx fragments as the browser does: the attributes of a tag
//! (decoded from askama's escaping), the request an element makes
//! (`hx-get`/`hx-post` with its form's inputs), the one a fragment makes
//! by itself once loaded (`hx-trigger="load…"`), and `data-field` numbers.

use axum::http::Method;

/// `s` with the entities askama writes decoded.
pub fn unescape(s: &str) -> String {
    s.replace("&#34;", "\"")
        .replace("&#39;", "'")
        .replace("&#60;", "<")
        .replace("&#62;", ">")
        .replace("&#38;", "&")
}

/// The value of attribute `name` in the tag text `tag`, decoded.
pub fn attr(tag: &str, name: &str) -> Option<String> {
    let pat = format!(" {name}=\"");
    let i = tag.find(&pat)? + pat.len();
    let j = tag[i..].find('"')?;
    Some(unescape(&tag[i..i + j]))
}

/// The text of the tag whose start `<` precedes byte `at` of `html`.
pub fn tag_around(html: &str, at: usize) -> &str {
    let start = html[..at].rfind('<').unwrap();
    let end = at + html[at..].find('>').unwrap();
    &html[start..=end]
}

/// The named inputs of the form starting at byte `at`, as the browser
/// submits them.
pub fn form_fields(html: &str, at: usize) -> Vec<(String, String)> {
    let end = at + html[at..].find("</form>").unwrap();
    let form = &html[at..end];
    form.match_indices("<input")
        .filter_map(|(i, _)| {
            let tag = tag_around(form, i + 1);
            Some((attr(tag, "name")?, attr(tag, "value").unwrap_or_default()))
        })
        .collect()
}

/// A request an htmx fragment makes: its method, URL and form fields.
#[derive(Debug)]
pub struct HxRequest {
    pub method: Method,
    pub url: String,
    pub fields: Vec<(String, String)>,
}

/// The request of the element at byte `at` (its `hx-get` or `hx-post`,
/// with its form's inputs when it is a form).
pub fn hx_request(html: &str, at: usize) -> HxRequest {
    let tag = tag_around(html, at);
    let (method, url) = match (attr(tag, "hx-get"), attr(tag, "hx-post")) {
        (Some(u), None) => (Method::GET, u),
        (None, Some(u)) => (Method::POST, u),
        other => panic!("{tag}: {other:?}"),
    };
    let start = html[..at].rfind('<').unwrap();
    let fields = if tag.starts_with("<form") {
        form_fields(html, start)
    } else {
        Vec::new()
    };
    HxRequest {
        method,
        url,
        fields,
    }
}

/// The request the fragment makes by itself once loaded
/// (`hx-trigger="load…"`), if any; never more than one.
pub fn continuation(html: &str) -> Option<HxRequest> {
    let found: Vec<usize> = html
        .match_indices("hx-trigger=\"load")
        .map(|(i, _)| i)
        .collect();
    assert!(found.len() <= 1, "{html}");
    found.first().map(|&i| hx_request(html, i))
}

/// `fields` as an `application/x-www-form-urlencoded` body.
pub fn form_body(fields: &[(String, String)]) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect::<String>()
    };
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The number in `<… data-field="name">N<`.
pub fn field(html: &str, name: &str) -> Option<u64> {
    let pat = format!("data-field=\"{name}\">");
    let i = html.find(&pat)? + pat.len();
    let digits: String = html[i..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().ok()
}
