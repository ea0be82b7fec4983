//! The background updater of one database's indexes of one kind: a thread woken after
//! every write that updates every index, and goes round again if a write came meanwhile.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Whether the updater runs, and whether a write came since its round began.
#[derive(Debug, Default)]
pub struct Background {
    running: AtomicBool,
    dirty: AtomicBool,
}

impl Background {
    /// Wakes the updater of `owner` (whose [`Background`] is `of(owner)`): starts a thread
    /// running `round` unless one runs already, in which case that one does another round.
    /// `round` returns `false` to stop for good (the database is gone).
    pub fn wake<S: Send + Sync + 'static>(
        owner: &Arc<S>,
        of: fn(&S) -> &Background,
        round: fn(&S) -> bool,
    ) {
        let me = of(owner);
        me.dirty.store(true, Ordering::Release);
        if me.running.swap(true, Ordering::AcqRel) {
            return;
        }
        let owner = owner.clone();
        std::thread::spawn(move || {
            loop {
                let me = of(&owner);
                me.dirty.store(false, Ordering::Release);
                let go_on = round(&owner);
                me.running.store(false, Ordering::Release);
                if !go_on
                    || !me.dirty.load(Ordering::Acquire)
                    || me.running.swap(true, Ordering::AcqRel)
                {
                    return;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;
    use std::time::{Duration, Instant};

    use super::*;

    #[derive(Default)]
    struct Owner {
        background: Background,
        rounds: AtomicU64,
    }

    #[test]
    fn a_wake_runs_at_least_one_round_after_it() {
        let owner = Arc::new(Owner::default());
        for _ in 0..3 {
            let before = owner.rounds.load(Ordering::Acquire);
            Background::wake(
                &owner,
                |o| &o.background,
                |o| {
                    o.rounds.fetch_add(1, Ordering::AcqRel);
                    true
                },
            );
            let deadline = Instant::now() + Duration::from_secs(10);
            while owner.rounds.load(Ordering::Acquire) <= before && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            assert!(owner.rounds.load(Ordering::Acquire) > before);
        }
    }
}
