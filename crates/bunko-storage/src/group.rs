//! Group commit: many committers, one sync.
//!
//! Both backends commit through a [`Group`]. A commit has two phases, which are
//! [`crate::Store::apply`] and [`crate::Store::sync`]:
//!
//! 1. **Apply** ([`Group::apply`]). Under the apply lock the backend applies the batch
//!    (readers see it at once) and the commit takes the next *ticket*. Tickets therefore
//!    follow apply order: every batch with ticket `<= t` was fully applied before ticket
//!    `t` was handed out.
//! 2. **Sync** ([`Group::sync`]). The committer waits until `synced >= ticket`. The first
//!    waiter that finds no sync in flight becomes the *leader*: it reads the highest ticket
//!    handed out so far (`target`), releases the state lock, runs the backend's sync, then
//!    sets `synced = target` and wakes every waiter. Waiters whose ticket is still above
//!    `synced` (they applied after the leader read `target`) elect the next leader.
//!
//! ```text
//!   apply lock:  A applies, t=1 | B applies, t=2 | C applies, t=3 | ...
//!   state lock:  A leads (target=2) ......sync...... synced=2, wake | C leads (target=3..)
//!                B waits ----------------------------------------> B returns Ok
//! ```
//!
//! While one sync runs, the next group queues up, so a disk that syncs N times a second
//! acknowledges far more than N commits a second. That needs applies to go on while a
//! sync runs: a backend whose sync blocked applies would leave each sync only the one or
//! two batches that slipped in between syncs (fjall's own `persist(SyncAll)` does that;
//! see `fjall_store.rs` for how [`crate::Fjall`] avoids it).
//!
//! A failed sync (or a failed apply, or a leader that panicked) poisons the group: every
//! waiter not already covered by an earlier successful sync, and every later commit, gets
//! [`Error::Poisoned`]; nothing is applied any more. [`Group::close`] syncs what has been
//! applied and then refuses new commits with [`Error::Closed`].

use crate::{Error, Result, Ticket};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

/// Group-commit coordinator shared by the backends. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Group {
    /// Held while a batch is applied and its ticket taken; guards the last ticket issued.
    apply: Mutex<Applied>,
    /// Sync progress; waiters sleep on `wake`.
    state: Mutex<State>,
    wake: Condvar,
    /// The highest ticket handed out, readable without the apply lock.
    issued: AtomicU64,
    commits: AtomicU64,
    syncs: AtomicU64,
}

#[derive(Debug, Default)]
struct Applied {
    last_ticket: u64,
    /// Set once poisoned or closed: no batch is applied any more.
    refuse: Option<Refusal>,
}

#[derive(Debug, Clone, Copy)]
enum Refusal {
    Poisoned,
    Closed,
}

#[derive(Debug, Default)]
struct State {
    /// Every batch with a ticket `<= synced` is durable.
    synced: u64,
    /// A leader is syncing right now.
    syncing: bool,
    poisoned: bool,
}

impl Refusal {
    fn error(self) -> Error {
        match self {
            Refusal::Poisoned => Error::Poisoned,
            Refusal::Closed => Error::Closed,
        }
    }
}

impl Group {
    /// Phase 1: applies a batch with `apply` under the apply lock and takes the next
    /// ticket in the same critical section, so tickets follow apply order.
    ///
    /// `apply` must be atomic (all or nothing visible) and must not call back into the
    /// group. If it fails, the group is poisoned (the backend may have half-written its
    /// log) and its error is returned.
    pub(crate) fn apply(&self, apply: impl FnOnce() -> Result<()>) -> Result<Ticket> {
        let mut applied = self.apply.lock();
        if let Some(refusal) = applied.refuse {
            return Err(refusal.error());
        }
        if let Err(err) = apply() {
            applied.refuse = Some(Refusal::Poisoned);
            drop(applied);
            self.poison();
            return Err(err);
        }
        applied.last_ticket += 1;
        let ticket = applied.last_ticket;
        self.issued.store(ticket, Ordering::Release);
        self.commits.fetch_add(1, Ordering::Relaxed);
        Ok(Ticket(ticket))
    }

    /// Phase 2: returns once a successful `sync` has covered `ticket`, leading one if
    /// none is in flight. `sync` must make everything applied before it started durable.
    pub(crate) fn sync(&self, ticket: Ticket, sync: impl Fn() -> Result<()>) -> Result<()> {
        if ticket.0 > self.issued.load(Ordering::Acquire) {
            return Err(Error::Invalid(format!(
                "ticket {} was not issued by this store",
                ticket.0
            )));
        }
        self.wait(ticket.0, &sync)
    }

    /// Syncs every applied batch, then refuses all later commits with [`Error::Closed`].
    /// Commits already applied finish normally (they are covered by this sync or an
    /// earlier one). Closing twice is fine; closing a poisoned group reports the poison.
    pub(crate) fn close(&self, sync: impl Fn() -> Result<()>) -> Result<()> {
        let ticket = {
            let mut applied = self.apply.lock();
            if let Some(Refusal::Poisoned) = applied.refuse {
                return Err(Error::Poisoned);
            }
            applied.refuse = Some(Refusal::Closed);
            applied.last_ticket
        };
        self.wait(ticket, &sync)
    }

    /// `Ok` while batches are accepted; the refusal once poisoned or closed.
    pub(crate) fn health(&self) -> Result<()> {
        match self.apply.lock().refuse {
            Some(refusal) => Err(refusal.error()),
            None => Ok(()),
        }
    }

    /// Successful plus failed syncs run so far.
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Batches applied so far.
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Waits for a sync covering `ticket`, leading one if none is in flight.
    fn wait(&self, ticket: u64, sync: &dyn Fn() -> Result<()>) -> Result<()> {
        let mut state = self.state.lock();
        loop {
            if state.synced >= ticket {
                return Ok(());
            }
            if state.poisoned {
                return Err(Error::Poisoned);
            }
            if state.syncing {
                self.wake.wait(&mut state);
            } else {
                self.lead(&mut state, sync);
            }
        }
    }

    /// Runs one sync as leader. The state lock is released while syncing; the outcome is
    /// recorded in `state` and every waiter is woken, even if `sync` panics (the panic
    /// then continues in this thread).
    fn lead(&self, state: &mut MutexGuard<'_, State>, sync: &dyn Fn() -> Result<()>) {
        state.syncing = true;
        // Read after taking the role: every ticket <= target is an applied batch.
        let target = self.issued.load(Ordering::Acquire);
        let outcome = MutexGuard::unlocked(state, || panic::catch_unwind(AssertUnwindSafe(sync)));
        self.syncs.fetch_add(1, Ordering::Relaxed);
        state.syncing = false;
        if let Ok(Ok(())) = outcome {
            state.synced = state.synced.max(target);
        } else {
            state.poisoned = true;
            // Lock order is always state, then apply (never the reverse).
            self.apply.lock().refuse = Some(Refusal::Poisoned);
        }
        // Waiters not covered (they applied after `target` was read) wake too; the first
        // to get the lock leads the next sync.
        self.wake.notify_all();
        if let Err(payload) = outcome {
            panic::resume_unwind(payload);
        }
    }

    /// Marks the group poisoned after a failure outside a sync.
    fn poison(&self) {
        let mut state = self.state.lock();
        state.poisoned = true;
        self.wake.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    impl Group {
        /// Apply then sync, as `Store::commit` does.
        fn commit(
            &self,
            apply: impl FnOnce() -> Result<()>,
            sync: impl Fn() -> Result<()>,
        ) -> Result<()> {
            let ticket = self.apply(apply)?;
            self.sync(ticket, sync)
        }
    }

    #[test]
    fn single_commit_syncs_once() -> Result<()> {
        let group = Group::default();
        group.commit(|| Ok(()), || Ok(()))?;
        assert_eq!((group.commits(), group.syncs()), (1, 1));
        Ok(())
    }

    #[test]
    fn failed_sync_poisons_commit_and_later_commits() {
        let group = Group::default();
        let applied = AtomicBool::new(false);
        let err = group.commit(|| Ok(()), || Err(Error::Io("disk gone".into())));
        assert!(matches!(err, Err(Error::Poisoned)), "{err:?}");
        let later = group.commit(
            || {
                applied.store(true, Ordering::SeqCst);
                Ok(())
            },
            || Ok(()),
        );
        assert!(matches!(later, Err(Error::Poisoned)), "{later:?}");
        assert!(!applied.load(Ordering::SeqCst), "a poisoned group must not apply");
    }

    #[test]
    fn failed_apply_poisons() {
        let group = Group::default();
        let err = group.commit(|| Err(Error::Io("short write".into())), || Ok(()));
        assert!(matches!(err, Err(Error::Io(_))), "{err:?}");
        let later = group.commit(|| Ok(()), || Ok(()));
        assert!(matches!(later, Err(Error::Poisoned)), "{later:?}");
    }

    #[test]
    fn panicking_sync_poisons_instead_of_hanging() {
        let group = Arc::new(Group::default());
        let leader = {
            let group = group.clone();
            std::thread::spawn(move || group.commit(|| Ok(()), || panic!("sync exploded")))
        };
        assert!(leader.join().is_err());
        let later = group.commit(|| Ok(()), || Ok(()));
        assert!(matches!(later, Err(Error::Poisoned)), "{later:?}");
    }

    #[test]
    fn waiters_covered_by_a_failed_sync_are_poisoned() {
        let group = Arc::new(Group::default());
        let fail = Arc::new(AtomicBool::new(false));
        let sync = {
            let fail = fail.clone();
            move || {
                std::thread::sleep(Duration::from_millis(20));
                if fail.load(Ordering::SeqCst) { Err(Error::Io("eio".into())) } else { Ok(()) }
            }
        };
        fail.store(true, Ordering::SeqCst);
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (group, sync) = (group.clone(), sync.clone());
                std::thread::spawn(move || group.commit(|| Ok(()), sync))
            })
            .collect();
        for thread in threads {
            let result = thread.join().map_err(|_| Error::Io("thread panicked".into()));
            assert!(matches!(result, Ok(Err(Error::Poisoned))), "{result:?}");
        }
    }

    #[test]
    fn close_syncs_then_refuses() -> Result<()> {
        let group = Group::default();
        group.commit(|| Ok(()), || Ok(()))?;
        group.close(|| Ok(()))?;
        let later = group.commit(|| Ok(()), || Ok(()));
        assert!(matches!(later, Err(Error::Closed)), "{later:?}");
        group.close(|| Ok(()))?;
        Ok(())
    }
}
