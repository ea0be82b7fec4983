//! Fuzz target: the order-preserving encodings of view and index keys. For any two JSON
//! values, the encoded bytes compare exactly as CouchDB's collation compares the values (in
//! both collations), and an open array prefix is a prefix of every array it starts.

use std::cmp::Ordering;

use bunko_doc::collate::Collation;
use serde_json::Value;

#[test]
fn key_encodings_keep_collation_order() {
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        let mut input = bytes;
        let a = bunko_fuzz::json(&mut input, 3);
        let b = bunko_fuzz::json(&mut input, 3);
        for collation in [Collation::Unicode, Collation::Raw] {
            let (ka, kb) = (encoded(collation, &a), encoded(collation, &b));
            assert_eq!(ka.cmp(&kb), collation.compare(&a, &b), "{collation:?}: {a} vs {b}");
            let mut open = Vec::new();
            collation.encode_array_prefix(std::slice::from_ref(&a), &mut open);
            let whole = encoded(collation, &Value::Array(vec![a.clone(), b.clone()]));
            assert!(whole.starts_with(&open), "{collation:?}: [{a}] opens [{a}, {b}]");
        }
        assert_eq!(Collation::Unicode.compare(&a, &a), Ordering::Equal);
    });
}

fn encoded(collation: Collation, value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    collation.encode(value, &mut out);
    out
}
