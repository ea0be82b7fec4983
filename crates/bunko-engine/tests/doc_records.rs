//! Where a document's winning body is stored (issue 20 point 2): in a format 3 store its
//! `Doc` record carries it, so a point read is one lookup; documents written before (a
//! format 2 directory: every body under its `Rev` key) still read, update, compact and
//! purge; a format 1 directory keeps every body under its `Rev` key. The record's tree is
//! its stored head, readable without decompressing the body.

use std::path::Path;
use std::sync::Arc;

use bunko_doc::RevId;
use bunko_doc::body;
use bunko_engine::all_docs::AllDocsQuery;
use bunko_engine::keys::Key;
use bunko_engine::records::{self, DocInfo, DocRecord};
use bunko_engine::revtree::RevTree;
use bunko_engine::security::UserCtx;
use bunko_engine::{Config, Database, Engine, WriteOptions};
use bunko_storage::{Batch, Fjall, Read, Store};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn admin() -> UserCtx {
    UserCtx::admin("test")
}

/// A store in `dir`, whose marker says `format` before it is opened.
fn store_marked(dir: &Path, format: u32) -> Result<Arc<Fjall>> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("BUNKO_FORMAT"), format!("bunko storage format {format}\n"))?;
    Ok(Arc::new(Fjall::open(dir)?))
}

fn put(db: &Database, json: &str) -> Result<RevId> {
    let doc = body::parse(json.as_bytes(), &Default::default())?;
    Ok(db.put(&admin(), doc, WriteOptions::default())?)
}

fn rev_key(store: &dyn Read, db: &Database, id: &str, rev: &RevId) -> Result<Option<Vec<u8>>> {
    Ok(store.get(&Key::Rev(db.id(), id, &rev.to_string()).encode())?)
}

fn record(store: &dyn Read, db: &Database, id: &str) -> Result<DocRecord> {
    let bytes = store.get(&Key::Doc(db.id(), id).encode())?.ok_or("no Doc record")?;
    Ok(DocRecord::decode(&bytes)?)
}

/// Writes document `id` with one revision as a format 2 build did: the tree alone in the
/// `Doc` record, the body under its `Rev` key.
fn write_as_format_2(store: &dyn Store, db: &Database, id: &str, body: &[u8]) -> Result<RevId> {
    let rev = RevId { pos: 1, hash: "a1".repeat(16) };
    let mut tree = RevTree::default();
    tree.push(rev.clone(), None, false);
    let info = DocInfo { seq: 1, tree, size: body.len() as u64 };
    let mut batch = Batch::new();
    batch.put(Key::Doc(db.id(), id).encode(), records::encode(&info));
    batch.put(Key::Rev(db.id(), id, &rev.to_string()).encode(), body.to_vec());
    store.commit(batch)?;
    Ok(rev)
}

#[test]
fn a_records_tree_is_read_apart_from_the_compressed_body_it_carries() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(Fjall::open(dir.path())?);
    let engine = Engine::open(store.clone(), Config::default())?;
    let db = engine.create_db(&admin(), "readings", false)?;
    let text = "temperature 21.5 at the north gate; ".repeat(30);
    let rev = put(&db, &format!(r#"{{"_id":"r1","note":"{text}"}}"#))?;
    let key = Key::Doc(db.id(), "r1").encode();
    let whole = store.get(&key)?.ok_or("no Doc record")?;
    let head = store.get_head(&key)?.ok_or("no Doc record")?;
    assert!(head.len() < 100 && whole.len() > text.len(), "{} / {}", head.len(), whole.len());
    assert_eq!(whole[..head.len()], head);
    let info: DocInfo = records::decode(&head)?;
    assert_eq!(info.winner()?, (&rev, false));
    assert_eq!(DocRecord::decode(&head)?.body, None);
    assert!(DocRecord::decode(&whole)?.body_of(&rev).is_some());
    // Readers of the tree alone (`_all_docs`, `_changes`) and of the body agree.
    for include_docs in [false, true] {
        let query = AllDocsQuery { include_docs, ..AllDocsQuery::default() };
        let rows = db.all_docs(&admin(), &query, None)?.rows.collect::<Vec<_>>();
        let row = match rows.as_slice() {
            [Ok(row)] => row,
            other => return Err(format!("rows {other:?}").into()),
        };
        assert_eq!((row.id.as_str(), &row.rev, row.info.seq), ("r1", &rev, info.seq));
        let doc = row.doc.as_ref().map(|doc| doc.body.len() > text.len());
        assert_eq!(doc, include_docs.then_some(true));
    }
    assert!(db.get(&admin(), "r1", None)?.body.len() > text.len());
    Ok(())
}

#[test]
fn a_new_winner_is_carried_by_its_record_and_the_one_it_replaces_keeps_its_body() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(Fjall::open(dir.path())?);
    assert_eq!(store.format(), 4);
    let engine = Engine::open(store.clone(), Config::default())?;
    let db = engine.create_db(&admin(), "books", false)?;
    let rev1 = put(&db, r#"{"_id":"b1","title":"one"}"#)?;
    let carried = record(store.as_ref(), &db, "b1")?;
    assert_eq!(carried.body_of(&rev1), Some(&br#"{"title":"one"}"#[..]));
    assert_eq!(rev_key(store.as_ref(), &db, "b1", &rev1)?, None);
    assert_eq!(db.get(&admin(), "b1", None)?.body, br#"{"title":"one"}"#);

    let rev2 = put(&db, &format!(r#"{{"_id":"b1","_rev":"{rev1}","title":"two"}}"#))?;
    assert_eq!(record(store.as_ref(), &db, "b1")?.body_of(&rev2), Some(&br#"{"title":"two"}"#[..]));
    assert_eq!(
        rev_key(store.as_ref(), &db, "b1", &rev1)?.as_deref(),
        Some(&br#"{"title":"one"}"#[..])
    );
    assert_eq!(db.get(&admin(), "b1", None)?.body, br#"{"title":"two"}"#);
    assert_eq!(db.get(&admin(), "b1", Some(&rev1))?.body, br#"{"title":"one"}"#);

    // Compaction removes the old body; the winner's, in its record, stays.
    assert_eq!(db.compact()?, 1);
    assert!(db.get(&admin(), "b1", Some(&rev1)).is_err());
    assert_eq!(db.get(&admin(), "b1", None)?.body, br#"{"title":"two"}"#);
    Ok(())
}

#[test]
fn documents_written_by_format_2_read_update_and_purge_after_the_directory_is_re_marked()
-> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("data");
    let store = store_marked(&path, 2)?;
    assert_eq!(store.format(), 3);
    assert_eq!(
        std::fs::read_to_string(path.join("BUNKO_FORMAT"))?.trim(),
        "bunko storage format 3"
    );
    let engine = Engine::open(store.clone(), Config::default())?;
    let db = engine.create_db(&admin(), "books", false)?;
    let old = write_as_format_2(store.as_ref(), &db, "b1", br#"{"title":"old"}"#)?;
    let doc = db.get(&admin(), "b1", None)?;
    assert_eq!((doc.rev.clone(), doc.body), (old.clone(), br#"{"title":"old"}"#.to_vec()));

    // An update carries the new body in the record; the old one stays under its key.
    let new = put(&db, &format!(r#"{{"_id":"b1","_rev":"{old}","title":"new"}}"#))?;
    assert_eq!(record(store.as_ref(), &db, "b1")?.body_of(&new), Some(&br#"{"title":"new"}"#[..]));
    assert_eq!(db.get(&admin(), "b1", Some(&old))?.body, br#"{"title":"old"}"#);

    // Purging the carried winner leaves the tree empty and the document gone.
    let purged = db.purge(&admin(), vec![("b1".to_string(), vec![new.clone()])])?;
    assert_eq!(purged.len(), 1);
    assert!(db.get(&admin(), "b1", None).is_err());
    Ok(())
}

#[test]
fn a_purged_conflict_leaves_the_carried_winner_readable() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let store = Arc::new(Fjall::open(dir.path())?);
    let engine = Engine::open(store.clone(), Config::default())?;
    let db = engine.create_db(&admin(), "books", false)?;
    let replicated = |json: &str| -> Result<()> {
        let doc = body::parse(json.as_bytes(), &Default::default())?;
        db.put(&admin(), doc, WriteOptions { new_edits: false, ..WriteOptions::default() })?;
        Ok(())
    };
    replicated(r#"{"_id":"c","_rev":"1-aaaa","side":"a"}"#)?;
    replicated(r#"{"_id":"c","_rev":"1-bbbb","side":"b"}"#)?;
    let winner = db.get(&admin(), "c", None)?;
    assert_eq!(
        (winner.rev.to_string(), winner.body.as_slice()),
        ("1-bbbb".into(), &br#"{"side":"b"}"#[..])
    );
    let loser: RevId = "1-aaaa".parse()?;
    assert_eq!(db.get(&admin(), "c", Some(&loser))?.body, br#"{"side":"a"}"#);
    db.purge(&admin(), vec![("c".to_string(), vec![loser])])?;
    assert_eq!(db.get(&admin(), "c", None)?.body, br#"{"side":"b"}"#);
    // Purging the winner makes nothing of it readable, in the record or under a key.
    let winner: RevId = "1-bbbb".parse()?;
    db.purge(&admin(), vec![("c".to_string(), vec![winner.clone()])])?;
    assert!(db.get(&admin(), "c", None).is_err());
    assert_eq!(rev_key(store.as_ref(), &db, "c", &winner)?, None);
    Ok(())
}

#[test]
fn a_format_1_directory_keeps_every_body_under_its_rev_key() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("data");
    let store = store_marked(&path, 1)?;
    assert_eq!(store.format(), 1);
    let engine = Engine::open(store.clone(), Config::default())?;
    let db = engine.create_db(&admin(), "books", false)?;
    let rev = put(&db, r#"{"_id":"b1","title":"one"}"#)?;
    assert_eq!(record(store.as_ref(), &db, "b1")?.body, None);
    assert_eq!(
        rev_key(store.as_ref(), &db, "b1", &rev)?.as_deref(),
        Some(&br#"{"title":"one"}"#[..])
    );
    assert_eq!(db.get(&admin(), "b1", None)?.body, br#"{"title":"one"}"#);
    assert_eq!(
        std::fs::read_to_string(path.join("BUNKO_FORMAT"))?.trim(),
        "bunko storage format 1"
    );
    Ok(())
}
