//! MongoDB collections as engine databases: the collection `db.coll` is the database
//! `enc(db) + "$" + enc(coll)` (the MongoDB front end's `names` module parses and checks
//! names; the encoding lives here because the write gate needs it: a user holding a
//! MongoDB role on `db` may create the collections of `db`, see `gate.rs`).
//!
//! `enc` keeps `a`–`z`, `0`–`9`, `_` and `-`, and writes every other character as `(`, the
//! lower-case hex of its UTF-8 bytes, `)`; a database part that would not start with a
//! letter is prefixed with [`PREFIX`] (`enc` never writes `()`).
//!
//! The other way round, the CouchDB databases without `$` (`people`) are the collections of
//! the MongoDB database [`COUCH_DB`] (`_couchdb.people`): every other MongoDB name maps to a
//! name with `$`, so the two cannot meet. Their rights are their own `_security`; no MongoDB
//! role on [`COUCH_DB`] creates them.

/// What a database part that would not start with a letter is prefixed with.
pub const PREFIX: &str = "m()";

/// The MongoDB database whose collections are the CouchDB databases without `$`.
pub const COUCH_DB: &str = "_couchdb";

/// The CouchDB roles standing for MongoDB's `readWrite` and `dbOwner` on `db`.
pub fn collection_roles(db: &str) -> (String, String) {
    (format!("{db}.readWrite"), format!("{db}.dbOwner"))
}

/// The engine-name prefix every collection of the MongoDB database `db` has (`enc(db)`).
pub fn db_prefix(db: &str) -> String {
    let enc = encode(db);
    if enc.starts_with(|c: char| c.is_ascii_lowercase()) { enc } else { format!("{PREFIX}{enc}") }
}

/// `enc`: a name as it appears in an engine database name.
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-' {
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            out.push('(');
            for b in c.encode_utf8(&mut buf).bytes() {
                out.push_str(&format!("{b:02x}"));
            }
            out.push(')');
        }
    }
    out
}
