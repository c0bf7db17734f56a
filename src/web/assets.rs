//! Static files embedded in the binary: vendored htmx, the stylesheet and
//! the small script (no JS build step, no CDN; works offline).

use axum::Router;
use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::AppState;

const FILES: &[(&str, &str, &[u8])] = &[
    (
        "htmx.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../static/htmx.min.js"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../../static/app.js"),
    ),
    (
        "app.css",
        "text/css; charset=utf-8",
        include_bytes!("../../static/app.css"),
    ),
];

pub fn routes() -> Router<AppState> {
    Router::new().route("/static/{file}", get(serve))
}

async fn serve(Path(file): Path<String>) -> Response {
    match FILES.iter().find(|(name, _, _)| *name == file) {
        Some((_, mime, body)) => (
            [
                (header::CONTENT_TYPE, *mime),
                (header::CACHE_CONTROL, "public, max-age=3600"),
            ],
            *body,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
