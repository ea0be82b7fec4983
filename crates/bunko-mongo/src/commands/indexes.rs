//! `createIndexes`, `dropIndexes` and `listIndexes`: MongoDB-semantics indexes, defined in
//! the collection's `_design/mongodb` design document and kept by the engine
//! (`bunko_engine::index::mongo`). Creating and dropping are design-document writes, so they
//! need a database admin of the collection, as `POST /{db}/_index` does over HTTP.
//! `createIndexes` answers once the new indexes are built over the existing documents.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, Document, doc};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::find::mongo_index::NATURAL;
use bunko_engine::index::mongo::{DDOC, MongoSpec};
use bunko_engine::index::{IndexDef, IndexField};

use super::admin::{open_or_create, user};
use super::crud::readable_db;
use super::{Ctx, bool_of, cursor_reply, int_of, namespace};
use crate::error::MongoError;
use crate::names::Namespace;
use crate::query;

/// How long `createIndexes` waits for a build over existing documents.
const BUILD_WAIT: Duration = Duration::from_secs(120);

pub(super) fn create_indexes(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(Bson::Array(specs)) = command.get("indexes") else {
        return Err(MongoError::failed_to_parse(
            "BSON field 'createIndexes.indexes' is missing but a required field",
        ));
    };
    let defs = specs.iter().map(parse_spec).collect::<Result<Vec<_>, _>>()?;
    let existed = ctx.server.engine.get_db(&ns.engine_name()).is_some();
    let db = open_or_create(ctx, &ns)?;
    let before = 1 + db.mongo_indexes().len();
    let mut fresh = Vec::new();
    for def in defs {
        if is_id_index(&def) || existing(&db, &def)? {
            continue;
        }
        fresh.push(def);
    }
    let names: Vec<String> = fresh.iter().map(|d| d.name.clone()).collect();
    db.create_mongo_indexes(&user(ctx), fresh)?;
    wait_built(&db, &names);
    let mut reply = doc! {
        "numIndexesBefore": before as i32,
        "numIndexesAfter": (1 + db.mongo_indexes().len()) as i32,
        "createdCollectionAutomatically": !existed,
    };
    if names.is_empty() {
        reply.insert("note", "all indexes already exist");
    }
    Ok(reply)
}

/// One entry of `indexes`, checked as MongoDB checks it.
pub(super) fn parse_spec(spec: &Bson) -> Result<IndexDef, MongoError> {
    let Bson::Document(spec) = spec else {
        return Err(MongoError::type_mismatch("Each index specification must be an object"));
    };
    let key = match spec.get("key") {
        Some(Bson::Document(k)) if !k.is_empty() => k,
        Some(Bson::Document(_)) => {
            return Err(MongoError::new(67, "CannotCreateIndex", "Index keys cannot be empty."));
        }
        _ => {
            return Err(MongoError::failed_to_parse(
                "The 'key' field is a required property of an index specification",
            ));
        }
    };
    let mut pattern = Vec::new();
    let mut hashed = None;
    for (field, dir) in key {
        let dir = match dir {
            Bson::Int32(n) => f64::from(*n),
            Bson::Int64(n) => *n as f64,
            Bson::Double(d) => *d,
            Bson::String(kind) if kind == "hashed" => {
                hashed = hashed.or(Some(pattern.len()));
                1.0
            }
            Bson::String(kind) => {
                return Err(MongoError::not_implemented(format!(
                    "'{kind}' indexes are not supported yet"
                )));
            }
            other => {
                return Err(MongoError::new(
                    67,
                    "CannotCreateIndex",
                    format!(
                        "Values in the index key pattern can only be numbers or strings, found {other}"
                    ),
                ));
            }
        };
        if dir == 0.0 || dir.is_nan() {
            return Err(MongoError::new(
                67,
                "CannotCreateIndex",
                format!("Values in v:2 index key pattern cannot be 0 or NaN: {field}"),
            ));
        }
        pattern.push((field.clone(), if dir > 0.0 { 1 } else { -1 }));
    }
    let hashed_fields = key.values().filter(|d| d.as_str() == Some("hashed")).count();
    if hashed_fields > 1 {
        return Err(MongoError::new(
            31303,
            "Location31303",
            format!(
                "A maximum of one index field is allowed to be hashed but found {hashed_fields} for 'key' {}",
                describe_key(key)
            ),
        ));
    }
    let hidden = match spec.get("hidden") {
        None => false,
        Some(Bson::Boolean(b)) => *b,
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "The field 'hidden' must be a boolean, but got {}",
                super::type_of(Some(other))
            )));
        }
    };
    if hidden && key.len() == 1 && key.contains_key("_id") {
        return Err(MongoError::bad_value("can't hide _id index"));
    }
    if hashed.is_some() && bool_of(spec, "unique", false)? {
        return Err(MongoError::new(
            16764,
            "Location16764",
            "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
        ));
    }
    for field in spec.keys() {
        let known = [
            "key",
            "name",
            "v",
            "unique",
            "sparse",
            "partialFilterExpression",
            "collation",
            "hidden",
            "prepareUnique",
        ];
        if !known.contains(&field.as_str())
            && field != "expireAfterSeconds"
            && field != "background"
        {
            return Err(MongoError::not_implemented(format!(
                "index option '{field}' is not supported yet"
            )));
        }
    }
    let name = match spec.get("name") {
        Some(Bson::String(n)) if !n.is_empty() => n.clone(),
        Some(_) => return Err(MongoError::bad_value("The index name cannot be empty")),
        None => default_name(key),
    };
    let (partial, selector) = match spec.get("partialFilterExpression") {
        Some(Bson::Document(f)) => {
            let selector = query::selector(f)?.to_json();
            (Some(Bson::Document(f.clone()).into_canonical_extjson()), Some(selector))
        }
        Some(_) => {
            return Err(MongoError::type_mismatch("partialFilterExpression must be an object"));
        }
        None => (None, None),
    };
    let ttl = match int_of(spec, "expireAfterSeconds")? {
        Some(n) if !(0..=i64::from(i32::MAX)).contains(&n) => {
            return Err(MongoError::new(
                67,
                "CannotCreateIndex",
                format!(
                    "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number: {n}"
                ),
            ));
        }
        other => other,
    };
    let collation = query::collation_of(spec)?.map(|c| c.full_spec());
    if hashed.is_some() && ttl.is_some() {
        // The TTL monitor reads dates from the index, which a hashed index does not hold.
        return Err(MongoError::not_implemented(
            "expireAfterSeconds on a hashed index is not supported",
        ));
    }
    if hashed.is_some() && collation.is_some() {
        return Err(MongoError::not_implemented(
            "hashed indexes with a collation other than simple are not supported yet",
        ));
    }
    let fields =
        pattern.iter().map(|(f, d)| IndexField { name: f.clone(), desc: *d < 0 }).collect();
    Ok(IndexDef {
        ddoc: DDOC.to_string(),
        name,
        fields,
        partial_filter: selector,
        partitioned: false,
        mongo: Some(MongoSpec {
            key: pattern,
            unique: bool_of(spec, "unique", false)?,
            sparse: bool_of(spec, "sparse", false)?,
            partial,
            expire_after_seconds: ttl,
            hashed,
            collation,
            hidden,
            prepare_unique: bool_of(spec, "prepareUnique", false)?,
        }),
    })
}

/// MongoDB's default index name: `a_1_b_-1`, `a_hashed`.
pub(super) fn default_name(key: &Document) -> String {
    let part = |(f, d): (&String, &Bson)| match d {
        Bson::String(kind) => format!("{f}_{kind}"),
        other => format!("{f}_{}", direction(other)),
    };
    key.iter().map(part).collect::<Vec<_>>().join("_")
}

/// An index's key pattern as MongoDB shows it: field → 1, -1 or `"hashed"`.
pub(super) fn key_pattern(spec: &MongoSpec) -> Document {
    ejson::from_json(&spec.pattern())
}

/// A key pattern as a request gives it, in the form [`key_pattern`] shows (numbers as 1 or
/// -1), to find the index it names.
fn normalized(key: &Document) -> Document {
    let value = |d: &Bson| match d {
        Bson::String(kind) => Bson::String(kind.clone()),
        other => Bson::Int32(direction(other)),
    };
    key.iter().map(|(f, d)| (f.clone(), value(d))).collect()
}

/// The index `key` names.
pub(super) fn by_pattern(db: &Database, key: &Document) -> Option<Arc<bunko_engine::index::Index>> {
    let wanted = normalized(key);
    db.mongo_indexes()
        .into_iter()
        .find(|i| i.def.mongo.as_ref().is_some_and(|s| key_pattern(s) == wanted))
}

fn is_id_index(def: &IndexDef) -> bool {
    def.mongo.as_ref().is_some_and(|s| s.key == [("_id".to_string(), 1)] && s.hashed.is_none())
}

/// Whether the index exists already (same name and options); an index with the same name
/// or the same key and other options is MongoDB's conflict error.
fn existing(db: &Database, def: &IndexDef) -> Result<bool, MongoError> {
    let spec = def.mongo.as_ref();
    for index in db.mongo_indexes() {
        let other = index.def.mongo.as_ref();
        let same_key = other.map(key_pattern) == spec.map(key_pattern);
        // Hiding and `prepareUnique` are no options of the index's identity: asking again
        // with another finds the index there.
        let visible =
            |s: &MongoSpec| MongoSpec { hidden: false, prepare_unique: false, ..s.clone() };
        if index.def.name == def.name && other.map(visible) == spec.map(visible) {
            return Ok(true);
        }
        if index.def.name == def.name {
            return Err(MongoError::new(
                86,
                "IndexKeySpecsConflict",
                format!(
                    "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                    describe(def),
                    describe(&index.def)
                ),
            ));
        }
        let options = |s: &MongoSpec| (s.unique, s.sparse, s.collation.clone());
        // A time-series collection's hidden `expireAfterSeconds` index is no user's index.
        let hidden = index.def.name == super::timeseries::TTL_INDEX;
        if same_key && !hidden && other.map(options) == spec.map(options) {
            return Err(MongoError::new(
                85,
                "IndexOptionsConflict",
                format!("Index already exists with a different name: {}", index.def.name),
            ));
        }
    }
    Ok(false)
}

/// Waits until the named indexes are built (or [`BUILD_WAIT`] passes).
fn wait_built(db: &Arc<Database>, names: &[String]) {
    let deadline = Instant::now() + BUILD_WAIT;
    let pending =
        || db.mongo_indexes().iter().any(|i| names.contains(&i.def.name) && !i.is_ready());
    while pending() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// An index as `listIndexes` shows it.
pub(super) fn describe(def: &IndexDef) -> Document {
    let mut out = doc! {"v": 2};
    let Some(spec) = &def.mongo else { return out };
    out.insert("key", key_pattern(spec));
    out.insert("name", def.name.clone());
    if spec.unique {
        out.insert("unique", true);
    }
    if spec.sparse {
        out.insert("sparse", true);
    }
    if let Some(partial) = &spec.partial {
        out.insert("partialFilterExpression", ejson::value_from_json(partial));
    }
    if let Some(ttl) = spec.expire_after_seconds {
        out.insert("expireAfterSeconds", i32::try_from(ttl).unwrap_or(i32::MAX));
    }
    if let Some(collation) = &spec.collation {
        out.insert("collation", ejson::from_json(collation));
    }
    if spec.hidden {
        out.insert("hidden", true);
    }
    if spec.prepare_unique {
        out.insert("prepareUnique", true);
    }
    out
}

pub(super) fn list_indexes(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(db) = readable_db(ctx, &ns, "listIndexes")? else {
        return Err(MongoError::namespace_not_found(format!("ns does not exist: {}", ns.full())));
    };
    let id_index = super::clustered::index(&super::coll_options::read(&db));
    let mut all =
        vec![id_index.unwrap_or_else(|| doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"})];
    all.extend(db.mongo_indexes().iter().map(|i| describe(&i.def)));
    Ok(cursor_reply(0, &ns.full(), "firstBatch", all))
}

pub(super) fn drop_indexes(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let Some(db) = ctx.server.engine.get_db(&ns.engine_name()) else {
        return Err(MongoError::namespace_not_found(format!("ns not found {}", ns.full())));
    };
    let before = 1 + db.mongo_indexes().len();
    let names = names_to_drop(&db, &ns, command.get("index"))?;
    let missing = db.drop_mongo_indexes(&user(ctx), &names)?;
    if let Some(name) = missing.first() {
        return Err(index_not_found(&ns, name));
    }
    Ok(doc! {"nIndexesWas": before as i32})
}

/// The index names `index` (a name, a key pattern, a list of names, or `"*"`) stands for.
fn names_to_drop(
    db: &Database,
    ns: &Namespace,
    index: Option<&Bson>,
) -> Result<Vec<String>, MongoError> {
    let all = db.mongo_indexes();
    let id_refused = || MongoError::new(72, "InvalidOptions", "cannot drop _id index");
    let id_name = super::clustered::id_index_name(db);
    match index {
        Some(Bson::String(s)) if s == "*" => Ok(all.iter().map(|i| i.def.name.clone()).collect()),
        Some(Bson::String(s)) if *s == id_name => Err(id_refused()),
        Some(Bson::String(s)) => Ok(vec![s.clone()]),
        Some(Bson::Array(names)) => names
            .iter()
            .map(|n| match n {
                Bson::String(s) if *s == id_name => Err(id_refused()),
                Bson::String(s) => Ok(s.clone()),
                _ => Err(MongoError::type_mismatch("dropIndexes names must be strings")),
            })
            .collect(),
        Some(Bson::Document(key)) => {
            if normalized(key) == doc! {"_id": 1} {
                return Err(id_refused());
            }
            match by_pattern(db, key) {
                Some(i) => Ok(vec![i.def.name.clone()]),
                None => Err(MongoError::new(
                    27,
                    "IndexNotFound",
                    format!("can't find index with key: {}", describe_key(key)),
                )),
            }
        }
        _ => Err(MongoError::failed_to_parse(format!(
            "BSON field 'dropIndexes.index' is missing but a required field ({})",
            ns.full()
        ))),
    }
}

/// The index a `hint` names: an index name, a key pattern, or `{$natural: 1}` (a
/// collection scan, [`NATURAL`]).
pub(super) fn hint(db: &Database, value: Option<&Bson>) -> Result<Option<String>, MongoError> {
    match value {
        // The `_id` index is the documents' own order: the planner's choice serves it.
        None => Ok(None),
        Some(Bson::String(name)) if *name == super::clustered::id_index_name(db) => Ok(None),
        Some(Bson::Document(key)) if key.len() == 1 && key.contains_key("_id") => Ok(None),
        Some(Bson::String(name)) => Ok(Some(name.clone())),
        Some(Bson::Document(key)) if key.contains_key("$natural") => Ok(Some(NATURAL.into())),
        Some(Bson::Document(key)) => {
            // An unknown pattern is the engine's "hint provided does not correspond…".
            let found = by_pattern(db, key);
            Ok(Some(found.map_or_else(|| default_name(key), |i| i.def.name.clone())))
        }
        Some(_) => Err(MongoError::failed_to_parse("hint must be a string or an object")),
    }
}

/// The order a `find` without a sort returns documents in when `hint` names an index with a
/// descending field: the index's, as MongoDB reads it (the engine keeps entries ascending
/// whatever the declared directions). Empty otherwise (the scan's own order), also for a
/// hashed or collated index, whose order no sort of the documents gives.
pub(super) fn hinted_order(
    db: &Database,
    hint: Option<&str>,
) -> Result<Vec<(bunko_query::FieldPath, bunko_query::Direction)>, MongoError> {
    let Some(name) = hint else { return Ok(Vec::new()) };
    let indexes = db.mongo_indexes();
    let spec = indexes.iter().find(|i| i.def.name == name).and_then(|i| i.def.mongo.as_ref());
    let Some(spec) = spec.filter(|s| s.hashed.is_none() && s.collation.is_none()) else {
        return Ok(Vec::new());
    };
    if spec.key.iter().all(|(_, dir)| *dir > 0) {
        return Ok(Vec::new());
    }
    let pattern: Document = spec.key.iter().map(|(f, d)| (f.clone(), Bson::Int32(*d))).collect();
    query::sort(&pattern)
}

/// `1` or `-1` of a key pattern's value.
fn direction(value: &Bson) -> i32 {
    let negative = match value {
        Bson::Int32(n) => *n < 0,
        Bson::Int64(n) => *n < 0,
        Bson::Double(d) => *d < 0.0,
        _ => false,
    };
    if negative { -1 } else { 1 }
}

pub(super) fn describe_key(key: &Document) -> String {
    let parts: Vec<String> = key.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    format!("{{ {} }}", parts.join(", "))
}

fn index_not_found(ns: &Namespace, name: &str) -> MongoError {
    MongoError::new(
        27,
        "IndexNotFound",
        format!("index not found with name [{name}] in collection {}", ns.full()),
    )
}
