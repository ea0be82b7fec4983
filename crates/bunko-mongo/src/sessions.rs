//! Server sessions: the state MongoDB keeps per logical session id (`lsid`), shared by
//! every connection that sends that id.
//!
//! A session is keyed by its `lsid.id` and the authenticated user (MongoDB keys it by the
//! id and a digest of the user, so one user can never reach another's session). It holds
//! the highest `txnNumber` seen and what was done with it: an open engine transaction
//! ([`Txn::Open`]), or its outcome, and the reply of the last retryable write. A session not
//! used for `logicalSessionTimeoutMinutes` (30, as `hello` reports) is dropped the next time
//! sessions are looked up, and with it any open transaction (aborted: nothing was written).
//!
//! All of this lives in memory: a restart forgets sessions, open transactions (aborted, as
//! on a MongoDB failover) and the replies kept for retried writes.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bson::Document;
use bunko_engine::Transaction;
use parking_lot::Mutex;

/// How long an unused session lives (`logicalSessionTimeoutMinutes`).
pub const TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A session's key: `lsid.id` (a UUID's bytes) and the user's name.
pub type Key = (Vec<u8>, String);

/// Which open transaction has written each document (`(database, id)`), so that a second
/// transaction writing the same document fails at its write with `WriteConflict`, as in
/// MongoDB, rather than at its commit.
#[derive(Default)]
pub struct WriteLocks {
    held: Mutex<HashMap<(String, String), u64>>,
    next_owner: AtomicU64,
}

/// The documents one open transaction has written; released when it is dropped (commit,
/// abort, expiry, the session's end).
pub struct Held {
    table: Arc<WriteLocks>,
    owner: u64,
    keys: Vec<(String, String)>,
}

impl Held {
    /// Takes document `id` of `db` for this transaction; false if another open transaction
    /// has written it.
    pub fn take(&mut self, db: &str, id: &str) -> bool {
        let key = (db.to_string(), id.to_string());
        let mut held = self.table.held.lock();
        match held.get(&key) {
            Some(&owner) => owner == self.owner,
            None => {
                held.insert(key.clone(), self.owner);
                self.keys.push(key);
                true
            }
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.table.held.lock();
        for key in self.keys.drain(..) {
            held.remove(&key);
        }
    }
}

/// A transaction in progress and the documents it holds.
pub struct OpenTxn {
    pub txn: Transaction<'static>,
    pub held: Held,
    /// `createIndexes` commands given in the transaction (with their `$db`), run once it
    /// has committed.
    pub ddl: Vec<(String, Document)>,
}

impl OpenTxn {
    pub fn new(txn: Transaction<'static>, table: &Arc<WriteLocks>) -> OpenTxn {
        let owner = table.next_owner.fetch_add(1, Ordering::Relaxed);
        let held = Held { table: table.clone(), owner, keys: Vec::new() };
        OpenTxn { txn, held, ddl: Vec::new() }
    }
}

impl std::ops::Deref for OpenTxn {
    type Target = Transaction<'static>;

    fn deref(&self) -> &Self::Target {
        &self.txn
    }
}

impl std::ops::DerefMut for OpenTxn {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.txn
    }
}

/// What the session did with its current `txnNumber`.
pub enum Txn {
    /// No transaction has been started (or only retryable writes were sent).
    None,
    /// A transaction in progress.
    Open(Box<OpenTxn>),
    /// Committed; a retried `commitTransaction` answers ok again.
    Committed,
    /// Aborted (explicitly, by an error, or past its lifetime).
    Aborted,
}

/// One logical session.
pub struct ServerSession {
    last_use: Instant,
    /// The highest `txnNumber` the session has used (`-1`: none).
    pub number: i64,
    /// What became of the transaction numbered [`ServerSession::number`], if it was one.
    pub txn: Txn,
    /// The reply to the retryable write numbered [`ServerSession::number`], if it was one.
    pub retried: Option<Document>,
}

impl ServerSession {
    /// Marks the session used now (called while it is locked for a command).
    pub fn touch(&mut self) {
        self.last_use = Instant::now();
    }

    /// Aborts a transaction past its lifetime (its snapshot is released, as MongoDB's
    /// periodic job aborts it after `transactionLifetimeLimitSeconds`); whether the session
    /// is still alive.
    fn sweep(&mut self, now: Instant) -> bool {
        if matches!(&self.txn, Txn::Open(txn) if txn.expired()) {
            self.txn = Txn::Aborted;
        }
        now.duration_since(self.last_use) < TIMEOUT
    }
}

/// How often [`Sessions::get`] looks for expired sessions and transactions.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// All sessions of the server.
pub struct Sessions {
    map: Mutex<HashMap<Key, Arc<Mutex<ServerSession>>>>,
    swept: Mutex<Instant>,
    /// The documents open transactions have written.
    pub locks: Arc<WriteLocks>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions { map: Mutex::default(), swept: Mutex::new(Instant::now()), locks: Arc::default() }
    }
}

impl Sessions {
    /// The session `key`, created if new; drops expired sessions first.
    pub fn get(&self, key: Key) -> Arc<Mutex<ServerSession>> {
        let mut map = self.map.lock();
        let now = Instant::now();
        if now.duration_since(*self.swept.lock()) >= SWEEP_EVERY {
            *self.swept.lock() = now;
            map.retain(|_, s| s.try_lock().is_none_or(|mut s| s.sweep(now)));
        }
        let session = map.entry(key).or_insert_with(|| {
            Arc::new(Mutex::new(ServerSession {
                last_use: now,
                number: -1,
                txn: Txn::None,
                retried: None,
            }))
        });
        session.clone()
    }

    /// Ends the sessions `keys` (`endSessions`, `killSessions`); open transactions abort.
    pub fn end(&self, keys: &[Key]) {
        let mut map = self.map.lock();
        for key in keys {
            map.remove(key);
        }
    }

    /// Every session: its `lsid.id`, its user, and when it was last used (a session busy
    /// with a command now: now).
    pub fn list(&self) -> Vec<(Vec<u8>, String, Instant)> {
        let map = self.map.lock();
        let last =
            |s: &Arc<Mutex<ServerSession>>| s.try_lock().map_or_else(Instant::now, |s| s.last_use);
        map.iter().map(|((id, user), s)| (id.clone(), user.clone(), last(s))).collect()
    }

    /// Ends every session of `user`, or of everybody (`killAllSessions`).
    pub fn end_all(&self, user: Option<&str>) {
        self.map.lock().retain(|(_, owner), _| user.is_some_and(|u| u != owner));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: u8, user: &str) -> Key {
        (vec![id; 16], user.to_string())
    }

    #[test]
    fn sessions_are_per_id_and_user_and_end() {
        let sessions = Sessions::default();
        sessions.get(key(1, "ann")).lock().number = 5;
        assert_eq!(sessions.get(key(1, "ann")).lock().number, 5);
        // The same id under another user is another session.
        assert_eq!(sessions.get(key(1, "bob")).lock().number, -1);
        sessions.end(&[key(1, "ann")]);
        assert_eq!(sessions.get(key(1, "ann")).lock().number, -1);
        sessions.get(key(2, "ann")).lock().number = 7;
        sessions.end_all(Some("bob"));
        assert_eq!(sessions.get(key(2, "ann")).lock().number, 7);
        assert_eq!(sessions.get(key(1, "bob")).lock().number, -1);
        sessions.end_all(None);
        assert_eq!(sessions.map.lock().len(), 0);
    }

    #[test]
    fn a_written_document_is_held_until_its_transaction_ends() {
        let table = Arc::new(WriteLocks::default());
        let held = |owner| Held { table: table.clone(), owner, keys: Vec::new() };
        let (mut a, mut b) = (held(1), held(2));
        assert!(a.take("db", "x"));
        assert!(a.take("db", "x"));
        assert!(!b.take("db", "x"));
        assert!(b.take("db", "y"));
        drop(a);
        assert!(b.take("db", "x"));
        drop(b);
        assert!(table.held.lock().is_empty());
    }

    #[test]
    fn idle_sessions_expire() {
        let sessions = Sessions::default();
        sessions.get(key(1, "ann")).lock().number = 3;
        let later = Instant::now() + TIMEOUT + Duration::from_secs(1);
        let session = sessions.get(key(1, "ann"));
        assert!(!session.lock().sweep(later));
        assert!(session.lock().sweep(Instant::now()));
    }
}
