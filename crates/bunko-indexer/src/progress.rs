//! How far a running index update is, for `GET /_active_tasks`.

use parking_lot::Mutex;

/// Progress of one running update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Unix time (seconds) the update began.
    pub started_on: u64,
    /// Unix time (seconds) of the last page applied.
    pub updated_on: u64,
    pub changes_done: u64,
    /// The changes after the index's checkpoint when the update began.
    pub total_changes: u64,
}

/// A running update as `GET /_active_tasks` lists it (CouchDB's `indexer` and
/// `search_indexer` tasks).
#[derive(Debug, Clone)]
pub struct Task {
    pub database: String,
    pub design_document: String,
    /// The index's name within the design document, for kinds that name one (search).
    pub index: Option<String>,
    pub progress: Progress,
}

/// The progress of an index's running update, if one runs: set by [`crate::run`].
#[derive(Debug, Default)]
pub struct Activity {
    progress: Mutex<Option<Progress>>,
}

impl Activity {
    /// The running update's progress.
    pub fn get(&self) -> Option<Progress> {
        *self.progress.lock()
    }

    /// Publishes an update of `total` changes; cleared when the guard drops.
    pub(crate) fn start(&self, total: u64) -> Tracker<'_> {
        let now = unix_now();
        *self.progress.lock() = Some(Progress {
            started_on: now,
            updated_on: now,
            changes_done: 0,
            total_changes: total,
        });
        Tracker { activity: self }
    }
}

/// Publishes an update's progress while it runs, and clears it when the update ends,
/// however it ends.
pub(crate) struct Tracker<'a> {
    activity: &'a Activity,
}

impl Tracker<'_> {
    pub(crate) fn advance(&self, changes: u64) {
        if let Some(progress) = self.activity.progress.lock().as_mut() {
            progress.changes_done += changes;
            progress.total_changes = progress.total_changes.max(progress.changes_done);
            progress.updated_on = unix_now();
        }
    }
}

impl Drop for Tracker<'_> {
    fn drop(&mut self) {
        *self.activity.progress.lock() = None;
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
