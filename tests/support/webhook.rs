//! A webhook receiver for the alert tests: an axum server on
//! 127.0.0.1:0 (loopback only) that answers 200 to every POST and records
//! its JSON body and path.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::State;
use axum::http::Uri;
use axum::routing::post;

type Seen = Arc<Mutex<Vec<(String, serde_json::Value)>>>;

/// The running receiver; stops when dropped.
pub struct Receiver {
    /// `http://127.0.0.1:<port>/hook/T0KEN/secret`.
    pub url: String,
    seen: Seen,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn record(State(seen): State<Seen>, uri: Uri, body: String) -> &'static str {
    let v = serde_json::from_str(&body).unwrap_or(serde_json::Value::String(body));
    seen.lock().unwrap().push((uri.path().to_string(), v));
    "ok"
}

impl Receiver {
    /// Starts a receiver.
    pub async fn start() -> Receiver {
        let seen: Seen = Arc::default();
        let app = Router::new()
            .route("/{*path}", post(record))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver {
            url: format!("http://127.0.0.1:{port}/hook/T0KEN/secret"),
            seen,
            task,
        }
    }

    /// The bodies received so far, in order.
    pub fn bodies(&self) -> Vec<serde_json::Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(_, b)| b.clone())
            .collect()
    }

    /// The paths posted to so far.
    pub fn paths(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|(p, _)| p.clone())
            .collect()
    }

    /// Waits (polling every 20 ms, up to `timeout`) until `n` bodies
    /// arrived; returns them.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<serde_json::Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let b = self.bodies();
            if b.len() >= n {
                return b;
            }
            assert!(
                Instant::now() < deadline,
                "waited {timeout:?} for {n} webhook posts; got {b:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A signal of `queue` named `signal`, with one number `n` = 1 and a link
/// to the queue.
pub fn sig(queue: &str, signal: &str) -> asynqdeck::web::alerts::Signal {
    asynqdeck::web::alerts::Signal {
        queue: queue.into(),
        signal: signal.into(),
        text: format!("{signal} on {queue}"),
        numbers: vec![("n".into(), 1)],
        path: format!("/queues/{queue}"),
    }
}

/// (queue, signal, state) of each alert.
pub fn summary(
    alerts: &[asynqdeck::web::alerts::Alert],
) -> Vec<(String, String, asynqdeck::web::alerts::AlertState)> {
    alerts
        .iter()
        .map(|a| (a.queue.clone(), a.signal.clone(), a.state))
        .collect()
}

/// A dashboard config posting to `receiver`: no poll interval, a 15 min
/// cooldown, links to `http://dash.example`.
pub fn config(receiver: &Receiver) -> asynqdeck::web::WebConfig {
    asynqdeck::web::WebConfig {
        poll_interval: Duration::ZERO,
        alerts: asynqdeck::web::alerts::AlertConfig {
            webhooks: vec![receiver.url.clone()],
            cooldown: Duration::from_secs(900),
            dashboard_url: "http://dash.example".into(),
        },
        ..asynqdeck::web::WebConfig::default()
    }
}
