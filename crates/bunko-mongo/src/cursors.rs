//! The cursor registry: the rest of a `find`'s answer waiting for `getMore`, per cursor id,
//! owned by the user who opened it, dropped by `killCursors`, when exhausted, or after
//! the idle timeout (swept on every use of the registry).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bson::Document;
use bunko_engine::security::UserCtx;
use parking_lot::Mutex;
use rand::Rng;

use crate::error::MongoError;

/// An open cursor.
pub struct Cursor {
    pub ns: String,
    pub owner: Option<UserCtx>,
    pub docs: VecDeque<Document>,
    last_used: Instant,
}

pub struct Cursors {
    open: Mutex<HashMap<i64, Cursor>>,
    timeout: Duration,
}

impl Cursors {
    pub fn new(timeout: Duration) -> Cursors {
        Cursors { open: Mutex::new(HashMap::new()), timeout }
    }

    /// Keeps `docs` for later batches; returns the new cursor id (never 0).
    pub fn open(&self, ns: String, owner: Option<UserCtx>, docs: VecDeque<Document>) -> i64 {
        let mut open = self.open.lock();
        self.sweep(&mut open);
        let id = loop {
            let id = rand::rng().random_range(1..i64::MAX);
            if !open.contains_key(&id) {
                break id;
            }
        };
        open.insert(id, Cursor { ns, owner, docs, last_used: Instant::now() });
        id
    }

    /// Takes the next batch of `id`: (namespace, documents, whether the cursor is still
    /// open).
    pub fn next(
        &self,
        id: i64,
        user: Option<&UserCtx>,
        take: impl FnOnce(&mut VecDeque<Document>) -> Vec<Document>,
    ) -> Result<(String, Vec<Document>, bool), MongoError> {
        let mut open = self.open.lock();
        self.sweep(&mut open);
        let cursor = open.get_mut(&id).ok_or_else(|| MongoError::cursor_not_found(id))?;
        if cursor.owner.as_ref() != user {
            return Err(MongoError::unauthorized(format!(
                "cursor id {id} was not created by the authenticated user"
            )));
        }
        cursor.last_used = Instant::now();
        let batch = take(&mut cursor.docs);
        let ns = cursor.ns.clone();
        let alive = !cursor.docs.is_empty();
        if !alive {
            open.remove(&id);
        }
        Ok((ns, batch, alive))
    }

    /// Removes `id`; whether it existed (and belonged to `user`).
    pub fn kill(&self, id: i64, user: Option<&UserCtx>) -> bool {
        let mut open = self.open.lock();
        self.sweep(&mut open);
        match open.get(&id) {
            Some(cursor) if cursor.owner.as_ref() == user => open.remove(&id).is_some(),
            _ => false,
        }
    }

    fn sweep(&self, open: &mut HashMap<i64, Cursor>) {
        let timeout = self.timeout;
        open.retain(|_, c| c.last_used.elapsed() < timeout);
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn cursors_page_expire_and_belong_to_their_user() -> Result<(), MongoError> {
        let cursors = Cursors::new(Duration::from_secs(600));
        let alice = Some(UserCtx::admin("alice"));
        let docs: VecDeque<Document> = (0..3).map(|i| doc! {"i": i}).collect();
        let id = cursors.open("d.c".into(), alice.clone(), docs);
        assert!(cursors.next(id, None, |d| d.drain(..1).collect()).is_err());
        let (_, batch, alive) = cursors.next(id, alice.as_ref(), |d| d.drain(..2).collect())?;
        assert_eq!((batch.len(), alive), (2, true));
        let (_, batch, alive) = cursors.next(id, alice.as_ref(), |d| d.drain(..).collect())?;
        assert_eq!((batch.len(), alive), (1, false));
        assert_eq!(
            cursors.next(id, alice.as_ref(), |d| d.drain(..).collect()).err().map(|e| e.code),
            Some(43)
        );

        let expiring = Cursors::new(Duration::ZERO);
        let id = expiring.open("d.c".into(), None, VecDeque::from([doc! {}]));
        assert!(!expiring.kill(id, None));
        Ok(())
    }
}
