//! Authentication as CouchDB 3 does it: server admins from the configuration, users from
//! the `_users` database; HTTP Basic auth and `AuthSession` cookies (`/_session`).
//!
//! [`middleware`] runs before every handler. It resolves the request's [`UserCtx`] and
//! refuses anonymous requests with `401` except for `GET /`, `/_up` and `/_session`.
//!
//! A cookie is `base64url(name:timestamp:hmac)`, the HMAC-SHA256 of `name:timestamp` under
//! a secret kept in the store (so cookies survive restarts); it expires after
//! `session_timeout` seconds.

use std::time::{SystemTime, UNIX_EPOCH};

use axum::Extension;
use axum::extract::{Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bunko_engine::Engine;
use bunko_engine::users::{Authenticator, USERS_DB, constant_time_eq};
use hmac::{Hmac, Mac};
use rand::Rng;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::body::RawBody;
use crate::error::{ApiError, ApiResult};
use crate::render;
use crate::{HttpConfig, State, UserCtx, blocking};

/// Authentication state: admins, the cookie secret, the password cache.
pub struct Auth {
    admins: Vec<(String, String)>,
    secret: Vec<u8>,
    users: Authenticator,
    timeout: u64,
}

/// How a request authenticated (for `GET /_session`'s `info.authenticated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Basic,
    Cookie,
    None,
}

impl Auth {
    pub fn new(engine: &Engine, config: &HttpConfig) -> bunko_engine::Result<Self> {
        let secret =
            engine.meta_or_init("cookie_secret", || rand::rng().random::<[u8; 32]>().to_vec())?;
        Ok(Self {
            admins: config.admins.clone(),
            secret,
            users: Authenticator::default(),
            timeout: config.session_timeout,
        })
    }

    fn is_admin_name(&self, name: &str) -> bool {
        self.admins.iter().any(|(n, _)| n == name)
    }

    fn check_admin(&self, name: &str, password: &str) -> bool {
        self.admins
            .iter()
            .any(|(n, p)| n == name && constant_time_eq(p.as_bytes(), password.as_bytes()))
    }

    fn cookie_for(&self, name: &str, now: u64) -> String {
        let message = format!("{name}:{now:x}");
        let tag = hex::encode(self.mac(&message));
        URL_SAFE_NO_PAD.encode(format!("{message}:{tag}"))
    }

    fn mac(&self, message: &str) -> Vec<u8> {
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&self.secret) else { return Vec::new() };
        mac.update(message.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// The user name of a valid, unexpired cookie.
    fn cookie_user(&self, cookie: &str, now: u64) -> Option<String> {
        let decoded = String::from_utf8(URL_SAFE_NO_PAD.decode(cookie).ok()?).ok()?;
        let mut parts = decoded.rsplitn(3, ':');
        let (tag, ts, name) = (parts.next()?, parts.next()?, parts.next()?);
        let issued = u64::from_str_radix(ts, 16).ok()?;
        let expected = hex::encode(self.mac(&format!("{name}:{ts}")));
        let fresh = now.saturating_sub(issued) < self.timeout;
        (fresh && constant_time_eq(expected.as_bytes(), tag.as_bytes())).then(|| name.to_string())
    }
}

/// Resolves the user, refuses anonymous access outside the public routes.
pub async fn middleware(AxState(state): AxState<State>, mut req: Request, next: Next) -> Response {
    let (ctx, method) = match resolve(&state, req.headers()).await {
        Ok(found) => found,
        Err(err) => return err.into_response(),
    };
    let path = req.uri().path();
    let public = matches!(path, "/" | "/_up" | "/_session" | "/favicon.ico");
    if ctx.name.is_none() && !public {
        return ApiError::unauthorized("Authentication required.").into_response();
    }
    req.extensions_mut().insert(ctx);
    req.extensions_mut().insert(method);
    next.run(req).await
}

async fn resolve(state: &State, headers: &HeaderMap) -> ApiResult<(UserCtx, Method)> {
    if let Some((name, password)) = basic_credentials(headers) {
        return match verify(state, name, password).await? {
            Some(ctx) => Ok((ctx, Method::Basic)),
            None => Err(ApiError::unauthorized("Name or password is incorrect.")),
        };
    }
    if let Some(cookie) = session_cookie(headers)
        && let Some(name) = state.auth.cookie_user(&cookie, now())
        && let Some(ctx) = lookup(state, name).await?
    {
        return Ok((ctx, Method::Cookie));
    }
    Ok((UserCtx::default(), Method::None))
}

async fn verify(state: &State, name: String, password: String) -> ApiResult<Option<UserCtx>> {
    if state.auth.check_admin(&name, &password) {
        return Ok(Some(UserCtx::admin(&name)));
    }
    if state.auth.is_admin_name(&name) {
        return Ok(None);
    }
    let state = state.clone();
    blocking(move || {
        let Some(users) = state.engine.get_db(USERS_DB) else { return Ok(None) };
        Ok(state.auth.users.verify(&users, &name, &password)?)
    })
    .await
}

async fn lookup(state: &State, name: String) -> ApiResult<Option<UserCtx>> {
    if state.auth.is_admin_name(&name) {
        return Ok(Some(UserCtx::admin(&name)));
    }
    let state = state.clone();
    blocking(move || {
        let Some(users) = state.engine.get_db(USERS_DB) else { return Ok(None) };
        Ok(state.auth.users.lookup(&users, &name)?)
    })
    .await
}

fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (name, password) = decoded.split_once(':')?;
    Some((name.to_string(), password.to_string()))
}

fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix("AuthSession=").map(str::to_string))
        .filter(|c| !c.is_empty())
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// `GET /_session`: the current user.
pub async fn get_session(
    Extension(ctx): Extension<UserCtx>,
    Extension(method): Extension<Method>,
) -> Response {
    let authenticated = match method {
        Method::Basic => json!("default"),
        Method::Cookie => json!("cookie"),
        Method::None => Value::Null,
    };
    let mut info = json!({"authentication_handlers": ["cookie", "default"]});
    if !authenticated.is_null() {
        info["authenticated"] = authenticated;
        info["authentication_db"] = json!(USERS_DB);
    }
    render::json(
        StatusCode::OK,
        json!({"ok": true, "userCtx": {"name": ctx.name, "roles": ctx.roles}, "info": info}),
    )
}

/// `POST /_session`: log in with a name and password (form or JSON), set the cookie.
pub async fn post_session(
    AxState(state): AxState<State>,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    let (name, password) = login_fields(&headers, &body)?;
    let Some(ctx) = verify(&state, name.clone(), password).await? else {
        return Err(ApiError::unauthorized("Name or password is incorrect."));
    };
    let cookie = state.auth.cookie_for(&name, now());
    let mut response =
        render::json(StatusCode::OK, json!({"ok": true, "name": ctx.name, "roles": ctx.roles}));
    let set = format!(
        "AuthSession={cookie}; Version=1; Path=/; HttpOnly; Max-Age={}",
        state.auth.timeout
    );
    if let Ok(value) = HeaderValue::from_str(&set) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    Ok(response)
}

/// `DELETE /_session`: log out (clears the cookie).
pub async fn delete_session() -> Response {
    let mut response = render::json(StatusCode::OK, json!({"ok": true}));
    let clear = "AuthSession=; Version=1; Path=/; HttpOnly; Max-Age=0";
    response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_static(clear));
    response
}

fn login_fields(headers: &HeaderMap, body: &RawBody) -> ApiResult<(String, String)> {
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    let (name, password) = if is_json {
        let obj = body.object()?;
        let field = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
        (field("name").or(field("username")), field("password"))
    } else {
        let mut name = None;
        let mut password = None;
        for (k, v) in form_urlencoded::parse(&body.0) {
            match k.as_ref() {
                "name" | "username" => name = Some(v.into_owned()),
                "password" => password = Some(v.into_owned()),
                _ => {}
            }
        }
        (name, password)
    };
    match (name, password) {
        (Some(n), Some(p)) => Ok((n, p)),
        _ => Err(ApiError::unauthorized("Name or password is incorrect.")),
    }
}

/// Fails unless the user is a server admin.
pub fn require_server_admin(ctx: &UserCtx) -> ApiResult<()> {
    if ctx.is_server_admin() {
        return Ok(());
    }
    Err(ApiError::unauthorized("You are not a server admin."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth() -> Auth {
        Auth {
            admins: vec![("admin".into(), "pw".into())],
            secret: vec![7; 32],
            users: Authenticator::default(),
            timeout: 600,
        }
    }

    #[test]
    fn cookies_verify_and_expire() {
        let auth = auth();
        let cookie = auth.cookie_for("a:b", 1000);
        assert_eq!(auth.cookie_user(&cookie, 1000), Some("a:b".to_string()));
        assert_eq!(auth.cookie_user(&cookie, 1000 + 600), None);
        let forged = URL_SAFE_NO_PAD.encode("admin:3e8:00");
        assert_eq!(auth.cookie_user(&forged, 1000), None);
        assert!(auth.check_admin("admin", "pw") && !auth.check_admin("admin", "p"));
    }
}
