//! Which revisions were made by a replacement (`replaceOne`, `findAndModify` with a
//! replacement document), remembered while the server runs so that a change stream reports
//! them as `replace` even when the new document keeps fields of the old one (the revisions
//! alone cannot tell a replacement from an update; see `event.rs`). At most [`KEPT`] are
//! kept, the oldest forgotten first; a stream reading an older one, or one made before a
//! restart, falls back to telling the kind from the revisions.

use std::collections::{HashSet, VecDeque};

use parking_lot::Mutex;

/// How many replacements are remembered.
const KEPT: usize = 65_536;

/// (engine database id, document id, revision).
type Made = (u64, String, String);

/// The replacements made since the server started (the last [`KEPT`]).
#[derive(Default)]
pub(crate) struct Replaced(Mutex<(HashSet<Made>, VecDeque<Made>)>);

impl Replaced {
    pub(crate) fn note(&self, db: u64, id: &str, rev: &str) {
        let made = (db, id.to_string(), rev.to_string());
        let mut kept = self.0.lock();
        if kept.0.insert(made.clone()) {
            kept.1.push_back(made);
        }
        while kept.1.len() > KEPT {
            if let Some(old) = kept.1.pop_front() {
                kept.0.remove(&old);
            }
        }
    }

    /// Whether revision `rev` of `id` in database `db` was made by a replacement.
    pub(crate) fn contains(&self, db: u64, id: &str, rev: &str) -> bool {
        self.0.lock().0.contains(&(db, id.to_string(), rev.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_are_forgotten_first() {
        let replaced = Replaced::default();
        for i in 0..=KEPT {
            replaced.note(1, &i.to_string(), "2-a");
        }
        assert!(!replaced.contains(1, "0", "2-a"));
        assert!(replaced.contains(1, "1", "2-a") && replaced.contains(1, &KEPT.to_string(), "2-a"));
        assert!(!replaced.contains(2, "1", "2-a"));
    }
}
