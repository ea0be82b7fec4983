//! The array operators: `$push` (with `$each`, `$position`, `$sort`, `$slice`, applied in
//! that order), `$addToSet` (with `$each`), `$pop`, `$pull` (a value, or a condition in the
//! caller's filter dialect) and `$pullAll`. A missing field becomes an array for `$push` and
//! `$addToSet` and is left alone by the others; a field of another type is an error.

use std::cmp::Ordering;

use bson::{Bson, Document, doc};

use super::{Compile, Filter, UpdateError, cmp, path, render, type_name};

/// A parsed `$push`.
#[derive(Clone, Debug)]
pub struct Push {
    each: Vec<Bson>,
    position: Option<i64>,
    sort: Option<Sort>,
    slice: Option<i64>,
}

/// `$sort` of `$push`: the whole element (1/-1), or fields of the elements.
#[derive(Clone, Debug)]
enum Sort {
    Whole(Ordering),
    Fields(Vec<(Vec<String>, Ordering)>),
}

impl Push {
    pub fn parse(spec: &Bson) -> Result<Push, UpdateError> {
        let Bson::Document(clauses) = spec else { return Ok(Push::single(spec)) };
        if !clauses.contains_key("$each") {
            return Ok(Push::single(spec));
        }
        let mut push = Push { each: Vec::new(), position: None, sort: None, slice: None };
        for (name, value) in clauses {
            match name.as_str() {
                "$each" => match value {
                    Bson::Array(items) => push.each = items.clone(),
                    other => {
                        return Err(UpdateError::bad_value(format!(
                            "The argument to $each in $push must be an array but it was of type: {}",
                            type_name(other)
                        )));
                    }
                },
                "$slice" => {
                    push.slice = Some(integer(value).ok_or_else(|| {
                        UpdateError::bad_value(format!(
                            "The value for $slice must be an integer value but was given type: {}",
                            type_name(value)
                        ))
                    })?);
                }
                "$position" => {
                    push.position = Some(integer(value).ok_or_else(|| {
                        UpdateError::bad_value(format!(
                            "The value for $position must be an integer value, not of type: {}",
                            type_name(value)
                        ))
                    })?);
                }
                "$sort" => push.sort = Some(Sort::parse(value)?),
                other => {
                    return Err(UpdateError::bad_value(format!(
                        "Unrecognized clause in $push: {other}"
                    )));
                }
            }
        }
        Ok(push)
    }

    fn single(value: &Bson) -> Push {
        Push { each: vec![value.clone()], position: None, sort: None, slice: None }
    }

    pub fn apply(&self, doc: &mut Document, at: &[String]) -> Result<(), UpdateError> {
        let mut items = match path::get(doc, at) {
            None => Vec::new(),
            Some(Bson::Array(items)) => items.clone(),
            Some(other) => {
                return Err(UpdateError::bad_value(format!(
                    "The field '{}' must be an array but is of type {} in document {{{}}}",
                    at.join("."),
                    type_name(other),
                    render::id_of(doc)
                )));
            }
        };
        let len = items.len() as i64;
        let at_index = match self.position {
            None => len,
            Some(p) if p >= 0 => p.min(len),
            Some(p) => (len + p).max(0),
        };
        let tail = items.split_off(usize::try_from(at_index).unwrap_or(0));
        items.extend(self.each.iter().cloned());
        items.extend(tail);
        if let Some(sort) = &self.sort {
            items.sort_by(|a, b| sort.compare(a, b));
        }
        if let Some(slice) = self.slice {
            let keep = usize::try_from(slice.unsigned_abs()).unwrap_or(usize::MAX);
            if items.len() > keep {
                if slice >= 0 {
                    items.truncate(keep);
                } else {
                    items.drain(..items.len() - keep);
                }
            }
        }
        path::set(doc, at, Bson::Array(items))
    }
}

impl Sort {
    fn parse(value: &Bson) -> Result<Sort, UpdateError> {
        let direction = |v: &Bson| match integer_or_float(v) {
            Some(1.0) => Ok(Ordering::Less),
            Some(-1.0) => Ok(Ordering::Greater),
            _ => Err(UpdateError::bad_value("The $sort element value must be either 1 or -1")),
        };
        match value {
            Bson::Document(fields) if fields.is_empty() => Err(UpdateError::bad_value(
                "The $sort pattern is empty when it should be a set of fields.",
            )),
            Bson::Document(fields) => fields
                .iter()
                .map(|(name, dir)| {
                    if name.split('.').any(str::is_empty) {
                        return Err(UpdateError::bad_value(format!(
                            "The $sort field is a dotted field but has an empty part: {name}"
                        )));
                    }
                    Ok((name.split('.').map(str::to_string).collect(), direction(dir)?))
                })
                .collect::<Result<_, _>>()
                .map(Sort::Fields),
            v if integer_or_float(v).is_some() => direction(v).map(Sort::Whole),
            _ => Err(UpdateError::bad_value(
                "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields",
            )),
        }
    }

    /// `Less` in the direction means ascending.
    fn compare(&self, a: &Bson, b: &Bson) -> Ordering {
        let directed = |ord: Ordering, dir: Ordering| if dir.is_lt() { ord } else { ord.reverse() };
        match self {
            Sort::Whole(dir) => directed(cmp(a, b), *dir),
            Sort::Fields(fields) => fields
                .iter()
                .map(|(field, dir)| directed(cmp(&sort_key(a, field), &sort_key(b, field)), *dir))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal),
        }
    }
}

/// The value a `$sort` field pattern sees in an element (`null` when missing).
fn sort_key(element: &Bson, field: &[String]) -> Bson {
    match element {
        Bson::Document(d) => path::get(d, field).cloned().unwrap_or(Bson::Null),
        _ => Bson::Null,
    }
}

/// An integral number (a double without fraction counts), as MongoDB reads `$slice`.
fn integer(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Some(*d as i64),
        _ => None,
    }
}

fn integer_or_float(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// The values `$addToSet` adds (`$each` or one value).
pub fn parse_add_to_set(spec: &Bson) -> Result<Vec<Bson>, UpdateError> {
    match spec {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k == "$each") => {
            if d.len() > 1 {
                return Err(UpdateError::bad_value(format!(
                    "Found unexpected fields after $each in $addToSet: {}",
                    render::document(d)
                )));
            }
            match d.get("$each") {
                Some(Bson::Array(items)) => Ok(items.clone()),
                other => Err(UpdateError::type_mismatch(format!(
                    "The argument to $each in $addToSet must be an array but it was of type {}",
                    other.map_or("missing", type_name)
                ))),
            }
        }
        other => Ok(vec![other.clone()]),
    }
}

pub fn add_to_set(doc: &mut Document, at: &[String], values: &[Bson]) -> Result<(), UpdateError> {
    let mut items = match path::get(doc, at) {
        None => Vec::new(),
        Some(Bson::Array(items)) => items.clone(),
        Some(other) => {
            return Err(UpdateError::bad_value(format!(
                "Cannot apply $addToSet to non-array field. Field named '{}' has non-array type {}",
                at.last().map_or("", String::as_str),
                type_name(other)
            )));
        }
    };
    let existed = path::get(doc, at).is_some();
    let before = items.len();
    for value in values {
        if !items.iter().any(|i| cmp(i, value).is_eq()) {
            items.push(value.clone());
        }
    }
    if existed && items.len() == before {
        return Ok(());
    }
    path::set(doc, at, Bson::Array(items))
}

/// `$pop`'s argument: `-1` removes the first element (true), `1` the last.
pub fn parse_pop(spec: &Bson) -> Result<bool, UpdateError> {
    match integer_or_float(spec) {
        Some(-1.0) => Ok(true),
        Some(1.0) => Ok(false),
        _ => {
            Err(UpdateError::parse(format!("$pop expects 1 or -1, found: {}", render::value(spec))))
        }
    }
}

pub fn pop(doc: &mut Document, at: &[String], first: bool) -> Result<(), UpdateError> {
    match path::get_mut(doc, at) {
        None => Ok(()),
        Some(Bson::Array(items)) => {
            if first && !items.is_empty() {
                items.remove(0);
            } else {
                items.pop();
            }
            Ok(())
        }
        Some(other) => Err(UpdateError::type_mismatch(format!(
            "Path '{}' contains an element of non-array type '{}'",
            at.join("."),
            type_name(other)
        ))),
    }
}

/// `$pull`'s condition.
#[derive(Clone, Debug)]
pub enum Pull {
    /// Elements equal to the value.
    Equal(Bson),
    /// Elements that, as the field `PULL_FIELD`, match the operators.
    Operators(Filter),
    /// Documents that match the query.
    Query(Filter),
}

/// The name an element gets when a `$pull` condition made of operators is matched.
const PULL_FIELD: &str = "__pull";

impl Pull {
    pub fn parse(spec: &Bson, compile: Option<Compile>) -> Result<Pull, UpdateError> {
        let compile = || {
            compile.ok_or_else(|| {
                UpdateError::new(238, "NotImplemented", "$pull with a condition needs a filter")
            })
        };
        Ok(match spec {
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                Pull::Operators(compile()?(&doc! {PULL_FIELD: d.clone()})?)
            }
            Bson::Document(d) => Pull::Query(compile()?(d)?),
            Bson::RegularExpression(_) => {
                Pull::Operators(compile()?(&doc! {PULL_FIELD: spec.clone()})?)
            }
            other => Pull::Equal(other.clone()),
        })
    }

    pub fn matches(&self, element: &Bson) -> bool {
        match self {
            Pull::Equal(v) => cmp(v, element).is_eq(),
            Pull::Operators(f) => f.matches(&doc! {PULL_FIELD: element.clone()}),
            Pull::Query(f) => matches!(element, Bson::Document(d) if f.matches(d)),
        }
    }
}

/// `$pullAll`'s values.
pub fn parse_pull_all(spec: &Bson) -> Result<Vec<Bson>, UpdateError> {
    match spec {
        Bson::Array(items) => Ok(items.clone()),
        other => Err(UpdateError::bad_value(format!(
            "$pullAll requires an array argument but was given a {}",
            type_name(other)
        ))),
    }
}

/// Removes the elements `remove` says of the array at `at`.
pub fn pull(
    doc: &mut Document,
    at: &[String],
    remove: impl Fn(&Bson) -> bool,
) -> Result<(), UpdateError> {
    match path::get_mut(doc, at) {
        None => Ok(()),
        Some(Bson::Array(items)) => {
            items.retain(|item| !remove(item));
            Ok(())
        }
        Some(_) => Err(UpdateError::bad_value("Cannot apply $pull to a non-array value")),
    }
}
