//! `find` by `_id` alone (`find_one({_id: x})`, the commonest read): one point read of the
//! document through the engine's `get`, after the same read check as every `find`,
//! without planning, matching or a cursor, as MongoDB's `IDHACK` does.
//!
//! Taken only when nothing else could change the answer: the filter is exactly `{_id: v}`
//! with `v` a string, an ObjectId or binary data (values whose document id is one-to-one,
//! unlike numbers, which equal across types, or documents, which may hold operators), and
//! the command has no sort, skip, hint, collation, `min`/`max`, tailable or snapshot read.
//! Any other `find` takes the general path (`super::crud::find`).
//!
//! Without a projection, the document is written as BSON straight from its stored JSON
//! text (`ejson::raw::document`) when the connection encodes the reply itself
//! ([`RawBatch`]): the reply carries an empty `firstBatch` and the batch rides beside it,
//! to be put in its place as the reply is framed. Elsewhere (and for the rare document the
//! writer leaves to it) the stored body is parsed and converted as for every `find`.

use bson::{Bson, Document, RawArrayBuf, doc};
use bunko_doc::ejson;
use bunko_engine::Error;
use serde_json::{Map, Value};

use super::crud::readable_db;
use super::{Ctx, cursor_reply, namespace};
use crate::error::MongoError;
use crate::projection::Projection;

/// Fields of a `find` that the point read honours (or that do not change its answer).
const PLAIN: &[&str] = &[
    "find",
    "filter",
    "projection",
    "limit",
    "batchSize",
    "singleBatch",
    "readConcern",
    "allowDiskUse",
    "$db",
    "lsid",
    "$clusterTime",
    "$readPreference",
    "maxTimeMS",
    "comment",
];

/// The reply of a `find` by `_id`, or `None` when the command needs the general path.
pub(super) fn find(ctx: &mut Ctx, command: &Document) -> Result<Option<Document>, MongoError> {
    let Some(id) = plain_id(command) else { return Ok(None) };
    let ns = namespace(ctx, command)?;
    let projection = match command.get("projection") {
        None | Some(Bson::Null) => None,
        Some(Bson::Document(spec)) => {
            Projection::parse_sorted(spec, &doc! {"_id": id.clone()}, &[])?
        }
        Some(_) => return Ok(None),
    };
    let Some(db) = readable_db(ctx, &ns, "find")? else {
        return Ok(Some(cursor_reply(0, &ns.full(), "firstBatch", Vec::new())));
    };
    db.id_accesses.record();
    let found = match db.get(&super::admin::user(ctx), &ejson::doc_id(id), None) {
        Ok(doc) if projection.is_none() && ctx.session.raw_batch.wanted() => {
            match ejson::raw::document(&ejson::id_value(&doc.id), &doc.body) {
                Some(raw) => {
                    let mut batch = RawArrayBuf::new();
                    batch.push(raw);
                    ctx.session.raw_batch = RawBatch::Written(batch);
                    None
                }
                None => parsed(&doc.id, &doc.body),
            }
        }
        Ok(doc) => match (parsed(&doc.id, &doc.body), &projection) {
            (Some(found), Some(p)) => Some(p.apply(&found)?),
            (found, _) => found,
        },
        Err(Error::NotFound(_)) => None,
        Err(err) => return Err(err.into()),
    };
    Ok(Some(cursor_reply(0, &ns.full(), "firstBatch", found.into_iter().collect())))
}

/// The stored document `body` under `id`, parsed and converted; `None` if it is no JSON
/// object.
fn parsed(id: &str, body: &[u8]) -> Option<Document> {
    let body = serde_json::from_slice::<Map<String, Value>>(body).ok()?;
    let mut out = doc! {"_id": ejson::id_value(id)};
    out.extend(ejson::from_json(&body));
    Some(out)
}

/// A `find` reply's first batch already written as BSON, beside the reply document.
#[derive(Debug, Default)]
pub(crate) enum RawBatch {
    /// The reply is used as a document (by a caller other than the connection).
    #[default]
    Off,
    /// The connection frames the reply and can put a written batch in it.
    Wanted,
    /// The batch the reply's empty `cursor.firstBatch` stands for.
    Written(RawArrayBuf),
}

impl RawBatch {
    pub(super) fn wanted(&self) -> bool {
        matches!(self, RawBatch::Wanted)
    }

    /// The written batch, if any; leaves `Off`.
    pub(crate) fn take(&mut self) -> Option<RawArrayBuf> {
        match std::mem::take(self) {
            RawBatch::Written(batch) => Some(batch),
            _ => None,
        }
    }
}

/// Whether `command` is a point read short enough to run on the connection's async worker
/// rather than a blocking thread: a plain `find({_id: v})` outside transactions on a
/// collection (not a view, whose pipeline may be long), with no fail point armed (one may
/// sleep). It costs a few point lookups from fjall's caches, less than the hop to a
/// blocking thread and back, as for the HTTP API's point `GET`.
pub(crate) fn is_short(server: &crate::Server, command: &Document) -> bool {
    let Some((name, Bson::String(coll))) = command.iter().next() else { return false };
    let Ok(db) = command.get_str("$db") else { return false };
    name == "find"
        && plain_id(command).is_some()
        && !server.fail_points.armed()
        && crate::names::Namespace::new(db, coll)
            .is_ok_and(|ns| !super::views::is_view(&server.engine, &ns))
}

/// The `_id` of a plain `find({_id: v})`.
fn plain_id(command: &Document) -> Option<&Bson> {
    if bunko_query::collation::active() || command.keys().any(|k| !PLAIN.contains(&k.as_str())) {
        return None;
    }
    let concern = command.get_document("readConcern").ok();
    if concern.is_some_and(|c| c.keys().any(|k| k != "level" && k != "afterClusterTime"))
        || concern.and_then(|c| c.get_str("level").ok()).is_some_and(|l| l == "snapshot")
        || matches!(command.get("batchSize"), Some(Bson::Int32(0) | Bson::Int64(0)))
        || !matches!(command.get("limit"), None | Some(Bson::Int32(0..) | Bson::Int64(0..)))
    {
        return None;
    }
    let filter = command.get_document("filter").ok()?;
    let (Some(id), 1) = (filter.get("_id"), filter.len()) else { return None };
    matches!(id, Bson::String(_) | Bson::ObjectId(_) | Bson::Binary(_)).then_some(id)
}
