//! Hiding a MongoDB index, or changing its `expireAfterSeconds`, keeps the built index:
//! the same storage number and state under the new definition, no rebuild.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bunko_doc::body;
use bunko_engine::index::mongo::{DDOC, MongoSpec};
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
    let before = db.mongo_indexes()[0].meta();
    assert!(before.ready);
    assert_eq!(db.plannable_mongo_indexes().len(), 1);

    db.modify_mongo_index(&admin, "a_1", Some(true), Some(60))?;
    let index = db.mongo_indexes()[0].clone();
    let spec = index.def.mongo.as_ref().ok_or("a MongoDB index")?;
    assert_eq!((spec.hidden, spec.expire_after_seconds), (true, Some(60)));
    assert_eq!(index.meta(), before, "the same entries, state and number");
    assert!(db.plannable_mongo_indexes().is_empty(), "the planner does not see it");

    db.modify_mongo_index(&admin, "a_1", Some(false), None)?;
    let index = db.mongo_indexes()[0].clone();
    assert_eq!(index.meta(), before);
    assert_eq!(index.def.mongo.as_ref().and_then(|s| s.expire_after_seconds), Some(60));
    assert_eq!(db.plannable_mongo_indexes().len(), 1);
    assert!(db.modify_mongo_index(&admin, "nope", Some(true), None).is_err());
    Ok(())
}
