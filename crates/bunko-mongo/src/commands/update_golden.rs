//! Golden test of the update operators with MongoDB's filter dialect: the cases in
//! `tests/golden/update.json` are the examples of MongoDB's manual (`$push`, `$pull`,
//! positional `$`, `$[]`, `$[<identifier>]` with `arrayFilters`, …) and MongoDB's error
//! messages, each `{name, doc, query?, update, arrayFilters?, expected | error}` in relaxed
//! Extended JSON (`{"$numberLong": …}` for int64). The expected documents are written by
//! hand from the manual, not recomputed.

use bson::{Bson, Document};
use serde_json::Value;

use super::update::parse_update;

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn doc(value: &Value) -> Result<Document> {
    match Bson::try_from(value.clone())? {
        Bson::Document(d) => Ok(d),
        other => Err(format!("not a document: {other}").into()),
    }
}

#[test]
fn update_operators_follow_the_mongodb_manual() -> Result<()> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden/update.json");
    let cases: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(path)?)?;
    for case in &cases {
        let name = case["name"].as_str().unwrap_or("?");
        let before = doc(&case["doc"])?;
        let query = case.get("query").map(doc).transpose()?.unwrap_or_default();
        let filters = match case.get("arrayFilters") {
            Some(f) => match Bson::try_from(f.clone())? {
                Bson::Array(items) => Some(items),
                _ => return Err(format!("{name}: arrayFilters must be an array").into()),
            },
            None => None,
        };
        let update = Bson::try_from(case["update"].clone())?;
        let outcome = parse_update(Some(&update), &query, filters.as_deref())
            .and_then(|u| Ok(u.apply(&before, false)?));
        match (outcome, case.get("expected"), case.get("error")) {
            (Ok(after), Some(expected), _) => assert_eq!(after, doc(expected)?, "{name}"),
            (Err(err), _, Some(expected)) => {
                assert_eq!(Some(i64::from(err.code)), expected["code"].as_i64(), "{name}");
                if let Some(message) = expected.get("message").and_then(Value::as_str) {
                    assert_eq!(err.errmsg, message, "{name}");
                }
            }
            (outcome, _, _) => panic!("{name}: unexpected {outcome:?}"),
        }
    }
    assert!(cases.len() > 30);
    Ok(())
}
