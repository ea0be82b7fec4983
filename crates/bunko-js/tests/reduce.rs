//! JavaScript reduce functions (share/server/views.js runReduce) and the `reduce_limit`
//! rule (view_errors_test.exs "reduce overflow error").

use bunko_js::{Error, Limits, ReduceLimit, Reduced, Runtime};
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

fn rows(n: i64) -> (Vec<(Value, String)>, Vec<Value>) {
    let keys = (0..n).map(|i| (json!([i % 3, i]), format!("doc{i}"))).collect();
    let values = (0..n).map(Value::from).collect();
    (keys, values)
}

#[test]
fn reduce_gets_keys_with_ids_and_rereduce_gets_null() -> TestResult {
    let reduce = Runtime::default().compile_reduce(
        "function(keys, values, rereduce) { return {rereduce: rereduce, keys: keys, values: values}; }",
    )?;
    let got = reduce.reduce(&[(json!("k"), "id1".into())], &[json!(5)])?;
    assert_eq!(got.value, json!({"rereduce": false, "keys": [["k", "id1"]], "values": [5]}));
    let got = reduce.rereduce(&[json!(1), json!(2)])?;
    assert_eq!(got.value, json!({"rereduce": true, "keys": null, "values": [1, 2]}));
    Ok(())
}

#[test]
fn sum_reduce_over_many_chunks_equals_one_reduce() -> TestResult {
    let reduce =
        Runtime::default().compile_reduce("function (keys, values) { return sum(values); };")?;
    let (keys, values) = rows(1000);
    let whole = reduce.reduce(&keys, &values)?.value;
    let mut partials = Vec::new();
    for (k, v) in keys.chunks(37).zip(values.chunks(37)) {
        partials.push(reduce.reduce(k, v)?.value);
    }
    let mut level = partials;
    while level.len() > 1 {
        level = level
            .chunks(5)
            .map(|c| reduce.rereduce(c).map(|r| r.value))
            .collect::<Result<_, _>>()?;
    }
    assert_eq!(whole, json!(499500));
    assert_eq!(level, vec![whole]);
    Ok(())
}

#[test]
fn a_throwing_reduce_gives_null_and_a_message() -> TestResult {
    let reduce = Runtime::default()
        .compile_reduce("function(k, v) { log('reducing'); return v.nope.x; }")?;
    let got = reduce.reduce(&[(json!(1), "a".into())], &[json!(1)])?;
    assert_eq!(
        got,
        Reduced {
            value: Value::Null,
            error: Some(
                "function raised exception TypeError: cannot read property 'x' of undefined".into()
            ),
            logs: vec!["reducing".into()],
        }
    );
    let undefined = Runtime::default().compile_reduce("function(k, v) { }")?;
    assert_eq!(undefined.rereduce(&[json!(1)])?.value, Value::Null);
    Ok(())
}

#[test]
fn output_that_does_not_shrink_overflows() -> TestResult {
    // view_errors_test.exs: 1000 x 'wazzap' from one row; sizes are JSON bytes of the
    // rows `[[[1,"1"],1]]` and of the result.
    let source = "function (keys, values) { var chars = []; for (var i=0; i < 1000; i++) {chars.push('wazzap');};return chars; };";
    let reduce = Runtime::default().compile_reduce(source)?;
    let err = reduce.reduce(&[(json!(1), "1".into())], &[json!(1)]).err();
    assert_eq!(
        err,
        Some(Error::ReduceOverflow(
            "Reduce output must shrink more rapidly: input size: 13 output size: 9001".into()
        ))
    );
    // The same output from a large enough input is fine.
    let (keys, values) = rows(2000);
    assert!(reduce.reduce(&keys, &values).is_ok());
    // reduce_limit = false / log keep the value.
    for limit in [ReduceLimit::Off, ReduceLimit::Log] {
        let runtime = Runtime::new(Limits { reduce_limit: limit, ..Limits::default() });
        let got = runtime.compile_reduce(source)?.rereduce(&[json!(1)])?;
        assert_eq!(got.value.as_array().map(Vec::len), Some(1000));
    }
    Ok(())
}

#[test]
fn fatal_errors_fail_the_reduction() -> TestResult {
    let reduce = Runtime::default()
        .compile_reduce("function(k, v) { throw ['fatal', 'my_error', 'stop']; }")?;
    let err = reduce.rereduce(&[json!(1)]).err();
    assert_eq!(err, Some(Error::Fatal { error: "my_error".into(), reason: "stop".into() }));
    Ok(())
}

#[test]
fn reduce_has_no_require_but_the_other_helpers() -> TestResult {
    let reduce = Runtime::default().compile_reduce(
        "function(k, v) { return [typeof require, typeof emit, isArray(v), toJSON(v)]; }",
    )?;
    assert_eq!(reduce.rereduce(&[json!(1)])?.value, json!(["undefined", "function", true, "[1]"]));
    Ok(())
}
