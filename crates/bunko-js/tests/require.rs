//! `require()` of CommonJS modules from a design document's `views.lib`, with CouchDB's
//! path rules (share/server/util.js resolveModule). The module tree mirrors
//! test/elixir/test/design_docs_test.exs, moved under `views.lib` where map functions
//! resolve from.

use bunko_js::Runtime;
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn lib() -> Value {
    json!({
        "baz": "exports.baz = 'bam';",
        "foo": {
            "foo": "exports.foo = 'bar';",
            "boom": "exports.boom = 'ok';",
        },
        "stringzone": "exports.string = 'plankton';",
        "commonjs": {
            "whynot": "exports.test = require('../stringzone');\nexports.foo = require('views/lib/stringzone');",
            "upper": "exports.testing = require('./whynot').test.string.toUpperCase()+\nmodule.id+require('./whynot').foo.string",
            "circular_one": "require('./circular_two'); exports.name = 'One';",
            "circular_two": "require('./circular_one'); exports.name = 'Two';",
        },
        "idtest1": {"a": {"b": {"d": "module.exports = require('../c/e').id;"}, "c": {"e": "exports.id = module.id;"}}},
        "idtest2": {"a": {"b": {"d": "module.exports = require('../../a/c/e').id;"}, "c": {"e": "exports.id = module.id;"}}},
        "idtest3": {"a": {"b": "module.exports = require('./c/d').id;", "c": {"d": "module.exports = require('./e');", "e": "exports.id = module.id;"}}},
        "idtest4": {"a": {"b": "module.exports = require('../a/./c/d').id;", "c": {"d": "module.exports = require('./e');", "e": "exports.id = module.id;"}}},
        "idtest5": {"a": "module.exports = require('views/lib/idtest5/b').id;", "b": "exports.id = module.id;"},
        "counter": "var n = 0; exports.next = function () { n += 1; return n; };",
        "broken": "exports.x = ;",
        "throws": "throw new Error('module failed');",
        "notstring": {"x": 1},
        "uses_emit": "exports.go = function (doc) { emit(doc._id, 'from module'); };",
    })
}

/// Maps one document through one function with `lib` and returns the single value it
/// emitted, or the error message.
fn required(expression: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let source = format!("function(doc) {{ emit(null, {expression}); }}");
    let views = Runtime::default().compile_view_set(Some(&lib()), &[&source])?;
    let out = views.map(&json!({"_id": "d"}))?;
    if let Some(error) = out.errors.first() {
        return Ok(Value::String(error.message.clone()));
    }
    Ok(out.rows[0][0].1.clone())
}

#[test]
fn modules_export_through_exports_and_module_exports() -> TestResult {
    assert_eq!(required("require('views/lib/foo/boom').boom")?, "ok");
    assert_eq!(required("require('views/lib/baz').baz")?, "bam");
    assert_eq!(
        required("require('views/lib/commonjs/upper').testing")?,
        "PLANKTONviews/lib/commonjs/upperplankton"
    );
    Ok(())
}

#[test]
fn relative_paths_and_module_ids_follow_couchdb() -> TestResult {
    // design_docs_test.exs "commonjs in ddoc": ids relative to parent, module and root.
    assert_eq!(required("require('views/lib/idtest1/a/b/d')")?, "views/lib/idtest1/a/c/e");
    assert_eq!(required("require('views/lib/idtest2/a/b/d')")?, "views/lib/idtest2/a/c/e");
    assert_eq!(required("require('views/lib/idtest3/a/b')")?, "views/lib/idtest3/a/c/e");
    assert_eq!(required("require('views/lib/idtest4/a/b')")?, "views/lib/idtest4/a/c/e");
    assert_eq!(required("require('views/lib/idtest5/a')")?, "views/lib/idtest5/b");
    Ok(())
}

#[test]
fn circular_requires_terminate() -> TestResult {
    assert_eq!(required("require('views/lib/commonjs/circular_one').name")?, "One");
    Ok(())
}

#[test]
fn modules_are_evaluated_once_per_function() -> TestResult {
    let source = "function(doc) { emit(require('views/lib/counter').next(), null); }";
    let views = Runtime::default().compile_view_set(Some(&lib()), &[source, source])?;
    let first = views.map(&json!({"_id": "a"}))?;
    let second = views.map(&json!({"_id": "b"}))?;
    // Each function has its own module cache, as CouchDB compiles each with its own ddoc.
    assert_eq!(first.rows, vec![vec![(json!(1), Value::Null)], vec![(json!(1), Value::Null)]]);
    assert_eq!(second.rows[0], vec![(json!(2), Value::Null)]);
    Ok(())
}

#[test]
fn modules_see_the_view_environment() -> TestResult {
    let source = "function(doc) { require('views/lib/uses_emit').go(doc); }";
    let views = Runtime::default().compile_view_set(Some(&lib()), &[source])?;
    assert_eq!(views.map(&json!({"_id": "a"}))?.rows[0], vec![(json!("a"), json!("from module"))]);
    Ok(())
}

#[test]
fn bad_requires_skip_the_document_with_couchdb_messages() -> TestResult {
    let prefix = "function raised exception error,";
    let suffix = " with doc._id d";
    assert_eq!(
        required("require('views/lib/nothere')")?,
        format!(
            "{prefix}invalid_require_path,Object has no property \"nothere\". {}{suffix}",
            serde_json::to_string(&lib())?
        )
    );
    assert_eq!(
        required("require('views/lib/notstring')")?,
        format!(
            "{prefix}invalid_require_path,Must require a JavaScript string, not: object{suffix}"
        )
    );
    assert_eq!(
        required("require('views/lib/throws')")?,
        format!(
            "{prefix}compilation_error,Module require('views/lib/throws') raised error Error: module failed{suffix}"
        )
    );
    let broken = required("require('views/lib/broken')")?;
    let broken = broken.as_str().unwrap_or_default();
    assert!(
        broken.starts_with(&format!(
            "{prefix}compilation_error,Module require('views/lib/broken') raised error SyntaxError"
        )),
        "{broken}"
    );
    let relative = required("require('./baz')")?;
    assert!(
        relative.as_str().unwrap_or_default().contains("invalid_require_path,Object has no parent"),
        "{relative}"
    );
    Ok(())
}

#[test]
fn without_lib_require_fails_per_document() -> TestResult {
    let views = Runtime::default()
        .compile_view_set(None, &["function(doc) { emit(1, require('views/lib/x')); }"])?;
    let out = views.map(&json!({"_id": "a"}))?;
    assert!(out.rows[0].is_empty());
    assert_eq!(out.errors.len(), 1);
    Ok(())
}
