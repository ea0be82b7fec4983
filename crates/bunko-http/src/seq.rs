//! Update sequences as the API shows them: CouchDB 2+'s `"{N}-{opaque}"` strings. Clients
//! read the number before the first `-` (CouchDB's own tests do); the opaque part is what
//! CouchDB puts there, base64url of the Erlang external term `[{Node, [Begin, End], {N,
//! Uuid, EpochNode}}]` for its shards, here the one range `[0, 2^32-1]` of this node, so a
//! client that decodes it (CouchDB's replication tests compare the ranges and numbers of
//! two databases) reads what it would from CouchDB. A `since` may be `N`, `"N"` or `"N-…"`
//! with any opaque part.

use std::sync::OnceLock;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::{ApiError, ApiResult};

/// The node name the opaque parts carry; set once, when the server's state is built.
static NODE: OnceLock<String> = OnceLock::new();

/// Names the node in the seqs this process shows (the first call wins).
pub fn set_node(name: &str) {
    let _ = NODE.set(name.to_string());
}

/// The seq `n` as the API shows it: `"{n}-{opaque}"`.
pub fn render(n: u64) -> String {
    format!("{n}-{}", URL_SAFE_NO_PAD.encode(shard_term(n)))
}

/// `term_to_binary([{Node, [0, 16#ffffffff], {N, <<>>, Node}}])`.
fn shard_term(n: u64) -> Vec<u8> {
    const VERSION: u8 = 131;
    const LIST: u8 = 108;
    const NIL: u8 = 106;
    const SMALL_TUPLE: u8 = 104;
    const BINARY: u8 = 109;
    let node = NODE.get().map_or(crate::node::DEFAULT_NODE, String::as_str);
    let mut t = vec![VERSION, LIST, 0, 0, 0, 1, SMALL_TUPLE, 3];
    atom(&mut t, node);
    t.extend([LIST, 0, 0, 0, 2]);
    integer(&mut t, 0);
    integer(&mut t, u64::from(u32::MAX));
    t.extend([NIL, SMALL_TUPLE, 3]);
    integer(&mut t, n);
    t.extend([BINARY, 0, 0, 0, 0]);
    atom(&mut t, node);
    t.push(NIL);
    t
}

/// `SMALL_ATOM_UTF8_EXT` (node names are short; a longer one is cut at 255 bytes).
fn atom(t: &mut Vec<u8>, name: &str) {
    let bytes = &name.as_bytes()[..name.len().min(255)];
    t.push(119);
    t.push(bytes.len() as u8);
    t.extend(bytes);
}

/// `SMALL_INTEGER_EXT`, `INTEGER_EXT` or `SMALL_BIG_EXT`, as `term_to_binary` picks.
fn integer(t: &mut Vec<u8>, v: u64) {
    if let Ok(small) = u8::try_from(v) {
        t.extend([97, small]);
    } else if let Ok(int) = i32::try_from(v) {
        t.push(98);
        t.extend(int.to_be_bytes());
    } else {
        let digits = v.to_le_bytes();
        let len = 8 - (v.leading_zeros() / 8) as usize;
        t.extend([110, len as u8, 0]);
        t.extend(&digits[..len]);
    }
}

/// A seq as clients send it back: `N`, `"N"` or `"N-…"`.
pub fn parse(text: &str) -> ApiResult<u64> {
    let text = text.trim_matches('"');
    let number = text.split('-').next().unwrap_or_default();
    number
        .parse()
        .map_err(|_| ApiError::bad_request("Malformed sequence supplied in 'since' parameter."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_seqs_parse_back() {
        for n in [0, 1, 42, u64::MAX] {
            let text = render(n);
            assert!(text.starts_with(&format!("{n}-")), "{text}");
            assert_eq!(parse(&text).unwrap(), n);
        }
        assert_eq!(parse("7").unwrap(), 7);
        assert_eq!(parse("\"8\"").unwrap(), 8);
        assert!(parse("x-1").is_err());
    }

    #[test]
    fn the_opaque_part_is_the_external_term_of_one_shard() {
        let text = render(300);
        let opaque = URL_SAFE_NO_PAD.decode(text.split_once('-').unwrap().1).unwrap();
        let mut want = vec![131, 108, 0, 0, 0, 1, 104, 3, 119, 15];
        want.extend(b"bunko@127.0.0.1");
        want.extend([108, 0, 0, 0, 2, 97, 0, 110, 4, 0, 255, 255, 255, 255, 106]);
        want.extend([104, 3, 98, 0, 0, 1, 44, 109, 0, 0, 0, 0, 119, 15]);
        want.extend(b"bunko@127.0.0.1");
        want.push(106);
        assert_eq!(opaque, want);
    }
}
