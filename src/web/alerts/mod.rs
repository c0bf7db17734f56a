//! Alert webhooks (issue 17 item 6, COMPATIBILITY.md N6): while
//! `--alert-webhook` is given, [`run`] evaluates the signals every poll
//! interval from the shared statistics snapshot and the attention board,
//! and [`Alerter`] posts Slack-compatible JSON ([`message`]) to each
//! configured URL: when a queue's retry set grows fast (the outage signal),
//! when an attention finding is critical, and when an archive is at its cap
//! (evicting). One message per (queue, signal) transition, none repeated
//! within the cooldown, and a "resolved" message when the condition
//! clears. `/alerts` lists the webhooks (host only: a webhook URL's path is
//! its secret), the last sends, and a "Send a test" button.
//!
//! When many alerts fall due at once (every worker down, 3,000 queues),
//! more than [`SUMMARY_FROM`] of one (signal, state) go out as one summary
//! post, and one evaluation posts at most [`MAX_POSTS`] messages to each
//! webhook ([`fold`]).
//!
//! Every dashboard on one Redis evaluates the same signals, so each alert
//! is claimed in Redis first ([`Inspector::claim_alerts`], pipelined; only
//! claimed alerts are posted or summarized): the firing
//! post of an episode and its resolved post go out once whichever dashboard
//! sees them first, and a restarted dashboard does not post again within
//! the cooldown. When Redis cannot answer the claim, the post goes out (a
//! duplicate beats a missed page).
//!
//! [`Inspector::claim_alerts`]: crate::inspector::Inspector::claim_alerts

mod claims;
mod send;
mod signals;
mod summary;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;

pub use claims::claim_all;
pub use send::{host_of, post_json};
pub use signals::{Signal, signals};
pub use summary::{AlertGroup, MAX_POSTS, SUMMARY_FROM, SUMMARY_QUEUES, fold, summarize};

use super::AppState;
use super::pages::jobs::thousands;

/// Default `--alert-cooldown`: 15 minutes.
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(15 * 60);
/// Most sends kept for `/alerts`.
pub const SENDS_KEPT: usize = 20;
/// Longest wait for one webhook's answer.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Shortest life of a claim in Redis (a cooldown below it still dedupes
/// the dashboards, which evaluate a poll interval apart).
pub const MIN_CLAIM_TTL: Duration = Duration::from_secs(30);

/// The alert settings of `asynqdeck serve`.
#[derive(Clone, Debug)]
pub struct AlertConfig {
    /// Webhook URLs (`http://` or `https://`); none turns alerts off.
    pub webhooks: Vec<String>,
    /// Least time between two "firing" messages of one (queue, signal).
    pub cooldown: Duration,
    /// The dashboard's base URL for links (no trailing slash).
    pub dashboard_url: String,
}

impl Default for AlertConfig {
    /// No webhook, [`DEFAULT_COOLDOWN`], links to `http://127.0.0.1:8080`.
    fn default() -> Self {
        AlertConfig {
            webhooks: Vec::new(),
            cooldown: DEFAULT_COOLDOWN,
            dashboard_url: "http://127.0.0.1:8080".into(),
        }
    }
}

/// Whether a message announces a condition or its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlertState {
    /// The condition holds.
    Firing,
    /// The condition cleared.
    Resolved,
    /// A test from the "Send a test" button.
    Test,
}

impl AlertState {
    /// `firing`, `resolved` or `test`.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertState::Firing => "firing",
            AlertState::Resolved => "resolved",
            AlertState::Test => "test",
        }
    }
}

/// One alert to post.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// The queue concerned, or empty.
    pub queue: String,
    /// The signal (`retry_growth`, `archive_evicting`, or a finding kind).
    pub signal: String,
    /// Firing, resolved or test.
    pub state: AlertState,
    /// The sentence.
    pub text: String,
    /// The figures behind it, by name.
    pub numbers: Vec<(String, i64)>,
    /// Where to act on the dashboard (a full URL).
    pub link: String,
    /// For a summary post ([`fold`]), the alerts it stands for; `queue`
    /// is then empty.
    pub group: Option<AlertGroup>,
}

/// Escapes `&`, `<` and `>` as Slack's message formatting requires (a
/// queue name could otherwise forge a link or a mention).
pub fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The Slack-compatible body of `alert`: `text`, one attachment with its
/// fields (queue, signal, state, the numbers, the link), and the same
/// structured under `asynqdeck` (Slack ignores unknown keys). A summary
/// ([`Alert::group`]) has the fields signal, state, count, queues and
/// the link, and `asynqdeck` carries `signal`, `state`, `text`, `count`,
/// `queues` (the first [`SUMMARY_QUEUES`], sorted) and `link`. The Slack
/// parts are escaped ([`slack_escape`]); the `asynqdeck` part is plain.
pub fn message(alert: &Alert) -> serde_json::Value {
    let prefix = match alert.state {
        AlertState::Firing => "🔴 asynqdeck",
        AlertState::Resolved => "✅ asynqdeck resolved",
        AlertState::Test => "asynqdeck test",
    };
    let text = format!(
        "{prefix}: {} <{}|open>",
        slack_escape(&alert.text),
        alert.link
    );
    let short = |title: &str, value: String| serde_json::json!({"title": title, "value": value, "short": true});
    let dashboard = serde_json::json!({"title": "dashboard", "value": slack_escape(&alert.link), "short": false});
    if let Some(g) = &alert.group {
        let mut queues = g.queues.join(", ");
        if g.count > g.queues.len() {
            queues.push_str(&format!(
                " and {} more",
                thousands((g.count - g.queues.len()) as u64)
            ));
        }
        return serde_json::json!({
            "text": text,
            "attachments": [{"fields": [
                short("signal", alert.signal.clone()),
                short("state", alert.state.as_str().into()),
                short("count", g.count.to_string()),
                serde_json::json!({"title": "queues", "value": slack_escape(&queues), "short": false}),
                dashboard,
            ]}],
            "asynqdeck": {
                "signal": alert.signal,
                "state": alert.state.as_str(),
                "text": alert.text,
                "count": g.count,
                "queues": g.queues,
                "link": alert.link,
            }
        });
    }
    let mut fields = vec![
        short("queue", slack_escape(&alert.queue)),
        short("signal", alert.signal.clone()),
        short("state", alert.state.as_str().into()),
    ];
    for (k, v) in &alert.numbers {
        fields.push(short(k, v.to_string()));
    }
    fields.push(dashboard);
    let numbers: serde_json::Map<String, serde_json::Value> = alert
        .numbers
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::json!(v)))
        .collect();
    serde_json::json!({
        "text": text,
        "attachments": [{"fields": fields}],
        "asynqdeck": {
            "queue": alert.queue,
            "signal": alert.signal,
            "state": alert.state.as_str(),
            "text": alert.text,
            "numbers": numbers,
            "link": alert.link,
        }
    })
}

/// One post to one webhook, for `/alerts`.
#[derive(Clone, Debug)]
pub struct SendRecord {
    /// When it was sent.
    pub at: DateTime<Utc>,
    /// The webhook's host (never its path).
    pub host: String,
    /// The queue and signal.
    pub queue: String,
    /// The signal.
    pub signal: String,
    /// Firing, resolved or test.
    pub state: AlertState,
    /// `200 OK`-like status text, or the error.
    pub result: Result<u16, String>,
}

#[derive(Debug)]
struct Entry {
    firing: bool,
    /// A firing message was sent for the current episode.
    notified: bool,
    last_fired: Option<Instant>,
    /// While firing: when to post the firing message (again): one cooldown
    /// after the last one, whether it was posted, found posted by another
    /// dashboard, or held back by the cooldown.
    due: Option<Instant>,
    /// The token of the episode's firing claim in Redis (ours or the
    /// dashboard's that posted it).
    episode: Option<String>,
    numbers: Vec<(String, i64)>,
    text: String,
    link: String,
}

/// The dedupe and cooldown state of every (queue, signal), and the last
/// sends.
#[derive(Debug)]
pub struct Alerter {
    config: AlertConfig,
    entries: Mutex<HashMap<(String, String), Entry>>,
    sends: Mutex<VecDeque<SendRecord>>,
}

impl Alerter {
    /// An alerter for `config` (inactive without webhooks).
    pub fn new(config: AlertConfig) -> Self {
        Alerter {
            config,
            entries: Mutex::new(HashMap::new()),
            sends: Mutex::new(VecDeque::new()),
        }
    }

    /// The settings.
    pub fn config(&self) -> &AlertConfig {
        &self.config
    }

    /// Whether any webhook is configured.
    pub fn active(&self) -> bool {
        !self.config.webhooks.is_empty()
    }

    /// How long a claim in Redis lives: the cooldown, at least
    /// [`MIN_CLAIM_TTL`].
    pub fn claim_ttl(&self) -> Duration {
        self.config.cooldown.max(MIN_CLAIM_TTL)
    }

    /// The episode token of `(queue, signal)`'s last firing claim.
    pub fn episode(&self, queue: &str, signal: &str) -> Option<String> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&(queue.to_string(), signal.to_string()))
            .and_then(|e| e.episode.clone())
    }

    /// Holds back `(queue, signal)`'s firing post until `at` (its claim is
    /// held by an episode that is over): [`Alerter::transitions`] posts it
    /// then if the signal still holds.
    pub fn defer(&self, queue: &str, signal: &str, at: Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.get_mut(&(queue.to_string(), signal.to_string())) {
            e.notified = false;
            e.due = Some(at);
        }
    }

    /// When `(queue, signal)`'s held-back firing post is due, if it is.
    pub fn due(&self, queue: &str, signal: &str) -> Option<Instant> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(&(queue.to_string(), signal.to_string()))
            .and_then(|e| e.due)
    }

    /// Records the episode token of `(queue, signal)`'s firing claim.
    pub fn set_episode(&self, queue: &str, signal: &str, token: Option<String>) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = entries.get_mut(&(queue.to_string(), signal.to_string())) {
            e.episode = token;
        }
    }

    /// The last sends, newest first.
    pub fn sends(&self) -> Vec<SendRecord> {
        let sends = self.sends.lock().unwrap_or_else(|e| e.into_inner());
        sends.iter().rev().cloned().collect()
    }

    /// The alerts due at `now` given the signals holding (`current`): a
    /// firing alert for a signal that starts holding (unless one was sent
    /// for it within the cooldown: then once the cooldown has passed, if it
    /// still holds), a resolved alert for one that stops holding after its
    /// firing alert was sent; nothing else for a signal that keeps holding
    /// or keeps clear.
    pub fn transitions(&self, current: &[Signal], now: Instant) -> Vec<Alert> {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for s in current {
            let key = (s.queue.clone(), s.signal.clone());
            seen.insert(key.clone());
            let e = entries.entry(key).or_insert(Entry {
                firing: false,
                notified: false,
                last_fired: None,
                due: None,
                episode: None,
                numbers: Vec::new(),
                text: String::new(),
                link: String::new(),
            });
            e.numbers = s.numbers.clone();
            e.text = s.text.clone();
            e.link = format!("{}{}", self.config.dashboard_url, s.path);
            let post = if e.firing {
                // Still holding: posted only when held back (an episode
                // that started within the cooldown of the last post, or
                // whose claim was held by an episode that is over) and
                // that time has come.
                e.due.is_some_and(|d| now >= d)
            } else {
                e.firing = true;
                let cooled = e
                    .last_fired
                    .is_none_or(|t| now.saturating_duration_since(t) >= self.config.cooldown);
                if !cooled {
                    e.notified = false;
                    e.due = e.last_fired.map(|t| t + self.config.cooldown);
                }
                cooled
            };
            if post {
                e.notified = true;
                e.last_fired = Some(now);
                e.due = None;
                out.push(Alert {
                    queue: s.queue.clone(),
                    signal: s.signal.clone(),
                    state: AlertState::Firing,
                    text: s.text.clone(),
                    numbers: s.numbers.clone(),
                    link: e.link.clone(),
                    group: None,
                });
            }
        }
        for ((queue, signal), e) in entries.iter_mut() {
            if !e.firing || seen.contains(&(queue.clone(), signal.clone())) {
                continue;
            }
            e.firing = false;
            e.due = None;
            if std::mem::take(&mut e.notified) {
                out.push(Alert {
                    queue: queue.clone(),
                    signal: signal.clone(),
                    state: AlertState::Resolved,
                    text: format!("Cleared: {}", e.text),
                    numbers: e.numbers.clone(),
                    link: e.link.clone(),
                    group: None,
                });
            }
        }
        out.sort_by(|a, b| (&a.queue, &a.signal).cmp(&(&b.queue, &b.signal)));
        out
    }

    /// Posts `alert` to every webhook, one after the other, and records
    /// each result. Returns the records.
    pub async fn send(&self, alert: &Alert) -> Vec<SendRecord> {
        let body = message(alert);
        let mut records = Vec::new();
        for url in &self.config.webhooks {
            let result = post_json(url, &body, SEND_TIMEOUT).await;
            if let Err(e) = &result {
                tracing::warn!(host = %host_of(url), "alert webhook failed: {e}");
            }
            records.push(SendRecord {
                at: Utc::now(),
                host: host_of(url),
                queue: match &alert.group {
                    Some(g) => format!("{} queues", thousands(g.count as u64)),
                    None => alert.queue.clone(),
                },
                signal: alert.signal.clone(),
                state: alert.state,
                result,
            });
        }
        let mut sends = self.sends.lock().unwrap_or_else(|e| e.into_inner());
        for r in &records {
            sends.push_back(r.clone());
            while sends.len() > SENDS_KEPT {
                sends.pop_front();
            }
        }
        records
    }

    /// Sends a test message to every webhook ("Send a test").
    pub async fn send_test(&self) -> Vec<SendRecord> {
        let alert = Alert {
            queue: String::new(),
            signal: "test".into(),
            state: AlertState::Test,
            text: "A test message from asynqdeck: this webhook receives its alerts.".into(),
            numbers: Vec::new(),
            link: format!("{}/alerts", self.config.dashboard_url),
            group: None,
        };
        self.send(&alert).await
    }
}

/// Evaluates the signals every poll interval until `stop`, posting the
/// transitions ([`Alerter::transitions`]). Does nothing without webhooks.
/// An evaluation whose snapshot or attention reads failed is skipped (an
/// unreadable Redis resolves nothing).
pub async fn run(state: AppState, stop: CancellationToken) {
    if !state.alerts.active() {
        return;
    }
    let every = state.config.poll_interval.max(Duration::from_secs(1));
    loop {
        Box::pin(evaluate_once(&state)).await;
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
    }
}

/// One evaluation of [`run`]: reads the snapshot and the attention board
/// (shared with the views), computes the transitions, claims them in Redis
/// ([`claim_all`], pipelined), folds the claimed ones into at most
/// [`MAX_POSTS`] posts ([`fold`]: a summary per (signal, state) with more
/// than [`SUMMARY_FROM`]) and sends them. Returns the posts sent.
pub async fn evaluate_once(state: &AppState) -> Vec<Alert> {
    let snap = state.stats.get(&state.inspector).await;
    if snap.error.is_some() {
        return Vec::new();
    }
    let eval = state.attention.get(&state.inspector, &snap).await;
    if eval.error.is_some() {
        return Vec::new();
    }
    let current = signals(&snap, &eval.findings);
    let due = state.alerts.transitions(&current, Instant::now());
    if due.is_empty() {
        return Vec::new();
    }
    let claims = claim_all(state, &due).await;
    let ours: Vec<Alert> = due
        .into_iter()
        .zip(claims)
        .filter_map(|(a, ok)| ok.then_some(a))
        .collect();
    let posts = fold(ours, &state.alerts.config().dashboard_url);
    for a in &posts {
        state.alerts.send(a).await;
    }
    posts
}

/// Shared handle type in [`AppState`].
pub type SharedAlerter = Arc<Alerter>;
