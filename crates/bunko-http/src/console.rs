//! The built-in web console at `/_utils/` (issue 19; `docs/console.md`): a small single-page
//! application of our own plain JavaScript and CSS (`crates/bunko-http/console/`), embedded
//! in the binary with `include_str!` and talking to the public HTTP API with the session
//! cookie like any other client.
//!
//! Only the login page and its two assets are public ([`PUBLIC`], read by [`crate::auth`]):
//! `/_utils/` answers the login page to an anonymous visitor and the console's shell to a
//! logged-in one, and the console's script needs a login like every API route.

use axum::Extension;
use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::{State, UserCtx};

/// The console's paths that need no login: the login page and its assets.
pub const PUBLIC: &[&str] = &["/_utils", "/_utils/", "/_utils/login.js", "/_utils/console.css"];

const LOGIN_HTML: &str = include_str!("../console/login.html");
const APP_HTML: &str = include_str!("../console/index.html");
const LOGIN_JS: &str = include_str!("../console/login.js");
const APP_JS: &str = include_str!("../console/console.js");
const CSS: &str = include_str!("../console/console.css");

pub fn routes() -> Router<State> {
    Router::new()
        .route("/_utils", get(redirect))
        .route("/_utils/", get(page))
        .route("/_utils/login.js", get(|| async { asset("text/javascript", LOGIN_JS) }))
        .route("/_utils/console.js", get(|| async { asset("text/javascript", APP_JS) }))
        .route("/_utils/console.css", get(|| async { asset("text/css", CSS) }))
}

/// `/_utils` → `/_utils/`, with CouchDB's `301`.
async fn redirect() -> Response {
    (StatusCode::MOVED_PERMANENTLY, [(header::LOCATION, "/_utils/")]).into_response()
}

/// `/_utils/`: the console for a logged-in user, else the login page.
async fn page(Extension(ctx): Extension<UserCtx>) -> Response {
    let html = if ctx.name.is_some() { APP_HTML } else { LOGIN_HTML };
    asset("text/html; charset=utf-8", html)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    // The page depends on who is logged in, and assets change with the binary.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    response
}
