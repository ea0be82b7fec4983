//! MongoDB update documents as pure functions on BSON documents: a replacement document, or
//! the operators `$set`, `$unset`, `$inc` and `$setOnInsert` on dotted paths (a numeric
//! segment indexes an array), with MongoDB's errors and codes.
//!
//! As in MongoDB 5+, the fields an update names are applied in lexicographic order of their
//! paths (so new fields are appended in that order); two operations whose paths are equal or
//! one a prefix of the other are a conflict (`Updating the path 'a.b' would create a conflict
//! at 'a'`); `_id` may not change. `$inc` keeps the narrowest numeric type that holds the
//! result (int32 + int32 overflowing becomes int64; anything with a double is a double).
//! Other MongoDB operators (`$mul`, `$push`, positional paths, ...) are `NotImplemented`
//! until they are written.

use std::cmp::Ordering;

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
    fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> Self {
        Self { code, code_name, message: message.into() }
    }

    fn parse(message: impl Into<String>) -> Self {
        Self::new(9, "FailedToParse", message)
    }
}

/// A parsed update.
#[derive(Clone, Debug, PartialEq)]
pub enum Update {
    /// The whole document but `_id` is replaced.
    Replace(Document),
    /// Operations, sorted by path.
    Ops(Vec<Op>),
    /// A pipeline-style update (`crate::update_pipeline`).
    Pipeline(crate::update_pipeline::UpdatePipeline),
}

/// One operation of an operator update.
#[derive(Clone, Debug, PartialEq)]
pub struct Op {
    pub kind: Kind,
    pub path: Vec<String>,
    pub value: Bson,
}

/// The implemented operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Set,
    Unset,
    Inc,
    SetOnInsert,
}

const NOT_YET: [&str; 14] = [
    "$mul",
    "$min",
    "$max",
    "$rename",
    "$currentDate",
    "$push",
    "$addToSet",
    "$pop",
    "$pull",
    "$pullAll",
    "$bit",
    "$each",
    "$position",
    "$slice",
];

impl Update {
    /// Parses an update document (`u` of `update`, `update` of `findAndModify`).
    pub fn parse(spec: &Document) -> Result<Update, UpdateError> {
        if !spec.keys().next().is_some_and(|k| k.starts_with('$')) {
            return Ok(Update::Replace(spec.clone()));
        }
        let mut ops = Vec::new();
        for (op, arg) in spec {
            let kind = match op.as_str() {
                "$set" => Kind::Set,
                "$unset" => Kind::Unset,
                "$inc" => Kind::Inc,
                "$setOnInsert" => Kind::SetOnInsert,
                other if NOT_YET.contains(&other) => {
                    return Err(UpdateError::new(
                        238,
                        "NotImplemented",
                        format!("{other} is not supported yet"),
                    ));
                }
                other => {
                    return Err(UpdateError::parse(format!(
                        "Unknown modifier: {other}. Expected a valid update modifier or pipeline-style update specified as an array"
                    )));
                }
            };
            let Bson::Document(fields) = arg else {
                return Err(UpdateError::parse(format!(
                    "Modifiers operate on fields but we found type {} instead. For example: {{$mod: {{<field>: ...}}}} not {{{op}: {arg}}}",
                    type_name(arg)
                )));
            };
            for (field, value) in fields {
                ops.push(Op { kind, path: parse_path(field)?, value: value.clone() });
            }
        }
        for op in ops.iter().filter(|op| op.kind == Kind::Inc) {
            if !is_number(&op.value) {
                return Err(UpdateError::new(
                    14,
                    "TypeMismatch",
                    format!(
                        "Cannot increment with non-numeric argument: {{{}: {}}}",
                        op.path.join("."),
                        op.value
                    ),
                ));
            }
        }
        ops.sort_by(|a, b| compare_paths(&a.path, &b.path));
        for pair in ops.windows(2) {
            let (a, b) = (&pair[0].path, &pair[1].path);
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
        Ok(Update::Ops(ops))
    }

    /// The updated document. `inserting`: the document is being created by an upsert (so
    /// `$setOnInsert` applies).
    pub fn apply(&self, doc: &Document, inserting: bool) -> Result<Document, UpdateError> {
        let out = match self {
            Update::Replace(new) => {
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
                out
            }
            Update::Pipeline(p) => {
                let out = p.apply(doc)?;
                if doc.contains_key("_id") && doc.get("_id") != out.get("_id") {
                    return Err(immutable_id());
                }
                out
            }
            Update::Ops(ops) => {
                let mut out = doc.clone();
                for op in ops {
                    match op.kind {
                        Kind::Set => set(&mut out, &op.path, op.value.clone())?,
                        Kind::SetOnInsert if inserting => {
                            set(&mut out, &op.path, op.value.clone())?
                        }
                        Kind::SetOnInsert => {}
                        Kind::Unset => unset(&mut out, &op.path),
                        Kind::Inc => inc(&mut out, &op.path, &op.value)?,
                    }
                }
                if doc.contains_key("_id") && doc.get("_id") != out.get("_id") {
                    return Err(immutable_id());
                }
                out
            }
        };
        Ok(out)
    }
}

fn immutable_id() -> UpdateError {
    UpdateError::new(
        66,
        "ImmutableField",
        "Performing an update on the path '_id' would modify the immutable field '_id'",
    )
}

fn parse_path(field: &str) -> Result<Vec<String>, UpdateError> {
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
    if parts.iter().any(|p| p.starts_with('$')) {
        return Err(UpdateError::new(
            238,
            "NotImplemented",
            "positional update operators are not supported yet",
        ));
    }
    Ok(parts)
}

/// Segment by segment; numeric segments numerically.
fn compare_paths(a: &[String], b: &[String]) -> Ordering {
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

fn path_not_viable(field: &str, parent: &str, value: &Bson) -> UpdateError {
    UpdateError::new(
        28,
        "PathNotViable",
        format!("Cannot create field '{field}' in element {{{parent}: {value}}}"),
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
        return Err(UpdateError::new(
            2,
            "BadValue",
            format!("can't backfill more than {MAX_PADDING} elements"),
        ));
    }
    Ok(())
}

fn value_of(items: &[Bson]) -> &Bson {
    items.first().unwrap_or(&Bson::Null)
}

/// Puts `value` at `path`, creating documents on the way.
fn set(doc: &mut Document, path: &[String], value: Bson) -> Result<(), UpdateError> {
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

fn get<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
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

/// Removes the field at `path` (an array element becomes `null`, as in MongoDB).
fn unset(doc: &mut Document, path: &[String]) {
    let Some((last, parents)) = path.split_last() else { return };
    if parents.is_empty() {
        doc.remove(last);
        return;
    }
    let Some((first, rest)) = parents.split_first() else { return };
    let mut current = match doc.get_mut(first) {
        Some(v) => v,
        None => return,
    };
    for field in rest {
        current = match current {
            Bson::Document(d) => match d.get_mut(field) {
                Some(v) => v,
                None => return,
            },
            Bson::Array(items) => {
                match field.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                    Some(v) => v,
                    None => return,
                }
            }
            _ => return,
        };
    }
    match current {
        Bson::Document(d) => {
            d.remove(last);
        }
        Bson::Array(items) => {
            if let Some(item) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *item = Bson::Null;
            }
        }
        _ => {}
    }
}

fn inc(doc: &mut Document, path: &[String], by: &Bson) -> Result<(), UpdateError> {
    let new = match get(doc, path) {
        None => by.clone(),
        Some(current) if is_number(current) => add(current, by).ok_or_else(|| {
            UpdateError::new(
                2,
                "BadValue",
                format!(
                    "Failed to apply $inc operations to current value ({current}) for field '{}'",
                    path.join(".")
                ),
            )
        })?,
        Some(current) => {
            return Err(UpdateError::new(
                14,
                "TypeMismatch",
                format!(
                    "Cannot apply $inc to a value of non-numeric type. The field '{}' has non-numeric type {}",
                    path.join("."),
                    type_name(current)
                ),
            ));
        }
    };
    set(doc, path, new)
}

fn is_number(v: &Bson) -> bool {
    matches!(v, Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))
}

fn add(a: &Bson, b: &Bson) -> Option<Bson> {
    Some(match (a, b) {
        (Bson::Int32(x), Bson::Int32(y)) => {
            x.checked_add(*y).map_or(Bson::Int64(i64::from(*x) + i64::from(*y)), Bson::Int32)
        }
        (Bson::Double(_), _) | (_, Bson::Double(_)) => Bson::Double(as_f64(a)? + as_f64(b)?),
        _ => Bson::Int64(as_i64(a)?.checked_add(as_i64(b)?)?),
    })
}

fn as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

fn as_i64(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        Bson::Int32(_) => "int",
        Bson::Int64(_) => "long",
        Bson::ObjectId(_) => "objectId",
        Bson::DateTime(_) => "date",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    fn run(doc: Document, update: Document) -> Result<Document, UpdateError> {
        Update::parse(&update)?.apply(&doc, false)
    }

    #[test]
    fn operators_update_as_mongodb() -> Result<(), UpdateError> {
        let d = doc! {"_id": 1, "n": 1, "big": i32::MAX, "f": 1.5, "a": {"b": 1}, "arr": [1, 2]};
        let out = run(
            d.clone(),
            doc! {"$set": {"z": 1, "a.c": "x", "arr.3": 9}, "$inc": {"n": 2, "big": 1, "f": 1, "new": 5_i64}, "$unset": {"a.b": ""}},
        )?;
        assert_eq!(
            out,
            doc! {"_id": 1, "n": 3, "big": i64::from(i32::MAX) + 1, "f": 2.5, "a": {"c": "x"}, "arr": [1, 2, null, 9], "new": 5_i64, "z": 1}
        );
        let replaced = run(d.clone(), doc! {"x": 1})?;
        assert_eq!(replaced, doc! {"_id": 1, "x": 1});
        Ok(())
    }

    #[test]
    fn errors_carry_mongodb_codes() {
        let d = doc! {"_id": 1, "s": "text", "n": 1};
        let code = |u: Document| run(d.clone(), u).err().map(|e| (e.code, e.message));
        assert_eq!(code(doc! {"$set": {"a": 1}, "$inc": {"a": 1}}).map(|e| e.0), Some(40));
        assert_eq!(
            code(doc! {"$set": {"a.b": 1}, "$unset": {"a": 1}}),
            Some((40, "Updating the path 'a.b' would create a conflict at 'a'".into()))
        );
        assert_eq!(code(doc! {"$inc": {"s": 1}}).map(|e| e.0), Some(14));
        assert_eq!(code(doc! {"$inc": {"n": "x"}}).map(|e| e.0), Some(14));
        assert_eq!(code(doc! {"$set": {"_id": 2}}).map(|e| e.0), Some(66));
        assert_eq!(code(doc! {"$set": {"n.x": 2}}).map(|e| e.0), Some(28));
        assert_eq!(code(doc! {"$foo": {"n": 2}}).map(|e| e.0), Some(9));
        assert_eq!(code(doc! {"$push": {"n": 2}}).map(|e| e.0), Some(238));
        assert_eq!(code(doc! {"$set": 5}).map(|e| e.0), Some(9));
        assert_eq!(code(doc! {"_id": 2, "x": 1}).map(|e| e.0), Some(66));
        let far = doc! {"_id": 1, "arr": [1]};
        let err = run(far, doc! {"$set": {"arr.99999999": 1}}).err().map(|e| e.code);
        assert_eq!(err, Some(2));
    }
}
