//! Gzip storage of compressible attachments (issue 16), CouchDB 3.4's: attachments whose
//! type is one of `[attachments] compressible_types` are stored gzipped at
//! `compression_level`, shown with `encoding`/`encoded_length` under
//! `att_encoding_info=true`, served gzipped to clients that accept it and inflated to the
//! others, sent gzipped in `multipart` answers. Every answer here is CouchDB 3.4.3's,
//! taken from a running one.

use reqwest::Method;
use reqwest::blocking::Response;
use serde_json::{Value, json};

use crate::harness::{Server, send};

/// CouchDB 3.4.3's stored gzip of "hello world" (`text/plain`, level 8), whose MD5 is the
/// digest it shows.
const HELLO_GZIP: [u8; 31] = [
    0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0xcb, 0x48, 0xcd, 0xc9, 0xc9, 0x57,
    0x28, 0xcf, 0x2f, 0xca, 0x49, 0x01, 0x00, 0x85, 0x11, 0x4a, 0x0d, 0x0b, 0x00, 0x00, 0x00,
];
const HELLO_DIGEST: &str = "md5-7mkg+nM0HN26sZkLN8KVSA==";
const HELLO_B64: &str = "aGVsbG8gd29ybGQ=";

fn setup() -> Server {
    let s = Server::start();
    s.create_db("db");
    let doc = json!({"_attachments": {
        "a.txt": {"content_type": "text/plain", "data": HELLO_B64},
        "b.bin": {"content_type": "image/png", "data": "aGVsbG8="}}});
    assert_eq!(s.put("/db/d", &doc).0, 201);
    s
}

fn get(s: &Server, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = s.req(Method::GET, path);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().expect("request")
}

fn header(resp: &Response, name: &str) -> Option<String> {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_string)
}

/// The stubs CouchDB shows with `att_encoding_info=true`.
fn encoded_stubs() -> Value {
    json!({
        "a.txt": {"content_type": "text/plain", "revpos": 1, "digest": HELLO_DIGEST,
                  "length": 11, "stub": true, "encoding": "gzip", "encoded_length": 31},
        "b.bin": {"content_type": "image/png", "revpos": 1,
                  "digest": "md5-XUFAKrxLKna5cZ2REBfFkg==", "length": 5, "stub": true}
    })
}

#[test]
fn compressible_attachments_are_stored_gzipped_and_shown_so_on_request() {
    let s = setup();
    let doc = s.get_doc("db", "d");
    // The same document on CouchDB 3.4.3 has this revision (it hashes the gzip digest).
    assert_eq!(doc["_rev"], "1-495dd335df51b43d5abf7911ccb6f39f".to_string(), "{doc}");
    assert_eq!(doc["_attachments"]["a.txt"].get("encoding"), None, "{doc}");
    let (_, shown) = s.get("/db/d?att_encoding_info=true");
    assert_eq!(shown["_attachments"], encoded_stubs());
    // The same under `_all_docs`, views and `_changes` with `include_docs`, and in
    // `open_revs` (JSON).
    let (_, all) = s.get("/db/_all_docs?include_docs=true&att_encoding_info=true");
    assert_eq!(all["rows"][0]["doc"]["_attachments"], encoded_stubs(), "{all}");
    let (_, changes) = s.get("/db/_changes?include_docs=true&att_encoding_info=true");
    assert_eq!(changes["results"][0]["doc"]["_attachments"], encoded_stubs(), "{changes}");
    let ddoc = json!({"views": {"all": {"map": "function(doc) { emit(doc._id, null); }"}}});
    assert_eq!(s.put("/db/_design/v", &ddoc).0, 201);
    let (_, view) = s.get("/db/_design/v/_view/all?include_docs=true&att_encoding_info=true");
    assert_eq!(view["rows"][0]["doc"]["_attachments"], encoded_stubs(), "{view}");
    let (_, view) = s.get("/db/_design/v/_view/all?include_docs=true");
    assert_eq!(view["rows"][0]["doc"]["_attachments"]["a.txt"].get("encoding"), None);
    let (_, revs) = s.get("/db/d?open_revs=all&att_encoding_info=true");
    assert_eq!(revs[0]["ok"]["_attachments"], encoded_stubs(), "{revs}");
    // Inline data is always the bytes sent; the encoding follows it when asked.
    let (_, data) = s.get("/db/d?attachments=true&att_encoding_info=true");
    assert_eq!(
        data["_attachments"]["a.txt"],
        json!({"content_type": "text/plain", "revpos": 1, "digest": HELLO_DIGEST,
               "data": HELLO_B64, "encoding": "gzip", "encoded_length": 31})
    );
    let (_, data) = s.get("/db/d?attachments=true");
    assert_eq!(data["_attachments"]["a.txt"]["data"], HELLO_B64);
    assert_eq!(data["_attachments"]["a.txt"].get("encoding"), None);
}

#[test]
fn a_gzipped_attachment_is_sent_gzipped_to_clients_that_accept_it_and_never_in_ranges() {
    let s = setup();
    let zipped = get(&s, "/db/d/a.txt", &[("Accept-Encoding", "gzip, deflate")]);
    assert_eq!(zipped.status(), 200);
    assert_eq!(header(&zipped, "content-encoding").as_deref(), Some("gzip"));
    assert_eq!(header(&zipped, "content-length").as_deref(), Some("31"));
    assert_eq!(header(&zipped, "accept-ranges").as_deref(), Some("none"));
    assert_eq!(header(&zipped, "etag").as_deref(), Some("\"7mkg+nM0HN26sZkLN8KVSA==\""));
    assert_eq!(zipped.bytes().expect("body").as_ref(), HELLO_GZIP);
    for refused in [&[][..], &[("Accept-Encoding", "gzip;q=0, identity")][..]] {
        let plain = get(&s, "/db/d/a.txt", refused);
        assert_eq!(header(&plain, "content-encoding"), None);
        assert_eq!(header(&plain, "content-length").as_deref(), Some("11"));
        assert_eq!(plain.text().expect("body"), "hello world");
    }
    // A range of a gzipped attachment gets the whole of it, as CouchDB answers.
    let ranged = get(&s, "/db/d/a.txt", &[("Range", "bytes=0-4")]);
    assert_eq!(ranged.status(), 200);
    assert_eq!(header(&ranged, "accept-ranges").as_deref(), Some("none"));
    assert_eq!(ranged.text().expect("body"), "hello world");
    let ranged = get(&s, "/db/d/a.txt", &[("Range", "bytes=0-4"), ("Accept-Encoding", "gzip")]);
    assert_eq!(
        (ranged.status().as_u16(), header(&ranged, "content-length")),
        (200, Some("31".into()))
    );
    // What is stored as it came still answers ranges.
    let png = get(&s, "/db/d/b.bin", &[("Range", "bytes=1-2"), ("Accept-Encoding", "gzip")]);
    assert_eq!(png.status(), 206);
    assert_eq!(header(&png, "content-encoding"), None);
    assert_eq!(png.text().expect("body"), "el");
}

#[test]
fn multipart_open_revs_send_gzipped_bodies_as_stored() {
    let s = setup();
    let resp = get(&s, "/db/d?open_revs=all", &[("Accept", "multipart/mixed")]);
    let body = resp.bytes().expect("body").to_vec();
    let text = String::from_utf8_lossy(&body).into_owned();
    let stubs = json!({
        "a.txt": {"content_type": "text/plain", "revpos": 1, "digest": HELLO_DIGEST,
                  "length": 11, "follows": true, "encoding": "gzip", "encoded_length": 31},
        "b.bin": {"content_type": "image/png", "revpos": 1,
                  "digest": "md5-XUFAKrxLKna5cZ2REBfFkg==", "length": 5, "follows": true}
    });
    assert!(text.contains(&format!("\"_attachments\":{stubs}")), "{text}");
    let head = "Content-Disposition: attachment; filename=\"a.txt\"\r\nContent-Type: text/plain\r\n\
                Content-Length: 31\r\nContent-Encoding: gzip\r\n\r\n";
    let mut part = head.as_bytes().to_vec();
    part.extend_from_slice(&HELLO_GZIP);
    assert!(body.windows(part.len()).any(|w| w == part.as_slice()), "{text}");
    let head =
        "filename=\"b.bin\"\r\nContent-Type: image/png\r\nContent-Length: 5\r\n\r\nhello\r\n";
    assert!(text.contains(head), "{text}");
    // Replicated back in as such a body, it is stored as it came: same digest, same rev.
    let json_part = format!(
        "--b\r\nContent-Type: application/json\r\n\r\n{}\r\n",
        json!({"_id": "copy", "_rev": "1-495dd335df51b43d5abf7911ccb6f39f",
               "_revisions": {"start": 1, "ids": ["495dd335df51b43d5abf7911ccb6f39f"]},
               "_attachments": {"a.txt": stubs["a.txt"].clone()}})
    );
    let mut upload = format!("{json_part}--b\r\n").into_bytes();
    upload.extend_from_slice(
        b"Content-Disposition: attachment; filename=\"a.txt\"\r\nContent-Encoding: gzip\r\n\r\n",
    );
    upload.extend_from_slice(&HELLO_GZIP);
    upload.extend_from_slice(b"\r\n--b--");
    let put = s
        .req(Method::PUT, "/db/copy?new_edits=false")
        .header("Content-Type", "multipart/related; boundary=\"b\"");
    let (status, created) = send(put.body(upload));
    assert_eq!(status, 201, "{created}");
    let (_, copy) = s.get("/db/copy?att_encoding_info=true");
    assert_eq!(copy["_attachments"]["a.txt"], encoded_stubs()["a.txt"], "{copy}");
    assert_eq!(get(&s, "/db/copy/a.txt", &[]).text().expect("body"), "hello world");
}

#[test]
fn compression_settings_apply_at_run_time() {
    let s = setup();
    let config = "/_node/_local/_config/attachments";
    assert_eq!(s.put(&format!("{config}/compression_level"), &json!("0")).0, 200);
    let doc = json!({"_attachments": {"a.txt": {"content_type": "text/plain", "data": HELLO_B64}}});
    let (_, z) = s.put("/db/z", &doc);
    // CouchDB 3.4.3's answers with `compression_level = 0`: stored as sent, its MD5.
    assert_eq!(z["rev"], "1-bea48535d7a403b6b32d59801cd4bda7", "{z}");
    let (_, shown) = s.get("/db/z?att_encoding_info=true");
    assert_eq!(
        shown["_attachments"]["a.txt"],
        json!({"content_type": "text/plain", "revpos": 1, "digest": "md5-XrY7u+Ae7tCTyyK7j1rNww==",
               "length": 11, "stub": true})
    );
    assert_eq!(s.delete(&format!("{config}/compression_level")).0, 200);
    assert_eq!(s.put(&format!("{config}/compressible_types"), &json!("image/*")).0, 200);
    let doc = json!({"_attachments": {
        "a.txt": {"content_type": "text/plain", "data": HELLO_B64},
        "b.png": {"content_type": "image/png", "data": HELLO_B64}}});
    let (_, y) = s.put("/db/y", &doc);
    assert_eq!(y["rev"], "1-5a4cd1ddfdef7a90cf1f2db16e342c33", "{y}");
    let (_, shown) = s.get("/db/y?att_encoding_info=true");
    assert_eq!(shown["_attachments"]["a.txt"].get("encoding"), None, "{shown}");
    assert_eq!(shown["_attachments"]["b.png"]["encoded_length"], 31, "{shown}");
    assert_eq!(get(&s, "/db/y/b.png", &[]).text().expect("body"), "hello world");
}

/// A streamed upload of a compressible type is gzipped as it arrives: a 20 MB text reads
/// back whole, inflated or as its gzip, which is what `encoded_length` says.
#[test]
fn a_streamed_text_upload_is_gzipped_as_it_arrives() {
    let s = setup();
    let text: String = (0..400_000).map(|i| format!("{i:08}: ドキュメント\n")).collect();
    let req = s.req(Method::PUT, "/db/big/log.txt").header("Content-Type", "text/plain");
    let (status, created) = send(req.body(text.clone()));
    assert_eq!(status, 201, "{created}");
    let (_, shown) = s.get("/db/big?att_encoding_info=true");
    let stub = &shown["_attachments"]["log.txt"];
    assert_eq!(stub["length"], json!(text.len()), "{stub}");
    let encoded = stub["encoded_length"].as_u64().unwrap_or_default();
    assert!(encoded > 0 && encoded < text.len() as u64 / 4, "{stub}");
    assert_eq!(get(&s, "/db/big/log.txt", &[]).text().expect("body"), text);
    let zipped = get(&s, "/db/big/log.txt", &[("Accept-Encoding", "gzip")]);
    let zipped = zipped.bytes().expect("body");
    assert_eq!(zipped.len() as u64, encoded);
    let mut inflated = String::new();
    let read = std::io::Read::read_to_string(
        &mut flate2::read::GzDecoder::new(&zipped[..]),
        &mut inflated,
    );
    assert!(read.is_ok());
    assert!(inflated == text, "the gzip does not inflate to the text");
}
