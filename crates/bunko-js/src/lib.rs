//! Bunko's sandboxed JavaScript runtime for CouchDB design-document views, and CouchDB's
//! built-in reducers.
//!
//! This crate holds the only C code in Bunko (QuickJS, built from source by `rquickjs`) and
//! depends on no other Bunko crate; `bunko-engine` uses it to build and query views. The
//! behaviour reproduced is CouchDB 3.4's JavaScript query server (`share/server/*.js`)
//! on QuickJS (`src/couch_quickjs`) and its Erlang side (`couch_query_servers.erl`,
//! `couch_mrview:validate/2`).
//!
//! How a view build uses it:
//! 1. On upload, [`validate_design_doc`] compiles every map and reduce source and rejects
//!    the document with CouchDB's `compilation_error` reason if one does not compile.
//! 2. Each worker thread compiles the design document once:
//!    [`Runtime::compile_view_set`] gives a [`CompiledViews`] with its own QuickJS runtime
//!    (memory and time limits from [`Limits`]); every map function gets its own realm
//!    whose globals are CouchDB's: `emit`, `log`, `sum`, `isArray`, `toJSON`, `JSON`,
//!    `require` (CommonJS modules from `views.lib`).
//! 3. [`CompiledViews::map_batch`] (or [`map`](CompiledViews::map)) runs documents through
//!    all map functions. Per document and function it returns the emitted `(key, value)`
//!    rows; a function that throws skips the document ([`FunctionError`]), as CouchDB logs
//!    and skips it. Exceeding a limit fails the call with [`Error::Timeout`] or
//!    [`Error::OutOfMemory`], never a hang or panic.
//! 4. Reductions: [`Builtin`] (`_count`, `_sum`, `_stats`, `_approx_count_distinct`) run
//!    natively; JavaScript reduce functions run in a [`CompiledReduce`]
//!    ([`Runtime::compile_reduce`]). Both have `reduce` and `rereduce`;
//!    [`check_reduce_overflow`] is CouchDB's `reduce_limit` rule.
//!
//! 5. Procedures and triggers ([`Runtime::compile_scripts`], script.rs) run with a `db`
//!    object through which they read and write the database inside the caller's
//!    transaction ([`Host`]).
//!
//! 6. Show and list functions ([`Runtime::compile_render`], render.rs) build an HTTP
//!    response with CouchDB's `start`, `send`, `getRow`, `provides` and `registerType`.
//!
//! Numbers cross into JavaScript as doubles, exactly as in CouchDB: integers beyond 2^53
//! lose precision in what map functions see and emit. Built-in reducers keep integers exact.
//!
//! Build: `rquickjs` 0.14 compiles quickjs-ng 0.16 from source with the system C compiler
//! and ships pre-generated bindings for common targets (no bindgen or libclang); its
//! `parallel` feature makes runtimes `Send`.
//!
//! Feature `quickjs` (on by default) builds QuickJS in; without it nothing compiles
//! (`no_sandbox.rs`): every function is refused with a `compilation_error`, and only the
//! built-in reducers work. `bunko-engine`'s `js` feature turns it on.
//!
//! `unsafe`: one call, `JS_SetMemoryLimit` from inside the runtime's own interrupt handler
//! (`sandbox.rs`, `lift_memory_limit`), without which a function that swallows
//! out-of-memory errors in a loop could never be interrupted. Its safety argument is there.

mod builtin;
mod calls;
#[cfg(feature = "quickjs")]
mod convert;
mod error;
mod reduce;
mod render;
#[cfg(feature = "quickjs")]
mod sandbox;
#[cfg(not(feature = "quickjs"))]
#[path = "no_sandbox.rs"]
mod sandbox;
mod script;
#[cfg(feature = "quickjs")]
mod source;
mod surrogates;
mod update;
mod validate;
mod views;

pub use builtin::{Builtin, SUM_ERROR};
pub use error::{Error, Result};
pub use reduce::{CompiledReduce, Reduced, check_reduce_overflow};
pub use render::{CompiledRender, Rendered, Rewritten};
pub use script::{CompiledScripts, Host, HostError, Outcome};
pub use update::{CompiledValidators, Update, Verdict};
pub use validate::validate_design_doc;
pub use views::{CompiledViews, FunctionError, Limits, MapOutput, ReduceLimit, Rows, Runtime};
