//! Upload-time check of a design document's JavaScript (couch_mrview:validate/2).
//!
//! CouchDB groups views by identical `(map, options)`, visits the groups in order of map
//! source, and compiles each group's map and then its JavaScript reduces. The first
//! failure is `400 compilation_error` with the reason
//! `Compilation of the <map|reduce> function in the '<view>' view failed: <reason>`.
//! The view named in a map failure is the last view in document order that shares the
//! map and has no reduce, else the last one with a reduce (`ddoc_to_mrst` prepends names).
//!
//! Field types, a missing `map` and unknown `_builtin` reducers are checked by the engine
//! (`bunko-engine/src/design.rs`) before this runs; values of the wrong type are skipped
//! here.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::sandbox::{Kind, Sandbox};
use crate::views::Runtime;

/// One `(map, options)` group of views.
#[derive(Default)]
struct Group<'a> {
    map_names: Vec<&'a str>,
    /// `(view name, reduce source)`, in document order.
    reduces: Vec<(&'a str, &'a str)>,
}

/// Compiles every map and JavaScript reduce function in a design document's `views` with
/// [`Limits::default`](crate::Limits::default); see [`Runtime::validate_design_doc`].
pub fn validate_design_doc(views: &Value) -> Result<()> {
    Runtime::default().validate_design_doc(views)
}

impl Runtime {
    /// Compiles every map and JavaScript reduce function in a design document's `views`
    /// object. Invalid JavaScript, or a source that does not evaluate to a function, is
    /// [`Error::Compilation`] with CouchDB's full reason text.
    pub fn validate_design_doc(&self, views: &Value) -> Result<()> {
        let Some(views) = views.as_object() else { return Ok(()) };
        let mut groups: BTreeMap<(&str, String), Group<'_>> = BTreeMap::new();
        for (name, view) in views {
            let Some(map) = view.get("map").and_then(Value::as_str) else { continue };
            let options = view.get("options").map(Value::to_string).unwrap_or_default();
            let group = groups.entry((map, options)).or_default();
            match view.get("reduce") {
                None | Some(Value::Null) => group.map_names.push(name),
                Some(reduce) => group.reduces.push((name, reduce.as_str().unwrap_or_default())),
            }
        }
        if groups.is_empty() {
            return Ok(());
        }
        let sandbox = Sandbox::new(self.limits())?;
        for ((map, _), group) in &groups {
            let name = group.map_names.last().or(group.reduces.last().map(|(n, _)| n));
            compile(&sandbox, Kind::Map, "map", name.copied().unwrap_or_default(), map)?;
            for (name, reduce) in group.reduces.iter().rev() {
                if !reduce.starts_with('_') {
                    compile(&sandbox, Kind::Reduce, "reduce", name, reduce)?;
                }
            }
        }
        Ok(())
    }
}

fn compile(sandbox: &Sandbox, kind: Kind, what: &str, view: &str, source: &str) -> Result<()> {
    sandbox.compile(source, kind).map(drop).map_err(|error| {
        let reason = match error {
            Error::Compilation(reason) => reason,
            other => other.to_string(),
        };
        Error::Compilation(format!(
            "Compilation of the {what} function in the '{view}' view failed: {reason}"
        ))
    })
}
