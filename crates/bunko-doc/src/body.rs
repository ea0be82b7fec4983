//! Parsing a document as a client sends it.
//!
//! A CouchDB document is one JSON object mixing the user's fields with special members
//! that start with `_`. [`parse`] separates them: the special members become fields of
//! [`ParsedDoc`], the user's fields stay in [`ParsedDoc::body`] in their original order
//! (CouchDB keeps key order) with numbers in the form they were written.

use serde_json::{Map, Value};

use crate::{Error, Result, RevId};

/// Limits checked before anything is written.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// The largest document body, in bytes of compact JSON (CouchDB: `max_document_size`).
    pub max_document_size: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self { max_document_size: 8_000_000 }
    }
}

/// A document split into its special members and the user's body.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ParsedDoc {
    pub id: Option<String>,
    pub rev: Option<RevId>,
    pub deleted: bool,
    /// The `_revisions` ancestry (newest first), as replication sends it.
    pub revisions: Option<Vec<RevId>>,
    /// The user's fields, without special members.
    pub body: Map<String, Value>,
    /// `_attachments`, in the order sent; `None` when the document has none.
    pub attachments: Option<Vec<crate::att::AttIn>>,
    /// The body already printed as its stored text (a MongoDB insert,
    /// [`crate::ejson::print`]); [`ParsedDoc::body`] is then empty, and whatever reads the
    /// user's fields calls [`ParsedDoc::materialize`] first.
    pub printed: Option<Printed>,
}

/// A body printed as the compact JSON it is stored as, with its EJSON term (the bytes its
/// revision id hashes, [`crate::etf`]); both are what [`ParsedDoc::body`] holding the same
/// members would give.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Printed {
    pub json: Vec<u8>,
    pub term: Vec<u8>,
}

impl ParsedDoc {
    /// The body as compact JSON, as it is stored.
    pub fn body_json(&self) -> Vec<u8> {
        if let Some(printed) = &self.printed {
            return printed.json.clone();
        }
        serde_json::to_vec(&self.body).unwrap_or_else(|_| b"{}".to_vec())
    }

    /// Parses a [`Printed`] body into [`ParsedDoc::body`], for what reads the user's
    /// fields (validation, triggers, `_users`); the stored text and revision stay the same.
    pub fn materialize(&mut self) -> Result<()> {
        if let Some(printed) = self.printed.take() {
            self.body = serde_json::from_slice(&printed.json)
                .map_err(|e| Error::BadRequest(format!("printed body: {e}")))?;
        }
        Ok(())
    }

    /// The id of the revision that follows `parent` with this body and `atts`
    /// ([`RevId::next_for`]).
    pub fn next_rev(&self, parent: Option<&RevId>, atts: &[(&str, &str, [u8; 16])]) -> RevId {
        match &self.printed {
            Some(printed) => RevId::next_for_term(parent, self.deleted, &printed.term, atts),
            None => RevId::next_for(parent, self.deleted, &self.body, atts),
        }
    }
}

/// Parses request bytes as a JSON object.
pub fn parse_object(bytes: &[u8]) -> Result<Map<String, Value>> {
    match parse_json(bytes)? {
        Value::Object(map) => Ok(map),
        _ => Err(Error::BadRequest("Document must be a JSON object".to_string())),
    }
}

/// Parses request bytes as any JSON value, as CouchDB's decoder accepts them: valid UTF-8,
/// and no number that a double cannot hold (`1e400`; integers of any size are fine), which
/// CouchDB refuses and which would otherwise be stored as text no reader can use.
pub fn parse_json(bytes: &[u8]) -> Result<Value> {
    let invalid = || Error::BadRequest("invalid UTF-8 JSON".to_string());
    let text = std::str::from_utf8(bytes).map_err(|_| invalid())?;
    let value: Value = serde_json::from_str(text).map_err(|_| invalid())?;
    if finite_numbers(&value) { Ok(value) } else { Err(invalid()) }
}

/// Whether every number in `value` written as a float (with `.`, `e` or `E`) is finite.
fn finite_numbers(value: &Value) -> bool {
    match value {
        Value::Number(n) => {
            let text = n.as_str();
            !text.contains(['.', 'e', 'E']) || text.parse::<f64>().is_ok_and(f64::is_finite)
        }
        Value::Array(items) => items.iter().all(finite_numbers),
        Value::Object(map) => map.values().all(finite_numbers),
        _ => true,
    }
}

/// Parses and checks a document sent as request bytes.
pub fn parse(bytes: &[u8], limits: &Limits) -> Result<ParsedDoc> {
    from_object(parse_object(bytes)?, limits)
}

/// Splits a JSON value (e.g. one element of `_bulk_docs`) into a [`ParsedDoc`].
pub fn from_value(value: Value, limits: &Limits) -> Result<ParsedDoc> {
    match value {
        Value::Object(map) => from_object(map, limits),
        _ => Err(Error::BadRequest("Document must be a JSON object".to_string())),
    }
}

/// Splits a JSON object into a [`ParsedDoc`], checking special members and size.
pub fn from_object(map: Map<String, Value>, limits: &Limits) -> Result<ParsedDoc> {
    let mut doc = ParsedDoc::default();
    for (key, value) in map {
        if !key.starts_with('_') || key.starts_with("_replication_") {
            doc.body.insert(key, value);
            continue;
        }
        take_special(&mut doc, &key, value)?;
    }
    if let Some(revisions) = &doc.revisions {
        check_revisions(revisions, doc.rev.as_ref())?;
    }
    let size = serde_json::to_vec(&doc.body).map_or(usize::MAX, |b| b.len());
    if size > limits.max_document_size {
        return Err(Error::TooLarge(doc.id.clone().unwrap_or_default()));
    }
    Ok(doc)
}

fn take_special(doc: &mut ParsedDoc, key: &str, value: Value) -> Result<()> {
    match (key, value) {
        ("_id", Value::String(id)) => doc.id = Some(id),
        ("_id", _) => return Err(Error::IllegalDocId("Document id must be a string".into())),
        ("_rev", Value::String(rev)) => doc.rev = Some(rev.parse()?),
        ("_rev", Value::Null) => {}
        ("_rev", _) => return Err(Error::BadRev("Invalid rev format".into())),
        ("_deleted", Value::Bool(deleted)) => doc.deleted = deleted,
        ("_deleted", _) => {
            return Err(Error::DocValidation("Bad special document member: _deleted".into()));
        }
        ("_revisions", value) => doc.revisions = Some(parse_revisions(value)?),
        ("_attachments", Value::Object(atts)) => doc.attachments = Some(crate::att::parse(atts)?),
        ("_attachments", Value::Null) => {}
        ("_attachments", _) => {
            return Err(Error::BadRequest("_attachments must be a JSON object".into()));
        }
        ("_conflicts" | "_deleted_conflicts" | "_local_seq" | "_revs_info", _) => {}
        (other, _) => {
            return Err(Error::DocValidation(format!("Bad special document member: {other}")));
        }
    }
    Ok(())
}

/// Parses `{"start": N, "ids": [hash, …]}` into revision ids, newest first. Ids past
/// generation 1 are dropped: CouchDB accepts them (`couch_doc:transfer_fields`), and its
/// replicator sends `{"start": 0, "ids": ["1"]}` with a `_local` checkpoint's `0-1`, whose
/// `_revisions` mean nothing.
fn parse_revisions(value: Value) -> Result<Vec<RevId>> {
    let bad = |what: &str| Error::DocValidation(format!("_revisions {what}"));
    let start = value
        .get("start")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("start must be a positive integer"))?;
    let ids =
        value.get("ids").and_then(Value::as_array).ok_or_else(|| bad("ids must be an array"))?;
    let revs = ids
        .iter()
        .zip((1..=start).rev().map(Some).chain(std::iter::repeat(None)))
        .map(|(id, pos)| match id.as_str() {
            Some(hash) if !hash.is_empty() => Ok(pos.map(|pos| RevId { pos, hash: hash.into() })),
            _ => Err(bad("ids must be non-empty strings")),
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(revs.into_iter().flatten().collect())
}

fn check_revisions(revisions: &[RevId], rev: Option<&RevId>) -> Result<()> {
    match (revisions.first(), rev) {
        (Some(first), Some(rev)) if first != rev => {
            Err(Error::BadRequest("_rev does not match the first entry of _revisions".to_string()))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::default()
    }

    #[test]
    fn numbers_a_double_cannot_hold_are_refused_as_couchdb_does() {
        for bad in [r#"{"a":1e400}"#, r#"{"a":[1,{"b":-1.5e309}]}"#, r#"{"a":1E999}"#] {
            let err = parse_object(bad.as_bytes()).err().map(|e| e.to_string());
            assert_eq!(err.as_deref(), Some("invalid UTF-8 JSON"), "{bad}");
        }
        let big_integer = format!(r#"{{"a":{}}}"#, "9".repeat(400));
        for good in [r#"{"a":1e300,"b":1e-400,"c":0.5}"#, big_integer.as_str()] {
            assert!(parse_object(good.as_bytes()).is_ok(), "{good}");
        }
    }

    #[test]
    fn splits_special_members_and_keeps_order_and_numbers() -> Result<()> {
        let doc = parse(
            br#"{"z":1,"_id":"a","a":1.50,"_rev":"1-abc","big":123456789012345678901234567890}"#,
            &limits(),
        )?;
        assert_eq!(doc.id.as_deref(), Some("a"));
        assert_eq!(doc.rev.as_ref().map(ToString::to_string).as_deref(), Some("1-abc"));
        assert_eq!(doc.body_json(), br#"{"z":1,"a":1.50,"big":123456789012345678901234567890}"#);
        Ok(())
    }

    #[test]
    fn rejects_bad_input() {
        type Check = fn(&Error) -> bool;
        let cases: &[(&[u8], Check)] = &[
            (b"{", |e| matches!(e, Error::BadRequest(_))),
            (b"[1]", |e| matches!(e, Error::BadRequest(_))),
            (b"\"x\"", |e| matches!(e, Error::BadRequest(_))),
            (b"{\"a\":\"\xff\"}", |e| matches!(e, Error::BadRequest(_))),
            (br#"{"_foo":1}"#, |e| matches!(e, Error::DocValidation(_))),
            (br#"{"_id":1}"#, |e| matches!(e, Error::IllegalDocId(_))),
            (br#"{"_rev":"x"}"#, |e| matches!(e, Error::BadRev(_))),
            (br#"{"_attachments":{"a.txt":{}}}"#, |e| matches!(e, Error::BadRequest(_))),
        ];
        for (input, expected) in cases {
            match parse(input, &limits()) {
                Err(err) => assert!(expected(&err), "{input:?}: {err:?}"),
                Ok(doc) => panic!("{input:?} parsed as {doc:?}"),
            }
        }
        let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
        assert!(parse(format!("{{\"a\":{deep}}}").as_bytes(), &limits()).is_err());
    }

    #[test]
    fn size_limit_names_the_document() {
        let small = Limits { max_document_size: 10 };
        assert_eq!(
            parse(br#"{"_id":"big","v":"0123456789"}"#, &small),
            Err(Error::TooLarge("big".to_string()))
        );
    }

    #[test]
    fn revisions_become_rev_ids_newest_first() -> Result<()> {
        let doc =
            parse(br#"{"_rev":"3-c","_revisions":{"start":3,"ids":["c","b","a"]}}"#, &limits())?;
        let revs: Vec<String> =
            doc.revisions.unwrap_or_default().iter().map(ToString::to_string).collect();
        assert_eq!(revs, ["3-c", "2-b", "1-a"]);
        Ok(())
    }

    #[test]
    fn revisions_past_generation_one_are_dropped_as_couchdb_accepts_them() -> Result<()> {
        let doc =
            parse(br#"{"_rev":"1-aa","_revisions":{"start":1,"ids":["aa","bb"]}}"#, &limits())?;
        let kept = doc.revisions.unwrap_or_default();
        assert_eq!(kept, vec![RevId { pos: 1, hash: "aa".into() }]);
        // A `_local` checkpoint as CouchDB's replicator writes it.
        let local = parse(br#"{"_rev":"0-1","_revisions":{"start":0,"ids":["1"]}}"#, &limits())?;
        assert_eq!(local.revisions, Some(Vec::new()));
        let bad = parse(br#"{"_revisions":{"start":0,"ids":[7]}}"#, &limits()).err();
        assert_eq!(
            bad.map(|e| e.to_string()).as_deref(),
            Some("_revisions ids must be non-empty strings")
        );
        Ok(())
    }
}
