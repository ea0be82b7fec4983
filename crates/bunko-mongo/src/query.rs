//! MongoDB filters and sorts as `bunko-query` takes them: a BSON filter becomes selector
//! JSON whose values are in the matching form of the stored documents
//! (`ejson::value_to_json(v)`), parsed by [`Selector::parse`] and matched
//! in the Mongo dialect.
//!
//! Differences from Mango's syntax handled here: a literal document is an exact equality
//! (`{a: {b: 1}}` is `$eq`, not the path `a.b`); a BSON regex literal and `$regex` with
//! `$options` become one `$regex` with inline flags; MongoDB's `$type` names map to the
//! JSON types. `$expr` (the aggregation evaluator, `bunko_query::expr`) and `$jsonSchema`
//! (`bunko_query::schema`), at the top level or inside `$and`/`$or`/`$nor`, are
//! [`Predicate`]s beside the selector tree. Operators the Mongo dialect does not have yet
//! (`$where`, `$geoWithin`, `$geoIntersects`) are `NotImplemented`; `$text` and `$near`,
//! which need an index no collection has, get MongoDB's errors for a missing index; unknown
//! ones are `BadValue` with MongoDB's `unknown operator` message.

use std::sync::Arc;

use bson::{Bson, Document};
use bunko_doc::ejson;
use bunko_query::collation::{Collation, CollationError};
use bunko_query::expr::Expr;
use bunko_query::{Direction, FieldPath, Predicate, Selector};
use serde_json::{Map, Value, json};

use crate::error::MongoError;

/// The `collation` field of a command or statement: `None` when absent or `simple`.
pub fn collation_of(doc: &Document) -> Result<Option<Arc<Collation>>, MongoError> {
    let spec = match doc.get("collation") {
        None => return Ok(None),
        Some(Bson::Document(spec)) => ejson::to_json(spec),
        Some(_) => {
            return Err(MongoError::type_mismatch(
                "BSON field 'collation' is the wrong type, expected type 'object'",
            ));
        }
    };
    Collation::parse(&spec).map_err(|err| match err {
        CollationError::BadValue(msg) => MongoError::bad_value(msg),
        CollationError::NotImplemented(msg) => MongoError::not_implemented(msg),
    })
}

/// Whether `doc` matches `selector` (in the Mongo dialect).
pub fn matches(selector: &Selector, doc: &Document) -> bool {
    selector.matches(&Value::Object(ejson::to_json(doc)), bunko_query::Dialect::Mongo)
}

/// Parses a MongoDB filter. `$expr`, `$jsonSchema`, and `$and`/`$or`/`$nor` clauses
/// holding them become [`Predicate`]s beside the selector tree; the rest is the tree.
pub fn selector(filter: &Document) -> Result<Selector, MongoError> {
    selector_in(filter, true)
}

/// [`selector`]; `top`: `filter` is a command's whole filter, not a clause of a `$and`,
/// `$or` or `$nor` (whose `$expr` a `$lookup` binds its `let` into only when it runs).
fn selector_in(filter: &Document, top: bool) -> Result<Selector, MongoError> {
    let mut plain = Document::new();
    let mut extra = Vec::new();
    for (key, value) in filter {
        match key.as_str() {
            "$expr" if top => extra.push(Predicate::Expr(Arc::new(defined(Expr::parse(value)?)?))),
            "$expr" => extra.push(Predicate::Expr(Arc::new(Expr::parse(value)?))),
            "$jsonSchema" => extra.push(Predicate::Schema(Arc::new(json_schema(value)?))),
            "$and" | "$or" | "$nor" if needs_predicate(value) => {
                extra.push(logical(key, value)?);
            }
            _ => {
                plain.insert(key.clone(), value.clone());
            }
        }
    }
    let mut selector = Selector::parse_mongo(&selector_json(&plain)?)?;
    for predicate in extra {
        selector = selector.with_predicate(predicate);
    }
    Ok(selector)
}

/// A filter's top-level `$expr`, refused when it reads a variable nobody defines (MongoDB's
/// `Use of undefined variable`, 17276, when the filter is parsed, not per document): a
/// command's `let` variables are bound into it beforehand, and the expression is tried
/// once on an empty document, where only an undefined variable is an error that counts.
fn defined(expr: Expr) -> Result<Expr, MongoError> {
    let mut vars = bunko_query::expr::Vars::new(&Document::new(), bson::DateTime::now());
    match expr.eval(&mut vars) {
        Err(err) if err.code == 17276 => Err(err.into()),
        _ => Ok(expr),
    }
}

/// A `$jsonSchema` argument, checked as MongoDB does.
pub fn json_schema(value: &Bson) -> Result<Document, MongoError> {
    let Bson::Document(schema) = value else {
        return Err(MongoError::type_mismatch("$jsonSchema must be an object"));
    };
    bunko_query::schema::check(schema).map_err(MongoError::failed_to_parse)?;
    Ok(schema.clone())
}

/// Whether a logical operator's clauses hold (at any depth) an `$expr` or `$jsonSchema`.
fn needs_predicate(clauses: &Bson) -> bool {
    let Bson::Array(items) = clauses else { return false };
    items.iter().filter_map(Bson::as_document).any(|d| {
        d.iter().any(|(k, v)| match k.as_str() {
            "$expr" | "$jsonSchema" => true,
            "$and" | "$or" | "$nor" => needs_predicate(v),
            _ => false,
        })
    })
}

/// `$and`/`$or`/`$nor` as a predicate, each clause a whole filter.
fn logical(op: &str, clauses: &Bson) -> Result<Predicate, MongoError> {
    let Bson::Array(items) = clauses else {
        return Err(MongoError::bad_value(format!("{op} must be an array")));
    };
    let parts = items
        .iter()
        .map(|item| match item {
            Bson::Document(d) => Ok(Predicate::Selector(Box::new(selector_in(d, false)?))),
            _ => Err(MongoError::bad_value(format!("{op} argument's entries must be objects"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(match op {
        "$and" => Predicate::And(parts),
        "$or" => Predicate::Or(parts),
        _ => Predicate::Nor(parts),
    })
}

/// A MongoDB filter as the selector JSON `bunko-query` parses (what the engine stores for a
/// collection validator).
pub fn selector_json(filter: &Document) -> Result<Value, MongoError> {
    Ok(Value::Object(expr(filter)?))
}

fn expr(filter: &Document) -> Result<Map<String, Value>, MongoError> {
    let mut out = Map::new();
    for (key, value) in filter {
        match key.as_str() {
            "$and" | "$or" | "$nor" => {
                let Bson::Array(items) = value else {
                    return Err(MongoError::bad_value(format!("{key} must be an array")));
                };
                let parts = items
                    .iter()
                    .map(|item| match item {
                        Bson::Document(d) => Ok(Value::Object(expr(d)?)),
                        _ => Err(MongoError::bad_value(format!(
                            "{key} argument's entries must be objects"
                        ))),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                out.insert(key.clone(), Value::Array(parts));
            }
            "$comment" => {}
            "$expr" | "$jsonSchema" => {
                return Err(MongoError::not_implemented(format!(
                    "{key} in a collection validator is not supported yet, except a top-level $jsonSchema"
                )));
            }
            // No `$text` query can find a text index (the Mongo front end builds none): the
            // error MongoDB gives a `$text` query on a collection without one.
            "$text" => {
                return Err(MongoError::new(
                    27,
                    "IndexNotFound",
                    "text index required for $text query",
                ));
            }
            "$where" | "$sampleRate" => {
                return Err(MongoError::not_implemented(format!("{key} is not supported yet")));
            }
            op if op.starts_with('$') => {
                return Err(MongoError::bad_value(format!("unknown top level operator: {op}")));
            }
            field => {
                out.insert(field.to_string(), cond(field, value)?);
            }
        }
    }
    Ok(out)
}

/// The condition on one field.
fn cond(field: &str, value: &Bson) -> Result<Value, MongoError> {
    match value {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            operators(field, d)
        }
        Bson::RegularExpression(re) => {
            Ok(json!({"$regex": regex(re.pattern.as_str(), re.options.as_str())?}))
        }
        other => {
            let lit = literal(other);
            Ok(if lit.is_object() { json!({ "$eq": lit }) } else { lit })
        }
    }
}

fn operators(field: &str, ops: &Document) -> Result<Value, MongoError> {
    let mut out = Map::new();
    let options = match ops.get("$options") {
        Some(Bson::String(o)) => Some(o.as_str()),
        Some(_) => return Err(MongoError::bad_value("$options has to be a string")),
        None => None,
    };
    for (op, arg) in ops {
        let value = match op.as_str() {
            "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" | "$size" | "$mod" => literal(arg),
            "$in" | "$nin" | "$all" => match arg {
                Bson::Array(items) if op == "$in" && items.iter().any(is_regex) => {
                    insert_or(&mut out, in_regexes(items)?);
                    continue;
                }
                Bson::Array(items) if items.iter().any(is_regex) => {
                    return Err(MongoError::not_implemented(format!(
                        "regular expressions in {op} are not supported yet"
                    )));
                }
                Bson::Array(items) => Value::Array(items.iter().map(literal).collect()),
                _ => return Err(MongoError::bad_value(format!("{op} needs an array"))),
            },
            "$exists" => Value::Bool(truthy(arg)),
            "$type" => match arg {
                // Any of several types: an `$or` of one `$type` each (none: nothing matches).
                Bson::Array(types) => {
                    let mut any = types
                        .iter()
                        .map(|t| Ok(json!({"$type": type_name(t)?})))
                        .collect::<Result<Vec<_>, MongoError>>()?;
                    if any.is_empty() {
                        any.push(json!({"$in": []}));
                    }
                    insert_or(&mut out, Value::Array(any));
                    continue;
                }
                _ => json!(type_name(arg)?),
            },
            "$regex" => match arg {
                Bson::String(p) => json!(regex(p, options.unwrap_or(""))?),
                Bson::RegularExpression(re) => {
                    json!(regex(re.pattern.as_str(), re.options.as_str())?)
                }
                _ => return Err(MongoError::bad_value("$regex has to be a string")),
            },
            "$options" if ops.contains_key("$regex") => continue,
            "$options" => return Err(MongoError::bad_value("$options needs a $regex")),
            "$not" => match arg {
                Bson::Document(d) => operators(field, d)?,
                Bson::RegularExpression(_) => cond(field, arg)?,
                _ => return Err(MongoError::bad_value("$not needs a regex or a document")),
            },
            "$elemMatch" => match arg {
                Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                    operators(field, d)?
                }
                Bson::Document(d) => Value::Object(expr(d)?),
                _ => return Err(MongoError::bad_value("$elemMatch needs an Object")),
            },
            "$bitsAllSet" | "$bitsAnySet" | "$bitsAllClear" | "$bitsAnyClear" => {
                crate::bit_mask::positions(field, op, arg)?
            }
            // No geospatial index exists (the Mongo front end builds none): `$near` gets the
            // planner error MongoDB gives without one; `$geoWithin`/`$geoIntersects`, which
            // MongoDB answers by a scan, are not evaluated yet.
            "$near" | "$nearSphere" => {
                return Err(MongoError::new(
                    291,
                    "NoQueryExecutionPlans",
                    "error processing query: planner returned error :: caused by :: unable to find index for $geoNear query",
                ));
            }
            "$geoWithin" | "$geoIntersects" => {
                return Err(MongoError::not_implemented(format!("{op} is not supported yet")));
            }
            other => return Err(MongoError::bad_value(format!("unknown operator: {other}"))),
        };
        out.insert(op.clone(), value);
    }
    Ok(Value::Object(out))
}

/// Adds a field-level `$or` of `any` to a field's operators, beside one already there.
fn insert_or(out: &mut Map<String, Value>, any: Value) {
    match out.remove("$or") {
        Some(earlier) => {
            let both = json!([{"$or": earlier}, {"$or": any}]);
            match out.get_mut("$and").and_then(Value::as_array_mut) {
                Some(and) => and.extend(both.as_array().into_iter().flatten().cloned()),
                None => {
                    out.insert("$and".to_string(), both);
                }
            }
        }
        None => {
            out.insert("$or".to_string(), any);
        }
    }
}

fn is_regex(v: &Bson) -> bool {
    matches!(v, Bson::RegularExpression(_))
}

/// `$in` holding regular expressions as the `$or` of one `$regex` per expression and an
/// `$in` of the other values, on the same field (a value, or an array element, matches
/// when it equals a value or a regex matches it, as in MongoDB).
fn in_regexes(items: &[Bson]) -> Result<Value, MongoError> {
    let mut any = Vec::new();
    let mut values = Vec::new();
    for item in items {
        match item {
            Bson::RegularExpression(re) => {
                any.push(json!({"$regex": regex(re.pattern.as_str(), re.options.as_str())?}));
            }
            other => values.push(literal(other)),
        }
    }
    if !values.is_empty() {
        any.push(json!({"$in": values}));
    }
    Ok(Value::Array(any))
}

/// A value as the stored documents are matched.
fn literal(value: &Bson) -> Value {
    ejson::value_to_json(value)
}

fn truthy(value: &Bson) -> bool {
    match value {
        Bson::Boolean(b) => *b,
        Bson::Int32(i) => *i != 0,
        Bson::Int64(i) => *i != 0,
        Bson::Double(d) => *d != 0.0,
        Bson::Null | Bson::Undefined => false,
        _ => true,
    }
}

/// MongoDB `$type` names and numbers as the aliases the Mongo dialect matches
/// (`bunko_query::bson_order::has_type`): `number` matches every numeric type, the others
/// one BSON type each.
fn type_name(arg: &Bson) -> Result<&'static str, MongoError> {
    let code = match arg {
        Bson::String(s) => match s.as_str() {
            "number" => return Ok("number"),
            "double" => 1,
            "string" => 2,
            "object" => 3,
            "array" => 4,
            "binData" => 5,
            "undefined" => 6,
            "objectId" => 7,
            "bool" => 8,
            "date" => 9,
            "null" => 10,
            "regex" => 11,
            "dbPointer" => 12,
            "javascript" => 13,
            "symbol" => 14,
            "javascriptWithScope" => 15,
            "int" => 16,
            "timestamp" => 17,
            "long" => 18,
            "decimal" => 19,
            "minKey" => -1,
            "maxKey" => 127,
            other => {
                return Err(MongoError::bad_value(format!("Unknown type name alias: {other}")));
            }
        },
        Bson::Int32(i) => *i,
        Bson::Int64(i) => i32::try_from(*i).unwrap_or(0),
        Bson::Double(d) if d.fract() == 0.0 => *d as i32,
        _ => return Err(MongoError::bad_value("type must be represented as a number or a string")),
    };
    match code {
        1 => Ok("double"),
        2 => Ok("string"),
        3 => Ok("object"),
        4 => Ok("array"),
        5 => Ok("binData"),
        6 => Ok("undefined"),
        7 => Ok("objectId"),
        8 => Ok("bool"),
        9 => Ok("date"),
        10 => Ok("null"),
        11 => Ok("regex"),
        12 => Ok("dbPointer"),
        13 => Ok("javascript"),
        14 => Ok("symbol"),
        15 => Ok("javascriptWithScope"),
        16 => Ok("int"),
        17 => Ok("timestamp"),
        18 => Ok("long"),
        19 => Ok("decimal"),
        -1 => Ok("minKey"),
        127 => Ok("maxKey"),
        other => Err(MongoError::bad_value(format!("Invalid numerical type code: {other}"))),
    }
}

/// A PCRE pattern with MongoDB options as a pattern with inline flags.
fn regex(pattern: &str, options: &str) -> Result<String, MongoError> {
    let mut flags = String::new();
    for c in options.chars() {
        match c {
            'i' | 'm' | 's' | 'x' => flags.push(c),
            'u' => {}
            other => {
                return Err(MongoError::bad_value(format!(
                    "invalid flag in regex options: {other}"
                )));
            }
        }
    }
    Ok(if flags.is_empty() { pattern.to_string() } else { format!("(?{flags}){pattern}") })
}

/// A MongoDB sort document: fields with `1`/`-1`.
pub fn sort(spec: &Document) -> Result<Vec<(FieldPath, Direction)>, MongoError> {
    spec.iter()
        .map(|(field, dir)| {
            let dir = match dir {
                Bson::Int32(1) | Bson::Int64(1) => Direction::Asc,
                Bson::Int32(-1) | Bson::Int64(-1) => Direction::Desc,
                Bson::Double(d) if *d == 1.0 => Direction::Asc,
                Bson::Double(d) if *d == -1.0 => Direction::Desc,
                Bson::Document(_) => {
                    return Err(MongoError::not_implemented("$meta sorts are not supported yet"));
                }
                _ => {
                    return Err(MongoError::bad_value(
                        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                    ));
                }
            };
            let path = FieldPath::parse(field).map_err(MongoError::from)?;
            Ok((path, dir))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    fn matches(filter: Document, stored: Document) -> Result<bool, MongoError> {
        let doc = Value::Object(ejson::to_json(&stored));
        Ok(selector(&filter)?.matches(&doc, bunko_query::Dialect::Mongo))
    }

    #[test]
    fn filters_match_as_mongodb() -> Result<(), MongoError> {
        let person = doc! {"name": "Sato", "age": 30_i64, "addr": [{"city": "Nagoya"}, {"city": "Kyoto"}],
        "oid": bson::oid::ObjectId::from_bytes([1; 12])};
        assert!(matches(doc! {"age": 30_i32}, person.clone())?);
        assert!(matches(doc! {"age": {"$gte": 29.5}}, person.clone())?);
        assert!(matches(doc! {"addr.city": "Kyoto"}, person.clone())?);
        assert!(matches(doc! {"oid": bson::oid::ObjectId::from_bytes([1; 12])}, person.clone())?);
        assert!(matches(doc! {"name": {"$regex": "^sa", "$options": "i"}}, person.clone())?);
        // A literal document is an exact equality, with an array element too.
        assert!(matches(doc! {"addr": {"city": "Kyoto"}}, person.clone())?);
        assert!(!matches(doc! {"addr": {"city": "Kyoto", "x": 1}}, person.clone())?);
        assert!(matches(doc! {"addr": {"city": "Kyoto"}}, doc! {"addr": {"city": "Kyoto"}})?);
        assert!(matches(doc! {"missing": null}, person.clone())?);
        let unknown = selector(&doc! {"a": {"$foo": 1}}).err();
        assert_eq!(unknown.map(|e| (e.code, e.errmsg)), Some((2, "unknown operator: $foo".into())));
        assert_eq!(selector(&doc! {"$where": "1"}).err().map(|e| e.code), Some(238));
        // Text and geo queries are refused as MongoDB refuses them without an index.
        let refused = |f: Document| selector(&f).err().map(|e| (e.code, e.code_name));
        assert_eq!(refused(doc! {"$text": {"$search": "猫"}}), Some((27, "IndexNotFound")));
        let near = doc! {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}};
        assert_eq!(refused(near), Some((291, "NoQueryExecutionPlans")));
        let within = doc! {"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 1]}}};
        assert_eq!(refused(within), Some((238, "NotImplemented")));
        assert!(matches(doc! {"oid": {"$type": "objectId"}}, person.clone())?);
        assert!(matches(doc! {"age": {"$type": "number"}, "name": {"$type": 2}}, person.clone())?);
        assert!(!matches(doc! {"addr": {"$type": "objectId"}}, person.clone())?);
        let later = bson::oid::ObjectId::from_bytes([2; 12]);
        assert!(matches(doc! {"oid": {"$lt": later}}, person.clone())?);
        assert!(!matches(doc! {"oid": {"$gt": {"a": 1}}}, person.clone())?);
        Ok(())
    }

    /// The four numeric types are told apart (`$type` names and codes, arrays of types,
    /// elements of arrays), `number` matches them all, and values still compare across them.
    #[test]
    fn numeric_types_are_told_apart() -> Result<(), MongoError> {
        let dec =
            |s: &str| Bson::Decimal128(s.parse().unwrap_or(bson::Decimal128::from_bytes([0; 16])));
        let docs = [
            doc! {"n": 5_i32},
            doc! {"n": 5_i64},
            doc! {"n": 5.0},
            doc! {"n": dec("5")},
            doc! {"n": 3_000_000_000_i64},
            doc! {"n": f64::NAN},
            doc! {"n": [1_i32, "x"]},
            doc! {"n": "5"},
        ];
        let which = |filter: Document| -> Result<Vec<usize>, MongoError> {
            let mut out = Vec::new();
            for (i, d) in docs.iter().enumerate() {
                if matches(filter.clone(), d.clone())? {
                    out.push(i);
                }
            }
            Ok(out)
        };
        assert_eq!(which(doc! {"n": {"$type": "int"}})?, [0, 6]);
        assert_eq!(which(doc! {"n": {"$type": 16}})?, [0, 6]);
        assert_eq!(which(doc! {"n": {"$type": "long"}})?, [1, 4]);
        assert_eq!(which(doc! {"n": {"$type": 18_i64}})?, [1, 4]);
        assert_eq!(which(doc! {"n": {"$type": "double"}})?, [2, 5]);
        assert_eq!(which(doc! {"n": {"$type": 1.0}})?, [2, 5]);
        assert_eq!(which(doc! {"n": {"$type": "decimal"}})?, [3]);
        assert_eq!(which(doc! {"n": {"$type": 19}})?, [3]);
        assert_eq!(which(doc! {"n": {"$type": "number"}})?, [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(which(doc! {"n": {"$type": ["long", 19]}})?, [1, 3, 4]);
        assert_eq!(which(doc! {"n": {"$type": []}})?, Vec::<usize>::new());
        let x = Bson::try_from(json!({"$regularExpression": {"pattern": "x", "options": ""}}))
            .unwrap_or(Bson::Null);
        assert_eq!(which(doc! {"n": {"$type": ["string"], "$in": [x, 9]}})?, [6]);
        assert_eq!(which(doc! {"n": {"$type": "long", "$gte": 5.0}})?, [1, 4]);
        assert_eq!(which(doc! {"n": 5_i64})?, [0, 1, 2, 3]);
        assert_eq!(which(doc! {"n": {"$mod": [2, 1]}})?, [0, 1, 2, 3, 6]);
        assert_eq!(which(doc! {"n": {"$bitsAllSet": [0, 2]}})?, [0, 1, 2, 3]);
        let long = doc! {"$jsonSchema": {"properties": {"n": {"bsonType": "long"}}}};
        assert_eq!(which(long)?, [1, 4]);
        let is_decimal = doc! {"$expr": {"$eq": [{"$type": "$n"}, "decimal"]}};
        assert_eq!(which(is_decimal)?, [3]);
        let symbol = doc! {"n": Bson::Symbol("s".into())};
        let code = doc! {"n": Bson::JavaScriptCode("f()".into())};
        for (alias, number, doc) in [("symbol", 14, &symbol), ("javascript", 13, &code)] {
            assert!(matches(doc! {"n": {"$type": alias}}, doc.clone())?);
            assert!(matches(doc! {"n": {"$type": number}}, doc.clone())?);
            assert!(!matches(doc! {"n": {"$type": "string"}}, doc.clone())?);
            assert!(!matches(doc! {"n": {"$type": "object"}}, doc.clone())?);
        }
        assert!(matches(doc! {"n": {"$type": "undefined"}}, doc! {"n": Bson::Undefined})?);
        let bad = selector(&doc! {"n": {"$type": 99}}).err().map(|e| (e.code, e.errmsg));
        assert_eq!(bad, Some((2, "Invalid numerical type code: 99".into())));
        Ok(())
    }

    #[test]
    fn expr_and_json_schema_match_inside_logical_operators() -> Result<(), MongoError> {
        let item = doc! {"_id": 1, "qty": 5_i32, "limit": 3_i32, "name": "pen"};
        let over = doc! {"$expr": {"$gt": ["$qty", "$limit"]}};
        assert!(matches(doc! {"$or": [over.clone(), {"name": "ink"}]}, item.clone())?);
        assert!(!matches(doc! {"$and": [over.clone(), {"name": "ink"}]}, item.clone())?);
        assert!(!matches(doc! {"$nor": [over.clone()]}, item.clone())?);
        assert!(matches(
            doc! {"name": "pen", "$or": [{"$and": [over, {"qty": 5}]}]},
            item.clone()
        )?);
        let int_qty =
            doc! {"$jsonSchema": {"required": ["qty"], "properties": {"qty": {"bsonType": "int"}}}};
        assert!(matches(int_qty.clone(), item.clone())?);
        assert!(!matches(int_qty.clone(), doc! {"qty": 5.0})?);
        assert!(matches(doc! {"$or": [int_qty, {"name": "pen"}]}, doc! {"name": "pen"})?);
        let bad = selector(&doc! {"$jsonSchema": {"bogus": 1}}).err();
        assert_eq!(bad.map(|e| e.code), Some(9));
        let bad = selector(&doc! {"$jsonSchema": 1}).err();
        assert_eq!(bad.map(|e| e.code), Some(14));
        Ok(())
    }
}
