//! Time-series collections: `create` with `timeseries` (and `expireAfterSeconds`).
//!
//! MongoDB stores a time-series collection's measurements in buckets (a `system.buckets.*`
//! collection behind a view); what its users see is a collection of measurements whose
//! `_id`s may repeat, whose time field is a BSON date, and which expire
//! `expireAfterSeconds` after their time. Bunko keeps documents under their `_id`, so a
//! time-series collection stores each measurement as one engine document under an
//! internal key (a new ObjectId) with the measurement, as sent, under `m`:
//! `{_id: <key>, m: {<the measurement, its _id included>}}`. The collection's options sit
//! in its `_design/mongodb` like every collection's ([`coll_options`]); reads (`find`,
//! `aggregate`, `count`, `distinct`) go through [`super::views`] with the pipeline
//! `[{$replaceRoot: {newRoot: "$m"}}]` ([`pipeline`]), so every query and aggregation
//! works over the measurements; writes are [`super::timeseries_write`]. `expireAfterSeconds`
//! is a TTL index on `m.<timeField>` that the TTL monitor runs like any other
//! ([`crate::ttl`]); it is not listed. With a `metaField`, `create` makes the
//! `{<metaField>: 1, <timeField>: 1}` index MongoDB 6.3+ makes; reads are moved onto the
//! stored form where they can be so that indexes serve them ([`super::timeseries_query`]);
//! index commands are [`super::timeseries_index`]. There is no `system.buckets.*`
//! collection to list (as in MongoDB's later "viewless" time-series collections).
//!
//! `collMod` is [`super::timeseries_coll_mod`]. Not built, and refused: time-series
//! collections in transactions.

use bson::{Bson, Document, doc};
use bunko_engine::Error;

use super::admin::user;
use super::{Ctx, coll_options, namespace};
use crate::error::MongoError;

/// The fields of `create` that may come with `timeseries` (besides the generic ones).
const ALLOWED: &[&str] = &["timeseries", "expireAfterSeconds", "writeConcern"];

/// The name of the TTL index that `expireAfterSeconds` is kept as.
pub(super) const TTL_INDEX: &str = "$timeseries_ttl";

/// MongoDB's largest `bucketMaxSpanSeconds` (a year).
const MAX_SPAN: i64 = 31_536_000;

/// The pipeline that reads the measurements of a time-series collection.
pub(super) fn pipeline() -> Vec<Bson> {
    vec![Bson::Document(doc! {"$replaceRoot": {"newRoot": "$m"}})]
}

pub(super) fn invalid_options(message: impl Into<String>) -> MongoError {
    MongoError::new(72, "InvalidOptions", message)
}

/// `create` with `timeseries`: the options checked as MongoDB 8 checks them, defaults
/// filled in, stored; `expireAfterSeconds` becomes the TTL index.
pub(super) fn create(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    for (field, value) in command.iter().skip(1) {
        let generic = super::GENERIC.contains(&field.as_str());
        let plain = field == "capped" && matches!(value, Bson::Boolean(false));
        if !generic && !plain && !ALLOWED.contains(&field.as_str()) {
            return Err(invalid_options(format!(
                "{}: 'timeseries' is not allowed with '{field}'",
                ns.full()
            )));
        }
    }
    let options = options(&ns.full(), command)?;
    let db = match ctx.server.engine.create_db(&user(ctx), &ns.engine_name(), false) {
        Ok(db) => db,
        Err(Error::FileExists) => {
            let same =
                ctx.server.engine.get_db(&ns.engine_name()).map(|db| coll_options::read(&db));
            if same.as_ref() == Some(&options) {
                return Ok(Document::new());
            }
            return Err(MongoError::namespace_exists(format!(
                "Collection {} already exists.",
                ns.full()
            )));
        }
        Err(err) => return Err(err.into()),
    };
    super::roles::grant(&db, &user(ctx))?;
    coll_options::write(&db, &user(ctx), options.clone())?;
    let fields = super::timeseries_index::Fields::of(&options);
    let mut specs: Vec<Bson> =
        super::timeseries_index::default_index(&fields).into_iter().collect();
    if let Ok(seconds) = options.get_i64("expireAfterSeconds") {
        specs.push(ttl_index(&fields.time, seconds));
    }
    if !specs.is_empty() {
        let defs = specs.iter().map(super::indexes::parse_spec).collect::<Result<Vec<_>, _>>()?;
        db.create_mongo_indexes(&user(ctx), defs)?;
    }
    Ok(Document::new())
}

/// The spec of the hidden TTL index that keeps `expireAfterSeconds` on the time field.
pub(super) fn ttl_index(time_field: &str, seconds: i64) -> Bson {
    Bson::Document(doc! {
        "key": {super::timeseries_query::stored_path(time_field): 1},
        "name": TTL_INDEX,
        "expireAfterSeconds": seconds,
    })
}

/// The stored options of a `create` with `timeseries`: `{timeseries, expireAfterSeconds?}`.
fn options(ns: &str, command: &Document) -> Result<Document, MongoError> {
    let spec = match command.get("timeseries") {
        Some(Bson::Document(spec)) => spec,
        other => {
            return Err(MongoError::type_mismatch(format!(
                "BSON field 'create.timeseries' is the wrong type '{}', expected type 'object'",
                super::type_of(other)
            )));
        }
    };
    let mut out = doc! {"timeseries": timeseries(ns, spec)?};
    if let Some(value) = command.get("expireAfterSeconds") {
        out.insert("expireAfterSeconds", expire_after(value)?);
    }
    Ok(out)
}

/// An `expireAfterSeconds` number, checked as MongoDB checks it.
pub(super) fn expire_after(value: &Bson) -> Result<i64, MongoError> {
    let seconds = match value {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if *d < 0.0 => -1,
        Bson::Double(d) if d.fract() == 0.0 => *d as i64,
        _ => return Err(MongoError::bad_value("'expireAfterSeconds' must be a number.")),
    };
    if seconds < 0 {
        return Err(invalid_options("TTL index 'expireAfterSeconds' option cannot be less than 0"));
    }
    if seconds > i64::from(i32::MAX) {
        return Err(invalid_options(
            "TTL index 'expireAfterSeconds' must be within the range of a 32-bit integer",
        ));
    }
    Ok(seconds)
}

/// The `timeseries` option checked, with MongoDB 8's defaults filled in.
fn timeseries(ns: &str, spec: &Document) -> Result<Document, MongoError> {
    const FIELDS: &[&str] =
        &["timeField", "metaField", "granularity", "bucketMaxSpanSeconds", "bucketRoundingSeconds"];
    if let Some(field) = spec.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(MongoError::unknown_field(&format!("create.timeseries.{field}")));
    }
    let string = |field: &str| -> Result<Option<String>, MongoError> {
        match spec.get(field) {
            None => Ok(None),
            Some(Bson::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(MongoError::type_mismatch(format!(
                "BSON field 'create.timeseries.{field}' is the wrong type '{}', expected type 'string'",
                super::type_of(Some(other))
            ))),
        }
    };
    let Some(time_field) = string("timeField")? else {
        return Err(MongoError::new(
            40414,
            "Location40414",
            "BSON field 'create.timeseries.timeField' is missing but a required field",
        ));
    };
    let top_level = |field: &str| {
        invalid_options(format!("{ns}: '{field}' must be a top-level field and not contain a '.'"))
    };
    if time_field.contains('.') {
        return Err(top_level("timeField"));
    }
    let meta_field = string("metaField")?;
    if let Some(meta) = &meta_field {
        if meta == "_id" {
            return Err(invalid_options("'metaField' cannot be \"_id\""));
        }
        if *meta == time_field {
            return Err(invalid_options("'metaField' cannot be the same as 'timeField'"));
        }
        if meta.contains('.') {
            return Err(top_level("metaField"));
        }
    }
    let granularity = string("granularity")?;
    let defaults = defaults(granularity.as_deref().unwrap_or("seconds"), "create")?;
    let span = seconds(spec, "create", "bucketMaxSpanSeconds")?;
    let rounding = seconds(spec, "create", "bucketRoundingSeconds")?;
    let mut out = doc! {"timeField": &time_field};
    if let Some(meta) = meta_field {
        out.insert("metaField", meta);
    }
    if let Some(granularity) = granularity {
        if span.is_some_and(|s| s != defaults.0) {
            return Err(invalid_options(format!(
                "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other than the default of {} for the provided granularity",
                defaults.0
            )));
        }
        if rounding.is_some_and(|r| r != defaults.1) {
            return Err(invalid_options(format!(
                "Timeseries 'bucketRoundingSeconds' is not configurable to a value other than the default of {} for the provided granularity",
                defaults.1
            )));
        }
        out.insert("granularity", granularity);
        out.insert("bucketMaxSpanSeconds", defaults.0 as i32);
        return Ok(out);
    }
    match custom_bucketing(span, rounding)? {
        None => {
            out.insert("granularity", "seconds");
            out.insert("bucketMaxSpanSeconds", defaults.0 as i32);
        }
        Some((span, rounding)) => {
            out.insert("bucketRoundingSeconds", rounding as i32);
            out.insert("bucketMaxSpanSeconds", span as i32);
        }
    }
    Ok(out)
}

/// `bucketMaxSpanSeconds` and `bucketRoundingSeconds` without a granularity: both or
/// neither (`None`), and equal.
pub(super) fn custom_bucketing(
    span: Option<i64>,
    rounding: Option<i64>,
) -> Result<Option<(i64, i64)>, MongoError> {
    match (span, rounding) {
        (None, None) => Ok(None),
        (Some(span), Some(rounding)) if span == rounding => Ok(Some((span, rounding))),
        (Some(_), Some(_)) => Err(invalid_options(
            "Timeseries 'bucketRoundingSeconds' needs to be equal to 'bucketMaxSpanSeconds'",
        )),
        _ => Err(invalid_options(
            "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other",
        )),
    }
}

/// A granularity's `bucketMaxSpanSeconds` and `bucketRoundingSeconds` (`command`, `create`
/// or `collMod`, names the field in MongoDB's refusal of another name).
pub(super) fn defaults(granularity: &str, command: &str) -> Result<(i64, i64), MongoError> {
    match granularity {
        "seconds" => Ok((3600, 60)),
        "minutes" => Ok((86_400, 3600)),
        "hours" => Ok((2_592_000, 86_400)),
        other => Err(MongoError::bad_value(format!(
            "Enumeration value '{other}' for field '{command}.timeseries.granularity' is not a valid value."
        ))),
    }
}

/// `bucketMaxSpanSeconds` or `bucketRoundingSeconds` of `command`'s `timeseries`: a whole
/// number from 1 to a year.
pub(super) fn seconds(
    spec: &Document,
    command: &str,
    field: &str,
) -> Result<Option<i64>, MongoError> {
    let n = match spec.get(field) {
        None => return Ok(None),
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(d)) if d.fract() == 0.0 => *d as i64,
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "BSON field '{command}.timeseries.{field}' is the wrong type '{}', expected type 'int'",
                super::type_of(Some(other))
            )));
        }
    };
    let bound = if n < 1 { ">= 1" } else { "<= 31536000" };
    if !(1..=MAX_SPAN).contains(&n) {
        return Err(MongoError::new(
            51024,
            "Location51024",
            format!(
                "BSON field '{command}.timeseries.{field}' value must be {bound}, actual value '{n}'"
            ),
        ));
    }
    Ok(Some(n))
}

/// How `listCollections` shows a time-series collection.
pub(super) fn listed(name: String, options: Document) -> Document {
    doc! {"name": name, "type": "timeseries", "options": options, "info": {"readOnly": false}}
}

/// `create`'s `expireAfterSeconds` without `timeseries`: MongoDB's refusal, or
/// `NotImplemented` on a clustered collection (a TTL on `_id`).
pub(super) fn check_plain_expiry(command: &Document) -> Result<(), MongoError> {
    if !command.contains_key("expireAfterSeconds") {
        return Ok(());
    }
    if command.contains_key("clusteredIndex") {
        return Err(MongoError::not_implemented(
            "expireAfterSeconds on a clustered collection is not supported yet",
        ));
    }
    Err(invalid_options(
        "'expireAfterSeconds' is only supported on time-series collections or when the 'clusteredIndex' option is specified",
    ))
}

/// Refuses a command of a transaction on a time-series collection: MongoDB's
/// `OperationNotSupportedInTransaction` for writes; reads are not built.
pub(super) fn outside_transactions(ctx: &Ctx, command: &Document) -> Result<(), MongoError> {
    let Some((name, Bson::String(coll))) = command.iter().next() else { return Ok(()) };
    let Ok(ns) = crate::names::Namespace::new(&ctx.db, coll) else { return Ok(()) };
    if !super::views::is_timeseries(&ctx.server.engine, &ns) {
        return Ok(());
    }
    if ["find", "aggregate", "count", "distinct"].contains(&name.as_str()) {
        return Err(MongoError::not_implemented(
            "reading a time-series collection in a transaction is not supported yet",
        ));
    }
    Err(MongoError::new(
        263,
        "OperationNotSupportedInTransaction",
        format!("Cannot {name} on a time-series collection in a multi-document transaction"),
    ))
}
