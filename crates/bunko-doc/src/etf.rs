//! The Erlang external term format of a JSON value as CouchDB holds it (EJSON, decoded by
//! jiffy), the bytes CouchDB hashes for a revision id (`couch_db:new_revid`, which calls
//! `term_to_binary(Term, [{minor_version, 1}])`).
//!
//! | JSON | EJSON | encoding |
//! |---|---|---|
//! | `null`, `true`, `false` | atoms | `ATOM_EXT` (100), 2-byte length, latin-1 name |
//! | integer text (no `.`, `e`, `E`) | integer | `SMALL_INTEGER_EXT` (97) for 0..=255, `INTEGER_EXT` (98) for i32, else `SMALL_BIG_EXT` (110) / `LARGE_BIG_EXT` (111): sign, little-endian magnitude |
//! | other number text | float | `NEW_FLOAT_EXT` (70), IEEE 754 big-endian |
//! | string | binary (UTF-8) | `BINARY_EXT` (109), 4-byte length |
//! | array | list | `NIL_EXT` (106) when empty; `STRING_EXT` (107), 2-byte count, one byte each, when it has at most 65535 elements that are all integers in 0..=255 (Erlang writes such a list as a byte string); else `LIST_EXT` (108), 4-byte count, elements, `NIL_EXT` |
//! | object | `{[{Key, Value}, …]}` | `SMALL_TUPLE_EXT` (104) of arity 1 holding the list of 2-tuples, keys in document order |
//!
//! The whole term is preceded by the version byte 131. Checked against CouchDB 3.4.3 (on
//! Erlang/OTP 25) revision ids.

use serde_json::{Map, Value};

/// Appends the external format of a term to a buffer.
#[derive(Debug, Default)]
pub struct Writer(Vec<u8>);

impl Writer {
    /// A buffer holding the version byte.
    pub fn new() -> Self {
        Writer(vec![131])
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }

    /// How many bytes are written so far.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing is written (a [`Writer::default`] before its first term).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Drops what was written after the first `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        self.0.truncate(len);
    }

    /// Sets the count of the [`Writer::list_header`] written at `at` to `len` (a list
    /// whose length was not known when it began).
    pub fn patch_list_len(&mut self, at: usize, len: usize) {
        if let Some(count) = self.0.get_mut(at + 1..at + 5) {
            count.copy_from_slice(&(len as u32).to_be_bytes());
        }
    }

    /// Appends a term already encoded (without the version byte).
    pub fn encoded(&mut self, term: &[u8]) -> &mut Self {
        self.0.extend_from_slice(term);
        self
    }

    pub fn atom(&mut self, name: &str) -> &mut Self {
        self.0.push(100);
        self.0.extend_from_slice(&(name.len() as u16).to_be_bytes());
        self.0.extend_from_slice(name.as_bytes());
        self
    }

    /// An integer of any size, given as decimal text (an optional `-`, then digits).
    pub fn integer_text(&mut self, text: &str) -> &mut Self {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(d) => (true, d),
            None => (false, text.strip_prefix('+').unwrap_or(text)),
        };
        if let Ok(v) = text.parse::<i64>() {
            return self.integer(v);
        }
        // Magnitude as little-endian base-256 digits: repeated division of the decimal text.
        let mut decimal: Vec<u8> = digits.bytes().map(|b| b.wrapping_sub(b'0')).collect();
        let mut bytes = Vec::new();
        while decimal.iter().any(|d| *d != 0) {
            let mut rest = 0u32;
            for d in decimal.iter_mut() {
                let cur = rest * 10 + u32::from(*d);
                *d = (cur / 256) as u8;
                rest = cur % 256;
            }
            bytes.push(rest as u8);
        }
        self.big(negative, &bytes)
    }

    pub fn integer(&mut self, v: i64) -> &mut Self {
        if (0..=255).contains(&v) {
            self.0.extend_from_slice(&[97, v as u8]);
        } else if let Ok(small) = i32::try_from(v) {
            self.0.push(98);
            self.0.extend_from_slice(&small.to_be_bytes());
        } else {
            let mut magnitude = v.unsigned_abs();
            let mut bytes = Vec::new();
            while magnitude > 0 {
                bytes.push((magnitude & 0xff) as u8);
                magnitude >>= 8;
            }
            self.big(v < 0, &bytes);
        }
        self
    }

    fn big(&mut self, negative: bool, bytes: &[u8]) -> &mut Self {
        match u8::try_from(bytes.len()) {
            Ok(n) => self.0.extend_from_slice(&[110, n]),
            Err(_) => {
                self.0.push(111);
                self.0.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
            }
        }
        self.0.push(u8::from(negative));
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn float(&mut self, v: f64) -> &mut Self {
        self.0.push(70);
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn binary(&mut self, bytes: &[u8]) -> &mut Self {
        self.0.push(109);
        self.0.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
        self.0.extend_from_slice(bytes);
        self
    }

    /// The header of a proper list of `len` elements; call [`Writer::nil`] after them
    /// (an empty list is just `nil`).
    pub fn list_header(&mut self, len: usize) -> &mut Self {
        self.0.push(108);
        self.0.extend_from_slice(&(len as u32).to_be_bytes());
        self
    }

    /// An Erlang string (a list of bytes): `STRING_EXT` (107), or `NIL_EXT` when empty.
    pub fn string(&mut self, bytes: &[u8]) -> &mut Self {
        let Ok(len) = u16::try_from(bytes.len()) else {
            self.list_header(bytes.len());
            for b in bytes {
                self.integer(i64::from(*b));
            }
            return self.nil();
        };
        if len == 0 {
            return self.nil();
        }
        self.0.push(107);
        self.0.extend_from_slice(&len.to_be_bytes());
        self.0.extend_from_slice(bytes);
        self
    }

    pub fn nil(&mut self) -> &mut Self {
        self.0.push(106);
        self
    }

    pub fn tuple_header(&mut self, arity: u8) -> &mut Self {
        self.0.extend_from_slice(&[104, arity]);
        self
    }

    /// A JSON value as its EJSON term.
    pub fn json(&mut self, value: &Value) -> &mut Self {
        match value {
            Value::Null => self.atom("null"),
            Value::Bool(b) => self.atom(if *b { "true" } else { "false" }),
            Value::Number(n) => {
                // The text as written (`arbitrary_precision`): no allocation per number.
                let text = n.as_str();
                if text.contains(['.', 'e', 'E']) {
                    self.float(text.parse().unwrap_or(0.0))
                } else {
                    self.integer_text(text)
                }
            }
            Value::String(s) => self.binary(s.as_bytes()),
            Value::Array(items) if items.is_empty() => self.nil(),
            Value::Array(items) if let Some(bytes) = byte_list(items) => {
                self.0.push(107);
                self.0.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                self.0.extend_from_slice(&bytes);
                self
            }
            Value::Array(items) => {
                self.list_header(items.len());
                for item in items {
                    self.json(item);
                }
                self.nil()
            }
            Value::Object(map) => self.object(map),
        }
    }

    /// A JSON object as its EJSON term `{[{Key, Value}, …]}`, keys in document order.
    pub fn object(&mut self, map: &Map<String, Value>) -> &mut Self {
        self.tuple_header(1);
        if !map.is_empty() {
            self.list_header(map.len());
            for (k, v) in map {
                self.tuple_header(2).binary(k.as_bytes()).json(v);
            }
        }
        self.nil()
    }
}

/// The bytes of a list that Erlang encodes as `STRING_EXT`: at most 65535 elements, each
/// an integer (not a float) in 0..=255.
fn byte_list(items: &[Value]) -> Option<Vec<u8>> {
    if items.len() > usize::from(u16::MAX) {
        return None;
    }
    items
        .iter()
        .map(|item| {
            let Value::Number(n) = item else { return None };
            let text = n.as_str();
            if text.contains(['.', 'e', 'E']) {
                return None;
            }
            text.parse::<i64>().ok().and_then(|v| u8::try_from(v).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_pick_the_smallest_encoding() {
        let enc = |t: &str| {
            let mut w = Writer::default();
            w.integer_text(t);
            w.finish()
        };
        assert_eq!(enc("7"), [97, 7]);
        assert_eq!(enc("-5"), [98, 255, 255, 255, 251]);
        assert_eq!(enc("123456789012"), [110, 5, 0, 0x14, 0x1a, 0x99, 0xbe, 0x1c]);
        assert_eq!(enc("-2147483649"), [110, 4, 1, 1, 0, 0, 0x80]);
        assert_eq!(enc("18446744073709551616"), [110, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    }
}
