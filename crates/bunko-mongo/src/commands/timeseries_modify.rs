//! `findAndModify` on a time-series collection, as MongoDB 8 allows it: the update and
//! remove forms, `sort`, `new`, `fields`, `upsert`, `hint` and `collation`, answered in
//! the shape of any collection's (`lastErrorObject`, `value`). The measurement is the first
//! that matches the whole filter in the sort's order, read through the part of the filter
//! (and the sort) an index can serve ([`super::timeseries_write::matching`]); it is read
//! again with its revision and changed only if it still matches, else the next is looked
//! for, so a concurrent write is never overwritten. An update must leave a date in the time
//! field (`BadValue`, as MongoDB); `arrayFilters` apply as on any collection.

use std::sync::Arc;

use bson::{Bson, Document, doc};
use bunko_doc::body::ParsedDoc;
use bunko_engine::{Database, Error, WriteOptions};

use super::Ctx;
use super::admin::user;
use super::timeseries_write::{self as write, Change, Modified};
use super::update::{FindAndModify, nothing_modified, upserted};
use crate::error::MongoError;
use crate::query;

/// How many times a measurement that changed between its read and its write is looked for
/// again.
const ATTEMPTS: usize = 8;

pub(super) fn find_and_modify(
    ctx: &mut Ctx,
    db: &Arc<Database>,
    command: &Document,
) -> Result<Document, MongoError> {
    let spec = FindAndModify::parse(ctx, command)?;
    let order = write::stored_order(&super::doc_of(command, "sort")?)?;
    let selector = query::selector(&spec.filter)?;
    let field = write::time_field(db);
    let hint = command.get("hint");
    for _ in 0..ATTEMPTS {
        let found = write::matching(ctx, db, (&spec.filter, hint), &order, 1)?;
        let Some((id, _)) = found.into_iter().next() else { break };
        let Some(update) = &spec.update else {
            if let Some(removed) = remove(ctx, db, &id, &selector)? {
                return Ok(doc! {"lastErrorObject": {"n": 1}, "value": spec.shown(removed)?});
            }
            continue;
        };
        let change = Change { selector: &selector, update, time_field: &field };
        let (before, after) = match write::modify(ctx, db, &id, &change)? {
            Modified::NoLongerMatches => continue,
            Modified::Unchanged(same) => (same.clone(), same),
            Modified::Changed(before, after) => (before, after),
        };
        let value = spec.shown(if spec.return_new { after } else { before })?;
        return Ok(doc! {"lastErrorObject": {"n": 1, "updatedExisting": true}, "value": value});
    }
    match (&spec.update, spec.upsert) {
        (Some(update), true) => {
            let (id, inserted) =
                write::insert_upsert(ctx, db, upserted(&spec.filter, update)?, &field)?;
            let value = match spec.return_new {
                true => Bson::Document(spec.shown(inserted)?),
                false => Bson::Null,
            };
            let last = doc! {"n": 1, "updatedExisting": false, "upserted": id};
            Ok(doc! {"lastErrorObject": last, "value": value})
        }
        (Some(_), false) => Ok(nothing_modified()),
        (None, _) => Ok(doc! {"lastErrorObject": {"n": 0}, "value": Bson::Null}),
    }
}

/// Deletes the measurement stored under `id` if it still matches: the measurement.
fn remove(
    ctx: &Ctx,
    db: &Arc<Database>,
    id: &str,
    selector: &bunko_query::Selector,
) -> Result<Option<Document>, MongoError> {
    let Some((rev, now)) = write::current(ctx, db, id)? else { return Ok(None) };
    if !query::matches(selector, &now) {
        return Ok(None);
    }
    let tombstone =
        ParsedDoc { id: Some(id.to_string()), rev: Some(rev), deleted: true, ..Default::default() };
    match ctx.session.unsynced.put(db, &user(ctx), tombstone, WriteOptions::default()) {
        Ok(_) => Ok(Some(now)),
        Err(Error::Conflict) => Ok(None),
        Err(err) => Err(err.into()),
    }
}
