//! Group commit: many committers, one sync thread.
//!
//! Both backends commit through a [`Group`]. A commit has two phases, which are
//! [`crate::Store::apply`] and then [`crate::Store::sync`] (blocking) or
//! [`crate::Store::durable`] (a future):
//!
//! 1. **Apply** ([`Group::apply`]). Under the apply lock the backend applies the batch
//!    (readers see it at once) and the commit takes the next *ticket*. Tickets therefore
//!    follow apply order: every batch with ticket `<= t` was fully applied before ticket
//!    `t` was handed out.
//! 2. **Wait.** The committer records that it wants ticket `t` durable and waits until
//!    `synced >= t`: a blocking caller on a condition variable ([`Group::sync`]), an async
//!    caller as a [`Durable`] future that a oneshot channel completes, so an async
//!    committer holds no thread while it waits.
//! 3. **Sync.** One thread per group, the *leader*, does every sync. When some waiter wants
//!    a ticket above `synced`, it reads the highest ticket handed out so far (`target`),
//!    runs the backend's sync without any group lock, then sets `synced = target`,
//!    completes every waiter that sync covered and starts over if more are waiting.
//!
//! ```text
//!   apply lock:  A applies, t=1 | B applies, t=2 | C applies, t=3 | ...
//!   leader:      wanted=1, target=2 ......sync...... synced=2, wake A, B | target=3 ...
//!   A, B:        wait (a parked thread or a pending future) ----> Ok
//! ```
//!
//! While one sync runs, the next group queues up, so a disk that syncs N times a second
//! acknowledges far more than N commits a second. That needs applies to go on while a
//! sync runs: a backend whose sync blocked applies would leave each sync only the one or
//! two batches that slipped in between syncs (fjall's own `persist(SyncAll)` does that;
//! see `fjall_store.rs` for how [`crate::Fjall`] avoids it). Before the leader, the first
//! waiter to find no sync in flight led one itself; a future cannot, and one leader thread
//! means a waiter never pays for a sync on its own thread.
//!
//! A failed sync (or a failed apply, or a sync that panicked) poisons the group: every
//! waiter not already covered by an earlier successful sync, and every later commit, gets
//! [`Error::Poisoned`]; nothing is applied any more. [`Group::close`] syncs what has been
//! applied and then refuses new commits with [`Error::Closed`]. Dropping the group stops
//! the leader after a last sync of what its waiters asked for.

use crate::{Error, Result, Ticket};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// What a backend runs to make everything applied before the call durable.
pub(crate) type SyncFn = Box<dyn Fn() -> Result<()> + Send + Sync>;

/// Group-commit coordinator shared by the backends. See the module docs.
pub(crate) struct Group {
    shared: Arc<Shared>,
    leader: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Group {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Group")
            .field("commits", &self.commits())
            .field("syncs", &self.syncs())
            .finish()
    }
}

/// The part of the group the leader thread shares.
#[derive(Default)]
struct Shared {
    /// Held while a batch is applied and its ticket taken; guards the last ticket issued.
    apply: Mutex<Applied>,
    /// Sync progress and waiters.
    state: Mutex<State>,
    /// Blocking waiters sleep on `wake`, the leader on `work`.
    wake: Condvar,
    work: Condvar,
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

#[derive(Default)]
struct State {
    /// Every batch with a ticket `<= synced` is durable.
    synced: u64,
    /// The highest ticket a waiter waits for.
    wanted: u64,
    poisoned: bool,
    /// The group is being dropped: the leader exits once nothing is wanted.
    stop: bool,
    /// Async waiters: the ticket each waits for, and where its outcome goes.
    futures: Vec<(u64, oneshot::Sender<Result<()>>)>,
}

impl Refusal {
    fn error(self) -> Error {
        match self {
            Refusal::Poisoned => Error::Poisoned,
            Refusal::Closed => Error::Closed,
        }
    }
}

impl State {
    /// The outcome for a waiter on `ticket`, if it is known yet.
    fn outcome(&self, ticket: u64) -> Option<Result<()>> {
        if self.synced >= ticket {
            Some(Ok(()))
        } else if self.poisoned {
            Some(Err(Error::Poisoned))
        } else {
            None
        }
    }

    /// Completes every async waiter whose outcome is known.
    fn complete(&mut self) {
        for (ticket, done) in std::mem::take(&mut self.futures) {
            match self.outcome(ticket) {
                Some(outcome) => {
                    let _ = done.send(outcome); // the waiter may have given up
                }
                None => self.futures.push((ticket, done)),
            }
        }
    }
}

impl Group {
    /// A group whose leader thread makes batches durable with `sync`.
    pub(crate) fn new(sync: SyncFn) -> Group {
        let shared = Arc::new(Shared::default());
        let leader = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("bunko-sync".into())
                .spawn(move || shared.lead(sync))
                .ok()
        };
        if leader.is_none() {
            // No thread, no syncs: refuse writes rather than hang every waiter.
            shared.apply.lock().refuse = Some(Refusal::Poisoned);
            shared.state.lock().poisoned = true;
        }
        Group { shared, leader }
    }

    /// Phase 1: applies a batch with `apply` under the apply lock and takes the next
    /// ticket in the same critical section, so tickets follow apply order.
    ///
    /// `apply` must be atomic (all or nothing visible) and must not call back into the
    /// group. If it fails, the group is poisoned (the backend may have half-written its
    /// log) and its error is returned.
    pub(crate) fn apply(&self, apply: impl FnOnce() -> Result<()>) -> Result<Ticket> {
        let shared = &self.shared;
        let mut applied = shared.apply.lock();
        if let Some(refusal) = applied.refuse {
            return Err(refusal.error());
        }
        if let Err(err) = apply() {
            applied.refuse = Some(Refusal::Poisoned);
            drop(applied);
            shared.poison();
            return Err(err);
        }
        applied.last_ticket += 1;
        let ticket = applied.last_ticket;
        shared.issued.store(ticket, Ordering::Release);
        shared.commits.fetch_add(1, Ordering::Relaxed);
        Ok(Ticket(ticket))
    }

    /// Phase 2, blocking: returns once a successful sync has covered `ticket`.
    pub(crate) fn sync(&self, ticket: Ticket) -> Result<()> {
        self.check(ticket)?;
        self.wait(ticket.0)
    }

    /// Phase 2 as a future: resolves once a successful sync has covered `ticket`.
    pub(crate) fn durable(&self, ticket: Ticket) -> Durable {
        if let Err(err) = self.check(ticket) {
            return Durable::ready(Err(err));
        }
        let mut state = self.shared.state.lock();
        if let Some(outcome) = state.outcome(ticket.0) {
            return Durable::ready(outcome);
        }
        let (done, outcome) = oneshot::channel();
        state.futures.push((ticket.0, done));
        self.shared.want(&mut state, ticket.0);
        Durable(Inner::Waiting(outcome))
    }

    /// Syncs every applied batch, then refuses all later commits with [`Error::Closed`].
    /// Commits already applied finish normally (they are covered by this sync or an
    /// earlier one). Closing twice is fine; closing a poisoned group reports the poison.
    pub(crate) fn close(&self) -> Result<()> {
        let ticket = {
            let mut applied = self.shared.apply.lock();
            if let Some(Refusal::Poisoned) = applied.refuse {
                return Err(Error::Poisoned);
            }
            applied.refuse = Some(Refusal::Closed);
            applied.last_ticket
        };
        self.wait(ticket)
    }

    /// `Ok` while batches are accepted; the refusal once poisoned or closed.
    pub(crate) fn health(&self) -> Result<()> {
        match self.shared.apply.lock().refuse {
            Some(refusal) => Err(refusal.error()),
            None => Ok(()),
        }
    }

    /// Successful plus failed syncs run so far.
    pub(crate) fn syncs(&self) -> u64 {
        self.shared.syncs.load(Ordering::Relaxed)
    }

    /// Batches applied so far.
    pub(crate) fn commits(&self) -> u64 {
        self.shared.commits.load(Ordering::Relaxed)
    }

    fn check(&self, ticket: Ticket) -> Result<()> {
        if ticket.0 > self.shared.issued.load(Ordering::Acquire) {
            return Err(Error::Invalid(format!(
                "ticket {} was not issued by this store",
                ticket.0
            )));
        }
        Ok(())
    }

    /// Blocks until a sync covers `ticket`, or the group is poisoned.
    fn wait(&self, ticket: u64) -> Result<()> {
        let shared = &self.shared;
        let mut state = shared.state.lock();
        loop {
            if let Some(outcome) = state.outcome(ticket) {
                return outcome;
            }
            shared.want(&mut state, ticket);
            shared.wake.wait(&mut state);
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.shared.state.lock().stop = true;
        self.shared.work.notify_one();
        if let Some(leader) = self.leader.take() {
            let _ = leader.join(); // the leader catches panics of `sync` itself
        }
    }
}

impl Shared {
    /// Asks the leader for a sync covering `ticket`.
    fn want(&self, state: &mut State, ticket: u64) {
        if ticket > state.wanted {
            state.wanted = ticket;
            self.work.notify_one();
        }
    }

    /// The leader thread: syncs while some waiter wants a ticket not yet durable.
    fn lead(&self, sync: SyncFn) {
        let mut state = self.state.lock();
        loop {
            if state.wanted <= state.synced || state.poisoned {
                if state.stop {
                    return;
                }
                self.work.wait(&mut state);
                continue;
            }
            // Read after the wait: every ticket <= target is an applied batch.
            let target = self.issued.load(Ordering::Acquire);
            let outcome =
                MutexGuard::unlocked(&mut state, || panic::catch_unwind(AssertUnwindSafe(&sync)));
            self.syncs.fetch_add(1, Ordering::Relaxed);
            if let Ok(Ok(())) = outcome {
                state.synced = state.synced.max(target);
            } else {
                state.poisoned = true;
                // Lock order is always state, then apply (never the reverse).
                self.apply.lock().refuse = Some(Refusal::Poisoned);
            }
            state.complete();
            self.wake.notify_all();
        }
    }

    /// Marks the group poisoned after a failure outside a sync.
    fn poison(&self) {
        let mut state = self.state.lock();
        state.poisoned = true;
        state.complete();
        self.wake.notify_all();
    }
}

/// A future that resolves once a batch is durable; see [`crate::Store::durable`].
#[must_use = "a write is durable only once this future resolves"]
pub struct Durable(Inner);

enum Inner {
    Ready(Option<Result<()>>),
    Waiting(oneshot::Receiver<Result<()>>),
}

impl Durable {
    /// A future that is already resolved with `outcome`.
    pub fn ready(outcome: Result<()>) -> Durable {
        Durable(Inner::Ready(Some(outcome)))
    }
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Durable")
    }
}

impl Future for Durable {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match &mut self.0 {
            Inner::Ready(outcome) => Poll::Ready(outcome.take().unwrap_or(Err(Error::Closed))),
            // A dropped sender means the group was dropped before the sync.
            Inner::Waiting(outcome) => {
                Pin::new(outcome).poll(cx).map(|outcome| outcome.unwrap_or(Err(Error::Closed)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::time::Duration;

    impl Group {
        /// Apply then sync, as `Store::commit` does.
        fn commit(&self, apply: impl FnOnce() -> Result<()>) -> Result<()> {
            let ticket = self.apply(apply)?;
            self.sync(ticket)
        }
    }

    fn ok_group() -> Group {
        Group::new(Box::new(|| Ok(())))
    }

    #[test]
    fn single_commit_syncs_once() -> Result<()> {
        let group = ok_group();
        group.commit(|| Ok(()))?;
        assert_eq!((group.commits(), group.syncs()), (1, 1));
        Ok(())
    }

    #[test]
    fn failed_sync_poisons_commit_and_later_commits() {
        let group = Group::new(Box::new(|| Err(Error::Io("disk gone".into()))));
        let applied = AtomicBool::new(false);
        let err = group.commit(|| Ok(()));
        assert!(matches!(err, Err(Error::Poisoned)), "{err:?}");
        let later = group.commit(|| {
            applied.store(true, Ordering::SeqCst);
            Ok(())
        });
        assert!(matches!(later, Err(Error::Poisoned)), "{later:?}");
        assert!(!applied.load(Ordering::SeqCst), "a poisoned group must not apply");
    }

    #[test]
    fn failed_apply_poisons() {
        let group = ok_group();
        let err = group.commit(|| Err(Error::Io("short write".into())));
        assert!(matches!(err, Err(Error::Io(_))), "{err:?}");
        let later = group.commit(|| Ok(()));
        assert!(matches!(later, Err(Error::Poisoned)), "{later:?}");
    }

    #[test]
    fn panicking_sync_poisons_instead_of_hanging() {
        let group = Group::new(Box::new(|| panic!("sync exploded")));
        let first = group.commit(|| Ok(()));
        assert!(matches!(first, Err(Error::Poisoned)), "{first:?}");
        let later = group.commit(|| Ok(()));
        assert!(matches!(later, Err(Error::Poisoned)), "{later:?}");
    }

    #[test]
    fn waiters_covered_by_a_failed_sync_are_poisoned() {
        let group = Arc::new(Group::new(Box::new(|| {
            std::thread::sleep(Duration::from_millis(20));
            Err(Error::Io("eio".into()))
        })));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let group = group.clone();
                std::thread::spawn(move || group.commit(|| Ok(())))
            })
            .collect();
        for thread in threads {
            let result = thread.join().map_err(|_| Error::Io("thread panicked".into()));
            assert!(matches!(result, Ok(Err(Error::Poisoned))), "{result:?}");
        }
    }

    #[test]
    fn close_syncs_then_refuses() -> Result<()> {
        let group = ok_group();
        group.commit(|| Ok(()))?;
        group.close()?;
        let later = group.commit(|| Ok(()));
        assert!(matches!(later, Err(Error::Closed)), "{later:?}");
        group.close()?;
        Ok(())
    }

    #[tokio::test]
    async fn futures_share_syncs_and_resolve_once_durable() -> Result<()> {
        let group = Group::new(Box::new(|| {
            std::thread::sleep(Duration::from_millis(5));
            Ok(())
        }));
        let mut waiting = Vec::new();
        for _ in 0..64 {
            waiting.push(group.durable(group.apply(|| Ok(()))?));
        }
        for durable in waiting {
            durable.await?;
        }
        assert_eq!(group.commits(), 64);
        assert!(group.syncs() < 64, "{} syncs for 64 commits", group.syncs());
        // Already durable: resolves without a sync.
        let syncs = group.syncs();
        group.durable(Ticket(64)).await?;
        assert_eq!(group.syncs(), syncs);
        Ok(())
    }

    #[tokio::test]
    async fn futures_waiting_on_a_failed_sync_are_poisoned() -> Result<()> {
        let fail = Arc::new(AtomicBool::new(false));
        let group = {
            let fail = fail.clone();
            Group::new(Box::new(move || match fail.load(Ordering::SeqCst) {
                true => Err(Error::Io("eio".into())),
                false => Ok(()),
            }))
        };
        group.durable(group.apply(|| Ok(()))?).await?;
        fail.store(true, Ordering::SeqCst);
        let err = group.durable(group.apply(|| Ok(()))?).await;
        assert!(matches!(err, Err(Error::Poisoned)), "{err:?}");
        let later = group.apply(|| Ok(()));
        assert!(matches!(later, Err(Error::Poisoned)), "{later:?}");
        // The first commit stays durable; an unissued ticket is refused.
        group.durable(Ticket(1)).await?;
        let bad = group.durable(Ticket(99)).await;
        assert!(matches!(bad, Err(Error::Invalid(_))), "{bad:?}");
        Ok(())
    }
}
