//! Rule 8's observations: which query each lookup by id followed, and which aggregation
//! pipelines join.
//!
//! A front end names the client of each request ([`Client`]: the user name and the
//! address it connects from; the HTTP API passes it with `_find`, `_all_docs` with `keys`
//! and `_bulk_get`). The engine keeps, per client, the query shape it ran last
//! ([`Clients`], one per engine, so a lookup in another database still counts). A lookup
//! by id (`_all_docs` with `keys` and `include_docs=true`, or `_bulk_get`) from the same
//! client within [`WINDOW`] of that query, or of the previous lookup after it, is filed
//! under the query's shape as a follow-up ([`super::observe::FollowUps`]): the query plus
//! its follow-ups is one read done in several round trips.
//!
//! Keying by user and address rather than by connection ties lookups sent over another
//! pooled connection to their query; requests of several application workers sharing
//! one account on one host interleave, and a lookup is then filed under whichever query
//! that client ran last (still a query followed by a lookup). A lookup with no query of
//! its client in the window (replication's `_bulk_get`, a plain read by id) counts only in
//! the database-wide totals.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde_json::Value;

use super::observe::Lookup;
use crate::database::Database;

/// How long after a query (or its previous follow-up) a lookup counts as its follow-up.
pub const WINDOW: Duration = Duration::from_secs(2);
/// Clients remembered at once; when full, those idle past the window make room.
const MAX_CLIENTS: usize = 4096;

/// Who sent a request, for tying lookups to the query before them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Client(String);

impl Client {
    /// The client `user` (`None`: anonymous) connecting from `addr`.
    pub fn new(user: Option<&str>, addr: Option<IpAddr>) -> Client {
        let addr = addr.map_or_else(String::new, |a| a.to_string());
        Client(format!("{}@{addr}", user.unwrap_or("")))
    }
}

/// The last query of each client (one per engine).
#[derive(Default)]
pub struct Clients {
    last: Mutex<HashMap<Client, Last>>,
}

struct Last {
    db: Weak<Database>,
    shape: String,
    at: Instant,
    followed: bool,
}

impl Clients {
    /// `client` ran a query of shape `shape` in `db`.
    pub(crate) fn queried(&self, client: &Client, db: Weak<Database>, shape: String) {
        let now = Instant::now();
        let mut last = self.last.lock();
        if last.len() >= MAX_CLIENTS && !last.contains_key(client) {
            last.retain(|_, l| now.duration_since(l.at) <= WINDOW);
            if last.len() >= MAX_CLIENTS {
                return;
            }
        }
        last.insert(client.clone(), Last { db, shape, at: now, followed: false });
    }

    /// The query `client` ran within the window, if any: its database, shape and whether
    /// this is its first follow-up. Restarts the window.
    fn followed(&self, client: &Client) -> Option<(Arc<Database>, String, bool)> {
        let now = Instant::now();
        let mut last = self.last.lock();
        let l = last.get_mut(client)?;
        if now.duration_since(l.at) > WINDOW {
            last.remove(client);
            return None;
        }
        l.at = now;
        let first = !std::mem::replace(&mut l.followed, true);
        Some((l.db.upgrade()?, l.shape.clone(), first))
    }
}

impl Database {
    /// Observes a request fetching documents `ids` by id (`kind`: `_all_docs`,
    /// `_bulk_get`) for `client`: counted for this database, and filed as a follow-up of
    /// the query the client ran just before, in whichever database.
    pub fn observe_lookup(&self, kind: &'static str, ids: &[String], client: Option<&Client>) {
        self.observed.record_lookup(ids.len());
        let Some((db, shape, first)) = client.and_then(|c| self.clients.followed(c)) else {
            return;
        };
        let lookup = Lookup { kind, db: self.name(), ids };
        db.observed.record_follow_up(&shape, first, &lookup);
    }

    /// Observes one run of an aggregation pipeline over this database (its stages as
    /// JSON), for the `$lookup` chains of rule 8.
    pub fn observe_pipeline(&self, stages: &[Value]) {
        self.observed.record_pipeline(stages);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_are_users_at_addresses() {
        let addr: Option<IpAddr> = "10.0.0.1".parse().ok();
        assert_eq!(Client::new(Some("amy"), addr), Client("amy@10.0.0.1".to_string()));
        assert_ne!(Client::new(Some("amy"), addr), Client::new(Some("bob"), addr));
        assert_ne!(Client::new(None, addr), Client::new(None, None));
    }

    #[test]
    fn a_lookup_follows_only_its_own_clients_query() {
        let clients = Clients::default();
        let (amy, bob) = (Client::new(Some("amy"), None), Client::new(Some("bob"), None));
        clients.queried(&amy, Weak::new(), "shape".to_string());
        // The database is gone (a dangling handle), so nothing is returned, but the
        // window restarted and the first follow-up was used up.
        assert!(clients.followed(&amy).is_none());
        assert!(clients.last.lock().get(&amy).is_some_and(|l| l.followed));
        assert!(clients.followed(&bob).is_none());
        assert!(clients.last.lock().get(&bob).is_none());
    }
}
