//! Requests to the dashboard and the one [`Reply`] they all answer with.
//!
//! In-process, through `tower::ServiceExt::oneshot` on the app's router
//! (a [`Dashboard`] holds one with its CSRF token):
//! [`send`] (a built request), [`call`] (method, URI, headers, body),
//! [`get`], [`get_json`], [`post`], [`delete`], [`page`] (a GET as a
//! browser or as htmx), [`post_form`] (an
//! htmx form POST with the CSRF token), [`as_page`] (any method as the
//! pages send it) and [`api`] (a JSON-API request with
//! no `Origin`, as curl or a script sends it).
//!
//! Over TCP, against the `asynqdeck` binary: [`ServeBin`] runs `asynqdeck
//! serve` as a child process, [`request`] sends one HTTP/1.0 request with
//! exactly the headers given (so a test controls `Host` and `Origin`), and
//! [`anchors`] / [`attr_values`] read the links a page renders,
//! entity-decoded, for the test to follow as a browser would.

use std::process::Stdio;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tower::ServiceExt;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_asynqdeck");

/// A running `asynqdeck serve`, killed on drop.
pub struct ServeBin {
    child: tokio::process::Child,
    /// `127.0.0.1:PORT`, the address it listens on.
    pub addr: String,
    _stdout: BufReader<tokio::process::ChildStdout>,
}

impl ServeBin {
    /// `asynqdeck serve --redis-url <url> <args>` (give `--listen`), with an
    /// empty environment plus `env`; waits for the line naming its URL.
    pub async fn start(redis_url: &str, args: &[&str], env: &[(&str, &str)]) -> ServeBin {
        let mut all = vec!["--redis-url", redis_url];
        all.extend_from_slice(args);
        ServeBin::spawn(&all, env).await
    }

    /// `asynqdeck serve <args>` (give the Redis and `--listen`), with an
    /// empty environment plus `env`; waits for the line naming its URL.
    pub async fn spawn(args: &[&str], env: &[(&str, &str)]) -> ServeBin {
        let mut child = tokio::process::Command::new(BIN)
            .arg("serve")
            .args(args)
            .env_clear()
            .envs(env.iter().copied())
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn asynqdeck serve");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        tokio::time::timeout(Duration::from_secs(30), stdout.read_line(&mut line))
            .await
            .expect("asynqdeck serve prints its URL in time")
            .unwrap();
        let url = line
            .strip_prefix("asynqdeck serving http://")
            .unwrap_or_else(|| panic!("asynqdeck serve {args:?} did not start: {line:?}"));
        let addr = url.split('/').next().unwrap().to_string();
        ServeBin {
            child,
            addr,
            _stdout: stdout,
        }
    }

    /// The next line it prints on stdout (without the newline), waiting
    /// up to 20 s; `None` at the end of its output.
    pub async fn next_line(&mut self) -> Option<String> {
        let mut line = String::new();
        let n = tokio::time::timeout(Duration::from_secs(20), self._stdout.read_line(&mut line))
            .await
            .expect("a line on stdout in time")
            .unwrap();
        (n > 0).then(|| line.trim_end().to_string())
    }

    /// Its process id.
    pub fn pid(&self) -> i32 {
        self.child.id().expect("running") as i32
    }

    /// Sends SIGTERM and returns the exit code.
    pub async fn terminate(mut self) -> Option<i32> {
        unsafe {
            libc::kill(self.pid(), libc::SIGTERM);
        }
        let status = tokio::time::timeout(Duration::from_secs(20), self.child.wait())
            .await
            .expect("asynqdeck exits after SIGTERM")
            .unwrap();
        status.code()
    }

    /// A plain HTTP/1.0 GET of `path` (the server then answers without
    /// chunking and closes).
    pub async fn get(&self, path: &str) -> Reply {
        request(&self.addr, "GET", path, &[("Host", &self.addr)], "").await
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.addr.rsplit(':').next().unwrap().parse().unwrap()
    }
}

/// A response: status, headers, the body as text (lossy UTF-8) and as bytes.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
    pub bytes: Vec<u8>,
}

impl Reply {
    fn new(status: StatusCode, headers: HeaderMap, bytes: Vec<u8>) -> Reply {
        Reply {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
            bytes,
        }
    }

    /// The first header named `name`, when it is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `content-type` header, `""` when there is none.
    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }

    /// The body as JSON; panics with the status and body when it is not.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}), status {}: {}", self.status, self.body))
    }

    /// The body as text.
    pub fn text(&self) -> String {
        self.body.clone()
    }

    /// Status and body text, for `let (status, html) = ...`.
    pub fn parts(self) -> (StatusCode, String) {
        (self.status, self.body)
    }
}

/// The dashboard's router and the CSRF token its pages carry, for tests
/// that act as a viewer of the pages.
pub struct Dashboard {
    pub app: Router,
    pub token: String,
}

impl Dashboard {
    /// The dashboard over `inspector` with `config`.
    pub fn new(inspector: asynqdeck::Inspector, config: asynqdeck::web::WebConfig) -> Dashboard {
        let state = asynqdeck::web::AppState::new(inspector, config);
        Dashboard {
            token: state.csrf_token.to_string(),
            app: asynqdeck::web::router(state),
        }
    }

    /// A GET as htmx.
    pub async fn hx_get(&self, uri: &str) -> Reply {
        page(&self.app, uri, true).await
    }

    /// An HTML action: an htmx form POST of `form` with the CSRF token.
    pub async fn post(&self, uri: &str, form: &str) -> Reply {
        post_form(&self.app, uri, form, Some(&self.token)).await
    }

    /// A JSON-API request with no headers and no body.
    pub async fn api(&self, method: Method, uri: &str) -> Reply {
        api(&self.app, method, uri, None).await
    }
}

/// Sends `req` to `app` in-process and reads the whole response.
pub async fn send(app: &Router, req: Request<Body>) -> Reply {
    let resp = app.clone().oneshot(req).await.unwrap();
    let status = resp.status();
    let headers = resp.headers().clone();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    Reply::new(status, headers, bytes)
}

/// `method uri` with exactly `headers` and `body` (empty when `None`).
pub async fn call(
    app: &Router,
    method: Method,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> Reply {
    let mut req = Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let body = body
        .map(|b| Body::from(b.to_string()))
        .unwrap_or_else(Body::empty);
    send(app, req.body(body).unwrap()).await
}

/// A plain GET (no htmx header), as a browser's first load.
pub async fn get(app: &Router, uri: &str) -> Reply {
    call(app, Method::GET, uri, &[], None).await
}

/// A GET, as htmx (`HX-Request: true`) when `htmx`.
pub async fn page(app: &Router, uri: &str, htmx: bool) -> Reply {
    let hx: &[(&str, &str)] = if htmx { &[("HX-Request", "true")] } else { &[] };
    call(app, Method::GET, uri, hx, None).await
}

/// A plain POST (no headers) with `body`, empty when `None`.
pub async fn post(app: &Router, uri: &str, body: Option<&str>) -> Reply {
    call(app, Method::POST, uri, &[], body).await
}

/// A plain DELETE.
pub async fn delete(app: &Router, uri: &str) -> Reply {
    call(app, Method::DELETE, uri, &[], None).await
}

/// A GET that must answer 200 with JSON; its body.
pub async fn get_json(app: &Router, uri: &str) -> serde_json::Value {
    let r = get(app, uri).await;
    assert_eq!(r.status, StatusCode::OK, "GET {uri}: {}", r.text());
    assert_eq!(r.content_type(), "application/json", "GET {uri}");
    r.json()
}

/// An htmx form POST (`HX-Request`, form content type) of `form`, with the
/// CSRF header when `token` is given.
pub async fn post_form(app: &Router, uri: &str, form: &str, token: Option<&str>) -> Reply {
    let mut headers = vec![
        ("HX-Request", "true"),
        ("content-type", "application/x-www-form-urlencoded"),
    ];
    if let Some(t) = token {
        headers.push(("X-CSRF-Token", t));
    }
    call(app, Method::POST, uri, &headers, Some(form)).await
}

/// `method uri` as the dashboard's pages send it: `HX-Request` when
/// `htmx`; the CSRF header and the form content type when `token` is
/// given; `form` as the body.
pub async fn as_page(
    app: &Router,
    method: Method,
    uri: &str,
    htmx: bool,
    token: Option<&str>,
    form: &str,
) -> Reply {
    let mut headers = Vec::new();
    if htmx {
        headers.push(("HX-Request", "true"));
    }
    if let Some(t) = token {
        headers.push(("X-CSRF-Token", t));
        headers.push(("content-type", "application/x-www-form-urlencoded"));
    }
    call(app, method, uri, &headers, Some(form)).await
}

/// A JSON-API request with no headers (no `Origin`: as curl or a script).
pub async fn api(app: &Router, method: Method, uri: &str, body: Option<&str>) -> Reply {
    call(app, method, uri, &[], body).await
}

/// Sends `method path_and_query HTTP/1.0` to `addr` with exactly `headers`
/// (no `Host` unless given) and `body`, and reads the whole response.
pub async fn request(
    addr: &str,
    method: &str,
    path_and_query: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Reply {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut head = format!("{method} {path_and_query} HTTP/1.0\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    s.write_all(head.as_bytes()).await.unwrap();
    s.write_all(body.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut raw))
        .await
        .expect("response in time")
        .unwrap();
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad response to {method} {path_and_query}: {head}"));
    let mut map = HeaderMap::new();
    for (k, v) in lines.filter_map(|l| l.split_once(':')) {
        let name = HeaderName::from_bytes(k.trim().to_ascii_lowercase().as_bytes()).unwrap();
        map.append(name, HeaderValue::from_str(v.trim()).unwrap());
    }
    let status = StatusCode::from_u16(status).unwrap();
    Reply::new(status, map, body.as_bytes().to_vec())
}

/// Decodes the character references askama writes (`&#38;`, `&#x26;`) and
/// the named ones `&amp; &lt; &gt; &quot; &apos;`.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let Some(end) = rest.find(';') else { break };
        let entity = &rest[1..end];
        let decoded = match entity {
            "amp" => Some('&'),
            "lt" => Some('<'),
            "gt" => Some('>'),
            "quot" => Some('"'),
            "apos" => Some('\''),
            e if e.starts_with("#x") || e.starts_with("#X") => u32::from_str_radix(&e[2..], 16)
                .ok()
                .and_then(char::from_u32),
            e if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match decoded {
            Some(c) => {
                out.push(c);
                rest = &rest[end + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The value of every `name="..."` attribute in `html`, entity-decoded, in
/// page order.
pub fn attr_values(html: &str, name: &str) -> Vec<String> {
    let needle = format!(" {name}=\"");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find(&needle) {
        rest = &rest[i + needle.len()..];
        let end = rest.find('"').expect("attribute closes");
        out.push(unescape(&rest[..end]));
        rest = &rest[end..];
    }
    out
}

/// Every `<a href="...">text</a>` in `html` as `(href, text)`, both
/// entity-decoded, the text without inner tags and trimmed.
pub fn anchors(html: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find("<a ") {
        rest = &rest[i..];
        let tag_end = rest.find('>').expect("tag closes");
        let tag = &rest[..tag_end];
        let close = rest.find("</a>").expect("anchor closes");
        let inner = &rest[tag_end + 1..close];
        rest = &rest[close..];
        let Some(href) = attr_values(tag, "href").into_iter().next() else {
            continue;
        };
        let mut text = String::new();
        let mut in_tag = false;
        for c in inner.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        out.push((href, unescape(text.trim())));
    }
    out
}

/// Resolves `href` against `http://<addr><page>` the way a browser does
/// (WHATWG URL parsing, dot segments removed) and returns the path and
/// query to request.
pub fn follow(addr: &str, page: &str, href: &str) -> String {
    let base = url::Url::parse(&format!("http://{addr}{page}")).unwrap();
    let target = base
        .join(href)
        .unwrap_or_else(|e| panic!("link {href:?} on {page}: {e}"));
    match target.query() {
        Some(q) => format!("{}?{q}", target.path()),
        None => target.path().to_string(),
    }
}
