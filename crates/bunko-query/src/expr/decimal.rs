//! Decimal128 arithmetic: when an operand of `$add`, `$subtract`, `$multiply`, `$divide`,
//! `$sum` or `$avg` is a Decimal128, the operation is done in decimal (`bigdecimal`) and
//! rounded half-to-even to Decimal128's 34 significant digits, as MongoDB does, instead of
//! through a double (`0.1 + 0.2` is `0.3`, and `1.10 + 2.20` keeps its scale: `3.30`).
//! Integers convert exactly; a double converts as MongoDB converts it (`Decimal128(double)`,
//! `kRoundTo15Digits`): rounded to 15 significant digits, trailing zeros kept (`0.1` is
//! `0.100000000000000`, `2.5` is `2.50000000000000`). NaN and infinities are left to the
//! double path.

use std::num::NonZeroU64;
use std::str::FromStr;

use bigdecimal::{BigDecimal, RoundingMode};
use bson::{Bson, Decimal128};

/// Decimal128's significant digits.
const DIGITS: u64 = 34;

/// A number as a decimal (`None`: not a number, or NaN or an infinity).
pub fn of(v: &Bson) -> Option<BigDecimal> {
    match v {
        Bson::Int32(i) => Some(BigDecimal::from(*i)),
        Bson::Int64(i) => Some(BigDecimal::from(*i)),
        Bson::Double(f) => from_double(*f),
        Bson::Decimal128(d) => BigDecimal::from_str(&d.to_string()).ok(),
        _ => None,
    }
}

/// A finite double as MongoDB makes a Decimal128 of it: 15 significant digits (zero is `0`).
pub fn from_double(f: f64) -> Option<BigDecimal> {
    match f {
        f if !f.is_finite() => None,
        0.0 => Some(BigDecimal::from(0)),
        f => BigDecimal::from_str(&format!("{f:.14e}")).ok(),
    }
}

/// A double as a Decimal128 (`$toDecimal`): [`from_double`], or NaN and the infinities.
pub fn double_to_bson(f: f64) -> Bson {
    from_double(f).and_then(|d| to_bson(&d)).unwrap_or_else(|| super::value::decimal(f))
}

/// A decimal as a Decimal128, rounded to 34 significant digits (`None` past its range).
pub fn to_bson(d: &BigDecimal) -> Option<Bson> {
    let rounded = match d.digits() > DIGITS {
        true => d.with_precision_round(NonZeroU64::new(DIGITS)?, RoundingMode::HalfEven),
        false => d.clone(),
    };
    let (coefficient, scale) = rounded.as_bigint_and_exponent();
    Decimal128::from_str(&format!("{coefficient}E{}", -scale)).ok().map(Bson::Decimal128)
}

/// `a op b` in decimal, if both are finite numbers and the result fits.
pub fn apply(
    a: &Bson,
    b: &Bson,
    op: fn(BigDecimal, BigDecimal) -> Option<BigDecimal>,
) -> Option<Bson> {
    to_bson(&op(of(a)?, of(b)?)?)
}

/// `a / b` in decimal (`None` for a zero divisor), to more digits than Decimal128 keeps.
/// An exact quotient takes the scale IEEE 754 calls ideal (`a`'s minus `b`'s) when it
/// can (`10.0 / 4` is `2.5`, `6.00 / 2` is `3.00`).
pub fn divide(a: BigDecimal, b: BigDecimal) -> Option<BigDecimal> {
    use bigdecimal::Zero;
    if b.is_zero() {
        return None;
    }
    let ideal = a.fractional_digit_count() - b.fractional_digit_count();
    let quotient = (a / b).normalized();
    Some(match quotient.fractional_digit_count() < ideal {
        true => quotient.with_scale(ideal),
        false => quotient,
    })
}
