//! The server's database events for `GET /_db_updates`: `created`, `updated` and `deleted`,
//! one entry per (event, database) at the seq of its latest occurrence, as CouchDB keeps
//! them in `_global_changes` (document ids `event:dbname`). Held in memory: the feed starts
//! empty when the server starts (CouchDB persists it).

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use parking_lot::Mutex;
use tokio::sync::watch;

/// One event of the feed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbUpdate {
    pub seq: u64,
    pub db_name: String,
    /// `created`, `updated` or `deleted`.
    pub kind: &'static str,
}

/// The feed.
pub struct DbUpdates {
    inner: Mutex<Inner>,
    notify: watch::Sender<u64>,
}

#[derive(Default)]
struct Inner {
    seq: u64,
    by_seq: BTreeMap<u64, (&'static str, String)>,
    by_key: HashMap<(&'static str, String), u64>,
}

/// The process's feed.
pub fn global() -> &'static DbUpdates {
    static FEED: OnceLock<DbUpdates> = OnceLock::new();
    FEED.get_or_init(|| DbUpdates { inner: Mutex::default(), notify: watch::channel(0).0 })
}

impl DbUpdates {
    /// Records an event of `db_name`, moving its entry to a new seq.
    pub fn note(&self, kind: &'static str, db_name: &str) {
        let seq = {
            let mut inner = self.inner.lock();
            inner.seq += 1;
            let seq = inner.seq;
            let key = (kind, db_name.to_string());
            if let Some(old) = inner.by_key.insert(key.clone(), seq) {
                inner.by_seq.remove(&old);
            }
            inner.by_seq.insert(seq, key);
            seq
        };
        self.notify.send_replace(seq);
    }

    /// The events after `since` (oldest first, or newest first when `descending`), at
    /// most `limit`.
    pub fn since(&self, since: u64, descending: bool, limit: Option<u64>) -> Vec<DbUpdate> {
        let inner = self.inner.lock();
        let range = inner.by_seq.range(since.saturating_add(1)..);
        let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        let row = |(seq, (kind, db)): (&u64, &(&'static str, String))| DbUpdate {
            seq: *seq,
            db_name: db.clone(),
            kind,
        };
        if descending {
            range.rev().take(take).map(row).collect()
        } else {
            range.take(take).map(row).collect()
        }
    }

    /// The latest seq.
    pub fn last_seq(&self) -> u64 {
        self.inner.lock().seq
    }

    /// Woken at each event.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.notify.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_of_a_database_keeps_only_its_latest_seq() {
        let feed = DbUpdates { inner: Mutex::default(), notify: watch::channel(0).0 };
        feed.note("created", "a");
        feed.note("updated", "a");
        feed.note("created", "b");
        feed.note("updated", "a");
        let kinds: Vec<_> =
            feed.since(0, false, None).into_iter().map(|u| (u.seq, u.kind, u.db_name)).collect();
        assert_eq!(
            kinds,
            [(1, "created", "a".into()), (3, "created", "b".into()), (4, "updated", "a".into())]
        );
        assert_eq!(feed.since(3, false, None).len(), 1);
        assert_eq!(feed.since(0, true, Some(1))[0].seq, 4);
    }
}
