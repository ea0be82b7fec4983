//! CouchDB's built-in reducers, run natively: `_count`, `_sum`, `_stats` and
//! `_approx_count_distinct` (couch_query_servers.erl `builtin_reduce`, `finalize`).
//!
//! Each has three entry points: [`Builtin::reduce`] over map rows, [`Builtin::rereduce`]
//! over earlier reductions (any chunking gives the same result), and
//! [`Builtin::finalize`], applied once to the reduction a query returns. Only
//! `_approx_count_distinct` changes there: its intermediate value is a sketch, its final
//! value the estimate.

mod hll;
mod number;
mod stats;
mod sum;

use serde_json::Value;

use crate::error::{Error, Result, internal};
use crate::reduce::overflow;
use crate::views::ReduceLimit;

pub use sum::SUM_ERROR;

/// `_sum` results are checked for overflow only past this size (CouchDB's literal 4906 in
/// `check_sum_overflow`).
const SUM_OUTPUT_FLOOR: usize = 4906;

/// A built-in reducer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `_count`: the number of rows.
    Count,
    /// `_sum`: numbers, arrays of numbers (element-wise) and objects (key-wise, nested).
    Sum,
    /// `_stats`: `{sum, count, min, max, sumsqr}` of numbers or arrays of numbers.
    Stats,
    /// `_approx_count_distinct`: estimated number of distinct keys.
    ApproxCountDistinct,
}

impl Builtin {
    /// The reducer a `reduce` source names. CouchDB matches by prefix (`<<"_sum", _/binary>>`),
    /// so `"_sum"` and `"_sum_of_sales"` are both `_sum`. `None` for JavaScript sources and
    /// for unsupported `_names` (which design-document validation rejects).
    pub fn parse(source: &str) -> Option<Builtin> {
        [
            ("_sum", Builtin::Sum),
            ("_count", Builtin::Count),
            ("_stats", Builtin::Stats),
            ("_approx_count_distinct", Builtin::ApproxCountDistinct),
        ]
        .into_iter()
        .find_map(|(prefix, builtin)| source.starts_with(prefix).then_some(builtin))
    }

    /// CouchDB's name for it.
    pub fn name(self) -> &'static str {
        match self {
            Builtin::Count => "_count",
            Builtin::Sum => "_sum",
            Builtin::Stats => "_stats",
            Builtin::ApproxCountDistinct => "_approx_count_distinct",
        }
    }

    /// Reduces map rows: `keys[i]` is the key of the row whose value is `values[i]` (only
    /// `_approx_count_distinct` reads keys). `limit` is `reduce_limit`, which CouchDB
    /// applies to `_sum`. Errors are [`Error::InvalidValue`] (e.g. `_stats` over strings)
    /// and [`Error::ReduceOverflow`]; `_sum` over bad values instead returns CouchDB's
    /// `builtin_reduce_error` object as the reduction.
    pub fn reduce(self, keys: &[Value], values: &[Value], limit: ReduceLimit) -> Result<Value> {
        match self {
            Builtin::Count => Ok(Value::from(values.len())),
            Builtin::Sum => checked_sum(keys, values, limit),
            Builtin::Stats => stats::stats(values),
            Builtin::ApproxCountDistinct => {
                let mut sketch = hll::Sketch::new();
                for key in keys {
                    sketch.insert(key)?;
                }
                Ok(sketch.to_value())
            }
        }
    }

    /// Combines reductions this reducer produced.
    pub fn rereduce(self, values: &[Value], limit: ReduceLimit) -> Result<Value> {
        match self {
            Builtin::Count => sum::sum_rows(values),
            Builtin::Sum => checked_sum(&[], values, limit),
            Builtin::Stats => stats::stats(values),
            Builtin::ApproxCountDistinct => {
                let mut sketch = hll::Sketch::new();
                for value in values {
                    sketch.merge(&hll::Sketch::from_value(value)?);
                }
                Ok(sketch.to_value())
            }
        }
    }

    /// The value a query shows for a reduction: the rounded estimate for
    /// `_approx_count_distinct`, the reduction itself otherwise.
    pub fn finalize(self, value: Value) -> Result<Value> {
        match self {
            Builtin::ApproxCountDistinct => {
                let estimate = hll::Sketch::from_value(&value)?.estimate().round();
                Ok(Value::from(estimate as u64))
            }
            Builtin::Count | Builtin::Sum | Builtin::Stats => Ok(value),
        }
    }
}

/// `_sum` with `check_sum_overflow`: CouchDB compares Erlang external term sizes of the
/// rows and of the sum; the JSON sizes of keys plus values and of the sum stand in for
/// them here. Over the limit the reduction is replaced by a `builtin_reduce_error` object.
fn checked_sum(keys: &[Value], values: &[Value], limit: ReduceLimit) -> Result<Value> {
    let total = sum::sum_rows(values)?;
    if limit == ReduceLimit::Off || !matches!(total, Value::Array(_) | Value::Object(_)) {
        return Ok(total);
    }
    let output_len = serde_json::to_string(&total).map_err(internal)?.len();
    if output_len <= SUM_OUTPUT_FLOOR {
        return Ok(total);
    }
    let json_len = |v: &[Value]| serde_json::to_string(v).map(|t| t.len()).map_err(internal);
    let input_len = json_len(keys)? + json_len(values)?;
    match overflow(input_len, output_len, SUM_OUTPUT_FLOOR, limit) {
        Ok(()) => Ok(total),
        Err(Error::ReduceOverflow(message)) => {
            tracing::error!(target: "bunko_js", "{message}");
            let mut error = serde_json::Map::new();
            error.insert("error".into(), "builtin_reduce_error".into());
            error.insert("reason".into(), message.into());
            Ok(Value::Object(error))
        }
        Err(other) => Err(other),
    }
}
