//! A minimal HTTP/1.1 client for the `asynqdeck serve` process: one
//! request per connection (`Connection: close`), status and body.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Status code and body of one response; status 0 when the request could
/// not be sent or no status line came back within `timeout`.
pub async fn request(
    port: u16,
    method: &str,
    uri: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
    timeout: Duration,
) -> (u16, Vec<u8>) {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        let mut req =
            format!("{method} {uri} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        let (content, ctype) = body.unwrap_or(("", ""));
        if body.is_some() {
            req.push_str(&format!(
                "Content-Type: {ctype}\r\nContent-Length: {}\r\n",
                content.len()
            ));
        }
        req.push_str("\r\n");
        req.push_str(content);
        s.write_all(req.as_bytes()).await?;
        let mut out = Vec::new();
        s.read_to_end(&mut out).await?;
        Ok::<_, std::io::Error>(out)
    };
    let Ok(Ok(raw)) = tokio::time::timeout(timeout, exchange).await else {
        return (0, Vec::new());
    };
    let text = String::from_utf8_lossy(&raw);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = match raw.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(at) => raw[at + 4..].to_vec(),
        None => Vec::new(),
    };
    (status, body)
}
