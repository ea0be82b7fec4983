//! Index definitions as CouchDB stores them: a design document with `"language": "query"`
//! holds one view per JSON index,
//!
//! ```json
//! {"_id": "_design/by-device", "language": "query", "options": {"partitioned": true},
//!  "views": {"deviceID-readings": {
//!      "map": {"fields": {"deviceID": "asc", "ts": "asc"}, "partial_filter_selector": {}},
//!      "reduce": "_count",
//!      "options": {"def": {"fields": ["deviceID", "ts"]}}}}}
//! ```
//!
//! so indexes replicate with the design documents. [`IndexDef::from_ddoc`] reads them back;
//! [`IndexDef::add_to`] and [`remove_from`] edit a design document body the way
//! `POST /{db}/_index` and `DELETE /{db}/_index/…` do.

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use crate::design;

/// One field of an index, with its direction (`desc` only changes how sorts may use it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexField {
    pub name: String,
    pub desc: bool,
}

/// A Mango JSON index.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexDef {
    /// The design document holding it (`_design/…`).
    pub ddoc: String,
    pub name: String,
    pub fields: Vec<IndexField>,
    /// Only documents matching this selector are indexed.
    pub partial_filter: Option<Value>,
    pub partitioned: bool,
    /// A MongoDB-semantics index (`createIndexes`): its options. Such indexes live in the
    /// design document `_design/mongodb` ([`super::mongo`]) and serve only MongoDB queries.
    pub mongo: Option<super::mongo::MongoSpec>,
}

impl IndexDef {
    /// The JSON indexes of a design document (none unless its language is `query`).
    pub fn from_ddoc(ddoc: &str, body: &Map<String, Value>, db_partitioned: bool) -> Vec<Self> {
        if body.get("language").and_then(Value::as_str) == Some(super::mongo::LANGUAGE) {
            return super::mongo::defs_from(ddoc, body);
        }
        if body.get("language").and_then(Value::as_str) != Some("query") {
            return Vec::new();
        }
        let partitioned = design::is_partitioned(body, db_partitioned);
        let Some(Value::Object(views)) = body.get("views") else {
            return Vec::new();
        };
        views
            .iter()
            .filter_map(|(name, view)| {
                let map = view.get("map")?.as_object()?;
                let fields = parse_fields(map.get("fields")?)?;
                let partial_filter = map
                    .get("partial_filter_selector")
                    .or_else(|| map.get("selector"))
                    .filter(|s| s.as_object().is_some_and(|o| !o.is_empty()))
                    .cloned();
                Some(IndexDef {
                    ddoc: ddoc.to_string(),
                    name: name.clone(),
                    fields,
                    partial_filter,
                    partitioned,
                    mongo: None,
                })
            })
            .collect()
    }

    /// Whether `other` is this index with only options changed that leave its entries as
    /// they are (a MongoDB index's `hidden`, `expireAfterSeconds`, `unique` and
    /// `prepareUnique`: entries are the same whether or not keys are unique): the registry then
    /// keeps the built index under the new definition instead of building it again.
    pub fn same_entries(&self, other: &IndexDef) -> bool {
        let unmodified = |d: &IndexDef| {
            let mut d = d.clone();
            if let Some(spec) = d.mongo.as_mut() {
                spec.hidden = false;
                spec.expire_after_seconds = None;
                spec.unique = false;
                spec.prepare_unique = false;
            }
            d
        };
        unmodified(self) == unmodified(other)
    }

    /// A stable number naming this index's entries in storage: a change of definition
    /// gives a new number, so stale entries are never read.
    pub fn num(&self) -> u64 {
        let mut hasher = Md5::new();
        hasher.update(self.ddoc.as_bytes());
        hasher.update([0]);
        hasher.update(self.name.as_bytes());
        hasher.update([0]);
        hasher.update(self.def_json().to_string().as_bytes());
        hasher.update([u8::from(self.partitioned)]);
        let digest = hasher.finalize();
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        u64::from_be_bytes(bytes)
    }

    /// `def` as `GET /{db}/_index` shows it.
    pub fn def_json(&self) -> Value {
        let fields: Vec<Value> = self
            .fields
            .iter()
            .map(|f| json!({ f.name.clone(): if f.desc { "desc" } else { "asc" } }))
            .collect();
        let mut def = json!({"fields": fields});
        if let Some(partial) = &self.partial_filter {
            def["partial_filter_selector"] = partial.clone();
        }
        def
    }

    /// The entry of `GET /{db}/_index`.
    pub fn to_json(&self) -> Value {
        json!({
            "ddoc": self.ddoc,
            "name": self.name,
            "type": "json",
            "partitioned": self.partitioned,
            "def": self.def_json(),
        })
    }

    /// Adds this index to a design-document body as CouchDB lays it out.
    pub fn add_to(&self, body: &mut Map<String, Value>) {
        body.insert("language".into(), json!("query"));
        let mut map = Map::new();
        let fields: Map<String, Value> = self
            .fields
            .iter()
            .map(|f| (f.name.clone(), json!(if f.desc { "desc" } else { "asc" })))
            .collect();
        map.insert("fields".into(), Value::Object(fields));
        map.insert(
            "partial_filter_selector".into(),
            self.partial_filter.clone().unwrap_or_else(|| json!({})),
        );
        let def_fields: Vec<Value> = self
            .fields
            .iter()
            .map(|f| if f.desc { json!({ f.name.clone(): "desc" }) } else { json!(f.name) })
            .collect();
        let view = json!({
            "map": Value::Object(map),
            "reduce": "_count",
            "options": {"def": {"fields": def_fields}},
        });
        let views = body.entry("views").or_insert_with(|| json!({}));
        if !views.is_object() {
            *views = json!({});
        }
        if let Some(views) = views.as_object_mut() {
            views.insert(self.name.clone(), view);
        }
    }
}

/// Removes index `name` from a design-document body; `false` if it is not there. A body
/// left with nothing but its language is to be deleted.
pub fn remove_from(body: &mut Map<String, Value>, name: &str) -> bool {
    let Some(Value::Object(views)) = body.get_mut("views") else {
        return false;
    };
    if views.shift_remove(name).is_none() {
        return false;
    }
    if views.is_empty() {
        body.shift_remove("views");
    }
    true
}

/// `{"a": "asc", "b": "desc"}` (a design document's `map.fields`) or
/// `["a", {"b": "desc"}]` (a request's `index.fields`).
pub fn parse_fields(fields: &Value) -> Option<Vec<IndexField>> {
    let one = |name: &str, dir: &Value| match dir.as_str()? {
        "asc" => Some(IndexField { name: name.to_string(), desc: false }),
        "desc" => Some(IndexField { name: name.to_string(), desc: true }),
        _ => None,
    };
    match fields {
        Value::Object(map) => map.iter().map(|(k, v)| one(k, v)).collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| match item {
                Value::String(s) => Some(IndexField { name: s.clone(), desc: false }),
                Value::Object(o) if o.len() == 1 => o.iter().next().and_then(|(k, v)| one(k, v)),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn an_index_round_trips_through_its_design_document() {
        let def = IndexDef {
            ddoc: "_design/d".into(),
            name: "by-device".into(),
            fields: vec![
                IndexField { name: "deviceID".into(), desc: false },
                IndexField { name: "ts".into(), desc: true },
            ],
            partial_filter: Some(json!({"type": "reading"})),
            partitioned: true,
            mongo: None,
        };
        let mut body = Map::new();
        def.add_to(&mut body);
        assert_eq!(
            body["views"]["by-device"]["map"]["fields"],
            json!({"deviceID": "asc", "ts": "desc"})
        );
        assert_eq!(body["views"]["by-device"]["reduce"], "_count");
        assert_eq!(IndexDef::from_ddoc("_design/d", &body, true), vec![def.clone()]);
        let global = IndexDef::from_ddoc("_design/d", &body, false);
        assert!(!global[0].partitioned);
        assert_ne!(global[0].num(), def.num(), "a different definition has other entries");
        assert!(remove_from(&mut body, "by-device"));
        assert!(!remove_from(&mut body, "by-device"));
        assert_eq!(Value::Object(body), json!({"language": "query"}));
    }

    #[test]
    fn javascript_design_documents_hold_no_json_indexes() {
        let body = obj(json!({"views": {"v": {"map": {"fields": {"a": "asc"}}}}}));
        assert!(IndexDef::from_ddoc("_design/x", &body, false).is_empty());
        assert_eq!(parse_fields(&json!(["a", {"b": "desc"}])).map(|f| f.len()), Some(2));
        assert_eq!(parse_fields(&json!([{"b": "sideways"}])), None);
    }
}
