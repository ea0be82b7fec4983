//! The built-in reducers through their public entry points: reduce, rereduce across many
//! chunks (which must agree with one reduce), finalize (couch_query_servers.erl
//! builtin_reduce, finalize; test/elixir/test/reduce_builtin_test.exs).

use bunko_js::{Builtin, Error, ReduceLimit, SUM_ERROR};
use serde_json::{Value, json};

type TestResult = Result<(), Box<dyn std::error::Error>>;

const ON: ReduceLimit = ReduceLimit::On;

/// Reduces `values` in chunks of `chunk`, then rereduces the partials `fan_in` at a time
/// until one is left, and finalizes it.
fn tree(
    builtin: Builtin,
    keys: &[Value],
    values: &[Value],
    chunk: usize,
    fan_in: usize,
) -> Result<Value, Error> {
    let mut level = vec![];
    for (k, v) in keys.chunks(chunk).zip(values.chunks(chunk)) {
        level.push(builtin.reduce(k, v, ON)?);
    }
    if level.is_empty() {
        level.push(builtin.reduce(&[], &[], ON)?);
    }
    while level.len() > 1 {
        level = level.chunks(fan_in).map(|c| builtin.rereduce(c, ON)).collect::<Result<_, _>>()?;
    }
    builtin.finalize(level.pop().unwrap_or(Value::Null))
}

fn whole(builtin: Builtin, keys: &[Value], values: &[Value]) -> Result<Value, Error> {
    builtin.finalize(builtin.reduce(keys, values, ON)?)
}

#[test]
fn parse_matches_by_prefix_like_couchdb() {
    assert_eq!(Builtin::parse("_sum"), Some(Builtin::Sum));
    assert_eq!(Builtin::parse("_count"), Some(Builtin::Count));
    assert_eq!(Builtin::parse("_stats"), Some(Builtin::Stats));
    assert_eq!(Builtin::parse("_approx_count_distinct"), Some(Builtin::ApproxCountDistinct));
    assert_eq!(Builtin::parse("_summary"), Some(Builtin::Sum));
    assert_eq!(Builtin::parse("_foo"), None);
    assert_eq!(Builtin::parse("function(k, v) { return sum(v); }"), None);
    assert_eq!(Builtin::Stats.name(), "_stats");
}

#[test]
fn count_and_sum_over_chunks() -> TestResult {
    let n = 1000;
    let keys: Vec<Value> = (0..n).map(|i| json!(i % 10)).collect();
    let values: Vec<Value> = (1..=n).map(Value::from).collect();
    for (chunk, fan_in) in [(1, 2), (7, 3), (100, 10), (1000, 2)] {
        assert_eq!(tree(Builtin::Count, &keys, &values, chunk, fan_in)?, json!(1000));
        assert_eq!(tree(Builtin::Sum, &keys, &values, chunk, fan_in)?, json!(500500));
    }
    Ok(())
}

#[test]
fn sum_of_arrays_and_nested_objects_over_chunks() -> TestResult {
    let values: Vec<Value> = (0..300)
        .map(|i| match i % 3 {
            0 => json!([1, 2, 3]),
            1 => json!([10]),
            _ => json!(100),
        })
        .collect();
    let keys = vec![Value::Null; values.len()];
    // 100 each of [1, 2, 3], [10] and 100 (a number counts as a one-element array).
    let expected = json!([100 + 100 * 10 + 100 * 100, 200, 300]);
    assert_eq!(whole(Builtin::Sum, &keys, &values)?, expected);
    assert_eq!(tree(Builtin::Sum, &keys, &values, 13, 4)?, expected);

    let objects: Vec<Value> = (0..200)
        .map(|i| {
            if i % 2 == 0 {
                json!({"a": 1, "n": {"x": [1, 1]}})
            } else {
                json!({"b": 2.5, "n": {"y": 1}})
            }
        })
        .collect();
    let expected = json!({"a": 100, "b": 250.0, "n": {"x": [100, 100], "y": 100}});
    assert_eq!(whole(Builtin::Sum, &keys[..200], &objects)?, expected);
    assert_eq!(tree(Builtin::Sum, &keys[..200], &objects, 9, 3)?, expected);
    Ok(())
}

#[test]
fn sum_keeps_integers_exact_and_mixes_floats_like_erlang() -> TestResult {
    let values: Vec<Value> = ["9007199254740993", "1", "2.5"]
        .iter()
        .map(|t| serde_json::from_str(t))
        .collect::<Result<_, _>>()?;
    let keys = vec![Value::Null; 3];
    assert_eq!(whole(Builtin::Sum, &keys[..2], &values[..2])?.to_string(), "9007199254740994");
    assert_eq!(whole(Builtin::Sum, &keys, &values)?.to_string(), "9007199254740996.0");
    Ok(())
}

#[test]
fn sum_errors_become_builtin_reduce_error_values() -> TestResult {
    let keys = vec![Value::Null; 3];
    let got = whole(Builtin::Sum, &keys, &[json!(1), json!("two"), json!(3)])?;
    assert_eq!(
        got,
        json!({"error": "builtin_reduce_error", "reason": SUM_ERROR, "caused_by": "two"})
    );
    // The error object survives rereduce with good partial sums.
    let got = Builtin::Sum.rereduce(&[json!(5), got.clone(), json!(7)], ON)?;
    assert_eq!(got["error"], "builtin_reduce_error");
    Ok(())
}

#[test]
fn sum_output_that_does_not_shrink_is_replaced_by_an_error() -> TestResult {
    let big: Value = (0..3000).map(Value::from).collect();
    let got = Builtin::Sum.reduce(&[Value::Null], std::slice::from_ref(&big), ON)?;
    assert_eq!(got["error"], "builtin_reduce_error");
    assert!(
        got["reason"]
            .as_str()
            .unwrap_or_default()
            .starts_with("Reduce output must shrink more rapidly")
    );
    assert_eq!(
        Builtin::Sum.reduce(&[Value::Null], std::slice::from_ref(&big), ReduceLimit::Off)?,
        big
    );
    Ok(())
}

#[test]
fn stats_over_chunks_and_arrays() -> TestResult {
    let values: Vec<Value> = (1..=100).map(Value::from).collect();
    let keys = vec![Value::Null; 100];
    let expected = json!({"sum": 5050, "count": 100, "min": 1, "max": 100, "sumsqr": 338350});
    assert_eq!(whole(Builtin::Stats, &keys, &values)?, expected);
    assert_eq!(tree(Builtin::Stats, &keys, &values, 7, 3)?, expected);

    let pairs: Vec<Value> = (1..=10).map(|i| json!([i, -i])).collect();
    let got = tree(Builtin::Stats, &keys[..10], &pairs, 3, 2)?;
    assert_eq!(
        got,
        json!([
            {"sum": 55, "count": 10, "min": 1, "max": 10, "sumsqr": 385},
            {"sum": -55, "count": 10, "min": -10, "max": -1, "sumsqr": 385}
        ])
    );
    // Pre-aggregated map values are accepted as they are.
    let pre = json!({"sum": 10, "count": 2, "min": 4, "max": 6, "sumsqr": 52});
    let got = whole(Builtin::Stats, &keys[..2], &[pre, json!(1)])?;
    assert_eq!(got, json!({"sum": 11, "count": 3, "min": 1, "max": 6, "sumsqr": 53}));
    Ok(())
}

#[test]
fn stats_refuses_non_numbers() {
    let err = Builtin::Stats.reduce(&[Value::Null, Value::Null], &[json!(1), json!("x")], ON).err();
    assert_eq!(
        err,
        Some(Error::InvalidValue(
            "The _stats function requires that map values be numbers or arrays of numbers, not '<<\"x\">>'".into()
        ))
    );
}

#[test]
fn approx_count_distinct_is_close_and_rereduce_is_exact() -> TestResult {
    for (distinct, repeats) in [(0usize, 1usize), (1, 5), (10, 3), (1000, 2), (50_000, 1)] {
        let keys: Vec<Value> =
            (0..distinct * repeats).map(|i| json!(["key", i % distinct.max(1)])).collect();
        let values = vec![Value::Null; keys.len()];
        let one = whole(Builtin::ApproxCountDistinct, &keys, &values)?;
        let chunked = tree(Builtin::ApproxCountDistinct, &keys, &values, 333, 4)?;
        assert_eq!(one, chunked, "merging sketches must be exact");
        let estimate = one.as_f64().unwrap_or(-1.0);
        let error = (estimate - distinct as f64).abs() / (distinct.max(1) as f64);
        // Standard error at precision 11 is ~2.3 % (3 sigma: 7 %); small sets are counted
        // almost exactly.
        let bound = if distinct <= 100 { 0.02 } else { 0.07 };
        assert!(error <= bound, "{distinct}: estimated {estimate}");
    }
    Ok(())
}

#[test]
fn approx_count_distinct_keys_compare_as_json_terms() -> TestResult {
    let keys = [
        json!("a"),
        json!("a"),
        json!(1),
        json!("1"),
        json!([1]),
        json!({"a": 1}),
        json!({"a": 1}),
    ];
    let got = whole(Builtin::ApproxCountDistinct, &keys, &vec![Value::Null; keys.len()])?;
    assert_eq!(got, json!(5));
    assert!(Builtin::ApproxCountDistinct.rereduce(&[json!(3)], ON).is_err());
    Ok(())
}
