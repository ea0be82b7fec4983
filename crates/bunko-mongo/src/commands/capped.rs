//! Capped collections (`create` with `capped: true, size, max`) and tailable cursors on them.
//!
//! - **Options**: `capped`, `size` (rounded as MongoDB rounds it: at least 4096, else up to a
//!   multiple of 256) and `max` are the collection's options ([`super::coll_options`]), set by
//!   `create` only; `listCollections` and `collStats` report them.
//! - **Natural order, updates, capping** are the engine's ([`bunko_engine::capped`]): it
//!   keeps each document's place in insertion order from the commit that inserts it (an
//!   update leaves it there, as MongoDB 6.0+ allows any update of a capped document), and
//!   every commit that inserts (MongoDB `insert` and upserts, HTTP `PUT`/`POST`/`_bulk_docs`
//!   alike) removes the oldest documents past `max`/`size` in the same commit. This module
//!   reads that order ([`Scan`]: `find` without a sort or by `$natural`).
//! - **Tailable cursors** (`find` with `tailable`, and `awaitData`) hold a position (the
//!   place in insertion order of the last document returned) and stay open at the end of the
//!   collection; a `getMore` reads what was inserted since. With `awaitData` a `getMore` that
//!   finds nothing waits (up to `maxTimeMS`, 1 s by default) for a commit to the collection
//!   (the engine's notification the `_changes` longpoll waits on, `Database::subscribe`),
//!   without holding a thread. A cursor whose last document was removed meanwhile is dead:
//!   `CappedPositionLost` (136).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::capped::Cap;
use bunko_engine::changes::ChangesQuery;
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, Error};
use bunko_query::Selector;

use super::change_stream::registry::{Wait, Wake};
use super::crud::take_batch;
use super::{Ctx, cursor_reply, int_of};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::projection::Projection;

/// The limits of `db` if it is a capped collection (the engine reads them from the
/// options, and enforces them).
pub(crate) fn of(db: &Database) -> Option<Cap> {
    db.cap().ok().flatten()
}

fn number(value: &Bson) -> Option<f64> {
    match value {
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// `create`'s `capped`, `size` and `max`, checked as MongoDB checks them: the options to
/// store (`{capped: true, size, max}`, `size` rounded), or none for a collection that is not
/// capped.
pub(crate) fn options(command: &Document) -> Result<Document, MongoError> {
    let field = |name: &str| {
        match command.get(name) {
        None | Some(Bson::Null) => Ok(None),
        Some(value) => number(value).map(Some).ok_or_else(|| {
            MongoError::type_mismatch(format!(
                "BSON field 'create.{name}' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                super::type_of(Some(value))
            ))
        }),
    }
    };
    let capped = match command.get("capped") {
        None | Some(Bson::Null) => false,
        Some(Bson::Boolean(b)) => *b,
        Some(_) => field("capped")?.is_some_and(|n| n != 0.0),
    };
    let (size, max) = (field("size")?, field("max")?);
    if let Some(size) = size.filter(|s| *s < 1.0) {
        return Err(MongoError::new(
            51024,
            "Location51024",
            format!("BSON field 'size' value must be >= 1, actual value '{size}'"),
        ));
    }
    if capped && size.is_none() {
        return Err(invalid_options("the 'size' field is required when 'capped' is true"));
    }
    if !capped && (size.is_some() || max.is_some()) {
        return Err(invalid_options(
            "the 'capped' field needs to be true when either the 'size' or 'max' fields are present",
        ));
    }
    let Some(size) = size else { return Ok(Document::new()) };
    let size = size.ceil() as i64;
    let rounded = if size <= 4096 { 4096 } else { (size + 255) / 256 * 256 };
    let mut out = doc! {"capped": true, "size": int(rounded)};
    if let Some(max) = max {
        out.insert("max", int(max as i64));
    }
    Ok(out)
}

/// The largest `cappedSize` `collMod` takes: 1 PB (1024^5 bytes).
const MAX_CAPPED_SIZE: f64 = 1_125_899_906_842_624.0;

/// `collMod`'s `cappedSize` and `cappedMax` (MongoDB 6.0+): the new `size` and `max` of a
/// capped collection (none when the command names neither). They are not rounded, as
/// MongoDB keeps them; the next insert removes what the new limits leave over.
pub(crate) fn resize(db: &Database, command: &Document) -> Result<Document, MongoError> {
    let limit = |name: &str| {
        command.get(name).filter(|v| !matches!(v, Bson::Null)).map(|value| {
            number(value).ok_or_else(|| {
                MongoError::type_mismatch(format!(
                    "BSON field 'collMod.{name}' is the wrong type '{}', expected types '[long, int, decimal, double]'",
                    super::type_of(Some(value))
                ))
            })
        })
    };
    let (size, max) = (limit("cappedSize").transpose()?, limit("cappedMax").transpose()?);
    if size.is_none() && max.is_none() {
        return Ok(Document::new());
    }
    if of(db).is_none() {
        return Err(invalid_options(
            "Cannot set cappedSize or cappedMax on a non-capped collection",
        ));
    }
    let mut out = Document::new();
    if let Some(size) = size {
        if !(size > 0.0 && size <= MAX_CAPPED_SIZE) {
            return Err(invalid_options(&format!(
                "cappedSize must be greater than 0 and less than or equal to 1 PB, actual value '{size}'"
            )));
        }
        out.insert("size", int(size.ceil() as i64));
    }
    if let Some(max) = max {
        out.insert("max", int(max as i64));
    }
    Ok(out)
}

fn int(n: i64) -> Bson {
    i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32)
}

fn invalid_options(msg: &str) -> MongoError {
    MongoError::new(72, "InvalidOptions", msg)
}

/// `collStats`' capped fields.
pub(crate) fn stats(db: &Database, reply: &mut Document) {
    let Some(cap) = of(db) else { return };
    reply.insert("capped", true);
    reply.insert("maxSize", int(i64::try_from(cap.size).unwrap_or(i64::MAX)));
    if let Some(max) = cap.max {
        reply.insert("max", int(i64::try_from(max).unwrap_or(i64::MAX)));
    }
}

/// Refuses writes to a capped collection inside a transaction, as MongoDB does.
pub(crate) fn refuse_in_txn(db: &Database, ns: &Namespace) -> Result<(), MongoError> {
    match of(db) {
        Some(_) => Err(MongoError::new(
            263,
            "OperationNotSupportedInTransaction",
            format!(
                "Collection '{}' is a capped collection. Writes in transactions are not allowed on capped collections.",
                ns.full()
            ),
        )),
        None => Ok(()),
    }
}

/// A `find` on a capped collection in natural order: unsorted, `{$natural: 1}` or
/// `{$natural: -1}` (not tailable).
pub(crate) struct Scan {
    user: UserCtx,
    db: Arc<Database>,
    selector: Selector,
    projection: Option<Projection>,
    skip: usize,
    /// Documents still to return (the `limit` left).
    remaining: usize,
    descending: bool,
    /// The position and id of the last document read (the cursor's position): its place
    /// in the engine's insertion order ([`Database::natural_page`]), or for a collection
    /// that is not capped its `_changes` sequence number.
    last: Option<(u64, String)>,
    /// Whether the collection is capped (else it is read in `_changes` order).
    capped: bool,
    /// Reading past the end waits for more (a tailable cursor).
    pub tailable: bool,
    pub await_data: bool,
    buffer: VecDeque<Document>,
    done: bool,
}

/// What `find` asked of a natural-order read.
pub(crate) struct Request {
    pub selector: Selector,
    pub projection: Option<Projection>,
    pub skip: usize,
    pub limit: usize,
    pub descending: bool,
    pub tailable: bool,
    pub await_data: bool,
}

impl Scan {
    pub(crate) fn new(user: UserCtx, db: Arc<Database>, request: Request) -> Scan {
        Scan {
            capped: of(&db).is_some(),
            user,
            db,
            selector: request.selector,
            projection: request.projection,
            skip: request.skip,
            remaining: request.limit,
            descending: request.descending,
            last: None,
            tailable: request.tailable,
            await_data: request.await_data,
            buffer: VecDeque::new(),
            done: false,
        }
    }

    /// The next batch (`size` documents, 0: as many as fit in 16 MiB) and whether the cursor
    /// stays open. A tailable cursor stays open at the end of the collection.
    pub(crate) fn next(&mut self, size: usize) -> Result<(Vec<Document>, bool), MongoError> {
        self.check_position()?;
        let want = if size == 0 { 1000 } else { size };
        while self.buffer.len() < want && !self.done && self.remaining > 0 {
            self.read(want - self.buffer.len())?;
        }
        let batch = take_batch(&mut self.buffer, size);
        let more = !self.buffer.is_empty() || (!self.done && self.remaining > 0);
        let alive = more || (self.tailable && self.remaining > 0);
        // A tailable cursor reads again from its position next time.
        self.done &= !self.tailable;
        Ok((batch, alive))
    }

    /// Reads up to `want` more matching documents after the position.
    fn read(&mut self, want: usize) -> Result<(), MongoError> {
        let page = want.max(64);
        let after = self.last.as_ref().map(|(n, _)| *n);
        let rows = match self.capped {
            true => self.db.natural_page(after, self.descending, page)?,
            false => self.changes_page(after, page)?,
        };
        for (n, id) in &rows {
            self.last = Some((*n, id.clone()));
            if let Some(found) = self.matching(id)? {
                let found = match &self.projection {
                    Some(p) => p.apply(&found)?,
                    None => found,
                };
                self.buffer.push_back(found);
                self.remaining -= 1;
                if self.remaining == 0 {
                    break;
                }
            }
        }
        let all_at_once = !self.capped && self.descending;
        self.done = all_at_once || rows.len() < page || self.remaining == 0;
        Ok(())
    }

    /// The `_changes` order of a collection that is not capped (a `cloneCollectionAsCapped`
    /// source): a page after `since` (descending: all of it at once, newest first).
    fn changes_page(
        &self,
        since: Option<u64>,
        page: usize,
    ) -> Result<Vec<(u64, String)>, MongoError> {
        let query = ChangesQuery {
            since: since.unwrap_or(0),
            descending: self.descending,
            limit: (!self.descending).then_some(page as u64),
            ..Default::default()
        };
        let mut rows = Vec::new();
        for row in self.db.changes(&self.user, query)? {
            let row = row?;
            rows.push((row.seq, row.id));
        }
        Ok(rows)
    }

    /// Document `id`, if it is one the query returns (before its projection).
    fn matching(&mut self, id: &str) -> Result<Option<Document>, MongoError> {
        if id.starts_with("_design/") {
            return Ok(None);
        }
        let found = match self.db.get(&self.user, id, None) {
            Ok(found) if !found.deleted => found,
            Ok(_) | Err(Error::NotFound(_)) => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        let Ok(body) = serde_json::from_slice::<serde_json::Map<_, _>>(&found.body) else {
            return Ok(None);
        };
        let mut doc = doc! {"_id": ejson::id_value(id)};
        doc.extend(ejson::from_json(&body));
        if !super::update::matches(&self.selector, &doc) {
            return Ok(None);
        }
        if self.skip > 0 {
            self.skip -= 1;
            return Ok(None);
        }
        Ok(Some(doc))
    }

    /// A tailable cursor whose last document was removed since is dead (an update leaves
    /// the document at its place).
    fn check_position(&self) -> Result<(), MongoError> {
        let Some((n, id)) = self.last.as_ref().filter(|_| self.tailable) else { return Ok(()) };
        if self.db.natural_holds(*n, id)? {
            return Ok(());
        }
        Err(MongoError::new(
            136,
            "CappedPositionLost",
            format!(
                "CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId({n})"
            ),
        ))
    }
}

/// Opens the cursor of a natural-order `find` and answers its first batch.
pub(crate) fn open(
    ctx: &Ctx,
    ns: &Namespace,
    mut scan: Scan,
    batch: usize,
    single: bool,
) -> Result<Document, MongoError> {
    let (first, alive) = match batch {
        0 if !scan.tailable => (Vec::new(), true),
        n => scan.next(n)?,
    };
    let id = match (alive && !single, scan.tailable) {
        (false, _) => 0,
        (true, true) => ctx.server.tails.open(ns.full(), ctx.session.user.clone(), scan),
        (true, false) => {
            let next = Box::new(move |n| scan.next(n));
            ctx.server.cursors.open(ns.full(), ctx.session.user.clone(), next)
        }
    };
    Ok(cursor_reply(id, &ns.full(), "firstBatch", first))
}

/// `getMore` on a tailable cursor: what was inserted since its last batch, or (nothing yet,
/// `awaitData`, time left) a request to wait for a commit to the collection and run again.
pub(crate) fn get_more(
    ctx: &mut Ctx,
    id: i64,
    ns: &str,
    command: &Document,
) -> Result<Document, MongoError> {
    let size = int_of(command, "batchSize")?.map_or(0, |n| usize::try_from(n).unwrap_or(0));
    let user = ctx.session.user.clone();
    let check = |scan: &Scan| super::cursor::awaits_data(command, scan.await_data);
    let step = ctx.server.tails.step_checked(id, user.as_ref(), ns, check, |scan| {
        // Subscribed before reading, so that a commit right after the read wakes the wait.
        let wake = scan.await_data.then(|| scan.db.subscribe());
        let (batch, alive) = scan.next(size)?;
        Ok(((batch, wake), alive))
    })?;
    let ((batch, wake), alive) = step;
    if let (true, true, Some(receiver)) = (batch.is_empty(), alive, wake) {
        let until = super::change_stream::registry::deadline(ctx, command)?;
        if Instant::now() < until {
            let wake = Wake { receivers: vec![receiver], poll: false };
            ctx.session.wait = Some(Wait { wake, until });
            return Ok(Document::new());
        }
    }
    ctx.session.await_until = None;
    Ok(cursor_reply(if alive { id } else { 0 }, ns, "nextBatch", batch))
}

/// Open tailable cursors, in the same registry type as `find` cursors.
pub(crate) type Tails = crate::cursors::Cursors<Scan>;

#[cfg(test)]
mod tests {
    use super::*;

    /// `create`'s capped options: MongoDB's rounding and its errors.
    #[test]
    fn create_options_are_checked_and_rounded() {
        let code = |command: Document| options(&command).err().map(|e| e.code);
        assert_eq!(
            options(&doc! {"create": "c", "capped": true, "size": 1000}).ok(),
            Some(doc! {"capped": true, "size": 4096})
        );
        assert_eq!(
            options(&doc! {"create": "c", "capped": true, "size": 5000, "max": 3}).ok(),
            Some(doc! {"capped": true, "size": 5120, "max": 3})
        );
        assert_eq!(options(&doc! {"create": "c"}).ok(), Some(Document::new()));
        assert_eq!(code(doc! {"create": "c", "capped": true}), Some(72));
        assert_eq!(code(doc! {"create": "c", "capped": true, "max": 5}), Some(72));
        assert_eq!(code(doc! {"create": "c", "size": 5000}), Some(72));
        assert_eq!(code(doc! {"create": "c", "capped": true, "size": 0}), Some(51024));
        assert_eq!(code(doc! {"create": "c", "capped": true, "size": "x"}), Some(14));
    }
}
