//! Request JSON to selector tree: `mango_selector:norm_ops` and `norm_fields` in one walk.
//!
//! Operators are validated as they are met, in document order, and the first bad one is
//! the error. Field names are joined into path text (`a` then `b.c` gives `a.b.c`, as CouchDB
//! concatenates them) and parsed only at the end, because CouchDB reports an operator error
//! before a missing field name, and that before an invalid field name (which it only finds
//! while matching a document; we report it for every query).
//!
//! Deviations (checked against CouchDB 3.4.3's own modules), all for inputs CouchDB cannot
//! serve either:
//! - `$mod` with divisor 0 is `bad_arg` (CouchDB fails with a 500 while matching), and so is
//!   a divisor or remainder beyond 64 bits (accepted by CouchDB).
//! - `$default` is accepted only as CouchDB's normalized form `{"$default": {"$text": …}}`.
//! - An invalid field name inside an `$elemMatch`-like argument is `invalid_field_name`;
//!   CouchDB meets it only while matching, inside a catch-all, so the condition silently
//!   never matches.
//! - A `$size` beyond 2^64 - 1 is clamped to it (it matches nothing either way).

use serde_json::{Number, Value};

use super::normalize;
use super::{BitTest, Cond, Node, Pattern};
use crate::error::Error;
use crate::path::FieldPath;
use crate::term::integer_parts;

/// Parses and normalizes a whole selector.
pub(super) fn selector(value: &Value, mongo: bool) -> Result<Node, Error> {
    let map = match value {
        Value::Object(map) => map,
        other => return Err(Error::InvalidSelectorJson(other.clone())),
    };
    if map.is_empty() {
        return Ok(Node::Empty);
    }
    let mut parser = Parser { path_error: None, mongo };
    let tree = parser.expr(value, "")?;
    let root = normalize::normalize(tree);
    if matches!(&root, Node::Field(path, _) if path.is_root()) {
        return Err(Error::MissingFieldName);
    }
    match parser.path_error {
        Some(error) => Err(error),
        None => Ok(root),
    }
}

struct Parser {
    /// The first invalid field name met, reported if no operator is invalid.
    path_error: Option<Error>,
    /// Whether the MongoDB dialect's own operators are taken.
    mongo: bool,
}

const UNSUPPORTED: [&str; 5] = ["$where", "$geoWithin", "$geoIntersects", "$near", "$nearSphere"];

impl Parser {
    /// A value in selector or condition position, under the path text `prefix`.
    fn expr(&mut self, value: &Value, prefix: &str) -> Result<Node, Error> {
        match value {
            Value::Object(map) if map.len() == 1 => {
                let (key, arg) = map.iter().next().ok_or(Error::MissingFieldName)?;
                self.member(key, arg, prefix)
            }
            Value::Object(map) if map.len() > 1 => {
                let children = map.iter().map(|(key, arg)| self.member(key, arg, prefix));
                Ok(Node::And(children.collect::<Result<_, _>>()?))
            }
            // A bare value, `{}` included, is an equality.
            other => Ok(self.field(prefix, Cond::Eq(other.clone()))),
        }
    }

    fn member(&mut self, key: &str, arg: &Value, prefix: &str) -> Result<Node, Error> {
        if !key.starts_with('$') {
            let path = if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") };
            return self.expr(arg, &path);
        }
        let cond = match key {
            "$and" | "$or" | "$nor" => {
                let items = arg.as_array().ok_or_else(|| Error::bad_arg(key, arg))?;
                let children =
                    items.iter().map(|item| self.expr(item, prefix)).collect::<Result<_, _>>()?;
                return Ok(match key {
                    "$and" => Node::And(children),
                    "$or" => Node::Or(children),
                    _ => Node::Nor(children),
                });
            }
            "$not" => {
                if !arg.is_object() {
                    return Err(Error::bad_arg(key, arg));
                }
                return Ok(Node::Not(Box::new(self.expr(arg, prefix)?)));
            }
            "$elemMatch" | "$allMatch" | "$keyMapMatch" => {
                if !arg.is_object() {
                    return Err(Error::bad_arg(key, arg));
                }
                // The argument is a selector of its own, relative to the element or key.
                let sub = Box::new(self.expr(arg, "")?);
                match key {
                    "$elemMatch" => Cond::ElemMatch(sub),
                    "$allMatch" => Cond::AllMatch(sub),
                    _ => Cond::KeyMapMatch(sub),
                }
            }
            "$eq" => Cond::Eq(arg.clone()),
            "$ne" => Cond::Ne(arg.clone()),
            "$lt" => Cond::Lt(arg.clone()),
            "$lte" => Cond::Lte(arg.clone()),
            "$gt" => Cond::Gt(arg.clone()),
            "$gte" => Cond::Gte(arg.clone()),
            "$in" | "$nin" | "$all" => {
                let items = arg.as_array().ok_or_else(|| Error::bad_arg(key, arg))?.clone();
                match key {
                    "$in" => Cond::In(items),
                    "$nin" => Cond::Nin(items),
                    _ => Cond::All(items),
                }
            }
            "$exists" => Cond::Exists(arg.as_bool().ok_or_else(|| Error::bad_arg(key, arg))?),
            "$type" => Cond::Type(string(arg).ok_or_else(|| Error::bad_arg(key, arg))?),
            "$size" => Cond::Size(size(arg).ok_or_else(|| Error::bad_arg(key, arg))?),
            "$mod" => {
                let (divisor, remainder) = modulo(arg).ok_or_else(|| Error::bad_arg(key, arg))?;
                Cond::Mod { divisor, remainder }
            }
            "$regex" => {
                let source = string(arg).ok_or_else(|| Error::InvalidOperator(key.into()))?;
                Cond::Regex(Pattern::new(&source).ok_or_else(|| Error::bad_arg(key, arg))?)
            }
            // `mango_selector:norm_ops`: `{"$text": q}` becomes `{"$default": {"$text": q}}`.
            "$text" => return self.text(arg, prefix),
            "$default" => {
                let query = arg.as_object().filter(|o| o.len() == 1).and_then(|o| o.get("$text"));
                return match query {
                    Some(query) => self.text(query, prefix),
                    None => Err(Error::InvalidOperator(key.into())),
                };
            }
            "$beginsWith" => {
                Cond::BeginsWith(string(arg).ok_or_else(|| Error::InvalidOperator(key.into()))?)
            }
            op if self.mongo && BitTest::of(op).is_some() => {
                let test = BitTest::of(op).ok_or_else(|| Error::InvalidOperator(op.into()))?;
                Cond::Bits(test, positions(arg).ok_or_else(|| Error::bad_arg(key, arg))?)
            }
            op if UNSUPPORTED.contains(&op) => return Err(Error::NotSupported(op.into())),
            op => return Err(Error::InvalidOperator(op.into())),
        };
        Ok(self.field(prefix, cond))
    }

    /// `$text`: a string, number or boolean searched in the field `$default`.
    fn text(&mut self, arg: &Value, prefix: &str) -> Result<Node, Error> {
        if !matches!(arg, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
            return Err(Error::bad_arg("$text", arg));
        }
        let path =
            if prefix.is_empty() { "$default".to_owned() } else { format!("{prefix}.$default") };
        Ok(Node::Field(FieldPath::from_segments(path.split('.')), Cond::Text(arg.clone())))
    }

    /// A condition at the path text `prefix`.
    fn field(&mut self, prefix: &str, cond: Cond) -> Node {
        if prefix.is_empty() {
            return Node::Field(FieldPath::root(), cond);
        }
        let path = match FieldPath::parse(prefix) {
            Ok(path) => path,
            Err(error) => {
                self.path_error.get_or_insert(error);
                // Any non-root placeholder: the error is reported instead.
                FieldPath::from_segments([prefix])
            }
        };
        Node::Field(path, cond)
    }
}

fn string(arg: &Value) -> Option<String> {
    arg.as_str().map(str::to_owned)
}

/// A non-negative integer-form number.
fn size(arg: &Value) -> Option<u64> {
    let (negative, digits) = integer_parts(number(arg)?)?;
    if negative {
        return None;
    }
    if digits.is_empty() {
        return Some(0);
    }
    Some(digits.parse().unwrap_or(u64::MAX))
}

/// A list of bit positions (non-negative integers), sorted, each once.
fn positions(arg: &Value) -> Option<Vec<u64>> {
    let mut out = arg.as_array()?.iter().map(Value::as_u64).collect::<Option<Vec<u64>>>()?;
    out.sort_unstable();
    out.dedup();
    Some(out)
}

/// `[divisor, remainder]`, both integer-form and within 64 bits, divisor not 0.
fn modulo(arg: &Value) -> Option<(i64, i64)> {
    let [d, r] = arg.as_array()?.as_slice() else {
        return None;
    };
    let int = |v: &Value| number(v).filter(|n| integer_parts(n).is_some())?.as_i64();
    let divisor = int(d).filter(|d| *d != 0)?;
    Some((divisor, int(r)?))
}

fn number(v: &Value) -> Option<&Number> {
    match v {
        Value::Number(n) => Some(n),
        _ => None,
    }
}
