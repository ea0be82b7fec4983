//! The engine as a library, on the in-memory store: revisions, conflicts, `_changes`,
//! counters and partitions, without HTTP.

use std::sync::Arc;

use bunko_doc::body::{self, ParsedDoc};
use bunko_engine::changes::ChangesQuery;
use bunko_engine::security::UserCtx;
use bunko_engine::{Config, Engine, Error, WriteOptions};
use bunko_storage::Memory;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn doc(json: &str) -> Result<ParsedDoc> {
    Ok(body::parse(json.as_bytes(), &Default::default())?)
}

fn admin() -> UserCtx {
    UserCtx::admin("test")
}

fn engine() -> Result<Engine> {
    Ok(Engine::open(Arc::new(Memory::new()), Config::default())?)
}

#[test]
fn edits_must_name_the_current_leaf() -> Result<()> {
    let db = engine()?.create_db(&admin(), "books", false)?;
    let rev1 =
        db.put(&admin(), doc(r#"{"_id":"b1","pub-id":"mspress"}"#)?, WriteOptions::default())?;
    let stale = db.put(&admin(), doc(r#"{"_id":"b1","pub-id":"other"}"#)?, WriteOptions::default());
    assert!(matches!(stale, Err(Error::Conflict)));
    let edit = format!(r#"{{"_id":"b1","_rev":"{rev1}","pub-id":"other"}}"#);
    let rev2 = db.put(&admin(), doc(&edit)?, WriteOptions::default())?;
    assert_eq!(rev2.pos, 2);
    assert!(matches!(db.put(&admin(), doc(&edit)?, WriteOptions::default()), Err(Error::Conflict)));
    assert_eq!(db.get(&admin(), "b1", None)?.body, br#"{"pub-id":"other"}"#);
    assert_eq!(
        db.get(&admin(), "b1", Some(&rev1))?.body,
        br#"{"pub-id":"mspress"}"#,
        "kept until compaction"
    );
    assert_eq!(db.compact()?, 1);
    assert!(matches!(db.get(&admin(), "b1", Some(&rev1)), Err(Error::NotFound(_))));
    Ok(())
}

#[test]
fn replicated_branches_keep_conflicts_and_pick_couchdbs_winner() -> Result<()> {
    let db = engine()?.create_db(&admin(), "r", false)?;
    let replicated = WriteOptions { new_edits: false, ..Default::default() };
    db.put(&admin(), doc(r#"{"_id":"d","_rev":"1-a","v":1}"#)?, replicated)?;
    db.put(
        &admin(),
        doc(r#"{"_id":"d","_revisions":{"start":2,"ids":["b","a"]},"_rev":"2-b","v":"b"}"#)?,
        replicated,
    )?;
    db.put(
        &admin(),
        doc(r#"{"_id":"d","_revisions":{"start":2,"ids":["c","a"]},"_rev":"2-c","v":"c"}"#)?,
        replicated,
    )?;
    let got = db.get(&admin(), "d", None)?;
    assert_eq!((got.rev.to_string(), got.body), ("2-c".to_string(), br#"{"v":"c"}"#.to_vec()));
    let (live, deleted) = got.info.tree.conflicts();
    assert_eq!((live.len(), deleted.len()), (1, 0));
    db.put(
        &admin(),
        doc(
            r#"{"_id":"d","_revisions":{"start":3,"ids":["z","c"]},"_rev":"3-z","_deleted":true}"#,
        )?,
        replicated,
    )?;
    assert_eq!(
        db.get(&admin(), "d", None)?.rev.to_string(),
        "2-b",
        "a live leaf beats a deleted one"
    );
    Ok(())
}

#[test]
fn changes_list_each_document_once_at_its_latest_seq() -> Result<()> {
    let db = engine()?.create_db(&admin(), "c", false)?;
    let rev = db.put(&admin(), doc(r#"{"_id":"a"}"#)?, WriteOptions::default())?;
    db.put(&admin(), doc(r#"{"_id":"b"}"#)?, WriteOptions::default())?;
    db.delete(&admin(), "a", Some(rev))?;
    let mut changes = db.changes(&admin(), ChangesQuery::default())?;
    let rows: Vec<(u64, String, bool)> = changes
        .by_ref()
        .map(|r| r.map(|r| (r.seq, r.id, r.deleted)))
        .collect::<std::result::Result<_, _>>()?;
    assert_eq!(rows, vec![(2, "b".to_string(), false), (3, "a".to_string(), true)]);
    assert_eq!(changes.last_seq(), 3);
    let info = db.info();
    assert_eq!((info.stats.doc_count, info.stats.doc_del_count, info.update_seq), (1, 1, 3));
    Ok(())
}

#[test]
fn partitioned_databases_count_per_partition_and_refuse_overflow() -> Result<()> {
    let config = Config { max_partition_size: 200, ..Config::default() };
    let engine = Engine::open(Arc::new(Memory::new()), config)?;
    let db = engine.create_db(&admin(), "readings", true)?;
    let unpartitioned = db.put(&admin(), doc(r#"{"_id":"nocolon"}"#)?, WriteOptions::default());
    assert!(matches!(unpartitioned, Err(Error::Doc(bunko_doc::Error::IllegalDocId(_)))));
    let reading = r#"{"_id":"bridge-1234:device-1","deviceID":"device-1","ts":1544526804}"#;
    db.put(&admin(), doc(reading)?, WriteOptions::default())?;
    db.put(
        &admin(),
        doc(r#"{"_id":"bridge-9876:device-2","deviceID":"device-2"}"#)?,
        WriteOptions::default(),
    )?;
    assert_eq!(db.partition_stats("bridge-1234")?.doc_count, 1);
    // As in CouchDB, the write that crosses the limit lands; the partition is then full.
    let big = format!(r#"{{"_id":"bridge-1234:big","pad":"{}"}}"#, "x".repeat(300));
    let big_rev = db.put(&admin(), doc(&big)?, WriteOptions::default())?;
    assert_eq!(db.partition_stats("bridge-1234")?.doc_count, 2);
    assert!(matches!(
        db.put(&admin(), doc(r#"{"_id":"bridge-1234:more"}"#)?, WriteOptions::default()),
        Err(Error::PartitionOverflow(id)) if id == "bridge-1234:more"
    ));
    assert_eq!(db.partition_stats("bridge-1234")?.doc_count, 2, "nothing written");
    // Other partitions, replicated writes and deletes still go through.
    db.put(&admin(), doc(r#"{"_id":"bridge-9876:device-3"}"#)?, WriteOptions::default())?;
    let replicated = r#"{"_id":"bridge-1234:r","_rev":"1-23202479633c2b380f79507a776743d5"}"#;
    db.put(&admin(), doc(replicated)?, WriteOptions { new_edits: false, ..Default::default() })?;
    db.delete(&admin(), "bridge-1234:big", Some(big_rev))?;
    assert_eq!(db.partition_stats("bridge-1234")?.doc_count, 2);
    Ok(())
}

/// The `offset` of a global `_all_docs` in a partitioned database is summed from the
/// partitions' counters when more than 1024 documents come before the start key; it must
/// equal counting the live rows before the start key, with partition names that sort
/// differently as names and as `name:` prefixes (`a`, `a-b`, `ab`), a design document
/// among them, a deleted document, and a partition `m` of 1100 documents that the start
/// key may cut.
#[test]
fn global_all_docs_offset_of_a_partitioned_database_counts_the_rows_before() -> Result<()> {
    use bunko_engine::all_docs::AllDocsQuery;
    let db = engine()?.create_db(&admin(), "p", true)?;
    let ids = ["a:1", "a:2", "a:3", "a-b:1", "a-b:2", "ab:1", "b:1", "b:2", "b:3", "c:1"];
    for id in ids.iter().chain(&["_design/x"]) {
        db.put(&admin(), doc(&format!(r#"{{"_id":"{id}"}}"#))?, WriteOptions::default())?;
    }
    let many =
        (0..1100).map(|i| doc(&format!(r#"{{"_id":"m:{i:04}"}}"#))).collect::<Result<_>>()?;
    db.update_docs(&admin(), many, WriteOptions::default())?;
    let rev = db.get(&admin(), "b:2", None)?.rev;
    db.put(
        &admin(),
        doc(&format!(r#"{{"_id":"b:2","_rev":"{rev}","_deleted":true}}"#))?,
        Default::default(),
    )?;
    let live: Vec<String> = db
        .all_docs(&admin(), &AllDocsQuery::default(), None)?
        .rows
        .map(|r| Ok(r?.id))
        .collect::<Result<_>>()?;
    assert_eq!(live.len(), 1110);
    let starts = [
        "m:",
        "m:0500",
        "m:1099",
        "n",
        "",
        "a",
        "a:",
        "a:2",
        "a-b:",
        "a-b:2",
        "ab:1",
        "b:",
        "b:2",
        "b:25",
        "c",
        "_design/x",
        "_e",
        "zzz",
    ];
    for start in starts {
        for descending in [false, true] {
            for skip in [0, 2] {
                let query = AllDocsQuery {
                    start: Some(start.to_string()),
                    descending,
                    skip,
                    limit: Some(1),
                    ..Default::default()
                };
                let before = live
                    .iter()
                    .filter(|id| if descending { id.as_str() > start } else { id.as_str() < start })
                    .count() as u64;
                let got = db.all_docs(&admin(), &query, None)?;
                assert_eq!(got.total_rows, 1110);
                assert_eq!(
                    got.offset,
                    (before + skip).min(1110),
                    "start {start:?} descending {descending} skip {skip}"
                );
            }
        }
    }
    Ok(())
}

/// Which writes may run on an async worker (issue 20): small normal documents, once the
/// database is known to have no validators or triggers; never design documents,
/// attachments, `_users` or large bodies. A design document change makes the next write
/// heavy again (its functions must be compiled).
#[test]
fn light_writes_are_small_plain_documents_without_javascript() -> Result<()> {
    let engine = engine()?;
    let db = engine.create_db(&admin(), "iot", false)?;
    let small = doc(r#"{"_id":"r1","t":21.5}"#)?;
    assert!(!db.is_light_write(&small, 20), "validators not compiled yet");
    db.put(&admin(), doc(r#"{"_id":"r0"}"#)?, WriteOptions::default())?;
    assert!(db.is_light_write(&small, 20));
    assert!(!db.is_light_write(&small, 1 << 20), "a large body");
    assert!(!db.is_light_write(&doc(r#"{"_id":"_design/d"}"#)?, 20));
    let att =
        r#"{"_id":"r2","_attachments":{"a.txt":{"content_type":"text/plain","data":"aGk="}}}"#;
    assert!(!db.is_light_write(&doc(att)?, 20));
    let ddoc = r#"{"_id":"_design/v","validate_doc_update":"function(n,o,u){}"}"#;
    db.put(&admin(), doc(ddoc)?, WriteOptions::default())?;
    assert!(!db.is_light_write(&small, 20), "a validator now runs on every write");
    let users = engine.db("_users").or_else(|_| engine.create_db(&admin(), "_users", false))?;
    users.put(&admin(), doc(r#"{"_id":"other"}"#)?, WriteOptions::default()).ok();
    assert!(!users.is_light_write(&small, 20), "_users hashes passwords");
    Ok(())
}
