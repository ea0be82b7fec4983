//! Search over an in-memory engine: the index function, analyzers and query syntax,
//! without HTTP.

use std::sync::Arc;

use bunko_engine::security::UserCtx;
use bunko_engine::{Config, Engine, Result, WriteOptions};
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

#[test]
fn phrases_keep_word_order() -> Result<()> {
    let me = UserCtx::admin("t");
    let engine = Engine::open(Arc::new(bunko_storage::Memory::new()), Config::default())?;
    let db = engine.create_db(&me, "d", false)?;
    let put = |v: Value| -> Result<()> {
        let doc = bunko_doc::body::from_value(v, &Default::default())?;
        db.put(&me, doc, WriteOptions::default()).map(drop)
    };
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
