//! Map functions: compile a design document's map functions once, then map documents
//! through all of them in one call per document (or per batch).
//!
//! The flow of one [`CompiledViews::map_batch`]:
//! 1. each document is built in the runtime's main realm as a deep-frozen JavaScript
//!    object (convert.rs; measured faster than `JSON.parse` plus a freeze in JavaScript,
//!    see `examples/map_speed.rs`): from a `serde_json::Value`, or read from JSON text
//!    straight into QuickJS with no `Value` in between;
//! 2. the host calls every map function on each document in turn (the time limit restarts
//!    per document); `emit` appends `[key, value]` to a buffer; a function that throws
//!    contributes no rows and one [`FunctionError`];
//! 3. the host writes every row with `JSON.stringify` (so `undefined` becomes `null`, as in
//!    CouchDB) and Rust parses the text into [`MapOutput`]s (a lone surrogate read as
//!    U+FFFD, `surrogates.rs`).

use std::time::Duration;

use serde_json::Value;

use crate::error::{Result, internal};
use crate::reduce::CompiledReduce;
use crate::sandbox::{Doc, Kind, Sandbox};

/// Resource limits of one compiled runtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Memory the QuickJS runtime may allocate. CouchDB's `[quickjs] memory_limit_bytes`
    /// defaults to 64 MiB.
    pub memory_bytes: usize,
    /// Wall time one document's map (or one reduction) may take. CouchDB's
    /// `os_process_timeout` defaults to 5 s.
    pub time_per_call: Duration,
    /// Native stack JavaScript may use; deeper recursion fails cleanly. Keep it well below
    /// the stack size of the threads that run maps.
    pub stack_bytes: usize,
    /// CouchDB's `[query_server_config] reduce_limit`.
    pub reduce_limit: ReduceLimit,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_bytes: 64 << 20,
            time_per_call: Duration::from_secs(5),
            stack_bytes: 512 << 10,
            reduce_limit: ReduceLimit::On,
        }
    }
}

/// What to do with a reduction that does not shrink (`reduce_limit` = true/log/false).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReduceLimit {
    /// Fail with `reduce_overflow_error` (CouchDB's default).
    #[default]
    On,
    /// Log the overflow and keep the result.
    Log,
    /// No check.
    Off,
}

/// Compiles view functions into sandboxes with the given [`Limits`]. Cheap to clone and
/// `Send + Sync`: keep one and compile per worker thread.
#[derive(Debug, Clone, Default)]
pub struct Runtime {
    limits: Limits,
}

impl Runtime {
    /// A compiler of sandboxes with these limits.
    pub fn new(limits: Limits) -> Self {
        Runtime { limits }
    }

    /// The limits every compiled set gets.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Compiles a design document's map functions, in order, into one fresh QuickJS
    /// runtime. `lib` is the design document's `views.lib` object, which `require`
    /// resolves `views/lib/...` against. The error is [`Error::Compilation`](crate::Error::Compilation) with CouchDB's
    /// reason (`"<SyntaxError...> (<source>)"`); use
    /// [`validate_design_doc`](crate::validate_design_doc) for the full upload-time text.
    pub fn compile_view_set(&self, lib: Option<&Value>, maps: &[&str]) -> Result<CompiledViews> {
        let sandbox = Sandbox::new(&self.limits)?;
        if let Some(lib) = lib {
            sandbox.set_lib(&serde_json::to_string(lib).map_err(internal)?)?;
        }
        let ids =
            maps.iter().map(|source| sandbox.compile(source, Kind::Map)).collect::<Result<_>>()?;
        Ok(CompiledViews { sandbox, ids })
    }

    /// Compiles one JavaScript reduce function (`function(keys, values, rereduce)`) into a
    /// fresh QuickJS runtime. Built-in reducers (`_sum`, ...) are [`Builtin`](crate::Builtin)s.
    pub fn compile_reduce(&self, source: &str) -> Result<CompiledReduce> {
        let sandbox = Sandbox::new(&self.limits)?;
        let id = sandbox.compile(source, Kind::Reduce)?;
        Ok(CompiledReduce::new(sandbox, id, self.limits.reduce_limit))
    }
}

/// One map function's rows for one document: `(key, value)` in emit order.
pub type Rows = Vec<(Value, Value)>;

/// A map function that threw for a document. CouchDB logs
/// `function raised exception <error> with doc._id <id>` and indexes nothing from that
/// function for the document; the other functions are unaffected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionError {
    /// Position of the function in the `maps` passed to
    /// [`Runtime::compile_view_set`].
    pub index: usize,
    /// CouchDB's log message.
    pub message: String,
}

/// The result of mapping one document.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MapOutput {
    /// Per map function, in compile order, the rows it emitted.
    pub rows: Vec<Rows>,
    /// The functions that threw for this document.
    pub errors: Vec<FunctionError>,
    /// Messages passed to `log()`, in order.
    pub logs: Vec<String>,
}

impl MapOutput {
    /// Writes the log messages and function errors to `tracing` at info level, as CouchDB
    /// logs them, tagged with the design document they came from.
    pub fn trace(&self, ddoc_id: &str) {
        for message in &self.logs {
            tracing::info!(target: "bunko_js", ddoc = ddoc_id, "Query server log: {message}");
        }
        for error in &self.errors {
            tracing::info!(target: "bunko_js", ddoc = ddoc_id, view_fn = error.index, "{}", error.message);
        }
    }
}

/// A design document's map functions compiled into their own QuickJS runtime. `Send`, so
/// it can move between threads, but it runs one call at a time: give each worker thread
/// its own (see [`Runtime`]).
pub struct CompiledViews {
    sandbox: Sandbox,
    ids: Vec<u32>,
}

impl std::fmt::Debug for CompiledViews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompiledViews").field("functions", &self.ids.len()).finish()
    }
}

impl CompiledViews {
    /// How many map functions the set has.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether the set has no map function.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Maps one document through every function. `Err` means the whole call failed
    /// (time or memory limit, a fatal error); a function throwing is not an `Err`.
    pub fn map(&self, doc: &Value) -> Result<MapOutput> {
        self.map_batch(std::slice::from_ref(doc)).map(one)
    }

    /// Like [`map`](Self::map) for a document given as JSON text (as stored).
    pub fn map_json(&self, doc: &str) -> Result<MapOutput> {
        self.map_batch_json(&[doc]).map(one)
    }

    /// Maps many documents in one call into the runtime; the time limit applies to each
    /// document. Output is in input order.
    pub fn map_batch(&self, docs: &[Value]) -> Result<Vec<MapOutput>> {
        self.run(&docs.iter().map(Doc::Value).collect::<Vec<_>>())
    }

    /// [`map_batch`](Self::map_batch) for documents given as JSON text, each a JSON object.
    pub fn map_batch_json<S: AsRef<str>>(&self, docs: &[S]) -> Result<Vec<MapOutput>> {
        self.run(&texts(docs))
    }

    /// [`map_batch_json`](Self::map_batch_json) through some of the functions only:
    /// `functions` are positions in the compiled set, and each output's `rows` (and each
    /// [`FunctionError::index`]) follow the order of `functions`. A view build uses this to
    /// map only the indexes that are behind.
    pub fn map_batch_json_select<S: AsRef<str>>(
        &self,
        functions: &[usize],
        docs: &[S],
    ) -> Result<Vec<MapOutput>> {
        let ids = functions
            .iter()
            .map(|&f| self.ids.get(f).copied())
            .collect::<Option<Vec<u32>>>()
            .ok_or_else(|| internal("no such map function"))?;
        self.run_ids(&ids, &texts(docs))
    }

    fn run(&self, docs: &[Doc]) -> Result<Vec<MapOutput>> {
        self.run_ids(&self.ids, docs)
    }

    fn run_ids(&self, ids: &[u32], docs: &[Doc]) -> Result<Vec<MapOutput>> {
        let out = self.sandbox.map_docs(ids, docs)?;
        type Raw = (Vec<Rows>, Vec<(usize, String)>, Vec<String>);
        let raw: Vec<Raw> = match serde_json::from_str(&out) {
            Ok(raw) => raw,
            Err(error) => match crate::surrogates::replace_lone(&out) {
                Some(fixed) => serde_json::from_str(&fixed).map_err(internal)?,
                None => return Err(internal(error)),
            },
        };
        if raw.len() != docs.len() {
            return Err(internal(format!(
                "mapped {} documents, expected {}",
                raw.len(),
                docs.len()
            )));
        }
        Ok(raw
            .into_iter()
            .map(|(rows, errors, logs)| MapOutput {
                rows,
                errors: errors
                    .into_iter()
                    .map(|(index, message)| FunctionError { index, message })
                    .collect(),
                logs,
            })
            .collect())
    }
}

fn texts<S: AsRef<str>>(docs: &[S]) -> Vec<Doc<'_>> {
    docs.iter().map(|d| Doc::Text(d.as_ref())).collect()
}

fn one(mut outputs: Vec<MapOutput>) -> MapOutput {
    outputs.pop().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    #[test]
    fn compiled_views_are_send() {
        fn assert_send<T: Send>() {}
        assert_send::<CompiledViews>();
        assert_send::<CompiledReduce>();
        assert_send::<Runtime>();
    }

    #[test]
    fn errors_name_couchdb_failures() {
        assert_eq!(Error::Compilation("x".into()).name(), "compilation_error");
    }
}
