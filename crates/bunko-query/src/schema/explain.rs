//! Why a document fails a `$jsonSchema`, in the shape MongoDB 5+ reports it under
//! `errInfo.details` of a `DocumentValidationFailure` (121):
//! `{operatorName: "$jsonSchema", [title], schemaRulesNotSatisfied: [...]}`, one entry per
//! failing keyword (`properties` → `propertiesNotSatisfied` with each property's own
//! `details`; `required` → `missingProperties`; `additionalProperties: false` → the extra
//! names; a value keyword → `specifiedAs`, `reason`, `consideredValue`). Object keywords
//! come before the others, as MongoDB lists them.

use bson::{Bson, Document, doc};

use super::{keyword, value};

/// The order keywords are reported in (the others follow in the schema's order).
const FIRST: &[&str] = &["properties", "patternProperties", "additionalProperties", "required"];

/// `errInfo.details` for `doc` failing `schema`.
pub fn details(schema: &Document, doc: &Document) -> Document {
    let mut out = doc! {"operatorName": "$jsonSchema"};
    if let Ok(title) = schema.get_str("title") {
        out.insert("title", title);
    }
    out.insert("schemaRulesNotSatisfied", rules(schema, &Bson::Document(doc.clone())));
    out
}

/// The failing keywords of `schema` for `v`.
fn rules(schema: &Document, v: &Bson) -> Vec<Bson> {
    let first = FIRST.iter().filter_map(|k| schema.get(*k).map(|a| (*k, a)));
    let rest = schema.iter().filter(|(k, _)| !FIRST.contains(&k.as_str()));
    first
        .chain(rest.map(|(k, a)| (k.as_str(), a)))
        .filter(|(key, arg)| !keyword(schema, key, arg, v))
        .map(|(key, arg)| Bson::Document(rule(schema, key, arg, v)))
        .collect()
}

fn rule(schema: &Document, key: &str, arg: &Bson, v: &Bson) -> Document {
    let specified = doc! {key: arg.clone()};
    let mut out = doc! {"operatorName": key};
    match (key, v) {
        ("properties", Bson::Document(d)) => {
            out.insert("propertiesNotSatisfied", properties(arg, d));
            return out;
        }
        ("required", Bson::Document(d)) => {
            let missing: Vec<Bson> = super::names(arg)
                .into_iter()
                .filter(|n| !d.contains_key(*n))
                .map(Bson::from)
                .collect();
            out.insert("specifiedAs", specified);
            out.insert("missingProperties", missing);
            return out;
        }
        ("additionalProperties", Bson::Document(d)) => {
            let named = schema.get_document("properties").ok();
            let extra: Vec<Bson> = d
                .keys()
                .filter(|k| !named.is_some_and(|n| n.contains_key(k.as_str())))
                .map(|k| Bson::from(k.as_str()))
                .collect();
            out.insert("specifiedAs", specified);
            out.insert("additionalProperties", extra);
            return out;
        }
        _ => {}
    }
    out.insert("specifiedAs", specified);
    out.insert("reason", reason(key));
    out.insert("consideredValue", v.clone());
    if matches!(key, "bsonType" | "type") {
        out.insert("consideredType", crate::expr::value::type_name(v));
    }
    out
}

fn properties(arg: &Bson, d: &Document) -> Vec<Bson> {
    let Bson::Document(props) = arg else { return Vec::new() };
    props
        .iter()
        .filter_map(|(name, s)| match (d.get(name), s) {
            (Some(v), Bson::Document(s)) if !value(s, v) => {
                let mut p = doc! {"propertyName": name};
                if let Ok(description) = s.get_str("description") {
                    p.insert("description", description);
                }
                p.insert("details", rules(s, v));
                Some(Bson::Document(p))
            }
            _ => None,
        })
        .collect()
}

fn reason(key: &str) -> &'static str {
    match key {
        "bsonType" | "type" => "type did not match",
        "enum" => "value was not found in enum",
        "minimum" | "maximum" => "comparison failed",
        "multipleOf" => "considered value is not a multiple of the specified value",
        "minLength" | "maxLength" => "specified string length was not satisfied",
        "pattern" => "regular expression did not match",
        "minItems" | "maxItems" => "array did not match specified length",
        "uniqueItems" => "found a duplicate item",
        "items" => "At least one item did not match the sub-schema",
        "minProperties" | "maxProperties" => "specified number of properties was not satisfied",
        "not" => "child expression matched",
        _ => "expression did not match",
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::details;

    #[test]
    fn failures_are_reported_as_mongodb_does() {
        let schema = doc! {"title": "Student", "required": ["name", "year"], "properties": {
        "name": {"bsonType": "string", "description": "must be a string"},
        "year": {"bsonType": "int", "minimum": 2017},
        "gpa": {"bsonType": ["double"]}}};
        let got = details(&schema, &doc! {"_id": 1, "year": 2016, "gpa": 3});
        assert_eq!(
            got,
            doc! {"operatorName": "$jsonSchema", "title": "Student", "schemaRulesNotSatisfied": [
                {"operatorName": "properties", "propertiesNotSatisfied": [
                    {"propertyName": "year", "details": [{"operatorName": "minimum",
                        "specifiedAs": {"minimum": 2017}, "reason": "comparison failed",
                        "consideredValue": 2016}]},
                    {"propertyName": "gpa", "details": [{"operatorName": "bsonType",
                        "specifiedAs": {"bsonType": ["double"]}, "reason": "type did not match",
                        "consideredValue": 3, "consideredType": "int"}]},
                ]},
                {"operatorName": "required", "specifiedAs": {"required": ["name", "year"]},
                    "missingProperties": ["name"]},
            ]}
        );
        let closed = doc! {"properties": {"_id": {}}, "additionalProperties": false};
        assert_eq!(
            details(&closed, &doc! {"_id": 1, "x": 2}).get_array("schemaRulesNotSatisfied").ok(),
            Some(&vec![bson::bson!({"operatorName": "additionalProperties",
                "specifiedAs": {"additionalProperties": false}, "additionalProperties": ["x"]})])
        );
    }
}
