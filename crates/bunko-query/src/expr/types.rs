//! Type operators: `$type`, `$isNumber`, `$convert` and its shorthands (`$toString`,
//! `$toInt`, `$toLong`, `$toDouble`, `$toDecimal`, `$toBool`, `$toDate`,
//! `$toObjectId`). A conversion that cannot be done is `ConversionFailure` (241) unless
//! `onError` is given; a null or missing input is null (or `onNull`).

use bson::oid::ObjectId;
use bson::{Bson, DateTime};

use super::ops::{eval_named, named};
use super::value::{decimal, is_nullish, is_number, to_f64, type_name};
use super::{Args, ExprError, Result, Vars};

pub fn type_(_: &str, args: &[Bson]) -> Result<Bson> {
    Ok(Bson::String(type_name(args.first().unwrap_or(&Bson::Undefined)).to_string()))
}

pub fn is_number_(_: &str, args: &[Bson]) -> Result<Bson> {
    Ok(Bson::Boolean(args.first().is_some_and(is_number)))
}

fn failure(v: &Bson, to: &str, why: &str) -> ExprError {
    ExprError::new(
        241,
        "ConversionFailure",
        format!(
            "Unsupported conversion from {} to {to} in $convert with no onError value{why}",
            type_name(v)
        ),
    )
}

fn fail_parse(v: &Bson, to: &str) -> ExprError {
    ExprError::new(241, "ConversionFailure", format!("Failed to parse {to} from string: {v}"))
}

/// The canonical name of a `to` type (a name or a BSON type number).
fn target(v: &Bson) -> Result<&'static str> {
    let name = match v {
        Bson::String(s) => s.as_str(),
        Bson::Document(d) => {
            return d
                .get("type")
                .map_or(Err(ExprError::failed_to_parse("$convert's 'to' needs a 'type'")), target);
        }
        n => match super::value::to_int(n) {
            Some(1) => "double",
            Some(2) => "string",
            Some(7) => "objectId",
            Some(8) => "bool",
            Some(9) => "date",
            Some(16) => "int",
            Some(18) => "long",
            Some(19) => "decimal",
            Some(10) => "null",
            _ => {
                return Err(ExprError::bad_value(format!(
                    "In $convert, numeric 'to' argument is not a valid type: {n}"
                )));
            }
        },
    };
    ["double", "string", "objectId", "bool", "date", "int", "long", "decimal", "null"]
        .into_iter()
        .find(|t| *t == name)
        .ok_or_else(|| ExprError::bad_value(format!("Unknown type name: {name}")))
}

/// Converts `v` to `to`.
pub fn convert_value(v: &Bson, to: &str) -> Result<Bson> {
    let f = to_f64(v).filter(|_| is_number(v));
    let int_in = |lo: f64, hi: f64| -> Result<f64> {
        match f {
            Some(x) if x.is_nan() || x.is_infinite() => Err(ExprError::new(
                241,
                "ConversionFailure",
                format!(
                    "Attempt to convert NaN or infinity value to integer type in $convert with no onError value: {v}"
                ),
            )),
            Some(x) if x.trunc() < lo || x.trunc() > hi => Err(ExprError::new(
                241,
                "ConversionFailure",
                format!(
                    "Conversion would overflow target type in $convert with no onError value: {v}"
                ),
            )),
            Some(x) => Ok(x.trunc()),
            None => Err(failure(v, to, "")),
        }
    };
    Ok(match (to, v) {
        ("null", _) => Bson::Null,
        ("double", Bson::String(s)) => Bson::Double(s.trim().parse().map_err(|_| fail_parse(v, "double"))?),
        ("double", Bson::Boolean(b)) => Bson::Double(if *b { 1.0 } else { 0.0 }),
        ("double", Bson::DateTime(d)) => Bson::Double(d.timestamp_millis() as f64),
        ("double", _) => Bson::Double(f.ok_or_else(|| failure(v, to, ""))?),
        ("decimal", Bson::String(s)) => s.parse().map(Bson::Decimal128).map_err(|_| fail_parse(v, "decimal"))?,
        ("decimal", Bson::Boolean(b)) => decimal_int(i64::from(*b)),
        ("decimal", Bson::DateTime(d)) => decimal_int(d.timestamp_millis()),
        ("decimal", Bson::Int32(i)) => decimal_int(i64::from(*i)),
        ("decimal", Bson::Int64(i)) => decimal_int(*i),
        ("decimal", Bson::Double(x)) => super::decimal::double_to_bson(*x),
        ("decimal", Bson::Decimal128(_)) => v.clone(),
        ("decimal", _) => decimal(f.ok_or_else(|| failure(v, to, ""))?),
        ("int", Bson::String(s)) => Bson::Int32(s.parse().map_err(|_| fail_parse(v, "int"))?),
        ("int", Bson::Boolean(b)) => Bson::Int32(i32::from(*b)),
        ("int", Bson::Int32(_)) => v.clone(),
        ("int", _) => Bson::Int32(int_in(f64::from(i32::MIN), f64::from(i32::MAX))? as i32),
        ("long", Bson::String(s)) => Bson::Int64(s.parse().map_err(|_| fail_parse(v, "long"))?),
        ("long", Bson::Boolean(b)) => Bson::Int64(i64::from(*b)),
        ("long", Bson::Int32(i)) => Bson::Int64(i64::from(*i)),
        ("long", Bson::Int64(_)) => v.clone(),
        ("long", Bson::DateTime(d)) => Bson::Int64(d.timestamp_millis()),
        ("long", _) => Bson::Int64(int_in(-9.223_372_036_854_776e18, 9.223_372_036_854_775e18)? as i64),
        ("bool", Bson::Boolean(_)) => v.clone(),
        ("bool", _) if is_number(v) => Bson::Boolean(f != Some(0.0)),
        ("bool", _) => Bson::Boolean(true),
        ("string", Bson::String(_)) => v.clone(),
        ("string", Bson::Int32(i)) => Bson::String(i.to_string()),
        ("string", Bson::Int64(i)) => Bson::String(i.to_string()),
        ("string", Bson::Double(d)) => Bson::String(double_string(*d)),
        ("string", Bson::Decimal128(d)) => Bson::String(d.to_string()),
        ("string", Bson::Boolean(b)) => Bson::String(b.to_string()),
        ("string", Bson::ObjectId(o)) => Bson::String(o.to_hex()),
        ("string", Bson::DateTime(d)) => Bson::String(super::date::iso(*d)),
        ("objectId", Bson::ObjectId(_)) => v.clone(),
        ("objectId", Bson::String(s)) => Bson::ObjectId(ObjectId::parse_str(s).map_err(|_| {
            ExprError::new(241, "ConversionFailure", format!("Failed to parse objectId '{s}' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found {}", s.len()))
        })?),
        ("date", Bson::DateTime(_)) => v.clone(),
        ("date", Bson::String(s)) => Bson::DateTime(super::date::parse_date(s).ok_or_else(|| {
            ExprError::new(241, "ConversionFailure", format!("Error parsing date string '{s}'"))
        })?),
        ("date", Bson::ObjectId(o)) => Bson::DateTime(DateTime::from_millis(o.timestamp().timestamp_millis())),
        ("date", Bson::Int64(i)) => Bson::DateTime(DateTime::from_millis(*i)),
        ("date", Bson::Double(d)) => Bson::DateTime(DateTime::from_millis(*d as i64)),
        ("date", Bson::Decimal128(_)) => Bson::DateTime(DateTime::from_millis(f.unwrap_or(0.0) as i64)),
        ("date", Bson::Timestamp(t)) => Bson::DateTime(DateTime::from_millis(i64::from(t.time) * 1000)),
        _ => return Err(failure(v, to, "")),
    })
}

/// A double as MongoDB prints it in `$toString` (`1.5`, `2`, `1e+21`).
fn double_string(d: f64) -> String {
    if d.is_nan() {
        "NaN".into()
    } else if d.is_infinite() {
        if d > 0.0 { "Infinity".into() } else { "-Infinity".into() }
    } else {
        format!("{d}")
    }
}

pub fn to(op: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().unwrap_or(&Bson::Null);
    if is_nullish(v) {
        return Ok(Bson::Null);
    }
    let to = match op {
        "$toString" => "string",
        "$toInt" => "int",
        "$toLong" => "long",
        "$toDouble" => "double",
        "$toDecimal" => "decimal",
        "$toBool" => "bool",
        "$toDate" => "date",
        _ => "objectId",
    };
    convert_value(v, to)
}

/// `$toUUID` (MongoDB 8.0): a string in the UUID's text form as binary subtype 4.
pub fn to_uuid(_: &str, args: &[Bson]) -> Result<Bson> {
    match args.first().unwrap_or(&Bson::Null) {
        v if is_nullish(v) => Ok(Bson::Null),
        Bson::String(s) => match bson::Uuid::parse_str(s) {
            Ok(uuid) => Ok(Bson::Binary(bson::Binary::from_uuid(uuid))),
            Err(_) => Err(ExprError::new(
                241,
                "ConversionFailure",
                format!(
                    "Failed to parse BinData '{s}' in $convert with no onError value: Invalid UUID string: {s}"
                ),
            )),
        },
        v => Err(failure(v, "binData", "")),
    }
}

/// `$toHashedIndexKey`: the value's hash as a hashed index holds it (an int64).
pub fn hashed_index_key(_: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().filter(|v| **v != super::MISSING).unwrap_or(&Bson::Null);
    Ok(Bson::Int64(bunko_doc::bson_hash::hash64(v)))
}

pub fn convert(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let input = eval_named(args, "input", vars)?;
    let to = eval_named(args, "to", vars)?;
    if is_nullish(&input) {
        return super::date::on_null(args, vars);
    }
    if is_nullish(&to) {
        return Ok(Bson::Null);
    }
    match target(&to).and_then(|t| convert_value(&input, t)) {
        Ok(v) => Ok(v),
        Err(e) if e.code == 241 => match named(args, "onError") {
            Some(h) => h.eval(vars),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// An integer as a Decimal128, exactly.
fn decimal_int(i: i64) -> Bson {
    super::decimal::to_bson(&bigdecimal::BigDecimal::from(i)).unwrap_or(Bson::Int64(i))
}
