//! Fuzz target: document bodies as a client sends them (`PUT /{db}/{id}`, `_bulk_docs`)
//! through the parser that every write path uses. Never a panic; a body that parses stores
//! as JSON that parses back to the same fields.

use bunko_doc::body::{Limits, parse};

#[test]
fn document_bodies() {
    let limits = Limits { max_document_size: 64 << 10 };
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        let text: Vec<u8> = match bytes.split_first() {
            // Half the runs: a value built from the bytes, so most inputs are valid JSON.
            Some((0..=127, rest)) => bunko_fuzz::json(&mut &rest[..], 4).to_string().into_bytes(),
            _ => bytes.to_vec(),
        };
        let Ok(doc) = parse(&text, &limits) else { return };
        let again = parse(&doc.body_json(), &limits).expect("a stored body parses again");
        assert_eq!(again.body, doc.body);
    });
}

#[test]
fn fuzzer_bytes_become_nested_values_and_running_out_is_fine() {
    let mut bytes: &[u8] = &[6, 2, 4, 1, 25, 2, 7, 0, 0, 0, 0, 0, 0, 0, 0];
    let value = bunko_fuzz::json(&mut bytes, 3);
    assert!(value.is_object(), "{value}");
    assert_eq!(bunko_fuzz::json(&mut &[][..], 3), serde_json::Value::Null);
}
