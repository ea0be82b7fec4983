//! Mango selectors: parse, then normalize, then match (CouchDB's `mango_selector`).
//!
//! 1. `parse` validates every operator with CouchDB's errors and turns the request JSON into
//!    a tree where implicit operators are explicit (`{"a": 1}` is `$eq`, several members are
//!    `$and`) and nested field names are combined into paths (`{"a": {"b": 1}}` is the field
//!    `a.b`), as `mango_selector:norm_ops` and `norm_fields` do.
//! 2. `normalize` pushes negations down to the conditions (`$not` of `$gt` is `$lte`,
//!    `$nor` is an `$and` of negations, De Morgan for `$and`/`$or`), as `norm_negations`, and
//!    then flattens nested non-empty `$and`s and `$or`s.
//! 3. `matching` evaluates the tree against a document in one of two [`Dialect`]s;
//!    `inspect` answers the planner's questions (which fields are constrained, and how;
//!    whether a field must exist in every match).
//!
//! In the normalized tree every condition sits under a field ([`Node::Field`]), and
//! [`Node::Not`]/[`Node::Nor`] occur only inside `$elemMatch`/`$allMatch`/`$keyMapMatch`
//! arguments, where CouchDB does not push negations down (and so neither do we: it changes
//! which documents match, e.g. `{"$not": {"b": 1}}` there also matches elements without `b`).
//! `json` renders the tree back as CouchDB shows a normalized selector in `_explain`.

mod bits;
mod inspect;
mod json;
mod matching;
mod mongo;
mod normalize;
mod parse;
mod pattern;
mod predicate;

use std::sync::Arc;

use serde_json::Value;

pub use self::bits::{BitTest, positions_of};
pub use self::pattern::Pattern;
pub use self::predicate::Predicate;
use crate::error::Error;
use crate::path::FieldPath;

/// A parsed and normalized selector.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    root: Node,
    /// MongoDB conditions beside the tree (`$expr`, `$jsonSchema`, and logical operators
    /// holding them), evaluated on the document as BSON. The planner never sees them, so
    /// they cannot narrow an index range.
    expr: Option<Arc<Predicate>>,
}

/// How a selector reaches into arrays.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// CouchDB: a dotted path never reaches into array elements (a numeric segment indexes
    /// one); `$elemMatch`, `$allMatch`, `$in`, `$all` and `$size` look at arrays.
    Mango,
    /// MongoDB: a path reaches into arrays implicitly and a condition matches when the value
    /// or any element of it does (`$eq` matches an element or the whole array).
    Mongo,
}

/// A node of the normalized tree.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// `{}`: matches every document. Only ever the root.
    Empty,
    /// Every child matches (`[]` matches everything).
    And(Vec<Node>),
    /// Some child matches. CouchDB quirk, kept: an empty `$or` matches everything.
    Or(Vec<Node>),
    /// No child matches. Only inside `$elemMatch`-like arguments.
    Nor(Vec<Node>),
    /// The child does not match. Only inside `$elemMatch`-like arguments.
    Not(Box<Node>),
    /// A condition on the value at a path (the root path: the value itself).
    Field(FieldPath, Cond),
}

/// A condition on one value. The comparison operators use CouchDB's view collation (so
/// `{"$gt": 5}` also matches strings, arrays and objects), except on `_id`, which compares
/// in raw order.
#[derive(Clone, Debug, PartialEq)]
pub enum Cond {
    Eq(Value),
    Ne(Value),
    Lt(Value),
    Lte(Value),
    Gt(Value),
    Gte(Value),
    /// Equal to one of the values; on an array, some element is (never the whole array).
    In(Vec<Value>),
    /// The negation of `In`; `$nin: []` matches everything.
    Nin(Vec<Value>),
    Exists(bool),
    /// CouchDB's type names: `null`, `boolean`, `number`, `string`, `array`, `object`. Any
    /// other name is accepted and matches nothing, as in CouchDB 3.4.
    Type(String),
    /// An array of exactly this length.
    Size(u64),
    /// An integer (written without `.`/exponent) with `value rem divisor == remainder`.
    Mod {
        divisor: i64,
        remainder: i64,
    },
    Regex(Pattern),
    BeginsWith(String),
    /// An array holding every value (Erlang exact equality: `1` is not `1.0`), or equal to
    /// the single array argument; `$all: []` matches nothing.
    All(Vec<Value>),
    /// An array with some element matching.
    ElemMatch(Box<Node>),
    /// A non-empty array whose every element matches.
    AllMatch(Box<Node>),
    /// An object with some key matching.
    KeyMapMatch(Box<Node>),
    /// `$text` (held under the field `$default`, as CouchDB normalizes it): a phrase a text
    /// index searches. Matching trusts the index, so it is true for every document.
    Text(Value),
    /// MongoDB's bitwise operators on the sorted bit positions they name (Mongo dialect
    /// only: [`Selector::parse_mongo`]).
    Bits(BitTest, Vec<u64>),
    /// A negated condition that has no inverse operator. Like every condition but
    /// `$exists: false`, it needs the field to be present.
    Not(Box<Cond>),
}

impl Selector {
    /// Parses and normalizes a selector, failing as CouchDB would. `{}` matches everything.
    pub fn parse(selector: &Value) -> Result<Self, Error> {
        let root = parse::selector(selector, false)?;
        Ok(Self { root, expr: None })
    }

    /// [`Selector::parse`] also taking the operators only the MongoDB dialect has (the
    /// bitwise ones, with a list of bit positions), as the MongoDB front end writes them.
    pub fn parse_mongo(selector: &Value) -> Result<Self, Error> {
        let root = parse::selector(selector, true)?;
        Ok(Self { root, expr: None })
    }

    /// The same selector also requiring a MongoDB `$expr` to be true.
    pub fn with_expr(self, expr: crate::expr::Expr) -> Self {
        self.with_predicate(Predicate::Expr(Arc::new(expr)))
    }

    /// The same selector also requiring `predicate` (beside any it has already).
    pub fn with_predicate(mut self, predicate: Predicate) -> Self {
        let both = match self.expr.take() {
            Some(earlier) => Predicate::And(vec![(*earlier).clone(), predicate]),
            None => predicate,
        };
        self.expr = Some(Arc::new(both));
        self
    }

    /// Whether the predicate (if any) holds for `doc` (in the matching form).
    fn expr_matches(&self, doc: &Value) -> bool {
        let Some(predicate) = &self.expr else { return true };
        let Value::Object(map) = doc else { return false };
        predicate.matches(doc, &bunko_doc::ejson::from_json(map))
    }

    /// Whether a MongoDB condition sits beside the tree (`$expr`, `$jsonSchema`, …).
    pub fn has_predicate(&self) -> bool {
        self.expr.is_some()
    }

    /// The normalized tree.
    pub fn root(&self) -> &Node {
        &self.root
    }

    /// True for `{}`, the selector that matches every document.
    pub fn is_empty(&self) -> bool {
        self.root == Node::Empty && self.expr.is_none()
    }

    /// True when CouchDB answers without reading anything: the normalized selector is an
    /// empty `$and`/`$or` (`{"$or": []}`, `{"$nor": []}`), though such a selector would
    /// match every document if it were evaluated (`mango_cursor:maybe_noop_range`).
    pub fn is_noop(&self) -> bool {
        matches!(&self.root, Node::And(xs) | Node::Or(xs) if xs.is_empty())
    }

    /// Whether `doc` matches.
    pub fn matches(&self, doc: &Value, dialect: Dialect) -> bool {
        match dialect {
            Dialect::Mango => matching::node(&self.root, doc, matching::Order::Collate),
            Dialect::Mongo => mongo::node(&self.root, doc) && self.expr_matches(doc),
        }
    }

    /// The normalized selector as CouchDB shows it (`_explain`'s `selector`).
    pub fn to_json(&self) -> Value {
        self.root.to_json()
    }
}

#[cfg(test)]
mod tests;
