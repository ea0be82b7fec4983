//! Trigonometric operators (`$sin` … `$atanh`, `$atan2`, `$degreesToRadians`,
//! `$radiansToDegrees`), as MongoDB evaluates them: a number in, a double out (a Decimal128
//! for a Decimal128 operand, computed through a double), null for null or missing, NaN for
//! NaN, and MongoDB's bounds: `$sin`, `$cos`, `$tan` take finite values, `$asin`, `$acos`,
//! `$atanh` values in [-1, 1], `$acosh` values from 1 (`cannot apply $acos to 2, value must
//! be in [-1,1]`, 50989). A value that is not a number is 28765 (`$atan2`: 51044).

use bson::Bson;

use super::arith::{float_result, two_numbers, unary};
use super::value::to_f64;
use super::{ExprError, Result};

/// The bounds of an operator's domain: (lower, upper, inclusive).
fn bounds(op: &str) -> Option<(f64, f64, bool)> {
    match op {
        "$sin" | "$cos" | "$tan" => Some((f64::NEG_INFINITY, f64::INFINITY, false)),
        "$asin" | "$acos" | "$atanh" => Some((-1.0, 1.0, true)),
        "$acosh" => Some((1.0, f64::INFINITY, true)),
        _ => None,
    }
}

/// The function of a one-argument operator.
fn function(op: &str) -> fn(f64) -> f64 {
    match op {
        "$sin" => f64::sin,
        "$cos" => f64::cos,
        "$tan" => f64::tan,
        "$asin" => f64::asin,
        "$acos" => f64::acos,
        "$atan" => f64::atan,
        "$sinh" => f64::sinh,
        "$cosh" => f64::cosh,
        "$tanh" => f64::tanh,
        "$asinh" => f64::asinh,
        "$acosh" => f64::acosh,
        "$atanh" => f64::atanh,
        "$degreesToRadians" => f64::to_radians,
        _ => f64::to_degrees,
    }
}

/// A one-argument trigonometric operator.
pub fn unary_trig(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| {
        let x = to_f64(v).unwrap_or(f64::NAN);
        if x.is_nan() {
            return Ok(v.clone());
        }
        if let Some((low, high, inclusive)) = bounds(op) {
            let inside = match inclusive {
                true => low <= x && x <= high,
                false => low < x && x < high,
            };
            if !inside {
                let (open, close) = if inclusive { ("[", "]") } else { ("(", ")") };
                return Err(ExprError::location(
                    50989,
                    format!("cannot apply {op} to {x}, value must be in {open}{low},{high}{close}"),
                ));
            }
        }
        Ok(float_result(v, function(op)(x)))
    })
}

/// `$atan2`: the angle of the point (x, y) from `[y, x]`.
pub fn atan2(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some((y, x)) = two_numbers(op, 51044, args)? else { return Ok(Bson::Null) };
    let angle = to_f64(y).unwrap_or(f64::NAN).atan2(to_f64(x).unwrap_or(f64::NAN));
    Ok(float_result(if matches!(x, Bson::Decimal128(_)) { x } else { y }, angle))
}
