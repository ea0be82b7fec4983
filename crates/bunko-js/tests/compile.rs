//! Compiling sources and validating design documents: CouchDB's accepted source forms and
//! its `compilation_error` reasons (util.js Couch.compileFunction,
//! couch_query_servers:try_compile, couch_mrview:validate).

use bunko_js::{Error, Runtime, validate_design_doc};
use serde_json::json;

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn compile_error(source: &str) -> Option<Error> {
    Runtime::default().compile_view_set(None, &[source]).err()
}

#[test]
fn couchdb_source_forms_compile() -> TestResult {
    for source in [
        "function(doc) { emit(doc._id, null); }",
        "function (doc) {emit(doc.integer, doc.integer)};",
        "  // leading comment\n  function(doc) {}\n",
        "/* block */ function\n(doc) {}\n\n",
        "(function(doc) {})",
        "var helper = function (x) { return x * 2; }; (function(doc) { emit(helper(doc.n), null); })",
        "(function() { var n = 0; return function(doc) { n++; }; })()",
    ] {
        Runtime::default()
            .compile_view_set(None, &[source])
            .map_err(|e| format!("{source}: {e}"))?;
    }
    Ok(())
}

#[test]
fn syntax_errors_give_the_error_and_the_source() {
    assert_eq!(
        compile_error("function(doc) }{"),
        Some(Error::Compilation("SyntaxError: Unexpected token '}' (function(doc) }{)".into()))
    );
}

#[test]
fn non_functions_are_refused_with_couchdb_text() {
    for source in ["function named(doc) {}", "1 + 1", "", "null", "'function(doc) {}'"] {
        assert_eq!(
            compile_error(source),
            Some(Error::Compilation(format!("Expression does not eval to a function. ({source})"))),
            "{source}"
        );
    }
}

#[test]
fn top_level_code_errors_are_compilation_errors() {
    let got = compile_error("throw new Error('at load'); (function(doc){})");
    assert_eq!(
        got,
        Some(Error::Compilation(
            "Error: at load (throw new Error('at load'); (function(doc){}))".into()
        ))
    );
}

#[test]
fn validation_names_the_view_and_function_kind() {
    // couch_mrview_ddoc_validation_tests.erl: invalid map, invalid reduce.
    let err = validate_design_doc(&json!({"foo": {"map": "function(doc) }{"}}));
    assert_eq!(
        err,
        Err(Error::Compilation(
            "Compilation of the map function in the 'foo' view failed: SyntaxError: Unexpected token '}' (function(doc) }{)"
                .into()
        ))
    );
    let err = validate_design_doc(
        &json!({"foo": {"map": "function(doc) { emit(null); }", "reduce": "function(k, v, r) }{}"}}),
    );
    assert_eq!(
        err,
        Err(Error::Compilation(
            "Compilation of the reduce function in the 'foo' view failed: SyntaxError: Unexpected token '}' (function(k, v, r) }{})"
                .into()
        ))
    );
    let err = validate_design_doc(&json!({"foo": {"map": "1"}}));
    assert_eq!(
        err,
        Err(Error::Compilation(
            "Compilation of the map function in the 'foo' view failed: Expression does not eval to a function. (1)".into()
        ))
    );
}

#[test]
fn validation_groups_views_sharing_a_map_like_couchdb() {
    // Views with the same map are one group; the name reported is the last view without
    // a reduce, in document order.
    let views = json!({
        "a": {"map": "function(doc) }{"},
        "b": {"map": "function(doc) }{", "reduce": "_count"},
        "c": {"map": "function(doc) }{"},
    });
    let reason = validate_design_doc(&views).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        reason.starts_with("Compilation of the map function in the 'c' view failed"),
        "{reason}"
    );
    // Only reduce views: the last of them.
    let views = json!({
        "r1": {"map": "function(doc) }{", "reduce": "_sum"},
        "r2": {"map": "function(doc) }{", "reduce": "_count"},
    });
    let reason = validate_design_doc(&views).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        reason.starts_with("Compilation of the map function in the 'r2' view failed"),
        "{reason}"
    );
    // Groups are compiled in order of map source.
    let views = json!({
        "z": {"map": "b }"},
        "y": {"map": "a }"},
    });
    let reason = validate_design_doc(&views).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        reason.starts_with("Compilation of the map function in the 'y' view failed"),
        "{reason}"
    );
}

#[test]
fn validation_skips_lib_builtins_and_other_languages_fields() -> TestResult {
    validate_design_doc(&json!({
        "lib": {"x": "this is not javascript }"},
        "count": {"map": "function(doc) { emit(doc._id, 1); }", "reduce": "_count"},
        "stats": {"map": "function(doc) { emit(doc._id, 1); }", "reduce": "_stats"},
        "js": {"map": "function(doc) { emit(doc._id, 1); }", "reduce": "function(k, v, r) { return sum(v); }"},
        "nullreduce": {"map": "function(doc) {}", "reduce": null},
        "weird": "not an object",
    }))?;
    validate_design_doc(&json!({}))?;
    validate_design_doc(&json!(null))?;
    Ok(())
}

#[test]
fn compilation_is_time_limited() {
    let runtime = Runtime::new(bunko_js::Limits {
        time_per_call: std::time::Duration::from_millis(100),
        ..bunko_js::Limits::default()
    });
    let err = runtime.compile_view_set(None, &["while (true) {}"]).err();
    assert_eq!(err, Some(Error::Timeout { limit_ms: 100 }));
    let err = runtime.validate_design_doc(&json!({"v": {"map": "while (true) {}"}})).err();
    assert_eq!(
        err,
        Some(Error::Compilation(
            "Compilation of the map function in the 'v' view failed: JavaScript function call exceeded the time limit of 100 ms"
                .into()
        ))
    );
}
