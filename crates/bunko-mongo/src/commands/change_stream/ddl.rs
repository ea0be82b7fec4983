//! The expanded events of `showExpandedEvents: true` (MongoDB 6+): `create`,
//! `createIndexes`, `dropIndexes` and `modify`, and the `collectionUUID` and
//! `operationDescription` fields.
//!
//! A collection's indexes and options live in its design document `_design/mongodb`, whose
//! writes are in the change journal like any document's, so the DDL events come from the
//! diff of that document's revisions, in order with the document events and resumable as
//! they are: indexes that appear are `createIndexes`, indexes that go are `dropIndexes`, and
//! any other write of it (`collMod`) is `modify`. A `create` is reported when a stream
//! meets a collection created after its resume point (its engine database has a higher id);
//! options given to `create` are written as the collection's first write, and fold into it.
//! `collectionUUID` is derived from the engine database's numeric id, stable across
//! restarts and renames.

use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::events::{Before, ChangeEvent};
use bunko_engine::index::mongo::{DDOC, defs_from};
use bunko_engine::security::UserCtx;
use serde_json::{Map, Value};

use super::event;
use crate::commands::indexes::describe;
use crate::names::Namespace;

/// The `collectionUUID` of the collection whose engine database has `id`: "bunko" and the
/// id in a UUID's 16 bytes.
pub(super) fn uuid(id: u64) -> Bson {
    let mut bytes = b"bunko\0\0\0".to_vec();
    bytes.extend(id.to_be_bytes());
    Bson::Binary(Binary { subtype: BinarySubtype::Uuid, bytes })
}

/// The `_id` index every collection has, as `create` events show it.
fn id_index() -> Document {
    doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"}
}

/// A body of `_design/mongodb` (empty when absent or deleted).
fn ddoc_body(body: Option<&[u8]>) -> Map<String, Value> {
    body.and_then(|b| serde_json::from_slice(b).ok()).unwrap_or_default()
}

fn options_of(body: &Map<String, Value>) -> Document {
    match body.get("options") {
        Some(Value::Object(options)) => ejson::from_json(options),
        _ => Document::new(),
    }
}

fn indexes_of(body: &Map<String, Value>) -> Vec<Document> {
    defs_from(DDOC, body).iter().map(describe).collect()
}

/// Whether `ev` is the write of `create`'s options: the collection's first write, and the
/// first revision of its design document.
fn is_create_options(ev: &ChangeEvent) -> bool {
    ev.id == DDOC && ev.seq == 1 && ev.before == Before::Nothing
}

/// The `create` event of the collection `db` (named `ns`), with the options `create` gave it.
pub(super) fn create(token: Document, db: &Database, ns: &Namespace, user: &UserCtx) -> Document {
    let first = db.change_events(user, 0, 1).ok().flatten();
    let first = first.and_then(|(events, _)| events.into_iter().next());
    let mut description = Document::new();
    let mut ms = event::now_ms();
    if let Some(ev) = &first {
        ms = ev.ms;
        if is_create_options(ev) {
            description = options_of(&ddoc_body(ev.body.as_deref()));
        }
    }
    let view = description.contains_key("viewOn");
    // A clustered collection has no separate `_id` index (its `clusteredIndex` is there).
    if !view && !description.contains_key("clusteredIndex") {
        description.insert("idIndex", id_index());
    }
    let mut out = event::header(token, "create", ns, ms, 0);
    out.insert("collectionUUID", uuid(db.id()));
    out.insert("nsType", if view { "view" } else { "collection" });
    out.insert("operationDescription", description);
    out
}

/// The indexes of `these` whose names `those` lacks.
fn not_in(these: &[Document], those: &[Document]) -> Vec<Bson> {
    let name = |d: &Document| d.get_str("name").unwrap_or_default().to_string();
    let names: Vec<String> = those.iter().map(name).collect();
    these.iter().filter(|d| !names.contains(&name(d))).cloned().map(Bson::Document).collect()
}

/// The DDL events of one write of `_design/mongodb`.
pub(super) fn events(token: &Document, id: u64, ns: &Namespace, ev: &ChangeEvent) -> Vec<Document> {
    let old = match &ev.before {
        Before::Body(body) => ddoc_body(Some(body)),
        _ => Map::new(),
    };
    let new = if ev.deleted { Map::new() } else { ddoc_body(ev.body.as_deref()) };
    let (was, now) = (indexes_of(&old), indexes_of(&new));
    let (added, gone) = (not_in(&now, &was), not_in(&was, &now));
    let mut out = Vec::new();
    let mut push = |op: &str, description: Document| {
        let mut event = event::header(token.clone(), op, ns, ev.ms, ev.seq);
        event.insert("collectionUUID", uuid(id));
        event.insert("operationDescription", description);
        out.push(event);
    };
    if !added.is_empty() {
        push("createIndexes", doc! {"indexes": added.clone()});
    }
    if !gone.is_empty() {
        push("dropIndexes", doc! {"indexes": gone.clone()});
    }
    if added.is_empty() && gone.is_empty() && !is_create_options(ev) {
        let (before, after) = (options_of(&old), options_of(&new));
        let changed: Document = after
            .iter()
            .filter(|(k, v)| before.get(*k) != Some(*v))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut state = doc! {"uuid": uuid(id)};
        state.extend(before);
        let mut event = event::header(token.clone(), "modify", ns, ev.ms, ev.seq);
        event.insert("collectionUUID", uuid(id));
        event.insert("operationDescription", changed);
        event.insert("stateBeforeChange", doc! {"collectionOptions": state});
        out.push(event);
    }
    out
}

/// What the last `renameCollection` of a collection did, from its catalog entry (so it
/// survives restarts): the old name, the last seq before the rename (later writes are
/// under the new name) and the engine id of the collection `dropTarget` dropped.
#[derive(Debug, Clone)]
pub(super) struct Renamed {
    pub from: Namespace,
    pub seq: u64,
    pub dropped: Option<u64>,
}

/// The last rename of the collection `db`, if it was renamed from a MongoDB name.
pub(super) fn renamed(db: &Database) -> Option<Renamed> {
    let last = db.renamed()?;
    let from = Namespace::from_engine(&last.from)?;
    Some(Renamed { from, seq: last.seq, dropped: last.dropped })
}
