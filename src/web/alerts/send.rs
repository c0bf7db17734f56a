//! Posting one JSON body to one webhook URL: HTTP/1.1 over hyper, TLS for
//! `https://` through rustls (ring) with the system's roots. Talks only to
//! the URL's host; follows no redirect.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use axum::http::{Request, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

/// The `host[:port]` of `url`, for display: never the path or query (a
/// webhook URL's path is its secret) nor credentials.
pub fn host_of(url: &str) -> String {
    match url.parse::<Uri>() {
        Ok(u) => match (u.host(), u.port_u16()) {
            (Some(h), Some(p)) => format!("{h}:{p}"),
            (Some(h), None) => h.to_string(),
            _ => "(invalid URL)".into(),
        },
        Err(_) => "(invalid URL)".into(),
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let mut roots = rustls::RootCertStore::empty();
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .map(|b| Arc::new(b.with_root_certificates(roots).with_no_client_auth()))
                .map_err(|e| e.to_string())
        })
        .clone()
}

async fn exchange<S>(io: S, req: Request<Full<bytes::Bytes>>) -> Result<u16, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(conn);
    let resp = sender.send_request(req).await.map_err(|e| e.to_string());
    let out = match resp {
        Ok(r) => {
            let status = r.status().as_u16();
            // Read (and drop) the answer so the exchange completes.
            let _ = r.into_body().collect().await;
            Ok(status)
        }
        Err(e) => Err(e),
    };
    driver.abort();
    out
}

/// POSTs `body` as JSON to `url` and returns the answer's status (an
/// error for a status outside 2xx, a bad URL, a failed connection or
/// a timeout after `timeout`).
pub async fn post_json(
    url: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<u16, String> {
    tokio::time::timeout(timeout, post(url, body))
        .await
        .map_err(|_| format!("no answer within {timeout:?}"))?
}

async fn post(url: &str, body: &serde_json::Value) -> Result<u16, String> {
    let uri: Uri = url.parse().map_err(|_| "invalid URL".to_string())?;
    let https = match uri.scheme_str() {
        Some("https") => true,
        Some("http") => false,
        _ => return Err("the URL must start with http:// or https://".into()),
    };
    let host = uri.host().ok_or("the URL has no host")?.to_string();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let authority = match uri.port_u16() {
        Some(p) => format!("{host}:{p}"),
        None => host.clone(),
    };
    let req = Request::post(path)
        .header(header::HOST, authority)
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::USER_AGENT, "asynqdeck-alerts")
        .body(Full::new(bytes::Bytes::from(body.to_string())))
        .map_err(|e| e.to_string())?;
    let bare = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let tcp = tokio::net::TcpStream::connect((bare.as_str(), port))
        .await
        .map_err(|e| format!("cannot connect: {e}"))?;
    let status = if https {
        let name = rustls::pki_types::ServerName::try_from(bare)
            .map_err(|e| format!("bad host name: {e}"))?;
        let tls = tokio_rustls::TlsConnector::from(tls_config()?)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS: {e}"))?;
        exchange(tls, req).await?
    } else {
        exchange(tcp, req).await?
    };
    if (200..300).contains(&status) {
        Ok(status)
    } else {
        Err(format!("answered {status}"))
    }
}
