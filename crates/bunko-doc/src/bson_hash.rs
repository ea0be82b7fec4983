//! MongoDB's hash of a BSON value, as its hashed indexes store it (and as
//! `convertShardKeyToHashed` and `$toHashedIndexKey` show it): hash version 0, seed 0.
//!
//! The hash is the first 8 bytes, read as a little-endian `i64`, of the MD5 of
//!
//! 1. the seed, a little-endian `i32` (0);
//! 2. the value's *canonical type*, a little-endian `i32` (the number MongoDB sorts types
//!    by: MinKey -1, undefined 0, null 5, every number 10, string and symbol 15, object 20,
//!    array 25, binData 30, ObjectId 35, bool 40, date 45, timestamp 47, regex 50, DBPointer
//!    55, code 60, code with scope 65, MaxKey 127), so types that compare equal hash alike;
//! 3. for a number, the value as a little-endian `i64` (a double truncated toward zero: NaN
//!    is 0, 2^63 exactly is `i64::MIN` and larger values `i64::MAX`, as MongoDB's
//!    `safeNumberLongForHash` keeps them for on-disk compatibility), so `2`, `2.0`,
//!    `NumberLong(2)` and `2.9` share a hash; for an object or array, each member in turn
//!    as its canonical type, its name with a NUL, and its value by these rules, then the end
//!    marker (canonical type 0, no name); for anything else the value's BSON bytes (a string
//!    is its `i32` length with the NUL, its bytes, the NUL).

use bson::Bson;
use md5::{Digest, Md5};

/// The hash MongoDB's hashed indexes store for `value`.
pub fn hash64(value: &Bson) -> i64 {
    let mut md5 = Md5::new();
    md5.update(0i32.to_le_bytes());
    add(&mut md5, value, None);
    let digest = md5.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

/// Feeds one element (named inside an object or array) to the hash.
fn add(md5: &mut Md5, value: &Bson, name: Option<&str>) {
    md5.update(canonical_type(value).to_le_bytes());
    if let Some(name) = name {
        md5.update(name.as_bytes());
        md5.update([0]);
    }
    match value {
        Bson::Document(doc) => {
            for (key, member) in doc {
                add(md5, member, Some(key));
            }
            end(md5);
        }
        Bson::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                add(md5, item, Some(&i.to_string()));
            }
            end(md5);
        }
        Bson::JavaScriptCodeWithScope(code) => {
            md5.update(code.code.as_bytes());
            md5.update([0]);
            for (key, member) in &code.scope {
                add(md5, member, Some(key));
            }
            end(md5);
        }
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => {
            md5.update(number_for_hash(value).to_le_bytes());
        }
        other => md5.update(value_bytes(other)),
    }
}

/// The end of an object's members (an EOO element: canonical type 0, no name, no value).
fn end(md5: &mut Md5) {
    md5.update(0i32.to_le_bytes());
}

/// MongoDB's canonical type of a value (the order of its type in comparisons).
fn canonical_type(value: &Bson) -> i32 {
    match value {
        Bson::MinKey => -1,
        Bson::Undefined => 0,
        Bson::Null => 5,
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 127,
    }
}

/// A number as MongoDB's `safeNumberLongForHash` gives it.
fn number_for_hash(value: &Bson) -> i64 {
    /// 2^63, the least double beyond `i64`.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    let d = match value {
        Bson::Int32(n) => return i64::from(*n),
        Bson::Int64(n) => return *n,
        Bson::Double(d) => *d,
        // Decimal128 rounds half to even (its `toLong`); read through its text.
        Bson::Decimal128(d) => d.to_string().parse::<f64>().unwrap_or(f64::NAN).round_ties_even(),
        _ => return 0,
    };
    if d.is_nan() {
        0
    } else if d == TWO_63 {
        i64::MIN
    } else if d > TWO_63 {
        i64::MAX
    } else if d <= -TWO_63 {
        i64::MIN
    } else {
        d as i64
    }
}

/// The bytes of a scalar value as BSON encodes it (without type byte and name).
fn value_bytes(value: &Bson) -> Vec<u8> {
    let mut doc = bson::Document::new();
    doc.insert("", value.clone());
    // A document of one element named "": i32 size, type byte, the name's NUL, the value,
    // the document's closing NUL.
    let bytes = doc.to_vec().unwrap_or_default();
    bytes.get(6..bytes.len().saturating_sub(1)).map(<[u8]>::to_vec).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use bson::oid::ObjectId;
    use bson::{Decimal128, doc};

    use super::*;

    #[test]
    fn hashes_match_the_values_mongodb_documents() {
        // MongoDB's own startup check in `hasher.cpp`: `{check: 42}` hashes to this.
        assert_eq!(hash64(&Bson::Int32(42)), -944302157085130861);
        // The `$toHashedIndexKey` reference page: "string to hash".
        assert_eq!(hash64(&Bson::String("string to hash".into())), 763543691661428748);
    }

    #[test]
    fn numbers_hash_by_their_truncated_integer() {
        let two = hash64(&Bson::Int32(2));
        assert_eq!(hash64(&Bson::Int64(2)), two);
        assert_eq!(hash64(&Bson::Double(2.9)), two);
        assert_eq!(hash64(&Bson::Decimal128("2.0".parse::<Decimal128>().unwrap())), two);
        assert_ne!(hash64(&Bson::Int32(3)), two);
        assert_eq!(hash64(&Bson::Double(f64::NAN)), hash64(&Bson::Int32(0)));
        assert_eq!(hash64(&Bson::Double(9.3e18)), hash64(&Bson::Int64(i64::MAX)));
        assert_eq!(
            hash64(&Bson::Double(9_223_372_036_854_775_808.0)),
            hash64(&Bson::Int64(i64::MIN))
        );
        assert_ne!(hash64(&Bson::Null), hash64(&Bson::Int32(0)));
    }

    #[test]
    fn objects_hash_member_by_member() {
        let a = hash64(&Bson::Document(doc! {"x": 1, "y": "z"}));
        assert_eq!(a, hash64(&Bson::Document(doc! {"x": 1.5, "y": "z"})));
        assert_ne!(a, hash64(&Bson::Document(doc! {"y": "z", "x": 1})), "order counts");
        assert_ne!(a, hash64(&Bson::Document(doc! {"x": 1})));
        let oid = ObjectId::parse_str("5b2be413c06d924ab26ff9ca").unwrap();
        assert_ne!(hash64(&Bson::ObjectId(oid)), hash64(&Bson::String(oid.to_hex())));
        assert_eq!(value_bytes(&Bson::String("ab".into())), vec![3, 0, 0, 0, b'a', b'b', 0]);
        assert_eq!(value_bytes(&Bson::Boolean(true)), vec![1]);
    }
}
