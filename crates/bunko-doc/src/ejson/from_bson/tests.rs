//! The one-pass conversion against the old one (decode to `bson::Document`, then
//! `to_json`), compared as stored JSON text byte for byte: every BSON type at its edges,
//! look-alike wrappers, repeated keys, and seeded random documents.

use bson::oid::ObjectId;
use bson::raw::{CString, RawArrayBuf, RawDocumentBuf};
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Decimal128, Document, JavaScriptCodeWithScope, RawBson};
use bson::{Regex, Timestamp, doc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{document, value};
use crate::ejson::to_json;

/// The stored text the old path gives, or `None` where it refused the bytes.
fn old(raw: &RawDocumentBuf) -> Option<String> {
    let doc = Document::try_from(raw.as_ref()).ok()?;
    serde_json::to_string(&to_json(&doc)).ok()
}

fn new(raw: &RawDocumentBuf) -> Option<String> {
    let (map, _) = document(raw).ok()?;
    serde_json::to_string(&map).ok()
}

/// `members` appended in order (a key may repeat, as the bytes of a client may).
fn raw_of(members: &[(&str, Bson)]) -> RawDocumentBuf {
    let mut raw = RawDocumentBuf::new();
    for (key, item) in members {
        let Ok(key) = CString::try_from(key.to_string()) else { continue };
        if let Ok(item) = RawBson::try_from(item.clone()) {
            raw.append(key, item);
        }
    }
    raw
}

/// The one-pass map gives the old text, and so does the printer (unless a key repeats,
/// where it declines), with the old map's revision term and depths, with `_id` or without.
fn same(raw: &RawDocumentBuf) -> bool {
    let was = old(raw);
    assert!(was.is_some(), "{raw:?}");
    assert_eq!(new(raw), was);
    crate::ejson::print::tests::prints_as_before(raw)
}

fn regex(pattern: &str, options: &str) -> Bson {
    match (CString::try_from(pattern.to_string()), CString::try_from(options.to_string())) {
        (Ok(pattern), Ok(options)) => Bson::RegularExpression(Regex { pattern, options }),
        _ => Bson::Null,
    }
}

fn decimal(text: &str) -> Bson {
    Bson::Decimal128(text.parse().unwrap_or(Decimal128::from_bytes([0; 16])))
}

/// A DBPointer (the crate builds one only from its Extended JSON).
fn pointer() -> Bson {
    let text = serde_json::json!({"$dbPointer": {"$ref": "db.c", "$id": {"$oid": "65a1b2c3d4e5f60718293a4b"}}});
    Bson::try_from(text).unwrap_or(Bson::Null)
}

#[test]
fn every_type_converts_as_before() {
    let every: Vec<(String, Bson)> = crate::ejson::tests::every_type().into_iter().collect();
    let members: Vec<_> = every.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    assert!(same(&raw_of(&members)));
}

#[test]
fn edges_of_each_type_convert_as_before() {
    let mut odd = [0u8; 16];
    odd[15] = 0x60;
    let members: Vec<(&str, Bson)> = vec![
        ("neg0", Bson::Double(-0.0)),
        ("nan", Bson::Double(f64::NAN)),
        ("inf", Bson::Double(f64::INFINITY)),
        ("ninf", Bson::Double(f64::NEG_INFINITY)),
        ("max", Bson::Double(f64::MAX)),
        ("min", Bson::Double(f64::MIN_POSITIVE)),
        ("sub", Bson::Double(5e-324)),
        ("whole", Bson::Double(1e21)),
        ("i32min", Bson::Int32(i32::MIN)),
        ("i64small", Bson::Int64(-1)),
        ("i64big", Bson::Int64(i64::MIN)),
        ("i64edge", Bson::Int64(i64::from(i32::MAX) + 1)),
        ("dec", decimal("-1.50E+3")),
        ("decnan", decimal("NaN")),
        ("decinf", decimal("-Infinity")),
        ("decodd", Bson::Decimal128(Decimal128::from_bytes(odd))),
        ("early", Bson::DateTime(bson::DateTime::from_millis(i64::MIN))),
        ("late", Bson::DateTime(bson::DateTime::from_millis(i64::MAX))),
        ("old", Bson::DateTime(bson::DateTime::from_millis(-62_135_596_800_001))),
        ("b0", Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: vec![] })),
        ("b2", Bson::Binary(Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![1, 2, 3] })),
        ("b4", Bson::Binary(Binary { subtype: BinarySubtype::Uuid, bytes: vec![9; 16] })),
        ("b3", Bson::Binary(Binary { subtype: BinarySubtype::UuidOld, bytes: vec![9; 16] })),
        ("b5", Bson::Binary(Binary { subtype: BinarySubtype::Md5, bytes: vec![0xff; 16] })),
        ("bff", Bson::Binary(Binary { subtype: BinarySubtype::UserDefined(0xff), bytes: vec![0] })),
        ("re", regex("^a\\.b$", "imsx")),
        ("ts", Bson::Timestamp(Timestamp { time: u32::MAX, increment: u32::MAX })),
        ("mink", Bson::MinKey),
        ("maxk", Bson::MaxKey),
        ("undef", Bson::Undefined),
        ("sym", Bson::Symbol("s".into())),
        ("code", Bson::JavaScriptCode("f()".into())),
        (
            "scope",
            Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                code: "g()".into(),
                scope: doc! {"x": 1_i32, "$oid": "y"},
            }),
        ),
        ("ptr", pointer()),
        ("nul", Bson::String("a\u{0}b\u{e9}\u{1f600}\"\\".into())),
        (
            "nested",
            Bson::Array(vec![Bson::Array(vec![Bson::Array(vec![])]), Bson::Document(doc! {})]),
        ),
        ("a.b", Bson::Int32(1)),
        ("$dollar", Bson::Int32(2)),
        ("", Bson::Null),
        ("look", Bson::Document(doc! {"$oid": "65a1b2c3d4e5f60718293a4b"})),
        ("lookdate", Bson::Document(doc! {"$date": {"$numberLong": "5"}})),
        ("esc", Bson::Document(doc! {"$bunkoDoc": {"a": 1_i32}})),
        ("notwrap", Bson::Document(doc! {"$oid": "zz"})),
        ("codescope", Bson::Document(doc! {"$code": "x", "$scope": {}})),
        ("_id", Bson::Document(doc! {"a": [1_i32]})),
        ("bytes", Bson::Array((0..=255).map(Bson::Int32).collect())),
        ("notbytes", Bson::Array(vec![Bson::Int32(1), Bson::Int32(256)])),
        ("longs", Bson::Array(vec![Bson::Int64(1), Bson::Double(2.0)])),
        ("deep", Bson::Document(doc! {"a": {"b": {"$date": 1_i32}, "c": [[{}]]}})),
    ];
    assert!(same(&raw_of(&members)));
}

#[test]
fn repeated_keys_keep_their_first_place_and_last_value() {
    let raw = raw_of(&[
        ("a", Bson::Int32(1)),
        ("b", Bson::Int32(2)),
        ("a", Bson::String("last".into())),
        ("o", Bson::Document(doc! {"$oid": "65a1b2c3d4e5f60718293a4b"})),
    ]);
    assert!(!same(&raw), "the printer leaves repeated keys to the map");
    assert_eq!(
        new(&raw).as_deref(),
        Some(r#"{"a":"last","b":2,"o":{"$bunkoDoc":{"$oid":"65a1b2c3d4e5f60718293a4b"}}}"#)
    );
    // A wrapper made only by a repeat: `{"$oid": 1, "$oid": "<hex>"}` reads as one member.
    let mut inner = RawDocumentBuf::new();
    inner.append(bson::raw::cstr!("$oid"), 1_i32);
    inner.append(bson::raw::cstr!("$oid"), "65a1b2c3d4e5f60718293a4b");
    let mut outer = RawDocumentBuf::new();
    outer.append(bson::raw::cstr!("w"), inner);
    assert!(same(&outer), "a `$`-led sub-document is converted the old way, repeats and all");
    let mut inner = RawDocumentBuf::new();
    inner.append(bson::raw::cstr!("a"), 1_i32);
    inner.append(bson::raw::cstr!("a"), 2_i32);
    let mut outer = RawDocumentBuf::new();
    outer.append(bson::raw::cstr!("w"), inner);
    assert!(!same(&outer), "a key repeated in a sub-document is seen too");
}

#[test]
fn depth_counts_documents_and_arrays() {
    let raw = raw_of(&[
        ("a", Bson::Array(vec![Bson::Document(doc! {"b": [1_i32]})])),
        ("s", Bson::Int32(1)),
    ]);
    assert_eq!(document(&raw).map(|(_, depth)| depth).ok(), Some(4));
    let scalar = value(bson::RawBsonRef::Int32(1)).map(|(_, depth)| depth).ok();
    assert_eq!(scalar, Some(0));
}

#[test]
fn malformed_bytes_are_an_error() {
    let raw = raw_of(&[("s", Bson::String("ok".into()))]);
    let mut bytes = raw.into_bytes();
    // The string's last byte before its NUL becomes invalid UTF-8.
    let at = bytes.len() - 3;
    bytes[at] = 0xff;
    let bad = RawDocumentBuf::from_bytes(bytes);
    assert!(bad.as_ref().is_ok_and(|bad| document(bad).is_err()));
    assert!(bad.as_ref().is_ok_and(|bad| old(bad).is_none()));
}

const KEYS: [&str; 9] =
    ["a", "b", "$oid", "$numberLong", "c.d", "$x", "e\u{e9}", "_id", "$bunkoDoc"];

fn scalar(rng: &mut StdRng) -> Bson {
    let oid = ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").unwrap_or_default();
    match rng.random_range(0..22) {
        0 => Bson::Double(
            [0.0, -0.0, 1.5, f64::NAN, f64::INFINITY, -1e300, 3.0][rng.random_range(0..7)],
        ),
        1 => Bson::String(
            ["", "s", "nul\u{0}", "\u{1f600}", "65a1b2c3d4e5f60718293a4b"][rng.random_range(0..5)]
                .into(),
        ),
        2 => Bson::Boolean(rng.random()),
        3 => Bson::Null,
        4 => Bson::Int32([0, -1, i32::MAX, i32::MIN][rng.random_range(0..4)]),
        5 => Bson::Int64([0, 5, i64::MAX, i64::MIN, 1 << 40][rng.random_range(0..5)]),
        6 => Bson::ObjectId(oid),
        7 => Bson::DateTime(bson::DateTime::from_millis(
            [0, -1, i64::MAX, 1_584_403_200_000][rng.random_range(0..4)],
        )),
        8 => {
            let subtype = BinarySubtype::from([0u8, 2, 3, 4, 5, 0x80][rng.random_range(0..6)]);
            Bson::Binary(Binary { subtype, bytes: vec![rng.random(); rng.random_range(0..5)] })
        }
        9 => {
            regex(["x", "^a$", ""][rng.random_range(0..3)], ["", "i", "ms"][rng.random_range(0..3)])
        }
        10 => Bson::Timestamp(Timestamp { time: rng.random(), increment: rng.random() }),
        11 => Bson::MinKey,
        12 => Bson::MaxKey,
        13 => decimal(["1.50", "-0", "NaN", "1E+6144", "0.000001"][rng.random_range(0..5)]),
        14 => Bson::Undefined,
        15 => Bson::Symbol("sym".into()),
        16 => Bson::JavaScriptCode("f()".into()),
        17 => pointer(),
        _ => Bson::Int32(rng.random_range(-3..3)),
    }
}

/// A random value; `unique`: no key repeats in its documents.
fn item(rng: &mut StdRng, depth: usize, unique: bool) -> RawBson {
    match rng.random_range(0..10) {
        // Sub-documents as bytes, so a key may repeat in them too.
        0..=2 if depth < 4 => RawBson::Document(raw_members(&members(rng, depth + 1, unique))),
        3 if depth < 4 => {
            let mut items = RawArrayBuf::new();
            for _ in 0..rng.random_range(0..4) {
                items.push(item(rng, depth + 1, unique));
            }
            RawBson::Array(items)
        }
        4 if depth < 4 => {
            // An array of small int32s (a byte string in the revision term), or nearly.
            let mut items = RawArrayBuf::new();
            for _ in 0..rng.random_range(1..4) {
                items.push(RawBson::Int32([0, 7, 255, 256, -1][rng.random_range(0..5)]));
            }
            RawBson::Array(items)
        }
        _ => RawBson::try_from(scalar(rng)).unwrap_or(RawBson::Null),
    }
}

fn members(rng: &mut StdRng, depth: usize, unique: bool) -> Vec<(String, RawBson)> {
    let mut out: Vec<(String, RawBson)> = Vec::new();
    for _ in 0..rng.random_range(0..5) {
        let key = KEYS[rng.random_range(0..KEYS.len())].to_string();
        if !unique || out.iter().all(|(k, _)| *k != key) {
            out.push((key, item(rng, depth, unique)));
        }
    }
    out
}

fn raw_members(members: &[(String, RawBson)]) -> RawDocumentBuf {
    let mut raw = RawDocumentBuf::new();
    for (key, item) in members {
        if let Ok(key) = CString::try_from(key.clone()) {
            raw.append(key, item.clone());
        }
    }
    raw
}

/// Seeded random documents, repeated keys at every level kept in the bytes: the one-pass
/// conversion gives the old text every time.
#[test]
fn random_documents_convert_exactly() {
    let mut rng = StdRng::seed_from_u64(13);
    for _ in 0..3000 {
        same(&raw_members(&members(&mut rng, 0, false)));
    }
}

/// Seeded random documents without repeated keys: every one is printed, as before.
#[test]
fn random_documents_print_exactly() {
    let mut rng = StdRng::seed_from_u64(31);
    for _ in 0..3000 {
        let raw = raw_members(&members(&mut rng, 0, true));
        assert!(same(&raw), "{raw:?}");
    }
}
