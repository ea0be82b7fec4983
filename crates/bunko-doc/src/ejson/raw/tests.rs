//! The streamed BSON against the old conversion (parse, `from_json`, encode) on documents
//! chosen to tell them apart: wrappers real and look-alike, nested arrays, numbers at every
//! edge, key order, `$`-fields, NUL bytes, repeated keys, and random documents.

use bson::{Bson, doc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Map, Value};

use super::{document, object as parsed_document};
use crate::ejson::{from_json, to_json};

/// The bytes a point read answered with before: parse, convert, encode. `None` where it
/// had no document (unparsable text) or could not encode one (a NUL in a key).
fn old(id: &Bson, body: &[u8]) -> Option<Vec<u8>> {
    let map = serde_json::from_slice::<Map<String, Value>>(body).ok()?;
    let mut out = doc! {"_id": id.clone()};
    out.extend(from_json(&map));
    out.to_vec().ok()
}

fn new(id: &Bson, body: &[u8]) -> Option<Vec<u8>> {
    document(id, body).map(|d| d.into_bytes())
}

/// The stream either gives the old bytes or gives up; `streams` says which is expected.
/// The parsed body written by [`parsed_document`] always gives the old bytes.
fn check(body: &str, streams: bool) {
    check_object(body);
    let id = Bson::String("k".into());
    let (was, now) = (old(&id, body.as_bytes()), new(&id, body.as_bytes()));
    if now.is_some() {
        assert_eq!(now, was, "{body}");
    }
    assert_eq!(now.is_some(), streams, "{body}");
}

#[test]
fn wrappers_read_as_the_parsed_conversion_reads_them() {
    for body in [
        r#"{"o":{"$oid":"65a1b2c3d4e5f60718293a4b"},"bad":{"$oid":"nothex"}}"#,
        r#"{"l":{"$numberLong":"5"},"x":{"$numberLong":"five"},"i":{"$numberInt":"7"}}"#,
        r#"{"d":{"$numberDouble":"NaN"},"p":{"$numberDouble":"-Infinity"},"z":{"$numberDouble":"-0.0"}}"#,
        r#"{"m":{"$numberDecimal":"1.50"},"b":{"$bunkoDecimal":"00000000000000000000000000000060"}}"#,
        r#"{"t":{"$date":{"$numberLong":"-1"}},"u":{"$date":"2020-01-01"}}"#,
        r#"{"b":{"$binary":{"base64":"AQI=","subType":"80"}},"bad":{"$binary":{"base64":"AQI=","subType":"80","x":1}}}"#,
        r#"{"r":{"$regularExpression":{"pattern":"^a.c$","options":"im"}},"nul":{"$regularExpression":{"pattern":"a\u0000","options":""}}}"#,
        r#"{"ts":{"$timestamp":{"t":1,"i":2}},"big":{"$timestamp":{"t":4294967296,"i":2}}}"#,
        r#"{"min":{"$minKey":1},"max":{"$maxKey":1},"no":{"$minKey":2},"u":{"$undefined":true}}"#,
        r#"{"c":{"$code":"f()"},"s":{"$code":"f()","$scope":{"a":1}},"sym":{"$symbol":"s"}}"#,
        r#"{"e":{"$bunkoDoc":{"$oid":"65a1b2c3d4e5f60718293a4b"}},"two":{"$oid":"65a1b2c3d4e5f60718293a4b","x":1}}"#,
        r#"{"unknown":{"$frob":1},"dollar":{"$a":1,"b":{"$oid":"65a1b2c3d4e5f60718293a4b"}},"empty":{}}"#,
        r#"{"ptr":{"$dbPointer":{"$ref":"c","$id":{"$oid":"65a1b2c3d4e5f60718293a4b"}}}}"#,
        r#"{"$top":{"$oid":"65a1b2c3d4e5f60718293a4b"},"dotted.$field":1}"#,
        r#"{"n":{"$serde_json::private::Number":"5"}}"#,
        r#"{"a":{"$oid":"65a1b2c3d4e5f60718293a4b","$oid":"65a1b2c3d4e5f60718293a4c"}}"#,
    ] {
        check(body, true);
    }
}

#[test]
fn numbers_at_the_edges_keep_their_types() {
    check(
        r#"{"a":2147483647,"b":2147483648,"c":-2147483648,"d":-2147483649,
            "e":9223372036854775807,"f":9223372036854775808,"g":-9223372036854775808,
            "h":-9223372036854775809,"i":123456789012345678901234567890,"j":-0,"k":-0.0,
            "l":1.0,"m":1E5,"n":1e-320,"o":0.1,"p":5e-324,"q":1.7976931348623157e308,
            "r":1e400,"s":[0,-1,1.5e3]}"#,
        true,
    );
}

#[test]
fn nesting_order_and_strings_come_through() {
    for body in [
        r#"{"z":1,"a":2,"m":{"z":[1,[2,[3,[]]],{}],"a":[[{"$oid":"65a1b2c3d4e5f60718293a4b"}]]}}"#,
        r#"{"s":"nul\u0000byte","e":"\"\\\/\b\f\n\r\t","u":"\u00e9\ud83d\ude00","k\u0041":true}"#,
        r#"{"n":null,"t":true,"f":false,"arr":[null,true,"x",{"a":null}],"":"empty key"}"#,
        "{}",
        r#" { "spaced" : [ 1 , 2 ] } "#,
    ] {
        check(body, true);
    }
}

#[test]
fn what_could_differ_is_left_to_the_old_conversion() {
    for body in [
        r#"{"a":1,"b":2,"a":3}"#,
        r#"{"o":{"x":1,"x":2}}"#,
        r#"{"_id":"inner","a":1}"#,
        r#"{"k\u0000":1}"#,
        r#"{"o":{"k\u0000":1}}"#,
        r#"{"a":1"#,
        r#"{"a":1} x"#,
        "[1]",
        r#""text""#,
    ] {
        check(body, false);
    }
    // Many keys, one repeated at the end: found past the short list too.
    let mut many: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
    check(&format!("{{{}}}", many.join(",")), true);
    many.push(r#""k3":0"#.into());
    check(&format!("{{{}}}", many.join(",")), false);
}

#[test]
fn nesting_at_the_parser_limit_agrees() {
    for depth in [120, 126, 127, 128, 200] {
        let body = format!("{}{}", r#"{"a":"#.repeat(depth), "1".to_string() + &"}".repeat(depth));
        let id = Bson::String("k".into());
        let now = new(&id, body.as_bytes());
        assert!(now.is_none() || now == old(&id, body.as_bytes()), "depth {depth}");
    }
}

#[test]
fn every_bson_type_written_by_the_mongodb_path_streams_exactly() {
    let doc = crate::ejson::tests::every_type();
    let body = serde_json::to_vec(&to_json(&doc)).unwrap_or_default();
    let oid = doc.get("oid").cloned().unwrap_or(Bson::Null);
    check_object(std::str::from_utf8(&body).unwrap_or_default());
    for id in [Bson::String("k".into()), oid, Bson::Int32(7), Bson::Document(doc! {"a": 1})] {
        let now = new(&id, &body);
        assert!(now.is_some());
        assert_eq!(now, old(&id, &body));
    }
}

/// Random documents from a small alphabet of keys (so repeats happen) and values that are
/// sometimes wrappers, sometimes look-alikes: the stream gives the old bytes or gives up
/// (where a key repeats), and streams most of them.
#[test]
fn random_documents_stream_exactly() {
    let mut rng = StdRng::seed_from_u64(13);
    let id = Bson::String("k".into());
    let mut streamed = 0;
    for _ in 0..3000 {
        let body = object(&mut rng, 0, true);
        check_object(&body);
        let now = new(&id, body.as_bytes());
        if now.is_some() {
            streamed += 1;
            assert_eq!(now, old(&id, body.as_bytes()), "{body}");
        }
    }
    assert!(streamed > 1500, "only {streamed} of 3000 streamed");
}

/// [`parsed_document`] of the parsed `body` encodes exactly as its old conversion does (both
/// refuse a key holding a NUL byte).
fn check_object(body: &str) {
    if let Ok(map) = serde_json::from_str::<Map<String, Value>>(body) {
        let now = parsed_document(&map).map(|d| d.into_bytes());
        assert_eq!(now, from_json(&map).to_vec().ok(), "{body}");
    }
}

const KEYS: [&str; 8] = ["a", "b", "$oid", "$numberLong", "c.d", "$x", "e\u{e9}", "f"];
const WRAPPERS: [&str; 8] = [
    r#"{"$oid":"65a1b2c3d4e5f60718293a4b"}"#,
    r#"{"$numberLong":"42"}"#,
    r#"{"$numberDouble":"Infinity"}"#,
    r#"{"$date":{"$numberLong":"1584403200000"}}"#,
    r#"{"$binary":{"base64":"AAEC","subType":"04"}}"#,
    r#"{"$numberDecimal":"-1.5E+3"}"#,
    r#"{"$timestamp":{"t":5,"i":6}}"#,
    r#"{"$regularExpression":{"pattern":"x","options":"s"}}"#,
];
const SCALARS: [&str; 12] = [
    "0",
    "-1",
    "2147483648",
    "9223372036854775808",
    "1.5",
    "-0.0",
    "1e10",
    "true",
    "null",
    r#""s""#,
    r#""nul\u0000""#,
    r#""\ud83d\ude00""#,
];

fn value(rng: &mut StdRng, depth: usize) -> String {
    match rng.random_range(0..10) {
        0..=1 if depth < 4 => object(rng, depth + 1, false),
        2 if depth < 4 => {
            let items: Vec<String> =
                (0..rng.random_range(0..4)).map(|_| value(rng, depth + 1)).collect();
            format!("[{}]", items.join(","))
        }
        3..=4 => WRAPPERS[rng.random_range(0..WRAPPERS.len())].to_string(),
        _ => SCALARS[rng.random_range(0..SCALARS.len())].to_string(),
    }
}

fn object(rng: &mut StdRng, depth: usize, top: bool) -> String {
    let n = rng.random_range(if top { 1 } else { 0 }..5);
    let members: Vec<String> = (0..n)
        .map(|_| format!(r#""{}":{}"#, KEYS[rng.random_range(0..KEYS.len())], value(rng, depth)))
        .collect();
    format!("{{{}}}", members.join(","))
}
