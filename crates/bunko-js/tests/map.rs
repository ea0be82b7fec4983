//! Map functions in CouchDB's environment: what `emit`, `log`, `sum`, `isArray`, `toJSON`
//! and `require` do, and how a throwing function is contained. Expected values follow
//! CouchDB 3.4 (share/server/views.js, util.js; test/elixir/test/view_errors_test.exs,
//! design_docs_test.exs).

use bunko_js::{CompiledViews, FunctionError, Runtime};
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn compile(maps: &[&str]) -> Result<CompiledViews, bunko_js::Error> {
    Runtime::default().compile_view_set(None, maps)
}

fn rows(views: &CompiledViews, doc: Value) -> Result<Vec<Vec<(Value, Value)>>, bunko_js::Error> {
    Ok(views.map(&doc)?.rows)
}

#[test]
fn emit_passes_every_json_type() -> TestResult {
    let views = compile(&["function(doc) { for (var k in doc.values) emit(doc.values[k], k); }"])?;
    let values =
        json!([null, true, false, 0, -1.5, "text", "ünï\u{1F600}", [1, [2]], {"a": {"b": []}}]);
    let out = rows(&views, json!({"_id": "d", "values": values.clone()}))?;
    let keys: Vec<Value> = out[0].iter().map(|(k, _)| k.clone()).collect();
    assert_eq!(Value::Array(keys), values);
    assert_eq!(out[0][2].1, json!("2"));
    Ok(())
}

#[test]
fn undefined_becomes_null_and_functions_are_dropped() -> TestResult {
    // view_errors_test.exs: "emit undefined key results as null", "... value results as null".
    let views = compile(&[
        "function(doc) { emit(doc.undef, null); emit([doc._id, doc.undef]); emit(1, {f: function(){}, u: undefined, n: NaN}); }",
    ])?;
    let out = rows(&views, json!({"_id": "d"}))?;
    assert_eq!(out[0][0], (Value::Null, Value::Null));
    assert_eq!(out[0][1], (json!(["d", null]), Value::Null));
    assert_eq!(out[0][2], (json!(1), json!({"n": null})));
    Ok(())
}

#[test]
fn multiple_emits_keep_their_order_per_function() -> TestResult {
    let views = compile(&[
        "function(doc) { emit(doc.integer, null); emit(doc.integer, null); }",
        "function(doc) {}",
        "function(doc) { if (doc._id === '1') { emit(1, null); } }",
        "function(doc) { for (var i = 3; i > 0; i--) emit(i, doc._id); }",
    ])?;
    let out = rows(&views, json!({"_id": "1", "integer": 7}))?;
    assert_eq!(out.len(), 4);
    assert_eq!(out[0], vec![(json!(7), Value::Null), (json!(7), Value::Null)]);
    assert!(out[1].is_empty());
    assert_eq!(out[2], vec![(json!(1), Value::Null)]);
    let keys: Vec<&Value> = out[3].iter().map(|(k, _)| k).collect();
    assert_eq!(keys, [&json!(3), &json!(2), &json!(1)]);
    Ok(())
}

#[test]
fn a_throwing_function_skips_the_document_and_spares_the_others() -> TestResult {
    // view_errors_test.exs "exception in map function": no rows, no failure.
    let views = compile(&[
        "function(doc) { emit('before', 1); doc.undef(); }",
        "function(doc) { emit(doc._id, 1); }",
        "function(doc) { if (doc.bad) throw new Error('bad doc'); emit(doc._id, 2); }",
    ])?;
    let out = views.map_batch(&[json!({"_id": "a", "bad": true}), json!({"_id": "b"})])?;
    assert_eq!(out[0].rows, vec![vec![], vec![(json!("a"), json!(1))], vec![]]);
    assert_eq!(out[1].rows[2], vec![(json!("b"), json!(2))]);
    let message = |index, error: &str, id: &str| FunctionError {
        index,
        message: format!("function raised exception {error} with doc._id {id}"),
    };
    assert_eq!(
        out[0].errors,
        vec![message(0, "TypeError: not a function", "a"), message(2, "Error: bad doc", "a")]
    );
    assert_eq!(out[1].errors, vec![message(0, "TypeError: not a function", "b")]);
    // A thrown non-Error is shown with toString(), as CouchDB's errstr does.
    let views = compile(&[
        "function(doc) { throw {reason: 'x'}; }",
        "function(doc) { throw ['error', 'a', 'b']; }",
    ])?;
    let out = views.map(&json!({"_id": "c"}))?;
    assert_eq!(out.errors[0].message, "function raised exception [object Object] with doc._id c");
    assert_eq!(out.errors[1].message, "function raised exception error,a,b with doc._id c");
    Ok(())
}

#[test]
fn emitted_errors_become_error_objects() -> TestResult {
    // util.js error_to_json applies to values; keys are stringified as they are.
    let views =
        compile(&["function(doc) { emit(new TypeError('k'), new RangeError('too big')); }"])?;
    let out = rows(&views, json!({"_id": "d"}))?;
    assert_eq!(out[0][0], (json!({}), json!({"error": "RangeError", "message": "too big"})));
    Ok(())
}

#[test]
fn log_collects_strings_and_json() -> TestResult {
    let views = compile(&[
        "function(doc) { log('plain'); log({a: [1]}); log(new Error('e')); log(undefined); emit(1, 1); }",
    ])?;
    let out = views.map(&json!({"_id": "d"}))?;
    assert_eq!(
        out.logs,
        ["plain", r#"{"a":[1]}"#, r#"{"error":"Error","message":"e"}"#, "undefined"]
    );
    assert_eq!(out.rows[0].len(), 1);
    Ok(())
}

#[test]
fn sum_is_array_and_to_json_helpers() -> TestResult {
    let views = compile(&[r#"function(doc) {
        emit('sum', sum(doc.nums));
        emit('sum-object', sum({a: 1, b: 2}));
        emit('sum-strings', sum(['a', 'b']));
        emit('isArray', [isArray(doc.nums), isArray(doc), isArray('x'), isArray([])]);
        emit('toJSON', toJSON({a: [1, "two"]}));
        emit('JSON', JSON.parse('{"x": 1}').x);
    }"#])?;
    let out = rows(&views, json!({"_id": "d", "nums": [1, 2, 3.5]}))?;
    let got: Vec<Value> = out[0].iter().map(|(_, v)| v.clone()).collect();
    assert_eq!(
        got,
        vec![
            json!(6.5),
            json!(3),
            json!("0ab"),
            json!([true, false, false, true]),
            json!(r#"{"a":[1,"two"]}"#),
            json!(1)
        ]
    );
    Ok(())
}

#[test]
fn documents_are_frozen_for_every_function() -> TestResult {
    // views.js mapDoc seals the document: one function cannot change what the next sees.
    let views = compile(&[
        "function(doc) { doc.x = 5; doc.nested.y = 6; doc.list.push(1); emit(doc.x, doc.nested.y); }",
        "function(doc) { emit(doc.x, [doc.nested.y, doc.list.length]); }",
        "function(doc) { 'use strict'; doc.x = 5; }",
        "function(doc) { emit([Object.isFrozen(doc), Object.isFrozen(doc.nested), Object.isFrozen(doc.list)], Object.keys(doc)); }",
    ])?;
    let out = views.map(&json!({"_id": "d", "x": 1, "nested": {"y": 2}, "list": []}))?;
    // push on a frozen array throws, so the first function emits nothing.
    assert!(out.rows[0].is_empty());
    assert_eq!(out.rows[1], vec![(json!(1), json!([2, 0]))]);
    assert_eq!(
        out.rows[3],
        vec![(json!([true, true, true]), json!(["_id", "x", "nested", "list"]))]
    );
    assert_eq!(out.errors.len(), 2);
    assert!(
        out.errors[1].message.starts_with("function raised exception TypeError"),
        "{:?}",
        out.errors
    );
    Ok(())
}

#[test]
fn documents_look_like_json_parse_made_them() -> TestResult {
    // Integer-like keys come first, as JavaScript orders them; `__proto__` is an own member.
    // Documents come from the host realm, as in CouchDB, so their prototype is not the
    // function's own `Object.prototype`.
    let views = compile(&[
        "function(doc) { emit(Object.keys(doc), [doc.__proto__, Object.getPrototypeOf(doc) === Object.prototype, doc.s.length]); }",
    ])?;
    let text = r#"{"b": 1, "2": 2, "a": 3, "1": 4, "__proto__": "own", "s": "\u00e9\ud83d\ude00"}"#;
    let out = rows(&views, serde_json::from_str(text)?)?;
    assert_eq!(
        out[0],
        vec![(json!(["1", "2", "b", "a", "__proto__", "s"]), json!(["own", false, 3]))]
    );
    Ok(())
}

#[test]
fn numbers_are_javascript_doubles() -> TestResult {
    // CouchDB's JS sees every number as a double: big integers round, 1.0 is 1.
    let views = compile(&[
        "function(doc) { emit(doc.big, [doc.float, doc.exp, doc.small, 0.1 + 0.2, doc.big + 1]); }",
    ])?;
    let doc: Value = serde_json::from_str(
        r#"{"_id": "d", "big": 12345678901234567890, "float": 1.0, "exp": 1e21, "small": 5e-324}"#,
    )?;
    let out = rows(&views, doc)?;
    let (key, value) = &out[0][0];
    assert_eq!(key.to_string(), "12345678901234567000");
    assert_eq!(value.to_string(), "[1,1e+21,5e-324,0.30000000000000004,12345678901234567000]");
    let exact = compile(&["function(doc) { emit(doc.n, doc.n === 9007199254740993); }"])?;
    let out = rows(&exact, serde_json::from_str(r#"{"n": 9007199254740993}"#)?)?;
    assert_eq!(out[0][0].0.to_string(), "9007199254740992");
    assert_eq!(out[0][0].1, json!(true));
    Ok(())
}

#[test]
fn each_function_has_its_own_globals() -> TestResult {
    let views = compile(&[
        "var seen = 0; (function(doc) { seen = seen + 1; leaked = 'x'; emit(seen, typeof Promise); })",
        "function(doc) { emit(typeof seen, typeof leaked); }",
    ])?;
    views.map(&json!({"_id": "a"}))?;
    let out = views.map(&json!({"_id": "b"}))?;
    assert_eq!(out.rows[0], vec![(json!(2), json!("undefined"))]);
    assert_eq!(out.rows[1], vec![(json!("undefined"), json!("undefined"))]);
    Ok(())
}

/// Documents given as JSON text are read straight into QuickJS; what map functions see
/// must equal the parsed document's: member order, escapes, numbers, frozenness, and the
/// last of a member named twice.
#[test]
fn json_text_reads_like_the_parsed_document() -> TestResult {
    let views = compile(&[
        "function(doc) { emit(Object.keys(doc), doc); }",
        "function(doc) { emit([Object.isFrozen(doc), Object.isFrozen(doc.o), Object.isFrozen(doc.o.a), Object.isExtensible(doc.e)], [doc.big, doc.huge, doc.neg, doc.x]); }",
    ])?;
    let texts = [
        r#"{"_id":"d","b":1,"2":[],"a":{"k\"q":"\u00e9\ud83d\ude00\n"},"1":true,"__proto__":"own","o":{"a":[1,[2,{}]]},"e":{},"big":12345678901234567890,"huge":1e400,"neg":-0.0,"x":null}"#,
        r#"{"_id":"dup","x":1,"o":{"a":[]},"e":{},"x":2,"big":-5e-324,"huge":-1e400,"neg":-7}"#,
        r#"{"_id":"nested dup","o":{"a":[{"y":1,"y":[3]}]},"e":{}}"#,
    ];
    for text in texts {
        let parsed: Value = serde_json::from_str(text)?;
        assert_eq!(views.map_json(text)?, views.map(&parsed)?, "{text}");
    }
    let out = views.map_json(texts[1])?;
    assert_eq!(out.rows[0][0].0, json!(["_id", "x", "o", "e", "big", "huge", "neg"]));
    assert_eq!(out.rows[1][0].0, json!([true, true, true, false]));
    assert_eq!(out.rows[1][0].1, json!([-5e-324, null, -7, 2]));
    assert!(views.map_json(r#"{"a":1} x"#).is_err());
    Ok(())
}

#[test]
fn json_text_and_batches_match_single_maps() -> TestResult {
    let views = compile(&[
        "function(doc) { emit(doc._id, doc.v); }",
        "function(doc) { emit(doc.v, null); }",
    ])?;
    let docs: Vec<Value> = (0..50).map(|i| json!({"_id": format!("d{i}"), "v": i})).collect();
    let texts: Vec<String> = docs.iter().map(Value::to_string).collect();
    let batch = views.map_batch(&docs)?;
    let batch_json = views.map_batch_json(&texts)?;
    assert_eq!(batch, batch_json);
    for (i, doc) in docs.iter().enumerate() {
        assert_eq!(views.map(doc)?, batch[i]);
        assert_eq!(views.map_json(&texts[i])?, batch[i]);
    }
    assert!(views.map_batch(&[])?.is_empty());
    assert_eq!(views.len(), 2);
    assert!(views.map_json("not json").is_err());
    Ok(())
}

#[test]
fn selected_functions_map_in_the_order_given() -> TestResult {
    let views = compile(&[
        "function(doc) { emit('first', null); }",
        "function(doc) { emit('second', null); }",
        "function(doc) { throw new Error('third'); }",
    ])?;
    let out = views.map_batch_json_select(&[2, 1], &[r#"{"_id": "a"}"#])?;
    let out = out.first().cloned().unwrap_or_default();
    assert_eq!(out.rows, vec![vec![], vec![(json!("second"), Value::Null)]]);
    assert_eq!(out.errors.iter().map(|e| e.index).collect::<Vec<_>>(), vec![0]);
    assert!(views.map_batch_json_select(&[3], &["{}"]).is_err());
    Ok(())
}
