//! CouchDB's collation of JSON values, and a byte encoding that sorts the same way.
//!
//! Every view key and Mango index key is ordered by one of CouchDB's two collations:
//!
//! - **View collation** ([`compare`], [`encode`]), the default, as CouchDB's
//!   `couch_ejson_compare`: `null < false < true < numbers < strings < arrays < objects`.
//!   Strings compare by the Unicode Collation Algorithm, root locale, tertiary strength (ICU's
//!   defaults, which CouchDB does not change). Strings the collator calls equal (`"é"` written
//!   precomposed or as `e` + combining accent; `"a"` and `"a\u{0}"`) *are* equal: CouchDB breaks no
//!   tie between them, a view breaks it by document id like any other equal key.
//! - **Raw collation** ([`compare_raw`], [`encode_raw`]), a view's
//!   `"options": {"collation": "raw"}`: Erlang's term order over the decoded JSON, which is
//!   `numbers < false < null < true < objects < arrays < strings`, strings and object keys
//!   bytewise (UTF-8).
//!
//! In both, arrays compare element by element, then the shorter first; objects compare their
//! members *in document order*, key (by the collation's string order) then value, then the one
//! with fewer members first (`{"b":2} < {"b":2,"a":1} < {"b":2,"c":2}`).
//!
//! Numbers compare by exact value, as Erlang compares the numbers CouchDB's JSON decoder makes:
//! a literal without `.`/`e`/`E` is an exact integer of any size; any other literal is the
//! nearest `f64` (so `0.1000000000000000000001 == 0.1`, but `12345678901234567890123` and
//! `12345678901234567890124` differ), and an integer is compared with a float exactly
//! (`9007199254740993 > 9007199254740992.0`). `1 == 1.0 == 1e0` and `-0 == 0`. The one
//! liberty: a literal too large for an `f64` (Erlang has no infinite float, so CouchDB cannot
//! decode it) keeps its exact decimal value instead of failing.
//!
//! # The encoding
//!
//! [`encode`] (and [`encode_raw`]) append a value's *sort key*: bytes whose order is the
//! collation order, so storage can range-scan keys without decoding them. For all values:
//!
//! 1. `compare(a, b) == encode(a).cmp(&encode(b))`: equal values, and only they, encode equal.
//! 2. The encoding is self-delimiting (prefix-free): no encoding is a proper prefix of another.
//!    So concatenations compare like tuples: `encode(a1) ++ encode(a2) ++ id` orders by `a1`,
//!    then `a2`, then whatever follows (a doc id written by [`crate::keycode::KeyWriter`]).
//! 3. It is one-way: a string's encoding is its collation sort key, from which the string
//!    cannot be recovered. Whoever stores an encoded key keeps the original JSON beside it
//!    (in the index entry's value). Sort keys depend on the collator's data, named by
//!    [`COLLATION_VERSION`]; an index built under another version must be rebuilt.
//!
//! Every encoding starts with a tag byte that orders the types:
//!
//! | value | view tag | raw tag | bytes after the tag |
//! |---|---|---|---|
//! | [`encode_min`] sentinel | `00` | `00` | none |
//! | end of an array or object | `01` | `01` | none |
//! | `null` | `10` | `30` | none |
//! | `false` | `20` | `20` | none |
//! | `true` | `30` | `40` | none |
//! | negative number | `40` | `10` | magnitude, every byte inverted (`!b`) |
//! | zero (`0`, `-0`, `0.0`, `0e5`) | `41` | `11` | none |
//! | positive number | `42` | `12` | magnitude |
//! | string | `50` | `70` | body, escaped and terminated |
//! | array | `60` | `60` | each element's encoding, then `01` |
//! | object | `70` | `50` | per member: key encoded as a string (with tag), value; then `01` |
//! | [`encode_max`] sentinel | `ff` | `ff` | none |
//!
//! **Number magnitude.** A number's value (above) is written as an exact decimal
//! `±0.d₁d₂…dₙ × 10^e` with `d₁ ≠ 0` and `dₙ ≠ 0`. A float literal contributes the digits of
//! its `f64`: all of them when `|f| ≥ 2^53` (there it is an integer, and must encode equal to
//! the integer literal of the same value), otherwise the shortest decimal that reads back as
//! `f` (it orders like `f` against every integer and every other `f64`). The magnitude is:
//!
//! 1. `e`, order-preserving and self-delimiting: `80 + e` for `0 ≤ e < 64`; `40 + (e + 64)`
//!    for `−64 ≤ e < 0`; for `e ≥ 64`, `c0 + (len − 1)` then `e − 64` big-endian in the
//!    fewest `len` bytes (1..=8); for `e < −64`, `3f − (len − 1)` then `−65 − e` big-endian in
//!    the fewest `len` bytes, each byte inverted.
//! 2. The digits two at a time: the pair `d d'` (an odd last digit is paired with `0`) is the
//!    byte `2·(10d + d') + 1` when more pairs follow, `2·(10d + d')` for the last pair.
//!
//! So positive magnitudes order by exponent, then digit by digit, a shorter digit string first;
//! inverting every byte of a negative number's magnitude reverses that. Examples (view tags):
//! `1` is `42 81 14`, `-1` is `40 7e eb`, `123` is `42 83 19 3c`, `0.05` is `42 7f 64`.
//!
//! **String body.** View collation: the ICU4X sort key (tertiary strength) of the string.
//! Raw collation: the UTF-8 bytes. Either way every `00` byte is written `00 ff` and the body
//! ends with `00 01`, so a shorter string sorts first and the end is unambiguous.
//!
//! **Sentinels and prefixes.** [`encode_min`]/[`encode_max`] write one byte that sorts before
//! (after) the encoding of every value. Written where a value may start — at the top level, or
//! as the next element after [`Collation::encode_array_prefix`] — they give the low (high)
//! bound of "anything here": `encode_array_prefix(["a"]) ++ encode_max()` is above every array
//! whose first element is `"a"`, including `["a", {…}]` (CouchDB's `endkey=["a",{}]` misses
//! those), and below `["b"]`.

mod number;
mod raw;
mod unicode;
mod value;

#[cfg(test)]
mod tests;

use std::cmp::Ordering;

use serde_json::Value;

use self::value::Class;

/// Names the encoding format and the collator's code and data (ICU4X `icu_collator` 2.4,
/// CLDR 49). Stored with every index; an index whose version differs must be rebuilt, since
/// string sort keys may have changed. The test `encoding_is_stable` fails when an upgrade
/// changes any encoding: bump this then.
pub const COLLATION_VERSION: &str = "bunko-collate-1/icu4x-2.4/cldr-49";

/// Which of CouchDB's two orders a view or index uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Collation {
    /// View collation: ICU strings, `null < false < true < numbers < strings < arrays <
    /// objects`.
    #[default]
    Unicode,
    /// `"collation": "raw"`: Erlang term order, strings bytewise.
    Raw,
}

impl Collation {
    /// Compares two values in this collation.
    pub fn compare(self, a: &Value, b: &Value) -> Ordering {
        match self {
            Self::Unicode => value::compare::<unicode::Unicode>(a, b),
            Self::Raw => value::compare::<raw::Raw>(a, b),
        }
    }

    /// Appends the order-preserving encoding of `v` to `out`.
    pub fn encode(self, v: &Value, out: &mut Vec<u8>) {
        match self {
            Self::Unicode => value::encode::<unicode::Unicode>(v, out),
            Self::Raw => value::encode::<raw::Raw>(v, out),
        }
    }

    /// Appends the encoding of an array whose first elements are `items`, left open: the
    /// result is a prefix of the encoding of every array that starts with elements equal to
    /// `items` (and of nothing else). Follow it with [`encode_max`] for the high bound of that
    /// range, or with more elements.
    pub fn encode_array_prefix(self, items: &[Value], out: &mut Vec<u8>) {
        match self {
            Self::Unicode => value::encode_open_array::<unicode::Unicode>(items, out),
            Self::Raw => value::encode_open_array::<raw::Raw>(items, out),
        }
    }
}

/// Compares two values in CouchDB's view collation.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    Collation::Unicode.compare(a, b)
}

/// Compares two values in CouchDB's raw collation (Erlang term order).
pub fn compare_raw(a: &Value, b: &Value) -> Ordering {
    Collation::Raw.compare(a, b)
}

/// Appends the view-collation encoding of `v`: `encode(a).cmp(&encode(b)) == compare(a, b)`.
pub fn encode(v: &Value, out: &mut Vec<u8>) {
    Collation::Unicode.encode(v, out);
}

/// Appends the raw-collation encoding of `v`: its byte order is [`compare_raw`].
pub fn encode_raw(v: &Value, out: &mut Vec<u8>) {
    Collation::Raw.encode(v, out);
}

/// Appends a byte that sorts before the encoding of every value (in both collations).
pub fn encode_min(out: &mut Vec<u8>) {
    out.push(value::MIN);
}

/// Appends a byte that sorts after the encoding of every value (in both collations).
pub fn encode_max(out: &mut Vec<u8>) {
    out.push(value::MAX);
}

/// The rank of `v`'s type in view collation, as CouchDB numbers them
/// (`couch_ejson_compare:sort_key`): null 0, false 1, true 2, number 3, string 4, array 5,
/// object 6. Values of different ranks compare by rank.
pub fn type_rank(v: &Value) -> u8 {
    Class::of(v) as u8
}
