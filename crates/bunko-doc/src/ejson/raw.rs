//! A stored MongoDB document written as BSON bytes straight from its JSON text, for
//! answers that send documents as they are stored (a `find` by `_id`).
//!
//! The result is byte for byte what `{"_id": id}` extended by [`from_json`](super::from_json)
//! of the parsed body encodes to, without building the `serde_json` map or the `bson`
//! document in between: one pass of serde_json's parser over the stored text, strings and
//! keys copied from it into the output (borrowed where they have no escapes), plain
//! sub-documents and arrays written as they are scanned. An object whose first key starts
//! with `$` may be an Extended JSON wrapper: it is parsed as a [`Value`] and converted by
//! [`value_from_json`](super::value_from_json) itself, so wrappers read exactly as before.
//!
//! [`object`] writes a parsed stored document (a query's answer, `_id` included) the same
//! way, walking the `serde_json` map instead of the text: what [`from_json`](super::from_json)
//! of it encodes to.
//!
//! Where the two could differ the writer gives up ([`document`] returns `None`) and the
//! caller converts the old way: a key repeated in one object (the parsed map keeps the last
//! value at the first position; a stream cannot), a body member named `_id`, a key holding a
//! NUL byte (no BSON key can), and anything serde_json refuses.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

use bson::raw::{BindRawBsonRef, CStr, cstr};
use bson::{Bson, RawArrayBuf, RawBson, RawDocumentBuf};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::fields::Name;

/// How serde_json hands over a number when it keeps numbers as their text
/// (`arbitrary_precision`): a one-member map under this key. `serde_json::Value` reads such
/// a map as a number, whether it came from a number or from an object so named, and so
/// does this writer.
const NUMBER: &str = "$serde_json::private::Number";

/// How many keys of one object are compared one by one before a set is built.
const FEW_KEYS: usize = 16;

/// The BSON bytes of the stored document `body` (its JSON text, without `_id`) under `id`,
/// `_id` first; `None` when the stream could differ from the parsed conversion (see the
/// module docs): the caller then converts the parsed body.
pub fn document(id: &Bson, body: &[u8]) -> Option<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    out.append(cstr!("_id"), RawBson::try_from(id.clone()).ok()?);
    let mut de = serde_json::Deserializer::from_slice(body);
    de.deserialize_map(Top(&mut out)).ok()?;
    de.end().ok()?;
    Some(out)
}

/// The BSON bytes of the parsed stored document `doc` (members in order, `_id` among them
/// as stored): byte for byte what [`from_json`](super::from_json) of it encodes to, without
/// building the `bson` document. `None` when that could not be encoded (a key holding a NUL
/// byte).
pub fn object(doc: &Map<String, Value>) -> Option<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for (key, value) in doc {
        let name = <&CStr>::try_from(key.as_str()).ok()?;
        Element(Slot::Member(&mut out, name)).deserialize(value).ok()?;
    }
    Some(out)
}

/// The top-level object: its members appended after `_id` (never read as a wrapper, as
/// `from_json` reads its members one by one).
struct Top<'a>(&'a mut RawDocumentBuf);

impl<'de> Visitor<'de> for Top<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        let mut seen = Seen::default();
        seen.insert(Cow::Borrowed("_id"));
        while let Some(Name(key)) = members.next_key()? {
            rest_member(self.0, &mut seen, key, &mut members)?;
        }
        Ok(())
    }
}

/// Appends the member `key` (its value next in `members`) to `doc`, refusing a repeated key.
fn rest_member<'de, A: MapAccess<'de>>(
    doc: &mut RawDocumentBuf,
    seen: &mut Seen<'de>,
    key: Cow<'de, str>,
    members: &mut A,
) -> Result<(), A::Error> {
    let name = <&CStr>::try_from(key.as_ref()).map_err(de::Error::custom)?;
    members.next_value_seed(Element(Slot::Member(doc, name)))?;
    if !seen.insert(key) {
        return Err(de::Error::custom("repeated key"));
    }
    Ok(())
}

/// Where a value goes: a member of a document under its key, or the next item of an array.
enum Slot<'a> {
    Member(&'a mut RawDocumentBuf, &'a CStr),
    Item(&'a mut RawArrayBuf),
}

impl Slot<'_> {
    fn put(self, value: impl BindRawBsonRef) {
        match self {
            Slot::Member(doc, key) => doc.append(key, value),
            Slot::Item(items) => items.push(value),
        }
    }

    fn put_bson<E: de::Error>(self, value: Bson) -> Result<(), E> {
        self.put(RawBson::try_from(value).map_err(E::custom)?);
        Ok(())
    }
}

/// One JSON value written into its slot as `value_from_json` would convert it.
struct Element<'a>(Slot<'a>);

impl<'de> DeserializeSeed<'de> for Element<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Element<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.0.put(RawBson::Null);
        Ok(())
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.0.put(v);
        Ok(())
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.0.put(v);
        Ok(())
    }

    // Numbers come as `NUMBER` maps; these serve a parser that hands them over as values.
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.0.put_bson(super::number(&Number::from(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.0.put_bson(super::number(&Number::from(v)))
    }

    // A parsed `Value`'s number comes as the narrowest of these that reads back as its text.
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<(), E> {
        let n = Number::from_u128(v).ok_or_else(|| E::custom("not a number"))?;
        self.0.put_bson(super::number(&n))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<(), E> {
        let n = Number::from_i128(v).ok_or_else(|| E::custom("not a number"))?;
        self.0.put_bson(super::number(&n))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        let n = Number::from_f64(v).ok_or_else(|| E::custom("not a finite number"))?;
        self.0.put_bson(super::number(&n))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut array = RawArrayBuf::new();
        while items.next_element_seed(Element(Slot::Item(&mut array)))?.is_some() {}
        self.0.put(array);
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut members: A) -> Result<(), A::Error> {
        let Some(Name(first)) = members.next_key()? else {
            self.0.put(RawDocumentBuf::new());
            return Ok(());
        };
        if first == NUMBER {
            let text: String = members.next_value()?;
            let n = text.parse::<Number>().map_err(de::Error::custom)?;
            return self.0.put_bson(super::number(&n));
        }
        if first.starts_with('$') {
            // Perhaps a wrapper: read as `serde_json::Value` reads it, converted as before.
            let mut map = Map::new();
            map.insert(first.into_owned(), members.next_value::<Value>()?);
            while let Some((key, value)) = members.next_entry::<String, Value>()? {
                map.insert(key, value);
            }
            return self.0.put_bson(super::value_from_json(&Value::Object(map)));
        }
        let mut doc = RawDocumentBuf::new();
        let mut seen = Seen::default();
        rest_member(&mut doc, &mut seen, first, &mut members)?;
        while let Some(Name(key)) = members.next_key()? {
            rest_member(&mut doc, &mut seen, key, &mut members)?;
        }
        self.0.put(doc);
        Ok(())
    }
}

/// The keys of one object so far, to find a repeated one: a list while short, then a set.
enum Seen<'de> {
    Few(Vec<Cow<'de, str>>),
    Many(HashSet<Cow<'de, str>>),
}

impl Default for Seen<'_> {
    fn default() -> Self {
        Seen::Few(Vec::new())
    }
}

impl<'de> Seen<'de> {
    /// Adds `key`; false when it was there already.
    fn insert(&mut self, key: Cow<'de, str>) -> bool {
        match self {
            Seen::Few(keys) if keys.contains(&key) => false,
            Seen::Few(keys) if keys.len() < FEW_KEYS => {
                keys.push(key);
                true
            }
            Seen::Few(keys) => {
                let mut set: HashSet<_> = keys.drain(..).collect();
                set.insert(key);
                *self = Seen::Many(set);
                true
            }
            Seen::Many(set) => set.insert(key),
        }
    }
}

#[cfg(test)]
mod tests;
