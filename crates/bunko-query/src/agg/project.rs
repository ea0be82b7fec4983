//! `$project`, `$addFields`/`$set` and `$unset` as one field tree: inclusion (`a: 1`),
//! exclusion (`a: 0`), computed fields (an expression, or a literal that is not a number
//! or boolean), dotted paths and nested documents (`{"a.b": 1}` is `{a: {b: 1}}`).
//! Through an array of documents a path applies to each element, as in MongoDB.

use bson::{Bson, Document};

use crate::expr::{Expr, ExprError, MISSING, Result, Vars};

/// Adds the paths a field tree (under `prefix`) reads to `out`; `false` if it may read any.
fn tree_paths(fields: &[(String, Node)], prefix: &str, out: &mut Vec<String>) -> bool {
    fields.iter().all(|(name, node)| {
        let path = if prefix.is_empty() { name.clone() } else { format!("{prefix}.{name}") };
        match node {
            Node::Include => {
                if !out.contains(&path) {
                    out.push(path);
                }
                true
            }
            Node::Exclude => true,
            Node::Compute(e) => e.paths(out),
            Node::Sub(sub) => tree_paths(sub, &path, out),
        }
    })
}

#[derive(Clone, Debug, PartialEq)]
enum Node {
    Include,
    Exclude,
    Compute(Expr),
    Sub(Vec<(String, Node)>),
}

/// A parsed `$project` (or `$addFields`, which computes only, or `$unset`).
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    fields: Vec<(String, Node)>,
    mode: Mode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Include,
    Exclude,
    AddFields,
}

fn proj_err(msg: String) -> ExprError {
    ExprError::location(31254, format!("Invalid $project :: caused by :: {msg}"))
}

impl Shape {
    /// `$project`.
    pub fn project(spec: &Document) -> Result<Shape> {
        if spec.is_empty() {
            return Err(ExprError::location(
                51272,
                "Invalid $project :: caused by :: projection specification must have at least one field",
            ));
        }
        let mut fields = Vec::new();
        let mut mode: Option<Mode> = None;
        for (k, v) in spec {
            parse_into(&mut fields, k, v, &mut mode, k == "_id")?;
        }
        // `{_id: 0}` alone is an exclusion.
        let only_excluded_id = fields.iter().all(|(_, n)| *n == Node::Exclude);
        let mode = mode.unwrap_or(if only_excluded_id { Mode::Exclude } else { Mode::Include });
        let has_id = fields.iter().any(|(k, _)| k == "_id");
        if mode == Mode::Include && !has_id {
            fields.insert(0, ("_id".to_string(), Node::Include));
        }
        Ok(Shape { fields, mode })
    }

    /// The whole (dotted) paths of its input an inclusion `$project` reads (included
    /// paths, and those its computed fields read); `None` for the other shapes, which
    /// keep the rest of the document.
    pub fn paths(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        (self.mode == Mode::Include && tree_paths(&self.fields, "", &mut out)).then_some(out)
    }

    /// `$addFields`/`$set`: every value is computed.
    pub fn add_fields(spec: &Document) -> Result<Shape> {
        let mut fields = Vec::new();
        for (k, v) in spec {
            insert_path(&mut fields, k, Node::Compute(Expr::parse(v)?))?;
        }
        Ok(Shape { fields, mode: Mode::AddFields })
    }

    /// `$unset`: a field name or an array of them.
    pub fn unset(spec: &Bson) -> Result<Shape> {
        let names: Vec<&Bson> = match spec {
            Bson::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        let mut fields = Vec::new();
        for n in names {
            let Bson::String(s) = n else {
                return Err(ExprError::location(
                    31120,
                    "$unset specification must be a string or an array containing only string values",
                ));
            };
            insert_path(&mut fields, s, Node::Exclude)?;
        }
        if fields.is_empty() {
            return Err(ExprError::location(
                31119,
                "$unset specification must be a string or an array with at least one field",
            ));
        }
        Ok(Shape { fields, mode: Mode::Exclude })
    }

    /// The shaped document.
    pub fn apply(&self, doc: &Document, vars: &mut Vars) -> Result<Document> {
        apply_doc(&self.fields, self.mode, doc, vars)
    }
}

fn parse_into(
    fields: &mut Vec<(String, Node)>,
    key: &str,
    v: &Bson,
    mode: &mut Option<Mode>,
    is_id: bool,
) -> Result<()> {
    let node = match v {
        Bson::Boolean(_)
        | Bson::Int32(_)
        | Bson::Int64(_)
        | Bson::Double(_)
        | Bson::Decimal128(_) => {
            let on = crate::expr::value::truthy(v);
            if on { Node::Include } else { Node::Exclude }
        }
        Bson::Document(d) if d.keys().next().is_some_and(|k| !k.starts_with('$')) => {
            let mut sub = Vec::new();
            for (k, v) in d {
                parse_into(&mut sub, k, v, mode, false)?;
            }
            return insert_path(fields, key, Node::Sub(sub));
        }
        other => Node::Compute(Expr::parse(other)?),
    };
    let this = match node {
        Node::Include | Node::Compute(_) => Mode::Include,
        _ => Mode::Exclude,
    };
    if !is_id {
        match *mode {
            Some(m) if m != this => {
                return Err(proj_err(match m {
                    Mode::Include => {
                        format!("Cannot do exclusion on field {key} in inclusion projection")
                    }
                    _ => format!("Cannot do inclusion on field {key} in exclusion projection"),
                }));
            }
            _ => *mode = Some(this),
        }
    } else if matches!(node, Node::Compute(_)) {
        if *mode == Some(Mode::Exclude) {
            return Err(proj_err(format!(
                "Cannot do inclusion on field {key} in exclusion projection"
            )));
        }
        *mode = Some(Mode::Include);
    }
    insert_path(fields, key, node)
}

fn insert_path(fields: &mut Vec<(String, Node)>, path: &str, node: Node) -> Result<()> {
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(ExprError::location(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    if path.starts_with('$') {
        return Err(ExprError::location(
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField."
                .to_string(),
        ));
    }
    let (first, rest) = match path.split_once('.') {
        Some((f, r)) => (f, Some(r)),
        None => (path, None),
    };
    let existing = fields.iter_mut().find(|(k, _)| k == first);
    match (rest, existing) {
        (None, Some(_)) => Err(ExprError::location(
            31250,
            format!("Invalid $project :: caused by :: Path collision at {path}"),
        )),
        (None, None) => {
            fields.push((first.to_string(), node));
            Ok(())
        }
        (Some(r), Some((_, Node::Sub(sub)))) => insert_path(sub, r, node),
        (Some(_), Some(_)) => Err(ExprError::location(
            31249,
            format!("Invalid $project :: caused by :: Path collision at {path}"),
        )),
        (Some(r), None) => {
            let mut sub = Vec::new();
            insert_path(&mut sub, r, node)?;
            fields.push((first.to_string(), Node::Sub(sub)));
            Ok(())
        }
    }
}

fn apply_doc(
    fields: &[(String, Node)],
    mode: Mode,
    doc: &Document,
    vars: &mut Vars,
) -> Result<Document> {
    let mut out = Document::new();
    if mode != Mode::Include {
        out = doc.clone();
    }
    // Included fields keep the document's order; computed ones follow in spec order.
    if mode == Mode::Include {
        for (k, v) in doc {
            match fields.iter().find(|(f, _)| f == k).map(|(_, n)| n) {
                Some(Node::Include) => {
                    out.insert(k.clone(), v.clone());
                }
                Some(Node::Sub(sub)) => {
                    if let Some(v) = apply_value(sub, mode, v, vars)? {
                        out.insert(k.clone(), v);
                    }
                }
                _ => {}
            }
        }
    }
    for (k, node) in fields {
        match node {
            Node::Exclude => {
                out.remove(k);
            }
            Node::Compute(e) => {
                let v = e.eval(vars)?;
                if v == MISSING {
                    out.remove(k);
                } else {
                    out.insert(k.clone(), v);
                }
            }
            Node::Sub(sub) if mode != Mode::Include => {
                let current = doc.get(k).cloned();
                match (current, mode) {
                    (Some(v), _) => {
                        if let Some(v) = apply_value(sub, mode, &v, vars)? {
                            out.insert(k.clone(), v);
                        }
                    }
                    (None, Mode::AddFields) => {
                        out.insert(
                            k.clone(),
                            Bson::Document(apply_doc(sub, mode, &Document::new(), vars)?),
                        );
                    }
                    (None, _) => {}
                }
            }
            Node::Sub(sub) if !out.contains_key(k) && has_compute(sub) => {
                out.insert(
                    k.clone(),
                    Bson::Document(apply_doc(sub, mode, &Document::new(), vars)?),
                );
            }
            _ => {}
        }
    }
    Ok(out)
}

fn has_compute(fields: &[(String, Node)]) -> bool {
    fields.iter().any(|(_, n)| match n {
        Node::Compute(_) => true,
        Node::Sub(s) => has_compute(s),
        _ => false,
    })
}

/// A sub-tree applied to a value: a document is shaped, an array maps over its elements,
/// a scalar is dropped by an inclusion (kept otherwise, or replaced when computing).
fn apply_value(
    sub: &[(String, Node)],
    mode: Mode,
    v: &Bson,
    vars: &mut Vars,
) -> Result<Option<Bson>> {
    match v {
        Bson::Document(d) => Ok(Some(Bson::Document(apply_doc(sub, mode, d, vars)?))),
        Bson::Array(items) => {
            let mut out = Vec::new();
            for i in items {
                if let Some(x) = apply_value(sub, mode, i, vars)? {
                    out.push(x);
                }
            }
            Ok(Some(Bson::Array(out)))
        }
        _ if mode == Mode::Include && has_compute(sub) => {
            Ok(Some(Bson::Document(apply_doc(sub, mode, &Document::new(), vars)?)))
        }
        _ if mode == Mode::Include => Ok(None),
        _ if mode == Mode::AddFields => {
            Ok(Some(Bson::Document(apply_doc(sub, mode, &Document::new(), vars)?)))
        }
        other => Ok(Some(other.clone())),
    }
}
