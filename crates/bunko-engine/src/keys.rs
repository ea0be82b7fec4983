//! Every key the engine writes: the [`Key`] enum and its encoding. `docs/architecture/keys.md`
//! repeats this table; keep them in step.
//!
//! | tag | key | value |
//! |---|---|---|
//! | `0x01` | `Meta(name)` | server-wide values (`next_db_id`, `cookie_secret`, `server_uuid`, `mongo_retry/…`, `mongo_clock`) |
//! | `0x02` | `Db(name)` | [`crate::records::DbMeta`] |
//! | `0x03` | `Doc(db, id)` | [`crate::records::DocRecord`]: the revision tree, and in a format 3 store the winner's body |
//! | `0x04` | `Rev(db, id, rev)` | body of a revision (compact JSON) that its `Doc` record does not carry; non-leaf bodies stay until `_compact` |
//! | `0x05` | `Seq(db, seq)` | the id of the document whose latest change has this seq |
//! | `0x06` | `Local(db, id)` | [`crate::records::LocalDoc`] |
//! | `0x07` | `Stats(db)` | [`crate::records::Stats`] of the database |
//! | `0x08` | `PartStats(db, partition)` | [`crate::records::Stats`] of one partition |
//! | `0x09` | `Dropped(db)` | marks a deleted database whose keys are still being removed |
//! | `0x0A` | index entry `(db, num, [partition], values…, doc_id)` | `[[values…], doc_id, [whole…]]` ([`crate::index::entries`]) |
//! | `0x0B` | `IdxMeta(db, ddoc, name)` | [`crate::index::IndexMeta`]: storage number, build cursor, multikey paths |
//! | `0x0C` | `IdxDropped(db, num)` | marks a removed index whose entries are still being removed |
//! | `0x0D` | [`VIEW_META`]: map index checkpoint `(db, sig)` | reserved for `bunko-views`: seq reached, rows |
//! | `0x0E` | [`VIEW_ROW`]: view row `(db, sig, [partition], key, doc_id, n)` | reserved for `bunko-views`: `[key, doc_id, value]` |
//! | `0x0F` | [`VIEW_BACK`]: view back-index `(db, sig, doc_id)` | reserved for `bunko-views`: the document's row keys |
//! | `0x10` | `Config(section, key)` | a `_config` change: `Option<String>` (postcard; `None` = deleted) |
//! | `0x11` | `AttChunk(db, digest, n)` | chunk `n` of an attachment body (raw bytes, 64 KiB but the last) |
//! | `0x12` | `Event(db, seq)` | [`crate::records::ChangeRecord`]: the change journal (every write, for change streams) |
//! | `0x13` | `Purge(db, purge_seq)` | [`crate::records::PurgeInfo`]: one `_purge` request, kept up to `purged_infos_limit` |
//! | `0x14` | `PurgedLimit(db)` | `purged_infos_limit` (postcard `u64`; absent = 1000) |
//! | `0x15` | geo index `(db, sig, …)` | written by `bunko-search` (its `geo_store.rs`); the engine only drops it with the database |
//! | `0x16` | `AttAlias(db, digest)` | the 16-byte token whose `AttChunk`s hold the body of this MD5 (a streamed upload, [`crate::upload`]) |
//! | `0x17` | `AttGzip(db, digest)` | the body of this MD5 is stored gzipped: the length of its gzip (postcard `u64`); absent = stored as it is |
//! | `0x18` | `Natural(db, n)` | a capped database's insertion order: the id of the document inserted by the write that got seq `n` ([`crate::capped`]) |
//! | `0x19` | `NaturalOf(db, id)` | the `n` of a live document of a capped database (8 bytes big-endian) |
//! | `0x1A` | `NaturalFrom(db)` | marks that a capped database keeps `Natural` keys (postcard `u64`: the update seq when they started) |
//! | `0x20` | spill entry `(spill, key…)` | a query operator's temporary data ([`crate::spill`]); removed when it ends and at start-up |
//!
//! Tags `0x0D`–`0x0F` belong to the views built above the engine (`bunko-views` writes and
//! reads them); the engine only reserves them, and removes them with the database.
//!
//! `db` is the database's numeric id (8 bytes big-endian), never its name, so that a deleted
//! and re-created database starts empty while the old one's keys are removed in the
//! background. Ids and names are encoded with [`bunko_doc::keycode`]: within a database,
//! `Doc` keys sort by id bytewise, so one partition's documents (ids `p:…`) are one
//! contiguous range ([`doc_prefix`]).

use bunko_doc::keycode::{KeyReader, KeyWriter};
use bunko_storage::{Range, prefix_range};

use crate::{Error, Result};

const META: u8 = 0x01;
const DB: u8 = 0x02;
const DOC: u8 = 0x03;
const REV: u8 = 0x04;
const SEQ: u8 = 0x05;
const LOCAL: u8 = 0x06;
const STATS: u8 = 0x07;
const PART_STATS: u8 = 0x08;
const DROPPED: u8 = 0x09;
const IDX_META: u8 = 0x0B;
const IDX_DROPPED: u8 = 0x0C;
const CONFIG: u8 = 0x10;
const ATT_CHUNK: u8 = 0x11;
const EVENT: u8 = 0x12;
const PURGE: u8 = 0x13;
const PURGED_LIMIT: u8 = 0x14;
/// The keys of Cloudant Geo indexes, which `bunko-search` writes (`geo_store.rs`).
pub const GEO: u8 = 0x15;
const ATT_ALIAS: u8 = 0x16;
const ATT_GZIP: u8 = 0x17;
const NATURAL: u8 = 0x18;
const NATURAL_OF: u8 = 0x19;
const NATURAL_FROM: u8 = 0x1A;
const SPILL: u8 = 0x20;

/// Reserved for `bunko-views`: the checkpoint of a map index, `(db, sig)`.
pub const VIEW_META: u8 = 0x0D;
/// Reserved for `bunko-views`: a view row, `(db, sig, [partition], key, doc_id, n)`.
pub const VIEW_ROW: u8 = 0x0E;
/// Reserved for `bunko-views`: a map index's back-index, `(db, sig, doc_id)`.
pub const VIEW_BACK: u8 = 0x0F;

/// A storage key; see the module docs for the layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Key<'a> {
    Meta(&'a str),
    Db(&'a str),
    Doc(u64, &'a str),
    Rev(u64, &'a str, &'a str),
    Seq(u64, u64),
    Local(u64, &'a str),
    Stats(u64),
    PartStats(u64, &'a str),
    Dropped(u64),
    IdxMeta(u64, &'a str, &'a str),
    IdxDropped(u64, u64),
    Config(&'a str, &'a str),
    /// Chunk `n` of the attachment body whose MD5 is `digest` (16 bytes) in database `db`.
    AttChunk(u64, &'a [u8], u64),
    /// The change journal entry of the write that got `seq`.
    Event(u64, u64),
    /// The purge request numbered `purge_seq`.
    Purge(u64, u64),
    /// The database's `purged_infos_limit`.
    PurgedLimit(u64),
    /// Where the body whose MD5 is `digest` is stored when it was streamed in: its value
    /// is the upload's token, the digest its `AttChunk` keys carry instead.
    AttAlias(u64, &'a [u8]),
    /// Marks the body whose MD5 is `digest` as stored gzipped; its value is the length of
    /// the gzip. Bodies without one (all those written before it existed) are stored as
    /// they came.
    AttGzip(u64, &'a [u8]),
    /// A capped database's insertion order: the document inserted by the write that got
    /// seq `n`.
    Natural(u64, u64),
    /// The `n` of a live document of a capped database.
    NaturalOf(u64, &'a str),
    /// The capped database keeps `Natural` keys.
    NaturalFrom(u64),
}

impl Key<'_> {
    pub fn encode(&self) -> Vec<u8> {
        match *self {
            Key::Meta(name) => KeyWriter::new(META).str(name).finish(),
            Key::Db(name) => KeyWriter::new(DB).str(name).finish(),
            Key::Doc(db, id) => KeyWriter::new(DOC).u64(db).str(id).finish(),
            Key::Rev(db, id, rev) => KeyWriter::new(REV).u64(db).str(id).str(rev).finish(),
            Key::Seq(db, seq) => KeyWriter::new(SEQ).u64(db).u64(seq).finish(),
            Key::Local(db, id) => KeyWriter::new(LOCAL).u64(db).str(id).finish(),
            Key::Stats(db) => KeyWriter::new(STATS).u64(db).finish(),
            Key::PartStats(db, p) => KeyWriter::new(PART_STATS).u64(db).str(p).finish(),
            Key::Dropped(db) => KeyWriter::new(DROPPED).u64(db).finish(),
            Key::IdxMeta(db, ddoc, name) => {
                KeyWriter::new(IDX_META).u64(db).str(ddoc).str(name).finish()
            }
            Key::IdxDropped(db, num) => KeyWriter::new(IDX_DROPPED).u64(db).u64(num).finish(),
            Key::Config(section, key) => KeyWriter::new(CONFIG).str(section).str(key).finish(),
            Key::Event(db, seq) => KeyWriter::new(EVENT).u64(db).u64(seq).finish(),
            Key::Purge(db, pseq) => KeyWriter::new(PURGE).u64(db).u64(pseq).finish(),
            Key::PurgedLimit(db) => KeyWriter::new(PURGED_LIMIT).u64(db).finish(),
            Key::AttAlias(db, digest) => KeyWriter::new(ATT_ALIAS).u64(db).bytes(digest).finish(),
            Key::AttGzip(db, digest) => KeyWriter::new(ATT_GZIP).u64(db).bytes(digest).finish(),
            Key::Natural(db, n) => KeyWriter::new(NATURAL).u64(db).u64(n).finish(),
            Key::NaturalOf(db, id) => KeyWriter::new(NATURAL_OF).u64(db).str(id).finish(),
            Key::NaturalFrom(db) => KeyWriter::new(NATURAL_FROM).u64(db).finish(),
            Key::AttChunk(db, digest, n) => {
                KeyWriter::new(ATT_CHUNK).u64(db).bytes(digest).u64(n).finish()
            }
        }
    }
}

/// The range of all database catalog entries.
pub fn db_range() -> Range {
    prefix_range(&[DB])
}

/// The range of the `Meta` records whose name starts with `prefix`.
pub fn meta_prefix(prefix: &str) -> Range {
    prefix_range(&KeyWriter::new(META).bytes_prefix(prefix.as_bytes()))
}

/// The range of all `Dropped` markers.
pub fn dropped_range() -> Range {
    prefix_range(&[DROPPED])
}

/// The range of every document of a database.
pub fn doc_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(DOC).u64(db).finish())
}

/// The bytes every `Doc` key of database `db` starts with.
pub fn doc_range_prefix(db: u64) -> Vec<u8> {
    KeyWriter::new(DOC).u64(db).finish()
}

/// The documents of database `db` with `start <= id < end`.
pub fn doc_id_range(db: u64, start: &str, end: &str) -> Range {
    use std::ops::Bound;
    (Bound::Included(Key::Doc(db, start).encode()), Bound::Excluded(Key::Doc(db, end).encode()))
}

/// The range of the documents whose id starts with `prefix` (e.g. `"p:"`).
pub fn doc_prefix(db: u64, prefix: &str) -> Range {
    prefix_range(&KeyWriter::new(DOC).u64(db).bytes_prefix(prefix.as_bytes()))
}

/// The range of the stored revision bodies of one document.
pub fn rev_range(db: u64, id: &str) -> Range {
    prefix_range(&KeyWriter::new(REV).u64(db).str(id).finish())
}

/// The range of a database's `_changes` entries.
pub fn seq_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(SEQ).u64(db).finish())
}

/// The range of a capped database's `Natural` keys (its insertion order).
pub fn natural_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(NATURAL).u64(db).finish())
}

/// The `Natural` keys of database `db` from `n` on (`n..`) or up to it (`..n`).
pub fn natural_bound(db: u64, n: u64, after: bool) -> Range {
    use std::ops::Bound;
    let (start, end) = natural_range(db);
    let at = Key::Natural(db, n).encode();
    match after {
        true => (Bound::Excluded(at), end),
        false => (start, Bound::Excluded(at)),
    }
}

/// Decodes the `n` of a `Natural` key.
pub fn decode_natural(key: &[u8]) -> Result<u64> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, NATURAL)?;
    r.u64().map_err(corrupt)?;
    r.u64().map_err(corrupt)
}

/// The range of a database's `_local` documents.
pub fn local_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(LOCAL).u64(db).finish())
}

/// The range of a database's `PartStats` records, one per partition.
pub fn part_stats_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(PART_STATS).u64(db).finish())
}

/// Every range holding keys of database `db` (for dropping it).
pub fn all_db_ranges(db: u64) -> Vec<Range> {
    let mut ranges: Vec<Range> = [
        DOC,
        REV,
        SEQ,
        LOCAL,
        PART_STATS,
        ATT_CHUNK,
        ATT_ALIAS,
        ATT_GZIP,
        NATURAL,
        NATURAL_OF,
        NATURAL_FROM,
        EVENT,
        PURGE,
        PURGED_LIMIT,
        GEO,
        crate::index::entries::IDX,
        IDX_META,
        IDX_DROPPED,
        VIEW_META,
        VIEW_ROW,
        VIEW_BACK,
    ]
    .iter()
    .map(|&tag| prefix_range(&KeyWriter::new(tag).u64(db).finish()))
    .collect();
    ranges.push(prefix_range(&Key::Stats(db).encode()));
    ranges
}

/// The ranges of a database's documents and of what their writes maintain in the same
/// commit: all its ranges but those of its views and geo indexes, which are built apart
/// (what `sizes.file` counts, as CouchDB keeps views in files of their own).
pub fn document_ranges(db: u64) -> Vec<Range> {
    let apart: Vec<Range> = [VIEW_META, VIEW_ROW, VIEW_BACK, GEO]
        .iter()
        .map(|&tag| prefix_range(&KeyWriter::new(tag).u64(db).finish()))
        .collect();
    all_db_ranges(db).into_iter().filter(|range| !apart.contains(range)).collect()
}

/// The range of all `Config` changes.
pub fn config_range() -> Range {
    prefix_range(&[CONFIG])
}

/// Decodes `(section, key)` of a `Config` key.
pub fn decode_config(key: &[u8]) -> Result<(String, String)> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, CONFIG)?;
    Ok((r.string().map_err(corrupt)?, r.string().map_err(corrupt)?))
}

/// The range of every attachment chunk of database `db`.
pub fn att_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(ATT_CHUNK).u64(db).finish())
}

/// The range of the chunks of one attachment body.
pub fn att_body_range(db: u64, digest: &[u8]) -> Range {
    prefix_range(&KeyWriter::new(ATT_CHUNK).u64(db).bytes(digest).finish())
}

/// The range of every `AttAlias` of database `db`.
pub fn att_alias_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(ATT_ALIAS).u64(db).finish())
}

/// The range of every `AttGzip` of database `db`.
pub fn att_gzip_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(ATT_GZIP).u64(db).finish())
}

/// Decodes the digest of an `AttGzip` key.
pub fn decode_att_gzip(key: &[u8]) -> Result<Vec<u8>> {
    decode_att_digest(key, ATT_GZIP)
}

/// Decodes the digest of an `AttAlias` key.
pub fn decode_att_alias(key: &[u8]) -> Result<Vec<u8>> {
    decode_att_digest(key, ATT_ALIAS)
}

/// The digest of a key `tag | db | digest …`.
fn decode_att_digest(key: &[u8], tag: u8) -> Result<Vec<u8>> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, tag)?;
    r.u64().map_err(corrupt)?;
    r.bytes().map_err(corrupt)
}

/// Decodes the digest of an `AttChunk` key.
pub fn decode_att_chunk(key: &[u8]) -> Result<Vec<u8>> {
    decode_att_digest(key, ATT_CHUNK)
}

/// The range of a database's `IdxMeta` records.
pub fn idx_meta_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(IDX_META).u64(db).finish())
}

/// The range of all `IdxDropped` markers.
pub fn idx_dropped_range() -> Range {
    prefix_range(&[IDX_DROPPED])
}

/// Decodes `(ddoc, name)` of an `IdxMeta` key.
pub fn decode_idx_meta(key: &[u8]) -> Result<(String, String)> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, IDX_META)?;
    r.u64().map_err(corrupt)?;
    Ok((r.string().map_err(corrupt)?, r.string().map_err(corrupt)?))
}

/// Decodes `(db, num)` of an `IdxDropped` key.
pub fn decode_idx_dropped(key: &[u8]) -> Result<(u64, u64)> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, IDX_DROPPED)?;
    Ok((r.u64().map_err(corrupt)?, r.u64().map_err(corrupt)?))
}

/// Decodes the name of a `Db` key.
pub fn decode_db(key: &[u8]) -> Result<String> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, DB)?;
    let name = r.string().map_err(corrupt)?;
    r.done().map_err(corrupt)?;
    Ok(name)
}

/// Decodes the id of a `Doc` key.
pub fn decode_doc(key: &[u8]) -> Result<String> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, DOC)?;
    r.u64().map_err(corrupt)?;
    r.string().map_err(corrupt)
}

/// Decodes the partition name of a `PartStats` key.
pub fn decode_part_stats(key: &[u8]) -> Result<String> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, PART_STATS)?;
    r.u64().map_err(corrupt)?;
    r.string().map_err(corrupt)
}

/// Decodes the seq of a `Seq` key.
pub fn decode_seq(key: &[u8]) -> Result<u64> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, SEQ)?;
    r.u64().map_err(corrupt)?;
    r.u64().map_err(corrupt)
}

/// Decodes the seq of an `Event` key.
pub fn decode_event(key: &[u8]) -> Result<u64> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, EVENT)?;
    r.u64().map_err(corrupt)?;
    r.u64().map_err(corrupt)
}

/// The bytes every temporary key of spill `id` starts with.
pub fn spill_prefix(id: u64) -> Vec<u8> {
    KeyWriter::new(SPILL).u64(id).finish()
}

/// The range of every temporary key of every spill.
pub fn spill_range() -> Range {
    prefix_range(&[SPILL])
}

/// The range of a database's change journal.
pub fn event_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(EVENT).u64(db).finish())
}

/// The range of a database's purge requests.
pub fn purge_range(db: u64) -> Range {
    prefix_range(&KeyWriter::new(PURGE).u64(db).finish())
}

/// Decodes the purge seq of a `Purge` key.
pub fn decode_purge(key: &[u8]) -> Result<u64> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, PURGE)?;
    r.u64().map_err(corrupt)?;
    r.u64().map_err(corrupt)
}

/// Decodes the id of a `Local` key.
pub fn decode_local(key: &[u8]) -> Result<String> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, LOCAL)?;
    r.u64().map_err(corrupt)?;
    r.string().map_err(corrupt)
}

/// Decodes the db id of a `Dropped` key.
pub fn decode_dropped(key: &[u8]) -> Result<u64> {
    let mut r = KeyReader::new(key);
    expect_tag(&mut r, DROPPED)?;
    r.u64().map_err(corrupt)
}

fn expect_tag(r: &mut KeyReader<'_>, tag: u8) -> Result<()> {
    match r.u8() {
        Ok(t) if t == tag => Ok(()),
        _ => Err(Error::Corrupt(format!("expected key tag {tag:#04x}"))),
    }
}

fn corrupt(err: bunko_doc::Error) -> Error {
    Error::Corrupt(err.to_string())
}

#[cfg(test)]
mod tests {
    use std::ops::Bound;

    use super::*;

    /// A store of the newest format keeps each kind of key in the keyspace meant for it
    /// (`bunko-storage`'s `layout.rs`, issue 20 point 8): a tag added here without a line
    /// there lands in `meta`, which this list then shows.
    #[test]
    fn each_key_kind_has_its_keyspace() {
        use crate::index::entries::IDX;
        let meta = [META, DB, LOCAL, STATS, PART_STATS, DROPPED, IDX_META, IDX_DROPPED, CONFIG];
        let kinds = [
            (&[DOC][..], "docs"),
            (&[REV, ATT_CHUNK, ATT_ALIAS, ATT_GZIP], "bodies"),
            (&[SEQ, EVENT, PURGE, NATURAL], "seqs"),
            (&[IDX], "index"),
            (&[VIEW_META, VIEW_ROW, VIEW_BACK, GEO], "views"),
            (&[SPILL], "spill"),
            (&meta, "meta"),
            (&[PURGED_LIMIT, NATURAL_OF, NATURAL_FROM], "meta"),
        ];
        for (tags, keyspace) in kinds {
            for &tag in tags {
                assert_eq!(bunko_storage::keyspace_of_tag(tag), keyspace, "tag {tag:#04x}");
            }
        }
    }

    #[test]
    fn keys_round_trip_and_partitions_are_contiguous() -> Result<()> {
        assert_eq!(decode_db(&Key::Db("readings").encode())?, "readings");
        assert_eq!(decode_doc(&Key::Doc(3, "p:a").encode())?, "p:a");
        assert_eq!(decode_seq(&Key::Seq(3, 99).encode())?, 99);
        assert_eq!(decode_local(&Key::Local(3, "x").encode())?, "x");
        let (Bound::Included(start), Bound::Excluded(end)) = doc_prefix(3, "p:") else {
            return Err(Error::Corrupt("prefix range must be bounded".into()));
        };
        let inside = |id: &str| (start.clone()..end.clone()).contains(&Key::Doc(3, id).encode());
        assert!(inside("p:a") && inside("p:zzz"));
        assert!(!inside("p") && !inside("pa:b") && !inside("q:a"));
        Ok(())
    }

    #[test]
    fn seq_keys_sort_numerically() {
        let keys: Vec<Vec<u8>> =
            [1u64, 2, 255, 256, u64::MAX].map(|s| Key::Seq(1, s).encode()).to_vec();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }
}
