//! What the compiled functions ask of a sandbox, with or without QuickJS built in.

use std::sync::Arc;

/// Which environment a function gets: map functions may `require` from `views.lib`, and
/// design functions (shows, lists, rewrites) from the whole design document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Map,
    Reduce,
    Design,
}

/// What a `db` call of a procedure or trigger asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    not(feature = "quickjs"),
    expect(dead_code, reason = "only the QuickJS sandbox makes `db` calls")
)]
pub(crate) enum Op {
    Get,
    Find,
    Put,
}

/// What answers a `db` call: the operation and the argument's JSON text in, JSON text out.
pub(crate) type Answer = Arc<dyn Fn(Op, &str) -> String + Send + Sync>;

/// A document to map: parsed already, or JSON text (an object) as stored.
#[derive(Clone, Copy)]
#[cfg_attr(
    not(feature = "quickjs"),
    expect(dead_code, reason = "only the QuickJS sandbox reads documents")
)]
pub(crate) enum Doc<'a> {
    Value(&'a serde_json::Value),
    Text(&'a str),
}
