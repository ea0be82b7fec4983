//! Arithmetic operators. The result type is the widest of the operands (int < long <
//! double < decimal); an int or long result that overflows widens (int to long, long to
//! double), as MongoDB does. A null or missing operand makes the result null.

use bigdecimal::BigDecimal;
use bson::{Bson, DateTime};

use super::value::{decimal, is_nullish, to_f64, type_name};
use super::{ExprError, Result};

/// `$add` (also `$sum`'s running total).
pub(super) const ADD: Op = (i64::checked_add, |x, y| x + y, Some(|x, y| Some(x + y)));

/// The numeric width of a value.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Width {
    Int,
    Long,
    Double,
    Decimal,
}

fn width(v: &Bson) -> Option<Width> {
    match v {
        Bson::Int32(_) => Some(Width::Int),
        Bson::Int64(_) => Some(Width::Long),
        Bson::Double(_) => Some(Width::Double),
        Bson::Decimal128(_) => Some(Width::Decimal),
        _ => None,
    }
}

fn int_of(v: &Bson) -> i64 {
    match v {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        _ => 0,
    }
}

/// `a op b` in the wider of the two widths; in decimal through `exact` when one is a
/// Decimal128.
fn combine(a: &Bson, b: &Bson, (int, float, exact): Op) -> Bson {
    let w = width(a).max(width(b)).unwrap_or(Width::Double);
    match w {
        Width::Int | Width::Long => match int(int_of(a), int_of(b)) {
            Some(r) if w == Width::Int => {
                i32::try_from(r).map(Bson::Int32).unwrap_or(Bson::Int64(r))
            }
            Some(r) => Bson::Int64(r),
            None => Bson::Double(float(int_of(a) as f64, int_of(b) as f64)),
        },
        Width::Double => Bson::Double(float(to_f64(a).unwrap_or(0.0), to_f64(b).unwrap_or(0.0))),
        Width::Decimal => exact
            .and_then(|op| super::decimal::apply(a, b, op))
            .unwrap_or_else(|| decimal(float(to_f64(a).unwrap_or(0.0), to_f64(b).unwrap_or(0.0)))),
    }
}

/// The decimal form of an operation (`combine`'s `exact`).
type Exact = Option<fn(BigDecimal, BigDecimal) -> Option<BigDecimal>>;

/// An operation on integers (`None` on overflow), on doubles, and in decimal.
type Op = (fn(i64, i64) -> Option<i64>, fn(f64, f64) -> f64, Exact);

pub fn add(_: &str, args: &[Bson]) -> Result<Bson> {
    let mut total = Bson::Int32(0);
    let mut date: Option<DateTime> = None;
    for v in args {
        match v {
            _ if is_nullish(v) => return Ok(Bson::Null),
            Bson::DateTime(d) => {
                if date.replace(*d).is_some() {
                    return Err(ExprError::location(
                        16612,
                        "only one date allowed in an $add expression",
                    ));
                }
            }
            _ if width(v).is_some() => total = combine(&total, v, ADD),
            other => {
                return Err(ExprError::location(
                    16554,
                    format!("$add only supports numeric or date types, not {}", type_name(other)),
                ));
            }
        }
    }
    Ok(match date {
        Some(d) => Bson::DateTime(DateTime::from_millis(
            d.timestamp_millis().saturating_add(millis(&total)),
        )),
        None => total,
    })
}

/// A number of milliseconds (doubles are rounded, as MongoDB adds them to dates).
fn millis(v: &Bson) -> i64 {
    to_f64(v).map(|f| f.round() as i64).unwrap_or(0)
}

pub fn subtract(_: &str, args: &[Bson]) -> Result<Bson> {
    let [a, b] = args else { return Ok(Bson::Null) };
    if is_nullish(a) || is_nullish(b) {
        return Ok(Bson::Null);
    }
    match (a, b) {
        (Bson::DateTime(x), Bson::DateTime(y)) => {
            Ok(Bson::Int64(x.timestamp_millis().saturating_sub(y.timestamp_millis())))
        }
        (Bson::DateTime(x), n) if width(n).is_some() => Ok(Bson::DateTime(DateTime::from_millis(
            x.timestamp_millis().saturating_sub(millis(n)),
        ))),
        _ if width(a).is_some() && width(b).is_some() => {
            Ok(combine(a, b, (i64::checked_sub, |x, y| x - y, Some(|x, y| Some(x - y)))))
        }
        _ => Err(ExprError::location(
            16556,
            format!("can't $subtract {} from {}", type_name(b), type_name(a)),
        )),
    }
}

pub fn multiply(_: &str, args: &[Bson]) -> Result<Bson> {
    let mut total = Bson::Int32(1);
    for v in args {
        if is_nullish(v) {
            return Ok(Bson::Null);
        }
        if width(v).is_none() {
            return Err(ExprError::location(
                16555,
                format!("$multiply only supports numeric types, not {}", type_name(v)),
            ));
        }
        total = combine(&total, v, (i64::checked_mul, |x, y| x * y, Some(|x, y| Some(x * y))));
    }
    Ok(total)
}

pub(super) fn two_numbers<'a>(
    op: &str,
    code: i32,
    args: &'a [Bson],
) -> Result<Option<(&'a Bson, &'a Bson)>> {
    let [a, b] = args else { return Ok(None) };
    if is_nullish(a) || is_nullish(b) {
        return Ok(None);
    }
    if width(a).is_none() || width(b).is_none() {
        return Err(ExprError::location(
            code,
            format!("{op} only supports numeric types, not {} and {}", type_name(a), type_name(b)),
        ));
    }
    Ok(Some((a, b)))
}

pub fn divide(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some((a, b)) = two_numbers(op, 16609, args)? else { return Ok(Bson::Null) };
    let d = to_f64(b).unwrap_or(0.0);
    if d == 0.0 {
        return Err(ExprError::location(16608, "can't $divide by zero"));
    }
    let q = to_f64(a).unwrap_or(0.0) / d;
    if width(a).max(width(b)) != Some(Width::Decimal) {
        return Ok(Bson::Double(q));
    }
    Ok(super::decimal::apply(a, b, super::decimal::divide).unwrap_or_else(|| decimal(q)))
}

pub fn modulo(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some((a, b)) = two_numbers(op, 16611, args)? else { return Ok(Bson::Null) };
    if to_f64(b) == Some(0.0) {
        return Err(ExprError::location(16610, "can't $mod by zero"));
    }
    Ok(combine(a, b, (i64::checked_rem, |x, y| x % y, None)))
}

/// A one-argument numeric operator: null for null, an error for a non-number.
pub(super) fn unary(op: &str, args: &[Bson], f: impl Fn(&Bson) -> Result<Bson>) -> Result<Bson> {
    let v = args.first().unwrap_or(&Bson::Null);
    if is_nullish(v) {
        return Ok(Bson::Null);
    }
    if width(v).is_none() {
        return Err(ExprError::location(
            28765,
            format!("{op} only supports numeric types, not {}", type_name(v)),
        ));
    }
    f(v)
}

/// Applies a float function keeping the operand's width (ints stay ints).
fn keep_width(v: &Bson, f: fn(f64) -> f64) -> Bson {
    match v {
        Bson::Int32(_) | Bson::Int64(_) => v.clone(),
        Bson::Decimal128(_) => decimal(f(to_f64(v).unwrap_or(0.0))),
        _ => Bson::Double(f(to_f64(v).unwrap_or(0.0))),
    }
}

/// A float function whose result is a double (decimal for a decimal operand).
pub(super) fn float_result(v: &Bson, x: f64) -> Bson {
    if matches!(v, Bson::Decimal128(_)) { decimal(x) } else { Bson::Double(x) }
}

pub fn abs(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| match v {
        Bson::Int32(i) => {
            Ok(i.checked_abs().map(Bson::Int32).unwrap_or(Bson::Int64(-i64::from(*i))))
        }
        Bson::Int64(i) => i
            .checked_abs()
            .map(Bson::Int64)
            .ok_or_else(|| ExprError::location(28680, "can't take $abs of long long min")),
        other => Ok(float_result(other, to_f64(other).unwrap_or(0.0).abs())),
    })
}

pub fn ceil(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| Ok(keep_width(v, f64::ceil)))
}

pub fn floor(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| Ok(keep_width(v, f64::floor)))
}

pub fn sqrt(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| {
        let x = to_f64(v).unwrap_or(0.0);
        if x < 0.0 {
            return Err(ExprError::location(
                28714,
                "$sqrt's argument must be greater than or equal to 0",
            ));
        }
        Ok(float_result(v, x.sqrt()))
    })
}

pub fn exp(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| Ok(float_result(v, to_f64(v).unwrap_or(0.0).exp())))
}

pub fn ln(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| {
        let x = to_f64(v).unwrap_or(0.0);
        if x <= 0.0 {
            return Err(ExprError::location(
                28766,
                format!("$ln's argument must be a positive number, but is {x}"),
            ));
        }
        Ok(float_result(v, x.ln()))
    })
}

pub fn log10(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| {
        let x = to_f64(v).unwrap_or(0.0);
        if x <= 0.0 {
            return Err(ExprError::location(
                28761,
                format!("$log10's argument must be a positive number, but is {x}"),
            ));
        }
        Ok(float_result(v, x.log10()))
    })
}

pub fn log(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some((a, b)) = two_numbers(op, 28756, args)? else { return Ok(Bson::Null) };
    let (x, base) = (to_f64(a).unwrap_or(0.0), to_f64(b).unwrap_or(0.0));
    if x <= 0.0 {
        return Err(ExprError::location(
            28758,
            format!("$log's argument must be a positive number, but is {x}"),
        ));
    }
    if base <= 0.0 || base == 1.0 {
        return Err(ExprError::location(
            28759,
            format!("$log's base must be a positive number not equal to 1, but is {base}"),
        ));
    }
    Ok(float_result(if width(a) > width(b) { a } else { b }, x.ln() / base.ln()))
}

pub fn pow(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some((a, b)) = two_numbers(op, 28762, args)? else { return Ok(Bson::Null) };
    let (x, y) = (to_f64(a).unwrap_or(0.0), to_f64(b).unwrap_or(0.0));
    if x == 0.0 && y < 0.0 {
        return Err(ExprError::location(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    let w = width(a).max(width(b));
    if matches!(w, Some(Width::Int | Width::Long)) && y >= 0.0 {
        let exact = u32::try_from(int_of(b)).ok().and_then(|e| int_of(a).checked_pow(e));
        if let Some(r) = exact {
            return Ok(if w == Some(Width::Int) {
                i32::try_from(r).map(Bson::Int32).unwrap_or(Bson::Int64(r))
            } else {
                Bson::Int64(r)
            });
        }
    }
    Ok(float_result(if width(a) > width(b) { a } else { b }, x.powf(y)))
}

fn places(op: &str, args: &[Bson]) -> Result<Option<i32>> {
    match args.get(1) {
        None => Ok(Some(0)),
        Some(v) if is_nullish(v) => Ok(None),
        Some(v) => match super::value::to_int(v) {
            Some(p) if (-20..100).contains(&p) => Ok(Some(p as i32)),
            _ => Err(ExprError::location(
                51155,
                format!("{op} requires \"place\" argument to be an integer between -20 and 100"),
            )),
        },
    }
}

fn round_with(op: &str, args: &[Bson], f: fn(f64) -> f64) -> Result<Bson> {
    let Some(place) = places(op, args)? else { return Ok(Bson::Null) };
    unary(op, args, |v| {
        let scale = 10f64.powi(place);
        let r = |x: f64| f(x * scale) / scale;
        Ok(match v {
            Bson::Int32(i) if place < 0 => Bson::Int32(r(f64::from(*i)) as i32),
            Bson::Int64(i) if place < 0 => Bson::Int64(r(*i as f64) as i64),
            Bson::Int32(_) | Bson::Int64(_) => v.clone(),
            other => float_result(other, r(to_f64(other).unwrap_or(0.0))),
        })
    })
}

/// Rounds half to even, as MongoDB's `$round`.
fn round_half_even(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 { 2.0 * (x / 2.0).round() } else { r }
}

pub fn round(op: &str, args: &[Bson]) -> Result<Bson> {
    round_with(op, args, round_half_even)
}

pub fn trunc(op: &str, args: &[Bson]) -> Result<Bson> {
    round_with(op, args, f64::trunc)
}
