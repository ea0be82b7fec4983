//! Replication endpoints: what `source` and `target` name, parsed as CouchDB's replicator
//! does (`couch_replicator_parse:parse_rep_db`): a URL string (credentials in the URL are
//! moved to basic auth), or an object `{"url", "headers", "auth": {"basic": {"username",
//! "password"}}}`; a plain database name is a local endpoint, reached through this server's
//! own URL as the replication's owner (so the write gate sees that user, never an admin).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use reqwest::Url;
use serde_json::{Map, Value};

use crate::error::{Error, Result};

/// Mints the credentials (a header name and value) with which this server accepts requests
/// from the given user; `None` for a user that does not exist (or no user: admin party).
pub type Credentials = Arc<dyn Fn(Option<&str>) -> Option<(String, String)> + Send + Sync>;

/// How local endpoints reach this server.
#[derive(Clone)]
pub struct Local {
    /// `http://127.0.0.1:PORT/`.
    pub base: String,
    pub credentials: Credentials,
}

/// One side of a replication.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The database URL without credentials, ending in `/`.
    pub url: Url,
    /// The database name, when the endpoint was given as one.
    pub local: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
    /// Headers given by the user (other than basic auth), sorted by name.
    pub headers: Vec<(String, String)>,
}

impl Endpoint {
    /// Parses `source` or `target` (`what` names it in errors).
    pub fn parse(value: &Value, what: &str, local: Option<&Local>) -> Result<Endpoint> {
        match value {
            Value::String(s) if s.starts_with("http://") || s.starts_with("https://") => {
                from_url(s, None, Vec::new(), what)
            }
            Value::String(name) => {
                let base = local.ok_or_else(|| Error::Param("local_endpoints_not_supported"))?;
                let path = percent_encoding::utf8_percent_encode(name, DB_NAME);
                let mut ep = from_url(&format!("{}{path}", base.base), None, Vec::new(), what)?;
                ep.local = Some(name.clone());
                Ok(ep)
            }
            Value::Object(map) => {
                let url = map.get("url").and_then(Value::as_str).ok_or_else(|| invalid(what))?;
                let headers = headers_of(map.get("headers"))?;
                from_url(url, basic_of(map.get("auth")), headers, what)
            }
            _ => Err(invalid(what)),
        }
    }

    /// The URL of `path` under the database (`path` already percent-encoded).
    pub fn join(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// The URL shown in `_active_tasks` and `_scheduler` (no credentials).
    pub fn shown(&self) -> String {
        self.url.to_string()
    }

    /// The `Authorization: Basic` value of the endpoint's credentials.
    pub fn basic(&self) -> Option<String> {
        let user = self.user.as_deref()?;
        let pass = self.password.as_deref().unwrap_or_default();
        Some(format!("Basic {}", STANDARD.encode(format!("{user}:{pass}"))))
    }
}

/// Characters escaped in a database name put into a URL path (`/` included, as CouchDB's
/// `couch_util:url_encode`).
const DB_NAME: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'_')
    .remove(b'-')
    .remove(b'.')
    .remove(b'$')
    .remove(b'(')
    .remove(b')');

fn invalid(what: &str) -> Error {
    Error::Invalid(format!("{what} has an invalid url"))
}

fn from_url(
    text: &str,
    basic: Option<(String, String)>,
    mut headers: Vec<(String, String)>,
    what: &str,
) -> Result<Endpoint> {
    let mut url = Url::parse(text).map_err(|_| invalid(what))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(invalid(what));
    }
    let mut creds = basic;
    if !url.username().is_empty() {
        let user = decode(url.username());
        let pass = url.password().map(decode).unwrap_or_default();
        creds = creds.or(Some((user, pass)));
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    if let Some(pos) = headers.iter().position(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        && let Some(pair) = basic_header(&headers[pos].1)
    {
        headers.remove(pos);
        creds = creds.or(Some(pair));
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    let (user, password) = creds.map_or((None, None), |(u, p)| (Some(u), Some(p)));
    Ok(Endpoint { url, local: None, user, password, headers })
}

fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

fn basic_header(value: &str) -> Option<(String, String)> {
    let encoded = value.strip_prefix("Basic ").or_else(|| value.strip_prefix("basic "))?;
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (user, pass) = decoded.split_once(':')?;
    Some((user.to_string(), pass.to_string()))
}

fn headers_of(value: Option<&Value>) -> Result<Vec<(String, String)>> {
    let Some(value) = value else { return Ok(Vec::new()) };
    let map = value.as_object().ok_or(Error::Param("headers must be an object"))?;
    let mut headers: Vec<(String, String)> = map
        .iter()
        .map(|(k, v)| Ok((k.clone(), v.as_str().ok_or(Error::Param("bad header"))?.to_string())))
        .collect::<Result<_>>()?;
    headers.sort();
    headers.dedup_by(|a, b| a.0 == b.0);
    Ok(headers)
}

fn basic_of(value: Option<&Value>) -> Option<(String, String)> {
    let basic: &Map<String, Value> = value?.get("basic")?.as_object()?;
    let user = basic.get("username")?.as_str()?;
    let pass = basic.get("password")?.as_str()?;
    Some((user.to_string(), pass.to_string()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn url_credentials_move_to_basic_auth_and_a_slash_ends_the_path() -> Result<()> {
        let ep = Endpoint::parse(&json!("http://bob:p%40ss@example.com:5984/db"), "source", None)?;
        assert_eq!(ep.url.as_str(), "http://example.com:5984/db/");
        assert_eq!((ep.user.as_deref(), ep.password.as_deref()), (Some("bob"), Some("p@ss")));
        let ep = Endpoint::parse(
            &json!({"url": "https://h/d", "auth": {"basic": {"username": "u", "password": "p"}}}),
            "target",
            None,
        )?;
        assert_eq!((ep.url.as_str(), ep.user.as_deref()), ("https://h/d/", Some("u")));
        Ok(())
    }

    #[test]
    fn a_name_needs_a_local_server_and_bad_urls_are_refused() {
        assert!(Endpoint::parse(&json!("db"), "source", None).is_err());
        assert!(Endpoint::parse(&json!({"url": "ftp://x/db"}), "source", None).is_err());
        assert!(Endpoint::parse(&json!(3), "target", None).is_err());
    }
}
