//! Single-input stages: `$sort`, `$unwind`, `$count`, `$replaceRoot`, `$sample`,
//! `$documents`.

use std::cmp::Ordering;

use bson::{Bson, Document};

use crate::expr::value::{compare, get_path, to_int, type_name};
use crate::expr::{Expr, ExprError, MISSING, Result, Vars};

/// A `$sort` specification.
pub fn sort_spec(arg: &Bson) -> Result<Vec<(Vec<String>, bool)>> {
    let Bson::Document(d) = arg else {
        return Err(ExprError::location(15973, "the $sort key specification must be an object"));
    };
    if d.is_empty() {
        return Err(ExprError::location(15976, "$sort stage must have at least one sort key"));
    }
    d.iter()
        .map(|(k, v)| {
            let asc = match to_int(v) {
                Some(1) => true,
                Some(-1) => false,
                _ if matches!(v, Bson::Document(_)) => {
                    return Err(ExprError::new(
                        238,
                        "NotImplemented",
                        "$meta sorts are not supported yet",
                    ));
                }
                _ => {
                    return Err(ExprError::location(
                        15975,
                        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                    ));
                }
            };
            Ok((k.split('.').map(str::to_string).collect(), asc))
        })
        .collect()
}

/// The value a document sorts by on `path`: missing is null; an array sorts by its
/// smallest element ascending and its largest descending.
fn sort_key(doc: &Bson, path: &[String], asc: bool) -> Bson {
    sort_value(get_path(doc, path), asc)
}

/// The value a found value sorts by (see [`sort_key`]).
fn sort_value(value: Bson, asc: bool) -> Bson {
    match value {
        Bson::Array(items) if !items.is_empty() => {
            let pick = items.iter().flat_map(|i| match i {
                Bson::Array(inner) => inner.clone(),
                other => vec![other.clone()],
            });
            let best = pick.reduce(|a, b| {
                let better = if asc { compare(&b, &a).is_lt() } else { compare(&b, &a).is_gt() };
                if better { b } else { a }
            });
            best.unwrap_or(Bson::Null)
        }
        Bson::Array(_) => Bson::Array(Vec::new()),
        v if v == MISSING => Bson::Null,
        v => v,
    }
}

/// The value document `doc` sorts by on `path` (ascending when `asc`): a missing field is
/// null; an array sorts by its smallest element ascending and its largest descending
/// (MongoDB's `{$meta: "sortKey"}` holds one per sort field).
pub fn document_sort_key(doc: &Document, path: &[String], asc: bool) -> Bson {
    // `get_path` of the document without wrapping (cloning) it.
    match path.split_first() {
        Some((first, rest)) => match doc.get(first) {
            Some(v) => sort_key(v, rest, asc),
            None => Bson::Null,
        },
        None => Bson::Null,
    }
}

/// Compares two documents by a sort specification.
pub fn compare_docs(keys: &[(Vec<String>, bool)], a: &Document, b: &Document) -> Ordering {
    for (path, asc) in keys {
        let key = |d: &Document| document_sort_key(d, path, *asc);
        let ord = compare(&key(a), &key(b));
        let ord = if *asc { ord } else { ord.reverse() };
        if ord.is_ne() {
            return ord;
        }
    }
    Ordering::Equal
}

pub fn count_field(arg: &Bson) -> Result<String> {
    match arg {
        Bson::String(s) if s.is_empty() => {
            Err(ExprError::location(40156, "the count field must be a non-empty string"))
        }
        Bson::String(s) if s.starts_with('$') => {
            Err(ExprError::location(40158, "the count field cannot be a $-prefixed path"))
        }
        Bson::String(s) if s.contains('.') => {
            Err(ExprError::location(40160, "the count field cannot contain '.'"))
        }
        Bson::String(s) => Ok(s.clone()),
        _ => Err(ExprError::location(40156, "the count field must be a non-empty string")),
    }
}

pub fn count(field: &str, n: usize) -> Vec<Document> {
    if n == 0 {
        return Vec::new();
    }
    let mut d = Document::new();
    d.insert(field, crate::expr::value::int_or_long(n as i64));
    vec![d]
}

pub fn replace_root(e: &Expr, vars: &mut Vars) -> Result<Document> {
    match e.eval(vars)? {
        Bson::Document(d) => Ok(d),
        other => Err(ExprError::location(
            40228,
            format!(
                "'newRoot' expression must evaluate to an object, but resulting value was: {}. Type of resulting value: '{}'. Input document: {}",
                if other == MISSING { "MISSING".to_string() } else { other.to_string() },
                type_name(&other),
                vars.root
            ),
        )),
    }
}

/// `n` documents chosen at random, in random order: a reservoir sample, holding `n`
/// documents whatever the input's size.
pub fn sample(input: super::Docs<'_>, n: usize) -> Result<Vec<Document>> {
    use rand::Rng;
    use rand::seq::SliceRandom;
    let mut rng = rand::rng();
    let mut kept = Vec::new();
    for (seen, d) in input.enumerate() {
        let d = d?;
        if kept.len() < n {
            kept.push(d);
        } else if let Some(slot) = kept.get_mut(rng.random_range(0..=seen)) {
            *slot = d;
        }
    }
    kept.shuffle(&mut rng);
    Ok(kept)
}

pub fn documents(e: &Expr, vars: &mut Vars) -> Result<Vec<Document>> {
    match e.eval(vars)? {
        Bson::Array(items) => items
            .into_iter()
            .map(|i| match i {
                Bson::Document(d) => Ok(d),
                other => Err(ExprError::location(
                    40228,
                    format!("$documents expects an array of objects, found {}", type_name(&other)),
                )),
            })
            .collect(),
        other => Err(ExprError::location(
            5858203,
            format!("error during $documents: an array is expected, found {}", type_name(&other)),
        )),
    }
}

/// A parsed `$unwind`.
#[derive(Clone, Debug, PartialEq)]
pub struct Unwind {
    path: Vec<String>,
    index: Option<String>,
    preserve: bool,
}

impl Unwind {
    pub fn parse(arg: &Bson) -> Result<Unwind> {
        let (path, index, preserve) = match arg {
            Bson::String(p) => (p.clone(), None, false),
            Bson::Document(d) => {
                let path = match d.get("path") {
                    Some(Bson::String(p)) => p.clone(),
                    Some(_) => {
                        return Err(ExprError::location(
                            28808,
                            "expected a string as the path for $unwind stage",
                        ));
                    }
                    None => {
                        return Err(ExprError::location(
                            28812,
                            "no path specified to $unwind stage",
                        ));
                    }
                };
                let index = match d.get("includeArrayIndex") {
                    None => None,
                    Some(Bson::String(s)) if !s.is_empty() && !s.starts_with('$') => {
                        Some(s.clone())
                    }
                    Some(_) => {
                        return Err(ExprError::location(
                            28810,
                            "expected a non-empty string for the includeArrayIndex option to $unwind stage",
                        ));
                    }
                };
                let preserve = match d.get("preserveNullAndEmptyArrays") {
                    None => false,
                    Some(Bson::Boolean(b)) => *b,
                    Some(_) => {
                        return Err(ExprError::location(
                            28809,
                            "expected a boolean for the preserveNullAndEmptyArrays option to $unwind stage",
                        ));
                    }
                };
                if let Some(bad) = d.keys().find(|k| {
                    !matches!(
                        k.as_str(),
                        "path" | "includeArrayIndex" | "preserveNullAndEmptyArrays"
                    )
                }) {
                    return Err(ExprError::location(
                        28811,
                        format!("unrecognized option to $unwind stage: {bad}"),
                    ));
                }
                (path, index, preserve)
            }
            _ => {
                return Err(ExprError::location(
                    15981,
                    "expected either a string or an object as specification for $unwind stage",
                ));
            }
        };
        let Some(field) = path.strip_prefix('$').filter(|f| !f.is_empty()) else {
            return Err(ExprError::location(
                28818,
                format!("path option to $unwind stage should be prefixed with a '$': {path}"),
            ));
        };
        Ok(Unwind { path: field.split('.').map(str::to_string).collect(), index, preserve })
    }

    pub fn run(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut out = Vec::new();
        for d in docs {
            let value = lookup(&d, &self.path);
            match value {
                Some(Bson::Array(items)) if !items.is_empty() => {
                    for (i, item) in items.into_iter().enumerate() {
                        let mut copy = d.clone();
                        set(&mut copy, &self.path, item);
                        if let Some(ix) = &self.index {
                            copy.insert(ix.clone(), Bson::Int64(i as i64));
                        }
                        out.push(copy);
                    }
                }
                Some(Bson::Array(_)) | Some(Bson::Null) | None if self.preserve => {
                    let mut copy = d.clone();
                    if matches!(value, Some(Bson::Array(_))) {
                        remove(&mut copy, &self.path);
                    }
                    if let Some(ix) = &self.index {
                        copy.insert(ix.clone(), Bson::Null);
                    }
                    out.push(copy);
                }
                Some(Bson::Array(_)) | Some(Bson::Null) | None => {}
                Some(_) => {
                    let mut copy = d;
                    if let Some(ix) = &self.index {
                        copy.insert(ix.clone(), Bson::Null);
                    }
                    out.push(copy);
                }
            }
        }
        out
    }
}

/// The value at a path through sub-documents only.
fn lookup(doc: &Document, path: &[String]) -> Option<Bson> {
    let (first, rest) = path.split_first()?;
    let v = doc.get(first)?;
    match (rest.is_empty(), v) {
        (true, v) => Some(v.clone()),
        (false, Bson::Document(d)) => lookup(d, rest),
        _ => None,
    }
}

/// Sets a path through sub-documents (creating them).
pub fn set(doc: &mut Document, path: &[String], value: Bson) {
    let Some((first, rest)) = path.split_first() else { return };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return;
    }
    if !matches!(doc.get(first), Some(Bson::Document(_))) {
        doc.insert(first.clone(), Document::new());
    }
    if let Some(Bson::Document(sub)) = doc.get_mut(first) {
        set(sub, rest, value);
    }
}

/// Removes a path through sub-documents.
pub(super) fn remove(doc: &mut Document, path: &[String]) {
    match path {
        [] => {}
        [last] => {
            doc.remove(last);
        }
        [first, rest @ ..] => {
            if let Some(Bson::Document(sub)) = doc.get_mut(first) {
                remove(sub, rest);
            }
        }
    }
}
