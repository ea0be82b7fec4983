//! `_approx_count_distinct`: a HyperLogLog sketch of the distinct keys (CouchDB:
//! `couch_hyper:new(11)` over `term_to_binary(Key)`, finalized as `round(card)`).
//!
//! Precision 11 gives 2048 six-bit registers and a standard error of about 2.3 %. A key is
//! hashed as its JSON text (key order kept, numbers as JavaScript printed them, so equal
//! terms hash equally) with XXH3-64, which is fixed by its specification: sketches are
//! stored, so the hash must never change. Merging two sketches takes the larger of each
//! register, which is exact: a rereduce over any chunking gives the sketch a single reduce
//! would. The estimate is Ertl's improved raw estimator ("New cardinality estimation
//! algorithms for HyperLogLog sketches", 2017), which needs no bias tables.
//!
//! Intermediate reductions are JSON objects `{"hll": "<base64>"}`; the bytes are a format
//! byte (1 dense: one byte per register; 2 sparse: 3-byte big-endian
//! `index << 6 | rank` entries for the non-zero registers), the precision, then the data.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::error::{Error, Result, internal};

const PRECISION: u8 = 11;
const REGISTERS: usize = 1 << PRECISION;
/// Hash bits left after the register index; ranks go up to `Q + 1`.
const Q: u32 = 64 - PRECISION as u32;
const DENSE: u8 = 1;
const SPARSE: u8 = 2;
const MEMBER: &str = "hll";

/// A HyperLogLog sketch of precision 11.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sketch {
    registers: Vec<u8>,
}

impl Sketch {
    pub(crate) fn new() -> Sketch {
        Sketch { registers: vec![0; REGISTERS] }
    }

    pub(crate) fn insert(&mut self, key: &Value) -> Result<()> {
        let text = serde_json::to_string(key).map_err(internal)?;
        self.insert_hash(xxhash_rust::xxh3::xxh3_64(text.as_bytes()));
        Ok(())
    }

    fn insert_hash(&mut self, hash: u64) {
        let index = (hash >> Q) as usize;
        let rest = hash << PRECISION;
        let rank = (rest.leading_zeros() + 1).min(Q + 1) as u8;
        if let Some(register) = self.registers.get_mut(index) {
            *register = (*register).max(rank);
        }
    }

    pub(crate) fn merge(&mut self, other: &Sketch) {
        for (mine, theirs) in self.registers.iter_mut().zip(&other.registers) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// The cardinality estimate.
    pub(crate) fn estimate(&self) -> f64 {
        let m = REGISTERS as f64;
        let mut histogram = [0u32; Q as usize + 2];
        for &r in &self.registers {
            if let Some(count) = histogram.get_mut(usize::from(r)) {
                *count += 1;
            }
        }
        let count = |k: usize| f64::from(histogram.get(k).copied().unwrap_or(0));
        let mut z = m * tau(1.0 - count(Q as usize + 1) / m);
        for k in (1..=Q as usize).rev() {
            z = 0.5 * (z + count(k));
        }
        z += m * sigma(count(0) / m);
        let alpha = 1.0 / (2.0 * std::f64::consts::LN_2);
        alpha * m * m / z
    }

    pub(crate) fn to_value(&self) -> Value {
        let used = self.registers.iter().filter(|&&r| r != 0).count();
        let mut bytes;
        if used * 3 < REGISTERS {
            bytes = Vec::with_capacity(2 + used * 3);
            bytes.extend([SPARSE, PRECISION]);
            for (index, &rank) in self.registers.iter().enumerate().filter(|(_, r)| **r != 0) {
                let entry = ((index as u32) << 6) | u32::from(rank);
                bytes.extend(&entry.to_be_bytes()[1..]);
            }
        } else {
            bytes = Vec::with_capacity(2 + REGISTERS);
            bytes.extend([DENSE, PRECISION]);
            bytes.extend(&self.registers);
        }
        let mut object = serde_json::Map::new();
        object.insert(MEMBER.into(), Value::String(STANDARD.encode(bytes)));
        Value::Object(object)
    }

    pub(crate) fn from_value(value: &Value) -> Result<Sketch> {
        let invalid = || {
            Error::InvalidValue(format!(
                "_approx_count_distinct cannot rereduce a value that is not its sketch: {value}"
            ))
        };
        let text = value.get(MEMBER).and_then(Value::as_str).ok_or_else(invalid)?;
        let bytes = STANDARD.decode(text).map_err(|_| invalid())?;
        let mut sketch = Sketch::new();
        match bytes.as_slice() {
            [DENSE, PRECISION, registers @ ..] if registers.len() == REGISTERS => {
                sketch.registers.copy_from_slice(registers);
            }
            [SPARSE, PRECISION, entries @ ..] if entries.len() % 3 == 0 => {
                for entry in entries.chunks_exact(3) {
                    let word = entry.iter().fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
                    let (index, rank) = ((word >> 6) as usize, (word & 0x3f) as u8);
                    let register = sketch.registers.get_mut(index).ok_or_else(invalid)?;
                    *register = (*register).max(rank);
                }
            }
            _ => return Err(invalid()),
        }
        Ok(sketch)
    }
}

/// Ertl's σ(x) = x + Σ_{k≥1} x^(2^k) 2^(k-1).
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let previous = z;
        z += x * y;
        y += y;
        if z == previous {
            return z;
        }
    }
}

/// Ertl's τ(x) = (1 - x - Σ_{k≥1} (1 - x^(2^-k))² 2^-k) / 3.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let previous = z;
        y *= 0.5;
        z -= (1.0 - x).powi(2) * y;
        if z == previous {
            return z / 3.0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_sketch_counts_zero() {
        assert_eq!(Sketch::new().estimate(), 0.0);
    }

    #[test]
    fn encodings_round_trip() -> Result<()> {
        for n in [0u64, 5, 500, 100_000] {
            let mut sketch = Sketch::new();
            for i in 0..n {
                sketch.insert(&Value::from(i))?;
            }
            assert_eq!(Sketch::from_value(&sketch.to_value())?, sketch, "{n}");
        }
        Ok(())
    }

    #[test]
    fn non_sketches_are_refused() {
        assert!(Sketch::from_value(&Value::from(3)).is_err());
        assert!(Sketch::from_value(&serde_json::json!({"hll": "AAAA"})).is_err());
    }
}
