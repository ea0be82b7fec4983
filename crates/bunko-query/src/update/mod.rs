//! MongoDB update documents as pure functions on BSON documents: a replacement document, or
//! operators on dotted paths (a numeric segment indexes an array), with MongoDB's errors and
//! codes. One module per operator family:
//!
//! - `path`: parsing paths, positional `$` / `$[]` / `$[<identifier>]` (with
//!   `arrayFilters`), reading and writing at a path; `$set`, `$unset`, `$setOnInsert` are
//!   plain writes at a path.
//! - `arith`: `$inc`, `$mul`, `$min`, `$max`, `$bit`.
//! - `array`: `$push` (`$each`, `$sort`, `$slice`, `$position`), `$addToSet` (`$each`),
//!   `$pop`, `$pull`, `$pullAll`.
//! - `field`: `$rename`, `$currentDate`.
//!
//! As in MongoDB 5+, the fields an update names are applied in lexicographic order of their
//! paths (so new fields are appended in that order); two operations whose paths are equal or
//! one a prefix of the other are a conflict (`Updating the path 'a.b' would create a conflict
//! at 'a'`); `_id` may not change. Filters (`$pull` conditions, `arrayFilters`, the query
//! that positional `$` refers to) are written in the adapter's filter dialect, so the caller
//! compiles them ([`Options::compile`]) and this crate only asks whether a document matches.

mod arith;
mod array;
mod field;
mod path;
mod render;
#[cfg(test)]
mod tests;

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use bson::{Bson, Document};

/// An update that cannot be parsed or applied, with MongoDB's code and name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct UpdateError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
}

impl UpdateError {
    pub fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> Self {
        Self { code, code_name, message: message.into() }
    }

    fn parse(message: impl Into<String>) -> Self {
        Self::new(9, "FailedToParse", message)
    }

    fn bad_value(message: impl Into<String>) -> Self {
        Self::new(2, "BadValue", message)
    }

    fn type_mismatch(message: impl Into<String>) -> Self {
        Self::new(14, "TypeMismatch", message)
    }
}

/// The index of the first element of the array at `array` (a path) in `doc` that `query`
/// matched, as positional `$` means it (the update's and `find` projection's `field.$`);
/// `None` when the value there is not an array or no element satisfies the query alone.
pub fn first_matched(doc: &Document, array: &[String], query: &Filter) -> Option<usize> {
    let resolver = path::Resolver { doc, query: Some(query), array_filters: &BTreeMap::new() };
    resolver.first_matched(array).ok()
}

/// A compiled filter: whether a document matches it.
#[derive(Clone)]
pub struct Filter(Arc<dyn Fn(&Document) -> bool + Send + Sync>);

impl Filter {
    pub fn new(matches: impl Fn(&Document) -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(matches))
    }

    pub fn matches(&self, doc: &Document) -> bool {
        (self.0)(doc)
    }
}

impl fmt::Debug for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Filter")
    }
}

/// Compiles a filter document in the caller's dialect.
pub type Compile<'a> = &'a dyn Fn(&Document) -> Result<Filter, UpdateError>;

/// What an update is parsed with besides its document.
#[derive(Clone, Copy, Default)]
pub struct Options<'a> {
    /// The statement's query: positional `$` names the first array element it matched.
    pub query: Option<&'a Document>,
    /// The statement's `arrayFilters`.
    pub array_filters: Option<&'a [Bson]>,
    /// Compiles filters; without it, `$pull` conditions, `arrayFilters` and `$` are refused.
    pub compile: Option<Compile<'a>>,
}

/// A parsed update.
#[derive(Clone, Debug)]
pub enum Update {
    /// The whole document but `_id` is replaced.
    Replace(Document),
    /// Operations, sorted by path.
    Ops(Ops),
    /// A pipeline-style update (`crate::update_pipeline`).
    Pipeline(crate::update_pipeline::UpdatePipeline),
}

/// The operations of an operator update and the filters its positional paths use.
#[derive(Clone, Debug)]
pub struct Ops {
    pub ops: Vec<Op>,
    query: Option<Filter>,
    array_filters: BTreeMap<String, Filter>,
}

/// One operation of an operator update.
#[derive(Clone, Debug)]
pub struct Op {
    pub path: Vec<String>,
    pub action: Action,
}

/// What an operation does at its path, its argument parsed.
#[derive(Clone, Debug)]
pub enum Action {
    Set(Bson),
    SetOnInsert(Bson),
    Unset,
    Inc(Bson),
    Mul(Bson),
    Min(Bson),
    Max(Bson),
    Bit(Vec<arith::Bit>),
    Rename(Vec<String>),
    CurrentDate { timestamp: bool },
    Push(array::Push),
    AddToSet(Vec<Bson>),
    Pop { first: bool },
    Pull(array::Pull),
    PullAll(Vec<Bson>),
}

impl Update {
    /// Parses an update document with no query, array filters or filter compiler.
    pub fn parse(spec: &Document) -> Result<Update, UpdateError> {
        Self::parse_with(spec, Options::default())
    }

    /// Parses an update document (`u` of `update`, `update` of `findAndModify`).
    pub fn parse_with(spec: &Document, options: Options) -> Result<Update, UpdateError> {
        if !spec.keys().next().is_some_and(|k| k.starts_with('$')) {
            if options.array_filters.is_some_and(|f| !f.is_empty()) {
                return Err(UpdateError::parse(
                    "arrayFilters may not be specified for replacement-style updates",
                ));
            }
            return Ok(Update::Replace(spec.clone()));
        }
        let mut ops = Vec::new();
        for (name, arg) in spec {
            let Bson::Document(fields) = arg else {
                return Err(UpdateError::parse(format!(
                    "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{name}: {}}}",
                    type_name(arg),
                    render::value(arg)
                )));
            };
            for (field, value) in fields {
                let path = path::parse(field)?;
                let action = action(name, field, value, options)?;
                ops.push(Op { path, action });
            }
        }
        check_conflicts(&mut ops)?;
        let array_filters = array_filters(spec, &ops, options)?;
        let query = match (options.query, options.compile) {
            (Some(q), Some(compile)) if uses_first_positional(&ops) => Some(compile(q)?),
            _ => None,
        };
        Ok(Update::Ops(Ops { ops, query, array_filters }))
    }

    /// The updated document. `inserting`: the document is being created by an upsert (so
    /// `$setOnInsert` applies).
    pub fn apply(&self, doc: &Document, inserting: bool) -> Result<Document, UpdateError> {
        match self {
            Update::Replace(new) => replace(doc, new),
            Update::Ops(ops) => ops.apply(doc, inserting),
            Update::Pipeline(p) => {
                let out = p.apply(doc)?;
                if doc.contains_key("_id") && doc.get("_id") != out.get("_id") {
                    return Err(immutable_id());
                }
                Ok(out)
            }
        }
    }
}

impl Ops {
    fn apply(&self, doc: &Document, inserting: bool) -> Result<Document, UpdateError> {
        let resolver =
            path::Resolver { doc, query: self.query.as_ref(), array_filters: &self.array_filters };
        let mut out = doc.clone();
        for op in &self.ops {
            if matches!(op.action, Action::SetOnInsert(_)) && !inserting {
                continue;
            }
            for concrete in resolver.resolve(&op.path)? {
                op.action.apply(&mut out, &concrete)?;
            }
        }
        if doc.contains_key("_id") && doc.get("_id") != out.get("_id") {
            return Err(immutable_id());
        }
        Ok(out)
    }
}

impl Action {
    fn apply(&self, doc: &mut Document, at: &[String]) -> Result<(), UpdateError> {
        match self {
            Action::Set(v) | Action::SetOnInsert(v) => path::set(doc, at, v.clone()),
            Action::Unset => {
                path::unset(doc, at);
                Ok(())
            }
            Action::Inc(by) => arith::inc(doc, at, by),
            Action::Mul(by) => arith::mul(doc, at, by),
            Action::Min(v) => arith::min_max(doc, at, v, Ordering::Less),
            Action::Max(v) => arith::min_max(doc, at, v, Ordering::Greater),
            Action::Bit(bits) => arith::bit(doc, at, bits),
            Action::Rename(to) => field::rename(doc, at, to),
            Action::CurrentDate { timestamp } => field::current_date(doc, at, *timestamp),
            Action::Push(push) => push.apply(doc, at),
            Action::AddToSet(values) => array::add_to_set(doc, at, values),
            Action::Pop { first } => array::pop(doc, at, *first),
            Action::Pull(pull) => array::pull(doc, at, |v| pull.matches(v)),
            Action::PullAll(values) => {
                array::pull(doc, at, |v| values.iter().any(|x| cmp(x, v).is_eq()))
            }
        }
    }
}

/// Parses one operator's argument for one field.
fn action(name: &str, field: &str, value: &Bson, options: Options) -> Result<Action, UpdateError> {
    let v = value.clone();
    Ok(match name {
        "$set" => Action::Set(v),
        "$setOnInsert" => Action::SetOnInsert(v),
        "$unset" => Action::Unset,
        "$inc" => Action::Inc(arith::operand("increment", field, v)?),
        "$mul" => Action::Mul(arith::operand("multiply", field, v)?),
        "$min" => Action::Min(v),
        "$max" => Action::Max(v),
        "$bit" => Action::Bit(arith::parse_bit(field, value)?),
        "$rename" => Action::Rename(field::parse_rename(field, value)?),
        "$currentDate" => Action::CurrentDate { timestamp: field::parse_current_date(value)? },
        "$push" => Action::Push(array::Push::parse(value)?),
        "$addToSet" => Action::AddToSet(array::parse_add_to_set(value)?),
        "$pop" => Action::Pop { first: array::parse_pop(value)? },
        "$pull" => Action::Pull(array::Pull::parse(value, options.compile)?),
        "$pullAll" => Action::PullAll(array::parse_pull_all(value)?),
        other => {
            return Err(UpdateError::parse(format!(
                "Unknown modifier: {other}. Expected a valid update modifier or pipeline-style update specified as an array"
            )));
        }
    })
}

/// Sorts the operations by path and refuses two that touch the same or nested paths
/// (`$rename` touches its source and its destination).
fn check_conflicts(ops: &mut [Op]) -> Result<(), UpdateError> {
    ops.sort_by(|a, b| path::compare(&a.path, &b.path));
    let mut touched: Vec<&Vec<String>> = ops.iter().map(|op| &op.path).collect();
    touched.extend(ops.iter().filter_map(|op| match &op.action {
        Action::Rename(to) => Some(to),
        _ => None,
    }));
    touched.sort_by(|a, b| path::compare(a, b));
    for pair in touched.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if b.starts_with(a) {
            return Err(UpdateError::new(
                40,
                "ConflictingUpdateOperators",
                format!(
                    "Updating the path '{}' would create a conflict at '{}'",
                    b.join("."),
                    a.join(".")
                ),
            ));
        }
    }
    Ok(())
}

fn uses_first_positional(ops: &[Op]) -> bool {
    ops.iter().any(|op| op.path.iter().any(|s| s == "$"))
}

/// Parses `arrayFilters` and checks that every identifier is defined once and used.
fn array_filters(
    spec: &Document,
    ops: &[Op],
    options: Options,
) -> Result<BTreeMap<String, Filter>, UpdateError> {
    let mut out = BTreeMap::new();
    for entry in options.array_filters.unwrap_or_default() {
        let Bson::Document(filter) = entry else {
            return Err(UpdateError::type_mismatch(format!(
                "Each array filter must be an object, found {}",
                type_name(entry)
            )));
        };
        let id = filter_identifier(filter)?;
        if out.contains_key(&id) {
            return Err(UpdateError::parse(format!(
                "Found multiple array filters with the same top-level field name {id}"
            )));
        }
        let Some(compile) = options.compile else {
            return Err(UpdateError::new(238, "NotImplemented", "arrayFilters need a filter"));
        };
        out.insert(id, compile(filter)?);
    }
    let used = |id: &str| {
        let segment = format!("$[{id}]");
        ops.iter().any(|op| op.path.contains(&segment))
    };
    if let Some(id) = out.keys().find(|id| !used(id)) {
        return Err(UpdateError::parse(format!(
            "The array filter for identifier '{id}' was not used in the update {}",
            render::document(spec)
        )));
    }
    for op in ops {
        for segment in &op.path {
            if let Some(path::Positional::Filtered(id)) = path::positional(segment)
                && !id.is_empty()
                && !out.contains_key(id)
            {
                return Err(UpdateError::bad_value(format!(
                    "No array filter found for identifier '{id}' in path '{}'",
                    op.path.join(".")
                )));
            }
        }
    }
    Ok(out)
}

/// The identifier an array filter names: the first segment of all its top-level fields.
fn filter_identifier(filter: &Document) -> Result<String, UpdateError> {
    let mut id: Option<&str> = None;
    for key in filter.keys() {
        let first = key.split('.').next().unwrap_or_default();
        match id {
            Some(seen) if seen != first => {
                return Err(UpdateError::parse(format!(
                    "Error parsing array filter :: caused by :: Expected a single top-level field name, found '{seen}' and '{first}'"
                )));
            }
            _ => id = Some(first),
        }
    }
    let Some(id) = id else {
        return Err(UpdateError::parse(
            "Cannot use an expression without a top-level field name in arrayFilters",
        ));
    };
    let valid = id.starts_with(|c: char| c.is_ascii_lowercase())
        && id.chars().all(|c| c.is_ascii_alphanumeric());
    if !valid {
        return Err(UpdateError::bad_value(format!(
            "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '{id}'"
        )));
    }
    Ok(id.to_string())
}

fn replace(doc: &Document, new: &Document) -> Result<Document, UpdateError> {
    let mut out = Document::new();
    if let Some(id) = doc.get("_id") {
        out.insert("_id", id.clone());
    }
    for (k, v) in new {
        if k != "_id" || !out.contains_key("_id") {
            out.insert(k.clone(), v.clone());
        }
    }
    if let (Some(old), Some(new)) = (doc.get("_id"), new.get("_id"))
        && old != new
    {
        return Err(immutable_id());
    }
    Ok(out)
}

fn immutable_id() -> UpdateError {
    UpdateError::new(
        66,
        "ImmutableField",
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    )
}

/// MongoDB's comparison of two values (type order, numbers by value).
fn cmp(a: &Bson, b: &Bson) -> Ordering {
    crate::bson_order::compare(&view(a), &view(b))
}

fn view(v: &Bson) -> serde_json::Value {
    bunko_doc::ejson::value_to_json(v)
}

/// MongoDB's name of a value's type (`$type`'s names; an undefined value is `undefined`).
fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Undefined => "undefined",
        other => crate::expr::value::type_name(other),
    }
}
