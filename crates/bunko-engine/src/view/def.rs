//! View definitions read from a design document, and their signature.
//!
//! A design document's views form one *group*: the map sources (each distinct source
//! once, sorted), the views naming them, `views.lib`, `language` and `options`. The
//! signature is the MD5 of all of that in a canonical form, so two design documents with
//! identical definitions share one index (CouchDB's rule), and any change to a definition
//! gives a new, empty index.

use std::collections::{BTreeMap, BTreeSet};

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use crate::design;

/// One view of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDef {
    pub name: String,
    /// Position of the view's map source in [`GroupDef::maps`].
    pub map: usize,
    /// The `reduce` source (`_sum` or JavaScript), if any.
    pub reduce: Option<String>,
}

/// The views of one design document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDef {
    /// Hex MD5 naming the index in storage.
    pub sig: String,
    pub language: String,
    /// Distinct map sources, sorted.
    pub maps: Vec<String>,
    pub views: Vec<ViewDef>,
    /// `views.lib`, for `require`.
    pub lib: Option<Value>,
    pub partitioned: bool,
    pub include_design: bool,
    pub local_seq: bool,
    /// `options.collation == "raw"`.
    pub raw: bool,
}

impl GroupDef {
    /// The view group of a design document body; `None` when it has no JavaScript views
    /// (Mango `"language": "query"` documents are indexes, not views).
    pub fn from_ddoc(body: &Map<String, Value>, db_partitioned: bool) -> Option<GroupDef> {
        let language = body.get("language").and_then(Value::as_str).unwrap_or("javascript");
        if language == "query" {
            return None;
        }
        let views = body.get("views")?.as_object()?;
        let mut sources: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
        for (name, view) in views {
            if name == "lib" {
                continue;
            }
            let Some(map) = view.get("map").and_then(Value::as_str) else { continue };
            let reduce = view.get("reduce").and_then(Value::as_str).map(str::to_string);
            sources.insert(name.clone(), (map.to_string(), reduce));
        }
        if sources.is_empty() {
            return None;
        }
        let maps: Vec<String> =
            sources.values().map(|(m, _)| m.clone()).collect::<BTreeSet<_>>().into_iter().collect();
        let views = sources
            .iter()
            .map(|(name, (map, reduce))| ViewDef {
                name: name.clone(),
                map: maps.iter().position(|m| m == map).unwrap_or(0),
                reduce: reduce.clone(),
            })
            .collect();
        let options = body.get("options").and_then(Value::as_object);
        let flag = |name: &str| options.and_then(|o| o.get(name)).and_then(Value::as_bool);
        let lib = views_lib(body);
        let partitioned = design::is_partitioned(body, db_partitioned);
        let raw = options.and_then(|o| o.get("collation")).and_then(Value::as_str) == Some("raw");
        let mut def = GroupDef {
            sig: String::new(),
            language: language.to_string(),
            maps,
            views,
            lib,
            partitioned,
            include_design: flag("include_design").unwrap_or(false),
            local_seq: flag("local_seq").unwrap_or(false),
            raw,
        };
        def.sig = def.signature();
        Some(def)
    }

    /// The view named `name`.
    pub fn view(&self, name: &str) -> Option<&ViewDef> {
        self.views.iter().find(|v| v.name == name)
    }

    fn signature(&self) -> String {
        let views: Vec<Value> =
            self.views.iter().map(|v| json!([v.name, self.maps.get(v.map), v.reduce])).collect();
        let term = json!([
            self.language,
            self.maps,
            views,
            self.lib.as_ref().map(canonical),
            self.partitioned,
            self.include_design,
            self.local_seq,
            self.raw,
            bunko_doc::collate::COLLATION_VERSION,
        ]);
        hex::encode(Md5::digest(term.to_string().as_bytes()))
    }
}

fn views_lib(body: &Map<String, Value>) -> Option<Value> {
    body.get("views")?.get("lib").cloned()
}

/// `v` with object members sorted by key, so member order does not change a signature.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn identical_definitions_share_a_signature() {
        let a = json!({"views": {"v": {"map": "function(d){emit(1)}"}, "w": {"map": "function(d){emit(1)}", "reduce": "_count"}}});
        let b = json!({"_ignored": 1, "views": {"w": {"map": "function(d){emit(1)}", "reduce": "_count"}, "v": {"map": "function(d){emit(1)}"}}});
        let (Some(a), Some(b)) =
            (GroupDef::from_ddoc(&body(a), false), GroupDef::from_ddoc(&body(b), false))
        else {
            panic!("both have views");
        };
        assert_eq!(a.sig, b.sig);
        assert_eq!(a.maps.len(), 1);
        let c = json!({"views": {"v": {"map": "function(d){emit(2)}"}}});
        assert_ne!(GroupDef::from_ddoc(&body(c), false).map(|c| c.sig), Some(a.sig.clone()));
        let partitioned = GroupDef::from_ddoc(&body(json!({"views": {"v": {"map": "f"}}})), true);
        assert!(partitioned.is_some_and(|p| p.partitioned));
    }

    #[test]
    fn query_and_viewless_documents_have_no_group() {
        assert!(
            GroupDef::from_ddoc(&body(json!({"language": "query", "views": {}})), false).is_none()
        );
        assert!(GroupDef::from_ddoc(&body(json!({"views": {"lib": {}}})), false).is_none());
    }
}
