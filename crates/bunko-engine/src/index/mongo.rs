//! MongoDB-semantics indexes (`createIndexes`), kept by the same machinery as Mango indexes:
//! defined in a design document (so they replicate), maintained in the writing commit, built
//! over existing documents in the background ([`super::build`]).
//!
//! ```json
//! {"_id": "_design/mongodb", "language": "mongodb", "indexes": {
//!   "links.target_1_links.doc_type_1": {"key": {"links.target": 1, "links.doc_type": 1},
//!     "unique": false, "sparse": false, "partialFilterExpression": {…}, "selector": {…},
//!     "expireAfterSeconds": 3600, "hidden": true}}}
//! ```
//!
//! A `hidden` index (MongoDB 4.4+) is kept like any other (written in every commit, `unique`
//! checked, TTL expiry run) but the MongoDB planner does not see it
//! ([`Database::plannable_mongo_indexes`]). Hiding it, changing its `expireAfterSeconds`,
//! `prepareUnique` (new duplicates refused, stored ones kept) or converting it to `unique`
//! ([`Database::modify_mongo_index`], after [`Database::mongo_duplicates`] found none)
//! leaves its entries as they are: the registry swaps the definition and keeps the storage
//! (`IndexDef::same_entries`).
//!
//! Entries: `0x0A | db | num | mongo_index::encode(v1) … | doc_id → [[], doc_id, fields]`, one
//! per key of `bunko_query::mongo_index::keys` (every document, a missing field as `null`,
//! unless `sparse` (no indexed field present) or the partial filter excludes it). A
//! `unique` index is checked while a commit is staged (`Database::check_mongo_indexes`),
//! against the stored entries and the commit's own, so two documents never share a key
//! (keys hold numbers as doubles: for numbers sharing one, the values entries keep decide).
//! `fields` is the document cut down to the index's paths in its stored form
//! ([`covered_fields`]): a covered query answers from it (`crate::find`'s `mongo_cover`).
//! Hashed and collated indexes, which never cover, keep `[[v1, …], doc_id]` instead, as
//! every index did before session 25.
//!
//! A hashed index (`{"a": "hashed"}` in `key`; [`MongoSpec::hashed`]) holds the hash of
//! that field's value instead of the value; a document with an array on any path of such an
//! index is refused ([`Error::HashedArray`]), on the write or the build.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use bunko_doc::ejson;
use bunko_doc::id::{DocKind, kind};
use bunko_doc::keycode::KeyWriter;
use bunko_query::mongo_index;
use bunko_query::{Dialect, FieldPath, Selector};
use bunko_storage::prefix_range;
use serde_json::{Map, Value, json};

use super::{Index, IndexDef, IndexField, Winner, entries};
use crate::database::Database;
use crate::keys;
use crate::security::UserCtx;
use crate::{Error, Result, records};

/// The design document holding a collection's MongoDB indexes, and its language.
pub const DDOC: &str = "_design/mongodb";
pub const LANGUAGE: &str = "mongodb";
/// Id records read per page when `createIndexes` checks the existing documents.
const MONGO_DOCS_PAGE: usize = 256;

/// The options of a MongoDB index.
#[derive(Debug, Clone, PartialEq)]
pub struct MongoSpec {
    /// The key pattern: field → 1 or -1.
    pub key: Vec<(String, i32)>,
    pub unique: bool,
    pub sparse: bool,
    /// `partialFilterExpression` in canonical Extended JSON, as `listIndexes` shows it (its
    /// selector form is [`IndexDef::partial_filter`]).
    pub partial: Option<Value>,
    pub expire_after_seconds: Option<i64>,
    /// The position in [`MongoSpec::key`] of the field given as `"hashed"` (its entry then
    /// holds `1`): the index holds that field's hash (`bunko_doc::bson_hash`).
    pub hashed: Option<usize>,
    /// The index's collation with every field filled in
    /// (`bunko_query::collation::Collation::full_spec`); `None`: simple (binary). Its string
    /// keys are the collation's sort keys.
    pub collation: Option<Map<String, Value>>,
    /// Hidden from the planner (`hidden: true`): maintained, never chosen nor hinted.
    pub hidden: bool,
    /// `prepareUnique` (MongoDB 6+): a write adding a key another document holds is refused
    /// as for a `unique` index, while duplicates already stored stay (until `collMod`
    /// converts the index to `unique`).
    pub prepare_unique: bool,
}

/// Options of a stored MongoDB index that `collMod` changes in place
/// ([`Database::modify_mongo_index`]); `None` leaves one as it is.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MongoIndexChange {
    pub hidden: Option<bool>,
    pub expire_after_seconds: Option<i64>,
    pub unique: Option<bool>,
    pub prepare_unique: Option<bool>,
}

impl MongoSpec {
    /// The key pattern as given: field → 1, -1 or `"hashed"`.
    pub fn pattern(&self) -> Map<String, Value> {
        let value = |i: usize, d: i32| match self.hashed == Some(i) {
            true => json!("hashed"),
            false => json!(d),
        };
        self.key.iter().enumerate().map(|(i, (f, d))| (f.clone(), value(i, *d))).collect()
    }
}

/// The MongoDB indexes of a `_design/mongodb` body.
pub fn defs_from(ddoc: &str, body: &Map<String, Value>) -> Vec<IndexDef> {
    let Some(Value::Object(indexes)) = body.get("indexes") else { return Vec::new() };
    indexes.iter().filter_map(|(name, spec)| def_from(ddoc, name, spec)).collect()
}

fn def_from(ddoc: &str, name: &str, spec: &Value) -> Option<IndexDef> {
    let pattern = spec.get("key")?.as_object()?;
    let hashed = pattern.values().position(|d| d == "hashed");
    let direction =
        |d: &Value| if d == "hashed" { Some(1) } else { i32::try_from(d.as_i64()?).ok() };
    let key: Vec<(String, i32)> =
        pattern.iter().map(|(f, d)| Some((f.clone(), direction(d)?))).collect::<Option<_>>()?;
    let fields = key.iter().map(|(f, d)| IndexField { name: f.clone(), desc: *d < 0 }).collect();
    let flag = |k: &str| spec.get(k).and_then(Value::as_bool).unwrap_or(false);
    Some(IndexDef {
        ddoc: ddoc.to_string(),
        name: name.to_string(),
        fields,
        partial_filter: spec.get("selector").filter(|s| !s.is_null()).cloned(),
        partitioned: false,
        mongo: Some(MongoSpec {
            key,
            unique: flag("unique"),
            sparse: flag("sparse"),
            partial: spec.get("partialFilterExpression").filter(|s| !s.is_null()).cloned(),
            expire_after_seconds: spec.get("expireAfterSeconds").and_then(Value::as_i64),
            hashed,
            collation: spec.get("collation").and_then(Value::as_object).cloned(),
            hidden: flag("hidden"),
            prepare_unique: flag("prepareUnique"),
        }),
    })
}

fn to_json(def: &IndexDef, spec: &MongoSpec) -> Value {
    let mut out = json!({"key": spec.pattern(), "unique": spec.unique, "sparse": spec.sparse});
    if let (Some(p), Some(s)) = (&spec.partial, &def.partial_filter) {
        out["partialFilterExpression"] = p.clone();
        out["selector"] = s.clone();
    }
    if let Some(ttl) = spec.expire_after_seconds {
        out["expireAfterSeconds"] = json!(ttl);
    }
    if let Some(collation) = &spec.collation {
        out["collation"] = Value::Object(collation.clone());
    }
    if spec.hidden {
        out["hidden"] = json!(true);
    }
    if spec.prepare_unique {
        out["prepareUnique"] = json!(true);
    }
    out
}

/// A document in its MongoDB matching form, from the Mango form indexes are given.
pub fn match_form(id: &str, mango_doc: &Value) -> Value {
    let mut doc = Map::new();
    doc.insert("_id".into(), ejson::value_to_json(&ejson::id_value(id)));
    if let Value::Object(fields) = mango_doc {
        for (k, v) in fields {
            if !matches!(k.as_str(), "_id" | "_rev" | "_conflicts") {
                doc.insert(k.clone(), v.clone());
            }
        }
    }
    Value::Object(doc)
}

/// The keys (values per field) a document has in a MongoDB index (the hashed field's
/// value replaced by its hash); `Err` for parallel arrays, or an array on a path of a
/// hashed index. `paths`/`partial` are the compiled index's.
pub fn doc_keys(
    spec: &MongoSpec,
    paths: &[FieldPath],
    partial: Option<&Selector>,
    doc: &Value,
) -> Result<Vec<Vec<Value>>> {
    if partial.is_some_and(|p| !p.matches(doc, Dialect::Mongo)) {
        return Ok(Vec::new());
    }
    let present = |p: &FieldPath| !matches!(p.get(doc), bunko_query::path::Lookup::NotFound);
    if spec.sparse && !paths.iter().any(present) {
        return Ok(Vec::new());
    }
    let Some(hashed) = spec.hashed else {
        return mongo_index::keys(doc, paths).map_err(|e| Error::ParallelArrays(e.to_string()));
    };
    // No field of a hashed index may cross an array (MongoDB's code 16766).
    let arrays = mongo_index::multikey_paths(doc, paths);
    if let Some((path, first)) = paths.iter().zip(&arrays).find_map(|(p, a)| Some((p, a.first()?)))
    {
        let prefix = path.segments().get(..=*first).unwrap_or_default().join(".");
        return Err(Error::HashedArray(prefix));
    }
    let mut keys =
        mongo_index::keys(doc, paths).map_err(|e| Error::ParallelArrays(e.to_string()))?;
    for value in keys.iter_mut().filter_map(|key| key.get_mut(hashed)) {
        *value = mongo_index::hashed(value);
    }
    Ok(keys)
}

/// The prefix of the entries holding one key.
pub fn key_prefix(db: u64, num: u64, values: &[Value]) -> Vec<u8> {
    let mut key = entries::prefix(db, num, None);
    key.extend(mongo_index::encode_key(values));
    key
}

/// One entry: its storage key and value (`fields`: the document's values at the index
/// paths, [`covered_fields`], kept for covered queries; the key's values are then not
/// repeated in the value, which no reader of MongoDB entries needs: `[[], id, fields]`).
pub fn entry(
    db: u64,
    num: u64,
    id: &str,
    values: &[Value],
    fields: Option<&Map<String, Value>>,
) -> (Vec<u8>, Vec<u8>) {
    let key = KeyWriter::from_bytes(key_prefix(db, num, values)).str(id).finish();
    let value = match fields {
        Some(fields) => serde_json::to_vec(&([(); 0], id, fields)),
        None => serde_json::to_vec(&(values, id)),
    };
    (key, value.unwrap_or_default())
}

/// What an entry of a MongoDB index keeps of its document for covered queries: the
/// stored (typed) values at the index paths, `bunko_query::covered::index_fields` of the
/// document in its MongoDB stored form (`_id` as its MongoDB value). `None` for indexes
/// that never cover: hashed (the key is a hash) and collated (MongoDB fetches strings).
pub fn covered_fields(
    spec: &MongoSpec,
    paths: &[FieldPath],
    id: &str,
    mango_doc: &Value,
) -> Option<Map<String, Value>> {
    if spec.hashed.is_some() || spec.collation.is_some() {
        return None;
    }
    let mut doc = Map::new();
    doc.insert("_id".into(), ejson::value_to_json(&ejson::id_value(id)));
    if let Value::Object(fields) = mango_doc {
        let own =
            fields.iter().filter(|(k, _)| !matches!(k.as_str(), "_id" | "_rev" | "_conflicts"));
        doc.extend(own.map(|(k, v)| (k.clone(), v.clone())));
    }
    Some(bunko_query::covered::index_fields(&doc, paths))
}

/// The document id of a MongoDB index entry and the document's values at the index
/// paths when the entry keeps them ([`covered_fields`]).
pub fn decode_entry(value: &[u8]) -> Option<(String, Option<Map<String, Value>>)> {
    #[derive(serde::Deserialize)]
    struct Entry(serde::de::IgnoredAny, String, #[serde(default)] Option<Map<String, Value>>);
    let Entry(_, id, fields) = serde_json::from_slice(value).ok()?;
    Some((id, fields))
}

/// Keys added (with the document and its key values) and entries released by the commit
/// being staged, for `unique` checks.
#[derive(Debug, Default)]
pub(crate) struct UniqueKeys {
    added: HashMap<Vec<u8>, Vec<(String, Vec<Value>)>>,
    released: HashSet<Vec<u8>>,
}

/// Whether two documents' key values are one key for a `unique` index. Keys hold numbers
/// as doubles, so two numbers MongoDB tells apart (int64s past 2^53, a Decimal128 and its
/// nearest double) may share a key's bytes: their values then decide, exactly.
fn same_key(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| bunko_query::bson_order::compare(x, y).is_eq())
}

/// Whether key values hold a number (whose key bytes may stand for several numbers).
fn numeric(values: &[Value]) -> bool {
    values
        .iter()
        .any(|v| bunko_query::bson_order::class(v) == bunko_query::bson_order::Class::Number)
}

impl Database {
    /// Refuses a document write that would break a MongoDB index: a key a `unique` index
    /// already holds for another document (`DuplicateKey`), or parallel arrays.
    pub(crate) fn check_mongo_indexes(
        &self,
        indexes: &[Arc<Index>],
        unique: &mut UniqueKeys,
        id: &str,
        old: &Winner,
        new: &Winner,
    ) -> Result<()> {
        let form = |w: &Winner| {
            w.as_ref().map(|(rev, body, _)| match_form(id, &entries::mango_doc(id, rev, body)))
        };
        let docs = (form(old), form(new));
        for index in indexes.iter().filter(|i| i.covers(id)) {
            let Some(spec) = &index.def.mongo else { continue };
            // Keys of a collated index hold its collation's sort keys.
            bunko_query::collation::with(index.compiled.collation(), || {
                self.check_index(index, spec, unique, id, &docs)
            })?;
        }
        Ok(())
    }

    /// [`Database::check_mongo_indexes`] for one index, a document going from `docs.0` to
    /// `docs.1` (MongoDB matching forms).
    fn check_index(
        &self,
        index: &Index,
        spec: &MongoSpec,
        unique: &mut UniqueKeys,
        id: &str,
        (old_doc, new_doc): &(Option<Value>, Option<Value>),
    ) -> Result<()> {
        let compiled = &index.compiled;
        let keys_of = |doc: &Option<Value>| match doc {
            Some(d) => doc_keys(spec, compiled.paths(), compiled.partial(), d),
            None => Ok(Vec::new()),
        };
        let after = keys_of(new_doc)?;
        if !spec.unique && !spec.prepare_unique {
            return Ok(());
        }
        let before = keys_of(old_doc).unwrap_or_default();
        let (db, num) = (self.id(), index.num());
        for values in before.iter().filter(|v| !after.contains(v)) {
            unique.released.insert(entry(db, num, id, values, None).0);
            if let Some(held) = unique.added.get_mut(&key_prefix(db, num, values)) {
                held.retain(|(other, kept)| other != id || !same_key(kept, values));
            }
        }
        for values in after.iter().filter(|v| !before.contains(v)) {
            let prefix = key_prefix(db, num, values);
            if self.key_taken(index, unique, &prefix, (id, values))? {
                let key = spec.key.iter().map(|(f, _)| f.clone()).zip(values.clone());
                return Err(Error::DuplicateKey {
                    db: self.name(),
                    index: index.def.name.clone(),
                    key: key.collect(),
                });
            }
            unique.added.entry(prefix).or_default().push((id.to_string(), values.clone()));
        }
        Ok(())
    }

    /// Whether another document than `id` holds the key `prefix` of key values `values`:
    /// with a number among them, an entry holding the same bytes for other numbers (see
    /// [`same_key`]) does not count, when it keeps its document's values to tell.
    fn key_taken(
        &self,
        index: &Index,
        unique: &UniqueKeys,
        prefix: &[u8],
        (id, values): (&str, &[Value]),
    ) -> Result<bool> {
        let exact = numeric(values);
        let added = unique.added.get(prefix).into_iter().flatten();
        if added.into_iter().any(|(other, kept)| other != id && (!exact || same_key(kept, values)))
        {
            return Ok(true);
        }
        let limit = if exact { usize::MAX } else { 4 };
        let held = self.store.snapshot().scan(&prefix_range(prefix), false, limit)?;
        Ok(held.iter().any(|(key, value)| {
            let other = entries::decode_value(value).map(|(_, other)| other);
            let taken = other.is_some_and(|o| o != id) && !unique.released.contains(key);
            taken && (!exact || self.entry_holds(index, value, values))
        }))
    }

    /// Whether the entry `value` of `index` stands for the key values `values` exactly (an
    /// entry that keeps no values is taken to).
    fn entry_holds(&self, index: &Index, value: &[u8], values: &[Value]) -> bool {
        let Some((_, Some(fields))) = decode_entry(value) else { return true };
        match mongo_index::keys(&Value::Object(fields), index.compiled.paths()) {
            Ok(keys) => keys.iter().any(|k| same_key(k, values)),
            Err(_) => true,
        }
    }

    /// The MongoDB indexes of this collection, by name.
    pub fn mongo_indexes(&self) -> Vec<Arc<Index>> {
        let mut out: Vec<Arc<Index>> =
            self.indexes.all().iter().filter(|i| i.def.mongo.is_some()).cloned().collect();
        out.sort_by(|a, b| a.def.name.cmp(&b.def.name));
        out
    }

    /// The MongoDB indexes the planner may use: built, and not hidden.
    pub fn plannable_mongo_indexes(&self) -> Vec<Arc<Index>> {
        let visible =
            |i: &Arc<Index>| i.is_ready() && i.def.mongo.as_ref().is_some_and(|s| !s.hidden);
        self.mongo_indexes().into_iter().filter(visible).collect()
    }

    /// Changes the options of the MongoDB index `name` that leave its entries as they are
    /// (`hidden`, `expireAfterSeconds`, `unique`, `prepareUnique`; as `ctx`, a database
    /// admin, asked first). The index keeps its storage ([`IndexDef::same_entries`]).
    /// `Error::NotFound` when no such index is stored. Making an index `unique` does not
    /// look for duplicates: [`Database::mongo_duplicates`] does.
    pub fn modify_mongo_index(
        &self,
        ctx: &UserCtx,
        name: &str,
        change: MongoIndexChange,
    ) -> Result<()> {
        self.admit_admin(ctx)?;
        let (rev, mut body) = self.load_mongo_ddoc()?;
        let found = defs_from(DDOC, &body).into_iter().find(|d| d.name == name);
        let Some((def, mut spec)) = found.and_then(|d| d.mongo.clone().map(|s| (d, s))) else {
            return Err(Error::NotFound(format!("index {name}")));
        };
        spec.hidden = change.hidden.unwrap_or(spec.hidden);
        spec.expire_after_seconds = change.expire_after_seconds.or(spec.expire_after_seconds);
        spec.unique = change.unique.unwrap_or(spec.unique);
        spec.prepare_unique = change.prepare_unique.unwrap_or(spec.prepare_unique);
        if let Some(Value::Object(map)) = body.get_mut("indexes") {
            map.insert(name.to_string(), to_json(&def, &spec));
        }
        self.save_ddoc(ctx, DDOC, rev, body, false)
    }

    /// The documents (ids, in id order) that share a key of the MongoDB index `name`, one
    /// group per key in key order (ascending whatever the index's directions), as the
    /// stored documents give them: what converting it to `unique` finds in the way.
    pub fn mongo_duplicates(&self, name: &str) -> Result<Vec<Vec<String>>> {
        let Some(index) = self.mongo_indexes().into_iter().find(|i| i.def.name == name) else {
            return Err(Error::NotFound(format!("index {name}")));
        };
        let Some(spec) = index.def.mongo.as_ref() else { return Ok(Vec::new()) };
        let compiled = &index.compiled;
        bunko_query::collation::with(compiled.collation(), || {
            let mut groups: Vec<(Vec<Value>, Vec<String>)> = Vec::new();
            let mut by_key: HashMap<Vec<u8>, Vec<usize>> = HashMap::new();
            self.each_mongo_doc(|id, doc| {
                for values in doc_keys(spec, compiled.paths(), compiled.partial(), &doc)? {
                    let held = by_key.entry(mongo_index::encode_key(&values)).or_default();
                    let exact = numeric(&values);
                    let same =
                        held.iter().copied().find(|g| !exact || same_key(&groups[*g].0, &values));
                    match same {
                        Some(g) if !groups[g].1.iter().any(|o| o == id) => {
                            groups[g].1.push(id.to_string());
                        }
                        Some(_) => {}
                        None => {
                            held.push(groups.len());
                            groups.push((values, vec![id.to_string()]));
                        }
                    }
                }
                Ok(())
            })?;
            // In key order, as MongoDB's scan of the index meets them.
            groups.retain(|(_, ids)| ids.len() > 1);
            groups.sort_by(|(a, _), (b, _)| {
                let order = a.iter().zip(b).map(|(x, y)| bunko_query::bson_order::compare(x, y));
                order.into_iter().find(|o| o.is_ne()).unwrap_or(std::cmp::Ordering::Equal)
            });
            Ok(groups.into_iter().map(|(_, ids)| ids).collect())
        })
    }

    /// Adds MongoDB indexes to `_design/mongodb` in one write (as `ctx`, a database admin:
    /// the write gate checks the design-document write, and is asked first, so that a
    /// request that would write nothing, or fail on the stored documents, is refused
    /// alike). Returns how many were new.
    pub fn create_mongo_indexes(&self, ctx: &UserCtx, defs: Vec<IndexDef>) -> Result<usize> {
        self.admit_admin(ctx)?;
        let (rev, mut body) = self.load_mongo_ddoc()?;
        let existing = defs_from(DDOC, &body);
        let mut created = 0;
        for def in defs {
            let Some(spec) = &def.mongo else { continue };
            if existing.iter().any(|e| e.name == def.name) {
                continue;
            }
            self.check_existing(&def)?;
            let indexes = body.entry("indexes").or_insert_with(|| json!({}));
            if let Some(map) = indexes.as_object_mut() {
                map.insert(def.name.clone(), to_json(&def, spec));
                created += 1;
            }
        }
        if created > 0 {
            self.save_ddoc(ctx, DDOC, rev, body, false)?;
        }
        Ok(created)
    }

    /// Removes MongoDB indexes by name in one write (as `ctx`, a database admin, asked
    /// first); the names that were not there.
    pub fn drop_mongo_indexes(&self, ctx: &UserCtx, names: &[String]) -> Result<Vec<String>> {
        self.admit_admin(ctx)?;
        let (rev, mut body) = self.load_mongo_ddoc()?;
        let mut missing = Vec::new();
        if let Some(Value::Object(map)) = body.get_mut("indexes") {
            for name in names {
                if map.shift_remove(name).is_none() {
                    missing.push(name.clone());
                }
            }
        } else {
            missing.extend(names.iter().cloned());
        }
        if missing.len() < names.len() {
            // Deleted only when nothing else is left in it (collection options live there too).
            let no_indexes =
                body.get("indexes").and_then(Value::as_object).is_none_or(Map::is_empty);
            let only_indexes = body.keys().all(|k| matches!(k.as_str(), "language" | "indexes"));
            self.save_ddoc(ctx, DDOC, rev, body, no_indexes && only_indexes)?;
        }
        Ok(missing)
    }

    /// Checks a new index against the documents already stored: parallel arrays, and for a
    /// `unique` index a key two documents share (MongoDB refuses to build both).
    fn check_existing(&self, def: &IndexDef) -> Result<()> {
        let Some(spec) = &def.mongo else { return Ok(()) };
        let compiled = entries::Compiled::new(def).map_err(Error::BadRequest)?;
        bunko_query::collation::with(compiled.collation(), || self.check_docs(def, spec, &compiled))
    }

    /// [`Database::check_existing`] over the live documents, read a page at a time
    /// ([`Database::each_mongo_doc`]), under the index's collation. Only a unique index
    /// keeps something per document: its keys, to find a second holder.
    fn check_docs(
        &self,
        def: &IndexDef,
        spec: &MongoSpec,
        compiled: &entries::Compiled,
    ) -> Result<()> {
        let mut seen: HashMap<Vec<u8>, Vec<(String, Vec<Value>)>> = HashMap::new();
        self.each_mongo_doc(|id, doc| {
            let keys = doc_keys(spec, compiled.paths(), compiled.partial(), &doc)?;
            if !spec.unique {
                return Ok(()); // only parallel arrays to refuse
            }
            for values in keys {
                let held = seen.entry(mongo_index::encode_key(&values)).or_default();
                let exact = numeric(&values);
                let taken = |(other, kept): &(String, Vec<Value>)| {
                    other != id && (!exact || same_key(kept, &values))
                };
                if held.iter().any(taken) {
                    let key = spec.key.iter().map(|(f, _)| f.clone()).zip(values);
                    let (db, index) = (self.name(), def.name.clone());
                    return Err(Error::DuplicateKey { db, index, key: key.collect() });
                }
                held.push((id.to_string(), values));
            }
            Ok(())
        })
    }

    /// Calls `each` with every live document in its MongoDB matching form, in id order,
    /// reading [`MONGO_DOCS_PAGE`] id records at a time from one snapshot: one document's
    /// tree at a time is in memory, not the collection's (all of them at once took ~400 MB
    /// over 200,000 readings in `bunko-bench --workloads mongo`'s `createIndexes`).
    fn each_mongo_doc(&self, mut each: impl FnMut(&str, Value) -> Result<()>) -> Result<()> {
        let db = self.id();
        let snap = self.store.snapshot();
        let records =
            bunko_storage::Iter::new(snap.clone(), keys::doc_range(db), false, MONGO_DOCS_PAGE);
        for entry in records {
            let (key, info) = entry?;
            let id = keys::decode_doc(&key)?;
            if kind(&id) != DocKind::Normal {
                continue;
            }
            let record = records::DocRecord::decode(&info)?;
            let (rev, deleted) = record.info.winner()?;
            if deleted {
                continue;
            }
            if let Some(body) = crate::read::body_of(snap.as_ref(), db, &id, rev, Some(&record))? {
                let rev = rev.to_string();
                each(&id, match_form(&id, &entries::mango_doc(&id, &rev, &body)))?;
            }
        }
        Ok(())
    }

    fn load_mongo_ddoc(&self) -> Result<(Option<bunko_doc::RevId>, Map<String, Value>)> {
        match self.get_stored(DDOC, None) {
            Ok(doc) => {
                let body: Map<String, Value> = serde_json::from_slice(&doc.body)
                    .map_err(|e| Error::Corrupt(format!("{DDOC}: {e}")))?;
                Ok((Some(doc.rev), body))
            }
            Err(Error::NotFound(_)) => {
                let mut body = Map::new();
                body.insert("language".into(), json!(LANGUAGE));
                Ok((None, body))
            }
            Err(err) => Err(err),
        }
    }
}

impl Database {
    /// Bytes (keys and values) of the `_id` index (the documents' id records) and of each
    /// MongoDB index, by name, for `collStats`/`dbStats`.
    pub fn mongo_index_sizes(&self) -> Result<Vec<(String, u64)>> {
        let snap = self.store.snapshot();
        let size = |range: &bunko_storage::Range| -> Result<u64> {
            let mut total = 0u64;
            for entry in bunko_storage::Iter::new(snap.clone(), range.clone(), false, 1024) {
                let (key, value) = entry?;
                total += (key.len() + value.len()) as u64;
            }
            Ok(total)
        };
        let mut out = vec![("_id_".to_string(), size(&keys::doc_range(self.id()))?)];
        for index in self.mongo_indexes() {
            out.push((index.def.name.clone(), size(&entries::range(self.id(), index.num()))?));
        }
        Ok(out)
    }
}
