//! The rows of a view answer ([`RowIter`]): map rows read lazily from the query's
//! snapshot, or rows computed beforehand (reduce).
//!
//! A map row is stored as the JSON text `[key, doc_id, value]` written by serde_json
//! (`crate::build`). Decoding it gives a [`ViewRow`]; a renderer that writes map rows
//! without documents can instead take each row as the JSON object
//! `{"id":…,"key":…,"value":…}` copied from that text ([`RowIter::plain`]): the same
//! bytes, since serde_json writes the members it parses back as it first wrote them
//! (numbers keep their text, objects their member order), without building the key and
//! value as `serde_json::Value`s and writing them again.

use std::sync::Arc;

use bunko_doc::RevId;
use bunko_engine::read::DocOut;
use bunko_engine::security::UserCtx;
use bunko_engine::{Database, Error, Result};
use bunko_storage::Entry;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::query::{RawRow, ViewRow};

/// Stored map rows (the entries of the row keys), in answer order.
pub(crate) type Entries = Box<dyn Iterator<Item = Result<Entry>> + Send>;

/// The rows of a view answer, read lazily from the query's snapshot (map queries), so an
/// answer can stream however many rows it has. As an iterator it gives each row decoded.
pub struct RowIter(Inner);

enum Inner {
    /// Map rows as stored; with `include_docs`, the database and reader to load them.
    Stored {
        entries: Entries,
        docs: Option<(Arc<Database>, UserCtx)>,
    },
    Built(std::vec::IntoIter<Result<ViewRow>>),
}

impl RowIter {
    /// Map rows from their stored entries.
    pub(crate) fn stored(entries: Entries, docs: Option<(Arc<Database>, UserCtx)>) -> Self {
        RowIter(Inner::Stored { entries, docs })
    }

    /// Rows computed beforehand.
    pub(crate) fn built(rows: Vec<Result<ViewRow>>) -> Self {
        RowIter(Inner::Built(rows.into_iter()))
    }

    /// The rows as [`PlainRows`], if they are map rows without documents.
    pub fn plain(&mut self) -> Option<PlainRows<'_>> {
        match &mut self.0 {
            Inner::Stored { entries, docs: None } => Some(PlainRows(entries)),
            _ => None,
        }
    }
}

/// Map rows without documents, taken as JSON ([`RowIter::plain`]).
pub struct PlainRows<'a>(&'a mut Entries);

impl PlainRows<'_> {
    /// Appends the next row to `out` as `{"id":…,"key":…,"value":…}` (the bytes
    /// serde_json writes for the decoded row's members in that order), copied from its
    /// stored text; `None` after the last row.
    pub fn next_json(&mut self, out: &mut Vec<u8>) -> Option<Result<()>> {
        let entry = self.0.next()?;
        Some(entry.and_then(|(_, stored)| push_plain(out, &stored)))
    }
}

impl Iterator for RowIter {
    type Item = Result<ViewRow>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.0 {
            Inner::Built(rows) => rows.next(),
            Inner::Stored { entries, docs } => Some(entries.next()?.and_then(|(_, stored)| {
                let (key, id, value) = decode_row(&stored)?;
                let doc = docs.as_ref().map(|(db, reader)| row_doc(db, reader, &id, &value));
                Ok(ViewRow { id: Some(id), key, value, doc, error: None })
            })),
        }
    }
}

fn corrupt() -> Error {
    Error::Corrupt("view row".into())
}

/// A stored row decoded.
pub(crate) fn decode_row(bytes: &[u8]) -> Result<RawRow> {
    serde_json::from_slice(bytes).map_err(|_| corrupt())
}

/// Appends `{"id":…,"key":…,"value":…}` from a stored row's text.
fn push_plain(out: &mut Vec<u8>, stored: &[u8]) -> Result<()> {
    let (key, id, value): (&RawValue, &RawValue, &RawValue) =
        serde_json::from_slice(stored).map_err(|_| corrupt())?;
    if !id.get().starts_with('"') {
        return Err(corrupt());
    }
    for (name, member) in [(&b"{\"id\":"[..], id), (b",\"key\":", key), (b",\"value\":", value)] {
        out.extend_from_slice(name);
        out.extend_from_slice(member.get().as_bytes());
    }
    out.push(b'}');
    Ok(())
}

/// The document a row links to, as `reader` sees it: the `_id` and `_rev` of an object
/// value, each defaulting to the emitting document and its winner
/// (`couch_mrview_util:docid_rev`).
fn row_doc(db: &Database, reader: &UserCtx, id: &str, value: &Value) -> Option<DocOut> {
    let member = |name: &str| value.as_object().and_then(|v| v.get(name)).and_then(Value::as_str);
    let id = member("_id").unwrap_or(id);
    let rev = member("_rev").and_then(|r| r.parse::<RevId>().ok());
    db.get(reader, id, rev.as_ref()).ok().filter(|d| !d.deleted)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The old way of writing a row: decoded, then each member written by serde_json.
    fn decoded_json(stored: &[u8]) -> Vec<u8> {
        let (key, id, value) = decode_row(stored).expect("a stored row");
        serde_json::to_vec(&json!({"id": id, "key": key, "value": value})).expect("JSON")
    }

    fn plain_json(stored: &[u8]) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        push_plain(&mut out, stored)?;
        Ok(out)
    }

    /// Rows stored as the build stores them (`json!([key, id, value]).to_string()`) give
    /// the bytes of the decoded row written member by member.
    #[test]
    fn plain_rows_are_the_bytes_of_the_decoded_rows() -> Result<()> {
        let parsed = |text: &str| serde_json::from_str::<Value>(text).expect("JSON");
        let values = [
            json!(null),
            json!(true),
            json!(0),
            json!(-0.0),
            json!(1.5e300),
            parsed("12345678901234567890123456789"),
            parsed("1.0000000000000000000001"),
            parsed("-2.5E-7"),
            json!("漱石 \u{1F600} \"quoted\" \\ \u{2028} \u{7f} \t\n\u{0}"),
            json!([1, [2, [3, []]], {}, ""]),
            json!({"z": 1, "a": {"nested": [null, {"b": "β"}]}, "": []}),
            json!("2026-11-29T12:00:00.000Z"),
        ];
        for key in &values {
            for value in &values {
                for id in ["a", "ドキュメント/\"1\"", "_design/x\u{1}"] {
                    let stored = json!([key, id, value]).to_string();
                    let plain = plain_json(stored.as_bytes())?;
                    assert_eq!(
                        String::from_utf8_lossy(&plain),
                        String::from_utf8_lossy(&decoded_json(stored.as_bytes())),
                        "{stored}"
                    );
                }
            }
        }
        Ok(())
    }

    #[test]
    fn damaged_rows_are_refused() {
        for stored in ["", "[1,2,3]", "[1,\"a\"]", "[1,\"a\",2,3]", "{\"a\":1}", "[1,\"a\",2"] {
            assert!(plain_json(stored.as_bytes()).is_err(), "{stored}");
        }
    }
}
