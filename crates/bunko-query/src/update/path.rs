//! Update paths: parsing (with the positional segments `$`, `$[]` and `$[<identifier>]`),
//! resolving positional segments against a document into concrete paths, and reading,
//! setting and removing the value at a concrete path (a numeric segment indexes an array).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use bson::{Bson, Document, doc};

use super::{Filter, UpdateError, render};

/// A positional segment of an update path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Positional<'a> {
    /// `$`: the array element the query matched.
    First,
    /// `$[]`: every element.
    All,
    /// `$[id]`: the elements the array filter `id` matches.
    Filtered(&'a str),
}

/// The positional meaning of a segment, if it has one.
pub fn positional(segment: &str) -> Option<Positional<'_>> {
    match segment {
        "$" => Some(Positional::First),
        "$[]" => Some(Positional::All),
        s if s.starts_with("$[") && s.ends_with(']') => {
            Some(Positional::Filtered(&s[2..s.len() - 1]))
        }
        _ => None,
    }
}

/// Splits a dotted update path, with MongoDB's checks.
pub fn parse(field: &str) -> Result<Vec<String>, UpdateError> {
    let parts: Vec<String> = field.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(UpdateError::new(
            56,
            "EmptyFieldName",
            format!(
                "The update path '{field}' contains an empty field name, which is not allowed."
            ),
        ));
    }
    if parts.len() > 100 {
        return Err(UpdateError::new(
            15,
            "Overflow",
            format!("The update path '{field}' is deeper than 100 levels"),
        ));
    }
    let firsts = parts.iter().filter(|p| p.as_str() == "$").count();
    if firsts > 1 {
        return Err(UpdateError::bad_value(format!(
            "Too many positional (i.e. '$') elements found in path '{field}'"
        )));
    }
    if parts.first().is_some_and(|p| positional(p).is_some()) {
        return Err(UpdateError::bad_value(format!(
            "Cannot have positional (i.e. '$') element in the first position in path '{field}'"
        )));
    }
    if let Some(bad) = parts.iter().find(|p| p.starts_with('$') && positional(p).is_none()) {
        return Err(UpdateError::new(
            52,
            "DollarPrefixedFieldName",
            format!("The dollar ($) prefixed field '{bad}' in '{field}' is not valid for storage."),
        ));
    }
    Ok(parts)
}

/// Segment by segment; numeric segments numerically.
pub fn compare(a: &[String], b: &[String]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        let ord = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(i), Ok(j)) => i.cmp(&j),
            _ => x.cmp(y),
        };
        if ord.is_ne() {
            return ord;
        }
    }
    a.len().cmp(&b.len())
}

/// What positional segments are resolved with.
pub struct Resolver<'a> {
    /// The document as the query saw it.
    pub doc: &'a Document,
    pub query: Option<&'a Filter>,
    pub array_filters: &'a BTreeMap<String, Filter>,
}

impl Resolver<'_> {
    /// The concrete paths `path` names in the document (one unless it has `$[]`/`$[id]`).
    pub fn resolve(&self, path: &[String]) -> Result<Vec<Vec<String>>, UpdateError> {
        let mut out = vec![Vec::new()];
        for segment in path {
            let Some(pos) = positional(segment) else {
                out.iter_mut().for_each(|p: &mut Vec<String>| p.push(segment.clone()));
                continue;
            };
            let mut next = Vec::new();
            for prefix in out {
                for index in self.indexes(&prefix, pos)? {
                    let mut concrete = prefix.clone();
                    concrete.push(index.to_string());
                    next.push(concrete);
                }
            }
            out = next;
        }
        Ok(out)
    }

    fn indexes(&self, prefix: &[String], pos: Positional) -> Result<Vec<usize>, UpdateError> {
        if pos == Positional::First {
            return self.first_matched(prefix).map(|i| vec![i]);
        }
        let items = match get(self.doc, prefix) {
            Some(Bson::Array(items)) => items,
            Some(other) => {
                return Err(UpdateError::bad_value(format!(
                    "Cannot apply array updates to non-array element {}: {}",
                    prefix.last().map_or("", String::as_str),
                    render::value(other)
                )));
            }
            None => {
                return Err(UpdateError::bad_value(format!(
                    "The path '{}' must exist in the document in order to apply array updates.",
                    prefix.join(".")
                )));
            }
        };
        let filter = match pos {
            Positional::Filtered(id) => Some((id, self.array_filters.get(id))),
            _ => None,
        };
        Ok((0..items.len())
            .filter(|&i| match filter {
                None => true,
                Some((id, Some(f))) => f.matches(&doc! {id: items[i].clone()}),
                Some((_, None)) => false,
            })
            .collect())
    }

    /// The index of the first element of the array at `prefix` that the query matched: the
    /// first element which, alone in the array, still satisfies the query, when the query
    /// constrains the array at all (it does not match with the array emptied).
    pub(super) fn first_matched(&self, prefix: &[String]) -> Result<usize, UpdateError> {
        let not_found = || {
            UpdateError::bad_value(
                "The positional operator did not find the match needed from the query.",
            )
        };
        let (Some(query), Some(Bson::Array(items))) = (self.query, get(self.doc, prefix)) else {
            return Err(not_found());
        };
        let probe = |items: Vec<Bson>| {
            let mut doc = self.doc.clone();
            set(&mut doc, prefix, Bson::Array(items)).is_ok() && query.matches(&doc)
        };
        if probe(Vec::new()) {
            return Err(not_found());
        }
        (0..items.len()).find(|&i| probe(vec![items[i].clone()])).ok_or_else(not_found)
    }
}

pub fn path_not_viable(field: &str, parent: &str, value: &Bson) -> UpdateError {
    UpdateError::new(
        28,
        "PathNotViable",
        format!("Cannot create field '{field}' in element {{{parent}: {}}}", render::value(value)),
    )
}

/// The container one step down, created as a document when missing.
fn child<'a>(value: &'a mut Bson, field: &str, next: &str) -> Result<&'a mut Bson, UpdateError> {
    match value {
        Bson::Document(doc) => {
            if !doc.contains_key(field) {
                doc.insert(field, Document::new());
            }
            doc.get_mut(field).ok_or_else(|| path_not_viable(next, field, &Bson::Null))
        }
        Bson::Array(items) => {
            let index: usize =
                field.parse().map_err(|_| path_not_viable(field, "array", value_of(items)))?;
            check_padding(items.len(), index)?;
            while items.len() <= index {
                items.push(Bson::Null);
            }
            if items[index] == Bson::Null {
                items[index] = Bson::Document(Document::new());
            }
            Ok(&mut items[index])
        }
        other => Err(path_not_viable(field, "", other)),
    }
}

/// MongoDB fills an array with `null`s up to a set index, but not by more than this.
const MAX_PADDING: usize = 1_500_000;

fn check_padding(len: usize, index: usize) -> Result<(), UpdateError> {
    if index.saturating_sub(len) > MAX_PADDING {
        return Err(UpdateError::bad_value(format!(
            "can't backfill more than {MAX_PADDING} elements"
        )));
    }
    Ok(())
}

fn value_of(items: &[Bson]) -> &Bson {
    items.first().unwrap_or(&Bson::Null)
}

/// Puts `value` at `path`, creating documents on the way.
pub fn set(doc: &mut Document, path: &[String], value: Bson) -> Result<(), UpdateError> {
    let Some((last, parents)) = path.split_last() else { return Ok(()) };
    let mut root = Bson::Document(std::mem::take(doc));
    let result = set_in(&mut root, parents, last, value);
    if let Bson::Document(d) = root {
        *doc = d;
    }
    result
}

fn set_in(root: &mut Bson, parents: &[String], last: &str, value: Bson) -> Result<(), UpdateError> {
    let mut current = root;
    for (i, field) in parents.iter().enumerate() {
        let next = parents.get(i + 1).map_or(last, String::as_str);
        if let Bson::Document(d) = &*current
            && let Some(existing) = d.get(field)
            && !matches!(existing, Bson::Document(_) | Bson::Array(_) | Bson::Null)
        {
            return Err(path_not_viable(next, field, existing));
        }
        current = child(current, field, next)?;
    }
    match current {
        Bson::Document(d) => {
            d.insert(last, value);
            Ok(())
        }
        Bson::Array(items) => {
            let index: usize =
                last.parse().map_err(|_| path_not_viable(last, "array", value_of(items)))?;
            check_padding(items.len(), index)?;
            while items.len() <= index {
                items.push(Bson::Null);
            }
            items[index] = value;
            Ok(())
        }
        other => Err(path_not_viable(last, "", other)),
    }
}

/// The value at a concrete path.
pub fn get<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (first, rest) = path.split_first()?;
    let mut current = doc.get(first)?;
    for field in rest {
        current = match current {
            Bson::Document(d) => d.get(field)?,
            Bson::Array(items) => items.get(field.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// The value at a concrete path, to change in place.
pub fn get_mut<'a>(doc: &'a mut Document, path: &[String]) -> Option<&'a mut Bson> {
    let (first, rest) = path.split_first()?;
    let mut current = doc.get_mut(first)?;
    for field in rest {
        current = match current {
            Bson::Document(d) => d.get_mut(field)?,
            Bson::Array(items) => items.get_mut(field.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// Removes the field at `path` (an array element becomes `null`, as in MongoDB).
pub fn unset(doc: &mut Document, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    if parents.is_empty() {
        doc.remove(last);
        return;
    }
    match get_mut(doc, parents) {
        Some(Bson::Document(d)) => {
            d.remove(last);
        }
        Some(Bson::Array(items)) => {
            if let Some(item) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *item = Bson::Null;
            }
        }
        _ => {}
    }
}

/// The first segment of `path` under which an array lies, if any (for `$rename`).
pub fn array_on_path<'a>(doc: &Document, path: &'a [String]) -> Option<&'a str> {
    (1..path.len())
        .find(|&n| matches!(get(doc, &path[..n]), Some(Bson::Array(_))))
        .map(|n| path[n - 1].as_str())
}
