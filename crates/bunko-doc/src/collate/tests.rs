//! Collation against CouchDB's documented sequences, and the encoding against the comparison
//! on random values.

use std::cmp::Ordering;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value, json};

use super::*;
use crate::keycode::KeyWriter;

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

const GOLDEN: &str = include_str!("../../tests/collation_order.json");

fn enc(collation: Collation, v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    collation.encode(v, &mut out);
    out
}

/// Asserts that `values` ascend strictly, by `compare` and by encoded bytes, for every pair.
fn assert_strictly_ascending(collation: Collation, values: &[Value]) {
    let encoded: Vec<Vec<u8>> = values.iter().map(|v| enc(collation, v)).collect();
    for (i, (a, ea)) in values.iter().zip(&encoded).enumerate() {
        for (j, (b, eb)) in values.iter().zip(&encoded).enumerate() {
            let want = i.cmp(&j);
            assert_eq!(collation.compare(a, b), want, "{collation:?} compare {a} {b}");
            assert_eq!(ea.cmp(eb), want, "{collation:?} encode {a} {b}");
        }
    }
}

fn golden(name: &str) -> std::result::Result<Vec<Value>, Box<dyn std::error::Error>> {
    let all: Value = serde_json::from_str(GOLDEN)?;
    let list = all.get(name).and_then(Value::as_array).ok_or("missing list in golden file")?;
    Ok(list.clone())
}

#[test]
fn couchdb_view_collation_sequence() -> TestResult {
    assert_strictly_ascending(Collation::Unicode, &golden("view")?);
    Ok(())
}

#[test]
fn couchdb_raw_collation_sequence() -> TestResult {
    assert_strictly_ascending(Collation::Raw, &golden("raw")?);
    Ok(())
}

/// The docs' examples: "abc < Abc < ABC < abc1 < AbcZZZZZ", and "\ufff0" as a high suffix.
#[test]
fn couchdb_docs_string_examples() {
    let keys = ["abc", "Abc", "ABC", "abc1", "AbcZZZZZ", "abc\u{fff0}", "abd"].map(Value::from);
    assert_strictly_ascending(Collation::Unicode, &keys);
    let symbols_first = ["~", "$", "0", "9", "a", "A"].map(Value::from);
    assert_strictly_ascending(Collation::Unicode, &symbols_first);
}

/// Printable ASCII in collation order. The docs page lists `` ` `` and `^` first, as an
/// older ICU did; the CLDR root collation of ICU4X 2.4 puts them after `%`.
#[test]
fn printable_ascii_sequence() {
    let expected = concat!(
        "_ - , ; : ! ? . ' \" ( ) [ ] { } @ * / \\ & # % ` ^ + < = > | ~ $ ",
        "0 1 2 3 4 5 6 7 8 9 a A b B c C d D e E f F g G h H i I j J k K l L m M ",
        "n N o O p P q Q r R s S t T u U v V w W x X y Y z Z",
    );
    let mut chars: Vec<Value> =
        (33u8..127).map(|c| Value::from(char::from(c).to_string())).collect();
    chars.sort_by(compare);
    let got: Vec<&str> = chars.iter().filter_map(Value::as_str).collect();
    assert_eq!(got.join(" "), expected);
}

/// CouchDB returns ICU's verdict without a tie-break, so canonically equivalent or
/// ignorable-only-different strings are equal keys (rows then order by doc id).
#[test]
fn strings_icu_calls_equal_are_equal() {
    for (a, b) in
        [("\u{e9}", "e\u{301}"), ("\u{c5}", "\u{212b}"), ("a", "a\u{0}"), ("ab", "a\u{ad}b")]
    {
        let (a, b) = (json!(a), json!(b));
        assert_eq!(compare(&a, &b), Ordering::Equal, "{a} {b}");
        assert_eq!(enc(Collation::Unicode, &a), enc(Collation::Unicode, &b), "{a} {b}");
        assert_ne!(compare_raw(&a, &b), Ordering::Equal, "{a} {b}");
    }
}

#[test]
fn objects_compare_members_in_document_order() -> TestResult {
    let ordered: Vec<Value> = [
        r#"{}"#,
        r#"{"a": 1}"#,
        r#"{"a": 1, "b": 1}"#,
        r#"{"a": 2}"#,
        r#"{"A": 0}"#,
        r#"{"b": 2, "a": 1}"#,
    ]
    .iter()
    .map(|t| serde_json::from_str(t))
    .collect::<std::result::Result<_, _>>()?;
    assert_strictly_ascending(Collation::Unicode, &ordered);
    Ok(())
}

#[test]
fn type_ranks_follow_couchdb() {
    let values =
        [json!(null), json!(false), json!(true), json!(-3), json!(""), json!([]), json!({})];
    let ranks: Vec<u8> = values.iter().map(type_rank).collect();
    assert_eq!(ranks, [0, 1, 2, 3, 4, 5, 6]);
}

/// `startkey=["XYZ"]&endkey=["XYZ",{}]` and the wider bound from `encode_array_prefix`.
#[test]
fn array_prefix_bounds() {
    let inside = [json!(["XYZ"]), json!(["XYZ", 0]), json!(["XYZ", "zz", 1]), json!(["XYZ", [1]])];
    let object_child = json!(["XYZ", {"an": "object"}]);
    let outside = [json!("XYZ"), json!(["XYY", {}]), json!(["XYZa"]), json!(["xyz"]), json!({})];
    for collation in [Collation::Unicode, Collation::Raw] {
        let low = enc(collation, &json!(["XYZ"]));
        let couch_high = enc(collation, &json!(["XYZ", {}]));
        let mut high = Vec::new();
        collation.encode_array_prefix(&[json!("XYZ")], &mut high);
        encode_max(&mut high);
        for v in &inside {
            let e = enc(collation, v);
            assert!(low <= e && e < high, "{collation:?} {v}");
        }
        let e = enc(collation, &object_child);
        assert!(e < high, "{collation:?} {object_child}");
        if collation == Collation::Unicode {
            assert!(inside.iter().all(|v| enc(collation, v) < couch_high));
            assert!(couch_high < e, "CouchDB's {{}} bound stops before object children");
        }
        for v in &outside {
            let e = enc(collation, v);
            assert!(e < low || e > high, "{collation:?} {v}");
        }
    }
}

/// The exact bytes of sample encodings. Stored keys depend on them: when this fails after an
/// upgrade of `icu_collator` or a change here, bump [`COLLATION_VERSION`] and update the table.
#[test]
fn encoding_is_stable() -> TestResult {
    let samples: &[(&str, &str, &str)] = &[
        // (value, view encoding, raw encoding) in hex
        ("null", "10", "30"),
        ("[false,true]", "60203001", "60204001"),
        ("[0,-0.0,1,-1,1.5]", "604141428114407eeb42811e01", "601111128114107eeb12811e01"),
        ("[1e15,-1e-100]", "6042901440c022eb01", "6012901410c022eb01"),
        ("123456789012345678901", "42951945719db51945719db514", "12951945719db51945719db514"),
        ("\"\"", "5001010001", "700001"),
        ("\"aA\"", "502b2b010601c5dc0001", "7061410001"),
        ("\"Å中😀\"", "502bfa025c0d4c5c0145920601dc070001", "70c385e4b8adf09f98800001"),
        ("{\"k\":\"v\"}", "70503f010501050001505501050105000101", "50706b00017076000101"),
    ];
    let (mut report, mut changed) = (String::new(), false);
    for (text, view, raw) in samples {
        let v: Value = serde_json::from_str(text)?;
        let got = (hex::encode(enc(Collation::Unicode, &v)), hex::encode(enc(Collation::Raw, &v)));
        report.push_str(&format!("        ({text:?}, {:?}, {:?}),\n", got.0, got.1));
        changed |= (got.0.as_str(), got.1.as_str()) != (*view, *raw);
    }
    if changed { Err(format!("encodings changed; now:\n{report}").into()) } else { Ok(()) }
}

#[test]
fn sentinels_bound_every_value() {
    let mut rng = StdRng::seed_from_u64(7);
    let (mut min, mut max) = (Vec::new(), Vec::new());
    encode_min(&mut min);
    encode_max(&mut max);
    for _ in 0..2000 {
        let v = random_value(&mut rng, 0);
        for collation in [Collation::Unicode, Collation::Raw] {
            let e = enc(collation, &v);
            assert!(min < e && e < max, "{v}");
        }
    }
}

#[test]
fn view_encoding_orders_as_compare() {
    for seed in 0..4 {
        check_encoding_matches_compare(Collation::Unicode, seed);
    }
}

#[test]
fn raw_encoding_orders_as_compare() {
    for seed in 0..4 {
        check_encoding_matches_compare(Collation::Raw, seed);
    }
}

#[test]
fn view_tuples_order_component_by_component() {
    for seed in 0..4 {
        check_tuples(Collation::Unicode, seed);
    }
}

#[test]
fn raw_tuples_order_component_by_component() {
    for seed in 0..4 {
        check_tuples(Collation::Raw, seed);
    }
}

/// Sort keys against the collator on strings drawn from many scripts: sorted by `compare`,
/// the encodings ascend, equal exactly where `compare` says equal; then random pairs.
#[test]
fn view_string_sort_keys_match_the_collator() {
    let mut rng = StdRng::seed_from_u64(42);
    let mut strings: Vec<Value> =
        (0..20_000).map(|_| json!(random_script_string(&mut rng))).collect();
    strings.sort_by(compare);
    let encoded: Vec<Vec<u8>> = strings.iter().map(|v| enc(Collation::Unicode, v)).collect();
    for (pair, keys) in strings.windows(2).zip(encoded.windows(2)) {
        let want = compare(&pair[0], &pair[1]);
        assert_eq!(keys[0].cmp(&keys[1]), want, "{} vs {}", pair[0], pair[1]);
    }
    for _ in 0..200_000 {
        let (i, j) = (rng.random_range(0..strings.len()), rng.random_range(0..strings.len()));
        let want = compare(&strings[i], &strings[j]);
        assert_eq!(encoded[i].cmp(&encoded[j]), want, "{} vs {}", strings[i], strings[j]);
    }
}

/// Code point ranges for [`random_script_string`]: ASCII, Latin-1 and Latin Extended,
/// combining marks, Greek, Cyrillic, Hebrew, Arabic, Devanagari, Thai (prevowels), Hangul jamo
/// and syllables, kana, CJK, symbols, private use, noncharacters, emoji, unassigned planes.
const SCRIPTS: &[(u32, u32)] = &[
    (0x00, 0x7f),
    (0x80, 0x24f),
    (0x300, 0x36f),
    (0x370, 0x3ff),
    (0x400, 0x4ff),
    (0x590, 0x5ff),
    (0x600, 0x6ff),
    (0x900, 0x97f),
    (0xe00, 0xe7f),
    (0x1100, 0x11ff),
    (0xac00, 0xd7a3),
    (0x3040, 0x30ff),
    (0x4e00, 0x9fff),
    (0x2000, 0x2bff),
    (0xe000, 0xe0ff),
    (0xfdd0, 0xfdef),
    (0xfff0, 0xffff),
    (0x1f300, 0x1faff),
    (0x30000, 0x10ffff),
];

fn random_script_string(rng: &mut StdRng) -> String {
    let (low, high) = SCRIPTS[rng.random_range(0..SCRIPTS.len())];
    let len = rng.random_range(0..8);
    (0..len)
        .filter_map(|_| {
            // Mostly one script per string, like real keys; sometimes a stray from anywhere.
            let (lo, hi) = if rng.random_bool(0.8) {
                (low, high)
            } else {
                SCRIPTS[rng.random_range(0..SCRIPTS.len())]
            };
            char::from_u32(rng.random_range(lo..=hi))
        })
        .collect()
}

/// Every pair of random values: the encodings compare as the values do, and no encoding is a
/// proper prefix of another.
fn check_encoding_matches_compare(collation: Collation, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let values: Vec<Value> = (0..400).map(|_| random_value(&mut rng, 0)).collect();
    let encoded: Vec<Vec<u8>> = values.iter().map(|v| enc(collation, v)).collect();
    let mut equal_pairs = 0;
    for (a, ea) in values.iter().zip(&encoded) {
        for (b, eb) in values.iter().zip(&encoded) {
            let want = collation.compare(a, b);
            assert_eq!(ea.cmp(eb), want, "{collation:?} {a} vs {b}");
            assert!(ea == eb || !eb.starts_with(ea), "{collation:?} prefix: {a} vs {b}");
            equal_pairs += usize::from(want.is_eq());
        }
    }
    assert!(equal_pairs > values.len(), "the generator must produce equal values too");
}

/// `encode(a1) ++ encode(a2) ++ KeyWriter::str(id)` orders like the tuple `(a1, a2, id)`.
fn check_tuples(collation: Collation, seed: u64) {
    let mut rng = StdRng::seed_from_u64(1000 + seed);
    let pool: Vec<Value> = (0..24).map(|_| random_value(&mut rng, 1)).collect();
    let ids = ["", "a", "a\u{0}", "b"];
    let tuples: Vec<(&Value, &Value, &str)> = (0..250)
        .map(|_| {
            let pick = |rng: &mut StdRng| &pool[rng.random_range(0..pool.len())];
            (pick(&mut rng), pick(&mut rng), ids[rng.random_range(0..ids.len())])
        })
        .collect();
    let keys: Vec<Vec<u8>> = tuples
        .iter()
        .map(|(a1, a2, id)| {
            let mut key = enc(collation, a1);
            collation.encode(a2, &mut key);
            key.extend(KeyWriter::new(0).str(id).finish());
            key
        })
        .collect();
    for (ta, ka) in tuples.iter().zip(&keys) {
        for (tb, kb) in tuples.iter().zip(&keys) {
            let want = collation
                .compare(ta.0, tb.0)
                .then_with(|| collation.compare(ta.1, tb.1))
                .then_with(|| ta.2.as_bytes().cmp(tb.2.as_bytes()));
            assert_eq!(ka.cmp(kb), want, "{collation:?} {ta:?} vs {tb:?}");
        }
    }
}

/// Characters chosen to collide under collation: case pairs, canonically equivalent forms
/// (precomposed and combining, Å and the Ångström sign, Ω and the Ohm sign), ignorables
/// (NUL, U+0001, soft hyphen), contractions and expansions (ß, æ, ﬀ), Hangul syllables and
/// jamo, CJK, emoji, noncharacters and the top code point.
const CHARS: &[char] = &[
    'a',
    'A',
    'b',
    'B',
    'z',
    'e',
    'E',
    'f',
    'i',
    'o',
    's',
    '0',
    '9',
    ' ',
    '-',
    '_',
    '~',
    '$',
    '\u{0}',
    '\u{1}',
    '\u{ad}',
    '\u{e9}',
    '\u{c9}',
    '\u{301}',
    '\u{308}',
    '\u{f6}',
    '\u{f8}',
    '\u{df}',
    '\u{e6}',
    '\u{c5}',
    '\u{212b}',
    '\u{fb00}',
    '\u{130}',
    '\u{131}',
    '\u{3a9}',
    '\u{2126}',
    '\u{4e2d}',
    '\u{65e5}',
    '\u{ac00}',
    '\u{1100}',
    '\u{1161}',
    '\u{1f600}',
    '\u{fff0}',
    '\u{fffd}',
    '\u{ffff}',
    '\u{10ffff}',
];

/// Number literals at the edges: equal forms, -0, the f64 integer limit, floats whose exact
/// value is an integer, subnormals, beyond-f64 literals and long integers.
const NUMBERS: &[&str] = &[
    "0",
    "-0",
    "0.0",
    "-0.0",
    "0e5",
    "1",
    "1.0",
    "1e0",
    "10e-1",
    "0.1e1",
    "-1",
    "-1.0",
    "1e3",
    "1000",
    "1E3",
    "0.1",
    "0.10000000000000001",
    "0.2",
    "1.5",
    "-1.5",
    "9007199254740992",
    "9007199254740993",
    "9007199254740993.0",
    "1e23",
    "99999999999999991611392",
    "99999999999999991611393",
    "5e-324",
    "-5e-324",
    "1e-400",
    "1.7976931348623157e308",
    "1e400",
    "-1e400",
    "12345678901234567890123",
    "-12345678901234567890123",
    "18446744073709551615",
    "18446744073709551616",
    "-9223372036854775808",
];

fn random_value(rng: &mut StdRng, depth: u32) -> Value {
    let kinds = if depth >= 3 { 6 } else { 8 };
    match rng.random_range(0..kinds) {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 | 3 => random_number(rng),
        4 | 5 => Value::String(random_string(rng)),
        6 => Value::Array(
            (0..rng.random_range(0..4)).map(|_| random_value(rng, depth + 1)).collect(),
        ),
        _ => Value::Object(random_object(rng, depth)),
    }
}

fn random_object(rng: &mut StdRng, depth: u32) -> Map<String, Value> {
    (0..rng.random_range(0..4))
        .map(|_| (random_string(rng), random_value(rng, depth + 1)))
        .collect()
}

fn random_string(rng: &mut StdRng) -> String {
    let len = rng.random_range(0..5);
    (0..len).map(|_| CHARS[rng.random_range(0..CHARS.len())]).collect()
}

fn random_number(rng: &mut StdRng) -> Value {
    let text = match rng.random_range(0..6) {
        0 | 1 => NUMBERS[rng.random_range(0..NUMBERS.len())].to_string(),
        2 => rng.random_range(-3i64..=3).to_string(),
        3 => random_literal(rng),
        4 => {
            let f = f64::from_bits(rng.random());
            let f = if f.is_finite() { f } else { 0.5 };
            if rng.random() { format!("{f:e}") } else { format!("{f:?}") }
        }
        _ => format!("{:?}", f64::from(rng.random_range(-64i32..64)) / 8.0),
    };
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` with digits of any length.
fn random_literal(rng: &mut StdRng) -> String {
    let digits = |rng: &mut StdRng, n: usize| -> String {
        (0..n).map(|_| char::from(b'0' + rng.random_range(0..10u8))).collect()
    };
    let mut text = String::new();
    if rng.random() {
        text.push('-');
    }
    let int_len = rng.random_range(0..25);
    if int_len == 0 {
        text.push('0');
    } else {
        text.push(char::from(b'1' + rng.random_range(0..9u8)));
        text.push_str(&digits(rng, int_len - 1));
    }
    if rng.random() {
        let n = rng.random_range(1..20);
        text.push('.');
        text.push_str(&digits(rng, n));
    }
    if rng.random() {
        text.push(if rng.random() { 'e' } else { 'E' });
        text.push_str(["", "+", "-"][rng.random_range(0..3)]);
        let n = rng.random_range(1..4);
        text.push_str(&digits(rng, n));
    }
    text
}
