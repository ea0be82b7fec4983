//! Search over an in-memory engine: the index function, analyzers and query syntax,
//! without HTTP.

use std::sync::Arc;

use bunko_engine::security::UserCtx;
use bunko_engine::{Config, Database, Engine, Result, WriteOptions};
use bunko_search::{Search, SearchQuery};
use serde_json::{Value, json};

fn ids(answer: &Value) -> Vec<String> {
    let mut ids: Vec<String> = answer["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(String::from))
        .collect();
    ids.sort();
    ids
}

/// An in-memory engine with database `d`, its admin and the database.
fn fresh() -> Result<(UserCtx, Engine, Arc<Database>)> {
    let me = UserCtx::admin("t");
    let engine = Engine::open(Arc::new(bunko_storage::Memory::new()), Config::default())?;
    let db = engine.create_db(&me, "d", false)?;
    Ok((me, engine, db))
}

fn put_in(db: &Database, v: Value) -> Result<()> {
    let doc = bunko_doc::body::from_value(v, &Default::default())?;
    db.put(&UserCtx::admin("t"), doc, WriteOptions::default()).map(drop)
}

#[test]
fn phrases_keep_word_order() -> Result<()> {
    let (_me, _engine, db) = fresh()?;
    let put = |v: Value| put_in(&db, v);
    put(json!({"_id": "p", "t": "The giant panda is a bear"}))?;
    put(json!({"_id": "q", "t": "a panda, giant"}))?;
    let index = "function(doc) { index('default', doc.t); }";
    put(json!({"_id": "_design/s", "indexes": {"i": {"index": index}}}))?;
    let search = Search::new(None);
    let run = |q: &str| -> Result<Vec<String>> {
        let query = SearchQuery::parse(&|n| (n == "q").then(|| q.to_string()))?;
        Ok(ids(&search.search(&UserCtx::admin("t"), &db, "_design/s", "i", &query, None)?))
    };
    assert_eq!(run("\"giant panda\"")?, ["p"]);
    assert_eq!(run("\"panda giant\"")?, ["q"]);
    assert_eq!(run("panda")?, ["p", "q"]);
    Ok(())
}

/// A deleted database's open indexes (search and geo) are let go of, not kept in memory
/// until a restart.
#[test]
fn a_deleted_databases_indexes_are_let_go() -> Result<()> {
    let (me, engine, db) = fresh()?;
    let put = |v: Value| put_in(&db, v);
    put(json!({"_id": "p", "t": "panda", "geometry": {"type": "Point", "coordinates": [1, 2]}}))?;
    let index = "function(doc) { index('default', doc.t); }";
    let geo = "function(doc) { if (doc.geometry) { st_index(doc.geometry); } }";
    put(json!({"_id": "_design/s", "indexes": {"i": {"index": index}},
               "st_indexes": {"g": {"index": geo}}}))?;
    let search = Search::new(None);
    search.index(&db, "_design/s", "i")?.update(&db)?;
    search.geo_index(&db, "_design/s", "g")?.update(&db)?;
    let id = db.id();
    assert_eq!(search.open_indexes(id), 2);
    // Another database's indexes stay.
    let other = engine.create_db(&me, "o", false)?;
    put_in(&other, json!({"_id": "_design/s", "indexes": {"i": {"index": index}}}))?;
    search.index(&other, "_design/s", "i")?;
    drop(db);
    engine.delete_db(&me, "d")?;
    let mut waited = 0;
    while search.open_indexes(id) > 0 && waited < 1000 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    assert_eq!(search.open_indexes(id), 0);
    assert_eq!(search.open_indexes(other.id()), 1);
    Ok(())
}
