//! The browser test harness: one chromedriver per test binary, one headless
//! Chromium session per test (fresh profile, closed at the end even when
//! the test fails), the `asynqdeck` binary as a child process, and helpers
//! that read the DOM, wait on conditions, answer `hx-confirm` dialogs,
//! collect console errors and take screenshots.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::future::Future;
use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource, MouseActions, PointerAction};
use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::support::TestDb;
use crate::support::redis::wait_for_port;

/// Debian's Chromium.
pub const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's chromedriver (package `chromium-driver`).
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_asynqdeck");

/// Browser window size; screenshots are this wide.
pub const WIDTH: u32 = 1280;
pub const HEIGHT: u32 = 900;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind a free port")
        .local_addr()
        .unwrap()
        .port()
}

/// Spawns `cmd` from a thread that lives as long as the test binary, with
/// PR_SET_PDEATHSIG, so the child dies with the binary (as the private
/// redis-server of `support`).
fn spawn_for_process_lifetime(mut cmd: Command) -> u32 {
    let what = format!("{cmd:?}");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        match cmd.spawn() {
            Ok(child) => {
                tx.send(Ok(child.id())).unwrap();
                let _keep = child;
                loop {
                    std::thread::park();
                }
            }
            Err(e) => tx.send(Err(e)).unwrap(),
        }
    });
    rx.recv()
        .unwrap()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"))
}

static DRIVER: OnceLock<u16> = OnceLock::new();

/// The chromedriver of this test binary (started on first use, killed
/// with the binary); returns its port.
fn chromedriver() -> u16 {
    *DRIVER.get_or_init(|| {
        for tool in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(tool).exists(),
                "{tool} is missing: install Debian's chromium and chromium-driver \
                 (`bash scripts/test.sh` does)"
            );
        }
        let port = free_port();
        let mut cmd = Command::new(CHROMEDRIVER);
        cmd.arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        spawn_for_process_lifetime(cmd);
        wait_for_port(port, Duration::from_secs(20), "chromedriver");
        port
    })
}

static PROFILE: AtomicU32 = AtomicU32::new(0);

/// The session's capabilities: headless Chromium as root on a closed
/// network, a fresh profile, the console log collected, dialogs left open
/// for the test to answer.
fn capabilities(profile: &std::path::Path) -> Capabilities {
    let caps = json!({
        "browserName": "chrome",
        "unhandledPromptBehavior": "ignore",
        "goog:loggingPrefs": { "browser": "ALL" },
        "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                format!("--user-data-dir={}", profile.display()),
                format!("--window-size={WIDTH},{HEIGHT}"),
            ],
        },
    });
    match caps {
        Value::Object(map) => map,
        _ => unreachable!(),
    }
}

/// Runs `body` with a new browser session and closes the session (and its
/// Chromium) afterwards, also when `body` panics; then re-raises the panic.
pub async fn with_browser<F, Fut>(body: F)
where
    F: FnOnce(Page) -> Fut,
    Fut: Future<Output = ()>,
{
    let port = chromedriver();
    let profile = std::env::temp_dir().join(format!(
        "asynqdeck-browser-{}-{}",
        std::process::id(),
        PROFILE.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&profile);
    std::fs::create_dir_all(&profile).unwrap();
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let client = ClientBuilder::new(connector)
        .capabilities(capabilities(&profile))
        .connect(&format!("http://127.0.0.1:{port}"))
        .await
        .expect("start a Chromium session through chromedriver");
    let page = Page {
        client: client.clone(),
    };
    let outcome = AssertUnwindSafe(body(page)).catch_unwind().await;
    let _ = client.close().await;
    let _ = std::fs::remove_dir_all(&profile);
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

/// chromedriver's `POST /session/{id}/se/log` (`{"type": "browser"}`):
/// the console entries since the last call. Not a W3C command, so
/// fantoccini has no method for it.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!("session/{}/se/log", session_id.unwrap_or("")))
    }

    fn method_and_body(&self, _url: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_string()),
        )
    }
}

/// A browser tab with the helpers the tests use.
#[derive(Clone)]
pub struct Page {
    pub client: Client,
}

impl Page {
    /// Parks the pointer in the top-left corner (the header, outside every
    /// live fragment), then navigates to `url` and waits until the document
    /// is loaded. A pointer left where an earlier click put it would hold
    /// the new page's live updates (R0) wherever a table happens to be.
    pub async fn goto(&self, url: &str) {
        self.park_pointer().await;
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Moves the pointer to the viewport's top-left corner.
    pub async fn park_pointer(&self) {
        let to_corner = MouseActions::new("mouse".to_string()).then(PointerAction::MoveTo {
            duration: None,
            x: 0.0,
            y: 0.0,
        });
        self.client
            .perform_actions(to_corner)
            .await
            .expect("move the pointer to the corner");
    }

    /// Moves the pointer onto the centre of the element matching `css`
    /// (found settled, as by [`Page::click`]), without clicking.
    pub async fn hover(&self, css: &str) {
        self.settled(css, |el| async move {
            let onto = MouseActions::new("mouse".to_string()).then(PointerAction::MoveToElement {
                element: el,
                duration: None,
                x: 0.0,
                y: 0.0,
            });
            self.client.perform_actions(onto).await
        })
        .await;
    }

    /// Runs `act` on the element matching `css` once it is settled: present
    /// with a size, and not inside an element htmx is requesting, swapping
    /// or settling for. A stale element (swapped between finding and
    /// acting), a missing one or an intercepted click is found again and
    /// retried until 15 s have passed; then the test fails naming `css`.
    /// The WebDriver checks staleness before it dispatches anything, so a
    /// retried click never lands twice.
    async fn settled<F, Fut>(&self, css: &str, act: F)
    where
        F: Fn(Element) -> Fut,
        Fut: Future<Output = Result<(), CmdError>>,
    {
        const SETTLED: &str = "var el = document.querySelector(arguments[0]);
            if (!el || el.closest('.htmx-request, .htmx-swapping, .htmx-settling')) return false;
            var r = el.getBoundingClientRect();
            return r.width > 0 && r.height > 0;";
        let deadline = Instant::now() + Duration::from_secs(15);
        let mut last = String::from("never settled");
        loop {
            let settled = self
                .client
                .execute(SETTLED, vec![json!(css)])
                .await
                .unwrap_or_else(|e| panic!("check {css}: {e}"));
            if settled == Value::Bool(true) {
                let outcome = match self.client.find(Locator::Css(css)).await {
                    Ok(el) => act(el).await,
                    Err(e) => Err(e),
                };
                match outcome {
                    Ok(()) => return,
                    Err(e)
                        if e.is_stale_element_reference()
                            || e.is_no_such_element()
                            || e.to_string().contains("click intercepted") =>
                    {
                        last = e.to_string();
                    }
                    Err(e) => panic!("{css}: {e}"),
                }
            }
            assert!(
                Instant::now() < deadline,
                "no settled element {css} within 15 s (last: {last})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `script` (a function body; `return` the value) and decodes what
    /// it returns.
    pub async fn js<T: DeserializeOwned>(&self, script: &str) -> T {
        let v = self
            .client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("script failed: {e}\n{script}"));
        serde_json::from_value(v.clone())
            .unwrap_or_else(|e| panic!("script returned {v} ({e})\n{script}"))
    }

    /// Evaluates `script` every 100 ms until it returns something other than
    /// `null`, and decodes that; panics naming `what` after `timeout`.
    pub async fn wait_js<T: DeserializeOwned>(
        &self,
        timeout: Duration,
        what: &str,
        script: &str,
    ) -> T {
        let deadline = Instant::now() + timeout;
        let mut last = Value::Null;
        loop {
            match self.client.execute(script, Vec::new()).await {
                Ok(Value::Null) => {}
                Ok(v) => {
                    return serde_json::from_value(v.clone())
                        .unwrap_or_else(|e| panic!("{what}: script returned {v} ({e})"));
                }
                Err(e) => last = Value::String(e.to_string()),
            }
            assert!(
                Instant::now() < deadline,
                "timed out after {timeout:?} waiting for {what} (last error: {last})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Clicks the element matching `css` (a real WebDriver click) once it
    /// is settled, finding it again when a live update replaced it (see
    /// [`Page::settled`]). Every click of the browser tests goes through
    /// here.
    pub async fn click(&self, css: &str) {
        self.settled(css, |el| async move { el.click().await })
            .await;
    }

    /// Types `text` into the element matching `css` (real key events),
    /// once it is settled.
    pub async fn type_text(&self, css: &str, text: &str) {
        self.settled(css, |el| {
            let text = text.to_string();
            async move { el.send_keys(&text).await }
        })
        .await;
    }

    /// Waits for the `window.confirm` dialog htmx opens for `hx-confirm`,
    /// asserts its text and accepts it.
    pub async fn confirm(&self, expected: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let text = loop {
            match self.client.get_alert_text().await {
                Ok(t) => break t,
                Err(e) => {
                    assert!(Instant::now() < deadline, "no confirm dialog appeared: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        };
        assert_eq!(text, expected, "confirm dialog text");
        self.client.accept_alert().await.expect("accept the dialog");
    }

    /// Sets a property on `window`; it survives htmx swaps but not a page
    /// load, so [`Page::assert_not_reloaded`] proves no full reload happened.
    pub async fn mark_window(&self, marker: &str) {
        let _: Value = self
            .js(&format!(
                "window.__asynqdeckMarker = {marker:?}; return null;"
            ))
            .await;
    }

    /// Asserts the marker set by [`Page::mark_window`] is still there.
    pub async fn assert_not_reloaded(&self, marker: &str) {
        let got: Option<String> = self
            .js("return window.__asynqdeckMarker === undefined ? null : window.__asynqdeckMarker;")
            .await;
        assert_eq!(
            got.as_deref(),
            Some(marker),
            "the page was reloaded (window marker gone)"
        );
    }

    /// Console entries of level SEVERE (errors, failed loads, CSP
    /// violations) since the last call, as `source: message` lines; a
    /// Content-Security-Policy message of any level counts too.
    pub async fn console_errors(&self) -> Vec<String> {
        let v = self
            .client
            .issue_cmd(BrowserLog)
            .await
            .expect("read the browser console log");
        let entries = v.as_array().cloned().unwrap_or_default();
        entries
            .into_iter()
            .filter(|e| {
                let level = e["level"].as_str().unwrap_or("");
                let msg = e["message"].as_str().unwrap_or("");
                level == "SEVERE" || msg.contains("Content Security Policy")
            })
            .map(|e| {
                format!(
                    "{} {}: {}",
                    e["level"].as_str().unwrap_or("?"),
                    e["source"].as_str().unwrap_or("?"),
                    e["message"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }

    /// Asserts the console has no errors since the last check.
    pub async fn assert_no_console_errors(&self, page: &str) {
        let errors = self.console_errors().await;
        assert!(
            errors.is_empty(),
            "console errors on {page}:\n{}",
            errors.join("\n")
        );
    }

    /// Installs counters of finished and failed htmx requests
    /// (`window.__htmxDone`, `window.__htmxFailed`) on the current page.
    pub async fn count_htmx_requests(&self) {
        let _: Value = self
            .js(
                "window.__htmxDone = 0; window.__htmxFailed = [];
                 document.body.addEventListener('htmx:afterRequest', function (e) {
                   window.__htmxDone++;
                   if (!e.detail.successful) {
                     var x = e.detail.xhr;
                     window.__htmxFailed.push((x ? x.status : 0) + ' ' + (e.detail.requestConfig ? e.detail.requestConfig.path : '?'));
                   }
                 });
                 return null;",
            )
            .await;
    }

    /// Waits until at least `n` htmx requests finished since
    /// [`Page::count_htmx_requests`] and asserts none failed.
    pub async fn wait_htmx_requests(&self, n: u32, page: &str) {
        let _: u32 = self
            .wait_js(
                Duration::from_secs(15),
                &format!("{n} htmx requests on {page}"),
                &format!("return window.__htmxDone >= {n} ? window.__htmxDone : null;"),
            )
            .await;
        let failed: Vec<String> = self.js("return window.__htmxFailed;").await;
        assert!(
            failed.is_empty(),
            "failed htmx requests on {page}: {failed:?}"
        );
    }

    /// With `UPDATE_SCREENSHOTS=1`: writes the viewport as
    /// `docs/screenshots/<name>.png` (1280 px wide), squeezed by pngquant
    /// or optipng when installed. Otherwise does nothing, so test runs do
    /// not dirty the tree.
    pub async fn screenshot(&self, name: &str) {
        if !updating_screenshots() {
            return;
        }
        let png = self.client.screenshot().await.expect("take a screenshot");
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        let squeezed = Command::new("pngquant")
            .args(["--force", "--skip-if-larger", "--strip", "--quality=70-95"])
            .arg("--output")
            .arg(&path)
            .arg(&path)
            .status()
            .is_ok_and(|s| s.success());
        if !squeezed {
            let _ = Command::new("optipng").arg("-quiet").arg(&path).status();
        }
        eprintln!(
            "screenshot {} ({} bytes)",
            path.display(),
            std::fs::metadata(&path).map_or(0, |m| m.len())
        );
    }
}

/// Whether this run writes the README's screenshots (`UPDATE_SCREENSHOTS=1`).
pub fn updating_screenshots() -> bool {
    std::env::var("UPDATE_SCREENSHOTS").as_deref() == Ok("1")
}

/// The `asynqdeck` binary running as a child process (killed on drop); its
/// output's last lines are printed when the test fails.
pub struct App {
    child: Child,
    /// `http://127.0.0.1:<port>` (no trailing slash).
    pub base: String,
    log: Arc<Mutex<VecDeque<String>>>,
}

const LOG_LINES: usize = 200;

impl App {
    /// `asynqdeck serve --redis-url <db> --listen 127.0.0.1:0
    /// --poll-interval 1s <extra>`.
    pub fn serve(db: &TestDb, extra: &[&str]) -> App {
        let mut args = vec![
            "serve".to_string(),
            "--redis-url".into(),
            db.url(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--poll-interval".into(),
            "1s".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        App::start(&args)
    }

    /// `asynqdeck demo --redis-url <db> --listen 127.0.0.1:0
    /// --poll-interval 1s <extra>`.
    pub fn demo(db: &TestDb, extra: &[&str]) -> App {
        let mut args = vec![
            "demo".to_string(),
            "--redis-url".into(),
            db.url(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--poll-interval".into(),
            "1s".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        App::start(&args)
    }

    fn start(args: &[String]) -> App {
        let mut cmd = Command::new(BIN);
        cmd.args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("start {BIN}: {e}"));
        let log = Arc::new(Mutex::new(VecDeque::new()));
        let keep = |log: &Arc<Mutex<VecDeque<String>>>, line: String| {
            let mut l = log.lock().unwrap();
            if l.len() == LOG_LINES {
                l.pop_front();
            }
            l.push_back(line);
        };
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn({
            let log = log.clone();
            move || {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    keep(&log, line);
                }
            }
        });
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn({
            let log = log.clone();
            move || {
                for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                    if let Some(rest) = line.strip_prefix("asynqdeck serving ") {
                        let url = rest.split_whitespace().next().unwrap_or("").to_string();
                        let _ = tx.send(url);
                    }
                    keep(&log, line);
                }
            }
        });
        let url = match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(url) => url,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                let lines: Vec<String> = log.lock().unwrap().iter().cloned().collect();
                panic!(
                    "{BIN} {args:?} did not print its URL:\n{}",
                    lines.join("\n")
                );
            }
        };
        App {
            child,
            base: url.trim_end_matches('/').to_string(),
            log,
        }
    }

    /// `base + path` (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for App {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let lines: Vec<String> = self.log.lock().unwrap().iter().cloned().collect();
            eprintln!(
                "--- last {} lines of the app's output ---\n{}",
                lines.len(),
                lines.join("\n")
            );
        }
    }
}

/// Polls `f` every 100 ms until it returns `Some`; panics naming `what`
/// after `timeout`.
pub async fn until<T, F, Fut>(timeout: Duration, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    crate::support::eventually(timeout, f)
        .await
        .unwrap_or_else(|| panic!("timed out after {timeout:?} waiting for {what}"))
}
