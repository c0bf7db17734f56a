//! The audit layer (issue 17 item 5): every mutating request (POST, PUT,
//! PATCH, DELETE; pages and `/api`) that passed the mutation guard
//! (read-only mode, same origin, CSRF token) is appended to the audit log
//! ([`Inspector::record_audit`](crate::Inspector::record_audit)) once it
//! was answered, the ones the action itself refused included, and written
//! as one JSON line to stdout (`{"audit":{…}}`). Requests the guard
//! refuses are not recorded: a hostile page can send those from any
//! browser, and they would push real entries out of the capped log.
//!
//! **Who.** The actor is the value of [`WebConfig::auth_header`] when the
//! request comes straight from one of [`WebConfig::trusted_proxies`] (a
//! reverse proxy that authenticated the user); a request carrying that
//! header from any other peer is refused with 403, so nobody can name
//! themselves; such a mutating request is recorded as refused, with the
//! actor `untrusted <peer>: <header value>`. Otherwise the basic-auth user when basic auth is on, else
//! `anonymous`.
//!
//! **What.** The verb, queue and scope are read from the path: the queue
//! follows `queues/`, the verb is the `:verb` suffix of asynqmon's routes,
//! the method for `DELETE`, else the last segment (`pause`, `run`,
//! `cancel`, …), and the scope is what lies between (`archived`,
//! `tasks/<id>`, `retry/matching`, `jobs/<id>`). Handlers that know how
//! many tasks an action concerned add an [`AuditCount`] to their response.
//!
//! [`WebConfig::auth_header`]: super::WebConfig::auth_header
//! [`WebConfig::trusted_proxies`]: super::WebConfig::trusted_proxies

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine;

use super::AppState;
use crate::inspector::AuditEntry;

/// Most bytes of an error answer kept in the entry's result.
const MAX_ERROR_TEXT: usize = 300;

/// How many tasks a mutating action concerned; a handler puts it in its
/// response's extensions and the audit entry carries it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditCount(pub u64);

/// A mutating action refused although its answer is a 200 (a form shown
/// again with its problems, so the browser swaps it in): the audit entry
/// records this status (e.g. 422) and the problems in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditError(pub u16, pub String);

/// What a mutating action acted on, when its path does not say (a task
/// enqueued from the form): the audit entry's queue and scope.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditTarget {
    /// The queue.
    pub queue: String,
    /// The scope within it (`tasks/<id>`).
    pub scope: String,
}

/// Peers whose [`WebConfig::auth_header`](super::WebConfig::auth_header)
/// is believed: addresses and CIDR prefixes (`10.0.0.0/8`, `::1`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies(Vec<(IpAddr, u8)>);

impl FromStr for TrustedProxies {
    type Err = String;

    /// A comma-separated list of addresses and prefixes. Errors name the
    /// item that is neither.
    fn from_str(s: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (addr, len) = match item.split_once('/') {
                Some((a, l)) => (a, Some(l)),
                None => (item, None),
            };
            let ip: IpAddr = addr
                .parse()
                .map_err(|_| format!("{item:?} is not an IP address or prefix"))?;
            let max = if ip.is_ipv4() { 32 } else { 128 };
            let len = match len {
                Some(l) => l
                    .parse::<u8>()
                    .ok()
                    .filter(|l| *l <= max)
                    .ok_or_else(|| format!("{item:?} has a bad prefix length"))?,
                None => max,
            };
            out.push((ip, len));
        }
        Ok(TrustedProxies(out))
    }
}

impl TrustedProxies {
    /// Whether `peer` is one of them (an IPv4-mapped IPv6 peer counts as
    /// its IPv4 address).
    pub fn contains(&self, peer: IpAddr) -> bool {
        let peer = peer.to_canonical();
        self.0.iter().any(|(net, len)| match (net, peer) {
            (IpAddr::V4(n), IpAddr::V4(p)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0);
                u32::from(*n) & mask == u32::from(p) & mask
            }
            (IpAddr::V6(n), IpAddr::V6(p)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(*len)).unwrap_or(0);
                u128::from(*n) & mask == u128::from(p) & mask
            }
            _ => false,
        })
    }

    /// Whether none is configured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The actor of `headers` from `peer`, or `Err` (a 403 answer) when the
/// trusted header comes from an untrusted peer.
fn actor(state: &AppState, headers: &HeaderMap, peer: Option<IpAddr>) -> Result<String, ()> {
    if let Some(name) = &state.config.auth_header
        && let Some(value) = headers.get(name.as_str())
    {
        if !peer.is_some_and(|p| state.config.trusted_proxies.contains(p)) {
            return Err(());
        }
        let v = String::from_utf8_lossy(value.as_bytes()).trim().to_string();
        if !v.is_empty() {
            return Ok(v);
        }
    }
    if state.config.basic_auth.is_some()
        && let Some(user) = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| {
                base64::engine::general_purpose::STANDARD
                    .decode(b.trim())
                    .ok()
            })
            .and_then(|d| String::from_utf8(d).ok())
            .and_then(|d| d.split_once(':').map(|(u, _)| u.to_string()))
    {
        return Ok(user);
    }
    Ok("anonymous".to_string())
}

/// The 403 for the trusted header from another peer.
fn forged_refusal(state: &AppState) -> Response {
    let name = state.config.auth_header.as_deref().unwrap_or("");
    (
        StatusCode::FORBIDDEN,
        format!("the {name} header is accepted only from a trusted proxy"),
    )
        .into_response()
}

/// `(verb, queue, scope)` of a mutating request to `path` (the root path
/// removed). See the module docs.
pub fn describe(method: &Method, path: &str) -> (String, String, String) {
    let decode = |s: &str| String::from_utf8_lossy(&super::urls::percent_decode(s)).into_owned();
    let mut segs: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(decode)
        .collect();
    if segs.first().is_some_and(|s| s == "api") {
        segs.remove(0);
    }
    // asynqmon's `…:verb` suffix on the last segment.
    let mut verb = None;
    if let Some(last) = segs.last_mut()
        && let Some((head, v)) = last.rsplit_once(':')
    {
        verb = Some(v.to_string());
        *last = head.to_string();
    }
    let mut queue = String::new();
    if segs.first().is_some_and(|s| s == "queues") && segs.len() >= 2 {
        segs.remove(0);
        queue = segs.remove(0);
    }
    let verb = match verb {
        Some(v) => v,
        None if *method == Method::DELETE => "delete".to_string(),
        None if queue.is_empty() && segs == ["jobs"] => "create_job".to_string(),
        // A top-level action (`/enqueue`): the segment is the verb.
        None if queue.is_empty() && segs.len() == 1 => segs.pop().unwrap_or_default(),
        None if !(segs.is_empty() || queue.is_empty() && segs.len() == 1) => {
            segs.pop().unwrap_or_default()
        }
        None => method.as_str().to_ascii_lowercase(),
    };
    (verb, queue, segs.join("/"))
}

/// The middleware: see the module docs.
pub async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let peer = req
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip());
    let reading = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let root = state.config.root_path.trim_end_matches('/');
    let path = req.uri().path();
    let path = path.strip_prefix(root).unwrap_or(path).to_string();
    let (verb, queue, scope) = describe(req.method(), &path);
    let (actor, response) = match actor(&state, req.headers(), peer) {
        Ok(_) if reading => return next.run(req).await,
        Ok(a) => (a, next.run(req).await),
        Err(_) if reading => return forged_refusal(&state),
        Err(_) => {
            let claimed = state
                .config
                .auth_header
                .as_deref()
                .and_then(|h| req.headers().get(h))
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                .unwrap_or_default();
            let who = peer.map_or("unknown peer".to_string(), |p| p.to_string());
            (
                format!("untrusted {who}: {claimed}"),
                forged_refusal(&state),
            )
        }
    };
    let status = response.status();
    // One task named in the path (`tasks/<id>`, asynqmon's `<state>_tasks/<id>`).
    let single = {
        let parts: Vec<&str> = scope.split('/').collect();
        parts.len() == 2 && (parts[0] == "tasks" || parts[0].ends_with("_tasks"))
    };
    let count = response
        .extensions()
        .get::<AuditCount>()
        .map(|c| c.0)
        .or(single.then_some(1));
    let (queue, scope) = match response.extensions().get::<AuditTarget>() {
        Some(t) => (t.queue.clone(), t.scope.clone()),
        None => (queue, scope),
    };
    let noted = response.extensions().get::<AuditError>().cloned();
    let mut recorded_status = status.as_u16();
    let (response, result) = if let Some(AuditError(code, text)) = noted {
        recorded_status = code;
        (response, format!("error: {code} {text}"))
    } else if status.is_success() || status.is_redirection() {
        (response, "ok".to_string())
    } else {
        let (parts, body) = response.into_parts();
        let bytes = axum::body::to_bytes(body, 64 * 1024)
            .await
            .unwrap_or_default();
        let text: String = String::from_utf8_lossy(&bytes)
            .trim()
            .chars()
            .take(MAX_ERROR_TEXT)
            .collect();
        let result = format!("error: {} {text}", status.as_u16());
        (Response::from_parts(parts, Body::from(bytes)), result)
    };
    let mut entry = AuditEntry {
        id: String::new(),
        at: chrono::Utc::now(),
        actor,
        verb,
        queue,
        scope,
        count,
        result,
        status: recorded_status,
    };
    match state.inspector.record_audit(&entry).await {
        Ok(id) => {
            if let Some(at) = id
                .split('-')
                .next()
                .and_then(|ms| ms.parse().ok())
                .and_then(chrono::DateTime::from_timestamp_millis)
            {
                entry.at = at;
            }
            entry.id = id;
        }
        Err(e) => tracing::warn!(error = %e, "audit: could not append to the audit log in Redis"),
    }
    println!("{}", serde_json::json!({ "audit": entry }));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(m: Method, p: &str) -> (String, String, String) {
        let (v, q, s) = describe(&m, p);
        (v, q, s)
    }

    fn t(v: &str, q: &str, s: &str) -> (String, String, String) {
        (v.into(), q.into(), s.into())
    }

    /// Verb, queue and scope of every kind of mutating route.
    #[test]
    fn describes_page_and_api_routes() {
        assert_eq!(d(Method::POST, "/queues/q1/pause"), t("pause", "q1", ""));
        assert_eq!(
            d(Method::POST, "/queues/a%2Fb/delete"),
            t("delete", "a/b", "")
        );
        assert_eq!(
            d(Method::POST, "/queues/q/tasks/abc/run"),
            t("run", "q", "tasks/abc")
        );
        assert_eq!(
            d(Method::POST, "/queues/q/archived/batch/delete"),
            t("delete", "q", "archived/batch")
        );
        assert_eq!(
            d(Method::POST, "/queues/q/retry/matching/run"),
            t("run", "q", "retry/matching")
        );
        assert_eq!(
            d(Method::POST, "/queues/q/left_behind/delete"),
            t("delete", "q", "left_behind")
        );
        assert_eq!(
            d(Method::POST, "/jobs/j1/cancel"),
            t("cancel", "", "jobs/j1")
        );
        assert_eq!(d(Method::POST, "/api/queues/q:pause"), t("pause", "q", ""));
        assert_eq!(d(Method::DELETE, "/api/queues/q"), t("delete", "q", ""));
        assert_eq!(
            d(Method::POST, "/api/queues/q/archived_tasks:run_all"),
            t("run_all", "q", "archived_tasks")
        );
        assert_eq!(
            d(Method::POST, "/api/queues/q/archived_tasks/id1:run"),
            t("run", "q", "archived_tasks/id1")
        );
        assert_eq!(
            d(Method::DELETE, "/api/queues/q/archived_tasks/id1"),
            t("delete", "q", "archived_tasks/id1")
        );
        assert_eq!(d(Method::POST, "/api/jobs"), t("create_job", "", "jobs"));
        assert_eq!(d(Method::POST, "/enqueue"), t("enqueue", "", ""));
        assert_eq!(
            d(Method::POST, "/queues/q/tasks/t1/edit"),
            t("edit", "q", "tasks/t1")
        );
        assert_eq!(
            d(Method::POST, "/schedulers/e1/run"),
            t("run", "", "schedulers/e1")
        );
    }

    #[test]
    fn trusted_proxies_match_addresses_and_prefixes() {
        let t: TrustedProxies = "10.0.0.0/8, 127.0.0.1,::1".parse().unwrap();
        assert!(t.contains("10.1.2.3".parse().unwrap()));
        assert!(t.contains("127.0.0.1".parse().unwrap()));
        assert!(t.contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(t.contains("::1".parse().unwrap()));
        assert!(!t.contains("127.0.0.2".parse().unwrap()));
        assert!(!t.contains("11.0.0.1".parse().unwrap()));
        assert_eq!(
            "10.0.0.0/33".parse::<TrustedProxies>().unwrap_err(),
            "\"10.0.0.0/33\" has a bad prefix length"
        );
        assert_eq!(
            "proxy".parse::<TrustedProxies>().unwrap_err(),
            "\"proxy\" is not an IP address or prefix"
        );
    }
}
