//! MongoDB aggregation expressions: parsed once into an [`Expr`] tree, then evaluated
//! against a BSON document ([`Expr::eval`]) with the variables `$$ROOT`, `$$CURRENT`,
//! `$$REMOVE`, `$$NOW` and those bound by `$let`, `$map`, `$filter`, `$reduce` or a
//! pipeline's `let`.
//!
//! 1. [`Expr::parse`] reads the expression syntax: `"$a.b"` a field path of `$$CURRENT`,
//!    `"$$v.b"` a variable, `{"$op": args}` an operator (looked up by name in `ops`),
//!    any other document an object of expressions, an array an array of expressions,
//!    anything else a literal. An unknown operator is MongoDB's
//!    `Unrecognized expression '$foo'` (168, `InvalidPipelineOperator`).
//! 2. [`Expr::eval`] walks the tree. A missing value (an absent field, `$$REMOVE`) is
//!    [`MISSING`]: operators treat it as MongoDB treats "missing" (mostly like `null`), and
//!    a field whose value is missing is left out of the resulting document.
//!
//! Operators live in one file per family (`arith`, `compare`, `boolean`, `cond`, `string`,
//! `array`, `date`, `types`, `object`); `value` holds the shared value helpers (BSON
//! comparison order, numbers, type names, truthiness). [`accum`] holds `$group`'s
//! accumulators.

pub mod accum;
pub(crate) mod arith;
mod array;
mod bits;
mod boolean;
mod compare;
mod cond;
pub(crate) mod date;
mod decimal;
pub mod meta;
mod object;
mod ops;
mod parts;
mod quantile;
mod reads;
mod string;
mod trig;
mod types;
pub mod value;
mod zone;

use bson::{Bson, DateTime, Document};

/// An expression or pipeline that cannot be parsed or evaluated, with MongoDB's code.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ExprError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
    /// More fields of the error reply, as BSON bytes (a duplicate key's `keyPattern` and
    /// `keyValue`).
    pub extra: Option<Vec<u8>>,
}

impl ExprError {
    pub fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> Self {
        Self { code, code_name, message: message.into(), extra: None }
    }

    /// The same error with the reply fields `extra`.
    pub fn with_extra(self, extra: &Document) -> Self {
        Self { extra: extra.to_vec().ok(), ..self }
    }

    /// An operator's argument error: MongoDB reports most as a `Location<code>`.
    pub fn location(code: i32, message: impl Into<String>) -> Self {
        Self::new(code, "Location", message)
    }

    pub fn bad_value(message: impl Into<String>) -> Self {
        Self::new(2, "BadValue", message)
    }

    pub fn failed_to_parse(message: impl Into<String>) -> Self {
        Self::new(9, "FailedToParse", message)
    }

    pub fn type_mismatch(message: impl Into<String>) -> Self {
        Self::new(14, "TypeMismatch", message)
    }
}

pub type Result<T, E = ExprError> = std::result::Result<T, E>;

/// Checks a user variable name (`let`): a lowercase letter or non-ASCII character first.
pub fn cond_check_var_name(name: &str) -> Result<()> {
    cond::check_var_name(name)
}

/// The value of a missing field or of `$$REMOVE` while an expression is evaluated.
pub const MISSING: Bson = Bson::Undefined;

/// A parsed expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    Literal(Bson),
    /// `$a.b`: a path in `$$CURRENT`.
    Field(Vec<String>),
    /// `$$name.a.b`.
    Var(String, Vec<String>),
    Object(Vec<(String, Expr)>),
    Array(Vec<Expr>),
    /// An operator with its arguments, positional or named.
    Op(&'static ops::Op, Args),
    /// `{$meta: "sortKey"}` ([`Vars::sorted_by`]).
    SortKey,
    /// `{$meta: "indexKey"}` ([`Vars::with_record_meta`]).
    IndexKey,
    /// `{$meta: "recordId"}` ([`Vars::with_record_meta`]).
    RecordId,
}

/// A document's key in the index its collection read found it at (`None`: no key, as
/// after a collection scan); given by the database layer, which knows the plan.
pub type IndexKeys = std::sync::Arc<dyn Fn(&Document) -> Option<Document> + Send + Sync>;

/// Whether the documents a stage reads carry the record metadata of the collection read
/// (`{$meta: "indexKey"}`, `{$meta: "recordId"}`; see `crate::agg::meta_record`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecordMeta {
    /// Not known here (outside a pipeline's stages): reading it is `NotImplemented`.
    #[default]
    Unknown,
    /// The documents are the collection's, as read (only filtered, sorted, skipped or
    /// limited since): the metadata is computed from them.
    Source,
    /// Documents made anew (after a `$group`, ...): none, the expression is missing.
    Missing,
}

/// An operator's arguments: `{"$add": [a, b]}` (or one argument not in an array) is
/// positional; `{"$filter": {input, as, cond}}` is named.
#[derive(Clone, Debug, PartialEq)]
pub enum Args {
    List(Vec<Expr>),
    Named(Vec<(String, Expr)>),
}

/// Variables in scope while evaluating.
#[derive(Clone, Debug)]
pub struct Vars {
    pub root: Bson,
    /// `$$CURRENT` when it differs from `$$ROOT` (never rebound yet: always `None`).
    current: Option<Bson>,
    pub now: DateTime,
    bound: Vec<(String, Bson)>,
    /// The sort whose key `{$meta: "sortKey"}` reads from `$$ROOT` (paths, ascending), where
    /// the documents carry one (a pipeline's stages after a `$sort`, a sorted `find`).
    sort: Option<SortSpec>,
    /// Whether `$$ROOT` carries the collection read's record metadata, and its index keys.
    record: (RecordMeta, Option<Keys>),
}

/// [`IndexKeys`], printable.
#[derive(Clone)]
struct Keys(IndexKeys);

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IndexKeys")
    }
}

/// A sort specification: paths, ascending.
pub type SortSpec = std::sync::Arc<Vec<(Vec<String>, bool)>>;

impl Vars {
    /// Variables for evaluating against `doc` (`$$ROOT` and `$$CURRENT`).
    pub fn new(doc: &Document, now: DateTime) -> Self {
        Self {
            root: Bson::Document(doc.clone()),
            current: None,
            now,
            bound: Vec::new(),
            sort: None,
            record: (RecordMeta::Unknown, None),
        }
    }

    /// The same variables for another document.
    pub fn with_doc(&self, doc: &Document) -> Self {
        self.with_owned(doc.clone())
    }

    /// The same variables for another document, taken without a copy (a stage evaluating
    /// per document: `$group` feeds each one to its key and accumulators).
    pub fn with_owned(&self, doc: Document) -> Self {
        Self {
            root: Bson::Document(doc),
            current: None,
            now: self.now,
            bound: self.bound.clone(),
            sort: self.sort.clone(),
            record: self.record.clone(),
        }
    }

    /// The same variables, with `{$meta: "sortKey"}` reading `sort`'s key of `$$ROOT`
    /// (`None`: missing).
    pub fn sorted_by(mut self, sort: Option<SortSpec>) -> Self {
        self.sort = sort;
        self
    }

    /// The same variables, with `{$meta: "indexKey"}` and `{$meta: "recordId"}` reading
    /// `$$ROOT`'s record metadata as `meta` says; `keys` (when given) replaces the index
    /// keys of the collection read.
    pub fn with_record_meta(mut self, meta: RecordMeta, keys: Option<IndexKeys>) -> Self {
        self.record.0 = meta;
        if let Some(keys) = keys {
            self.record.1 = Some(Keys(keys));
        }
        self
    }

    /// `{$meta: "indexKey"}` or `{$meta: "recordId"}` of `$$ROOT` (see [`RecordMeta`]): a
    /// record id is the hash of the document's `_id` (Bunko keeps no record numbers; it is
    /// what `find`'s `showRecordId` shows).
    fn record_meta(&self, index_key: bool) -> Result<Bson> {
        let name = if index_key { "indexKey" } else { "recordId" };
        let Bson::Document(doc) = &self.root else { return Ok(MISSING) };
        match (self.record.0, index_key, &self.record.1) {
            (RecordMeta::Unknown, ..) => Err(ExprError::new(
                238,
                "NotImplemented",
                format!("$meta \"{name}\" is not supported here yet"),
            )),
            (RecordMeta::Missing, ..) | (RecordMeta::Source, true, None) => Ok(MISSING),
            (RecordMeta::Source, true, Some(Keys(keys))) => {
                Ok(keys(doc).map_or(MISSING, Bson::Document))
            }
            (RecordMeta::Source, false, _) => {
                Ok(Bson::Int64(bunko_doc::bson_hash::hash64(doc.get("_id").unwrap_or(&Bson::Null))))
            }
        }
    }

    /// `{$meta: "sortKey"}`: one value per sort field, as the sort reads it; missing where
    /// the documents carry no sort key (as MongoDB, whose metadata is then absent).
    fn sort_key(&self) -> Bson {
        match (&self.sort, &self.root) {
            (Some(sort), Bson::Document(doc)) => Bson::Array(
                (sort.iter())
                    .map(|(path, asc)| crate::agg::document_sort_key(doc, path, *asc))
                    .collect(),
            ),
            _ => MISSING,
        }
    }

    /// `$$CURRENT`.
    pub fn current(&self) -> &Bson {
        self.current.as_ref().unwrap_or(&self.root)
    }

    /// Binds a user variable (`let`); a later binding of the same name hides the earlier.
    pub fn bind(&mut self, name: &str, value: Bson) {
        self.bound.push((name.to_string(), value));
    }

    /// The user variables bound (`let`), oldest first.
    pub fn bound(&self) -> &[(String, Bson)] {
        &self.bound
    }

    fn unbind(&mut self, n: usize) {
        self.bound.truncate(self.bound.len().saturating_sub(n));
    }

    fn get(&self, name: &str) -> Result<Bson> {
        match name {
            "ROOT" => Ok(self.root.clone()),
            "CURRENT" => Ok(self.current().clone()),
            "REMOVE" => Ok(MISSING),
            "NOW" => Ok(Bson::DateTime(self.now)),
            _ => {
                self.bound.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.clone()).ok_or_else(
                    || ExprError::location(17276, format!("Use of undefined variable: {name}")),
                )
            }
        }
    }

    /// Evaluates `body` with `names` bound to `values`.
    pub fn scoped<T>(
        &mut self,
        bindings: Vec<(String, Bson)>,
        body: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<T> {
        let n = bindings.len();
        self.bound.extend(bindings);
        let out = body(self);
        self.unbind(n);
        out
    }
}

impl Expr {
    /// Parses an expression.
    pub fn parse(value: &Bson) -> Result<Expr> {
        match value {
            Bson::String(s) if s.starts_with("$$") => parse_var(&s[2..]),
            Bson::String(s) if s.starts_with('$') => parse_field(&s[1..]),
            Bson::Array(items) => {
                Ok(Expr::Array(items.iter().map(Expr::parse).collect::<Result<_>>()?))
            }
            Bson::Document(doc) => parse_doc(doc),
            other => Ok(Expr::Literal(other.clone())),
        }
    }

    /// Evaluates against the variables' `$$CURRENT`.
    pub fn eval(&self, vars: &mut Vars) -> Result<Bson> {
        match self {
            Expr::Literal(v) => Ok(v.clone()),
            Expr::Field(path) => Ok(value::get_path(vars.current(), path)),
            Expr::Var(name, path) => Ok(value::get_path(&vars.get(name)?, path)),
            Expr::Object(fields) => {
                let mut out = Document::new();
                for (name, e) in fields {
                    let v = e.eval(vars)?;
                    if v != MISSING {
                        out.insert(name.clone(), v);
                    }
                }
                Ok(Bson::Document(out))
            }
            Expr::Array(items) => Ok(Bson::Array(
                items
                    .iter()
                    .map(|e| e.eval(vars).map(|v| if v == MISSING { Bson::Null } else { v }))
                    .collect::<Result<_>>()?,
            )),
            Expr::Op(op, args) => (op.run)(op.name, args, vars),
            Expr::SortKey => Ok(vars.sort_key()),
            Expr::IndexKey => vars.record_meta(true),
            Expr::RecordId => vars.record_meta(false),
        }
    }

    /// Evaluates against one document with no user variables.
    pub fn eval_doc(&self, doc: &Document) -> Result<Bson> {
        self.eval(&mut Vars::new(doc, DateTime::now()))
    }

    /// The field path, if this is one (`$a.b`).
    pub fn as_field(&self) -> Option<&[String]> {
        match self {
            Expr::Field(p) => Some(p),
            _ => None,
        }
    }
}

fn parse_field(path: &str) -> Result<Expr> {
    if path.is_empty() {
        return Err(ExprError::location(16872, "'$' by itself is not a valid FieldPath"));
    }
    let parts: Vec<String> = path.split('.').map(str::to_string).collect();
    if parts.iter().any(String::is_empty) {
        return Err(ExprError::location(15998, "FieldPath field names may not be empty strings."));
    }
    if parts.iter().any(|p| p.starts_with('$')) {
        return Err(ExprError::location(
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField."
                .to_string(),
        ));
    }
    Ok(Expr::Field(parts))
}

fn parse_var(text: &str) -> Result<Expr> {
    let mut parts = text.split('.');
    let name = parts.next().unwrap_or_default().to_string();
    if name.is_empty() {
        return Err(ExprError::location(16869, "empty variable names are not allowed"));
    }
    let path: Vec<String> = parts.map(str::to_string).collect();
    if path.iter().any(String::is_empty) {
        return Err(ExprError::location(15998, "FieldPath field names may not be empty strings."));
    }
    Ok(Expr::Var(name, path))
}

fn parse_doc(doc: &Document) -> Result<Expr> {
    let Some(first) = doc.keys().next() else { return Ok(Expr::Object(Vec::new())) };
    if !first.starts_with('$') {
        let mut fields = Vec::new();
        for (k, v) in doc {
            if k.starts_with('$') {
                return Err(ExprError::location(
                    16833,
                    format!(
                        "an expression specification must contain exactly one field, the name of the expression. Found {} fields in {doc}",
                        doc.len()
                    ),
                ));
            }
            fields.push((k.clone(), Expr::parse(v)?));
        }
        return Ok(Expr::Object(fields));
    }
    if doc.len() != 1 {
        return Err(ExprError::location(
            15983,
            format!(
                "an expression operator specification must contain exactly one field, found {} fields in '{doc}'",
                doc.len()
            ),
        ));
    }
    let arg = doc.get(first).unwrap_or(&Bson::Null);
    if first == "$literal" {
        return Ok(Expr::Literal(arg.clone()));
    }
    if first == "$meta" {
        return match arg {
            Bson::String(name) if name == "sortKey" => Ok(Expr::SortKey),
            Bson::String(name) if name == "indexKey" => Ok(Expr::IndexKey),
            Bson::String(name) if name == "recordId" => Ok(Expr::RecordId),
            _ => Err(meta::unavailable(arg)),
        };
    }
    let op = ops::find(first).ok_or_else(|| {
        ExprError::new(168, "InvalidPipelineOperator", format!("Unrecognized expression '{first}'"))
    })?;
    if matches!(first.as_str(), "$median" | "$percentile") {
        return Ok(Expr::Op(op, quantile::parse_expr(first, arg)?));
    }
    let args = match (op.named, arg) {
        (true, Bson::Document(d)) if d.keys().next().is_none_or(|k| !k.starts_with('$')) => {
            Args::Named(
                d.iter().map(|(k, v)| Ok((k.clone(), Expr::parse(v)?))).collect::<Result<_>>()?,
            )
        }
        (_, Bson::Array(items)) => {
            Args::List(items.iter().map(Expr::parse).collect::<Result<_>>()?)
        }
        (_, other) => Args::List(vec![Expr::parse(other)?]),
    };
    (op.check)(first, &args)?;
    Ok(Expr::Op(op, args))
}

#[cfg(test)]
mod tests;
