//! Framing tests: messages built byte by byte as drivers send them.

use bson::{Document, doc};

use super::*;

fn header(op_code: i32, body: &[u8]) -> Header {
    Header { length: Header::SIZE + body.len(), request_id: 7, response_to: 0, op_code }
}

fn msg_body(flags: u32, command: &Document, sequence: Option<(&str, &[Document])>) -> Vec<u8> {
    let mut body = flags.to_le_bytes().to_vec();
    body.push(0);
    body.extend(command.to_vec().unwrap_or_default());
    if let Some((name, docs)) = sequence {
        let mut section = Vec::new();
        section.extend(name.as_bytes());
        section.push(0);
        for d in docs {
            section.extend(d.to_vec().unwrap_or_default());
        }
        body.push(1);
        body.extend(((section.len() + 4) as i32).to_le_bytes());
        body.extend(section);
    }
    body
}

#[test]
fn op_msg_with_a_document_sequence() -> Result<(), MongoError> {
    let docs = [doc! {"a": 1}, doc! {"b": 2}];
    let body = msg_body(0, &doc! {"insert": "c", "$db": "d"}, Some(("documents", &docs)));
    let request = decode(&header(OP_MSG, &body), &body)?;
    // An insert's documents stay the bytes that came, outside the command.
    assert_eq!(request.command, doc! {"insert": "c", "$db": "d"});
    let raw: Vec<Document> =
        request.documents.iter().flatten().filter_map(|d| decoded(d).ok()).collect();
    assert_eq!(raw, docs);
    assert_eq!(request.kind, Kind::Msg { more_to_come: false });
    // Any other command's sequence is decoded into it.
    let deletes = [doc! {"q": {}, "limit": 0}];
    let body = msg_body(0, &doc! {"delete": "c", "$db": "d"}, Some(("deletes", &deletes)));
    let request = decode(&header(OP_MSG, &body), &body)?;
    assert_eq!(
        request.command,
        doc! {"delete": "c", "$db": "d", "deletes": [{"q": {}, "limit": 0}]}
    );
    assert_eq!(request.documents, None);
    // A sequence repeating a body field is refused, for an insert too.
    let body =
        msg_body(0, &doc! {"insert": "c", "documents": [], "$db": "d"}, Some(("documents", &docs)));
    let err = decode(&header(OP_MSG, &body), &body).err().map(|e| e.errmsg);
    assert_eq!(err.as_deref(), Some("Duplicate field 'documents' in body and document sequence"));
    Ok(())
}

#[test]
fn op_msg_checksums_are_verified() -> Result<(), MongoError> {
    let mut body = msg_body(CHECKSUM_PRESENT, &doc! {"ping": 1, "$db": "admin"}, None);
    let h = header(OP_MSG, &[body.as_slice(), &[0; 4]].concat());
    let mut whole = header_bytes(&h).to_vec();
    whole.extend(&body);
    body.extend(crc32c::crc32c(&whole).to_le_bytes());
    assert_eq!(decode(&h, &body)?.command, doc! {"ping": 1, "$db": "admin"});
    let last = body.len() - 1;
    body[last] ^= 1;
    assert_eq!(decode(&h, &body).err().map(|e| e.code), Some(12));
    Ok(())
}

#[test]
fn op_compressed_zstd_snappy_and_zlib_round_trip() -> Result<(), MongoError> {
    let command = doc! {"find": "c", "filter": {"x": "y".repeat(500)}, "$db": "d"};
    let inner = msg_body(0, &command, None);
    for compressor in [Compressor::Zstd, Compressor::Snappy, Compressor::Zlib, Compressor::Noop] {
        let mut body = OP_MSG.to_le_bytes().to_vec();
        body.extend((inner.len() as i32).to_le_bytes());
        body.push(compressor.id());
        body.extend(compressor.compress(&inner)?);
        let request = decode(&header(OP_COMPRESSED, &body), &body)?;
        assert_eq!(request.command, command);
        assert_eq!(request.compressor, Some(compressor));
        // The reply is compressed the same way and decodes back.
        let reply = encode_reply(9, &request, &doc! {"ok": 1.0}, false)?;
        let h = Header::parse(reply[..16].try_into().map_err(|_| MongoError::internal("short"))?);
        assert_eq!((h.op_code, h.response_to, h.length), (OP_COMPRESSED, 7, reply.len()));
        let back = decode(&h, &reply[16..])?;
        assert_eq!(back.command, doc! {"ok": 1.0});
    }
    Ok(())
}

/// A compressed message whose announced size is not what it inflates to is refused, and
/// inflating stops just past the announced size (no unbounded zlib or zstd bomb).
#[test]
fn op_compressed_with_a_wrong_size_is_refused() -> Result<(), MongoError> {
    let inner = msg_body(0, &doc! {"ping": 1, "pad": "z".repeat(4000), "$db": "d"}, None);
    for compressor in [Compressor::Zstd, Compressor::Snappy, Compressor::Zlib] {
        for size in [inner.len() - 1, inner.len() + 1, 10] {
            let mut body = OP_MSG.to_le_bytes().to_vec();
            body.extend((size as i32).to_le_bytes());
            body.push(compressor.id());
            body.extend(compressor.compress(&inner)?);
            let err = decode(&header(OP_COMPRESSED, &body), &body).err();
            let err = err.map(|e| (e.code, e.errmsg.starts_with("could not decompress")));
            assert_eq!(err, Some((2, true)), "{compressor:?} announced {size}");
        }
    }
    Ok(())
}

/// A first batch handed over as BSON frames to the bytes of the same reply holding it.
#[test]
fn a_raw_first_batch_frames_as_the_reply_holding_it() -> Result<(), MongoError> {
    let found = doc! {"_id": "k", "n": 1, "nested": {"a": [1.5, "s"]}};
    let reply = |docs: Vec<Document>| {
        doc! {"cursor": {"id": 0_i64, "ns": "d.c", "firstBatch": docs}, "ok": 1.0,
        "operationTime": bson::Timestamp { time: 1, increment: 2 }}
    };
    let mut batch = RawArrayBuf::new();
    batch.push(RawDocumentBuf::try_from(&found).map_err(|e| MongoError::internal(e.to_string()))?);
    let body = msg_body(0, &doc! {"find": "c", "$db": "d"}, None);
    let request = decode(&header(OP_MSG, &body), &body)?;
    let head = Reply { request_id: 5, response_to: request.request_id, more_to_come: false };
    let with = encode_reply_with_batch(head, &request, &reply(Vec::new()), &batch, false)?;
    assert_eq!(with, encode_reply(5, &request, &reply(vec![found]), false)?);
    Ok(())
}

/// A request vouches for its documents' sizes only when its body is no larger than one
/// document may be (sequence documents are checked as they are read).
#[test]
fn a_request_is_sized_only_when_its_body_is_within_the_document_limit() -> Result<(), MongoError> {
    let docs = [doc! {"a": 1}, doc! {"b": "x".repeat(1000)}];
    let small = msg_body(0, &doc! {"insert": "c", "$db": "d"}, Some(("documents", &docs)));
    assert!(decode(&header(OP_MSG, &small), &small)?.sized);
    let big = doc! {"x": "y".repeat(MAX_BSON_SIZE)};
    let large = msg_body(0, &doc! {"insert": "c", "documents": [big], "$db": "d"}, None);
    let request = decode(&header(OP_MSG, &large), &large)?;
    assert!(!request.sized, "a body over the limit may hold a document over it");
    Ok(())
}

#[test]
fn legacy_op_query_handshake() -> Result<(), MongoError> {
    let mut body = 0i32.to_le_bytes().to_vec();
    body.extend(b"admin.$cmd\0");
    body.extend(0i32.to_le_bytes());
    body.extend((-1i32).to_le_bytes());
    body.extend(doc! {"isMaster": 1, "helloOk": true}.to_vec().unwrap_or_default());
    let request = decode(&header(OP_QUERY, &body), &body)?;
    assert_eq!(request.command, doc! {"isMaster": 1, "helloOk": true, "$db": "admin"});
    let reply = encode_reply(3, &request, &doc! {"ok": 1.0}, true)?;
    assert_eq!(i32::from_le_bytes([reply[12], reply[13], reply[14], reply[15]]), OP_REPLY);
    // Only the handshake may come as OP_QUERY (MongoDB 6+).
    let mut find = 0i32.to_le_bytes().to_vec();
    find.extend(b"d.$cmd\0");
    find.extend([0u8; 8]);
    find.extend(doc! {"find": "c"}.to_vec().unwrap_or_default());
    assert_eq!(decode(&header(OP_QUERY, &find), &find).err().map(|e| e.code), Some(352));
    Ok(())
}

#[test]
fn malformed_messages_are_errors_not_panics() {
    let good = msg_body(0, &doc! {"ping": 1, "$db": "a"}, None);
    for cut in 0..good.len() {
        let body = &good[..cut];
        assert!(decode(&header(OP_MSG, body), body).is_err(), "cut at {cut}");
    }
    let mut lying = good.clone();
    lying[5] = 0xff; // the document claims to be huge
    assert!(decode(&header(OP_MSG, &lying), &lying).is_err());
    assert_eq!(decode(&header(2010, &good), &good).err().map(|e| e.code), Some(2));
    let mut huge = OP_MSG.to_le_bytes().to_vec();
    huge.extend(60_000_000i32.to_le_bytes());
    huge.push(3);
    assert_eq!(decode(&header(OP_COMPRESSED, &huge), &huge).err().map(|e| e.code), Some(10334));
}

#[test]
fn deep_nesting_is_refused_before_decoding() -> Result<(), MongoError> {
    let nested = |depth: usize| {
        let mut doc = doc! {};
        for _ in 0..depth {
            doc = doc! {"a": doc};
        }
        doc! {"ping": 1, "$db": "a", "x": doc}
    };
    let ok = msg_body(0, &nested(150), None);
    assert!(decode(&header(OP_MSG, &ok), &ok).is_ok());
    // Built by hand: the bson crate's own encoder recurses too.
    let mut inner = vec![5u8, 0, 0, 0, 0];
    for _ in 0..1_000 {
        let mut element = vec![3u8, b'a', 0];
        element.extend(&inner);
        let mut doc = ((element.len() + 5) as i32).to_le_bytes().to_vec();
        doc.extend(element);
        doc.push(0);
        inner = doc;
    }
    let mut body = 0u32.to_le_bytes().to_vec();
    body.push(0);
    body.extend(inner);
    assert_eq!(decode(&header(OP_MSG, &body), &body).err().map(|e| e.code), Some(15));
    Ok(())
}

/// A command decoded without copying its sub-documents is the document the `bson` crate's
/// own conversion gives, every type and nesting included; what the crate refuses (a
/// string that is not UTF-8, deep inside) is refused too.
#[test]
fn decoding_in_place_gives_the_crates_document() -> Result<(), MongoError> {
    use bson::spec::BinarySubtype;
    use bson::{Binary, JavaScriptCodeWithScope, Regex, Timestamp};
    let uuid = Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] };
    let cstr = |s: &str| bson::raw::CString::try_from(s.to_string());
    let (Ok(pattern), Ok(options)) = (cstr("a.c"), cstr("i")) else { unreachable!("no NUL") };
    let command = doc! {
        "find": "c", "filter": {"links": {"$elemMatch": {"target": "k", "n": [1, [2_i64, {"x": null}]]}}},
        "limit": 25, "lsid": {"id": uuid}, "$db": "d",
        "$clusterTime": {"clusterTime": Timestamp { time: 1, increment: 2 },
            "signature": {"hash": Binary { subtype: BinarySubtype::Generic, bytes: vec![0; 20] }, "keyId": 0_i64}},
        "types": [1.5, f64::NAN, -0.0, "s", true, Bson::Null, bson::oid::ObjectId::new(),
            bson::DateTime::from_millis(-1), Bson::RegularExpression(Regex { pattern, options }),
            Bson::JavaScriptCode("f()".into()),
            Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope { code: "g()".into(), scope: doc! {"a": {"b": 1}} }),
            Bson::Symbol("sym".into()), Bson::Undefined, Bson::MinKey, Bson::MaxKey,
            "1.5".parse::<bson::Decimal128>().unwrap_or(bson::Decimal128::from_bytes([0; 16]))],
        "empty": {}, "none": [],
    };
    let raw =
        RawDocumentBuf::try_from(&command).map_err(|e| MongoError::internal(e.to_string()))?;
    let crate_bytes = Document::try_from(raw.as_ref()).ok().and_then(|d| d.to_vec().ok());
    let ours = decoded(&raw)?.to_vec().ok();
    assert!(ours.is_some());
    assert_eq!(ours, crate_bytes);

    // A nested string whose bytes are not UTF-8: both refuse it.
    let mut bytes = RawDocumentBuf::try_from(&doc! {"a": {"b": ["xy"]}})
        .map_err(|e| MongoError::internal(e.to_string()))?
        .into_bytes();
    let at = bytes.windows(2).position(|w| w == b"xy").unwrap_or_default();
    bytes[at] = 0xff;
    let bad = RawDocumentBuf::from_bytes(bytes).map_err(|e| MongoError::internal(e.to_string()))?;
    assert!(Document::try_from(bad.as_ref()).is_err());
    assert!(decoded(&bad).is_err());
    Ok(())
}
