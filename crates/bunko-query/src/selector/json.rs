//! The normalized tree as JSON, in the shape CouchDB's normalizer produces:
//! `{"$and": [...]}`, `{"a.b": {"$gt": 1}}`, `{"a": {"$not": {"$regex": "x"}}}`, with the
//! root path as `""` (as in `{"$elemMatch": {"": {"$gt": 1}}}`).

use serde_json::{Map, Value, json};

use super::{Cond, Node};

impl Node {
    /// The node as CouchDB writes a normalized selector.
    pub fn to_json(&self) -> Value {
        node(self)
    }
}

impl Cond {
    /// The condition as CouchDB writes it, e.g. `{"$gt": 1}`.
    pub fn to_json(&self) -> Value {
        cond(self)
    }
}

fn node(node: &Node) -> Value {
    match node {
        Node::Empty => json!({}),
        Node::And(children) => list("$and", children),
        Node::Or(children) => list("$or", children),
        Node::Nor(children) => list("$nor", children),
        Node::Not(child) => json!({"$not": self::node(child)}),
        Node::Field(path, cond) => {
            let mut map = Map::new();
            map.insert(path.to_string(), self::cond(cond));
            Value::Object(map)
        }
    }
}

fn list(op: &str, children: &[Node]) -> Value {
    let mut map = Map::new();
    map.insert(op.to_owned(), children.iter().map(node).collect());
    Value::Object(map)
}

fn cond(cond: &Cond) -> Value {
    let (op, arg) = match cond {
        Cond::Eq(v) => ("$eq", v.clone()),
        Cond::Ne(v) => ("$ne", v.clone()),
        Cond::Lt(v) => ("$lt", v.clone()),
        Cond::Lte(v) => ("$lte", v.clone()),
        Cond::Gt(v) => ("$gt", v.clone()),
        Cond::Gte(v) => ("$gte", v.clone()),
        Cond::In(vs) => ("$in", Value::Array(vs.clone())),
        Cond::Nin(vs) => ("$nin", Value::Array(vs.clone())),
        Cond::All(vs) => ("$all", Value::Array(vs.clone())),
        Cond::Exists(b) => ("$exists", Value::Bool(*b)),
        Cond::Type(t) => ("$type", Value::String(t.clone())),
        Cond::Size(n) => ("$size", json!(n)),
        Cond::Mod { divisor, remainder } => ("$mod", json!([divisor, remainder])),
        Cond::Regex(p) => ("$regex", Value::String(p.as_str().to_owned())),
        Cond::BeginsWith(s) => ("$beginsWith", Value::String(s.clone())),
        Cond::ElemMatch(sub) => ("$elemMatch", node(sub)),
        Cond::AllMatch(sub) => ("$allMatch", node(sub)),
        Cond::KeyMapMatch(sub) => ("$keyMapMatch", node(sub)),
        Cond::Text(v) => ("$text", v.clone()),
        Cond::Bits(test, positions) => (test.name(), json!(positions)),
        Cond::Not(inner) => ("$not", self::cond(inner)),
    };
    let mut map = Map::new();
    map.insert(op.to_owned(), arg);
    Value::Object(map)
}
