//! Which authentication handlers run, as CouchDB's `[chttpd] authentication_handlers`
//! configures them: `{chttpd_auth, jwt_authentication_handler}`,
//! `{chttpd_auth, proxy_authentication_handler}`, `…cookie…`, `…default…` (Basic), each
//! named by the first word of its function. Without the setting, `cookie` and `default`
//! run, as in CouchDB; JWT ([`crate::jwt_auth`]) and proxy ([`crate::proxy_auth`])
//! authentication run only when listed, in the listed order, before cookies and Basic.

use axum::http::HeaderMap;
use bunko_engine::Engine;

use crate::UserCtx;
use crate::auth::Method;
use crate::error::ApiResult;

/// The configured handlers' names (`jwt`, `proxy`, `cookie`, `default`, …), in order.
pub(crate) fn names(engine: &Engine) -> Vec<String> {
    let Some(setting) = engine.config_value("chttpd", "authentication_handlers") else {
        return vec!["cookie".to_string(), "default".to_string()];
    };
    setting
        .split('}')
        .filter_map(|spec| spec.rsplit(',').next())
        .map(|function| function.trim().trim_start_matches('{').trim())
        .filter(|function| !function.is_empty())
        .filter_map(|function| function.split('_').next().map(String::from))
        .collect()
}

/// An `[chttpd_auth]` setting, else `[couch_httpd_auth]`'s, as CouchDB reads them.
pub(crate) fn setting(engine: &Engine, key: &str) -> Option<String> {
    engine.config_value("chttpd_auth", key).or_else(|| engine.config_value("couch_httpd_auth", key))
}

/// The user the configured JWT or proxy handler finds in `headers`, if one does.
pub(crate) fn resolve(
    engine: &Engine,
    headers: &HeaderMap,
) -> ApiResult<Option<(UserCtx, Method)>> {
    for name in names(engine) {
        let found = match name.as_str() {
            "jwt" => crate::jwt_auth::user(engine, headers)?.map(|ctx| (ctx, Method::Jwt)),
            "proxy" => crate::proxy_auth::user(engine, headers).map(|ctx| (ctx, Method::Proxy)),
            _ => None,
        };
        if found.is_some() {
            return Ok(found);
        }
    }
    Ok(None)
}
