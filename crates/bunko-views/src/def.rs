//! View definitions read from a design document, and their signatures.
//!
//! A design document's views form one *group* ([`GroupDef`]): the views, each naming a
//! map function and an optional reduce, plus `views.lib`, `language` and `options`. Each
//! distinct map function is a *map index* ([`MapDef`]) named by its own signature: the
//! MD5 of what changes the rows it emits (the map source, `views.lib`, `language`,
//! `partitioned`, `include_design`, `local_seq`, raw collation and the collator version).
//! Reduce functions run at query time and are not part of it, so editing a reduce
//! function, or adding or removing another view, keeps every unchanged map index and its
//! rows; identical map functions, in one design document or several, share one index.
//!
//! The group's own signature ([`GroupDef::sig`]) covers every definition, reduces
//! included: it is what `_info` reports and what names the group in the registry.

use std::collections::{BTreeMap, BTreeSet};

use md5::{Digest, Md5};
use serde_json::{Map, Value, json};

use bunko_engine::design;

/// Version of the map-index signature term; a different layout of the term would change
/// every signature, so it is kept apart from the group signatures of older data dirs.
const MAP_SIG_VERSION: &str = "bunko-map-1";

/// One view of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDef {
    pub name: String,
    /// Position of the view's map index in [`GroupDef::maps`].
    pub map: usize,
    /// The `reduce` source (`_sum` or JavaScript), if any.
    pub reduce: Option<String>,
}

/// One map index: a map function and the signature naming its rows in storage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapDef {
    /// Hex MD5 of everything that changes the rows (see the module docs).
    pub sig: String,
    pub source: String,
    /// Raw collation: the view's `options.collation == "raw"` (CouchDB's, per view), or
    /// the design document's (which Bunko also reads).
    pub raw: bool,
}

/// The views of one design document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDef {
    /// Hex MD5 of every definition of the group, reduces included.
    pub sig: String,
    pub language: String,
    /// Distinct map functions, sorted by source.
    pub maps: Vec<MapDef>,
    pub views: Vec<ViewDef>,
    /// `views.lib`, for `require`.
    pub lib: Option<Value>,
    pub partitioned: bool,
    pub include_design: bool,
    pub local_seq: bool,
    /// The design document's `options.collation == "raw"` (every view raw).
    pub raw: bool,
    /// The background indexer keeps the group current (CouchDB's `autoupdate`, which
    /// `false` or `{"views": false}` turns off); queries still update it.
    pub autoupdate: bool,
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
        let options = body.get("options").and_then(Value::as_object);
        let flag = |name: &str| options.and_then(|o| o.get(name)).and_then(Value::as_bool);
        let raw = is_raw(body.get("options"));
        // name → ((map source, raw collation), reduce)
        let mut sources: BTreeMap<String, ((String, bool), Option<String>)> = BTreeMap::new();
        for (name, view) in views {
            if name == "lib" {
                continue;
            }
            let Some(map) = view.get("map").and_then(Value::as_str) else { continue };
            let reduce = view.get("reduce").and_then(Value::as_str).map(str::to_string);
            let map_raw = raw || is_raw(view.get("options"));
            sources.insert(name.clone(), ((map.to_string(), map_raw), reduce));
        }
        if sources.is_empty() {
            return None;
        }
        let maps: Vec<(String, bool)> =
            sources.values().map(|(m, _)| m.clone()).collect::<BTreeSet<_>>().into_iter().collect();
        let views = sources
            .iter()
            .map(|(name, (map, reduce))| ViewDef {
                name: name.clone(),
                map: maps.iter().position(|m| m == map).unwrap_or(0),
                reduce: reduce.clone(),
            })
            .collect();
        let mut def = GroupDef {
            sig: String::new(),
            language: language.to_string(),
            maps: Vec::new(),
            views,
            lib: views_lib(body),
            partitioned: design::is_partitioned(body, db_partitioned),
            include_design: flag("include_design").unwrap_or(false),
            local_seq: flag("local_seq").unwrap_or(false),
            raw,
            autoupdate: autoupdate(body),
        };
        def.maps = maps.into_iter().map(|(source, raw)| def.map_def(source, raw)).collect();
        def.sig = def.signature();
        Some(def)
    }

    /// The view named `name`.
    pub fn view(&self, name: &str) -> Option<&ViewDef> {
        self.views.iter().find(|v| v.name == name)
    }

    /// The map index of `source` in this group, collated raw or not.
    fn map_def(&self, source: String, raw: bool) -> MapDef {
        let term = json!([MAP_SIG_VERSION, self.language, source, self.row_options(raw)]);
        MapDef { sig: md5_hex(&term), source, raw }
    }

    fn signature(&self) -> String {
        let sources: Vec<&str> = self.maps.iter().map(|m| m.source.as_str()).collect();
        let views: Vec<Value> = self
            .views
            .iter()
            .map(|v| {
                // Only a view's own raw collation is added, so older signatures stay.
                match self.maps.get(v.map).is_some_and(|m| m.raw && !self.raw) {
                    true => json!([v.name, sources.get(v.map), v.reduce, "raw"]),
                    false => json!([v.name, sources.get(v.map), v.reduce]),
                }
            })
            .collect();
        md5_hex(&json!([
            self.language,
            sources,
            views,
            self.row_options(self.raw),
            self.autoupdate
        ]))
    }

    /// What besides the map source changes the rows: `views.lib`, the options, the
    /// collation (`raw`) and the collator version.
    fn row_options(&self, raw: bool) -> Value {
        json!([
            self.lib.as_ref().map(canonical),
            self.partitioned,
            self.include_design,
            self.local_seq,
            raw,
            bunko_doc::collate::COLLATION_VERSION,
        ])
    }
}

/// Whether `options` (of a view, or of the design document) ask for raw collation.
fn is_raw(options: Option<&Value>) -> bool {
    options.and_then(|o| o.get("collation")).and_then(Value::as_str) == Some("raw")
}

/// CouchDB's `autoupdate` member: `false`, or an object whose `views` is `false`, stops
/// background updates (`ken_server:should_update`).
fn autoupdate(body: &Map<String, Value>) -> bool {
    match body.get("autoupdate") {
        Some(Value::Bool(false)) => false,
        Some(Value::Object(types)) => types.get("views") != Some(&Value::Bool(false)),
        _ => true,
    }
}

fn md5_hex(term: &Value) -> String {
    hex::encode(Md5::digest(term.to_string().as_bytes()))
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
        assert_ne!(a.maps.first().map(|m| &m.sig), Some(&a.sig));
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

    #[test]
    fn map_signatures_ignore_reduces_and_other_views() {
        let sig = |v: Value| {
            let def = GroupDef::from_ddoc(&body(v), false);
            def.map(|d| (d.sig.clone(), d.maps.iter().map(|m| m.sig.clone()).collect::<Vec<_>>()))
        };
        let m = "function(d){emit(d.a)}";
        let Some((group, maps)) = sig(json!({"views": {"v": {"map": m}}})) else {
            panic!("has views");
        };
        let Some((reduced, reduced_maps)) =
            sig(json!({"views": {"v": {"map": m, "reduce": "_count"}, "w": {"map": "f"}}}))
        else {
            panic!("has views");
        };
        assert_ne!(group, reduced, "the group signature covers reduces");
        assert!(reduced_maps.contains(&maps[0]), "the map index is kept");
        let raw = sig(json!({"views": {"v": {"map": m}}, "options": {"collation": "raw"}}));
        assert!(raw.is_some_and(|(_, raw)| raw != maps), "collation changes the rows");
        let lib = sig(json!({"views": {"v": {"map": m}, "lib": {"x": "exports.y=1"}}}));
        assert!(lib.is_some_and(|(_, lib)| lib != maps), "views.lib changes the rows");
    }
}
