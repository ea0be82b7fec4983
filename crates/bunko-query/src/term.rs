//! JSON values seen the way CouchDB's Erlang code sees them after `jiffy` decodes a request.
//!
//! - A number written without `.`, `e` or `E` is an Erlang integer (of any size); any other
//!   number is a float. `$mod` and `$size` accept only integers, and `$all` compares with
//!   Erlang's exact equality `=:=`, under which `1` and `1.0` differ.
//! - `_id` conditions compare in Erlang term order ([`cmp_raw`]), not view collation:
//!   numbers < atoms (`false` < `null` < `true`) < objects < arrays < strings, strings by
//!   bytes.

use std::cmp::Ordering;

use serde_json::{Number, Value};

/// CouchDB's `mango_json:type/1` names, used by `$type`.
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The decimal digits of an integer-form number, or `None` for a float-form one.
pub(crate) fn integer_parts(n: &Number) -> Option<(bool, &str)> {
    let text = n.as_str();
    if text.contains(['.', 'e', 'E']) {
        return None;
    }
    let (negative, digits) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let digits = digits.trim_start_matches('0');
    // "-0" is the integer 0, which has no sign.
    Some((negative && !digits.is_empty(), digits))
}

pub(crate) fn is_integer(n: &Number) -> bool {
    integer_parts(n).is_some()
}

/// Numeric order: integers exactly (any size), otherwise as doubles.
pub(crate) fn cmp_numbers(a: &Number, b: &Number) -> Ordering {
    match (integer_parts(a), integer_parts(b)) {
        (Some(x), Some(y)) => cmp_integers(x, y),
        _ => {
            let x = a.as_f64().unwrap_or(f64::NAN);
            let y = b.as_f64().unwrap_or(f64::NAN);
            x.partial_cmp(&y).unwrap_or(Ordering::Equal)
        }
    }
}

fn cmp_integers((neg_a, a): (bool, &str), (neg_b, b): (bool, &str)) -> Ordering {
    let magnitude = a.len().cmp(&b.len()).then_with(|| a.cmp(b));
    match (neg_a, neg_b) {
        (false, false) => magnitude,
        (true, true) => magnitude.reverse(),
        (false, true) => Ordering::Greater,
        (true, false) => Ordering::Less,
    }
}

/// Erlang's `=:=` on decoded JSON: integers never equal floats, object members compare in
/// order.
pub(crate) fn exact_eq(a: &Value, b: &Value) -> bool {
    erl_eq(a, b, true)
}

/// Erlang's `==`: like [`exact_eq`] but `1 == 1.0`.
pub(crate) fn loose_eq(a: &Value, b: &Value) -> bool {
    erl_eq(a, b, false)
}

fn erl_eq(a: &Value, b: &Value, exact: bool) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            (!exact || is_integer(x) == is_integer(y)) && cmp_numbers(x, y) == Ordering::Equal
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| erl_eq(p, q, exact))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter().zip(y).all(|((kx, vx), (ky, vy))| kx == ky && erl_eq(vx, vy, exact))
        }
        _ => a == b,
    }
}

/// Erlang term order over decoded JSON (`mango_json:cmp_raw`), used for `_id`.
pub fn cmp_raw(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => cmp_numbers(x, y),
        (Value::String(x), Value::String(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Array(x), Value::Array(y)) => cmp_seq(x.iter(), y.iter(), cmp_raw),
        (Value::Object(x), Value::Object(y)) => {
            cmp_seq(x.iter(), y.iter(), |(ka, va), (kb, vb)| {
                ka.as_bytes().cmp(kb.as_bytes()).then_with(|| cmp_raw(va, vb))
            })
        }
        _ => raw_rank(a).cmp(&raw_rank(b)),
    }
}

fn cmp_seq<T>(
    mut x: impl Iterator<Item = T>,
    mut y: impl Iterator<Item = T>,
    cmp: impl Fn(T, T) -> Ordering,
) -> Ordering {
    loop {
        match (x.next(), y.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(p), Some(q)) => match cmp(p, q) {
                Ordering::Equal => {}
                other => return other,
            },
        }
    }
}

/// Erlang's type order; atoms sort by name (`false` < `null` < `true`).
fn raw_rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::Bool(false) => 1,
        Value::Null => 2,
        Value::Bool(true) => 3,
        Value::Object(_) => 4,
        Value::Array(_) => 5,
        Value::String(_) => 6,
    }
}

/// `value rem divisor == remainder` with Erlang's truncating `rem` (the sign follows the
/// dividend), for an integer-form `value` of any size. Floats never match.
pub(crate) fn rem_matches(value: &Number, divisor: i64, remainder: i64) -> bool {
    let Some((negative, digits)) = integer_parts(value) else {
        return false;
    };
    let d = u128::from(divisor.unsigned_abs());
    if d == 0 {
        return false;
    }
    // Horner's rule: the accumulator stays below d <= 2^63, so acc * 10 + 9 fits in u128.
    let rem = digits.bytes().fold(0u128, |acc, b| (acc * 10 + u128::from(b - b'0')) % d);
    let Ok(rem) = i128::try_from(rem) else {
        return false;
    };
    let rem = if negative { -rem } else { rem };
    rem == i128::from(remainder)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn num(v: Value) -> Number {
        match v {
            Value::Number(n) => n,
            _ => Number::from(0),
        }
    }

    #[test]
    fn integer_form_is_textual() {
        assert!(is_integer(&num(json!(1))));
        assert!(is_integer(&num(json!(-0))));
        assert!(!is_integer(&num(json!(1.0))));
        let big: Value = serde_json::from_str("123456789012345678901234567890").unwrap_or_default();
        assert!(is_integer(&num(big)));
        let exp: Value = serde_json::from_str("1e2").unwrap_or_default();
        assert!(!is_integer(&num(exp)));
    }

    #[test]
    fn numbers_compare_by_value() {
        let big: Value = serde_json::from_str("123456789012345678901234567890").unwrap_or_default();
        let bigger: Value =
            serde_json::from_str("123456789012345678901234567891").unwrap_or_default();
        assert_eq!(cmp_raw(&big, &bigger), Ordering::Less);
        assert_eq!(cmp_raw(&json!(-5), &json!(-40)), Ordering::Greater);
        assert_eq!(cmp_raw(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(cmp_raw(&json!(0), &json!(-0)), Ordering::Equal);
        assert_eq!(cmp_raw(&json!(2.5), &json!(3)), Ordering::Less);
    }

    #[test]
    fn erlang_equality() {
        assert!(!exact_eq(&json!(1), &json!(1.0)));
        assert!(loose_eq(&json!([1, {"a": 2}]), &json!([1.0, {"a": 2.0}])));
        assert!(!loose_eq(&json!({"a": 1, "b": 2}), &json!({"b": 2, "a": 1})));
        assert!(exact_eq(&json!({"a": [true, null]}), &json!({"a": [true, null]})));
    }

    #[test]
    fn term_order() {
        let order =
            [json!(1), json!(false), json!(null), json!(true), json!({}), json!([]), json!("")];
        for w in order.windows(2) {
            assert_eq!(cmp_raw(&w[0], &w[1]), Ordering::Less, "{w:?}");
        }
        assert_eq!(cmp_raw(&json!("B"), &json!("a")), Ordering::Less);
        assert_eq!(cmp_raw(&json!("é"), &json!("z")), Ordering::Greater);
    }

    #[test]
    fn rem_truncates_like_erlang() {
        assert!(rem_matches(&num(json!(29)), 28, 1));
        assert!(rem_matches(&num(json!(-5)), 3, -2));
        assert!(rem_matches(&num(json!(5)), -3, 2));
        assert!(!rem_matches(&num(json!(5.0)), 2, 1));
        let big: Value = serde_json::from_str("100000000000000000000000000001").unwrap_or_default();
        assert!(rem_matches(&num(big), 10, 1));
        assert!(rem_matches(&num(json!(i64::MIN)), i64::MIN, 0));
    }
}
