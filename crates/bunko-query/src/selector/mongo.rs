//! MongoDB-dialect matching, for the later Mongo front end.
//!
//! A path collects every value it reaches: through an array it continues into each object
//! element (and a numeric segment also takes that position), so `a.b` on
//! `{"a": [{"b": 1}, {"b": 2}]}` reaches `1` and `2`. A condition matches when some reached
//! value does, where a value that is an array also stands for each of its elements (so
//! `$eq` matches an element or the whole array). Differences from Mango:
//!
//! - Values compare in MongoDB's order (`bson_order`): comparisons only compare within one
//!   BSON type class (`{"$gt": 5}` matches no string), numbers by value across types,
//!   strings by bytes; `$type` takes MongoDB's type names (`objectId`, `date`, `number`,
//!   and the numeric types `int`, `long`, `double`, `decimal`, which the stored form tells
//!   apart: documents are matched in their stored form, `bunko_doc::ejson`).
//! - `null` equality (`$eq`, `$in`, `$lte`, `$gte` with `null`) also matches a missing field.
//! - `$ne` and `$nin` are the negation of `$eq`/`$in`, so they match a missing field.
//! - `$size`, `$all`, `$elemMatch`, `$allMatch` and `$keyMapMatch` look at the reached
//!   values themselves; `$all` compares like `$eq` (`1` equals `1.0`).
//!
//! Open for the Mongo front end: the selector is normalized the Mango way, so a negation
//! pushed down (`$not` of `$gt` to `$lte`) does not match missing fields as MongoDB's
//! `$not` would.

use std::borrow::Cow;
use std::cmp::Ordering;

use serde_json::Value;

use super::matching::{self, Order};
use super::{Cond, Node};
use crate::bson_order::{class, compare, has_type};
use crate::path::array_index;

pub(super) fn node(node: &Node, value: &Value) -> bool {
    match node {
        Node::Empty => true,
        Node::And(children) => children.iter().all(|c| self::node(c, value)),
        Node::Or(children) => children.is_empty() || children.iter().any(|c| self::node(c, value)),
        Node::Nor(children) => !children.iter().any(|c| self::node(c, value)),
        Node::Not(child) => !self::node(child, value),
        Node::Field(path, cond) => {
            let mut reached = Vec::new();
            resolve(value, path.segments(), &mut reached);
            self::cond(cond, &reached)
        }
    }
}

/// Collects the values `segments` reach from `value`.
fn resolve<'a>(value: &'a Value, segments: &[String], out: &mut Vec<&'a Value>) {
    let Some((first, rest)) = segments.split_first() else {
        out.push(value);
        return;
    };
    match value {
        Value::Object(map) => {
            if let Some(child) = map.get(first) {
                resolve(child, rest, out);
            }
        }
        Value::Array(items) => {
            if let Some(item) = array_index(first).and_then(|i| items.get(i)) {
                resolve(item, rest, out);
            }
            for item in items.iter().filter(|item| item.is_object()) {
                resolve(item, segments, out);
            }
        }
        _ => {}
    }
}

fn cond(cond: &Cond, reached: &[&Value]) -> bool {
    let any = |test: &dyn Fn(&Value) -> bool| reached.iter().any(|v| expand(v).any(test));
    let missing = reached.is_empty();
    let compare = |arg: &Value, test: fn(Ordering) -> bool| {
        any(&|v| class(v) == class(arg) && test(compare(v, arg)))
    };
    match cond {
        Cond::Exists(should) => missing != *should,
        Cond::Eq(arg) => is_in(std::slice::from_ref(arg), reached),
        Cond::Ne(arg) => !is_in(std::slice::from_ref(arg), reached),
        Cond::In(args) => is_in(args, reached),
        Cond::Nin(args) => !is_in(args, reached),
        Cond::Lt(arg) => compare(arg, Ordering::is_lt),
        Cond::Gt(arg) => compare(arg, Ordering::is_gt),
        Cond::Lte(arg) => (missing && arg.is_null()) || compare(arg, Ordering::is_le),
        Cond::Gte(arg) => (missing && arg.is_null()) || compare(arg, Ordering::is_ge),
        Cond::Type(name) => any(&|v| has_type(v, name)),
        Cond::Bits(test, positions) => any(&|v| test.matches(positions, &plain(v))),
        // Only Mango selectors parse `$text`.
        Cond::Text(_) => false,
        Cond::Mod { .. } => any(&|v| matching::cond(cond, &truncated(v), Order::Collate)),
        Cond::Regex(_) | Cond::BeginsWith(_) => any(&|v| matching::cond(cond, v, Order::Collate)),
        Cond::All(args) => reached
            .iter()
            .any(|v| !args.is_empty() && args.iter().all(|a| expand(v).any(|e| equal(e, a)))),
        Cond::Size(_) => reached.iter().any(|v| matching::cond(cond, v, Order::Collate)),
        Cond::ElemMatch(sub) => reached
            .iter()
            .any(|v| v.as_array().is_some_and(|items| items.iter().any(|e| node(sub, e)))),
        Cond::AllMatch(sub) => reached.iter().any(|v| {
            v.as_array()
                .is_some_and(|items| !items.is_empty() && items.iter().all(|e| node(sub, e)))
        }),
        Cond::KeyMapMatch(sub) => reached.iter().any(|v| {
            v.as_object().is_some_and(|m| m.keys().any(|k| node(sub, &Value::String(k.clone()))))
        }),
        Cond::Not(inner) => !self::cond(inner, reached),
    }
}

/// A number wrapper (int64, Decimal128) as the plain JSON number `$mod` and the bit tests
/// read; anything else as it is.
fn plain(v: &Value) -> Cow<'_, Value> {
    match v {
        Value::Object(_) => {
            bunko_doc::ejson::plain_number(v).map_or(Cow::Borrowed(v), |n| Cow::Owned(n.into()))
        }
        _ => Cow::Borrowed(v),
    }
}

/// A number as `$mod` reads it: a fraction truncated toward zero, as MongoDB does.
fn truncated(v: &Value) -> Cow<'_, Value> {
    let p = plain(v);
    let fraction = match p.as_ref() {
        Value::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => n.as_f64(),
        _ => None,
    };
    match fraction {
        Some(d) if d.is_finite() && d.abs() < 9.2e18 => Cow::Owned(Value::from(d.trunc() as i64)),
        _ => p,
    }
}

/// Equality with some argument; a `null` argument also matches a missing field.
fn is_in(args: &[Value], reached: &[&Value]) -> bool {
    (reached.is_empty() && args.iter().any(Value::is_null))
        || reached.iter().any(|v| expand(v).any(|x| args.iter().any(|a| equal(x, a))))
}

/// The value, then, for an array, each element.
fn expand(v: &Value) -> impl Iterator<Item = &Value> {
    let elements = v.as_array().map(|a| a.iter()).into_iter().flatten();
    std::iter::once(v).chain(elements)
}

fn equal(v: &Value, arg: &Value) -> bool {
    compare(v, arg).is_eq()
}
