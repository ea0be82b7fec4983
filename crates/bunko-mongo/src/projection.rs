//! `find`'s `projection`: inclusion (`{a: 1, "b.c": 1}`) or exclusion (`{a: 0}`) of fields,
//! dotted paths reaching into sub-documents and arrays of sub-documents as MongoDB does;
//! `_id` is kept unless `_id: 0`. Projection operators (`$slice`, `$elemMatch`, `$`,
//! `$meta`) and computed fields are `NotImplemented`.

use std::collections::BTreeMap;

use bson::{Bson, Document};

use crate::error::MongoError;

/// A parsed projection.
#[derive(Debug, Clone, Default)]
pub struct Projection {
    tree: Tree,
    include: bool,
    keep_id: bool,
}

#[derive(Debug, Clone, Default)]
struct Tree(BTreeMap<String, Node>);

#[derive(Debug, Clone)]
enum Node {
    Leaf,
    Sub(Tree),
}

impl Projection {
    /// `None` for an empty projection (whole documents).
    pub fn parse(spec: &Document) -> Result<Option<Projection>, MongoError> {
        let mut tree = Tree::default();
        let mut include = None;
        let mut keep_id = true;
        for (field, value) in spec {
            let on = match value {
                Bson::Boolean(b) => *b,
                Bson::Int32(i) => *i != 0,
                Bson::Int64(i) => *i != 0,
                Bson::Double(d) => *d != 0.0,
                _ => {
                    return Err(MongoError::not_implemented(format!(
                        "projection of '{field}' with an expression or operator is not supported yet"
                    )));
                }
            };
            if field.starts_with('$') || field.contains(".$") {
                return Err(MongoError::not_implemented(
                    "positional projection is not supported yet",
                ));
            }
            if field == "_id" {
                keep_id = on;
                continue;
            }
            match include {
                Some(inc) if inc != on => {
                    let (code, name, what) = if inc {
                        (31254, "Location31254", "exclusion on field {f} in inclusion projection")
                    } else {
                        (31253, "Location31253", "inclusion on field {f} in exclusion projection")
                    };
                    return Err(MongoError::new(
                        code,
                        name,
                        format!("Cannot do {}", what.replace("{f}", field)),
                    ));
                }
                _ => include = Some(on),
            }
            tree.add(&field.split('.').collect::<Vec<_>>());
        }
        if include.is_none() && keep_id {
            return Ok(None);
        }
        Ok(Some(Projection { tree, include: include.unwrap_or(false), keep_id }))
    }

    /// The paths an inclusion projection reads (`_id` among them unless excluded), so an
    /// index holding them all may answer from its entries (a covered query); `None` for an
    /// exclusion, which keeps every other field.
    pub fn paths(&self) -> Option<Vec<bunko_query::FieldPath>> {
        if !self.include {
            return None;
        }
        let mut out = Vec::new();
        if self.keep_id {
            out.push(bunko_query::FieldPath::from_segments(["_id"]));
        }
        self.tree.leaves(&mut Vec::new(), &mut out);
        Some(out)
    }

    pub fn apply(&self, doc: &Document) -> Document {
        let mut out =
            if self.include { include(doc, &self.tree) } else { exclude(doc, &self.tree) };
        if self.include && self.keep_id {
            if let Some(id) = doc.get("_id") {
                let mut with_id = Document::new();
                with_id.insert("_id", id.clone());
                with_id.extend(out);
                out = with_id;
            }
        } else if !self.keep_id {
            out.remove("_id");
        }
        out
    }
}

impl Tree {
    /// Adds the path of every leaf (under `prefix`) to `out`.
    fn leaves(&self, prefix: &mut Vec<String>, out: &mut Vec<bunko_query::FieldPath>) {
        for (name, node) in &self.0 {
            prefix.push(name.clone());
            match node {
                Node::Leaf => out.push(bunko_query::FieldPath::from_segments(prefix.iter())),
                Node::Sub(sub) => sub.leaves(prefix, out),
            }
            prefix.pop();
        }
    }

    fn add(&mut self, parts: &[&str]) {
        let Some((first, rest)) = parts.split_first() else { return };
        if rest.is_empty() {
            self.0.insert((*first).to_string(), Node::Leaf);
            return;
        }
        let node = self.0.entry((*first).to_string()).or_insert_with(|| Node::Sub(Tree::default()));
        if let Node::Sub(sub) = node {
            sub.add(rest);
        }
    }
}

fn include(doc: &Document, tree: &Tree) -> Document {
    let mut out = Document::new();
    for (key, value) in doc {
        match tree.0.get(key) {
            Some(Node::Leaf) => {
                out.insert(key.clone(), value.clone());
            }
            Some(Node::Sub(sub)) => match value {
                Bson::Document(d) => {
                    out.insert(key.clone(), include(d, sub));
                }
                Bson::Array(items) => {
                    let kept = items.iter().filter_map(|i| match i {
                        Bson::Document(d) => Some(Bson::Document(include(d, sub))),
                        _ => None,
                    });
                    out.insert(key.clone(), Bson::Array(kept.collect()));
                }
                _ => {}
            },
            None => {}
        }
    }
    out
}

fn exclude(doc: &Document, tree: &Tree) -> Document {
    let mut out = Document::new();
    for (key, value) in doc {
        let kept = match (tree.0.get(key), value) {
            (Some(Node::Leaf), _) => continue,
            (Some(Node::Sub(sub)), Bson::Document(d)) => Bson::Document(exclude(d, sub)),
            (Some(Node::Sub(sub)), Bson::Array(items)) => Bson::Array(
                items
                    .iter()
                    .map(|i| match i {
                        Bson::Document(d) => Bson::Document(exclude(d, sub)),
                        other => other.clone(),
                    })
                    .collect(),
            ),
            _ => value.clone(),
        };
        out.insert(key.clone(), kept);
    }
    out
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    #[test]
    fn projections_as_mongodb() -> Result<(), MongoError> {
        let d = doc! {"_id": 1, "name": "Sato", "addr": [{"city": "Nagoya", "zip": "460"}, 5], "x": {"y": 1, "z": 2}};
        let p = |spec| Projection::parse(&spec).map(|p| p.map(|p| p.apply(&d)));
        assert_eq!(p(doc! {"name": 1})?, Some(doc! {"_id": 1, "name": "Sato"}));
        assert_eq!(p(doc! {"addr.city": 1, "_id": 0})?, Some(doc! {"addr": [{"city": "Nagoya"}]}));
        assert_eq!(
            p(doc! {"x.y": 0, "addr": 0})?,
            Some(doc! {"_id": 1, "name": "Sato", "x": {"z": 2}})
        );
        assert_eq!(p(doc! {"_id": 0})?.map(|d| d.contains_key("_id")), Some(false));
        assert_eq!(p(doc! {})?, None);
        assert_eq!(p(doc! {"a": 1, "b": 0}).err().map(|e| e.code), Some(31254));
        assert_eq!(p(doc! {"a": {"$slice": 1}}).err().map(|e| e.code), Some(238));
        Ok(())
    }
}
