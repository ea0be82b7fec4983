//! The order-preserving key codec: every storage key is a sequence of typed components
//! encoded so that comparing the encoded bytes compares the components in order.
//!
//! | component | encoding | order |
//! |---|---|---|
//! | tag `u8` | the byte itself | numeric |
//! | `u64` | 8 bytes big-endian | numeric |
//! | bytes / string | each `0x00` becomes `0x00 0xff`; then the terminator `0x00 0x01` | bytewise, shorter first |
//!
//! The escaping keeps a component's end unambiguous, so a composite key such as
//! `(db, doc_id, rev)` sorts by `db`, then `doc_id` bytewise, then `rev`, and all keys of one
//! `doc_id` form a contiguous range. [`KeyWriter::bytes_prefix`] encodes bytes *without* the
//! terminator, giving the range of every component that starts with them (how a partition
//! `p` maps to the range of ids `p:…`).

use crate::{Error, Result};

const ESCAPE: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xff;
const TERMINATOR: u8 = 0x01;

/// Builds an encoded key component by component.
#[derive(Debug, Default, Clone)]
pub struct KeyWriter(Vec<u8>);

impl KeyWriter {
    pub fn new(tag: u8) -> Self {
        Self(vec![tag])
    }

    /// Continues a key whose bytes were built elsewhere (e.g. by `collate::encode`).
    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    pub fn u8(mut self, v: u8) -> Self {
        self.0.push(v);
        self
    }

    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bytes(mut self, v: &[u8]) -> Self {
        push_escaped(&mut self.0, v);
        self.0.extend_from_slice(&[ESCAPE, TERMINATOR]);
        self
    }

    pub fn str(self, v: &str) -> Self {
        self.bytes(v.as_bytes())
    }

    /// Appends `v` escaped but unterminated: the result is a prefix of the encoding of
    /// every byte string that starts with `v`. Nothing may follow it.
    pub fn bytes_prefix(mut self, v: &[u8]) -> Vec<u8> {
        push_escaped(&mut self.0, v);
        self.0
    }

    pub fn finish(self) -> Vec<u8> {
        self.0
    }
}

fn push_escaped(out: &mut Vec<u8>, v: &[u8]) {
    for &b in v {
        out.push(b);
        if b == ESCAPE {
            out.push(ESCAPED_ZERO);
        }
    }
}

/// Reads an encoded key component by component, in the order it was written.
#[derive(Debug)]
pub struct KeyReader<'a> {
    rest: &'a [u8],
}

impl<'a> KeyReader<'a> {
    pub fn new(key: &'a [u8]) -> Self {
        Self { rest: key }
    }

    pub fn u8(&mut self) -> Result<u8> {
        let (&first, rest) = self.rest.split_first().ok_or_else(|| corrupt("u8"))?;
        self.rest = rest;
        Ok(first)
    }

    pub fn u64(&mut self) -> Result<u64> {
        let (head, rest) = self.rest.split_at_checked(8).ok_or_else(|| corrupt("u64"))?;
        let bytes: [u8; 8] = head.try_into().map_err(|_| corrupt("u64"))?;
        self.rest = rest;
        Ok(u64::from_be_bytes(bytes))
    }

    pub fn bytes(&mut self) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut iter = self.rest.iter().enumerate();
        while let Some((_, &b)) = iter.next() {
            if b != ESCAPE {
                out.push(b);
                continue;
            }
            match iter.next() {
                Some((_, &ESCAPED_ZERO)) => out.push(ESCAPE),
                Some((i, &TERMINATOR)) => {
                    self.rest = self.rest.get(i + 1..).unwrap_or_default();
                    return Ok(out);
                }
                _ => return Err(corrupt("escape")),
            }
        }
        Err(corrupt("unterminated bytes"))
    }

    pub fn string(&mut self) -> Result<String> {
        String::from_utf8(self.bytes()?).map_err(|_| corrupt("utf-8"))
    }

    /// Fails unless the whole key has been read.
    pub fn done(&self) -> Result<()> {
        if self.rest.is_empty() { Ok(()) } else { Err(corrupt("trailing bytes")) }
    }
}

fn corrupt(what: &str) -> Error {
    Error::BadRequest(format!("corrupt key: bad {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(id: &[u8], n: u64) -> Vec<u8> {
        KeyWriter::new(2).u64(7).bytes(id).u64(n).finish()
    }

    /// Golden order: the encoded keys must sort exactly as the listed components do.
    #[test]
    fn composite_keys_sort_as_their_components() {
        let ordered: &[(&[u8], u64)] = &[
            (b"", 0),
            (b"", 9),
            (b"\x00", 0),
            (b"\x00\x00", 0),
            (b"\x00\x01", 0),
            (b"\x01", 0),
            (b"a", 0),
            (b"a", u64::MAX),
            (b"a\x00", 0),
            (b"a\x00b", 0),
            (b"a\x01", 0),
            (b"ab", 0),
            (b"b", 0),
            (b"bridge-1234:device-1", 0),
            (b"bridge-1234:device-2", 0),
            (b"\xff", 0),
            (b"\xff\xff", 0),
        ];
        let encoded: Vec<Vec<u8>> = ordered.iter().map(|(id, n)| enc(id, *n)).collect();
        let mut sorted = encoded.clone();
        sorted.sort();
        assert_eq!(encoded, sorted);
    }

    #[test]
    fn round_trip() -> Result<()> {
        for id in [&b""[..], b"\x00", b"a\x00\xff\x01", b"plain", b"\xff\x00\x00"] {
            let key = enc(id, 42);
            let mut r = KeyReader::new(&key);
            assert_eq!((r.u8()?, r.u64()?, r.bytes()?, r.u64()?), (2, 7, id.to_vec(), 42));
            r.done()?;
        }
        Ok(())
    }

    #[test]
    fn prefix_covers_exactly_the_ids_starting_with_it() {
        let prefix = KeyWriter::new(2).u64(7).bytes_prefix(b"p1:");
        for (id, inside) in [
            (&b"p1:a"[..], true),
            (b"p1:", true),
            (b"p1:\x00", true),
            (b"p1", false),
            (b"p10:a", false),
            (b"p2:a", false),
        ] {
            assert_eq!(enc(id, 0).starts_with(&prefix), inside, "{id:?}");
        }
    }

    #[test]
    fn truncated_keys_are_errors_not_panics() {
        let key = enc(b"abc", 1);
        for cut in 0..key.len() {
            let mut r = KeyReader::new(&key[..cut]);
            let whole = r.u8().and_then(|_| r.u64()).and_then(|_| r.bytes()).and_then(|_| r.u64());
            assert!(whole.is_err(), "cut at {cut}");
        }
    }
}
