//! `$jsonSchema` as MongoDB implements it (JSON Schema draft 4 with `bsonType`, without
//! `$ref`, `default`, `definitions`, `format` and `id`), evaluated on BSON values so that
//! `bsonType` sees exact types (int vs long vs double). [`check`] refuses a schema with a
//! keyword MongoDB does not know; `matches` tells whether a document satisfies it, and
//! [`details`] why not (`errInfo.details`); [`query_details`] explains a validator written
//! with query operators the same way.

mod explain;
mod query;

use std::collections::HashSet;

use bson::{Bson, Document};

pub use self::explain::details;
pub use self::query::query_details;

const KEYWORDS: &[&str] = &[
    "bsonType",
    "type",
    "required",
    "properties",
    "additionalProperties",
    "patternProperties",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "enum",
    "items",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "dependencies",
    "description",
    "title",
    "multipleOf",
];

/// Checks a schema's keywords (recursively); the error names the first unknown one.
pub fn check(schema: &Document) -> Result<(), String> {
    for (key, value) in schema {
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(format!("Unknown $jsonSchema keyword: {key}"));
        }
        match (key.as_str(), value) {
            ("properties" | "patternProperties" | "dependencies", Bson::Document(map)) => {
                for sub in map.values() {
                    if let Bson::Document(sub) = sub {
                        check(sub)?;
                    }
                }
            }
            ("not" | "items" | "additionalProperties" | "additionalItems", Bson::Document(sub)) => {
                check(sub)?
            }
            ("allOf" | "anyOf" | "oneOf" | "items", Bson::Array(subs)) => {
                for sub in subs {
                    let Bson::Document(sub) = sub else {
                        return Err(format!(
                            "$jsonSchema keyword '{key}' must be an array of objects"
                        ));
                    };
                    check(sub)?;
                }
            }
            ("pattern", Bson::String(p)) => {
                regex::Regex::new(p).map_err(|e| format!("invalid pattern: {e}"))?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Whether `doc` satisfies `schema`.
pub fn matches(schema: &Document, doc: &Document) -> bool {
    value(schema, &Bson::Document(doc.clone()))
}

fn value(schema: &Document, v: &Bson) -> bool {
    schema.iter().all(|(key, arg)| keyword(schema, key, arg, v))
}

fn keyword(schema: &Document, key: &str, arg: &Bson, v: &Bson) -> bool {
    match key {
        "bsonType" => names(arg).iter().any(|t| bson_type(t, v)),
        "type" => names(arg).iter().any(|t| json_type(t, v)),
        "enum" => matches!(arg, Bson::Array(options) if options.contains(v)),
        "allOf" => subs(arg).iter().all(|s| value(s, v)),
        "anyOf" => subs(arg).iter().any(|s| value(s, v)),
        "oneOf" => subs(arg).iter().filter(|s| value(s, v)).count() == 1,
        "not" => matches!(arg, Bson::Document(s) if !value(s, v)),
        _ => match v {
            Bson::Document(doc) if key == "additionalProperties" => additional(schema, arg, doc),
            Bson::Document(doc) => object(key, arg, doc),
            Bson::Array(items) => array(key, arg, items),
            Bson::String(s) => string(key, arg, s),
            _ => match number(v) {
                Some(n) => numeric(schema, key, arg, n),
                None => true,
            },
        },
    }
}

fn object(key: &str, arg: &Bson, doc: &Document) -> bool {
    match (key, arg) {
        ("required", Bson::Array(names)) => {
            names.iter().all(|n| matches!(n, Bson::String(n) if doc.contains_key(n)))
        }
        ("properties", Bson::Document(props)) => {
            props.iter().all(|(name, s)| match (doc.get(name), s) {
                (Some(v), Bson::Document(s)) => value(s, v),
                _ => true,
            })
        }
        ("patternProperties", Bson::Document(props)) => props.iter().all(|(p, s)| {
            let (Ok(re), Bson::Document(s)) = (regex::Regex::new(p), s) else { return true };
            doc.iter().filter(|(k, _)| re.is_match(k)).all(|(_, v)| value(s, v))
        }),
        ("minProperties", n) => number(n).is_none_or(|n| doc.len() as f64 >= n),
        ("maxProperties", n) => number(n).is_none_or(|n| doc.len() as f64 <= n),
        ("dependencies", Bson::Document(deps)) => deps.iter().all(|(name, dep)| {
            if !doc.contains_key(name) {
                return true;
            }
            match dep {
                Bson::Array(names) => {
                    names.iter().all(|n| matches!(n, Bson::String(n) if doc.contains_key(n)))
                }
                Bson::Document(s) => value(s, &Bson::Document(doc.clone())),
                _ => true,
            }
        }),
        _ => true,
    }
}

/// `additionalProperties`: the fields neither `properties` nor `patternProperties` name
/// are refused (`false`) or must match the schema.
fn additional(schema: &Document, arg: &Bson, doc: &Document) -> bool {
    let named = schema.get_document("properties").ok();
    let patterns: Vec<regex::Regex> = schema
        .get_document("patternProperties")
        .map(|p| p.keys().filter_map(|k| regex::Regex::new(k).ok()).collect())
        .unwrap_or_default();
    let mut extra = doc.iter().filter(|(k, _)| {
        !named.is_some_and(|n| n.contains_key(k.as_str()))
            && !patterns.iter().any(|re| re.is_match(k))
    });
    match arg {
        Bson::Boolean(false) => extra.next().is_none(),
        Bson::Document(s) => extra.all(|(_, v)| value(s, v)),
        _ => true,
    }
}

fn array(key: &str, arg: &Bson, items: &[Bson]) -> bool {
    match (key, arg) {
        ("items", Bson::Document(s)) => items.iter().all(|v| value(s, v)),
        ("items", Bson::Array(schemas)) => {
            schemas.iter().zip(items).all(|(s, v)| matches!(s, Bson::Document(s) if value(s, v)))
        }
        ("minItems", n) => number(n).is_none_or(|n| items.len() as f64 >= n),
        ("maxItems", n) => number(n).is_none_or(|n| items.len() as f64 <= n),
        ("uniqueItems", Bson::Boolean(true)) => {
            let mut seen = HashSet::new();
            items.iter().all(|v| seen.insert(format!("{v:?}")))
        }
        _ => true,
    }
}

fn string(key: &str, arg: &Bson, s: &str) -> bool {
    let len = s.chars().count() as f64;
    match (key, arg) {
        ("minLength", n) => number(n).is_none_or(|n| len >= n),
        ("maxLength", n) => number(n).is_none_or(|n| len <= n),
        ("pattern", Bson::String(p)) => regex::Regex::new(p).is_ok_and(|re| re.is_match(s)),
        _ => true,
    }
}

fn numeric(schema: &Document, key: &str, arg: &Bson, n: f64) -> bool {
    let Some(limit) = number(arg) else { return true };
    let exclusive = |flag: &str| schema.get_bool(flag).unwrap_or(false);
    match key {
        "minimum" if exclusive("exclusiveMinimum") => n > limit,
        "maximum" if exclusive("exclusiveMaximum") => n < limit,
        "minimum" => n >= limit,
        "maximum" => n <= limit,
        "multipleOf" => limit != 0.0 && (n / limit).fract() == 0.0,
        _ => true,
    }
}

fn number(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

fn names(arg: &Bson) -> Vec<&str> {
    match arg {
        Bson::String(s) => vec![s.as_str()],
        Bson::Array(items) => items.iter().filter_map(Bson::as_str).collect(),
        _ => Vec::new(),
    }
}

fn subs(arg: &Bson) -> Vec<&Document> {
    match arg {
        Bson::Array(items) => items.iter().filter_map(Bson::as_document).collect(),
        _ => Vec::new(),
    }
}

fn bson_type(name: &str, v: &Bson) -> bool {
    match (name, v) {
        ("number", _) => number(v).is_some(),
        ("double", Bson::Double(_))
        | ("string", Bson::String(_))
        | ("object", Bson::Document(_))
        | ("array", Bson::Array(_))
        | ("binData", Bson::Binary(_))
        | ("undefined", Bson::Undefined)
        | ("objectId", Bson::ObjectId(_))
        | ("bool", Bson::Boolean(_))
        | ("date", Bson::DateTime(_))
        | ("null", Bson::Null)
        | ("regex", Bson::RegularExpression(_))
        | ("javascript", Bson::JavaScriptCode(_))
        | ("int", Bson::Int32(_))
        | ("timestamp", Bson::Timestamp(_))
        | ("long", Bson::Int64(_))
        | ("decimal", Bson::Decimal128(_))
        | ("minKey", Bson::MinKey)
        | ("maxKey", Bson::MaxKey) => true,
        _ => false,
    }
}

fn json_type(name: &str, v: &Bson) -> bool {
    match name {
        "number" => number(v).is_some(),
        "object" => matches!(v, Bson::Document(_)),
        "array" => matches!(v, Bson::Array(_)),
        "boolean" => matches!(v, Bson::Boolean(_)),
        "string" => matches!(v, Bson::String(_)),
        "null" => matches!(v, Bson::Null),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn schemas_check_types_ranges_and_shapes_as_mongodb() {
        let schema = doc! {
            "bsonType": "object",
            "required": ["name", "qty"],
            "additionalProperties": false,
            "properties": {
                "_id": {},
                "name": {"bsonType": "string", "minLength": 1, "maxLength": 5, "pattern": "^[^0-9]"},
                "qty": {"bsonType": ["int", "long"], "minimum": 0, "maximum": 10, "exclusiveMaximum": true},
                "tags": {"bsonType": "array", "items": {"enum": ["a", "b"]}, "uniqueItems": true, "maxItems": 2},
                "kind": {"anyOf": [{"type": "null"}, {"bsonType": "string"}]},
            },
        };
        assert!(check(&schema).is_ok());
        assert!(matches(&schema, &doc! {"_id": 1, "name": "猫", "qty": 3, "tags": ["a", "b"]}));
        let bad = [
            doc! {"name": "猫"},
            doc! {"name": "猫", "qty": 3.0},
            doc! {"name": "猫", "qty": 10},
            doc! {"name": "猫", "qty": -1_i64},
            doc! {"name": "", "qty": 1},
            doc! {"name": "1abc", "qty": 1},
            doc! {"name": "abcdef", "qty": 1},
            doc! {"name": "a", "qty": 1, "tags": ["a", "a"]},
            doc! {"name": "a", "qty": 1, "tags": ["c"]},
            doc! {"name": "a", "qty": 1, "kind": 5},
            doc! {"name": "a", "qty": 1, "other": true},
        ];
        for doc in bad {
            assert!(!matches(&schema, &doc), "{doc}");
        }
        let one = doc! {"oneOf": [{"bsonType": "int"}, {"minimum": 5}]};
        assert!(value(&one, &Bson::Int32(1)) && !value(&one, &Bson::Int32(6)));
        assert!(check(&doc! {"properties": {"a": {"format": "x"}}}).is_err());
    }
}
