//! HTTP to the server under test: one [`reqwest::Client`] per simulated client, so that
//! "N connections" means N keep-alive connections, and authentication shared by all.
//!
//! - Basic: every request carries `Authorization: Basic`.
//! - Cookie: one `POST /_session`; the `AuthSession` cookie goes into a jar shared by all
//!   clients. The session is renewed once a minute ([`Server::fresh`]) because servers
//!   need not refresh it themselves and cookies expire (600 s by default).
//!
//! Only loopback URLs are accepted: the tool never sends load anywhere else.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::cookie::Jar;
use reqwest::{Client, Method, RequestBuilder, Url};
use serde_json::Value;

use crate::cli::{AuthMode, Options};
use crate::error::{Error, Result};

/// Timeout of one request: long enough for a first query that builds an index over a
/// million documents, short enough that a stuck server cannot hang the run.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(900);

/// How often the cookie session is renewed.
const SESSION_RENEWAL: Duration = Duration::from_secs(60);

/// The server under test and how to authenticate to it.
pub struct Server {
    base: Url,
    auth: AuthMode,
    user: String,
    password: String,
    jar: Arc<Jar>,
    born: Instant,
    /// Milliseconds after `born` of the last login plus one (0: never).
    login_ms: AtomicU64,
    login: tokio::sync::Mutex<()>,
}

impl Server {
    pub fn new(opts: &Options) -> Result<Arc<Server>> {
        let base = Url::parse(opts.url.trim_end_matches('/'))
            .map_err(|e| Error::Invalid(format!("invalid --url {}: {e}", opts.url)))?;
        check_loopback(&base)?;
        Ok(Arc::new(Server {
            base,
            auth: opts.auth,
            user: opts.user.clone(),
            password: opts.password.clone(),
            jar: Arc::new(Jar::default()),
            born: Instant::now(),
            login_ms: AtomicU64::new(0),
            login: tokio::sync::Mutex::new(()),
        }))
    }

    /// A new client: its own connection, the shared cookie jar.
    pub fn client(&self) -> Result<Client> {
        Client::builder()
            .cookie_provider(self.jar.clone())
            .pool_max_idle_per_host(1)
            .connect_timeout(Duration::from_secs(10))
            .timeout(REQUEST_TIMEOUT)
            .build()
            .map_err(|source| Error::Http { what: "building an HTTP client".into(), source })
    }

    /// `n` clients.
    pub fn clients(&self, n: usize) -> Result<Vec<Client>> {
        (0..n).map(|_| self.client()).collect()
    }

    /// The absolute URL of `path` (which starts with `/` and is already escaped).
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base.as_str().trim_end_matches('/'), path)
    }

    /// A request with authentication.
    pub fn request(&self, client: &Client, method: Method, path: &str) -> RequestBuilder {
        let request = client.request(method, self.url(path));
        match self.auth {
            AuthMode::Basic => request.basic_auth(&self.user, Some(&self.password)),
            AuthMode::Cookie => request,
        }
    }

    /// Makes sure a cookie session exists and is less than a minute old. Cheap when it is:
    /// one atomic load.
    pub async fn fresh(&self, client: &Client) -> Result {
        if self.auth == AuthMode::Basic || !self.stale() {
            return Ok(());
        }
        let _guard = self.login.lock().await;
        if !self.stale() {
            return Ok(());
        }
        let form = [("name", self.user.as_str()), ("password", self.password.as_str())];
        let request = client.post(self.url("/_session")).form(&form);
        send(request, "POST /_session").await?;
        let now = self.born.elapsed().as_millis() as u64 + 1;
        self.login_ms.store(now, Ordering::Relaxed);
        Ok(())
    }

    fn stale(&self) -> bool {
        let login = self.login_ms.load(Ordering::Relaxed);
        let now = self.born.elapsed().as_millis() as u64 + 1;
        login == 0 || now.saturating_sub(login) > SESSION_RENEWAL.as_millis() as u64
    }

    /// Sends a request built by [`Server::request`], renewing the session first.
    pub async fn send(
        &self,
        client: &Client,
        request: RequestBuilder,
        what: &str,
    ) -> Result<Bytes> {
        self.fresh(client).await?;
        send(request, what).await
    }

    /// As [`Server::send`], parsing the answer as JSON.
    pub async fn json(
        &self,
        client: &Client,
        request: RequestBuilder,
        what: &str,
    ) -> Result<Value> {
        let body = self.send(client, request, what).await?;
        serde_json::from_slice(&body)
            .map_err(|e| Error::Invalid(format!("{what} answered invalid JSON: {e}")))
    }
}

/// Sends `request` and returns its body if the status is 2xx, else [`Error::Status`].
pub async fn send(request: RequestBuilder, what: &str) -> Result<Bytes> {
    let http = |source| Error::Http { what: what.to_string(), source };
    let response = request.send().await.map_err(http)?;
    let status = response.status();
    let body = response.bytes().await.map_err(http)?;
    if status.is_success() {
        Ok(body)
    } else {
        let mut body = String::from_utf8_lossy(&body).trim().to_string();
        body.truncate(300);
        Err(Error::Status { what: what.to_string(), status, body })
    }
}

/// Refuses any URL whose host is not a loopback address or `localhost`.
fn check_loopback(url: &Url) -> Result {
    let host = url.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback && matches!(url.scheme(), "http" | "https") {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "--url {url} is not an http URL on a loopback address: bunko-bench only sends load \
             to this machine"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_urls_are_accepted() {
        for ok in
            ["http://127.0.0.1:5984", "http://localhost:1", "http://[::1]:80", "http://127.3.2.1"]
        {
            assert!(check_loopback(&Url::parse(ok).unwrap()).is_ok(), "{ok}");
        }
        for bad in ["http://10.0.0.1:5984", "http://example.com", "ftp://127.0.0.1"] {
            assert!(check_loopback(&Url::parse(bad).unwrap()).is_err(), "{bad}");
        }
    }
}
