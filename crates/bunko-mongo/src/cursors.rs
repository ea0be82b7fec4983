//! The cursor registry: open cursors by id, each owned by the user who opened it, dropped by
//! `killCursors`, when exhausted, or after the idle timeout (swept on every use of the
//! registry). The registry is generic over a cursor's state; a `find` cursor is its
//! next-batch function: an unsorted `find` resumes its scan from
//! where the last batch stopped (so memory does not grow with the result), a sorted one hands
//! out the rest of its sorted answer. A batch is computed outside the registry's lock.
//!
//! A cursor opened by a command with a `maxTimeMS` (its reads ran under a
//! `bunko_engine::deadline`) keeps what is left of that time: as in MongoDB, the limit is
//! on the cursor's whole processing time, the `find`/`aggregate` and every `getMore` on a
//! [`Next`] cursor together, while the time it waits between them does not count. A
//! `getMore` past it is `MaxTimeMSExpired` (50) and ends the cursor.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bson::Document;
use bunko_engine::security::UserCtx;
use parking_lot::Mutex;
use rand::Rng;

use crate::error::MongoError;

/// Produces the next batch of at most the given number of documents (`0`: the default
/// size) and whether more may follow.
pub type Next = Box<dyn FnMut(usize) -> Result<(Vec<Document>, bool), MongoError> + Send>;

struct Cursor<T> {
    ns: String,
    owner: Option<UserCtx>,
    state: T,
    last_used: Instant,
    /// What is left of the opening command's `maxTimeMS`.
    time_left: Option<Duration>,
}

/// Open cursors whose state is `T`: a `find`'s [`Next`], or a change stream.
pub struct Cursors<T = Next> {
    open: Mutex<HashMap<i64, Cursor<T>>>,
    timeout: Duration,
}

impl<T> Cursors<T> {
    pub fn new(timeout: Duration) -> Cursors<T> {
        Cursors { open: Mutex::new(HashMap::new()), timeout }
    }

    /// Registers a cursor; returns its id (never 0).
    pub fn open(&self, ns: String, owner: Option<UserCtx>, state: T) -> i64 {
        let mut open = self.open.lock();
        self.sweep(&mut open);
        let id = loop {
            let id = rand::rng().random_range(1..i64::MAX);
            if !open.contains_key(&id) {
                break id;
            }
        };
        let now = Instant::now();
        let time_left = bunko_engine::deadline::current().map(|d| d.saturating_duration_since(now));
        open.insert(id, Cursor { ns, owner, state, last_used: now, time_left });
        id
    }

    /// Files cursor `id` under the namespace `ns` (a view's cursor reads its collection).
    pub fn rename(&self, id: i64, ns: String) {
        if let Some(cursor) = self.open.lock().get_mut(&id) {
            cursor.ns = ns;
        }
    }

    /// Whether `id` is open here.
    pub fn owns(&self, id: i64) -> bool {
        self.open.lock().contains_key(&id)
    }

    /// Runs `step` on cursor `id` (for `user` on namespace `ns`) outside the lock; the
    /// cursor stays open if `step` says so (its second value).
    pub fn step<R>(
        &self,
        id: i64,
        user: Option<&UserCtx>,
        ns: &str,
        step: impl FnOnce(&mut T) -> Result<(R, bool), MongoError>,
    ) -> Result<(R, bool), MongoError> {
        self.step_checked(id, user, ns, |_| Ok(()), step)
    }

    /// [`Cursors::step`] after `check`, which sees the cursor before it is taken out: a
    /// cursor that fails it stays open (as after a wrong user or namespace), like MongoDB's
    /// checks made while pinning a cursor.
    pub fn step_checked<R>(
        &self,
        id: i64,
        user: Option<&UserCtx>,
        ns: &str,
        check: impl FnOnce(&T) -> Result<(), MongoError>,
        step: impl FnOnce(&mut T) -> Result<(R, bool), MongoError>,
    ) -> Result<(R, bool), MongoError> {
        self.take(id, user, ns, check, |cursor| step(&mut cursor.state))
    }

    /// Takes cursor `id` out (after the checks of [`Cursors::step_checked`]), runs `step`
    /// on it outside the lock, and puts it back if `step` says it stays open.
    fn take<R>(
        &self,
        id: i64,
        user: Option<&UserCtx>,
        ns: &str,
        check: impl FnOnce(&T) -> Result<(), MongoError>,
        step: impl FnOnce(&mut Cursor<T>) -> Result<(R, bool), MongoError>,
    ) -> Result<(R, bool), MongoError> {
        let mut cursor = {
            let mut open = self.open.lock();
            self.sweep(&mut open);
            let cursor = open.get(&id).ok_or_else(|| MongoError::cursor_not_found(id))?;
            if !same_user(cursor.owner.as_ref(), user) {
                return Err(MongoError::unauthorized(format!(
                    "cursor id {id} was not created by the authenticated user"
                )));
            }
            if cursor.ns != ns {
                return Err(MongoError::unauthorized(format!(
                    "Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}",
                    cursor.ns
                )));
            }
            check(&cursor.state)?;
            open.remove(&id).ok_or_else(|| MongoError::cursor_not_found(id))?
        };
        let (out, alive) = step(&mut cursor)?;
        if alive {
            cursor.last_used = Instant::now();
            self.open.lock().insert(id, cursor);
        }
        Ok((out, alive))
    }

    /// Removes `id`; whether it existed (and belonged to `user`).
    pub fn kill(&self, id: i64, user: Option<&UserCtx>) -> bool {
        let mut open = self.open.lock();
        self.sweep(&mut open);
        match open.get(&id) {
            Some(cursor) if same_user(cursor.owner.as_ref(), user) => open.remove(&id).is_some(),
            _ => false,
        }
    }

    fn sweep(&self, open: &mut HashMap<i64, Cursor<T>>) {
        let timeout = self.timeout;
        open.retain(|_, c| c.last_used.elapsed() < timeout);
    }
}

impl Cursors<Next> {
    /// The next batch of cursor `id` (for `user` on namespace `ns`, after `check`): the
    /// documents and whether the cursor is still open. A cursor with a time limit reads
    /// under what is left of it (none when `expired()`, MongoDB's `maxTimeAlwaysTimeOut`
    /// fail point); past it the cursor ends with `MaxTimeMSExpired`.
    pub fn next(
        &self,
        id: i64,
        user: Option<&UserCtx>,
        ns: &str,
        size: usize,
        check: impl FnOnce(&Next) -> Result<(), MongoError>,
        expired: impl FnOnce() -> bool,
    ) -> Result<(Vec<Document>, bool), MongoError> {
        self.take(id, user, ns, check, |cursor| {
            let Some(left) = cursor.time_left else { return (cursor.state)(size) };
            let start = Instant::now();
            let left = if expired() { Duration::ZERO } else { left };
            let batch = bunko_engine::deadline::with(Some(start + left), || (cursor.state)(size))?;
            let spent = start.elapsed();
            if spent >= left {
                return Err(MongoError::new(
                    50,
                    "MaxTimeMSExpired",
                    "operation exceeded time limit",
                ));
            }
            cursor.time_left = Some(left - spent);
            Ok(batch)
        })
    }
}

/// Whether a cursor's owner is the user asking: the same name (their roles may have
/// changed since, when `_users` changed: see `auth::refresh`).
fn same_user(owner: Option<&UserCtx>, user: Option<&UserCtx>) -> bool {
    owner.map(|u| &u.name) == user.map(|u| &u.name)
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;

    use bson::doc;

    use super::*;

    fn buffered(docs: Vec<Document>) -> Next {
        let mut docs: VecDeque<Document> = docs.into();
        Box::new(move |n| {
            let batch: Vec<Document> = docs.drain(..n.min(docs.len())).collect();
            Ok((batch, !docs.is_empty()))
        })
    }

    #[test]
    fn cursors_page_expire_and_belong_to_their_user() -> Result<(), MongoError> {
        let cursors = Cursors::new(Duration::from_secs(600));
        let alice = Some(UserCtx::admin("alice"));
        let id = cursors.open(
            "d.c".into(),
            alice.clone(),
            buffered((0..3).map(|i| doc! {"i": i}).collect()),
        );
        assert_eq!(
            cursors.next(id, None, "d.c", 1, |_| Ok(()), || false).err().map(|e| e.code),
            Some(13)
        );
        assert_eq!(
            cursors.next(id, alice.as_ref(), "d.x", 1, |_| Ok(()), || false).err().map(|e| e.code),
            Some(13)
        );
        // A failed check leaves the cursor open where it was.
        let refuse = |_: &Next| Err(MongoError::bad_value("no"));
        assert_eq!(
            cursors.next(id, alice.as_ref(), "d.c", 1, refuse, || false).err().map(|e| e.code),
            Some(2)
        );
        let (batch, more) = cursors.next(id, alice.as_ref(), "d.c", 2, |_| Ok(()), || false)?;
        assert_eq!((batch.len(), more), (2, true));
        let (batch, more) = cursors.next(id, alice.as_ref(), "d.c", 5, |_| Ok(()), || false)?;
        assert_eq!((batch.len(), more), (1, false));
        assert_eq!(
            cursors.next(id, alice.as_ref(), "d.c", 1, |_| Ok(()), || false).err().map(|e| e.code),
            Some(43)
        );

        let expiring = Cursors::new(Duration::ZERO);
        let id = expiring.open("d.c".into(), None, buffered(vec![doc! {}]));
        assert!(!expiring.kill(id, None));
        Ok(())
    }

    #[test]
    fn a_cursor_keeps_what_is_left_of_its_time_limit() -> Result<(), MongoError> {
        let cursors = Cursors::new(Duration::from_secs(600));
        let docs = || buffered((0..10).map(|i| doc! {"i": i}).collect());
        let within = |ms| Some(Instant::now() + Duration::from_millis(ms));
        let id =
            bunko_engine::deadline::with(within(400), || cursors.open("d.c".into(), None, docs()));
        // Time between batches does not count.
        std::thread::sleep(Duration::from_millis(500));
        let (batch, more) = cursors.next(id, None, "d.c", 2, |_| Ok(()), || false)?;
        assert_eq!((batch.len(), more), (2, true));
        // Expired (the fail point): MaxTimeMSExpired, and the cursor is gone.
        let code = |r: Result<(Vec<Document>, bool), MongoError>| r.err().map(|e| e.code);
        assert_eq!(code(cursors.next(id, None, "d.c", 2, |_| Ok(()), || true)), Some(50));
        assert_eq!(code(cursors.next(id, None, "d.c", 2, |_| Ok(()), || false)), Some(43));
        // A batch that takes longer than what is left.
        let slow: Next = Box::new(|_| {
            std::thread::sleep(Duration::from_millis(60));
            Ok((Vec::new(), true))
        });
        let id =
            bunko_engine::deadline::with(within(30), || cursors.open("d.c".into(), None, slow));
        assert_eq!(code(cursors.next(id, None, "d.c", 2, |_| Ok(()), || false)), Some(50));
        // Opened without a limit: none, whatever the fail point says.
        let id = cursors.open("d.c".into(), None, docs());
        let (batch, _) = cursors.next(id, None, "d.c", 2, |_| Ok(()), || true)?;
        assert_eq!(batch.len(), 2);
        Ok(())
    }
}
