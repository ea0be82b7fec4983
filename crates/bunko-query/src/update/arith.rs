//! `$inc`, `$mul`, `$min`, `$max` and `$bit`. Arithmetic keeps the narrowest type that holds
//! the result: int32 overflowing becomes int64, anything with a double is a double; an int64
//! overflow is an error, as in MongoDB. Decimal128 arithmetic is not implemented.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::{UpdateError, cmp, path, render, type_name};

/// Checks the argument of `$inc` (`verb` "increment") or `$mul` ("multiply").
pub fn operand(verb: &str, field: &str, value: Bson) -> Result<Bson, UpdateError> {
    if !is_number(&value) {
        return Err(UpdateError::type_mismatch(format!(
            "Cannot {verb} with non-numeric argument: {{{field}: {}}}",
            render::value(&value)
        )));
    }
    Ok(value)
}

pub fn inc(doc: &mut Document, at: &[String], by: &Bson) -> Result<(), UpdateError> {
    arithmetic(doc, at, by, "$inc", add)
}

pub fn mul(doc: &mut Document, at: &[String], by: &Bson) -> Result<(), UpdateError> {
    arithmetic(doc, at, by, "$mul", multiply)
}

fn arithmetic(
    doc: &mut Document,
    at: &[String],
    by: &Bson,
    name: &str,
    op: fn(&Bson, &Bson) -> Option<Bson>,
) -> Result<(), UpdateError> {
    let new = match path::get(doc, at) {
        // A new field is `0 op by`: `by` for $inc, a zero of `by`'s type for $mul.
        None => op(&zero_like(by), by).unwrap_or(Bson::Int32(0)),
        Some(current) if is_number(current) => op(current, by).ok_or_else(|| {
            UpdateError::bad_value(format!(
                "Failed to apply {name} operations to current value ({}) for document {{{}}}",
                render::value(current),
                render::id_of(doc)
            ))
        })?,
        Some(current) => {
            return Err(UpdateError::type_mismatch(format!(
                "Cannot apply {name} to a value of non-numeric type. {{{}}} has the field '{}' of non-numeric type {}",
                render::id_of(doc),
                at.last().map_or("", String::as_str),
                type_name(current)
            )));
        }
    };
    path::set(doc, at, new)
}

fn zero_like(v: &Bson) -> Bson {
    match v {
        Bson::Int64(_) => Bson::Int64(0),
        Bson::Double(_) => Bson::Double(0.0),
        _ => Bson::Int32(0),
    }
}

/// `$min` (`keep` Less) and `$max` (Greater): set when the new value compares `keep`-wise
/// to the current one, or the field is missing.
pub fn min_max(
    doc: &mut Document,
    at: &[String],
    value: &Bson,
    keep: Ordering,
) -> Result<(), UpdateError> {
    match path::get(doc, at) {
        Some(current) if cmp(value, current) != keep => Ok(()),
        _ => path::set(doc, at, value.clone()),
    }
}

fn is_number(v: &Bson) -> bool {
    matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))
}

fn add(a: &Bson, b: &Bson) -> Option<Bson> {
    Some(match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => {
            x.checked_add(*y).map_or(Bson::Int64(i64::from(*x) + i64::from(*y)), Bson::Int32)
        }
        (Bson::Double(_), _) | (_, Bson::Double(_)) => Bson::Double(as_f64(a)? + as_f64(b)?),
        _ => Bson::Int64(as_i64(a)?.checked_add(as_i64(b)?)?),
    })
}

fn multiply(a: &Bson, b: &Bson) -> Option<Bson> {
    Some(match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => {
            x.checked_mul(*y).map_or(Bson::Int64(i64::from(*x) * i64::from(*y)), Bson::Int32)
        }
        (Bson::Double(_), _) | (_, Bson::Double(_)) => Bson::Double(as_f64(a)? * as_f64(b)?),
        _ => Bson::Int64(as_i64(a)?.checked_mul(as_i64(b)?)?),
    })
}

fn as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

fn as_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

/// One bitwise operation of `$bit`.
#[derive(Clone, Debug)]
pub struct Bit {
    op: BitOp,
    value: Bson,
}

#[derive(Clone, Copy, Debug)]
enum BitOp {
    And,
    Or,
    Xor,
}

/// Parses `{and|or|xor: <int>, …}`.
pub fn parse_bit(field: &str, spec: &Bson) -> Result<Vec<Bit>, UpdateError> {
    let Bson::Document(ops) = spec else {
        return Err(UpdateError::bad_value(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded document: {{$bit: {{field: {{and/or/xor: #}}}}",
            type_name(spec)
        )));
    };
    if ops.is_empty() {
        return Err(UpdateError::bad_value(format!(
            "You must pass in at least one bitwise operation. The format is: {{$bit: {{field: {{and/or/xor: #}}}}. {{{field}: {{}}}}"
        )));
    }
    ops.iter()
        .map(|(name, value)| {
            let op = match name.as_str() {
                "and" => BitOp::And,
                "or" => BitOp::Or,
                "xor" => BitOp::Xor,
                other => {
                    return Err(UpdateError::bad_value(format!(
                        "The $bit modifier only supports 'and', 'or', and 'xor', not '{other}' which is an unknown operator: {{{other}: {}}}",
                        render::value(value)
                    )));
                }
            };
            if !matches!(value, Bson::Int32(_) | Bson::Int64(_)) {
                return Err(UpdateError::bad_value(format!(
                    "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported here: {{{name}: {}}}",
                    type_name(value),
                    render::value(value)
                )));
            }
            Ok(Bit { op, value: value.clone() })
        })
        .collect()
}

pub fn bit(doc: &mut Document, at: &[String], bits: &[Bit]) -> Result<(), UpdateError> {
    let mut current = match path::get(doc, at) {
        None => Bson::Int32(0),
        Some(v @ (Bson::Int32(_) | Bson::Int64(_))) => v.clone(),
        Some(other) => {
            return Err(UpdateError::bad_value(format!(
                "Cannot apply $bit to a value of non-integral type.{{{}}} has the field {} of non-integer type {}",
                render::id_of(doc),
                at.last().map_or("", String::as_str),
                type_name(other)
            )));
        }
    };
    for bit in bits {
        current = match (&current, &bit.value) {
            (Bson::Int32(a), Bson::Int32(b)) => Bson::Int32(bit.op.apply32(*a, *b)),
            (a, b) => Bson::Int64(bit.op.apply64(as_i64(a).unwrap_or(0), as_i64(b).unwrap_or(0))),
        };
    }
    path::set(doc, at, current)
}

impl BitOp {
    fn apply32(self, a: i32, b: i32) -> i32 {
        match self {
            BitOp::And => a & b,
            BitOp::Or => a | b,
            BitOp::Xor => a ^ b,
        }
    }

    fn apply64(self, a: i64, b: i64) -> i64 {
        match self {
            BitOp::And => a & b,
            BitOp::Or => a | b,
            BitOp::Xor => a ^ b,
        }
    }
}
