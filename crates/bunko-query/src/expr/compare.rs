//! Comparison operators (`$cmp $eq $ne $gt $gte $lt $lte`) in MongoDB's BSON order; a
//! missing operand compares as null.

use bson::Bson;

use super::Result;
use super::value::{compare, or_null};

pub fn cmp(op: &str, args: &[Bson]) -> Result<Bson> {
    let [a, b] = args else { return Ok(Bson::Null) };
    let ord = compare(&or_null(a.clone()), &or_null(b.clone()));
    Ok(match op {
        "$cmp" => Bson::Int32(ord as i32),
        "$eq" => Bson::Boolean(ord.is_eq()),
        "$ne" => Bson::Boolean(ord.is_ne()),
        "$gt" => Bson::Boolean(ord.is_gt()),
        "$gte" => Bson::Boolean(ord.is_ge()),
        "$lt" => Bson::Boolean(ord.is_lt()),
        _ => Bson::Boolean(ord.is_le()),
    })
}
