//! One update of one index: the loop every index kind shares.
//!
//! [`run`] asks the index how many changes it lags ([`Build::pending`]), publishes that as
//! its [`Activity`], then applies pages ([`Build::step`]) until none is left or the
//! database is gone, calling [`Build::sync`] every `sync_every` pages and once at the end.
//! Each page is applied with the index's new checkpoint in one commit, so a crash loses
//! only the unsynced pages' progress, which the next update redoes.

use crate::progress::Activity;

/// What one page of an update did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Changes the page indexed.
    pub changes: u64,
    /// Whether more pages are needed.
    pub more: bool,
}

/// One update of an index, as the index kind implements it.
pub trait Build {
    type Error;

    /// Changes after the index's checkpoint.
    fn pending(&mut self) -> Result<u64, Self::Error>;

    /// Indexes and applies the next page with its checkpoint; `None` when nothing is left.
    fn step(&mut self) -> Result<Option<Page>, Self::Error>;

    /// Makes the pages applied so far durable.
    fn sync(&mut self) -> Result<(), Self::Error>;

    /// Whether to give up (the database was deleted).
    fn stopped(&self) -> bool {
        false
    }
}

/// Runs `build` to the end, publishing its progress on `activity` while it runs.
pub fn run<B: Build>(
    build: &mut B,
    activity: &Activity,
    sync_every: usize,
) -> Result<(), B::Error> {
    let total = build.pending()?;
    let tracker = (total > 0).then(|| activity.start(total));
    let mut pages = 0usize;
    while !build.stopped() {
        let Some(page) = build.step()? else { break };
        pages += 1;
        if let Some(tracker) = &tracker {
            tracker.advance(page.changes);
        }
        if pages.is_multiple_of(sync_every.max(1)) {
            build.sync()?;
        }
        if !page.more {
            break;
        }
    }
    if pages > 0 { build.sync() } else { Ok(()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model index: `left` changes to index, `per_page` at a time.
    struct Model<'a> {
        left: u64,
        per_page: u64,
        syncs: u32,
        seen: Vec<Option<crate::Progress>>,
        activity: &'a Activity,
    }

    impl Build for Model<'_> {
        type Error = ();
        fn pending(&mut self) -> Result<u64, ()> {
            Ok(self.left)
        }
        fn step(&mut self) -> Result<Option<Page>, ()> {
            self.seen.push(self.activity.get());
            if self.left == 0 {
                return Ok(None);
            }
            let changes = self.left.min(self.per_page);
            self.left -= changes;
            Ok(Some(Page { changes, more: self.left > 0 }))
        }
        fn sync(&mut self) -> Result<(), ()> {
            self.syncs += 1;
            Ok(())
        }
    }

    #[test]
    fn pages_run_to_the_end_with_progress_and_syncs() {
        let activity = Activity::default();
        let mut model =
            Model { left: 25, per_page: 10, syncs: 0, seen: vec![], activity: &activity };
        assert_eq!(run(&mut model, &activity, 2), Ok(()));
        let done: Vec<u64> = model.seen.iter().flatten().map(|p| p.changes_done).collect();
        assert_eq!(done, vec![0, 10, 20]);
        assert!(model.seen.iter().flatten().all(|p| p.total_changes == 25));
        assert_eq!(model.syncs, 2, "after the second page, and at the end");
        assert_eq!(activity.get(), None, "cleared when the update ends");
    }

    #[test]
    fn nothing_pending_publishes_nothing_and_syncs_nothing() {
        let activity = Activity::default();
        let mut model =
            Model { left: 0, per_page: 10, syncs: 0, seen: vec![], activity: &activity };
        assert_eq!(run(&mut model, &activity, 2), Ok(()));
        assert_eq!((model.seen, model.syncs), (vec![None], 0));
    }
}
