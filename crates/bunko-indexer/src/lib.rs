//! The secondary-index framework: what every index built asynchronously from a
//! database's change sequence shares, whatever it indexes (CouchDB's `couch_index`
//! behaviour, of which `couch_mrview` and the search indexes implement the callbacks).
//!
//! An index keeps a checkpoint (the sequence it has reached) next to its data; the
//! framework brings it up to date and reports on it, the index says how one page of
//! changes becomes index data:
//! 1. [`Update`]: how a query treats a lagging index (`update=true|false|lazy`, and
//!    `stale=ok|update_after`).
//! 2. [`Build`] and [`run`]: one update is a loop of pages, each applied with its
//!    checkpoint (so a restart resumes from the last applied page), synced every few pages
//!    and at the end, its [`Progress`] published for `GET /_active_tasks` while it runs.
//! 3. [`Background`]: one background updater per database, woken after every write; a
//!    write during a round asks for another round, so none is missed.
//! 4. [`Designs`]: which index each design document names, remembered between queries.
//! 5. [`Task`]: a running update as `GET /_active_tasks` lists it.
//!
//! Users: JavaScript views (`bunko-views`) and Cloudant Search (`bunko-search`).
//! The crate knows nothing of documents or storage, so it sits below both.

mod background;
mod designs;
mod driver;
mod progress;

pub use background::Background;
pub use designs::Designs;
pub use driver::{Build, Page, run};
pub use progress::{Activity, Progress, Task};

/// How a query treats an index that lags the documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Update {
    /// Bring the index up to date first (`update=true`, the default).
    #[default]
    True,
    /// Read the index as it is (`update=false`, `stale=ok`).
    False,
    /// Read it as it is, and start an update in the background (`update=lazy`,
    /// `stale=update_after`).
    Lazy,
}

impl Update {
    /// The mode named by `update` and `stale` (which wins) query parameters; `Err` names
    /// the parameter whose value is invalid.
    pub fn parse(update: Option<&str>, stale: Option<&str>) -> Result<Update, &'static str> {
        let update = match update {
            None | Some("true") => Update::True,
            Some("false") => Update::False,
            Some("lazy") => Update::Lazy,
            Some(_) => return Err("update"),
        };
        match stale {
            None => Ok(update),
            Some("ok") => Ok(Update::False),
            Some("update_after") => Ok(Update::Lazy),
            Some(_) => Err("stale"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_wins_over_update_and_bad_values_name_their_parameter() {
        assert_eq!(Update::parse(None, None), Ok(Update::True));
        assert_eq!(Update::parse(Some("lazy"), None), Ok(Update::Lazy));
        assert_eq!(Update::parse(Some("true"), Some("ok")), Ok(Update::False));
        assert_eq!(Update::parse(None, Some("update_after")), Ok(Update::Lazy));
        assert_eq!(Update::parse(Some("maybe"), None), Err("update"));
        assert_eq!(Update::parse(None, Some("never")), Err("stale"));
    }
}
