//! Unit tests of the selector pipeline; the bulk of the cases are golden files
//! (`tests/golden/`).

use serde_json::{Value, json};

use super::*;

type Result = std::result::Result<(), Error>;

/// CouchDB's `check_selector`: for a value that is present, a condition and its `$not`
/// always disagree, whatever normalization turned the `$not` into.
#[test]
fn negation_flips_every_present_value() -> Result {
    let conds = [
        json!({"$lt": 5}),
        json!({"$lte": "hello"}),
        json!({"$gt": [1, 2, 3]}),
        json!({"$gte": 5}),
        json!({"$eq": {"a": 1}}),
        json!({"$ne": null}),
        json!({"$in": [1, "a", []]}),
        json!({"$nin": [1, "a"]}),
        json!({"$in": []}),
        json!({"$all": [1, 2]}),
        json!({"$all": [[1, 2]]}),
        json!({"$exists": true}),
        json!({"$type": "array"}),
        json!({"$size": 2}),
        json!({"$mod": [2, 1]}),
        json!({"$regex": "^a"}),
        json!({"$beginsWith": "a"}),
        json!({"$elemMatch": {"$gt": 1}}),
        json!({"$allMatch": {"$gt": 1}}),
        json!({"$keyMapMatch": {"$eq": "a"}}),
        json!({"$and": [{"$gt": 1}, {"$lt": 9}]}),
        json!({"$or": [{"$lt": 1}, {"$gt": 9}]}),
        json!({"$nor": [{"$lt": 1}, {"$gt": 9}]}),
        json!({"$not": {"$eq": 1}}),
        json!({"$gt": 1, "$type": "number"}),
    ];
    let values = [
        json!(null),
        json!(false),
        json!(0),
        json!(1),
        json!(1.0),
        json!(5),
        json!(10),
        json!("a"),
        json!("abc"),
        json!("hello"),
        json!([]),
        json!([1, 2]),
        json!([2, 1, 3]),
        json!([[1, 2]]),
        json!({}),
        json!({"a": 1}),
    ];
    for cond in &conds {
        let positive = Selector::parse(&json!({ "x": cond }))?;
        let negative = Selector::parse(&json!({"x": {"$not": cond}}))?;
        for value in &values {
            let doc = json!({ "x": value });
            assert_ne!(
                positive.matches(&doc, Dialect::Mango),
                negative.matches(&doc, Dialect::Mango),
                "{cond} on {value}"
            );
        }
    }
    Ok(())
}

#[test]
fn empty_selector() -> Result {
    let all = Selector::parse(&json!({}))?;
    assert!(all.is_empty());
    assert!(!all.is_noop());
    assert_eq!(all.root(), &Node::Empty);
    assert!(all.matches(&json!({"a": 1}), Dialect::Mongo));
    Ok(())
}

#[test]
fn planner_reads_conditions() -> Result {
    let sel = Selector::parse(&json!({
        "name": {"$regex": "^Jo"},
        "age": {"$gte": 18},
        "$or": [{"a": 1}, {"b": 2}],
    }))?;
    let name = FieldPath::parse("name")?;
    let prefix = sel.conditions(&name).iter().find_map(|cond| match cond {
        Cond::Regex(pattern) => pattern.literal_prefix(),
        _ => None,
    });
    assert_eq!(prefix, Some("Jo"));
    assert_eq!(sel.fields(), [name, FieldPath::parse("age")?]);
    assert!(matches!(sel.root(), Node::And(children) if children.len() == 3));
    Ok(())
}

#[test]
fn first_operator_error_wins() {
    let err = Selector::parse(&json!({"a": {"$in": 1}, "b": {"$size": -1}}));
    assert_eq!(err, Err(Error::bad_arg("$in", &json!(1))));
}

/// Random selectors and documents from a small vocabulary: nothing may panic, and
/// normalizing twice changes nothing.
#[test]
fn random_inputs_do_not_panic() -> Result {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let (mut parsed, mut matched) = (0, 0);
    for _ in 0..20_000 {
        let selector = rng.object(4, true);
        let doc = rng.object(4, false);
        if let Ok(sel) = Selector::parse(&selector) {
            parsed += 1;
            matched += usize::from(sel.matches(&doc, Dialect::Mango));
            sel.matches(&doc, Dialect::Mongo);
            sel.fields();
            sel.referenced_fields();
            let again = Selector::parse(&sel.to_json());
            assert_eq!(again.as_ref(), Ok(&sel), "{selector}");
        }
        let paths: Vec<FieldPath> =
            ["a", "a.b", "a.0", "b"].into_iter().filter_map(|p| FieldPath::parse(p).ok()).collect();
        crate::index_keys(&doc, &paths);
        if let Ok(sort) = crate::Sort::parse(&selector) {
            sort.compare(&doc, &selector);
        }
        if let Ok(fields) = crate::Fields::parse(&selector) {
            fields.project(&doc);
        }
    }
    // The vocabulary must exercise the matcher, not only the error paths.
    assert!(parsed > 4000 && matched > 400, "parsed {parsed}, matched {matched}");
    Ok(())
}

const KEYS: [&str; 14] = [
    "a",
    "b",
    "a.b",
    "0",
    "",
    "$eq",
    "$gt",
    "$in",
    "$not",
    "$and",
    "$or",
    "$nor",
    "$elemMatch",
    "$size",
];
const MORE: [&str; 10] = [
    "$all",
    "$exists",
    "$type",
    "$mod",
    "$regex",
    "$beginsWith",
    "$allMatch",
    "$keyMapMatch",
    "$nin",
    "a\\.b",
];

/// xorshift64: deterministic, no dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn value(&mut self, depth: usize, operators: bool) -> Value {
        let kind = if depth == 0 { self.next(4) } else { self.next(7) };
        match kind {
            0 => Value::Null,
            1 => json!(self.next(5) as i64 - 2),
            2 => json!(["a", "b", "^a", "number", "x.y"][self.next(5)]),
            3 => json!(self.next(2) == 0),
            4 => json!(1.5),
            5 => (0..self.next(4)).map(|_| self.value(depth - 1, operators)).collect(),
            _ => self.object(depth - 1, operators),
        }
    }

    fn object(&mut self, depth: usize, operators: bool) -> Value {
        let mut map = serde_json::Map::new();
        for _ in 0..self.next(3) {
            let key = if operators && self.next(2) == 0 {
                MORE[self.next(MORE.len())]
            } else {
                KEYS[self.next(KEYS.len())]
            };
            let key = if operators || !key.starts_with('$') { key } else { "c" };
            let value = if depth == 0 { Value::Null } else { self.value(depth - 1, operators) };
            map.insert(key.to_owned(), value);
        }
        Value::Object(map)
    }
}

/// A/B micro-benchmark of the MongoDB dialect's per-document matching cost (issue 13,
/// numeric types), not a check: 200k IoT readings of 1 kB (int64 timestamps as
/// `$numberLong`, as the MongoDB front end stores them) parsed whole and matched against
/// `{reading: {$gte: 48.5}}`, as `find` does for each document. A first copies the document
/// into the old matching view (number wrappers folded to plain numbers, which hid the
/// numeric types), as `find` did before; B matches the stored form itself, as it does now.
/// Run: `cargo test --release -p bunko-query --lib mongo_match_speed -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn mongo_match_speed() -> Result {
    fn folded(v: &Value) -> Value {
        match v {
            Value::Array(items) => Value::Array(items.iter().map(folded).collect()),
            Value::Object(map) => match bunko_doc::ejson::plain_number(v) {
                Some(n) if map.len() == 1 => Value::Number(n),
                _ => Value::Object(map.iter().map(|(k, v)| (k.clone(), folded(v))).collect()),
            },
            other => other.clone(),
        }
    }
    let long = |ts: usize| format!(r#"{{"$numberLong":"{ts}"}}"#);
    let text = |i: usize| crate::bench_docs::iot_reading(i, long);
    let texts: Vec<String> = (0..200_000).map(text).collect();
    let selector = Selector::parse_mongo(&json!({"reading": {"$gte": 48.5}}))?;
    for run in 0..6 {
        let fold = run % 2 == 0;
        let started = std::time::Instant::now();
        let mut hits = 0usize;
        for body in &texts {
            let doc: Value = serde_json::from_str(body).unwrap_or_default();
            let matched = if fold {
                selector.matches(&folded(&doc), Dialect::Mongo)
            } else {
                selector.matches(&doc, Dialect::Mongo)
            };
            hits += usize::from(matched);
        }
        let per_doc = started.elapsed().as_nanos() / texts.len() as u128;
        let name = if fold { "A (copy into a folded view)" } else { "B (stored form)" };
        println!("{name}: {per_doc} ns per document, {hits} matched");
    }
    Ok(())
}
