//! A time limit on the reads the current thread runs (MongoDB's `maxTimeMS`): the
//! MongoDB front end runs a command inside [`with`], and the scans that read documents
//! or index entries one by one (`check`: the document scans of `find`, index scans,
//! the streams an aggregation pulls) stop with [`Error::TimeLimit`] once it has passed,
//! instead of reading everything first. The clock is read on the first check and then
//! every [`EVERY`] checks, so a scan pays for it rarely. Threads without a limit (every
//! HTTP request) check nothing.

use std::cell::Cell;
use std::time::Instant;

use crate::{Error, Result};

/// How many checks pass between two readings of the clock.
pub const EVERY: u32 = 64;

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    static TICKS: Cell<u32> = const { Cell::new(0) };
}

/// Runs `f` with reads limited to `deadline` (`None`: no limit), restoring the previous
/// limit afterwards (also when `f` panics).
pub fn with<R>(deadline: Option<Instant>, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Instant>, u32);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
            TICKS.with(|t| t.set(self.1));
        }
    }
    let _restore = Restore(DEADLINE.with(|d| d.replace(deadline)), TICKS.with(|t| t.replace(0)));
    f()
}

/// The current limit (`None`: none).
pub fn current() -> Option<Instant> {
    DEADLINE.with(Cell::get)
}

/// Whether the current limit has passed (`false` without one).
pub fn passed() -> bool {
    DEADLINE.with(Cell::get).is_some_and(|deadline| Instant::now() >= deadline)
}

/// One step of a scan: [`Error::TimeLimit`] once the limit has passed (the clock is read
/// on the first step and every [`EVERY`] steps).
pub(crate) fn check() -> Result<()> {
    if DEADLINE.with(Cell::get).is_none() {
        return Ok(());
    }
    let tick = TICKS.with(|t| {
        let n = t.get();
        t.set(n.wrapping_add(1));
        n
    });
    match tick.is_multiple_of(EVERY) && passed() {
        true => Err(Error::TimeLimit),
        false => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_passed_limit_stops_the_first_check_and_is_scoped() {
        assert!(check().is_ok(), "no limit");
        let past = Instant::now();
        with(Some(past), || {
            assert!(matches!(check(), Err(Error::TimeLimit)));
            assert!(passed());
            with(None, || assert!(check().is_ok()));
        });
        let later = Instant::now() + Duration::from_secs(3600);
        with(Some(later), || assert!((0..200).all(|_| check().is_ok())));
        assert!(!passed(), "restored");
    }
}
