//! One QuickJS runtime with CouchDB's view environment: the isolation unit behind
//! [`CompiledViews`](crate::CompiledViews) and [`CompiledReduce`](crate::CompiledReduce).
//!
//! Layout of a runtime:
//! ```text
//!   QuickJS runtime   memory limit, stack limit, interrupt handler (the deadline)
//!   ├── main realm    prelude.js: emit, log, sum, require, map/reduce drivers; documents
//!   │                 are built here. Its global `__bunko_host` is what Rust calls.
//!   ├── realm 1       first user function: its own globals (emit, sum, log, toJSON,
//!   ├── realm 2       isArray, require), as CouchDB's `evalcx` gives every function a
//!   └── ...           fresh context (src/couch_quickjs/c_src/couchjs.c)
//! ```
//! A realm is compiled in four short steps because rquickjs lets one thread use only one
//! context at a time: take the new realm's global object, let the host install the
//! environment on it, evaluate the source in the new realm, and register the resulting
//! function with the host, which returns its id.
//!
//! Documents are built in the main realm, deep-frozen, by [`to_frozen`].
//!
//! Limits: every entry point arms the deadline for [`Limits::time_per_call`]; the
//! interrupt handler QuickJS polls while running aborts the call with an uncatchable
//! exception once it has passed (lifting the memory limit for that moment, see
//! [`lift_memory_limit`]). Map drivers call `tick` per document, so each document gets the
//! full time. The memory limit is QuickJS's own; running out raises an error that user code
//! may catch, so a runaway function ends in `OutOfMemory` or, if it keeps catching, in
//! `Timeout`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use rquickjs::context::intrinsic::{self, Date, Eval, MapSet, RegExp, RegExpCompiler};
use rquickjs::{
    Array, CatchResultExt, CaughtError, Coerced, Context, Ctx, FromJs, Function, Object,
    Persistent, Value,
};

use crate::convert::{Freezer, json_to_frozen, to_frozen};
use crate::error::{Error, Result, internal};
use crate::source;
use crate::views::Limits;

/// The intrinsics CouchDB's `couchjs` gives each sandbox (`add_cx_methods`).
type Intrinsics = (Date, Eval, intrinsic::Json, RegExpCompiler, RegExp, MapSet);

pub(crate) use crate::calls::{Answer, Doc, Kind, Op};

/// Where prelude.js leaves the host functions.
const HOST: &str = "__bunko_host";

/// Memory QuickJS may use past the limit once a call is interrupted, enough to allocate
/// the interrupt's error.
const INTERRUPT_HEADROOM: usize = 1 << 20;

/// The time limit shared with the interrupt handler: nanoseconds since `epoch` after
/// which calls are interrupted, 0 when no call is running.
struct Deadline {
    epoch: Instant,
    at_nanos: AtomicU64,
    fired: AtomicBool,
    per_call_nanos: u64,
    /// The runtime polling this deadline (a `*mut JSRuntime` as an integer) and the memory
    /// limit to lift it to when interrupting; see [`lift_memory_limit`].
    runtime: usize,
    lifted_limit: usize,
    lifted: AtomicBool,
}

impl Deadline {
    fn arm(&self) {
        let now = self.epoch.elapsed().as_nanos() as u64;
        self.at_nanos.store(now.saturating_add(self.per_call_nanos).max(1), Ordering::Relaxed);
    }

    fn disarm(&self) {
        self.at_nanos.store(0, Ordering::Relaxed);
    }

    /// Called by QuickJS every few thousand instructions: whether to interrupt.
    fn passed(&self) -> bool {
        let at = self.at_nanos.load(Ordering::Relaxed);
        if at != 0 && self.epoch.elapsed().as_nanos() as u64 > at {
            self.fired.store(true, Ordering::Relaxed);
            self.lifted.store(true, Ordering::Relaxed);
            lift_memory_limit(self.runtime, self.lifted_limit);
            return true;
        }
        false
    }
}

/// Raises the memory limit of the runtime whose interrupt handler is running.
///
/// An interrupt throws a new, uncatchable `InternalError`. When user code has used up the
/// memory limit and swallows the out-of-memory errors in a loop
/// (`for (;;) { try { a.push(new Array(1000)) } catch (e) {} }`), QuickJS cannot allocate
/// that error, throws a catchable `null` instead, and the loop runs forever. Lifting the
/// limit just before the interrupt lets the error be allocated; no user code runs between
/// the two, and [`Sandbox::enter`] restores the limit when the call returns.
/// rquickjs offers no safe way to do this here: its `set_memory_limit` takes the runtime
/// lock that the running call holds.
#[expect(unsafe_code, reason = "JS_SetMemoryLimit from inside the runtime's own interrupt handler")]
fn lift_memory_limit(runtime: usize, limit: usize) {
    // Safety: `runtime` is the JSRuntime that owns the interrupt handler calling this (set
    // in `Sandbox::new` from the runtime the handler is installed on; the handler is
    // dropped with it), so it is live. QuickJS calls the handler on the thread executing
    // JavaScript in that runtime, while that thread holds the runtime, so nothing else
    // touches it concurrently. JS_SetMemoryLimit only stores `malloc_limit`.
    unsafe {
        rquickjs::qjs::JS_SetMemoryLimit(runtime as *mut rquickjs::qjs::JSRuntime, limit as _)
    }
}

/// `doc` as a frozen JavaScript value. Text is read straight into QuickJS; text naming a
/// member twice is parsed first (the last one wins, as in `serde_json::Value`).
fn build_doc<'js>(
    doc: Doc,
    ctx: &Ctx<'js>,
    freezer: &Freezer<'js>,
) -> rquickjs::Result<Value<'js>> {
    match doc {
        Doc::Value(value) => to_frozen(ctx, freezer, value),
        Doc::Text(text) => match json_to_frozen(ctx, freezer, text) {
            Ok(value) => Ok(value),
            Err(_) => {
                // Clears what a refused member left pending; a real failure (memory)
                // happens again below.
                drop(ctx.catch());
                let value: serde_json::Value = serde_json::from_str(text).map_err(|e| {
                    rquickjs::Error::new_from_js_message("text", "document", e.to_string())
                })?;
                to_frozen(ctx, freezer, &value)
            }
        },
    }
}

/// A QuickJS runtime set up as a CouchDB query-server sandbox.
pub(crate) struct Sandbox {
    main: Context,
    runtime: rquickjs::Runtime,
    deadline: Arc<Deadline>,
    limits: Limits,
}

impl Sandbox {
    pub(crate) fn new(limits: &Limits) -> Result<Self> {
        let runtime = rquickjs::Runtime::new().map_err(internal)?;
        runtime.set_memory_limit(limits.memory_bytes);
        runtime.set_max_stack_size(limits.stack_bytes);
        let main = Context::custom::<Intrinsics>(&runtime).map_err(internal)?;
        let deadline = Arc::new(Deadline {
            epoch: Instant::now(),
            at_nanos: AtomicU64::new(0),
            fired: AtomicBool::new(false),
            per_call_nanos: u64::try_from(limits.time_per_call.as_nanos()).unwrap_or(u64::MAX),
            runtime: main.get_runtime_ptr() as usize,
            lifted_limit: limits.memory_bytes.saturating_add(INTERRUPT_HEADROOM),
            lifted: AtomicBool::new(false),
        });
        let polled = Arc::clone(&deadline);
        runtime.set_interrupt_handler(Some(Box::new(move || polled.passed())));
        main.with(|ctx| {
            ctx.eval::<(), _>(include_str!("prelude.js"))
                .catch(&ctx)
                .map_err(|e| internal(format!("prelude: {e}")))
        })?;
        Ok(Sandbox { main, runtime, deadline, limits: limits.clone() })
    }

    /// One of the prelude's host functions.
    fn host<'js>(ctx: &Ctx<'js>, name: &str) -> Result<Function<'js>> {
        let host: Object = ctx.globals().get(HOST).map_err(internal)?;
        host.get(name).map_err(internal)
    }

    /// The `tick` callback for a call over `documents` documents: each call restarts the
    /// time limit, at most `documents` times.
    fn tick<'js>(&self, ctx: &Ctx<'js>, documents: usize) -> Result<Function<'js>> {
        let deadline = Arc::clone(&self.deadline);
        let budget = AtomicUsize::new(documents);
        Function::new(ctx.clone(), move || {
            let left =
                budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
            if left.is_ok() {
                deadline.arm();
            }
        })
        .map_err(internal)
    }

    /// Runs `f` in `context`, then restores the memory limit if an interrupt lifted it.
    fn enter<R>(&self, context: &Context, f: impl for<'js> FnOnce(Ctx<'js>) -> R) -> R {
        let result = context.with(f);
        if self.deadline.lifted.swap(false, Ordering::Relaxed) {
            self.runtime.set_memory_limit(self.limits.memory_bytes);
        }
        result
    }

    /// Makes `views.lib` (a JSON object) what map functions compiled later `require` from.
    pub(crate) fn set_lib(&self, lib_json: &str) -> Result<()> {
        self.enter(&self.main, |ctx| {
            let set_lib = Self::host(&ctx, "setLib")?;
            self.guarded(&ctx, || set_lib.call::<_, ()>((lib_json,)))
        })
    }

    /// Makes the design document `ddoc_json` what design functions compiled later
    /// `require` from (CouchDB's CommonJS modules: `require('lib/util')` is `ddoc.lib.util`).
    pub(crate) fn set_root(&self, ddoc_json: &str) -> Result<()> {
        self.enter(&self.main, |ctx| {
            let set_root = Self::host(&ctx, "setRoot")?;
            self.guarded(&ctx, || set_root.call::<_, ()>((ddoc_json,)))
        })
    }

    /// Compiles one function in a realm of its own and returns its id. The error is
    /// CouchDB's compilation reason: `<error> (<source>)` or
    /// `Expression does not eval to a function. (<source>)`.
    pub(crate) fn compile(&self, source: &str, kind: Kind) -> Result<u32> {
        let realm = Context::custom::<Intrinsics>(&self.runtime).map_err(internal)?;
        let global = self.enter(&realm, |ctx| Persistent::save(&ctx, ctx.globals()));
        self.enter(&self.main, |ctx| {
            let adopt = Self::host(&ctx, "adopt")?;
            let global = global.restore(&ctx).map_err(internal)?;
            self.guarded(&ctx, || adopt.call::<_, ()>((global, kind != Kind::Reduce)))
        })?;
        let function = self.enter(&realm, |ctx| -> Result<Persistent<Function<'static>>> {
            let mut options = rquickjs::context::EvalOptions::default();
            options.global = true;
            options.strict = false;
            let program = source::program(source);
            let value: Value = self
                .guarded(&ctx, || ctx.eval_with_options(program.as_bytes(), options))
                .map_err(|e| match e {
                    Error::Internal(message) => Error::Compilation(format!("{message} ({source})")),
                    other => other,
                })?;
            match value.into_function() {
                Some(f) => Ok(Persistent::save(&ctx, f)),
                None => Err(Error::Compilation(format!(
                    "Expression does not eval to a function. ({source})"
                ))),
            }
        })?;
        self.enter(&self.main, |ctx| {
            let register = Self::host(&ctx, "register")?;
            let take_logs = Self::host(&ctx, "takeLogs")?;
            let function = function.restore(&ctx).map_err(internal)?;
            // Messages logged by top-level code while compiling are not kept.
            let _: String = take_logs.call(()).map_err(internal)?;
            register.call::<_, u32>((function,)).map_err(internal)
        })
    }

    /// Runs the map driver over `docs` and returns its JSON text: per document
    /// `[[rows per function], [[index, message]...], [logs]]`.
    pub(crate) fn map_docs(&self, ids: &[u32], docs: &[Doc]) -> Result<String> {
        self.enter(&self.main, |ctx| {
            let host: Object = ctx.globals().get(HOST).map_err(internal)?;
            let map_docs: Function = host.get("mapDocs").map_err(internal)?;
            let freezer = Freezer {
                freeze: host.get("freeze").map_err(internal)?,
                prevent_extensions: host.get("preventExtensions").map_err(internal)?,
            };
            let tick = self.tick(&ctx, docs.len())?;
            let ids = ids.to_vec();
            self.guarded(&ctx, || {
                let array = Array::new(ctx.clone())?;
                for (i, doc) in docs.iter().enumerate() {
                    array.set(i, build_doc(*doc, &ctx, &freezer)?)?;
                }
                map_docs.call::<_, String>((ids, array, tick))
            })
        })
    }

    /// Runs one reduce function; `input_json` is `[[[key, id], value], ...]` or, for a
    /// rereduce, `[value, ...]`. Returns `[[result], error or null, [logs]]` as JSON text.
    pub(crate) fn reduce(&self, id: u32, input_json: &str, rereduce: bool) -> Result<String> {
        self.enter(&self.main, |ctx| {
            let reduce = Self::host(&ctx, "reduce")?;
            let tick = self.tick(&ctx, 1)?;
            self.guarded(&ctx, || reduce.call::<_, String>((id, input_json, rereduce, tick)))
        })
    }

    /// Runs one `validate_doc_update` function; `args_json` is
    /// `[newDoc, oldDoc, userCtx, secObj, ddoc]`. Returns `1` or what the function threw, as
    /// JSON text.
    pub(crate) fn validate(&self, id: u32, args_json: &str) -> Result<String> {
        self.enter(&self.main, |ctx| {
            let validate = Self::host(&ctx, "validate")?;
            let tick = self.tick(&ctx, 1)?;
            self.guarded(&ctx, || validate.call::<_, String>((id, args_json, tick)))
        })
    }

    /// Gives the runtime its `db` object (procedures and triggers): `get`, `find` and `put`
    /// call `answer` with the operation and the argument's JSON text, and throw the
    /// `{error, reason}` it returns.
    pub(crate) fn install_db(&self, answer: Answer) -> Result<()> {
        self.enter(&self.main, |ctx| {
            let make_db = Self::host(&ctx, "makeDb")?;
            let raw = |op: Op| {
                let answer = Arc::clone(&answer);
                Function::new(ctx.clone(), move |text: String| answer(op, &text))
            };
            self.guarded(&ctx, || {
                make_db.call::<_, ()>((raw(Op::Get)?, raw(Op::Find)?, raw(Op::Put)?))
            })
        })
    }

    /// Runs one procedure or trigger; `text` is `[ddoc, args]`, and the `db` object is
    /// passed at position `db_at`. Returns `[0, result]` or `[1, thrown]` as JSON text.
    pub(crate) fn script(&self, id: u32, text: &str, db_at: usize) -> Result<String> {
        self.enter(&self.main, |ctx| {
            let script = Self::host(&ctx, "script")?;
            let tick = self.tick(&ctx, 1)?;
            self.guarded(&ctx, || script.call::<_, String>((id, text, db_at as u32, tick)))
        })
    }

    /// Runs `call` under the time limit and turns a JavaScript exception into an [`Error`]:
    /// a passed deadline is [`Error::Timeout`]; `InternalError: out of memory`, or `null`
    /// when QuickJS could not allocate even that, is [`Error::OutOfMemory`]; other
    /// `InternalError`s and `["fatal", error, reason]` arrays are [`Error::Fatal`];
    /// anything else is [`Error::Internal`] carrying the exception's string form
    /// (compilation turns that into its reason).
    /// Runs a show or list function (`op` is `"show"` or `"list"`) on `text`, the call's
    /// JSON; the answer as the prelude's `show`/`list` give it.
    pub(crate) fn render(&self, op: &str, id: u32, text: &str) -> Result<String> {
        self.enter(&self.main, |ctx| {
            let render = Self::host(&ctx, op)?;
            let tick = self.tick(&ctx, 1)?;
            self.guarded(&ctx, || render.call::<_, String>((id, text, tick)))
        })
    }

    fn guarded<'js, T>(
        &self,
        ctx: &Ctx<'js>,
        call: impl FnOnce() -> rquickjs::Result<T>,
    ) -> Result<T> {
        self.deadline.fired.store(false, Ordering::Relaxed);
        self.deadline.arm();
        let result = call().catch(ctx);
        self.deadline.disarm();
        let caught = match result {
            Ok(value) => return Ok(value),
            Err(caught) => caught,
        };
        if self.deadline.fired.load(Ordering::Relaxed) {
            return Err(Error::Timeout { limit_ms: self.limits.time_per_call.as_millis() });
        }
        Err(self.classify(ctx, caught))
    }

    fn classify<'js>(&self, ctx: &Ctx<'js>, caught: CaughtError<'js>) -> Error {
        let value = match caught {
            CaughtError::Exception(exception) => exception.into_value(),
            CaughtError::Value(value) => value,
            CaughtError::Error(rquickjs::Error::Allocation) => {
                return Error::OutOfMemory { limit_bytes: self.limits.memory_bytes };
            }
            CaughtError::Error(error) => return internal(error),
        };
        if value.is_null() {
            return Error::OutOfMemory { limit_bytes: self.limits.memory_bytes };
        }
        if value.is_undefined() {
            return Error::Fatal {
                error: "internal_error".into(),
                reason: "function raised undefined".into(),
            };
        }
        if let Some(array) = value.as_array()
            && array.get::<Value>(0).ok().and_then(|v| v.as_string()?.to_string().ok()).as_deref()
                == Some("fatal")
        {
            let text = |i: usize| -> String {
                array.get::<Coerced<String>>(i).map(|c| c.0).unwrap_or_default()
            };
            return Error::Fatal { error: text(1), reason: text(2) };
        }
        if let Some(object) = value.as_object() {
            let name = object.get::<_, Coerced<String>>("name").map(|c| c.0).unwrap_or_default();
            let message =
                object.get::<_, Coerced<String>>("message").map(|c| c.0).unwrap_or_default();
            if name == "InternalError" {
                if message.contains("out of memory") {
                    return Error::OutOfMemory { limit_bytes: self.limits.memory_bytes };
                }
                return Error::Fatal { error: name, reason: message };
            }
        }
        match Coerced::<String>::from_js(ctx, value) {
            Ok(text) => Error::Internal(text.0),
            Err(_) => Error::OutOfMemory { limit_bytes: self.limits.memory_bytes },
        }
    }
}
