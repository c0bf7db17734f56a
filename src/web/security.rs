//! The `Host` check (`hosts.rs`), basic auth, mutation guard (read-only, same-origin, CSRF token) and
//! security headers, applied to every route, static assets and `/api`
//! included.
//!
//! CSRF: every mutation must be POST (or DELETE in the API) and come from
//! the same origin: a browser sends `Origin` and `Sec-Fetch-Site` with
//! cross-site requests, and those are refused. HTML actions must also carry
//! the per-process token in `X-CSRF-Token` (htmx adds it from the page's
//! `hx-headers`). `/api` accepts requests without browser headers (curl and
//! scripts written for asynqmon keep working) but refuses cross-site ones.

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use subtle::ConstantTimeEq;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::set_header::SetResponseHeaderLayer;

use super::AppState;

/// Content-Security-Policy: no inline script or style, nothing from elsewhere.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

/// Wraps `routes` with the security layers (outermost first: headers, the
/// `Host` check of [`super::hosts`], basic auth, mutation guard, the audit
/// layer of [`super::audit`]) and, inside
/// them, a panic catcher: a handler that panics (a bug, never data) answers
/// 500 with a plain text instead of dropping the connection.
pub fn layers(routes: Router<AppState>, state: AppState) -> Router<AppState> {
    routes
        .layer(CatchPanicLayer::custom(panicked))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            super::audit::record,
        ))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard_mutations,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), basic_auth))
        .layer(middleware::from_fn_with_state(
            state,
            super::hosts::check_host,
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::overriding(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
}

/// The answer of a handler that panicked: 500, logged with its message.
fn panicked(panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    let message = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("(no message)");
    tracing::error!(panic = %message, "dashboard handler panicked");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal error: the dashboard hit a bug (logged)\n",
    )
        .into_response()
}

fn eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// Requires `Authorization: Basic` with the configured user and password.
async fn basic_auth(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let Some((user, password)) = &state.config.basic_auth else {
        return next.run(req).await;
    };
    let ok = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b64| {
            base64::engine::general_purpose::STANDARD
                .decode(b64.trim())
                .ok()
        })
        .is_some_and(|decoded| eq(&decoded, format!("{user}:{password}").as_bytes()));
    if ok {
        return next.run(req).await;
    }
    Response::builder()
        .status(StatusCode::UNAUTHORIZED)
        .header(
            header::WWW_AUTHENTICATE,
            "Basic realm=\"asynqdeck\", charset=\"UTF-8\"",
        )
        .body(Body::from("authentication required"))
        .expect("static response")
}

/// Whether `req` came from this dashboard's own origin (or from no browser).
fn same_origin(headers: &HeaderMap) -> bool {
    if let Some(site) = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok())
        && site != "same-origin"
        && site != "none"
    {
        return false;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true;
    };
    let origin_host = origin.split("://").nth(1).unwrap_or("");
    let host = headers
        .get("x-forwarded-host")
        .or_else(|| headers.get(header::HOST))
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    !host.is_empty() && origin_host.eq_ignore_ascii_case(host)
}

/// Refuses mutations in read-only mode, from other origins, and (outside
/// `/api`) without the CSRF token. Reads pass.
async fn guard_mutations(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return next.run(req).await;
    }
    if state.config.read_only {
        return (
            StatusCode::FORBIDDEN,
            "read-only mode: changes are disabled",
        )
            .into_response();
    }
    if !same_origin(req.headers()) {
        return (StatusCode::FORBIDDEN, "cross-origin request refused").into_response();
    }
    let path = req.uri().path();
    let is_api = path == "/api" || path.starts_with("/api/");
    if !is_api {
        let token_ok = req
            .headers()
            .get("x-csrf-token")
            .is_some_and(|v| eq(v.as_bytes(), state.csrf_token.as_bytes()));
        if !token_ok {
            return (StatusCode::FORBIDDEN, "missing or wrong CSRF token").into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    /// Browsers' cross-site requests are refused; scripts without browser
    /// headers and same-origin requests pass.
    #[test]
    fn same_origin_rules() {
        assert!(same_origin(&headers(&[])));
        assert!(same_origin(&headers(&[
            ("host", "a:8080"),
            ("origin", "http://a:8080")
        ])));
        assert!(!same_origin(&headers(&[
            ("host", "a:8080"),
            ("origin", "http://evil")
        ])));
        assert!(!same_origin(&headers(&[("sec-fetch-site", "cross-site")])));
        assert!(same_origin(&headers(&[("sec-fetch-site", "same-origin")])));
    }
}
