//! Which `Host` names the dashboard answers (issue 12 R15, DNS rebinding).
//!
//! A page on `evil.example` whose DNS name is re-pointed at 127.0.0.1 can
//! make the victim's browser send requests to a dashboard on loopback; the
//! browser treats them as same-origin with `evil.example`, so they carry
//! `Host: evil.example:<port>` and a matching `Origin`, and the page can
//! read the answers. Refusing every `Host` that is not a loopback name (or
//! a name the operator listed) closes that hole: the rebinding page cannot
//! choose a loopback name for its own origin.
//!
//! Go asynqmon checks nothing. asynq divergence: COMPATIBILITY.md#r15

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;

/// The `Host` names a dashboard answers ([`WebConfig::allowed_hosts`](super::WebConfig::allowed_hosts)).
///
/// Names are compared without port, ASCII case-insensitively, a trailing
/// dot ignored; IPv6 literals are written without brackets (`::1`). A
/// request with neither a `Host` header nor an authority in its URI (HTTP/1.0
/// clients, in-process `tower` calls) is not a browser and passes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowedHosts {
    /// Any `Host`: the default of `asynqdeck serve` on a non-loopback
    /// listener (e.g. `0.0.0.0`) without `--allowed-hosts`.
    Any,
    /// Loopback names (`localhost`, `*.localhost`, 127.0.0.0/8, `::1`)
    /// plus these names; the entry `*` allows every name. The default.
    LoopbackAnd(Vec<String>),
}

impl Default for AllowedHosts {
    /// Loopback names only: safe for a dashboard on 127.0.0.1. A library
    /// user serving on another interface passes [`AllowedHosts::for_listener`]
    /// or lists the names users type.
    fn default() -> Self {
        AllowedHosts::LoopbackAnd(Vec::new())
    }
}

impl AllowedHosts {
    /// The rule of `asynqdeck serve`: on a loopback listener, loopback names
    /// plus `names`; on any other listener, any name when `names` is empty,
    /// else loopback names plus `names`.
    pub fn for_listener(listen: SocketAddr, names: Vec<String>) -> Self {
        if listen.ip().is_loopback() || !names.is_empty() {
            AllowedHosts::LoopbackAnd(names.iter().map(|n| normalize(n)).collect())
        } else {
            AllowedHosts::Any
        }
    }

    /// Whether a request whose `Host` is `host` (`name[:port]`, IPv6 in
    /// brackets) is answered.
    pub fn allows(&self, host: &str) -> bool {
        match self {
            AllowedHosts::Any => true,
            AllowedHosts::LoopbackAnd(names) => {
                let name = host_name(host);
                is_loopback_name(&name) || names.iter().any(|n| n == "*" || host_name(n) == name)
            }
        }
    }
}

/// The name part of a `Host` value: port and IPv6 brackets removed,
/// lower-case, trailing dot removed.
pub fn host_name(host: &str) -> String {
    let host = host.trim();
    let name = if let Some(rest) = host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`; anything else after `]` is not an IPv6
        // literal (and never loopback).
        match rest.split_once(']') {
            Some((v6, "")) => v6,
            Some((v6, port))
                if port
                    .strip_prefix(':')
                    .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit())) =>
            {
                v6
            }
            _ => host,
        }
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    normalize(name)
}

fn normalize(name: &str) -> String {
    let n = name.trim().trim_start_matches('[').trim_end_matches(']');
    n.strip_suffix('.').unwrap_or(n).to_ascii_lowercase()
}

/// `localhost`, `*.localhost` (RFC 6761: browsers resolve them to
/// loopback themselves), 127.0.0.0/8 and `::1` (also as `::ffff:127.x`).
fn is_loopback_name(name: &str) -> bool {
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    match name.parse::<IpAddr>() {
        Ok(IpAddr::V4(v4)) => v4.is_loopback(),
        Ok(IpAddr::V6(v6)) => {
            v6 == Ipv6Addr::LOCALHOST || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

/// Answers 421 Misdirected Request when the request's host (URI authority,
/// else `Host` header) is not allowed by the config.
pub async fn check_host(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let host = req
        .uri()
        .authority()
        .map(|a| a.as_str().rsplit('@').next().unwrap_or("").to_string())
        .or_else(|| {
            req.headers()
                .get(header::HOST)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        });
    match host {
        Some(host) if !state.config.allowed_hosts.allows(&host) => (
            StatusCode::MISDIRECTED_REQUEST,
            format!(
                "Host {:?} is not allowed: this dashboard answers only loopback names \
                 (localhost, 127.0.0.1, [::1]) and the names given with --allowed-hosts \
                 (or ASYNQDECK_ALLOWED_HOSTS), to protect it from DNS rebinding. \
                 Start it with --allowed-hosts {} to allow this name.\n",
                host_name(&host),
                host_name(&host)
            ),
        )
            .into_response(),
        _ => next.run(req).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(host_name("Example.COM:8080"), "example.com");
        assert_eq!(host_name("[::1]:80"), "::1");
        assert_eq!(host_name("[::1]"), "::1");
        assert_eq!(host_name("localhost."), "localhost");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
    }

    #[test]
    fn rules() {
        let lo = AllowedHosts::default();
        for ok in [
            "localhost:1",
            "a.b.localhost",
            "127.0.0.1:9",
            "127.255.0.3",
            "[::1]:8",
            "[::ffff:127.0.0.1]",
        ] {
            assert!(lo.allows(ok), "{ok}");
        }
        for bad in [
            "evil.example:1",
            "localhost.evil",
            "127.0.0.1.evil",
            "[::2]",
            "10.0.0.1",
            "0.0.0.0",
            "",
            "[::1].evil.example",
            "[::1]x:80",
        ] {
            assert!(!lo.allows(bad), "{bad}");
        }
        let listed =
            AllowedHosts::for_listener("127.0.0.1:0".parse().unwrap(), vec!["Dash.Example".into()]);
        assert!(listed.allows("dash.example:8080"));
        assert!(!listed.allows("sub.dash.example"));
        // A name given with a port is the name (the port is not compared).
        let with_port = AllowedHosts::LoopbackAnd(vec!["dash.example:8080".into()]);
        assert!(with_port.allows("dash.example"));
        assert!(with_port.allows("dash.example:9090"));
        assert_eq!(
            AllowedHosts::for_listener("0.0.0.0:0".parse().unwrap(), vec![]),
            AllowedHosts::Any
        );
        assert!(AllowedHosts::for_listener("[::]:0".parse().unwrap(), vec![]).allows("evil"));
        assert!(
            !AllowedHosts::for_listener("0.0.0.0:0".parse().unwrap(), vec!["a".into()])
                .allows("evil")
        );
        assert!(AllowedHosts::LoopbackAnd(vec!["*".into()]).allows("evil"));
    }
}
