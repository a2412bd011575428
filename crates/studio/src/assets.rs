//! The studio's page, script and style sheet, compiled into the binary: it needs no network,
//! no CDN and no files beside it.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("assets/index.html");

/// The assets under `/assets/`, with their types.
const ASSETS: [(&str, &str, &str); 2] = [
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("assets/style.css"),
    ),
];

/// The one page; the script draws every view in it.
pub fn page() -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], PAGE).into_response()
}

/// The asset called `name`, if there is one.
pub fn asset(name: &str) -> Option<Response> {
    ASSETS
        .iter()
        .find(|(known, _, _)| *known == name)
        .map(|&(_, content_type, body)| {
            ([(header::CONTENT_TYPE, content_type)], body).into_response()
        })
}
