//! Field paths: `"a.b\\.c"` names the field `b.c` inside the field `a`.
//!
//! Parsing follows CouchDB's `mango_util:parse_field`: the text is split at every `.` that is
//! not preceded by a backslash, then every backslash is removed from each part, and an empty
//! part (so also the empty text) is `invalid_field_name`. The *root* path has no segments and
//! no text form other than `""`: CouchDB's normalizer produces it for conditions on the value
//! itself, as in `{"$elemMatch": {"$gt": 1}}`.
//!
//! [`FieldPath::get`] is CouchDB's `mango_doc:get_field`, the Mango view of a document: a
//! segment names an object member, or, on an array, an element by its position (`"a.0"`);
//! it never reaches into array elements implicitly.

use std::fmt;

use serde_json::Value;

use crate::error::Error;

/// A parsed field path. The root path (no segments) is the value itself.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(Vec<String>);

/// What a path finds in a value (`mango_doc:get_field`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lookup<'a> {
    /// The path leads to this value.
    Found(&'a Value),
    /// An object on the way lacks the member.
    NotFound,
    /// The path runs into a scalar, or into an array with a segment that is not an in-range
    /// position. CouchDB's matcher treats this as "no match" even for `$exists: false`.
    BadPath,
}

impl FieldPath {
    /// Parses CouchDB's dotted syntax.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let mut parts = Vec::new();
        let mut part = String::new();
        let mut prev = None;
        for c in text.chars() {
            if c == '.' && prev != Some('\\') {
                parts.push(std::mem::take(&mut part));
            } else if c != '\\' {
                part.push(c);
            }
            prev = Some(c);
        }
        parts.push(part);
        if parts.iter().any(String::is_empty) {
            return Err(Error::InvalidFieldName(text.to_owned()));
        }
        Ok(Self(parts))
    }

    /// The path of the value itself.
    pub fn root() -> Self {
        Self(Vec::new())
    }

    /// A path from already-split segments (no escaping involved).
    pub fn from_segments<I, S>(segments: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self(segments.into_iter().map(Into::into).collect())
    }

    pub fn segments(&self) -> &[String] {
        &self.0
    }

    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// True for the single segment `_id`, which Mango compares in raw (byte) order.
    pub fn is_id(&self) -> bool {
        matches!(self.0.as_slice(), [only] if only == "_id")
    }

    /// Follows the path through `value` with Mango's rules.
    pub fn get<'a>(&self, value: &'a Value) -> Lookup<'a> {
        let mut current = value;
        for segment in &self.0 {
            current = match current {
                Value::Object(map) => match map.get(segment) {
                    Some(v) => v,
                    None => return Lookup::NotFound,
                },
                Value::Array(items) => match array_index(segment).and_then(|i| items.get(i)) {
                    Some(v) => v,
                    None => return Lookup::BadPath,
                },
                _ => return Lookup::BadPath,
            };
        }
        Lookup::Found(current)
    }
}

/// An array position as Erlang's `list_to_integer` reads it: optional sign, then digits.
/// Negative or oversized positions are `None` (CouchDB: `bad_path`).
pub(crate) fn array_index(segment: &str) -> Option<usize> {
    let digits = segment.strip_prefix('+').unwrap_or(segment);
    if let Some(rest) = digits.strip_prefix('-') {
        // "-0" is position 0; any other negative number is out of range.
        return (!rest.is_empty() && rest.bytes().all(|b| b == b'0')).then_some(0);
    }
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Renders the path in the syntax [`FieldPath::parse`] reads: segments joined by `.`, with
/// `.` inside a segment escaped as `\.`.
impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, segment) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            f.write_str(&segment.replace('.', "\\."))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn segs(text: &str) -> Result<Vec<String>, Error> {
        FieldPath::parse(text).map(|p| p.0)
    }

    #[test]
    fn parse_follows_mango_util() -> Result<(), Error> {
        assert_eq!(segs("ab")?, ["ab"]);
        assert_eq!(segs("a.b")?, ["a", "b"]);
        assert_eq!(segs("a\\.b")?, ["a.b"]);
        assert_eq!(segs("a.b.c")?, ["a", "b", "c"]);
        assert_eq!(segs("a.b\\.c")?, ["a", "b.c"]);
        assert_eq!(segs("a\\b")?, ["ab"]);
        assert_eq!(segs("ü.€")?, ["ü", "€"]);
        for bad in ["a..b", ".a", "a.", ".", ""] {
            assert_eq!(FieldPath::parse(bad), Err(Error::InvalidFieldName(bad.into())));
        }
        Ok(())
    }

    #[test]
    fn display_round_trips() -> Result<(), Error> {
        for text in ["a", "a.b", "a\\.b.c", "x.y\\.z\\.w"] {
            let path = FieldPath::parse(text)?;
            assert_eq!(path.to_string(), text);
            assert_eq!(FieldPath::parse(&path.to_string())?, path);
        }
        Ok(())
    }

    #[test]
    fn get_indexes_arrays_but_does_not_reach_into_them() -> Result<(), Error> {
        let doc = json!({"a": [{"b": 1}, {"b": 2}], "s": "x", "o": {"k": null}});
        let get = |p: &str| FieldPath::parse(p).map(|p| p.get(&doc).clone_value());
        assert_eq!(get("a.1.b")?, Some(json!(2)));
        assert_eq!(get("a.+0.b")?, Some(json!(1)));
        assert_eq!(get("o.k")?, Some(Value::Null));
        assert_eq!(FieldPath::parse("a.b")?.get(&doc), Lookup::BadPath);
        assert_eq!(FieldPath::parse("a.2")?.get(&doc), Lookup::BadPath);
        assert_eq!(FieldPath::parse("a.-1")?.get(&doc), Lookup::BadPath);
        assert_eq!(FieldPath::parse("s.x")?.get(&doc), Lookup::BadPath);
        assert_eq!(FieldPath::parse("o.z")?.get(&doc), Lookup::NotFound);
        assert_eq!(FieldPath::root().get(&doc), Lookup::Found(&doc));
        Ok(())
    }

    trait CloneValue {
        fn clone_value(&self) -> Option<Value>;
    }

    impl CloneValue for Lookup<'_> {
        fn clone_value(&self) -> Option<Value> {
            match self {
                Lookup::Found(v) => Some((*v).clone()),
                _ => None,
            }
        }
    }
}
