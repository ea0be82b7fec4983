//! Hiding a MongoDB index, changing its `expireAfterSeconds`, `prepareUnique` or `unique`,
//! keeps the built index: the same storage number and state under the new definition, no
//! rebuild; `mongo_duplicates` lists the documents sharing a key.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bunko_doc::body;
use bunko_engine::index::mongo::{DDOC, MongoIndexChange, MongoSpec};
use bunko_engine::index::{IndexDef, IndexField};
use bunko_engine::security::UserCtx;
use bunko_engine::{Config, Engine, WriteOptions};
use bunko_storage::Memory;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn def(field: &str) -> IndexDef {
    IndexDef {
        ddoc: DDOC.to_string(),
        name: format!("{field}_1"),
        fields: vec![IndexField { name: field.to_string(), desc: false }],
        partial_filter: None,
        partitioned: false,
        mongo: Some(MongoSpec {
            key: vec![(field.to_string(), 1)],
            unique: false,
            sparse: false,
            partial: None,
            expire_after_seconds: None,
            hashed: None,
            collation: None,
            hidden: false,
            prepare_unique: false,
        }),
    }
}

#[test]
fn hiding_and_a_new_ttl_keep_the_built_index() -> Result<()> {
    let admin = UserCtx::admin("test");
    let engine = Engine::open(Arc::new(Memory::new()), Config::default())?;
    let db = engine.create_db(&admin, "app$c", false)?;
    for i in 0..20 {
        let doc =
            body::parse(format!(r#"{{"_id":"d{i}","a":{i}}}"#).as_bytes(), &Default::default())?;
        db.put(&admin, doc, WriteOptions::default())?;
    }
    db.create_mongo_indexes(&admin, vec![def("a")])?;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !db.mongo_indexes().iter().all(|i| i.is_ready()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(db.mongo_duplicates("a_1")?.is_empty());
    for id in ["x1", "x2"] {
        let doc =
            body::parse(format!(r#"{{"_id":"{id}","a":3.0}}"#).as_bytes(), &Default::default())?;
        db.put(&admin, doc, WriteOptions::default())?;
    }
    assert_eq!(db.mongo_duplicates("a_1")?, vec![vec!["d3", "x1", "x2"]]);
    let before = db.mongo_indexes()[0].meta();
    assert!(before.ready);
    assert_eq!(db.plannable_mongo_indexes().len(), 1);

    let change = MongoIndexChange {
        hidden: Some(true),
        expire_after_seconds: Some(60),
        prepare_unique: Some(true),
        ..Default::default()
    };
    db.modify_mongo_index(&admin, "a_1", change)?;
    let index = db.mongo_indexes()[0].clone();
    let spec = index.def.mongo.as_ref().ok_or("a MongoDB index")?;
    assert_eq!(
        (spec.hidden, spec.expire_after_seconds, spec.prepare_unique),
        (true, Some(60), true)
    );
    assert_eq!(index.meta(), before, "the same entries, state and number");
    assert!(db.plannable_mongo_indexes().is_empty(), "the planner does not see it");

    let change = MongoIndexChange { hidden: Some(false), unique: Some(true), ..Default::default() };
    db.modify_mongo_index(&admin, "a_1", change)?;
    let index = db.mongo_indexes()[0].clone();
    assert_eq!(index.meta(), before);
    assert_eq!(index.def.mongo.as_ref().and_then(|s| s.expire_after_seconds), Some(60));
    assert_eq!(db.plannable_mongo_indexes().len(), 1);
    assert_eq!(index.def.mongo.as_ref().map(|s| (s.unique, s.prepare_unique)), Some((true, true)));
    let change = MongoIndexChange { hidden: Some(true), ..Default::default() };
    assert!(db.modify_mongo_index(&admin, "nope", change).is_err());
    Ok(())
}
