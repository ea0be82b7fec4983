//! `collMod` on a time-series collection, with MongoDB 8's rules:
//!
//! - `timeseries: {granularity}` may only grow (`seconds` → `minutes` → `hours`; the same
//!   one is a no-op); with it, `bucketMaxSpanSeconds` only at the granularity's default and
//!   no `bucketRoundingSeconds`. `timeseries: {bucketMaxSpanSeconds, bucketRoundingSeconds}`
//!   come together, equal, and not below the current ones (a granularity's are its
//!   defaults); they replace the granularity. `timeseries: {}` is a no-op. Timeseries options
//!   come alone, with no other modification.
//! - `expireAfterSeconds`: a number sets or changes it (the hidden TTL index on the time
//!   field is made again with it), `"off"` removes it.
//! - The validator options and `changeStreamPreAndPostImages` are `option not supported on a
//!   time-series collection` (72), `cappedSize`/`cappedMax` `Collection must be capped.`
//!   (72).
//!
//! Bunko keeps no buckets, so the bucketing options only shape what `listCollections` shows
//! (and what later `collMod`s may do); `expireAfterSeconds` takes effect at once.

use std::sync::Arc;

use bson::{Bson, Document};
use bunko_engine::Database;

use super::admin::user;
use super::timeseries::{self as ts, invalid_options};
use super::{Ctx, coll_options};
use crate::error::MongoError;

/// The time-series collection's `collMod`.
pub(super) fn coll_mod(
    ctx: &mut Ctx,
    db: &Arc<Database>,
    command: &Document,
) -> Result<Document, MongoError> {
    let mut modifications = Vec::new();
    for key in command.keys().skip(1) {
        let key = key.as_str();
        match key {
            "validator"
            | "validationLevel"
            | "validationAction"
            | "changeStreamPreAndPostImages" => {
                return Err(invalid_options(format!(
                    "option not supported on a time-series collection: {key}"
                )));
            }
            "cappedSize" | "cappedMax" => {
                return Err(invalid_options("Collection must be capped."));
            }
            "timeseries" | "expireAfterSeconds" => modifications.push(key),
            // Its indexes are on the buckets' fields (`timeseries_index`): not built here.
            "index" => {
                return Err(MongoError::not_implemented(
                    "collMod's 'index' option on a time-series collection is not supported yet",
                ));
            }
            _ => {}
        }
    }
    if modifications.contains(&"timeseries") && modifications.len() > 1 {
        return Err(invalid_options(
            "time-series options cannot be modified together with other options",
        ));
    }
    let mut options = coll_options::read(db);
    if let Some(value) = command.get("timeseries") {
        let current = options.get_document("timeseries").cloned().unwrap_or_default();
        if let Some(changed) = bucketing(&current, value)? {
            options.insert("timeseries", changed);
        }
    }
    if let Some(value) = command.get("expireAfterSeconds") {
        let seconds = match value {
            Bson::String(off) if off == "off" => None,
            Bson::String(other) => {
                return Err(invalid_options(format!(
                    "Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: '{other}'. Accepted value is 'off'"
                )));
            }
            number => Some(ts::expire_after(number)?),
        };
        expire(ctx, db, &options, seconds)?;
        match seconds {
            Some(seconds) => options.insert("expireAfterSeconds", seconds),
            None => options.remove("expireAfterSeconds"),
        };
    }
    // Written even when nothing changed, as `collMod` always is (change streams see it).
    coll_options::replace(db, &user(ctx), options)?;
    Ok(Document::new())
}

/// The hidden TTL index made again for `seconds` (`None`: removed).
fn expire(
    ctx: &Ctx,
    db: &Database,
    options: &Document,
    seconds: Option<i64>,
) -> Result<(), MongoError> {
    let user = user(ctx);
    if options.get_i64("expireAfterSeconds").ok() == seconds {
        return Ok(());
    }
    if options.contains_key("expireAfterSeconds") {
        db.drop_mongo_indexes(&user, &[ts::TTL_INDEX.to_string()])?;
    }
    if let Some(seconds) = seconds {
        let fields = super::timeseries_index::Fields::of(options);
        let def = super::indexes::parse_spec(&ts::ttl_index(&fields.time, seconds))?;
        db.create_mongo_indexes(&user, vec![def])?;
    }
    Ok(())
}

/// The bucketing part of the options (`granularity`, `bucketMaxSpanSeconds`,
/// `bucketRoundingSeconds`) with `collMod`'s `timeseries` applied as MongoDB 8 applies it;
/// `None` when it changes nothing.
fn bucketing(current: &Document, value: &Bson) -> Result<Option<Document>, MongoError> {
    const FIELDS: &[&str] = &["granularity", "bucketMaxSpanSeconds", "bucketRoundingSeconds"];
    let Bson::Document(spec) = value else {
        return Err(MongoError::type_mismatch(format!(
            "BSON field 'collMod.timeseries' is the wrong type '{}', expected type 'object'",
            super::type_of(Some(value))
        )));
    };
    if let Some(field) = spec.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(MongoError::unknown_field(&format!("collMod.timeseries.{field}")));
    }
    let granularity = match spec.get("granularity") {
        None => None,
        Some(Bson::String(g)) => Some(g.as_str()),
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "BSON field 'collMod.timeseries.granularity' is the wrong type '{}', expected type 'string'",
                super::type_of(Some(other))
            )));
        }
    };
    let span = ts::seconds(spec, "collMod", "bucketMaxSpanSeconds")?;
    let rounding = ts::seconds(spec, "collMod", "bucketRoundingSeconds")?;
    if granularity.is_none() && span.is_none() && rounding.is_none() {
        return Ok(None);
    }
    let now = Bucketing::of(current)?;
    let target = match granularity {
        Some(target) => {
            let (default_span, default_rounding) = ts::defaults(target, "collMod")?;
            if span.is_some_and(|s| s != default_span) {
                return Err(invalid_options(
                    "Timeseries 'bucketMaxSpanSeconds' is not configurable to a value other than the default for the provided granularity",
                ));
            }
            if rounding.is_some() {
                return Err(invalid_options(
                    "Timeseries 'bucketRoundingSeconds' is not configurable alongside the granularity parameter",
                ));
            }
            if let Some(from) = now.granularity.as_deref() {
                return granularity_change(current, from, target);
            }
            (default_span, default_rounding)
        }
        None => match ts::custom_bucketing(span, rounding)? {
            Some(target) => target,
            None => return Ok(None),
        },
    };
    if (now.span, now.rounding) == target {
        return Ok(None);
    }
    if now.span > target.0 {
        return Err(invalid_options(
            "Timeseries 'bucketMaxSpanSeconds' needs to be equal or greater to transition",
        ));
    }
    if now.rounding > target.1 {
        return Err(invalid_options(
            "Timeseries 'bucketRoundingSeconds' needs to be equal or greater to transition",
        ));
    }
    let mut out = kept(current);
    match granularity {
        Some(granularity) => {
            out.insert("granularity", granularity);
            out.insert("bucketMaxSpanSeconds", target.0 as i32);
        }
        None => {
            out.insert("bucketRoundingSeconds", target.1 as i32);
            out.insert("bucketMaxSpanSeconds", target.0 as i32);
        }
    }
    Ok(Some(out))
}

/// From one granularity to another: only to a coarser one.
fn granularity_change(
    current: &Document,
    from: &str,
    to: &str,
) -> Result<Option<Document>, MongoError> {
    const ORDER: &[&str] = &["seconds", "minutes", "hours"];
    if from == to {
        return Ok(None);
    }
    let rank = |g: &str| ORDER.iter().position(|o| *o == g);
    if rank(to) < rank(from) || (from == "minutes" && to != "hours") {
        return Err(invalid_options(
            "Invalid transition for timeseries.granularity. Can only transition from 'seconds' to 'minutes' or 'minutes' to 'hours'.",
        ));
    }
    let mut out = kept(current);
    out.insert("granularity", to);
    out.insert("bucketMaxSpanSeconds", ts::defaults(to, "collMod")?.0 as i32);
    Ok(Some(out))
}

/// The options that name the fields (`timeField`, `metaField`), without the bucketing ones.
fn kept(current: &Document) -> Document {
    let names = ["timeField", "metaField"];
    current
        .iter()
        .filter(|(k, _)| names.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The collection's bucketing now: its granularity (if it has one) and its span and
/// rounding (a granularity's defaults when not set).
struct Bucketing {
    granularity: Option<String>,
    span: i64,
    rounding: i64,
}

impl Bucketing {
    fn of(current: &Document) -> Result<Self, MongoError> {
        let granularity = current.get_str("granularity").ok().map(str::to_string);
        let defaults = ts::defaults(granularity.as_deref().unwrap_or("seconds"), "collMod")?;
        let number = |field: &str| match current.get(field) {
            Some(Bson::Int32(n)) => Some(i64::from(*n)),
            Some(Bson::Int64(n)) => Some(*n),
            _ => None,
        };
        Ok(Bucketing {
            granularity,
            span: number("bucketMaxSpanSeconds").unwrap_or(defaults.0),
            rounding: number("bucketRoundingSeconds").unwrap_or(defaults.1),
        })
    }
}
