//! The stored form of MongoDB documents: JSON text in which BSON-only types are canonical
//! Extended JSON wrappers, so that a document written over the MongoDB wire protocol is an
//! ordinary stored JSON body (readable over the HTTP API, spliced without parsing) and
//! comes back as exactly the BSON it was written as.
//!
//! | BSON | stored JSON |
//! |---|---|
//! | int32 | a plain integer (`5`) |
//! | int64 | `{"$numberLong": "5"}` when it fits in int32 (so the type survives), else a plain integer |
//! | double, finite | a plain number that always carries `.` or an exponent (`5.0`, `-0.0`, `1e300`) |
//! | double NaN, ±Inf | `{"$numberDouble": "NaN" / "Infinity" / "-Infinity"}` |
//! | Decimal128 | `{"$numberDecimal": "1.50"}`; a non-canonical encoding (its text reads back as other bytes) `{"$bunkoDecimal": "<32 hex of its bytes>"}` |
//! | ObjectId | `{"$oid": "<24 hex>"}` |
//! | date | `{"$date": {"$numberLong": "<ms>"}}` |
//! | binary | `{"$binary": {"base64": "…", "subType": "<2 hex>"}}` |
//! | regex | `{"$regularExpression": {"pattern": "…", "options": "…"}}` |
//! | timestamp | `{"$timestamp": {"t": <u32>, "i": <u32>}}` |
//! | MinKey / MaxKey | `{"$minKey": 1}` / `{"$maxKey": 1}` |
//! | undefined, symbol, code, code with scope, DBPointer | their canonical Extended JSON |
//!
//! Reading plain JSON (a document written over HTTP): an integer is int32 when it fits,
//! else int64, else a double; a number with `.` or an exponent is a double. A user's
//! sub-document that would read back as a wrapper (e.g. `{"$oid": "<24 hex>"}` as data) is
//! stored inside `{"$bunkoDoc": …}`, so nothing is ambiguous. Key order is kept both ways.
//!
//! The MongoDB dialect of `bunko-query` matches this stored form as it is (its comparison
//! reads number wrappers by value, so numbers compare across types); [`numeric_type`]
//! tells the four numeric types apart for `$type`, and [`plain_number`] unwraps one. [`doc_id`] and [`id_value`] map a MongoDB `_id` to the document id
//! and back. [`raw::document`] writes a stored document as BSON bytes straight from its
//! text, as [`from_json`] of the parsed text would encode; [`from_bson::document`] writes a
//! document sent as BSON bytes as its stored JSON, as [`to_json`] of the decoded document,
//! and [`print::body`] prints that JSON's text (and revision term) without the map.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, Decimal128, Document, Regex, Timestamp};
use serde_json::{Map, Number, Value, json};

pub mod from_bson;
pub mod print;
pub mod raw;

/// The escape for a user's sub-document that looks like a type wrapper.
const ESCAPE: &str = "$bunkoDoc";

/// A BSON document as stored JSON.
pub fn to_json(doc: &Document) -> Map<String, Value> {
    doc.iter().map(|(k, v)| (k.clone(), value_to_json(v))).collect()
}

/// A stored JSON object as a BSON document.
pub fn from_json(map: &Map<String, Value>) -> Document {
    map.iter().map(|(k, v)| (k.clone(), value_from_json(v))).collect()
}

/// One BSON value as stored JSON.
pub fn value_to_json(value: &Bson) -> Value {
    match value {
        Bson::Double(d) => double(*d),
        Bson::String(s) => Value::String(s.clone()),
        Bson::Array(items) => Value::Array(items.iter().map(value_to_json).collect()),
        Bson::Document(doc) => object(to_json(doc)),
        Bson::Boolean(b) => Value::Bool(*b),
        Bson::Null => Value::Null,
        Bson::RegularExpression(re) => json!({"$regularExpression": {
            "pattern": re.pattern.as_str(), "options": re.options.as_str()}}),
        Bson::JavaScriptCode(code) => json!({ "$code": code }),
        Bson::JavaScriptCodeWithScope(c) => {
            json!({"$code": c.code, "$scope": Value::Object(to_json(&c.scope))})
        }
        Bson::Int32(i) => Value::from(*i),
        // A plain integer outside int32 reads back as int64, so only small ones need the
        // wrapper; large ones stay as a JSON client wrote them.
        Bson::Int64(i) if i32::try_from(*i).is_err() => Value::from(*i),
        Bson::Int64(i) => json!({"$numberLong": i.to_string()}),
        Bson::Timestamp(ts) => json!({"$timestamp": {"t": ts.time, "i": ts.increment}}),
        Bson::Binary(bin) => json!({"$binary": {
            "base64": STANDARD.encode(&bin.bytes),
            "subType": format!("{:02x}", u8::from(bin.subtype))}}),
        Bson::ObjectId(oid) => json!({ "$oid": oid.to_hex() }),
        Bson::DateTime(dt) => json!({"$date": {"$numberLong": dt.timestamp_millis().to_string()}}),
        Bson::Symbol(s) => json!({ "$symbol": s }),
        Bson::Decimal128(d) => decimal_to_json(d),
        Bson::Undefined => json!({"$undefined": true}),
        Bson::MaxKey => json!({"$maxKey": 1}),
        Bson::MinKey => json!({"$minKey": 1}),
        // The bson crate renders DBPointer's canonical form itself.
        other @ Bson::DbPointer(_) => other.clone().into_canonical_extjson(),
    }
}

/// A converted sub-document as stored: escaped when it would read back as a wrapper.
fn object(map: Map<String, Value>) -> Value {
    let plain = matches!(wrapper(&map), Some(Bson::Document(_)) | None);
    if plain && !(map.len() == 1 && map.contains_key(ESCAPE)) {
        Value::Object(map)
    } else {
        json!({ ESCAPE: map })
    }
}

/// A finite double as a number that reads back as a double; others as `$numberDouble`.
fn double(d: f64) -> Value {
    if !d.is_finite() {
        let text = if d.is_nan() {
            "NaN"
        } else if d > 0.0 {
            "Infinity"
        } else {
            "-Infinity"
        };
        return json!({ "$numberDouble": text });
    }
    double_text(d).parse::<Number>().map_or(Value::Null, Value::Number)
}

/// A finite double's stored text: Rust's shortest form, with `.0` when it has no `.`.
fn double_text(d: f64) -> String {
    let mut text = d.to_string();
    if !text.contains(['.', 'e', 'E', 'i', 'N']) {
        text.push_str(".0");
    }
    text
}

/// How deep a JSON value nests (objects and arrays; 0 for any other value).
pub fn json_depth(value: &Value) -> usize {
    match value {
        Value::Object(m) => 1 + m.values().map(json_depth).max().unwrap_or(0),
        Value::Array(a) => 1 + a.iter().map(json_depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// A Decimal128 as its canonical text, unless that text reads back as other bytes (the
/// encodings IEEE 754 calls non-canonical, all of them zero): those keep their bytes.
fn decimal_to_json(d: &Decimal128) -> Value {
    let text = d.to_string();
    if text.parse::<Decimal128>().ok().as_ref() == Some(d) {
        json!({ "$numberDecimal": text })
    } else {
        json!({ DECIMAL_BYTES: hex::encode(d.bytes()) })
    }
}

/// The wrapper of a Decimal128 kept as bytes ([`decimal_to_json`]).
const DECIMAL_BYTES: &str = "$bunkoDecimal";

fn decimal_from_hex(text: &str) -> Option<Decimal128> {
    Some(Decimal128::from_bytes(hex::decode(text).ok()?.try_into().ok()?))
}

/// One stored JSON value as BSON.
pub fn value_from_json(value: &Value) -> Bson {
    match value {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Number(n) => number(n),
        Value::String(s) => Bson::String(s.clone()),
        Value::Array(items) => Bson::Array(items.iter().map(value_from_json).collect()),
        Value::Object(map) => wrapper(map).unwrap_or_else(|| Bson::Document(from_json(map))),
    }
}

fn number(n: &Number) -> Bson {
    let text = n.to_string();
    if !text.contains(['.', 'e', 'E']) {
        if let Ok(i) = text.parse::<i32>() {
            return Bson::Int32(i);
        }
        if let Ok(i) = text.parse::<i64>() {
            return Bson::Int64(i);
        }
    }
    Bson::Double(text.parse::<f64>().unwrap_or(f64::NAN))
}

/// The value an Extended JSON wrapper stands for; `None` for an ordinary object.
fn wrapper(map: &Map<String, Value>) -> Option<Bson> {
    let mut keys = map.keys();
    let first = keys.next()?;
    if !first.starts_with('$') {
        return None;
    }
    let second = keys.next().map(String::as_str);
    if keys.next().is_some() {
        return None;
    }
    let arg = map.get(first)?;
    match (first.as_str(), second) {
        ("$code", Some("$scope")) => {
            let scope = map.get("$scope")?.as_object()?;
            let code = arg.as_str()?.to_string();
            Some(Bson::JavaScriptCodeWithScope(bson::JavaScriptCodeWithScope {
                code,
                scope: from_json(scope),
            }))
        }
        (_, Some(_)) => None,
        (key, None) => single(key, arg),
    }
}

/// A one-member wrapper `{key: arg}`.
fn single(key: &str, arg: &Value) -> Option<Bson> {
    let text = || arg.as_str();
    Some(match key {
        ESCAPE => Bson::Document(from_json(arg.as_object()?)),
        "$oid" => Bson::ObjectId(ObjectId::parse_str(text()?).ok()?),
        "$numberLong" => Bson::Int64(text()?.parse().ok()?),
        "$numberInt" => Bson::Int32(text()?.parse().ok()?),
        "$numberDouble" => Bson::Double(match text()? {
            "NaN" => f64::NAN,
            "Infinity" => f64::INFINITY,
            "-Infinity" => f64::NEG_INFINITY,
            other => other.parse().ok()?,
        }),
        "$numberDecimal" => Bson::Decimal128(text()?.parse::<Decimal128>().ok()?),
        DECIMAL_BYTES => Bson::Decimal128(decimal_from_hex(text()?)?),
        "$date" => {
            let ms = arg.as_object()?.get("$numberLong")?.as_str()?.parse().ok()?;
            Bson::DateTime(bson::DateTime::from_millis(ms))
        }
        "$binary" => {
            let obj = arg.as_object()?;
            let bytes = STANDARD.decode(obj.get("base64")?.as_str()?).ok()?;
            let subtype = u8::from_str_radix(obj.get("subType")?.as_str()?, 16).ok()?;
            (obj.len() == 2).then_some(())?;
            Bson::Binary(Binary { subtype: BinarySubtype::from(subtype), bytes })
        }
        "$regularExpression" => {
            let obj = arg.as_object()?;
            let pattern = obj.get("pattern")?.as_str()?.to_string().try_into().ok()?;
            let options = obj.get("options")?.as_str()?.to_string().try_into().ok()?;
            (obj.len() == 2).then_some(())?;
            Bson::RegularExpression(Regex { pattern, options })
        }
        "$timestamp" => {
            let obj = arg.as_object()?;
            let part = |k: &str| obj.get(k)?.as_u64().and_then(|v| u32::try_from(v).ok());
            (obj.len() == 2).then_some(())?;
            Bson::Timestamp(Timestamp { time: part("t")?, increment: part("i")? })
        }
        "$minKey" if arg == &json!(1) => Bson::MinKey,
        "$maxKey" if arg == &json!(1) => Bson::MaxKey,
        "$undefined" if arg == &json!(true) => Bson::Undefined,
        "$symbol" => Bson::Symbol(text()?.to_string()),
        "$code" => Bson::JavaScriptCode(text()?.to_string()),
        "$dbPointer" => Bson::try_from(json!({ "$dbPointer": arg })).ok()?,
        _ => return None,
    })
}

/// The BSON numeric type of a stored value (`int`, `long`, `double` or `decimal`, MongoDB's
/// `$type` aliases), or `None` for a value that is no number. The stored form tells them
/// apart (see the table above), so the MongoDB dialect matches the stored form itself.
pub fn numeric_type(value: &Value) -> Option<&'static str> {
    match value {
        Value::Number(n) => Some(match number(n) {
            Bson::Int32(_) => "int",
            Bson::Int64(_) => "long",
            _ => "double",
        }),
        Value::Object(map) if map.len() == 1 => match map.keys().next()?.as_str() {
            "$numberInt" => Some("int"),
            "$numberLong" => Some("long"),
            "$numberDouble" => Some("double"),
            "$numberDecimal" | DECIMAL_BYTES => Some("decimal"),
            _ => None,
        },
        _ => None,
    }
}

/// A stored number as a plain JSON number: int64 and finite Decimal128 wrappers unwrapped
/// (for what reads numbers as JSON numbers: `$mod`, the bit tests); `None` for NaN,
/// ±Infinity and values that are no number.
pub fn plain_number(value: &Value) -> Option<Number> {
    let map = match value {
        Value::Number(n) => return Some(n.clone()),
        Value::Object(map) if map.len() == 1 => map,
        _ => return None,
    };
    let (key, arg) = map.iter().next()?;
    let text = arg.as_str()?;
    match key.as_str() {
        "$numberLong" | "$numberInt" => text.parse::<i64>().ok().map(Number::from),
        "$numberDecimal" => text.parse::<Number>().ok(),
        DECIMAL_BYTES => decimal_from_hex(text)?.to_string().parse::<Number>().ok(),
        _ => None,
    }
}

/// The document id of a MongoDB `_id`: a string is itself, unless it could be read as the
/// Extended JSON of another value (it starts with `{` or `"`, or is `true`, `false` or
/// `null`) or starts with `_` (reserved for CouchDB's design and local documents), in which
/// case it is its JSON string literal; any other value is its canonical
/// Extended JSON text (an ObjectId is `{"$oid":"…"}`).
pub fn doc_id(id: &Bson) -> String {
    match id {
        Bson::String(s) if !looks_encoded(s) && !s.starts_with('_') => s.clone(),
        Bson::String(s) => Value::String(s.clone()).to_string(),
        other => other.clone().into_canonical_extjson().to_string(),
    }
}

/// The MongoDB `_id` of a document id ([`doc_id`] reversed).
pub fn id_value(doc_id: &str) -> Bson {
    if !looks_encoded(doc_id) {
        return Bson::String(doc_id.to_string());
    }
    serde_json::from_str::<Value>(doc_id)
        .ok()
        .and_then(|v| Bson::try_from(v).ok())
        .unwrap_or_else(|| Bson::String(doc_id.to_string()))
}

fn looks_encoded(s: &str) -> bool {
    s.starts_with(['{', '"']) || matches!(s, "true" | "false" | "null")
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    /// Found by the `stored_values_read_back_exactly` fuzz target (issue 11): a Decimal128
    /// whose bytes are a non-canonical zero came back as the canonical zero's bytes.
    #[test]
    fn non_canonical_decimals_keep_their_bytes() {
        let mut bytes = [0u8; 16];
        bytes[15] = 0x60;
        let odd = Bson::Decimal128(Decimal128::from_bytes(bytes));
        let stored = value_to_json(&odd);
        assert_eq!(stored, json!({"$bunkoDecimal": "00000000000000000000000000000060"}));
        assert_eq!(value_from_json(&stored), odd);
        let zero = plain_number(&stored).and_then(|n| n.as_f64());
        assert_eq!(zero, Some(0.0), "it compares as the zero it is");
        assert_eq!(numeric_type(&stored), Some("decimal"));
        let plain = Bson::Decimal128("1.50".parse().unwrap_or(Decimal128::from_bytes([0; 16])));
        assert_eq!(value_to_json(&plain), json!({"$numberDecimal": "1.50"}));
        // A user's sub-document that looks like the new wrapper is escaped like the others.
        let user = doc! {"$bunkoDecimal": "00000000000000000000000000000060"};
        let stored = value_to_json(&Bson::Document(user.clone()));
        assert_eq!(stored["$bunkoDoc"]["$bunkoDecimal"], "00000000000000000000000000000060");
        assert_eq!(value_from_json(&stored), Bson::Document(user));
    }

    fn regex() -> Regex {
        let cstr = |s: &str| bson::raw::CString::try_from(s.to_string());
        match (cstr("^a.c$"), cstr("im")) {
            (Ok(pattern), Ok(options)) => Regex { pattern, options },
            _ => unreachable!("no NUL in the literals"),
        }
    }

    pub(crate) fn every_type() -> Document {
        let uuid = Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] };
        doc! {
            "oid": ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").unwrap_or_default(),
            "i32": 5_i32, "i64": 5_i64, "big": i64::MAX, "d": 5.0, "neg0": -0.0,
            "nan": f64::NAN, "inf": f64::INFINITY, "ninf": f64::NEG_INFINITY, "tiny": 1e-300,
            "dec": "1.50".parse::<Decimal128>().unwrap_or(Decimal128::from_bytes([0; 16])),
            "s": "nul\u{0}byte", "t": true, "n": null,
            "date": bson::DateTime::from_millis(-1), "uuid": uuid,
            "bin": Binary { subtype: BinarySubtype::UserDefined(0x80), bytes: vec![1, 2] },
            "re": Bson::RegularExpression(regex()),
            "ts": Timestamp { time: 1, increment: 2 }, "min": Bson::MinKey, "max": Bson::MaxKey,
            "nested": [[1_i32, [2_i64]], { "z": 1_i32, "a": { "$oid": "x" } }],
            "fake": { "$oid": "65a1b2c3d4e5f60718293a4b" }, "esc": { "$bunkoDoc": {} },
            "dotted.$field": 1_i32,
        }
    }

    #[test]
    fn every_type_round_trips_through_json_text() {
        let doc = every_type();
        let text = serde_json::to_string(&to_json(&doc)).unwrap_or_default();
        let back: Map<String, Value> = serde_json::from_str(&text).unwrap_or_default();
        let again = from_json(&back);
        // Bytes compare NaN and -0.0 exactly (Bson's PartialEq would not).
        assert_eq!(again.to_vec().ok(), doc.to_vec().ok());
        assert!(
            text.contains(r#""i32":5,"i64":{"$numberLong":"5"},"big":9223372036854775807"#),
            "{text}"
        );
        assert!(text.contains(r#""d":5.0,"neg0":-0.0"#), "{text}");
    }

    #[test]
    fn plain_json_reads_as_mongodb_would() {
        let map = json!({"a": 1, "b": 3_000_000_000_i64, "c": 1.5, "d": [true, null]});
        let doc = from_json(map.as_object().unwrap_or(&Map::new()));
        assert_eq!(doc, doc! {"a": 1_i32, "b": 3_000_000_000_i64, "c": 1.5, "d": [true, null]});
    }

    #[test]
    fn stored_numbers_keep_their_type() {
        let doc = doc! {"i": 5_i32, "l": 5_i64, "big": 3_000_000_000_i64, "d": 5.0, "nan": f64::NAN,
        "m": Decimal128::from_bytes([0; 16]), "s": "5"};
        let stored = to_json(&doc);
        let types: Vec<_> = stored.values().map(numeric_type).collect();
        let want = ["int", "long", "long", "double", "double", "decimal"].map(Some);
        assert_eq!(types[..6], want);
        assert_eq!(types[6], None);
        let plain: Vec<_> =
            stored.values().map(|v| plain_number(v).map(|n| n.to_string())).collect();
        assert_eq!(plain[..4], ["5", "5", "3000000000", "5.0"].map(|s| Some(s.to_string())));
        assert_eq!(plain[4], None, "NaN is no JSON number");
    }

    #[test]
    fn ids_map_both_ways_without_collisions() {
        let ids = [
            Bson::String("ada".into()),
            Bson::String("{x".into()),
            Bson::String("\"q".into()),
            Bson::String("true".into()),
            Bson::String("_design/x".into()),
            Bson::Boolean(true),
            Bson::Null,
            Bson::Int32(1),
            Bson::Int64(1),
            Bson::Double(1.0),
            Bson::ObjectId(ObjectId::parse_str("65a1b2c3d4e5f60718293a4b").unwrap_or_default()),
            Bson::Document(doc! {"a": 1_i32}),
        ];
        let mapped: Vec<String> = ids.iter().map(doc_id).collect();
        for (id, text) in ids.iter().zip(&mapped) {
            assert_eq!(&id_value(text), id, "{text}");
        }
        let unique: std::collections::HashSet<_> = mapped.iter().collect();
        assert_eq!(unique.len(), ids.len());
        assert_eq!(mapped[0], "ada");
        assert_eq!(mapped[10], r#"{"$oid":"65a1b2c3d4e5f60718293a4b"}"#);
    }
}
