//! Fuzz targets of the MongoDB front end: wire messages as a client (or an attacker) sends
//! them, through the framing every request takes (`OP_MSG` sections and checksums,
//! `OP_QUERY`, `OP_COMPRESSED` with zstd and snappy); and the Extended JSON text MongoDB
//! values are stored as, which must give back exactly the value that was stored.

use bunko_mongo::wire::{Header, decode, encode_reply};

/// The opcodes a client may send: OP_MSG, OP_QUERY, OP_COMPRESSED, and one unknown.
const OP_CODES: [i32; 4] = [2013, 2004, 2012, 2222];

#[test]
fn wire_messages() {
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        let Some((&op, body)) = bytes.split_first() else { return };
        let op_code = OP_CODES[usize::from(op) % OP_CODES.len()];
        let header = Header { length: body.len() + 16, request_id: 7, response_to: 0, op_code };
        if let Ok(request) = decode(&header, body) {
            let reply = bson::doc! {"ok": 1.0};
            assert!(encode_reply(8, &request, &reply, false).is_ok(), "{request:?}");
        }
    });
}

#[test]
fn stored_values_read_back_exactly() {
    bunko_fuzz::bolero::check!().for_each(|bytes: &[u8]| {
        let value = bunko_doc::ejson::value_from_json(&bunko_fuzz::json(&mut &bytes[..], 4));
        let stored = bunko_doc::ejson::value_to_json(&value);
        assert_eq!(bunko_doc::ejson::value_from_json(&stored), value, "stored as {stored}");
        // Raw BSON from the wire too, when the bytes happen to be a document. Compared as
        // canonical Extended JSON: a NaN is not equal to itself, and its sign and payload bits
        // are not kept (every NaN is stored as `{"$numberDouble": "NaN"}`, the only NaN
        // Extended JSON has); -0.0 stays -0.0.
        if let Ok(doc) = bson::Document::from_reader(bytes) {
            let back = bunko_doc::ejson::from_json(&bunko_doc::ejson::to_json(&doc));
            let canonical = |d: bson::Document| {
                let text = bson::Bson::Document(d).into_canonical_extjson().to_string();
                text.replace(r#""-NaN""#, r#""NaN""#)
            };
            assert_eq!(canonical(back), canonical(doc));
        }
    });
}
