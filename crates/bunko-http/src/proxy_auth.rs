//! Proxy authentication as CouchDB's `proxy_authentication_handler`: a trusted proxy in
//! front of the server names the user in `X-Auth-CouchDB-UserName` and their roles in
//! `X-Auth-CouchDB-Roles` (comma-separated). With `[chttpd_auth] proxy_use_secret = true`
//! the proxy also sends `X-Auth-CouchDB-Token`, the hex HMAC (SHA-256 or SHA-1) of the name
//! under `[chttpd_auth] secret`; a missing or wrong token leaves the request to the other
//! handlers. The header names follow `x_auth_username`, `x_auth_roles` and `x_auth_token`.
//!
//! It runs only when `[chttpd] authentication_handlers` lists it ([`crate::auth_handlers`]).
//! Where CouchDB trusts any token when no `secret` is configured, Bunko trusts none.

use axum::http::HeaderMap;
use bunko_engine::Engine;
use bunko_engine::login::constant_time_eq;
use hmac::{Hmac, Mac};

use crate::UserCtx;
use crate::auth_handlers::setting as auth_setting;

/// The user a proxy names, if it names one it may.
pub(crate) fn user(engine: &Engine, headers: &HeaderMap) -> Option<UserCtx> {
    let header = |key: &str, default: &str| {
        let name = auth_setting(engine, key).unwrap_or_else(|| default.to_string());
        headers.get(name.as_str()).and_then(|v| v.to_str().ok()).map(str::to_string)
    };
    let name = header("x_auth_username", "X-Auth-CouchDB-UserName")?;
    let roles = header("x_auth_roles", "X-Auth-CouchDB-Roles")
        .map(|roles| {
            roles.split(',').map(str::trim).filter(|r| !r.is_empty()).map(String::from).collect()
        })
        .unwrap_or_default();
    let use_secret = auth_setting(engine, "proxy_use_secret").is_some_and(|v| v.trim() == "true");
    if use_secret {
        let secret = auth_setting(engine, "secret")?;
        let token = hex::decode(header("x_auth_token", "X-Auth-CouchDB-Token")?.trim()).ok()?;
        if !signed(&secret, &name, &token) {
            return None;
        }
    }
    Some(UserCtx { name: Some(name), roles })
}

/// Whether `token` is the HMAC of `name` under `secret`, with SHA-256 or SHA-1 (told apart
/// by its length, as `couch_secrets:verify` does).
fn signed(secret: &str, name: &str, token: &[u8]) -> bool {
    let expected = match token.len() {
        32 => mac::<Hmac<sha2::Sha256>>(secret, name),
        20 => mac::<Hmac<sha1::Sha1>>(secret, name),
        _ => return false,
    };
    expected.is_some_and(|expected| constant_time_eq(&expected, token))
}

fn mac<M: Mac + hmac::digest::KeyInit>(secret: &str, name: &str) -> Option<Vec<u8>> {
    let mut mac = <M as hmac::digest::KeyInit>::new_from_slice(secret.as_bytes()).ok()?;
    mac.update(name.as_bytes());
    Some(mac.finalize().into_bytes().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_hmacs_of_the_name_in_sha256_or_sha1() {
        let sha1 = mac::<Hmac<sha1::Sha1>>("s3cret", "couch@apache.org").unwrap_or_default();
        let sha256 = mac::<Hmac<sha2::Sha256>>("s3cret", "couch@apache.org").unwrap_or_default();
        assert!(signed("s3cret", "couch@apache.org", &sha1));
        assert!(signed("s3cret", "couch@apache.org", &sha256));
        assert!(!signed("other", "couch@apache.org", &sha1));
        assert!(!signed("s3cret", "someone", &sha256));
        assert!(!signed("s3cret", "couch@apache.org", b"short"));
    }
}
