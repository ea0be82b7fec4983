//! Operators that measure or take apart one value: `$bsonSize` (a document's size in
//! BSON bytes), `$binarySize` (a string's UTF-8 bytes or a BinData's bytes), both ints, and
//! `$tsSecond`/`$tsIncrement` (a timestamp's parts, longs). Null or missing gives null;
//! another type is MongoDB's error (31393, 51276, 5687301, 5687302).

use bson::Bson;

use super::value::{is_nullish, type_name};
use super::{ExprError, Result};

fn arg(args: &[Bson]) -> &Bson {
    args.first().unwrap_or(&Bson::Null)
}

/// `$bsonSize`.
pub fn bson_size(_: &str, args: &[Bson]) -> Result<Bson> {
    match arg(args) {
        v if is_nullish(v) => Ok(Bson::Null),
        Bson::Document(d) => {
            let bytes = d.to_vec().map_err(|e| ExprError::bad_value(e.to_string()))?;
            Ok(Bson::Int32(i32::try_from(bytes.len()).unwrap_or(i32::MAX)))
        }
        v => Err(ExprError::location(
            31393,
            format!("$bsonSize requires a document input, found: {}", type_name(v)),
        )),
    }
}

/// `$binarySize`.
pub fn binary_size(_: &str, args: &[Bson]) -> Result<Bson> {
    let len = match arg(args) {
        v if is_nullish(v) => return Ok(Bson::Null),
        Bson::String(s) => s.len(),
        Bson::Binary(b) => b.bytes.len(),
        v => {
            return Err(ExprError::location(
                51276,
                format!(
                    "$binarySize requires a string or BinData argument, found: {}",
                    type_name(v)
                ),
            ));
        }
    };
    Ok(Bson::Int32(i32::try_from(len).unwrap_or(i32::MAX)))
}

/// `$tsSecond` and `$tsIncrement`.
pub fn timestamp_part(op: &str, args: &[Bson]) -> Result<Bson> {
    let code = if op == "$tsSecond" { 5687301 } else { 5687302 };
    match arg(args) {
        v if is_nullish(v) => Ok(Bson::Null),
        Bson::Timestamp(t) if op == "$tsSecond" => Ok(Bson::Int64(i64::from(t.time))),
        Bson::Timestamp(t) => Ok(Bson::Int64(i64::from(t.increment))),
        v => Err(ExprError::location(
            code,
            format!(" Argument to {op} must be a timestamp, but is {}", type_name(v)),
        )),
    }
}
