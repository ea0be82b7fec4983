//! Revision ids: `N-<hash>`, where `N` is the revision's generation (1 for a new
//! document) and the hash is 32 lowercase hex digits for revisions Bunko creates.
//!
//! Bunko's hash is deterministic: MD5 over the parent revision, the deleted flag and the
//! canonical body, so the same edit of the same revision yields the same id on any node
//! (CouchDB's rule, which makes replication idempotent). Revisions written by replication
//! (`new_edits=false`) may carry any non-empty hash string and are kept verbatim.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// A revision id `pos-hash`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RevId {
    pub pos: u64,
    pub hash: String,
}

impl RevId {
    /// The id of the revision that follows `parent` (or starts a document) with this body.
    pub fn next(parent: Option<&RevId>, deleted: bool, body: &[u8]) -> RevId {
        let mut md5 = Md5::new();
        if let Some(parent) = parent {
            md5.update(parent.to_string().as_bytes());
        }
        md5.update([0, u8::from(deleted), 0]);
        md5.update(body);
        RevId { pos: parent.map_or(1, |p| p.pos + 1), hash: hex::encode(md5.finalize()) }
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
