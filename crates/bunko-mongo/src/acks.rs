//! Acknowledged means durable, without a thread waiting for the disk. A command's
//! document writes are staged and applied on its blocking thread ([`Unsynced::write`],
//! [`Unsynced::put`]); the sync each one waits for is kept in its connection's
//! [`Unsynced`], and `conn` awaits them all on the runtime ([`Unsynced::settle`]) before it
//! answers the command (or, for a `w: 0` message, before it reads the next one), as the
//! HTTP API awaits `Written::durable`. Group commit syncs in apply order, so one sync
//! usually covers every write of a command.
//!
//! A sync that fails turns the command's answer into that error, and the store refuses
//! every later write, as when the sync was waited for on the blocking thread. Writes whose
//! answer is kept for others to read before the sync ends (a retryable write's reply)
//! are made durable by whoever reads it ([`bunko_engine::Engine::sync_applied`]).

use std::sync::Arc;

use bunko_doc::body::ParsedDoc;
use bunko_doc::rev::RevId;
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, DocResult, Durability, Error, Result, WriteOptions};
use parking_lot::Mutex;

/// The syncs a connection's current command waits for.
#[derive(Default)]
pub(crate) struct Unsynced(Mutex<Vec<Durability>>);

impl Unsynced {
    /// `Database::update_docs` up to the apply: the results, with the sync kept here.
    pub fn write(
        &self,
        db: &Arc<Database>,
        user: &UserCtx,
        docs: Vec<ParsedDoc>,
        opts: WriteOptions,
    ) -> Result<Vec<DocResult>> {
        let (results, durability) = db.write_docs(user, docs, opts)?.split();
        self.0.lock().push(durability);
        Ok(results)
    }

    /// `Database::put` up to the apply: the new revision, with the sync kept here.
    pub fn put(
        &self,
        db: &Arc<Database>,
        user: &UserCtx,
        doc: ParsedDoc,
        opts: WriteOptions,
    ) -> Result<RevId> {
        match self.write(db, user, vec![doc], opts)?.pop() {
            Some(result) => result.result,
            None => Err(Error::Corrupt("no result for a single write".to_string())),
        }
    }

    /// Waits for every kept sync; the first failure, if any.
    pub async fn settle(&mut self) -> Result<()> {
        let waiting = std::mem::take(self.0.get_mut());
        let mut outcome = Ok(());
        for durability in waiting {
            let waited = durability.wait().await;
            if outcome.is_ok() {
                outcome = waited;
            }
        }
        outcome
    }
}
