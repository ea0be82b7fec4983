//! Reducing the rows of a range, group by group.
//!
//! [`Grouper`] receives rows in key order. Rows whose keys, cut to the group level,
//! collate equal form one group; a group's rows are reduced [`CHUNK`] at a time and the
//! partial results are re-reduced, so a JavaScript reduce sees `rereduce=true` exactly as
//! it would over CouchDB's B-tree nodes. Built-in reducers run natively
//! ([`bunko_js::Builtin`]) and are finalized once per group.

use bunko_doc::collate::Collation;
use bunko_js::{Builtin, ReduceLimit};
use serde_json::Value;

use crate::query::{Grouping, RawRow};
use crate::{Index, ViewDef, runtime};
use bunko_engine::{Error, Result};

/// Rows reduced per call before re-reducing.
const CHUNK: usize = 256;

/// The reduce function of a view.
enum Reducer<'a> {
    Builtin(Builtin),
    Js { index: &'a Index, view: &'a str },
}

/// Groups rows and reduces each group.
pub(crate) struct Grouper<'a> {
    reducer: Reducer<'a>,
    grouping: Grouping,
    collation: Collation,
    key: Option<Value>,
    rows: Vec<RawRow>,
    partials: Vec<Value>,
    /// The group's reduction overflowed (`reduce_limit`); the reason.
    overflow: Option<String>,
}

/// A finished group: its key and reduction, or the reason its reduction overflowed.
pub(crate) type Group = (Value, std::result::Result<Value, String>);

/// Keeps a `reduce_overflow_error` as the group's result; other errors fail the query.
fn overflowed(result: Result<Value>) -> Result<std::result::Result<Value, String>> {
    match result {
        Ok(value) => Ok(Ok(value)),
        Err(Error::Js(bunko_js::Error::ReduceOverflow(reason))) => Ok(Err(reason)),
        Err(err) => Err(err),
    }
}

impl<'a> Grouper<'a> {
    pub fn new(
        index: &'a Index,
        view: &'a ViewDef,
        grouping: Grouping,
        collation: Collation,
    ) -> Result<Self> {
        let source = view.reduce.as_deref().unwrap_or_default();
        let reducer = match Builtin::parse(source) {
            Some(builtin) => Reducer::Builtin(builtin),
            None => {
                let mut reducers = index.reducers.lock();
                if !reducers.contains_key(&view.name) {
                    reducers.insert(view.name.clone(), runtime().compile_reduce(source)?);
                }
                Reducer::Js { index, view: &view.name }
            }
        };
        Ok(Grouper {
            reducer,
            grouping,
            collation,
            key: None,
            rows: Vec::new(),
            partials: Vec::new(),
            overflow: None,
        })
    }

    /// Adds one row; a finished group is appended to `out` as `(key, reduction)`.
    pub fn push(&mut self, row: RawRow, out: &mut Vec<Group>) -> Result<()> {
        let key = self.group_key(&row.0);
        let same = self.key.as_ref().is_some_and(|k| self.collation.compare(k, &key).is_eq());
        if !same && self.key.is_some() {
            self.finish(out)?;
        }
        self.key = Some(key);
        if self.overflow.is_some() {
            return Ok(());
        }
        self.rows.push(row);
        if self.rows.len() >= CHUNK {
            self.reduce_chunk()?;
        }
        Ok(())
    }

    /// Reduces the buffered rows into one partial result.
    fn reduce_chunk(&mut self) -> Result<()> {
        match overflowed(self.reduce_rows())? {
            Ok(partial) => self.partials.push(partial),
            Err(reason) => self.overflow = Some(reason),
        }
        Ok(())
    }

    /// Ends the current group.
    pub fn finish(&mut self, out: &mut Vec<Group>) -> Result<()> {
        let Some(key) = self.key.take() else { return Ok(()) };
        if !self.rows.is_empty() && self.overflow.is_none() {
            self.reduce_chunk()?;
        }
        let partials = std::mem::take(&mut self.partials);
        if let Some(reason) = self.overflow.take() {
            out.push((key, Err(reason)));
            return Ok(());
        }
        let value = match partials.len() {
            1 => Ok(partials.into_iter().next().unwrap_or(Value::Null)),
            _ => self.rereduce(&partials),
        };
        let value = match (overflowed(value)?, &self.reducer) {
            (Ok(value), Reducer::Builtin(b)) => Ok(b.finalize(value)?),
            (other, _) => other,
        };
        out.push((key, value));
        Ok(())
    }

    fn group_key(&self, key: &Value) -> Value {
        match (self.grouping, key) {
            (Grouping::All, _) => Value::Null,
            (Grouping::Exact, key) => key.clone(),
            (Grouping::Level(0), _) => Value::Null,
            (Grouping::Level(n), Value::Array(items)) => {
                Value::Array(items.iter().take(n as usize).cloned().collect())
            }
            (Grouping::Level(_), key) => key.clone(),
        }
    }

    fn reduce_rows(&mut self) -> Result<Value> {
        let rows = std::mem::take(&mut self.rows);
        let values: Vec<Value> = rows.iter().map(|(_, _, v)| v.clone()).collect();
        match &self.reducer {
            Reducer::Builtin(b) => {
                let keys: Vec<Value> = rows.iter().map(|(k, _, _)| k.clone()).collect();
                Ok(b.reduce(&keys, &values, ReduceLimit::On)?)
            }
            Reducer::Js { index, view } => {
                let keys: Vec<(Value, String)> =
                    rows.into_iter().map(|(k, id, _)| (k, id)).collect();
                let reducers = index.reducers.lock();
                let f = reducers
                    .get(*view)
                    .ok_or_else(|| Error::Corrupt("reduce not compiled".into()))?;
                let reduced = f.reduce(&keys, &values)?;
                log(&reduced);
                Ok(reduced.value)
            }
        }
    }

    fn rereduce(&self, partials: &[Value]) -> Result<Value> {
        match &self.reducer {
            Reducer::Builtin(b) => Ok(b.rereduce(partials, ReduceLimit::On)?),
            Reducer::Js { index, view } => {
                let reducers = index.reducers.lock();
                let f = reducers
                    .get(*view)
                    .ok_or_else(|| Error::Corrupt("reduce not compiled".into()))?;
                let reduced = f.rereduce(partials)?;
                log(&reduced);
                Ok(reduced.value)
            }
        }
    }
}

fn log(reduced: &bunko_js::Reduced) {
    for message in &reduced.logs {
        tracing::info!(target: "bunko_js", "Query server log: {message}");
    }
    if let Some(error) = &reduced.error {
        tracing::info!(target: "bunko_js", "{error}");
    }
}
