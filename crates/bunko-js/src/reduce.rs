//! JavaScript reduce functions and CouchDB's `reduce_limit` rule.
//!
//! A reduce function is called as `fun(keys, values, false)` with `keys` the
//! `[key, doc_id]` pairs of the rows, and as `fun(null, values, true)` to combine earlier
//! reductions (views.js `runReduce`). A function that throws yields `null` and a logged
//! message; its output must shrink, or the result is `reduce_overflow_error`
//! ([`check_reduce_overflow`]).

use serde_json::Value;

use crate::error::{Error, Result, internal};
use crate::sandbox::Sandbox;
use crate::views::ReduceLimit;

/// CouchDB flags a JavaScript reduction only past this many bytes of output (views.js).
const JS_OUTPUT_FLOOR: usize = 4096;

/// The result of one reduce or rereduce call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Reduced {
    /// The reduction; `null` when the function threw.
    pub value: Value,
    /// CouchDB's log message when the function threw
    /// (`function raised exception <error>`).
    pub error: Option<String>,
    /// Messages passed to `log()`.
    pub logs: Vec<String>,
}

impl Reduced {
    /// Writes the log messages and the error to `tracing` at info level, as CouchDB logs
    /// them, tagged with the design document they came from.
    pub fn trace(&self, ddoc_id: &str) {
        for message in &self.logs {
            tracing::info!(target: "bunko_js", ddoc = ddoc_id, "Query server log: {message}");
        }
        if let Some(error) = &self.error {
            tracing::info!(target: "bunko_js", ddoc = ddoc_id, "{error}");
        }
    }
}

/// A JavaScript reduce function compiled into its own QuickJS runtime. `Send`; one call
/// at a time.
pub struct CompiledReduce {
    sandbox: Sandbox,
    id: u32,
    limit: ReduceLimit,
}

impl std::fmt::Debug for CompiledReduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledReduce").field("limit", &self.limit).finish()
    }
}

impl CompiledReduce {
    pub(crate) fn new(sandbox: Sandbox, id: u32, limit: ReduceLimit) -> Self {
        CompiledReduce { sandbox, id, limit }
    }

    /// Reduces map rows: `keys[i]` is `(key, doc_id)` of the row whose value is
    /// `values[i]`.
    pub fn reduce(&self, keys: &[(Value, String)], values: &[Value]) -> Result<Reduced> {
        if keys.len() != values.len() {
            return Err(internal(format!("{} keys for {} values", keys.len(), values.len())));
        }
        let rows: Vec<((&Value, &str), &Value)> =
            keys.iter().zip(values).map(|((key, id), value)| ((key, id.as_str()), value)).collect();
        let input = serde_json::to_string(&rows).map_err(internal)?;
        self.call(&input, false)
    }

    /// Combines earlier reductions.
    pub fn rereduce(&self, values: &[Value]) -> Result<Reduced> {
        let input = serde_json::to_string(values).map_err(internal)?;
        self.call(&input, true)
    }

    fn call(&self, input: &str, rereduce: bool) -> Result<Reduced> {
        let out = self.sandbox.reduce(self.id, input, rereduce)?;
        let ([value], error, logs): ([Value; 1], Option<String>, Vec<String>) =
            serde_json::from_str(&out).map_err(internal)?;
        let output_len = serde_json::to_string(&value).map_err(internal)?.len();
        overflow(input.len(), output_len, JS_OUTPUT_FLOOR, self.limit)?;
        Ok(Reduced { value, error, logs })
    }
}

/// CouchDB's `reduce_limit` rule for JavaScript reductions: an output longer than 4096
/// bytes of JSON that is more than half the size of its input is refused with
/// "Reduce output must shrink more rapidly: input size: N output size: M"
/// (`reduce_overflow_error`). `input_len` is the byte length of the input rows as JSON.
pub fn check_reduce_overflow(input_len: usize, output: &Value) -> Result<()> {
    let output_len = serde_json::to_string(output).map_err(internal)?.len();
    overflow(input_len, output_len, JS_OUTPUT_FLOOR, ReduceLimit::On)
}

/// The rule itself, with its floor (4096 for JavaScript, 4906 for `_sum` in
/// couch_query_servers.erl) and the configured limit.
pub(crate) fn overflow(
    input_len: usize,
    output_len: usize,
    floor: usize,
    limit: ReduceLimit,
) -> Result<()> {
    if limit == ReduceLimit::Off || output_len <= floor || output_len.saturating_mul(2) <= input_len
    {
        return Ok(());
    }
    let message = overflow_message(input_len, output_len);
    if limit == ReduceLimit::Log {
        tracing::error!(target: "bunko_js", "reduce_overflow_error: {message}");
        return Ok(());
    }
    Err(Error::ReduceOverflow(message))
}

pub(crate) fn overflow_message(input_len: usize, output_len: usize) -> String {
    format!(
        "Reduce output must shrink more rapidly: input size: {input_len} output size: {output_len}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_needs_both_a_large_output_and_too_little_shrinking() -> Result<()> {
        let big = Value::String("x".repeat(5000));
        check_reduce_overflow(100_000, &big)?;
        check_reduce_overflow(10, &Value::String("x".repeat(4000)))?;
        let err = check_reduce_overflow(9000, &big).err();
        assert_eq!(
            err,
            Some(Error::ReduceOverflow(
                "Reduce output must shrink more rapidly: input size: 9000 output size: 5002".into()
            ))
        );
        overflow(10, 5000, JS_OUTPUT_FLOOR, ReduceLimit::Log)?;
        overflow(10, 5000, JS_OUTPUT_FLOOR, ReduceLimit::Off)?;
        Ok(())
    }
}
