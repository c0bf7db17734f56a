//! One HTTP/1.0 request over a fresh loopback TCP connection, timed from
//! connect to the last byte (the server closes the connection after an
//! HTTP/1.0 reply, so the body is everything after the head; neither
//! dashboard compresses or chunks it).

use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// How long any request may take before it counts as failed (asynqmon's
/// `/api/queues` on 25,000 queues, a synchronous bulk action on 1,000,000
/// tasks).
pub const TIMEOUT: Duration = Duration::from_secs(600);

/// An answer: its status, body and the time from connect to the last byte.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Vec<u8>,
    pub took: Duration,
}

impl Reply {
    pub fn ms(&self) -> f64 {
        self.took.as_secs_f64() * 1e3
    }

    /// The body as JSON (`Null` when it is not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The first `n` characters of the body, on one line, for the report.
    pub fn excerpt(&self, n: usize) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let one: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let mut out: String = one.chars().take(n).collect();
        if one.chars().count() > n {
            out.push('…');
        }
        out
    }
}

/// `method path` to `addr` (`127.0.0.1:PORT`), with a JSON `body` when
/// given; no `Origin` header (a script, as curl sends it). Errors: the
/// connection failed, the answer has no status line, or [`TIMEOUT`] passed.
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> anyhow::Result<Reply> {
    let start = Instant::now();
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let mut head = format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n");
        if let Some(b) = body {
            head.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            ));
        } else if method != "GET" {
            head.push_str("Content-Length: 0\r\n");
        }
        head.push_str("\r\n");
        s.write_all(head.as_bytes()).await?;
        if let Some(b) = body {
            s.write_all(b.as_bytes()).await?;
        }
        let mut raw = Vec::new();
        s.read_to_end(&mut raw).await?;
        anyhow::Ok(raw)
    };
    let raw = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .with_context(|| format!("{method} {path}: no answer within {TIMEOUT:?}"))??;
    let took = start.elapsed();
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .with_context(|| format!("{method} {path}: no HTTP head in {} bytes", raw.len()))?;
    let head = String::from_utf8_lossy(&raw[..split]);
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("{method} {path}: bad status line {head:?}"))?;
    Ok(Reply {
        status,
        body: raw[split + 4..].to_vec(),
        took,
    })
}

/// `GET path`.
pub async fn get(addr: &str, path: &str) -> anyhow::Result<Reply> {
    request(addr, "GET", path, None).await
}

/// Median of `v` in ms (0 when empty).
pub fn median_ms(v: &[Duration]) -> f64 {
    let mut v = v.to_vec();
    v.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => ms(v[n / 2]),
        n => (ms(v[n / 2 - 1]) + ms(v[n / 2])) / 2.0,
    }
}
