//! Mango matching (`mango_selector:match/3`).
//!
//! A field condition first looks the path up ([`FieldPath::get`]): a missing member matches
//! only `$exists: false`; a path through a scalar or a bad array position matches nothing,
//! not even `$exists: false`. The value found is then tested by the condition. Conditions
//! on `_id` compare in Erlang term order (bytes for strings), all others in view collation.

use std::cmp::Ordering;

use serde_json::Value;

use super::{Cond, Node};
use crate::cmp::collate;
use crate::path::{FieldPath, Lookup};
use crate::term::{cmp_raw, exact_eq, loose_eq, rem_matches, type_name};

/// The order comparisons use.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Order {
    Collate,
    Raw,
}

impl Order {
    fn cmp(self, a: &Value, b: &Value) -> Ordering {
        match self {
            Self::Collate => collate(a, b),
            Self::Raw => cmp_raw(a, b),
        }
    }
}

pub(super) fn node(node: &Node, value: &Value, order: Order) -> bool {
    match node {
        Node::Empty => true,
        Node::And(children) => children.iter().all(|c| self::node(c, value, order)),
        // An empty `$or` matches everything, as in CouchDB.
        Node::Or(children) => {
            children.is_empty() || children.iter().any(|c| self::node(c, value, order))
        }
        Node::Nor(children) => !children.iter().any(|c| self::node(c, value, order)),
        Node::Not(child) => !self::node(child, value, order),
        Node::Field(path, cond) => field(path, cond, value, order),
    }
}

fn field(path: &FieldPath, cond: &Cond, value: &Value, order: Order) -> bool {
    if let Cond::Text(_) = cond {
        // `mango_selector:match` believes the text index returned valid matches.
        return true;
    }
    match path.get(value) {
        Lookup::NotFound => matches!(cond, Cond::Exists(false)),
        Lookup::BadPath => false,
        Lookup::Found(v) => {
            let order = if path.is_id() { Order::Raw } else { order };
            self::cond(cond, v, order)
        }
    }
}

/// Tests a value that is present.
pub(super) fn cond(cond: &Cond, v: &Value, order: Order) -> bool {
    match cond {
        Cond::Eq(arg) => order.cmp(v, arg).is_eq(),
        Cond::Ne(arg) => order.cmp(v, arg).is_ne(),
        Cond::Lt(arg) => order.cmp(v, arg).is_lt(),
        Cond::Lte(arg) => order.cmp(v, arg).is_le(),
        Cond::Gt(arg) => order.cmp(v, arg).is_gt(),
        Cond::Gte(arg) => order.cmp(v, arg).is_ge(),
        Cond::In(args) => is_in(args, v, order),
        Cond::Nin(args) => args.is_empty() || !is_in(args, v, order),
        Cond::Exists(should) => *should,
        Cond::Type(name) => name == type_name(v),
        Cond::Size(len) => v.as_array().is_some_and(|a| a.len() as u64 == *len),
        Cond::Mod { divisor, remainder } => match v {
            Value::Number(n) => rem_matches(n, *divisor, *remainder),
            _ => false,
        },
        Cond::Regex(pattern) => v.as_str().is_some_and(|s| pattern.is_match(s)),
        Cond::BeginsWith(prefix) => v.as_str().is_some_and(|s| s.starts_with(prefix.as_str())),
        Cond::All(args) => all(args, v),
        Cond::ElemMatch(sub) => {
            v.as_array().is_some_and(|items| items.iter().any(|e| node(sub, e, order)))
        }
        Cond::AllMatch(sub) => v
            .as_array()
            .is_some_and(|items| !items.is_empty() && items.iter().all(|e| node(sub, e, order))),
        Cond::KeyMapMatch(sub) => v
            .as_object()
            .is_some_and(|map| map.keys().any(|k| node(sub, &Value::String(k.clone()), order))),
        Cond::Text(_) => true,
        Cond::Bits(test, positions) => test.matches(positions, v),
        Cond::Not(inner) => !self::cond(inner, v, order),
    }
}

/// `$in`: the value, or for an array some element of it, equals some argument.
fn is_in(args: &[Value], v: &Value, order: Order) -> bool {
    let equal = |x: &Value| args.iter().any(|a| order.cmp(x, a).is_eq());
    match v {
        Value::Array(items) => items.iter().any(equal),
        other => equal(other),
    }
}

/// `$all`: an array holding every argument (exact equality), or, for a single array
/// argument, equal to it (Erlang `==`).
fn all(args: &[Value], v: &Value) -> bool {
    let Value::Array(items) = v else {
        return false;
    };
    if args.is_empty() {
        return false;
    }
    let has_all = args.iter().all(|a| items.iter().any(|e| exact_eq(a, e)));
    let is_arg = matches!(args, [single @ Value::Array(_)] if loose_eq(single, v));
    has_all || is_arg
}
