//! MongoDB's comparison order over values in their stored JSON form (`bunko_doc::ejson`:
//! int64 and Decimal128 may be wrappers, compared by value): first the BSON type class
//! — MinKey < null < numbers < strings < objects < arrays < binData < ObjectId < bool < date
//! < timestamp < regex < MaxKey — then the value within the class. Strings compare by
//! bytes (MongoDB's default `simple` collation) or by the command's [`crate::collation`],
//! numbers by their exact value across types ([`crate::numbers`]: NaN below every number,
//! ±Infinity at the ends), objects field by field, arrays element by element.
//! An Extended JSON wrapper (`{"$oid": …}`, `{"$date": …}`, …) is its BSON type, not an
//! object.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use crate::numbers::Exact;

/// A BSON type class, in comparison order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    MinKey,
    Null,
    Number,
    String,
    Object,
    Array,
    BinData,
    ObjectId,
    Bool,
    Date,
    Timestamp,
    Regex,
    MaxKey,
}

impl Class {
    /// MongoDB's `$type` alias of the class (`number` for every numeric type).
    pub fn name(self) -> &'static str {
        match self {
            Class::MinKey => "minKey",
            Class::Null => "null",
            Class::Number => "number",
            Class::String => "string",
            Class::Object => "object",
            Class::Array => "array",
            Class::BinData => "binData",
            Class::ObjectId => "objectId",
            Class::Bool => "bool",
            Class::Date => "date",
            Class::Timestamp => "timestamp",
            Class::Regex => "regex",
            Class::MaxKey => "maxKey",
        }
    }
}

/// The class of a value.
pub fn class(v: &Value) -> Class {
    match v {
        Value::Null => Class::Null,
        Value::Bool(_) => Class::Bool,
        Value::Number(_) => Class::Number,
        Value::String(_) => Class::String,
        Value::Array(_) => Class::Array,
        Value::Object(map) => wrapper_class(map).unwrap_or(Class::Object),
    }
}

fn wrapper_class(map: &Map<String, Value>) -> Option<Class> {
    if map.len() != 1 {
        return None;
    }
    let (key, arg) = map.iter().next()?;
    Some(match key.as_str() {
        "$minKey" => Class::MinKey,
        "$maxKey" => Class::MaxKey,
        "$numberDouble" | "$numberDecimal" | "$numberLong" | "$numberInt" | "$bunkoDecimal" => {
            Class::Number
        }
        "$oid" if arg.is_string() => Class::ObjectId,
        "$date" => Class::Date,
        "$binary" => Class::BinData,
        "$timestamp" => Class::Timestamp,
        "$regularExpression" => Class::Regex,
        "$symbol" => Class::String,
        _ => return None,
    })
}

/// MongoDB's `$type` alias of a value's own type: a number's BSON type (`int`, `long`,
/// `double`, `decimal`), the deprecated types' own (`symbol`, `javascript`, …), else its
/// class's alias.
pub fn type_alias(v: &Value) -> &'static str {
    if let Some(numeric) = bunko_doc::ejson::numeric_type(v) {
        return numeric;
    }
    let Value::Object(map) = v else { return class(v).name() };
    let mut keys = map.keys().map(String::as_str);
    match (keys.next(), keys.next(), keys.next()) {
        (Some("$symbol"), None, _) => "symbol",
        (Some("$code"), None, _) => "javascript",
        (Some("$code"), Some("$scope"), None) => "javascriptWithScope",
        (Some("$undefined"), None, _) => "undefined",
        (Some("$dbPointer"), None, _) => "dbPointer",
        _ => class(v).name(),
    }
}

/// Whether a value has the type a MongoDB `$type` alias names (`number`: any numeric type).
pub fn has_type(v: &Value, alias: &str) -> bool {
    match alias {
        "number" => class(v) == Class::Number,
        _ => type_alias(v) == alias,
    }
}

/// MongoDB's order of two values.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    let (ca, cb) = (class(a), class(b));
    if ca != cb {
        return ca.cmp(&cb);
    }
    match (ca, a, b) {
        (Class::Number, _, _) => crate::numbers::order(number(a), number(b), || {
            Some((Exact::of_json(a)?, Exact::of_json(b)?))
        }),
        (Class::String, Value::String(x), Value::String(y)) => crate::collation::compare_str(x, y),
        (Class::Bool, Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Class::Array, Value::Array(x), Value::Array(y)) => x
            .iter()
            .zip(y)
            .map(|(p, q)| compare(p, q))
            .find(|o| o.is_ne())
            .unwrap_or(x.len().cmp(&y.len())),
        (_, Value::Object(x), Value::Object(y)) => objects(x, y),
        _ => Ordering::Equal,
    }
}

/// Field by field: the name, then the value; a prefix sorts first. (Wrappers compare their
/// contents this way too: `$oid` hex, `$date` milliseconds, `$timestamp` t then i.)
fn objects(x: &Map<String, Value>, y: &Map<String, Value>) -> Ordering {
    for ((kx, vx), (ky, vy)) in x.iter().zip(y) {
        let ord = kx.as_bytes().cmp(ky.as_bytes()).then_with(|| compare(vx, vy));
        if ord.is_ne() {
            return ord;
        }
    }
    x.len().cmp(&y.len())
}

/// A numeric value as f64 (`NaN` for `$numberDouble: "NaN"`).
pub(crate) fn number(v: &Value) -> f64 {
    match v {
        Value::Number(n) => n.as_str().parse().unwrap_or(f64::NAN),
        // A non-canonical Decimal128 kept as its bytes (a zero).
        Value::Object(map) if map.contains_key("$bunkoDecimal") => {
            bunko_doc::ejson::plain_number(v).and_then(|n| n.as_f64()).unwrap_or(f64::NAN)
        }
        Value::Object(map) => map
            .values()
            .next()
            .and_then(Value::as_str)
            .map(|s| match s {
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                other => other.parse().unwrap_or(f64::NAN),
            })
            .unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bson_type_order() {
        let ascending = [
            json!({"$minKey": 1}),
            json!(null),
            json!({"$numberDouble": "NaN"}),
            json!({"$numberDouble": "-Infinity"}),
            json!(-1.5),
            json!(2),
            json!(2.5),
            json!({"$numberDouble": "Infinity"}),
            json!("B"),
            json!("a"),
            json!({"a": 1}),
            json!({"b": 0}),
            json!([1, 2]),
            json!([3]),
            json!({"$binary": {"base64": "AQ==", "subType": "00"}}),
            json!({"$oid": "65a1b2c3d4e5f60718293a4b"}),
            json!({"$oid": "65a1b2c3d4e5f60718293a4c"}),
            json!(false),
            json!(true),
            json!({"$date": 5}),
            json!({"$date": 10}),
            json!({"$timestamp": {"t": 1, "i": 2}}),
            json!({"$regularExpression": {"pattern": "a", "options": ""}}),
            json!({"$maxKey": 1}),
        ];
        for pair in ascending.windows(2) {
            assert_eq!(compare(&pair[0], &pair[1]), Ordering::Less, "{} < {}", pair[0], pair[1]);
            assert_eq!(compare(&pair[1], &pair[0]), Ordering::Greater);
        }
        assert_eq!(compare(&json!(2), &json!(2.0)), Ordering::Equal);
        let nan = json!({"$numberDouble": "NaN"});
        assert_eq!(compare(&nan, &nan), Ordering::Equal);
        assert_eq!(class(&json!({"$oid": "x"})).name(), "objectId");
        assert_eq!(compare(&json!({"$numberLong": "2"}), &json!(2.0)), Ordering::Equal);
        assert_eq!(compare(&json!({"$numberDecimal": "2.5"}), &json!(2)), Ordering::Greater);
    }

    #[test]
    fn type_aliases_tell_numbers_apart() {
        let cases = [
            (json!(5), "int"),
            (json!(3_000_000_000_i64), "long"),
            (json!({"$numberLong": "5"}), "long"),
            (json!(5.0), "double"),
            (json!(1e300), "double"),
            (json!({"$numberDouble": "NaN"}), "double"),
            (json!({"$numberDecimal": "5"}), "decimal"),
            (json!("5"), "string"),
            (json!({"$oid": "65a1b2c3d4e5f60718293a4b"}), "objectId"),
        ];
        for (value, alias) in cases {
            assert_eq!(type_alias(&value), alias, "{value}");
            assert_eq!(has_type(&value, "number"), alias != "string" && alias != "objectId");
        }
    }
}
