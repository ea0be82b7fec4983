//! The winning bodies a build maps, read from a snapshot: by point reads, or, for a page of
//! a first build in id order, by one range scan over the page's `Rev` keys ([`Bodies::scan`]).
//!
//! A page of the id-order scan holds consecutive documents, so their `Rev` keys (id, then
//! revision) are one contiguous range: reading it once walks each storage block once,
//! where a point read per body searches every table's filter and index again. The range
//! also holds the bodies of non-winning revisions (kept until `_compact`), which a point
//! read never decodes; the scan is taken only when the page's revision trees are small.

use std::iter::Peekable;

use bunko_engine::Result;
use bunko_engine::keys;
use bunko_storage::{Snapshot, Stream};

/// Revisions per document, on average over a page, up to which [`Bodies::scan`] reads the
/// page's range: past it, the non-winning bodies in the range would cost more to read and
/// decode than point reads of the winners.
const MOST_REVISIONS_PER_DOC: usize = 2;

/// Reads bodies (`Rev` keys) from one snapshot, in ascending key order when scanning.
pub(crate) struct Bodies<'a> {
    snapshot: &'a Snapshot,
    /// The page's `Rev` range, when read by a scan.
    stream: Option<Peekable<Stream>>,
}

impl<'a> Bodies<'a> {
    /// Point reads.
    pub(crate) fn point(snapshot: &'a Snapshot) -> Self {
        Bodies { snapshot, stream: None }
    }

    /// The bodies of the documents `first..=last` of database `db`, whose revision trees
    /// hold `revisions` nodes for `docs` documents, read by one range scan when that is
    /// cheaper (and the snapshot can stream); [`Bodies::get`] must then be asked for keys
    /// in ascending order.
    pub(crate) fn scan(
        snapshot: &'a Snapshot,
        db: u64,
        (first, last): (&str, &str),
        revisions: usize,
        docs: usize,
    ) -> Self {
        let stream = (revisions <= docs.saturating_mul(MOST_REVISIONS_PER_DOC))
            .then(|| {
                snapshot.stream(&(keys::rev_range(db, first).0, keys::rev_range(db, last).1), false)
            })
            .flatten();
        Bodies { snapshot, stream: stream.map(Iterator::peekable) }
    }

    /// The value of `key` (a `Rev` key), if present. A key the scan passed without finding
    /// it is read by a point read, so that an out-of-order call still gets the right body.
    pub(crate) fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(stream) = &mut self.stream {
            let upto = |e: &bunko_storage::Result<bunko_storage::Entry>| {
                e.as_ref().map_or(true, |(k, _)| k.as_slice() <= key)
            };
            while let Some(entry) = stream.next_if(upto) {
                let (k, value) = entry?;
                if k == key {
                    return Ok(Some(value));
                }
            }
        }
        Ok(self.snapshot.get(key)?)
    }
}

#[cfg(test)]
mod tests {
    use bunko_engine::keys::Key;
    use bunko_storage::{Batch, Fjall, Store};

    use super::*;

    #[test]
    fn a_scan_reads_what_point_reads_read_in_any_order() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| bunko_engine::Error::Unknown(e.to_string()))?;
        let store = Fjall::open(dir.path())?;
        let mut batch = Batch::new();
        for id in ["a", "b", "c", "e"] {
            for rev in ["1-x", "2-y"] {
                // Long enough to be stored compressed.
                batch.put(
                    Key::Rev(1, id, rev).encode(),
                    format!("{{\"{id}\":\"{rev}{}\"}}", "p".repeat(200)),
                );
            }
        }
        batch.put(Key::Rev(2, "a", "1-x").encode(), "{}");
        store.commit(batch)?;
        let snapshot = store.snapshot();
        let point = |id, rev| snapshot.get(&Key::Rev(1, id, rev).encode());
        // In order, skipping revisions and an absent document, then back before the scan.
        let asked =
            [("a", "2-y"), ("b", "1-x"), ("d", "1-x"), ("e", "2-y"), ("e", "3-z"), ("a", "1-x")];
        let mut bodies = Bodies::scan(&snapshot, 1, ("a", "e"), 8, 4);
        assert!(bodies.stream.is_some(), "fjall streams the range");
        for (id, rev) in asked {
            assert_eq!(bodies.get(&Key::Rev(1, id, rev).encode())?, point(id, rev)?, "{id} {rev}");
        }
        assert!(point("e", "2-y")?.is_some() && point("d", "1-x")?.is_none());
        // Many revisions per document: point reads.
        assert!(Bodies::scan(&snapshot, 1, ("a", "e"), 9, 4).stream.is_none());
        Ok(())
    }
}
