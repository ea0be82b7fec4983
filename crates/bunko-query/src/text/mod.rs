//! Mango `text` indexes, the pure part: what a document puts in the index ([`entries`])
//! and the query a selector becomes ([`Text::from_selector`], CouchDB's
//! `mango_selector_text`).
//!
//! Every indexed value is a field named by its path and type, `name.first:string`,
//! `age:number`, `favorites.[]:string` (an array element), `tags.[]:length` (an array's
//! length), `x:boolean`, `x:null`; each path segment is escaped for Lucene
//! ([`escape_segment`]: bytes other than ASCII letters and digits become `_XX`), so
//! `age:number` is stored as `age_3anumber`. Besides, `$default` holds every string
//! value (for `$text`) and `$fieldnames` the name of every field a document has (for
//! `$exists`, `$type` and the like).
//!
//! A selector becomes a [`Text`] tree: `{"age": {"$gt": 20}}` is a range on
//! `age:number`, `{"$text": "x"}` a phrase in `$default`, `{"a": {"$exists": true}}` a
//! prefix of `$fieldnames`. [`Text::lucene`] writes it in Lucene syntax as CouchDB does
//! (for `_explain`); the search crate builds the same tree into a tantivy query. The
//! query only narrows the candidates: each document found is still matched against the
//! whole selector, so it must find a superset of the matches.

pub mod entries;
mod lucene;

use std::collections::BTreeSet;

use serde_json::Value;

use crate::error::Error;
use crate::path::FieldPath;
use crate::selector::{Cond, Node, Selector};

/// An array element in a field path.
pub const ARRAY: &str = "[]";

/// The type part of a field name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    String,
    Number,
    Boolean,
    Null,
    /// An array's length (`path.[]:length`).
    Length,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Number => "number",
            Kind::Boolean => "boolean",
            Kind::Null => "null",
            Kind::Length => "length",
        }
    }

    /// The kind of a scalar value (arrays and objects have none).
    pub fn of(v: &Value) -> Option<Kind> {
        match v {
            Value::String(_) => Some(Kind::String),
            Value::Number(_) => Some(Kind::Number),
            Value::Bool(_) => Some(Kind::Boolean),
            Value::Null => Some(Kind::Null),
            _ => None,
        }
    }
}

/// A typed field: a path (segments, [`ARRAY`] for elements) and the value's kind.
#[derive(Clone, Debug, PartialEq)]
pub struct TextField {
    pub path: Vec<String>,
    pub kind: Kind,
}

impl TextField {
    /// CouchDB's column name, as index definitions list fields: `a.b:string`.
    pub fn column(&self) -> String {
        format!("{}:{}", self.path.join("."), self.kind.as_str())
    }

    /// The escaped name the index holds: `a.b_3astring`.
    pub fn name(&self) -> String {
        field_name(&self.path, self.kind.as_str())
    }
}

/// The escaped index field name of `path` with type `kind`.
pub fn field_name(path: &[String], kind: &str) -> String {
    let mut out = String::new();
    for (i, segment) in path.iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        if i + 1 == path.len() {
            out.push_str(&escape_segment(&format!("{segment}:{kind}")));
        } else {
            out.push_str(&escape_segment(segment));
        }
    }
    out
}

/// `mango_util:lucene_escape_field`: ASCII letters and digits stay, every other byte
/// becomes `_` and two lower-case hex digits.
pub fn escape_segment(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() {
            out.push(char::from(b));
        } else {
            out.push('_');
            out.push_str(&format!("{b:02x}"));
        }
    }
    out
}

/// The escaped prefix of `path` (no type): segments joined by `.`.
pub fn path_name(path: &[String]) -> String {
    path.iter().map(|s| escape_segment(s)).collect::<Vec<_>>().join(".")
}

/// One end of a range.
#[derive(Clone, Debug, PartialEq)]
pub enum End {
    /// Open (`*` for numbers, `""`/`u0x10FFFF` for strings in CouchDB's text).
    Open,
    Inclusive(Value),
    Exclusive(Value),
}

/// What a field is searched for.
#[derive(Clone, Debug, PartialEq)]
pub enum Term {
    /// Equal to a scalar (a string phrase analysed with the field's analyzer).
    Value(Value),
    Range(End, End),
    /// A string starting with this text (`$beginsWith`).
    Prefix(String),
}

/// The query tree (`mango_selector_text`'s abstract selector).
#[derive(Clone, Debug, PartialEq)]
pub enum Text {
    And(Vec<Text>),
    Or(Vec<Text>),
    /// `exists AND NOT (arg)`; without `arg`, documents lacking the field:
    /// `$fieldnames:/.*/ AND NOT (exists)`.
    Not(Box<Text>, Option<Box<Text>>),
    Field(TextField, Term),
    /// A field name in `$fieldnames`: `name`, or with `prefix` every name starting so.
    FieldName {
        name: String,
        prefix: bool,
    },
    /// `$regex`: the document has the string field (`$fieldnames:path:string`).
    Regex(TextField),
    /// `$text`: a phrase in `$default`.
    Default(Value),
}

impl Text {
    /// The tree of a selector.
    pub fn from_selector(selector: &Selector) -> Text {
        node(&[], selector.root())
    }

    /// Whether the query is empty (CouchDB then answers without searching).
    pub fn is_empty(&self) -> bool {
        self.lucene().is_empty()
    }

    /// The index columns the query names (`mango_idx_text:indexable_fields`): a text
    /// index listing fields is usable only when it has all of them.
    pub fn indexable_fields(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        indexable(self, &mut out);
        out
    }
}

fn indexable(text: &Text, out: &mut BTreeSet<String>) {
    match text {
        Text::Or(items) if items.len() == 2 => {
            if let (Text::Field(a, _), Text::Field(b, _)) = (&items[0], &items[1])
                && b.path.iter().any(|s| s == ARRAY)
            {
                if a.kind != Kind::Length {
                    out.insert(a.column());
                }
                return;
            }
            items.iter().for_each(|t| indexable(t, out));
        }
        Text::And(items) | Text::Or(items) => items.iter().for_each(|t| indexable(t, out)),
        Text::Not(exists, Some(arg)) => {
            indexable(exists, out);
            indexable(arg, out);
        }
        // CouchDB forgets the fields gathered so far here; a superset is harmless.
        Text::Not(_, None) => {}
        Text::Field(f, _) if f.kind != Kind::Length => {
            out.insert(f.column());
        }
        Text::Regex(f) => {
            out.insert(f.column());
        }
        Text::Default(_) => {
            out.insert("$default".to_string());
        }
        Text::Field(..) | Text::FieldName { .. } => {}
    }
}

fn node(path: &[String], node: &Node) -> Text {
    match node {
        Node::Empty => Text::And(Vec::new()),
        Node::And(items) => Text::And(items.iter().map(|n| self::node(path, n)).collect()),
        Node::Or(items) => Text::Or(items.iter().map(|n| self::node(path, n)).collect()),
        Node::Nor(items) => Text::And(
            items
                .iter()
                .map(|n| Text::Not(exists(path), Some(Box::new(self::node(path, n)))))
                .collect(),
        ),
        Node::Not(inner) => Text::Not(exists(path), Some(Box::new(self::node(path, inner)))),
        Node::Field(field, cond) => field_node(path, field, cond),
    }
}

/// A condition on `field` under `path`; a numeric segment (`favorites.1`) also searches
/// any element (`favorites.[]`), as CouchDB does.
fn field_node(path: &[String], field: &FieldPath, c: &Cond) -> Text {
    if let Cond::Text(q) = c {
        return Text::Default(q.clone());
    }
    let mut full = path.to_vec();
    full.extend(field.segments().iter().cloned());
    let numeric = |s: &String| {
        let digits = s.strip_prefix(['-', '+']).unwrap_or(s);
        !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
    };
    if !field.segments().iter().any(numeric) {
        return cond(&full, c);
    }
    let mut replaced = path.to_vec();
    replaced.extend(
        field.segments().iter().map(|s| if numeric(s) { ARRAY.to_string() } else { s.clone() }),
    );
    Text::Or(vec![cond(&full, c), cond(&replaced, c)])
}

fn with(path: &[String], segment: &str) -> Vec<String> {
    let mut out = path.to_vec();
    out.push(segment.to_string());
    out
}

/// `$fieldnames:path:*` or `$fieldnames:path.*`: the document has the field, of any type
/// or as an object.
fn exists(path: &[String]) -> Box<Text> {
    let name = path_name(path);
    let typed = field_name(path, "");
    Box::new(Text::Or(vec![
        Text::FieldName { name: typed, prefix: true },
        Text::FieldName { name: format!("{name}."), prefix: true },
    ]))
}

fn typed(path: &[String], v: &Value) -> Option<TextField> {
    Kind::of(v).map(|kind| TextField { path: path.to_vec(), kind })
}

fn cond(path: &[String], c: &Cond) -> Text {
    match c {
        Cond::Eq(v) => eq(path, v),
        Cond::Ne(v) => Text::Not(exists(path), Some(Box::new(eq(path, v)))),
        Cond::Lt(v) => range(path, v, End::Open, End::Exclusive(v.clone())),
        Cond::Lte(v) => range(path, v, End::Open, End::Inclusive(v.clone())),
        Cond::Gt(v) => range(path, v, End::Exclusive(v.clone()), End::Open),
        Cond::Gte(v) => range(path, v, End::Inclusive(v.clone()), End::Open),
        Cond::In(vs) => Text::Or(vs.iter().map(|v| in_item(path, v)).collect()),
        Cond::Nin(vs) => Text::Not(
            exists(path),
            Some(Box::new(Text::Or(vs.iter().map(|v| in_item(path, v)).collect()))),
        ),
        Cond::Exists(true) | Cond::Type(_) | Cond::KeyMapMatch(_) | Cond::Bits(..) => *exists(path),
        Cond::Exists(false) => Text::Not(exists(path), None),
        Cond::BeginsWith(s) => Text::Field(
            TextField { path: path.to_vec(), kind: Kind::String },
            Term::Prefix(s.clone()),
        ),
        Cond::Mod { .. } => Text::FieldName { name: field_name(path, "number"), prefix: false },
        Cond::Regex(_) => Text::Regex(TextField { path: path.to_vec(), kind: Kind::String }),
        Cond::Size(n) => Text::Field(
            TextField { path: with(path, ARRAY), kind: Kind::Length },
            Term::Value(Value::from(*n)),
        ),
        Cond::All(vs) => match vs.as_slice() {
            [Value::Array(_)] => Text::Or(vec![eq(path, &vs[0]), eq(&with(path, ARRAY), &vs[0])]),
            _ => Text::And(vs.iter().map(|v| eq(&with(path, ARRAY), v)).collect()),
        },
        Cond::ElemMatch(sub) | Cond::AllMatch(sub) => node(&with(path, ARRAY), sub),
        Cond::Text(q) => Text::Default(q.clone()),
        Cond::Not(inner) => Text::Not(exists(path), Some(Box::new(cond(path, inner)))),
    }
}

/// Equality: `null` is the field `path:null`; an array its length and each element; an
/// object each member.
fn eq(path: &[String], v: &Value) -> Text {
    match v {
        Value::Array(items) => {
            let elements = with(path, ARRAY);
            let length = TextField { path: elements.clone(), kind: Kind::Length };
            let mut parts = vec![Text::Field(length, Term::Value(Value::from(items.len())))];
            parts.extend(items.iter().map(|item| eq(&elements, item)));
            Text::And(parts)
        }
        Value::Object(members) => {
            Text::And(members.iter().map(|(k, v)| eq(&with(path, k), v)).collect())
        }
        scalar => match typed(path, scalar) {
            Some(field) => Text::Field(field, Term::Value(scalar.clone())),
            None => *exists(path),
        },
    }
}

/// A comparison: arrays, objects and `null` only need the field to exist.
fn range(path: &[String], v: &Value, lower: End, upper: End) -> Text {
    match typed(path, v) {
        Some(field) if !v.is_null() => Text::Field(field, Term::Range(lower, upper)),
        _ => *exists(path),
    }
}

/// One `$in` value: the field or one of its elements equal to it.
fn in_item(path: &[String], v: &Value) -> Text {
    let elements = with(path, ARRAY);
    match v {
        Value::Object(members) => Text::Or(
            members
                .iter()
                .map(|(k, sub)| {
                    Text::Or(vec![eq(&with(path, k), sub), eq(&with(&elements, k), sub)])
                })
                .collect(),
        ),
        Value::Array(_) => *exists(path),
        scalar => Text::Or(vec![eq(path, scalar), eq(&elements, scalar)]),
    }
}

/// The sort field a text index sorts by (`mango_selector_text:append_sort_type`):
/// `field:string`/`field:number` name their type; otherwise the selector's conditions on
/// the field must all compare it with strings or all with numbers.
pub fn sort_field(field: &str, selector: &Selector) -> Result<(String, Kind), Error> {
    let parse = |text: &str| FieldPath::parse(text).map(|p| p.segments().to_vec());
    for (suffix, kind) in [(":string", Kind::String), (":number", Kind::Number)] {
        if let Some(base) = field.strip_suffix(suffix) {
            return Ok((field_name(&parse(base)?, kind.as_str()), kind));
        }
    }
    let mut kinds = BTreeSet::new();
    sort_kinds(field, selector.root(), &mut kinds);
    let kind = match kinds.into_iter().collect::<Vec<_>>().as_slice() {
        [Kind::String] => Kind::String,
        [Kind::Number] => Kind::Number,
        _ => return Err(Error::TextSortError(field.to_string())),
    };
    Ok((field_name(&parse(field)?, kind.as_str()), kind))
}

impl PartialOrd for Kind {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Kind {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

fn sort_kinds(field: &str, node: &Node, out: &mut BTreeSet<Kind>) {
    match node {
        Node::And(items) | Node::Or(items) | Node::Nor(items) => {
            items.iter().for_each(|n| sort_kinds(field, n, out));
        }
        Node::Not(inner) => sort_kinds(field, inner, out),
        Node::Field(path, c) if path.to_string() == field => {
            let arg = match c.to_json() {
                Value::Object(map) => map.into_iter().next().map(|(_, v)| v),
                _ => None,
            };
            match arg {
                Some(Value::String(_)) => {
                    out.insert(Kind::String);
                }
                Some(Value::Number(_)) => {
                    out.insert(Kind::Number);
                }
                _ => {}
            }
        }
        Node::Empty | Node::Field(..) => {}
    }
}

#[cfg(test)]
mod tests;
