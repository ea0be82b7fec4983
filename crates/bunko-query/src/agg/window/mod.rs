//! `$setWindowFields`: each document gets fields computed over a window of the documents
//! of its partition.
//!
//! 1. [`SetWindowFields::parse`] checks the stage as MongoDB 8's parser does (its IDL
//!    errors 40414/40415, `TypeMismatch` for a wrong type, 6307900 for conflicting output
//!    paths) and each output field's function and window (`func`, `bounds`).
//! 2. [`SetWindowFields::open`] sorts its input by partition value, then `sortBy`, as the
//!    `$sort` MongoDB puts before the stage does (within the memory budget, spilling past
//!    it: `spill::sort_by`); without `partitionBy` and `sortBy` the input order is kept.
//!    A missing partition value is null; an array is MongoDB's `TypeMismatch`.
//! 3. The sorted stream is read one partition at a time (equal partition values, in
//!    MongoDB's comparison). A partition is blocking: it is held whole, within
//!    [`Env::memory_limit`] (past it MongoDB's 5414201, with or without `allowDiskUse`:
//!    partitions are not spilled), each output computed over it (`compute`), and its
//!    documents then passed on, so documents come out grouped by partition in partition
//!    order, each sorted by `sortBy`.
//!
//!
//! `$fill` (`fill`) is MongoDB's rewrite into this stage and an `$addFields`.
//!
//! [`Env::memory_limit`]: super::Env::memory_limit

pub(super) mod bounds;
mod compute;
mod fill;
mod func;

use std::sync::Arc;

use bson::{Bson, Document};

use self::bounds::Window;
use self::compute::Partition;
pub use self::fill::Fill;
use self::func::Func;
use super::stream::map_docs;
use super::{Docs, EnvRef, spill, stages};
use crate::expr::value::{compare, doc_size, get_path, or_null, type_name};
use crate::expr::{Expr, ExprError, MISSING, Result, Vars};

/// One `output` field: its path, function and window.
#[derive(Clone, Debug, PartialEq)]
struct Output {
    path: Vec<String>,
    func: Func,
    window: Window,
}

/// A parsed `$setWindowFields`.
#[derive(Clone, Debug, PartialEq)]
pub struct SetWindowFields {
    partition: Option<Expr>,
    sort: Option<Vec<(Vec<String>, bool)>>,
    outputs: Vec<Output>,
}

const STAGE: &str = "$setWindowFields";

fn wrong_type(field: &str, v: &Bson) -> ExprError {
    ExprError::type_mismatch(format!(
        "BSON field '{STAGE}.{field}' is the wrong type '{}', expected type 'object'",
        type_name(v)
    ))
}

impl SetWindowFields {
    pub fn parse(arg: &Bson) -> Result<SetWindowFields> {
        let Bson::Document(spec) = arg else {
            return Err(ExprError::failed_to_parse(format!(
                "the {STAGE} stage specification must be an object, found {}",
                type_name(arg)
            )));
        };
        let (mut partition, mut sort, mut output) = (None, None, None);
        for (k, v) in spec {
            match (k.as_str(), v) {
                ("partitionBy", v) => partition = Some(v),
                ("sortBy", Bson::Document(d)) => sort = Some(d),
                ("output", Bson::Document(d)) => output = Some(d),
                ("sortBy" | "output", v) => return Err(wrong_type(k, v)),
                _ => {
                    return Err(ExprError::location(
                        40415,
                        format!("BSON field '{STAGE}.{k}' is an unknown field."),
                    ));
                }
            }
        }
        let Some(output) = output else {
            return Err(ExprError::location(
                40414,
                format!("BSON field '{STAGE}.output' is missing but a required field"),
            ));
        };
        let partition = partition.map(parse_partition).transpose()?.flatten();
        let sort = match sort {
            Some(d) if d.is_empty() => Some(Vec::new()),
            Some(d) => Some(stages::sort_spec(&Bson::Document(d.clone()))?),
            None => None,
        };
        let outputs = parse_outputs(output, sort.as_deref())?;
        Ok(SetWindowFields { partition, sort, outputs })
    }

    /// The documents of `input` with the output fields set, by partition, in `sortBy` order.
    pub fn open<'a>(&self, input: Docs<'a>, env: &EnvRef<'a>, vars: &Vars) -> Result<Docs<'a>> {
        let (partition, v) = (self.partition.clone(), vars.clone());
        let keyed = map_docs(input, move |d| {
            let p = match &partition {
                Some(e) => or_null(e.eval(&mut v.with_doc(&d))?),
                None => Bson::Null,
            };
            if matches!(p, Bson::Array(_)) {
                return Err(ExprError::type_mismatch(
                    "Cannot 'partitionBy' an expression of type array",
                ));
            }
            Ok(bson::doc! {"p": p, "d": d})
        });
        let sorted = if self.partition.is_none() && self.sort.is_none() {
            keyed
        } else {
            let sort = self.sort.clone().unwrap_or_default();
            let order: spill::Order = Arc::new(move |a, b| {
                compare(record_key(a), record_key(b))
                    .then_with(|| stages::compare_docs(&sort, record_doc(a), record_doc(b)))
            });
            spill::sort_by(keyed, order, env.as_ref(), "$sort")?.1
        };
        let mut parts = Partitions {
            stage: self.clone(),
            input: sorted,
            next: None,
            vars: vars.clone(),
            limit: env.memory_limit(),
        };
        let mut pending = Vec::new().into_iter();
        let mut failed = false;
        Ok(Box::new(std::iter::from_fn(move || {
            loop {
                if let Some(d) = pending.next() {
                    return Some(Ok(d));
                }
                if failed {
                    return None;
                }
                match parts.next_partition() {
                    Ok(Some(docs)) => pending = docs.into_iter(),
                    Ok(None) => return None,
                    Err(e) => {
                        failed = true;
                        return Some(Err(e));
                    }
                }
            }
        })))
    }
}

/// `partitionBy`, or `None` for a constant (one partition); a constant array is refused.
fn parse_partition(v: &Bson) -> Result<Option<Expr>> {
    match Expr::parse(v)? {
        // A constant array (MongoDB folds an array of constants into one); an array of
        // other expressions fails when evaluated.
        Expr::Array(items) if !items.iter().all(|i| matches!(i, Expr::Literal(_))) => {
            Ok(Some(Expr::Array(items)))
        }
        Expr::Literal(Bson::Array(_)) | Expr::Array(_) => Err(ExprError::type_mismatch(
            "An expression used to partition cannot evaluate to value of type array",
        )),
        Expr::Literal(_) => Ok(None),
        e => Ok(Some(e)),
    }
}

fn parse_outputs(output: &Document, sort: Option<&[(Vec<String>, bool)]>) -> Result<Vec<Output>> {
    let mut outputs: Vec<Output> = Vec::new();
    for (field, v) in output {
        let path: Vec<String> = field.split('.').map(str::to_string).collect();
        // Output fields are field paths, checked as MongoDB's `FieldPath` checks them.
        if path.iter().any(String::is_empty) {
            return Err(ExprError::location(
                15998,
                "FieldPath field names may not be empty strings.",
            ));
        }
        if path.iter().any(|p| p.starts_with('$')) {
            return Err(ExprError::location(
                16410,
                "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ));
        }
        let conflicts = outputs.iter().any(|o| {
            let common = o.path.len().min(path.len());
            o.path[..common] == path[..common]
        });
        if conflicts {
            return Err(ExprError::location(
                6307900,
                format!("{STAGE} 'output' specification contains two conflicting paths"),
            ));
        }
        let (func, window) = func::parse(field, v, sort)?;
        outputs.push(Output { path, func, window });
    }
    Ok(outputs)
}

/// The partition value of a sort record.
fn record_key(rec: &Document) -> &Bson {
    rec.get("p").unwrap_or(&Bson::Null)
}

/// The document of a sort record.
fn record_doc(rec: &Document) -> &Document {
    static EMPTY: std::sync::OnceLock<Document> = std::sync::OnceLock::new();
    match rec.get("d") {
        Some(Bson::Document(d)) => d,
        _ => EMPTY.get_or_init(Document::new),
    }
}

/// The sorted records read one partition at a time.
struct Partitions<'a> {
    stage: SetWindowFields,
    input: Docs<'a>,
    /// The first record of the next partition, read ahead.
    next: Option<Document>,
    vars: Vars,
    limit: usize,
}

impl Partitions<'_> {
    /// The next partition's documents with their output fields, or `None` at the end.
    fn next_partition(&mut self) -> Result<Option<Vec<Document>>> {
        let first = match self.next.take() {
            Some(rec) => rec,
            None => match self.input.next().transpose()? {
                Some(rec) => rec,
                None => return Ok(None),
            },
        };
        let key = record_key(&first).clone();
        let (mut docs, mut used) = (Vec::new(), 0usize);
        let mut rec = Some(first);
        while let Some(r) = rec.take() {
            let d = take_doc(r);
            used += doc_size(&d);
            if used > self.limit {
                return Err(ExprError::location(
                    5414201,
                    format!(
                        "Exceeded memory limit in DocumentSourceSetWindowFields, used {used} bytes but max allowed is {}",
                        self.limit
                    ),
                ));
            }
            docs.push(d);
            match self.input.next().transpose()? {
                Some(r) if compare(record_key(&r), &key).is_eq() => rec = Some(r),
                Some(r) => self.next = Some(r),
                None => {}
            }
        }
        self.compute(docs).map(Some)
    }

    /// One partition's documents with every output field set.
    fn compute(&self, docs: Vec<Document>) -> Result<Vec<Document>> {
        let first_path = self.stage.sort.as_ref().and_then(|s| s.first()).map(|(p, _)| p);
        let vars: Vec<Vars> = docs.into_iter().map(|d| self.vars.with_owned(d)).collect();
        let keys = vars
            .iter()
            .map(|v| match first_path {
                Some(path) => get_path(&v.root, path),
                None => MISSING,
            })
            .collect();
        let mut part = Partition { vars, keys };
        let mut values = Vec::with_capacity(self.stage.outputs.len());
        for o in &self.stage.outputs {
            values.push(compute::compute(&o.func, &o.window, &mut part)?);
        }
        let mut out: Vec<Document> = part
            .vars
            .into_iter()
            .map(|v| match v.root {
                Bson::Document(d) => d,
                _ => Document::new(),
            })
            .collect();
        for (o, column) in self.stage.outputs.iter().zip(values) {
            for (d, value) in out.iter_mut().zip(column) {
                // A missing value (`$shift`, `$first` or `$last` of a missing field) leaves
                // the field out, as MongoDB's document setter does.
                match value {
                    MISSING => stages::remove(d, &o.path),
                    value => stages::set(d, &o.path, value),
                }
            }
        }
        Ok(out)
    }
}

/// The document of a sort record, taken out of it.
fn take_doc(mut rec: Document) -> Document {
    match rec.remove("d") {
        Some(Bson::Document(d)) => d,
        _ => Document::new(),
    }
}

#[cfg(test)]
mod tests;
