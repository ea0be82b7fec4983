//! The exact order of numbers across int32, int64, double and Decimal128, as MongoDB
//! compares them (`compare_numbers.h`: an int64 against a double and a Decimal128 against
//! either by their exact values): `Decimal128("2.0000000000000000000000001")` is greater
//! than `2`, and the int64 `2^53 + 1` greater than the int64 or double `2^53`, though
//! their nearest doubles are equal.
//!
//! Two numbers are ordered by their nearest doubles first (rounding to the nearest double
//! never reverses an order, so different doubles decide); only when those are equal are
//! their exact values ([`Exact`]) compared: integers as integers, a double with an integer
//! as an integer, anything with a Decimal128 in decimal (`bigdecimal`; a double converts
//! exactly). NaN equals NaN and sorts below every number; a Decimal128 infinity equals the
//! double one.

use std::cmp::Ordering;
use std::str::FromStr;

use bigdecimal::BigDecimal;
use bson::Bson;
use serde_json::Value;

/// A number's exact value.
#[derive(Debug, Clone, PartialEq)]
pub enum Exact {
    /// An int32 or int64.
    Int(i128),
    /// A finite double.
    Double(f64),
    /// A finite Decimal128.
    Decimal(BigDecimal),
    /// An infinity (`true`: positive).
    Infinite(bool),
    /// NaN (a double's or a Decimal128's).
    NaN,
}

impl Exact {
    /// A double's exact value.
    pub fn double(f: f64) -> Exact {
        match f {
            f if f.is_nan() => Exact::NaN,
            f if f.is_infinite() => Exact::Infinite(f > 0.0),
            f => Exact::Double(f),
        }
    }

    /// A Decimal128's exact value from its text (`Infinity`, `-Infinity`, `NaN` too).
    pub fn decimal(text: &str) -> Exact {
        match text {
            "Infinity" | "+Infinity" | "inf" => Exact::Infinite(true),
            "-Infinity" | "-inf" => Exact::Infinite(false),
            text => BigDecimal::from_str(text).map_or(Exact::NaN, Exact::Decimal),
        }
    }

    /// A value in its stored JSON form (`bunko_doc::ejson`: plain numbers and the
    /// `$numberLong`, `$numberDouble`, `$numberDecimal` wrappers), if it is a number.
    pub fn of_json(v: &Value) -> Option<Exact> {
        let text = match v {
            Value::Number(n) => n.as_str(),
            Value::Object(map) => map.values().next().and_then(Value::as_str).unwrap_or("0"),
            _ => return None,
        };
        Some(match bunko_doc::ejson::numeric_type(v)? {
            "int" | "long" => text.parse().map_or(Exact::NaN, Exact::Int),
            "decimal" if v.get("$numberDecimal").is_some() => Exact::decimal(text),
            _ => Exact::double(crate::bson_order::number(v)),
        })
    }

    /// A BSON value's exact value, if it is a number.
    pub fn of_bson(v: &Bson) -> Option<Exact> {
        Some(match v {
            Bson::Int32(i) => Exact::Int(i128::from(*i)),
            Bson::Int64(i) => Exact::Int(i128::from(*i)),
            Bson::Double(f) => Exact::double(*f),
            Bson::Decimal128(d) => Exact::decimal(&d.to_string()),
            _ => return None,
        })
    }

    /// The exact order of two numbers.
    pub fn order(&self, other: &Exact) -> Ordering {
        use Exact::{Decimal, Double, Infinite, Int, NaN};
        match (self, other) {
            (NaN, NaN) => Ordering::Equal,
            (NaN, _) => Ordering::Less,
            (_, NaN) => Ordering::Greater,
            (Infinite(p), Infinite(q)) => p.cmp(q),
            (Infinite(p), _) => {
                if *p {
                    Ordering::Greater
                } else {
                    Ordering::Less
                }
            }
            (_, Infinite(q)) => {
                if *q {
                    Ordering::Less
                } else {
                    Ordering::Greater
                }
            }
            (Int(a), Int(b)) => a.cmp(b),
            (Double(x), Double(y)) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (Int(a), Double(f)) if integral(*f) => a.cmp(&(*f as i128)),
            (Double(f), Int(b)) if integral(*f) => (*f as i128).cmp(b),
            (Decimal(a), Decimal(b)) => a.cmp(b),
            _ => self.to_decimal().cmp(&other.to_decimal()),
        }
    }

    /// A finite value as a decimal (exactly).
    fn to_decimal(&self) -> BigDecimal {
        match self {
            Exact::Int(i) => BigDecimal::from(*i),
            Exact::Double(f) => BigDecimal::try_from(*f).unwrap_or_default(),
            Exact::Decimal(d) => d.clone(),
            Exact::Infinite(_) | Exact::NaN => BigDecimal::default(),
        }
    }
}

/// Whether a double is an integer an `i128` holds.
fn integral(f: f64) -> bool {
    f.fract() == 0.0 && f.abs() < 1e38
}

/// Orders two numbers given as their nearest doubles `x` and `y`; when those are equal, by
/// the exact values `exact` gives (asked only then).
pub fn order(x: f64, y: f64, exact: impl FnOnce() -> Option<(Exact, Exact)>) -> Ordering {
    match x.partial_cmp(&y) {
        Some(Ordering::Equal) => exact().map_or(Ordering::Equal, |(a, b)| a.order(&b)),
        Some(other) => other,
        // NaN equals NaN and sorts below every number.
        None => x.is_nan().cmp(&y.is_nan()).reverse(),
    }
}

#[cfg(test)]
mod tests {
    use bson::Decimal128;
    use serde_json::json;

    use super::*;

    fn json_order(a: &Value, b: &Value) -> Ordering {
        let (x, y) = (crate::bson_order::number(a), crate::bson_order::number(b));
        order(x, y, || Some((Exact::of_json(a)?, Exact::of_json(b)?)))
    }

    /// Numbers whose nearest doubles are equal are told apart by their exact values.
    #[test]
    fn exact_values_decide_when_doubles_tie() {
        let two53 = 9_007_199_254_740_992_i64;
        let long = |n: i64| json!({"$numberLong": n.to_string()});
        let dec = |s: &str| json!({"$numberDecimal": s});
        assert_eq!(json_order(&long(two53 + 1), &long(two53)), Ordering::Greater);
        assert_eq!(json_order(&json!(two53 + 1), &json!(two53)), Ordering::Greater);
        assert_eq!(
            json_order(&long(two53 + 1), &json!(9_007_199_254_740_992.0)),
            Ordering::Greater
        );
        assert_eq!(json_order(&json!(9_007_199_254_740_992.0), &long(two53)), Ordering::Equal);
        assert_eq!(json_order(&dec("2.0000000000000000000000001"), &json!(2)), Ordering::Greater);
        assert_eq!(json_order(&dec("1.9999999999999999999999999"), &json!(2.0)), Ordering::Less);
        assert_eq!(json_order(&dec("2.000"), &json!(2)), Ordering::Equal);
        assert_eq!(json_order(&dec("2"), &long(2)), Ordering::Equal);
        // A double is its exact binary value: 0.1 is not Decimal128 0.1 (as in MongoDB).
        assert_eq!(json_order(&json!(0.1), &dec("0.1")), Ordering::Greater);
        assert_eq!(json_order(&json!(0.5), &dec("0.5")), Ordering::Equal);
        assert_eq!(json_order(&json!(2), &json!(2.0)), Ordering::Equal);
        // Past the doubles' range, a Decimal128 is below infinity.
        let inf = json!({"$numberDouble": "Infinity"});
        assert_eq!(json_order(&dec("1E+400"), &inf), Ordering::Less);
        assert_eq!(json_order(&dec("Infinity"), &inf), Ordering::Equal);
        let nan = json!({"$numberDouble": "NaN"});
        assert_eq!(json_order(&nan, &json!(-1e300)), Ordering::Less);
        assert_eq!(json_order(&nan, &dec("NaN")), Ordering::Equal);
    }

    #[test]
    fn bson_numbers_compare_exactly() {
        let d = |s: &str| Bson::Decimal128(s.parse::<Decimal128>().unwrap());
        let exact =
            |a: &Bson, b: &Bson| Exact::of_bson(a).unwrap().order(&Exact::of_bson(b).unwrap());
        assert_eq!(
            exact(&Bson::Int64((1 << 53) + 1), &Bson::Double(9_007_199_254_740_992.0)),
            Ordering::Greater
        );
        assert_eq!(exact(&d("2.0000000000000000000000001"), &Bson::Int32(2)), Ordering::Greater);
        assert_eq!(exact(&d("2.0"), &Bson::Double(2.0)), Ordering::Equal);
    }
}
