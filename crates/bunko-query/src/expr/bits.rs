//! Bitwise operators (`$bitAnd`, `$bitOr`, `$bitXor`, `$bitNot`) on ints and longs, as
//! MongoDB evaluates them: the result is an int when every operand is, else a long; a null
//! or missing operand makes it null; `$bitAnd` of nothing is `-1`, `$bitOr` and `$bitXor`
//! of nothing `0`. Another operand type is `TypeMismatch` (14): `$bitAnd only supports int
//! and long operands.`; `$bitNot` of a double is `$bitNot only supports int and long, not:
//! double.` (14), of a value that is not a number 28765.

use bson::Bson;

use super::arith::unary;
use super::value::{is_nullish, type_name};
use super::{ExprError, Result};

/// `$bitAnd`, `$bitOr`, `$bitXor`.
pub fn fold(op: &str, args: &[Bson]) -> Result<Bson> {
    let (start, f): (i64, fn(i64, i64) -> i64) = match op {
        "$bitAnd" => (-1, |a, b| a & b),
        "$bitOr" => (0, |a, b| a | b),
        _ => (0, |a, b| a ^ b),
    };
    let (mut acc, mut long) = (start, false);
    for v in args {
        let n = match v {
            v if is_nullish(v) => return Ok(Bson::Null),
            Bson::Int32(i) => i64::from(*i),
            Bson::Int64(i) => {
                long = true;
                *i
            }
            _ => {
                return Err(ExprError::new(
                    14,
                    "TypeMismatch",
                    format!("{op} only supports int and long operands."),
                ));
            }
        };
        acc = f(acc, n);
    }
    Ok(if long { Bson::Int64(acc) } else { Bson::Int32(acc as i32) })
}

/// `$bitNot`.
pub fn not(op: &str, args: &[Bson]) -> Result<Bson> {
    unary(op, args, |v| match v {
        Bson::Int32(i) => Ok(Bson::Int32(!i)),
        Bson::Int64(i) => Ok(Bson::Int64(!i)),
        other => Err(ExprError::new(
            14,
            "TypeMismatch",
            format!("{op} only supports int and long, not: {}.", type_name(other)),
        )),
    })
}
