//! A document sent as BSON bytes printed as its stored JSON text, together with the EJSON
//! term its revision id hashes ([`crate::etf`]), in one pass over the bytes and without a
//! `serde_json` map in between: an insert's document goes to the engine as a
//! [`Printed`] body. The text is byte for byte what [`to_json`](super::to_json) of the
//! decoded document serialises to, and the term what [`etf::Writer::object`] writes for
//! that map.
//!
//! Strings, numbers, booleans, null and plain documents and arrays are printed from the
//! bytes (strings escaped by `serde_json`'s own serialiser); every other value (a type
//! wrapper, a sub-document whose first key starts with `$`, which may need the
//! `$bunkoDoc` escape) is converted by [`from_bson::value`](super::from_bson::value) as before
//! and printed from that value. A key repeated in one document (which the map would keep at
//! its first place with its last value) makes [`body`] answer `None`, and the caller
//! converts the document the old way ([`super::from_bson`]).

use bson::error::Error;
use bson::raw::{RawArray, RawBsonRef, RawDocument};

use crate::body::Printed;
use crate::etf;

/// A document's body printed ([`body`]).
#[derive(Debug)]
pub struct Body {
    pub printed: Printed,
    /// How deep the sent members nest as BSON (1 for a document of scalars).
    pub depth: usize,
    /// How deep the deepest member's stored JSON nests (0 for scalars only).
    pub json_depth: usize,
}

/// The members of `doc` (but `skip`) printed as a stored body; `None` when a key repeats
/// in `doc` or any document in it.
pub fn body(doc: &RawDocument, skip: Option<&str>) -> Result<Option<Body>, Error> {
    let json = Vec::with_capacity(doc.as_bytes().len() + 64);
    let mut printer = Printer { json, term: etf::Writer::default() };
    let Some((depth, json_depth)) = printer.members(doc, skip)? else { return Ok(None) };
    let printed = Printed { json: printer.json, term: printer.term.finish() };
    Ok(Some(Body { printed, depth, json_depth: json_depth.saturating_sub(1) }))
}

struct Printer {
    json: Vec<u8>,
    term: etf::Writer,
}

/// How deep a printed value nests: as sent (BSON) and as stored (JSON); `None` when a key
/// repeated.
type Depths = Option<(usize, usize)>;

impl Printer {
    /// `{…}` and `{[{Key, Value}, …]}` of `doc`'s members (but `skip`).
    fn members(&mut self, doc: &RawDocument, skip: Option<&str>) -> Result<Depths, Error> {
        let mut seen = Seen::default();
        let (mut bson_depth, mut json_depth) = (0, 0);
        self.json.push(b'{');
        self.term.tuple_header(1);
        let at = self.term.len();
        self.term.list_header(0);
        let mut count = 0;
        for member in doc {
            let (key, item) = member?;
            let key = key.as_str();
            if !seen.first(key) {
                return Ok(None);
            }
            if Some(key) == skip {
                continue;
            }
            if count > 0 {
                self.json.push(b',');
            }
            self.string(key);
            self.json.push(b':');
            self.term.tuple_header(2).binary(key.as_bytes());
            let Some((b, j)) = self.value(item)? else { return Ok(None) };
            (bson_depth, json_depth) = (bson_depth.max(b), json_depth.max(j));
            count += 1;
        }
        self.json.push(b'}');
        match count {
            0 => self.term.truncate(at),
            n => self.term.patch_list_len(at, n),
        }
        self.term.nil();
        Ok(Some((1 + bson_depth, 1 + json_depth)))
    }

    fn value(&mut self, item: RawBsonRef<'_>) -> Result<Depths, Error> {
        match item {
            RawBsonRef::String(s) => {
                self.string(s);
                self.term.binary(s.as_bytes());
            }
            RawBsonRef::Int32(i) => self.integer(i64::from(i)),
            RawBsonRef::Int64(i) if i32::try_from(i).is_err() => self.integer(i),
            RawBsonRef::Double(d) if d.is_finite() => {
                self.json.extend_from_slice(super::double_text(d).as_bytes());
                self.term.float(d);
            }
            RawBsonRef::Boolean(b) => {
                let name = if b { "true" } else { "false" };
                self.json.extend_from_slice(name.as_bytes());
                self.term.atom(name);
            }
            RawBsonRef::Null => {
                self.json.extend_from_slice(b"null");
                self.term.atom("null");
            }
            RawBsonRef::Document(doc) if !starts_with_dollar(doc)? => {
                return self.members(doc, None);
            }
            RawBsonRef::Array(items) => return self.array(items),
            other => return self.converted(other),
        }
        Ok(Some((0, 0)))
    }

    /// A JSON string as `serde_json` escapes it.
    fn string(&mut self, s: &str) {
        // Writing to a `Vec` cannot fail, and a `str` always serialises.
        let _ = serde_json::to_writer(&mut self.json, s);
    }

    fn integer(&mut self, i: i64) {
        self.json.extend_from_slice(i.to_string().as_bytes());
        self.term.integer(i);
    }

    /// `[…]` and its list term: `nil` when empty, a byte string when every element is an
    /// int32 in 0..=255 (as [`etf::Writer::json`] writes such a list).
    fn array(&mut self, items: &RawArray) -> Result<Depths, Error> {
        let (mut bson_depth, mut json_depth) = (0, 0);
        self.json.push(b'[');
        let at = self.term.len();
        self.term.list_header(0);
        let mut bytes = Some(Vec::new());
        let mut count = 0;
        for item in items {
            let item = item?;
            if count > 0 {
                self.json.push(b',');
            }
            bytes = match (bytes, item) {
                (Some(mut b), RawBsonRef::Int32(i)) if b.len() < usize::from(u16::MAX) => {
                    u8::try_from(i).ok().map(|i| {
                        b.push(i);
                        b
                    })
                }
                _ => None,
            };
            let Some((b, j)) = self.value(item)? else { return Ok(None) };
            (bson_depth, json_depth) = (bson_depth.max(b), json_depth.max(j));
            count += 1;
        }
        self.json.push(b']');
        match (count, bytes) {
            (0, _) => {
                self.term.truncate(at);
                self.term.nil();
            }
            (_, Some(bytes)) => {
                self.term.truncate(at);
                self.term.string(&bytes);
            }
            (n, None) => {
                self.term.patch_list_len(at, n);
                self.term.nil();
            }
        }
        Ok(Some((1 + bson_depth, 1 + json_depth)))
    }

    /// A value printed from its old conversion ([`super::from_bson::value`]).
    fn converted(&mut self, item: RawBsonRef<'_>) -> Result<Depths, Error> {
        let (json, depth) = super::from_bson::value(item)?;
        // Writing a `Value` to a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut self.json, &json);
        self.term.json(&json);
        Ok(Some((depth, super::json_depth(&json))))
    }
}

/// Whether a sub-document's first key starts with `$` (then it may read back as a type
/// wrapper and is converted the old way, which escapes it when needed).
fn starts_with_dollar(doc: &RawDocument) -> Result<bool, Error> {
    match doc.into_iter().next() {
        Some(member) => Ok(member?.0.as_str().starts_with('$')),
        None => Ok(false),
    }
}

/// The keys of one document so far: a linear search while there are few.
#[derive(Default)]
struct Seen<'a> {
    keys: Vec<&'a str>,
    set: std::collections::HashSet<&'a str>,
}

impl<'a> Seen<'a> {
    const LINEAR: usize = 32;

    /// Whether `key` is new (then it is recorded).
    fn first(&mut self, key: &'a str) -> bool {
        if self.keys.len() < Self::LINEAR {
            if self.keys.contains(&key) {
                return false;
            }
            self.keys.push(key);
            return true;
        }
        if self.set.is_empty() {
            self.set.extend(self.keys.iter().copied());
        }
        self.set.insert(key)
    }
}

#[cfg(test)]
pub(super) mod tests;
