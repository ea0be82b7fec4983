//! Which index each design document names, remembered between queries so that a query
//! neither re-reads and re-parses its design document nor recomputes the signature. The
//! index kind forgets everything whenever a design document is written; a generation
//! number keeps a lookup that raced such a write from remembering what it read before it.

use std::collections::HashMap;

use parking_lot::Mutex;

/// Entries kept at most; past that the map starts over.
const MAX: usize = 1024;

/// Design document id → signature of the index (or group of indexes) it defines.
#[derive(Debug, Default)]
pub struct Designs {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    generation: u64,
    sigs: HashMap<String, String>,
}

impl Designs {
    /// The signature remembered for `ddoc`.
    pub fn get(&self, ddoc: &str) -> Option<String> {
        self.inner.lock().sigs.get(ddoc).cloned()
    }

    /// The generation to pass to [`Designs::insert`]; read it before reading the design
    /// document.
    pub fn generation(&self) -> u64 {
        self.inner.lock().generation
    }

    /// Remembers `sig` for `ddoc`, unless a design document was written since
    /// `generation` was read.
    pub fn insert(&self, ddoc: &str, sig: String, generation: u64) {
        let mut inner = self.inner.lock();
        if inner.generation != generation {
            return;
        }
        if inner.sigs.len() >= MAX {
            inner.sigs.clear();
        }
        inner.sigs.insert(ddoc.to_string(), sig);
    }

    /// Forgets everything: a design document changed.
    pub fn clear(&self) {
        let mut inner = self.inner.lock();
        inner.generation += 1;
        inner.sigs.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_between_read_and_insert_wins() {
        let designs = Designs::default();
        let generation = designs.generation();
        designs.insert("_design/a", "s1".into(), generation);
        assert_eq!(designs.get("_design/a").as_deref(), Some("s1"));
        let stale = designs.generation();
        designs.clear();
        designs.insert("_design/a", "old".into(), stale);
        assert_eq!(designs.get("_design/a"), None);
    }
}
