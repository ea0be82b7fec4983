//! `hint` inside a transaction. A transaction reads its collection document by document
//! (its snapshot and its own writes, `in_txn::matching`), so a hint picks no scan there;
//! it is applied to the answer as the hinted index would give it: an index that does not
//! exist is MongoDB's `BadValue` (2, as outside transactions), a sparse or partial index
//! yields only the documents it holds, and an unsorted answer comes in the index's key
//! order (ascending, each document at its smallest key, then by id), as an index scan
//! returns it. A hashed or collated index keeps the documents' order (their keys are
//! hashes and sort keys); `{$natural: 1}` keeps it too.

use bson::Document;
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_query::{Direction, FieldPath};
use serde_json::Value;

use super::in_txn::Found;
use crate::error::MongoError;
use crate::query;

/// The documents of `found` (all matches of `filter`, sorted by `order` if given) as the
/// index `hint` names gives them.
pub(super) fn apply(
    db: &Database,
    filter: &Document,
    hint: &str,
    order: &[(FieldPath, Direction)],
    found: Vec<Found>,
) -> Result<Vec<Found>, MongoError> {
    let selector = query::selector(filter)?;
    let Some(scan) = db.mongo_plan(&selector, Some(hint))? else { return Ok(found) };
    let index = &scan.index;
    let held = |f: &Found| {
        let doc = Value::Object(ejson::to_json(&f.doc));
        !index.compiled.entries(db.id(), index.num(), &f.id, &doc).is_empty()
    };
    let mut kept: Vec<Found> = found.into_iter().filter(held).collect();
    let Some(spec) = &index.def.mongo else { return Ok(kept) };
    if !order.is_empty() || spec.hashed.is_some() || spec.collation.is_some() {
        return Ok(kept);
    }
    let direction = |d: i32| if d < 0 { Direction::Desc } else { Direction::Asc };
    let key: Vec<(FieldPath, Direction)> = (index.compiled.paths().iter())
        .zip(&spec.key)
        .map(|(p, (_, d))| (p.clone(), direction(*d)))
        .collect();
    let view = |f: &Found| Value::Object(ejson::to_json(&f.doc));
    let mut keyed: Vec<(Value, Found)> = kept.drain(..).map(|f| (view(&f), f)).collect();
    keyed.sort_by(|a, b| {
        let by_key = bunko_engine::find::mongo::compare(&key, &a.0, &b.0);
        by_key.then_with(|| a.1.id.cmp(&b.1.id))
    });
    Ok(keyed.into_iter().map(|(_, f)| f).collect())
}
