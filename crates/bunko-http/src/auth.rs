//! Authentication as CouchDB 3 does it: server admins from the configuration, users from
//! the `_users` database; HTTP Basic auth and `AuthSession` cookies (`/_session`). Who a
//! name and password are, the credential cache and the lockout live in the engine
//! ([`bunko_engine::login`]), shared with every protocol; this module reads them off HTTP.
//!
//! [`admit`] runs before every handler. It resolves the request's [`UserCtx`] and, while
//! `[chttpd] require_valid_user` is true (Bunko's default; CouchDB's is false), refuses
//! anonymous requests with `401` except for `GET /`, `/_up`, `/_session` and the console's
//! login page. With it false, anonymous requests go on as CouchDB's do: the engine's gates
//! answer them (`401` where a database's security admits no anonymous reader or writer).
//!
//! A cookie is `base64url(name:timestamp:hmac)`, the HMAC-SHA256 of `name:timestamp` under
//! the server secret (kept in the store, so cookies survive restarts) followed by the
//! user's password salt, as CouchDB signs it: a password change or a deleted user voids
//! every cookie at once. A cookie expires `timeout` seconds after it was issued, and is
//! renewed (a new `Set-Cookie`) once less than 90% of that is left, as CouchDB does.

use std::net::IpAddr;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Extension;
use axum::extract::{ConnectInfo, RawQuery, Request, State as AxState};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bunko_engine::Engine;
use bunko_engine::login::{LOCKOUT_REASON, Login, Verdict, constant_time_eq};
use hmac::{Hmac, Mac};
use rand::Rng;
use serde_json::{Value, json};
use sha2::Sha256;

use crate::body::RawBody;
use crate::error::{ApiError, ApiResult};
use crate::listener::Peer;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicU64};

use crate::params::Params;
use crate::render;
use crate::{HttpConfig, State, UserCtx, blocking};

/// Cookie settings and the cookie secret.
pub struct Auth {
    secret: Vec<u8>,
    /// Cookie lifetime in seconds and whether cookies persist; both change at run time
    /// through `_config` ([`crate::AppState::refresh`]).
    pub(crate) timeout: AtomicU64,
    pub(crate) persistent: AtomicBool,
    /// Whether anonymous requests are refused outside the public routes (`[chttpd]
    /// require_valid_user`).
    pub(crate) require_valid_user: AtomicBool,
}

/// How a request authenticated (for `GET /_session`'s `info.authenticated`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Basic,
    Cookie,
    Proxy,
    Jwt,
    None,
}

/// A cookie session to renew in the response: the user's login.
#[derive(Clone)]
struct Renew(Login);

impl Auth {
    pub fn new(engine: &Engine, config: &HttpConfig) -> bunko_engine::Result<Self> {
        let secret =
            engine.meta_or_init("cookie_secret", || rand::rng().random::<[u8; 32]>().to_vec())?;
        Ok(Self {
            secret,
            timeout: AtomicU64::new(config.session_timeout),
            persistent: AtomicBool::new(config.persistent_cookies),
            require_valid_user: AtomicBool::new(true),
        })
    }

    fn cookie_for(&self, login: &Login, now: u64) -> String {
        let name = login.ctx.name.as_deref().unwrap_or_default();
        let message = format!("{name}:{now:X}");
        let tag = hex::encode(self.mac(&message, &login.salt));
        URL_SAFE_NO_PAD.encode(format!("{message}:{tag}"))
    }

    /// A cookie for `login` issued now (the replicator's requests to this server).
    pub(crate) fn cookie_now(&self, login: &Login) -> String {
        self.cookie_for(login, now())
    }

    fn mac(&self, message: &str, salt: &str) -> Vec<u8> {
        let key = [self.secret.as_slice(), salt.as_bytes()].concat();
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(&key) else { return Vec::new() };
        mac.update(message.as_bytes());
        mac.finalize().into_bytes().to_vec()
    }

    /// The `Set-Cookie` value of a session for `login` issued at `now`.
    fn set_cookie(&self, login: &Login, now: u64) -> Option<HeaderValue> {
        let max_age = if self.persistent.load(Relaxed) {
            format!("; Max-Age={}", self.timeout.load(Relaxed))
        } else {
            String::new()
        };
        let cookie = self.cookie_for(login, now);
        HeaderValue::from_str(&format!(
            "AuthSession={cookie}; Version=1; Path=/; HttpOnly{max_age}"
        ))
        .ok()
    }
}

/// A cookie's parts: name, issue time, signature.
struct Cookie {
    name: String,
    issued: Option<u64>,
    stamp: String,
    tag: String,
}

/// Splits a cookie, or CouchDB's `400` for one that is not `base64url(a:b:c)`.
fn parse_cookie(cookie: &str) -> ApiResult<Cookie> {
    let malformed =
        || ApiError::bad_request("Malformed AuthSession cookie. Please clear your cookies.");
    let bytes = URL_SAFE_NO_PAD.decode(cookie.trim_end_matches('=')).map_err(|_| malformed())?;
    let decoded = String::from_utf8(bytes).map_err(|_| malformed())?;
    let mut parts = decoded.rsplitn(3, ':');
    let (Some(tag), Some(stamp), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(malformed());
    };
    let issued = u64::from_str_radix(stamp, 16).ok();
    Ok(Cookie { name: name.into(), issued, stamp: stamp.into(), tag: tag.into() })
}

/// Resolves who sends `req` and leaves it in its extensions (the [`UserCtx`], the
/// [`Method`] and the advisor's client), or the answer refusing the request: a bad
/// credential, or anonymous access outside the public routes. The [`Renewal`] goes to
/// [`renew`] with the handler's answer. Runs before every handler (`crate::admission`).
pub async fn admit(state: &State, req: &mut Request) -> Result<Renewal, Response> {
    let peer = peer_of(req);
    let (ctx, method, renew) =
        resolve(state, req.headers(), peer).await.map_err(IntoResponse::into_response)?;
    let path = req.uri().path();
    if ctx.name.is_none() && !is_public(path) && state.auth.require_valid_user.load(Relaxed) {
        return Err(ApiError::unauthorized("Authentication required.").into_response());
    }
    // Who asks, for the advisor to tie lookups by id to the query before them.
    req.extensions_mut().insert(bunko_engine::advisor::Client::new(ctx.name.as_deref(), peer));
    req.extensions_mut().insert(ctx);
    req.extensions_mut().insert(method);
    Ok(Renewal(renew))
}

/// Whether an answer gets a renewed `AuthSession` cookie: [`admit`] decides, [`renew`] adds it.
pub struct Renewal(Option<Renew>);

/// Adds the renewed cookie [`admit`] asked for, unless the handler set a cookie itself.
pub fn renew(state: &State, renewal: Renewal, mut response: Response) -> Response {
    if let Some(Renew(login)) = renewal.0
        && !response.headers().contains_key(header::SET_COOKIE)
        && let Some(value) = state.auth.set_cookie(&login, now())
    {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    response
}

/// Paths an anonymous client may read: the welcome, health and session routes and the
/// console's login page ([`crate::console::PUBLIC`]).
fn is_public(path: &str) -> bool {
    matches!(path, "/" | "/_up" | "/_session" | "/favicon.ico")
        || crate::console::PUBLIC.contains(&path)
}

/// The client's address, when the server was started with connection info.
fn peer_of(req: &Request) -> Option<IpAddr> {
    req.extensions().get::<ConnectInfo<Peer>>().map(|info| info.0.0.ip())
}

async fn resolve(
    state: &State,
    headers: &HeaderMap,
    peer: Option<IpAddr>,
) -> ApiResult<(UserCtx, Method, Option<Renew>)> {
    if let Some((ctx, method)) = crate::auth_handlers::resolve(&state.engine, headers)? {
        return Ok((ctx, method, None));
    }
    if let Some((name, password)) = basic_credentials(headers) {
        let login = verify(state, name, password, peer).await?;
        return Ok((login.ctx, Method::Basic, None));
    }
    if let Some(cookie) = session_cookie(headers) {
        let cookie = parse_cookie(&cookie)?;
        if let Some((login, renew)) = cookie_login(state, cookie).await? {
            let renew = renew.then(|| Renew(login.clone()));
            return Ok((login.ctx, Method::Cookie, renew));
        }
    }
    Ok((UserCtx::default(), Method::None, None))
}

/// The login of a valid, unexpired cookie, and whether it is due for renewal.
async fn cookie_login(state: &State, cookie: Cookie) -> ApiResult<Option<(Login, bool)>> {
    let (now, timeout) = (now(), state.auth.timeout.load(Relaxed));
    let Some(issued) = cookie.issued.filter(|issued| now < issued.saturating_add(timeout)) else {
        return Ok(None);
    };
    // A server admin needs no storage read: no blocking thread for the commonest cookie.
    let found = match state.engine.logins().admin_login(&cookie.name) {
        Some(login) => Some(login),
        None => {
            let state = state.clone();
            let name = cookie.name.clone();
            blocking(move || Ok(state.engine.logins().lookup(&state.engine, &name)?)).await?
        }
    };
    let Some(login) = found else { return Ok(None) };
    // Hex into a buffer on the stack: `hex::encode`'s iterator was ~0.7 % of a point read.
    let mac = state.auth.mac(&format!("{}:{}", cookie.name, cookie.stamp), &login.salt);
    let mut expected = [0u8; 64];
    if hex::encode_to_slice(&mac, &mut expected).is_err()
        || !constant_time_eq(&expected, cookie.tag.as_bytes())
    {
        return Ok(None);
    }
    let left = issued + timeout - now;
    Ok(Some((login, (left as f64) < timeout as f64 * 0.9)))
}

/// Checks a name and password: `401` when wrong, `403` when locked out.
async fn verify(
    state: &State,
    name: String,
    password: String,
    peer: Option<IpAddr>,
) -> ApiResult<Login> {
    let state = state.clone();
    let verdict = blocking(move || {
        Ok(state.engine.logins().verify(&state.engine, &name, &password, peer)?)
    })
    .await?;
    match verdict {
        Verdict::Granted(login) => Ok(login),
        Verdict::Denied => Err(ApiError::unauthorized("Name or password is incorrect.")),
        Verdict::LockedOut => Err(ApiError::forbidden(LOCKOUT_REASON)),
    }
}

fn basic_credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (name, password) = decoded.split_once(':')?;
    // `_:_` is CouchDB's way to send no credentials (`basic_name_pw`).
    if (name, password) == ("_", "_") {
        return None;
    }
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
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Extension(method): Extension<Method>,
) -> Response {
    let authenticated = match method {
        Method::Basic => json!("default"),
        Method::Cookie => json!("cookie"),
        Method::Proxy => json!("proxy"),
        Method::Jwt => json!("jwt"),
        Method::None => Value::Null,
    };
    let handlers = crate::auth_handlers::names(&state.engine);
    let mut info = json!({"authentication_handlers": handlers});
    if !authenticated.is_null() {
        info["authenticated"] = authenticated;
        info["authentication_db"] = json!(state.engine.users_db_name());
    }
    render::json(
        StatusCode::OK,
        json!({"ok": true, "userCtx": {"name": ctx.name, "roles": ctx.roles}, "info": info}),
    )
}

/// `POST /_session`: log in with a name and password (form or JSON), set the cookie. As in
/// CouchDB, `?next=/path` answers a success with `302` to that path and `?fail=/path` a
/// failure; a failure also clears the cookie.
pub async fn post_session(
    AxState(state): AxState<State>,
    peer: Option<Extension<ConnectInfo<Peer>>>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: RawBody,
) -> ApiResult<Response> {
    let params = Params::parse(query.as_deref());
    let redirect = |name: &str| redirect_to(&headers, params.str(name));
    let (next, fail) = (redirect("next")?, redirect("fail")?);
    let (name, password) = login_fields(&headers, &body)?;
    let login = match verify(&state, name, password, peer.map(|p| p.0.0.0.ip())).await {
        Ok(login) => login,
        Err(err) if err.parts().0 == StatusCode::UNAUTHORIZED => {
            let (status, error, reason) = err.parts();
            let status = if fail.is_some() { StatusCode::FOUND } else { status };
            let mut response = render::json(status, json!({"error": error, "reason": reason}));
            let clear = HeaderValue::from_static(CLEAR_COOKIE);
            response.headers_mut().insert(header::SET_COOKIE, clear);
            set_location(&mut response, fail);
            return Ok(response);
        }
        Err(err) => return Err(err),
    };
    let ctx = &login.ctx;
    let status = if next.is_some() { StatusCode::FOUND } else { StatusCode::OK };
    let mut response =
        render::json(status, json!({"ok": true, "name": ctx.name, "roles": ctx.roles}));
    if let Some(value) = state.auth.set_cookie(&login, now()) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    set_location(&mut response, next);
    Ok(response)
}

const CLEAR_COOKIE: &str = "AuthSession=; Version=1; Path=/; HttpOnly; Max-Age=0";

/// The absolute URL of a `next`/`fail` path on this server. Only paths (`/…`) are accepted,
/// so a login cannot redirect to another site (CouchDB fails on anything else).
fn redirect_to(headers: &HeaderMap, path: Option<&str>) -> ApiResult<Option<HeaderValue>> {
    let Some(path) = path else { return Ok(None) };
    if !path.starts_with('/') {
        return Err(ApiError::bad_request("Redirect must be a path starting with /"));
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let url = host.map_or_else(|| path.to_string(), |host| format!("http://{host}{path}"));
    HeaderValue::from_str(&url).map(Some).map_err(|_| ApiError::bad_request("Invalid redirect"))
}

fn set_location(response: &mut Response, location: Option<HeaderValue>) {
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
}

/// `DELETE /_session`: log out (clears the cookie).
pub async fn delete_session() -> Response {
    let mut response = render::json(StatusCode::OK, json!({"ok": true}));
    response.headers_mut().insert(header::SET_COOKIE, HeaderValue::from_static(CLEAR_COOKIE));
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
            secret: vec![7; 32],
            timeout: 600.into(),
            persistent: true.into(),
            require_valid_user: true.into(),
        }
    }

    fn login(salt: &str) -> Login {
        Login { ctx: UserCtx { name: Some("a:b".into()), roles: vec![] }, salt: salt.into() }
    }

    #[test]
    fn cookies_carry_name_time_and_a_signature_bound_to_the_salt() -> ApiResult<()> {
        let auth = auth();
        let cookie = parse_cookie(&auth.cookie_for(&login("s1"), 1000))?;
        assert_eq!((cookie.name.as_str(), cookie.issued), ("a:b", Some(1000)));
        let signed = |salt: &str| hex::encode(auth.mac(&format!("a:b:{}", cookie.stamp), salt));
        assert_eq!(signed("s1"), cookie.tag);
        assert_ne!(signed("s2"), cookie.tag);
        Ok(())
    }

    #[test]
    fn malformed_cookies_are_bad_requests() {
        for bad in ["!!!", &URL_SAFE_NO_PAD.encode("no-colons")] {
            let err = parse_cookie(bad).err().map(|e| e.parts());
            let reason = "Malformed AuthSession cookie. Please clear your cookies.";
            assert_eq!(err, Some((StatusCode::BAD_REQUEST, "bad_request", reason.to_string())));
        }
    }
}
