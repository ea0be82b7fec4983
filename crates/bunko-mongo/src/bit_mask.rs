//! The argument of a bitwise query operator (`$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear`,
//! `$bitsAnyClear`) as the list of bit positions the selector holds
//! (`bunko_query::Cond::Bits`), refused with MongoDB's codes and messages
//! (`expression_parser.cpp`'s `parseBitTest`): a numeric mask must be a non-negative
//! integer within 64 bits (`FailedToParse`), each listed position a non-negative integer
//! within 32 bits (`BadValue`), and anything but a number, a list or BinData is `BadValue`.

use bson::Bson;
use bunko_query::positions_of;
use serde_json::{Value, json};

use crate::error::MongoError;

/// The positions `arg` names, as selector JSON; `field` names the path for the error.
pub fn positions(field: &str, op: &str, arg: &Bson) -> Result<Value, MongoError> {
    let positions: Vec<u64> = match arg {
        Bson::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let position = integer(&i.to_string(), item)
                    .and_then(|n| u32::try_from(n).map_err(|_| too_big(i, item)));
                position.map(u64::from).map_err(|reason| {
                    MongoError::bad_value(format!("Failed to parse bit position. {reason}"))
                })
            })
            .collect::<Result<_, _>>()?,
        Bson::Binary(bin) => positions_of(&bin.bytes),
        number if number_of(number).is_some() => {
            let mask = integer(op, number).map_err(MongoError::failed_to_parse)?;
            (0..64).filter(|bit| (mask >> bit) & 1 == 1).collect()
        }
        other => {
            return Err(MongoError::bad_value(format!(
                "{field} takes an Array, a number, or a BinData but received: {op}: {}",
                shown(other)
            )));
        }
    };
    Ok(json!(positions))
}

/// A number as a double, if it is one.
fn number_of(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(n) => Some(f64::from(*n)),
        Bson::Int64(n) => Some(*n as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// `v` as a non-negative 64-bit integer, or MongoDB's reason why not (the element shown
/// as `name: value`).
fn integer(name: &str, v: &Bson) -> Result<i64, String> {
    let elem = || format!("{name}: {}", shown(v));
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        other => {
            let Some(d) = number_of(other) else {
                return Err(format!("Expected a number in: {}", elem()));
            };
            if d.is_nan() {
                return Err(format!("Expected an integer, but found NaN in: {}", elem()));
            }
            if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d) {
                return Err(format!("Cannot represent as a 64-bit integer: {}", elem()));
            }
            if d.fract() != 0.0 {
                return Err(format!("Expected an integer: {}", elem()));
            }
            d as i64
        }
    };
    if n < 0 {
        return Err(format!("Expected a non-negative number in: {}", elem()));
    }
    Ok(n)
}

fn too_big(i: usize, v: &Bson) -> String {
    format!("Cannot represent {i}: {} in an int", shown(v))
}

/// A value as MongoDB prints a BSON element's value in messages.
fn shown(v: &Bson) -> String {
    match v {
        Bson::String(s) => json!(s).to_string(),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => format!("{d:.1}"),
        Bson::Double(d) => d.to_string(),
        Bson::Int32(n) => n.to_string(),
        Bson::Int64(n) => n.to_string(),
        Bson::Boolean(b) => b.to_string(),
        Bson::Null => "null".to_string(),
        other => other.clone().into_relaxed_extjson().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use bson::{Binary, spec::BinarySubtype};

    use super::*;

    fn refused(arg: Bson) -> Option<(i32, String)> {
        positions("value", "$bitsAllClear", &arg).err().map(|e| (e.code, e.errmsg))
    }

    #[test]
    fn masks_become_positions() {
        assert_eq!(positions("a", "$bitsAllSet", &Bson::Int32(50)).ok(), Some(json!([1, 4, 5])));
        assert_eq!(positions("a", "$bitsAllSet", &Bson::Double(2.0)).ok(), Some(json!([1])));
        let bin = Bson::Binary(Binary { subtype: BinarySubtype::Generic, bytes: vec![0x30] });
        assert_eq!(positions("a", "$bitsAllSet", &bin).ok(), Some(json!([4, 5])));
        let list = Bson::Array(vec![Bson::Int32(1), Bson::Int64(5), Bson::Double(200.0)]);
        assert_eq!(positions("a", "$bitsAllSet", &list).ok(), Some(json!([1, 5, 200])));
    }

    #[test]
    fn bad_masks_get_mongodbs_errors() {
        let bad = |code, msg: &str| Some((code, msg.to_string()));
        assert_eq!(
            refused(Bson::String("123".into())),
            bad(
                2,
                r#"value takes an Array, a number, or a BinData but received: $bitsAllClear: "123""#
            )
        );
        assert_eq!(refused(Bson::Double(1.2)), bad(9, "Expected an integer: $bitsAllClear: 1.2"));
        assert_eq!(
            refused(Bson::Int32(-1)),
            bad(9, "Expected a non-negative number in: $bitsAllClear: -1")
        );
        assert_eq!(
            refused(Bson::Array(vec![Bson::Int32(-1)])),
            bad(2, "Failed to parse bit position. Expected a non-negative number in: 0: -1")
        );
        assert_eq!(
            refused(Bson::Array(vec![Bson::Int32(1), Bson::String("123".into())])),
            bad(2, r#"Failed to parse bit position. Expected a number in: 1: "123""#)
        );
    }
}
