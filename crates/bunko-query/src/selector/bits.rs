//! MongoDB's bitwise query operators (`$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear`,
//! `$bitsAnyClear`), Mongo dialect only.
//!
//! The front end turns every bitmask form MongoDB takes (a non-negative integer, a BinData,
//! a list of positions) into the sorted list of bit positions it names; the selector holds
//! that list. A value is tested as MongoDB's `BitTestMatchExpression` tests it: a number
//! must be an integer that a signed 64-bit integer holds (a fraction, NaN or a larger
//! magnitude never matches), and is sign-extended (position 200 of a negative number is
//! set); BinData is an unsigned little-endian number of any length (the first byte holds
//! positions 0..8; positions past its end are clear). Any other value never matches.

use bson::Bson;
use serde_json::Value;

/// Which bits must be set or clear.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BitTest {
    AllSet,
    AnySet,
    AllClear,
    AnyClear,
}

impl BitTest {
    /// The test an operator names.
    pub fn of(op: &str) -> Option<BitTest> {
        Some(match op {
            "$bitsAllSet" => BitTest::AllSet,
            "$bitsAnySet" => BitTest::AnySet,
            "$bitsAllClear" => BitTest::AllClear,
            "$bitsAnyClear" => BitTest::AnyClear,
            _ => return None,
        })
    }

    /// The operator's name.
    pub fn name(self) -> &'static str {
        match self {
            BitTest::AllSet => "$bitsAllSet",
            BitTest::AnySet => "$bitsAnySet",
            BitTest::AllClear => "$bitsAllClear",
            BitTest::AnyClear => "$bitsAnyClear",
        }
    }

    /// Whether `v` (in the matching form) passes the test of `positions`.
    pub fn matches(self, positions: &[u64], v: &Value) -> bool {
        let bit: Box<dyn Fn(u64) -> bool> = match v {
            Value::Number(_) => match integer(v) {
                Some(n) => Box::new(move |p| if p >= 64 { n < 0 } else { (n >> p) & 1 == 1 }),
                None => return false,
            },
            Value::Object(map) if map.contains_key("$binary") => {
                match bunko_doc::ejson::value_from_json(v) {
                    Bson::Binary(bin) => Box::new(move |p| {
                        let byte = usize::try_from(p / 8).ok().and_then(|i| bin.bytes.get(i));
                        byte.is_some_and(|b| (b >> (p % 8)) & 1 == 1)
                    }),
                    _ => return false,
                }
            }
            _ => return false,
        };
        let mut each = positions.iter().map(|&p| bit(p));
        match self {
            BitTest::AllSet => each.all(|set| set),
            BitTest::AnySet => each.any(|set| set),
            BitTest::AllClear => each.all(|set| !set),
            BitTest::AnyClear => each.any(|set| !set),
        }
    }
}

/// A number as the signed 64-bit integer it is, if it is one.
fn integer(v: &Value) -> Option<i64> {
    if let Some(n) = v.as_i64() {
        return Some(n);
    }
    let d = v.as_f64()?;
    // 2^63 is the first double past `i64::MAX`; `-2^63` is `i64::MIN` itself.
    let fits = d.fract() == 0.0
        && (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d);
    fits.then_some(d as i64)
}

/// The positions of the set bits of `bytes` read as an unsigned little-endian number.
pub fn positions_of(bytes: &[u8]) -> Vec<u64> {
    let mut out = Vec::new();
    for (i, byte) in bytes.iter().enumerate() {
        for bit in 0..8 {
            if (byte >> bit) & 1 == 1 {
                out.push(i as u64 * 8 + bit);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn bin(bytes: &[u8]) -> Value {
        bunko_doc::ejson::value_to_json(&Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: bytes.to_vec(),
        }))
    }

    #[test]
    fn numbers_are_sign_extended_integers_and_bindata_is_little_endian() {
        use BitTest::*;
        // 54 = 0b110110.
        assert!(AllSet.matches(&[1, 2, 4, 5], &json!(54)));
        assert!(!AllSet.matches(&[0, 1], &json!(54)));
        assert!(AnySet.matches(&[0, 1], &json!(54)));
        assert!(AllClear.matches(&[0, 3], &json!(54)));
        assert!(AnyClear.matches(&[0, 1], &json!(54)));
        assert!(!AnyClear.matches(&[1, 2], &json!(54)));
        assert!(AllSet.matches(&[0, 63, 200], &json!(-1)), "a negative number is sign-extended");
        assert!(AllClear.matches(&[200], &json!(5)));
        assert!(AllSet.matches(&[1], &serde_json::from_str::<Value>("2.0").unwrap_or_default()));
        assert!(!AnySet.matches(&[0, 1, 2], &json!(2.5)), "a fraction never matches");
        assert!(!AllClear.matches(&[0], &json!(1e19)), "past 64 bits never matches");
        assert!(!AllClear.matches(&[0], &json!("0")), "a string never matches");
        // BinData 0x20 0x01: positions 5 and 8.
        assert!(AllSet.matches(&[5, 8], &bin(&[0x20, 0x01])));
        assert!(AllClear.matches(&[0, 9, 100], &bin(&[0x20, 0x01])));
        assert!(!AnySet.matches(&[64], &bin(&[0xff])));
        // No positions: every bit of none is set and clear.
        assert!(AllSet.matches(&[], &json!(0)) && AllClear.matches(&[], &json!(0)));
        assert!(!AnySet.matches(&[], &json!(7)) && !AnyClear.matches(&[], &json!(7)));
        assert_eq!(positions_of(&[0x20, 0x01]), vec![5, 8]);
    }
}
