//! Revision ids: `N-<hash>`, where `N` is the revision's generation (1 for a new
//! document) and the hash is 32 lowercase hex digits for revisions Bunko creates.
//!
//! The hash is CouchDB's (`couch_db:new_revid`): MD5 of the Erlang external term
//! `[Deleted, ParentPos, ParentHash, Body, Attachments]` ([`crate::etf`]), where a new
//! document has parent `0, 0`, a 32-hex-digit parent hash counts as its 16 bytes, and Body
//! is the document without its special members. So the same edit of the same revision
//! yields the same id on Bunko and CouchDB alike, which makes replication idempotent.
//! Revisions written by replication (`new_edits=false`) may carry any non-empty hash
//! string and are kept verbatim.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};

use crate::etf;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::{Error, Result};

/// A revision id `pos-hash`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RevId {
    pub pos: u64,
    pub hash: String,
}

impl RevId {
    /// The id of the revision that follows `parent` (or starts a document) with this body
    /// (compact JSON without special members) and no attachments.
    pub fn next(parent: Option<&RevId>, deleted: bool, body: &[u8]) -> RevId {
        RevId::next_with(parent, deleted, body, &[])
    }

    /// The same with attachments, each `(name, content_type, md5)`, in the order CouchDB
    /// hashes them: the *reverse* of the document's (`couch_db:new_revid` folds them into a
    /// list head first).
    pub fn next_with(
        parent: Option<&RevId>,
        deleted: bool,
        body: &[u8],
        atts: &[(&str, &str, [u8; 16])],
    ) -> RevId {
        RevId::hashed(parent, deleted, atts, |term| {
            match serde_json::from_slice::<Value>(body) {
                Ok(value) => term.json(&value),
                Err(_) => term.binary(body),
            };
        })
    }

    /// [`RevId::next_with`] for a body already parsed (the user's members, in document
    /// order): the same id as for its compact JSON, without serialising and re-parsing it.
    pub fn next_for(
        parent: Option<&RevId>,
        deleted: bool,
        body: &Map<String, Value>,
        atts: &[(&str, &str, [u8; 16])],
    ) -> RevId {
        RevId::hashed(parent, deleted, atts, |term| {
            term.object(body);
        })
    }

    /// [`RevId::next_for`] for a body whose EJSON term is already encoded (`term`, without
    /// the version byte: [`crate::body::Printed::term`]).
    pub fn next_for_term(
        parent: Option<&RevId>,
        deleted: bool,
        term: &[u8],
        atts: &[(&str, &str, [u8; 16])],
    ) -> RevId {
        RevId::hashed(parent, deleted, atts, |writer| {
            writer.encoded(term);
        })
    }

    /// MD5 of `[Deleted, ParentPos, ParentHash, Body, Attachments]`, the body written by
    /// `body`.
    fn hashed(
        parent: Option<&RevId>,
        deleted: bool,
        atts: &[(&str, &str, [u8; 16])],
        body: impl FnOnce(&mut etf::Writer),
    ) -> RevId {
        let mut term = etf::Writer::new();
        term.list_header(5).atom(if deleted { "true" } else { "false" });
        match parent {
            None => term.integer(0).integer(0),
            Some(p) => {
                let raw = match hex::decode(&p.hash) {
                    Ok(bytes) if p.hash.len() == 32 => bytes,
                    _ => p.hash.as_bytes().to_vec(),
                };
                term.integer_text(&p.pos.to_string()).binary(&raw)
            }
        };
        body(&mut term);
        if !atts.is_empty() {
            term.list_header(atts.len());
            for (name, content_type, md5) in atts {
                term.tuple_header(3).binary(name.as_bytes()).binary(content_type.as_bytes());
                term.binary(md5);
            }
        }
        term.nil().nil();
        let hash = Md5::digest(term.finish());
        RevId { pos: parent.map_or(1, |p| p.pos + 1), hash: hex::encode(hash) }
    }
}

impl fmt::Display for RevId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.pos, self.hash)
    }
}

impl FromStr for RevId {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let bad = || Error::BadRev("Invalid rev format".to_string());
        let (pos, hash) = s.split_once('-').ok_or_else(bad)?;
        let pos: u64 = pos.parse().map_err(|_| bad())?;
        if hash.is_empty() || !pos.to_string().eq(pos_text(s)) {
            return Err(bad());
        }
        Ok(RevId { pos, hash: hash.to_string() })
    }
}

fn pos_text(s: &str) -> &str {
    s.split_once('-').map_or(s, |(p, _)| p)
}

/// CouchDB's order of revisions for choosing a winner among leaves of equal standing:
/// higher generation first, then the higher hash.
impl Ord for RevId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.pos.cmp(&other.pos).then_with(|| self.hash.cmp(&other.hash))
    }
}

impl PartialOrd for RevId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_deterministic_and_well_formed() {
        let a = RevId::next(None, false, br#"{"a":1}"#);
        assert_eq!(a, RevId::next(None, false, br#"{"a":1}"#));
        assert_eq!(a.pos, 1);
        assert_eq!(a.hash.len(), 32);
        assert!(a.hash.bytes().all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        let b = RevId::next(Some(&a), false, br#"{"a":1}"#);
        assert_eq!(b.pos, 2);
        assert_ne!(a.hash, b.hash);
        assert_ne!(b, RevId::next(Some(&a), true, br#"{"a":1}"#));
    }

    #[test]
    fn ids_are_couchdbs() -> Result<()> {
        // Revisions CouchDB 3.4.3 gave these documents.
        let a = RevId::next(None, false, br#"{"a":1}"#);
        assert_eq!(a.to_string(), "1-23202479633c2b380f79507a776743d5");
        let b = RevId::next(Some(&a), false, br#"{"a":2}"#);
        assert_eq!(b.to_string(), "2-71173597778497e0a6aa176963f222db");
        let body = br#"{"s":"h\u00e9","f":1.5,"n":null,"t":true,"l":[1,"x",{}],"big":123456789012,"neg":-5,"o":{"k":300}}"#;
        assert_eq!(RevId::next(None, false, body).hash, "45b29465d2d2cf9457c979f89c0174ab");
        let floats = br#"{"a":1.0,"b":1e3,"c":-0,"d":12345678901234567890123}"#;
        assert_eq!(RevId::next(None, false, floats).hash, "cd6d85cc2458f24fdde7e43e0aa729ab");
        // Lists of small integers are Erlang byte strings (`STRING_EXT`).
        for (body, hash) in [
            (r#"{"l":[1,1,2]}"#, "bd0673a0b040b60e7a2b6ddc46bc89da"),
            (r#"{"l":[255,0]}"#, "8fdd9eeba9cdcadd98fa4cff2d742709"),
            (r#"{"l":[256,1]}"#, "ab3a5f34877ddf897eed916876002874"),
            (r#"{"l":[-1,2]}"#, "4d26c50c16192e620e484677f275a96a"),
            (r#"{"l":[1.0,2]}"#, "10220072070afe3005c544e22226b87c"),
            (r#"{"l":[[1,2],[3]]}"#, "91a44b32acd40e99926b35dc08e52263"),
            (r#"{"l":[1,"a"]}"#, "8c72abfc7fdf15fce3faf61f0a70d849"),
        ] {
            assert_eq!(RevId::next(None, false, body.as_bytes()).hash, hash, "{body}");
        }
        let empty: RevId = "1-967a00dff5e02add41819138abb3284d".parse()?;
        let deleted = RevId::next(Some(&empty), true, b"{}");
        assert_eq!(deleted.to_string(), "2-eec205a9d413992850a6e32678485900");
        Ok(())
    }

    /// Issue 20: the engine hashes the parsed body instead of its JSON text; both must
    /// give the same id (CouchDB's) for every kind of value, with and without attachments.
    #[test]
    fn parsed_body_hashes_as_its_text() -> Result<()> {
        let parent: RevId = "3-967a00dff5e02add41819138abb3284d".parse()?;
        let atts = [("a.txt", "text/plain", [7u8; 16])];
        for text in [
            r#"{}"#,
            r#"{"s":"h\u00e9","f":1.5,"n":null,"t":true,"l":[1,"x",{}],"big":123456789012}"#,
            r#"{"floats":[1.0,1e3,-0,12345678901234567890123],"bytes":[1,2,255],"o":{"k":[]}}"#,
        ] {
            let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
                panic!("not an object: {text}");
            };
            for (parent, deleted) in [(None, false), (Some(&parent), true)] {
                for atts in [&atts[..], &[]] {
                    let from_text = RevId::next_with(parent, deleted, text.as_bytes(), atts);
                    assert_eq!(RevId::next_for(parent, deleted, &map, atts), from_text, "{text}");
                }
            }
        }
        Ok(())
    }

    #[test]
    fn parse_and_display_round_trip() -> Result<()> {
        let rev: RevId = "12-abc".parse()?;
        assert_eq!((rev.pos, rev.hash.as_str()), (12, "abc"));
        assert_eq!(rev.to_string(), "12-abc");
        for bad in ["", "1", "-abc", "1-", "x-abc", "01-abc", "+1-abc"] {
            assert!(bad.parse::<RevId>().is_err(), "{bad}");
        }
        Ok(())
    }

    #[test]
    fn order_is_generation_then_hash() -> Result<()> {
        let revs: Vec<RevId> =
            ["1-ff", "2-00", "2-a0", "10-00"].iter().map(|s| s.parse()).collect::<Result<_>>()?;
        let mut sorted = revs.clone();
        sorted.sort();
        assert_eq!(revs, sorted);
        Ok(())
    }
}
