//! Fuzz target: Mango selectors. Any JSON (valid selectors, near misses and garbage) parses
//! into a selector or a CouchDB error; a parsed selector matches any document in both
//! dialects without a panic, and its `$and` with itself matches the same documents (but for
//! `{}`: CouchDB reads `{}` inside `$and` as an equality with `{}`, not as "everything").

use bunko_query::{Dialect, Selector};
use serde_json::json;

#[test]
fn selectors_parse_and_match_without_panics() {
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        let mut input = bytes;
        let selector = bunko_fuzz::json(&mut input, 4);
        let Ok(parsed) = Selector::parse(&selector) else { return };
        if selector == json!({}) {
            return;
        }
        let twice = Selector::parse(&json!({"$and": [selector.clone(), selector.clone()]}))
            .expect("the $and of a valid selector with itself is valid");
        for _ in 0..3 {
            // Documents are objects; anything else is wrapped as a field.
            let doc = match bunko_fuzz::json(&mut input, 3) {
                doc @ serde_json::Value::Object(_) => doc,
                other => json!({"a": other}),
            };
            for dialect in [Dialect::Mango, Dialect::Mongo] {
                let once = parsed.matches(&doc, dialect);
                assert_eq!(once, twice.matches(&doc, dialect), "{selector} on {doc}");
            }
        }
    });
}

#[test]
fn selector_text_from_the_wire() {
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        if let Ok(value) = serde_json::from_slice(bytes) {
            let _ = Selector::parse(&value);
        }
    });
}
