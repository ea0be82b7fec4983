//! Raw collation (`"options": {"collation": "raw"}`): the Erlang term order of the JSON that
//! CouchDB decodes. Numbers are numbers, `false`/`null`/`true` are atoms (ordered by name),
//! objects are `{Members}` tuples, arrays are lists and strings are binaries:
//! `number < atom < tuple < list < binary`. Binaries, and so strings and object keys, compare
//! bytewise with a proper prefix first.

use std::cmp::Ordering;

use super::value::{Scheme, push_terminated};

/// The raw [`Scheme`].
pub(super) struct Raw;

impl Scheme for Raw {
    // Null, False, True, Number, String, Array, Object.
    const TAGS: [u8; 7] = [0x30, 0x20, 0x40, 0x10, 0x70, 0x60, 0x50];

    fn compare_str(a: &str, b: &str) -> Ordering {
        a.as_bytes().cmp(b.as_bytes())
    }

    fn encode_str(s: &str, out: &mut Vec<u8>) {
        push_terminated(s.as_bytes(), out);
    }
}
