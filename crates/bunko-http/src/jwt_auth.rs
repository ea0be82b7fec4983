//! JWT authentication as CouchDB's `jwt_authentication_handler`: `Authorization: Bearer
//! <token>`, verified with a key from `[jwt_keys]` (`hmac:{kid}` base64, `rsa:{kid}` and
//! `ec:{kid}` PEM with `\n` written as the two characters; `kid` defaults to `_default`),
//! the claims `[jwt_auth] required_claims` lists checked (`exp` by default; `nbf`, `iat`,
//! `{iss, "value"}`), the user named by `sub`, the roles read from `_couchdb.roles` (or
//! `[jwt_auth] roles_claim_name`, or the dotted `roles_claim_path`). Errors are CouchDB's
//! (`jwtf`): `400` for a malformed token, bad signature or missing claim, `401` for an
//! expired one. The signature is checked by the `jsonwebtoken` crate, which knows
//! ES256 and ES384 but not ES512.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::http::{HeaderMap, header};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bunko_engine::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Map, Value};

use crate::UserCtx;
use crate::error::{ApiError, ApiResult};

/// The user a bearer token names, `None` when the request carries none.
pub(crate) fn user(engine: &Engine, headers: &HeaderMap) -> ApiResult<Option<UserCtx>> {
    let value = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let Some(token) = value.and_then(|v| v.strip_prefix("Bearer ")) else { return Ok(None) };
    let claims = verify(engine, token.trim())?;
    let roles = roles(engine, &claims)?;
    match claims.get("sub").and_then(Value::as_str) {
        Some(name) => Ok(Some(UserCtx { name: Some(name.to_string()), roles })),
        None => Err(ApiError::unauthorized("Token missing sub claim.")),
    }
}

fn bad(reason: &str) -> ApiError {
    ApiError::bad_request(reason)
}

/// Checks the header, the required claims and the signature (in `jwtf`'s order); answers
/// the claims.
fn verify(engine: &Engine, token: &str) -> ApiResult<Map<String, Value>> {
    let malformed = || bad("Malformed authentication token");
    let parts: Vec<&str> = token.split('.').collect();
    let [head, payload, _] = parts[..] else { return Err(malformed()) };
    let object = |part: &str| -> ApiResult<Map<String, Value>> {
        let bytes = URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).map_err(|_| malformed())?;
        match serde_json::from_slice(&bytes).map_err(|_| malformed())? {
            Value::Object(map) => Ok(map),
            _ => Err(bad("Not an object")),
        }
    };
    let head = object(head)?;
    let Some(alg) = head.get("alg").and_then(Value::as_str) else {
        return Err(bad("Missing alg header parameter"));
    };
    let algorithm: Algorithm = alg.parse().map_err(|_| bad("Invalid alg header parameter"))?;
    let claims = object(payload)?;
    check_claims(engine, &claims)?;
    let kid = head.get("kid").and_then(Value::as_str).unwrap_or("_default");
    let key = key(engine, alg, kid)?;
    let mut validation = Validation::new(algorithm);
    validation.required_spec_claims = HashSet::new();
    validation.validate_exp = false;
    validation.validate_nbf = false;
    validation.validate_aud = false;
    match jsonwebtoken::decode::<Value>(token, &key, &validation) {
        Ok(_) => Ok(claims),
        Err(_) if alg.starts_with("HS") => Err(bad("Bad HMAC in authentication token")),
        Err(_) => Err(bad("Bad signature in authentication token")),
    }
}

/// The key `[jwt_keys] {kty}:{kid}` for the algorithm `alg`.
fn key(engine: &Engine, alg: &str, kid: &str) -> ApiResult<DecodingKey> {
    let kty = match &alg[..2.min(alg.len())] {
        "HS" => "hmac",
        "RS" | "PS" => "rsa",
        "ES" => "ec",
        _ => return Err(bad("Unknown kty")),
    };
    let Some(encoded) = engine.config_value("jwt_keys", &format!("{kty}:{kid}")) else {
        return Err(bad("Unknown kid"));
    };
    let not_valid = || bad("Not a valid key");
    if kty == "hmac" {
        let secret = STANDARD.decode(encoded.trim()).map_err(|_| not_valid())?;
        return Ok(DecodingKey::from_secret(&secret));
    }
    let pem = encoded.replace("\\n", "\n");
    if kty == "rsa" {
        DecodingKey::from_rsa_pem(pem.as_bytes()).map_err(|_| bad("not an RSA public key"))
    } else {
        DecodingKey::from_ec_pem(pem.as_bytes()).map_err(|_| bad("not an EC public key"))
    }
}

/// The claims `[jwt_auth] required_claims` asks for: `exp` unless set.
fn check_claims(engine: &Engine, claims: &Map<String, Value>) -> ApiResult<()> {
    let setting = engine.config_value("jwt_auth", "required_claims");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as f64;
    for (name, expected) in required(setting.as_deref().unwrap_or("exp")) {
        let Some(value) = claims.get(&name) else {
            return Err(bad(&format!("Missing {name} claim")));
        };
        let time = value.as_f64();
        let ok = match (name.as_str(), expected) {
            (_, Some(expected)) => value.as_str() == Some(expected.as_str()),
            ("exp", None) if time.is_some_and(|t| t <= now) => {
                return Err(ApiError::unauthorized("exp not in future"));
            }
            ("nbf", None) if time.is_some_and(|t| t >= now) => {
                return Err(ApiError::unauthorized("nbf not in past"));
            }
            ("iat", None) => value.is_i64() || value.is_u64(),
            _ => true,
        };
        if !ok {
            return Err(bad(&format!("Invalid {name} claim")));
        }
    }
    Ok(())
}

/// Parses `required_claims`: names (`exp, nbf`) and `{name, "value"}` pairs.
fn required(setting: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut rest = setting.trim();
    while !rest.is_empty() {
        rest = rest.trim_start_matches([',', ' ']);
        if let Some(pair) = rest.strip_prefix('{') {
            let Some((inside, after)) = pair.split_once('}') else { break };
            if let Some((name, value)) = inside.split_once(',') {
                let value = value.trim().trim_matches('"').to_string();
                out.push((name.trim().to_string(), Some(value)));
            }
            rest = after;
        } else {
            let end = rest.find([',', ' ', '{']).unwrap_or(rest.len());
            if end > 0 {
                out.push((rest[..end].to_string(), None));
            }
            rest = &rest[end..];
        }
    }
    out
}

/// The roles claim: a list of strings, or a comma-separated string.
fn roles(engine: &Engine, claims: &Map<String, Value>) -> ApiResult<Vec<String>> {
    let found = match engine.config_value("jwt_auth", "roles_claim_path") {
        Some(path) => path_value(claims, &path),
        None => {
            let name = engine.config_value("jwt_auth", "roles_claim_name");
            claims.get(name.as_deref().unwrap_or("_couchdb.roles")).cloned()
        }
    };
    match found {
        None => Ok(Vec::new()),
        Some(Value::String(roles)) => Ok(roles
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(String::from)
            .collect()),
        Some(Value::Array(roles)) => roles
            .iter()
            .map(|r| r.as_str().map(String::from).ok_or_else(|| bad("Malformed token")))
            .collect(),
        Some(_) => Err(bad("Malformed token")),
    }
}

/// The value at a dotted path (`a.b.c`; `\.` is a literal dot).
fn path_value(claims: &Map<String, Value>, path: &str) -> Option<Value> {
    let mut segments = vec![String::new()];
    let mut chars = path.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'.') => {
                chars.next();
                segments.last_mut()?.push('.');
            }
            '.' => segments.push(String::new()),
            c => segments.last_mut()?.push(c),
        }
    }
    let mut value = claims.get(&segments[0])?;
    for segment in &segments[1..] {
        value = value.get(segment)?;
    }
    Some(value.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_claims_are_names_and_name_value_pairs() {
        let parsed = required(r#"exp, nbf, {iss, "MyCompany"}"#);
        let want = [("exp", None), ("nbf", None), ("iss", Some("MyCompany"))];
        let want: Vec<_> = want.iter().map(|(n, v)| (n.to_string(), v.map(String::from))).collect();
        assert_eq!(parsed, want);
        assert!(required("").is_empty());
    }

    #[test]
    fn role_paths_follow_dots_but_not_escaped_ones() {
        let claims = serde_json::json!({"a": {"b.c": {"d": ["r"]}}});
        let claims = claims.as_object().cloned().unwrap_or_default();
        assert_eq!(path_value(&claims, r"a.b\.c.d"), Some(serde_json::json!(["r"])));
        assert_eq!(path_value(&claims, "a.b.c"), None);
    }
}
