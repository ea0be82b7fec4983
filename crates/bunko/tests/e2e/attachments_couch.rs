//! Attachment answers CouchDB's Elixir suite checks (issue 16; the expected answers were
//! taken from CouchDB 3.4.3): multipart parts without any header line, the `Location` of a
//! standalone upload, `missing_rev` for a revision the document does not have, stubs whose
//! `revpos` is not the stored one, `attachments=true` on view rows, a document with
//! `attachments=true` as `multipart/related`, and HTML form uploads.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, send};

fn setup() -> Server {
    let s = Server::start();
    s.create_db("shoko");
    s
}

fn put_att(s: &Server, path: &str, body: &str) -> (u16, Value, Option<String>) {
    let resp = s
        .req(Method::PUT, path)
        .header("Content-Type", "text/plain")
        .body(body.to_string())
        .send()
        .expect("request");
    let location = resp.headers().get("location").and_then(|v| v.to_str().ok()).map(String::from);
    let status = resp.status().as_u16();
    (status, resp.json().unwrap_or(Value::Null), location)
}

#[test]
fn multipart_parts_without_any_header_line_are_read() {
    let s = setup();
    let doc = r#"{"_id":"kami","_attachments":{"a.txt":{"follows":true,"content_type":"text/plain","length":5}}}"#;
    let body = format!("--b0\r\n\r\n{doc}\r\n--b0\r\n\r\nwashi\r\n--b0--");
    let put =
        s.req(Method::PUT, "/shoko/kami").header("Content-Type", "multipart/related;boundary=b0");
    let (status, created) = send(put.body(body));
    assert_eq!(status, 201, "{created}");
    let got = s.req(Method::GET, "/shoko/kami/a.txt").send().expect("request");
    assert_eq!(got.text().unwrap_or_default(), "washi");
}

#[test]
fn standalone_uploads_answer_a_location_and_missing_revisions_are_missing_rev() {
    let s = setup();
    let (status, first, location) = put_att(&s, "/shoko/fumi/a%20b.txt", "ichi");
    assert_eq!(status, 201, "{first}");
    // Absolute, as CouchDB's `absolute_uri` builds it from the request's `Host`.
    assert_eq!(location, Some(format!("{}/shoko/fumi/a%20b.txt", s.base())));
    let rev = first["rev"].as_str().unwrap_or_default().to_string();
    let garbage = put_att(&s, "/shoko/fumi/c.txt?rev=4-garbage", "ni");
    assert_error((garbage.0, garbage.1), 409, "not_found", "missing_rev");
    let gone = s.delete("/shoko/fumi/a%20b.txt?rev=4-garbage");
    assert_error(gone, 409, "not_found", "missing_rev");
    let (status, deleted) = s.delete(&format!("/shoko/fumi/a%20b.txt?rev={rev}"));
    assert_eq!((status, deleted["ok"].clone()), (200, json!(true)));
}

#[test]
fn a_stub_with_another_revpos_is_missing_stub() {
    let s = setup();
    let doc =
        json!({"_attachments": {"foo.txt": {"content_type": "text/plain", "data": "aGVsbG8="}}});
    let (_, created) = s.put("/shoko/hon", &doc);
    let rev = created["rev"].as_str().unwrap_or_default();
    let stub = json!({"_rev": rev, "_attachments": {"foo.txt": {"stub": true, "revpos": 10}}});
    let reason = "Invalid attachment stub in hon for foo.txt";
    assert_error(s.put("/shoko/hon", &stub), 412, "missing_stub", reason);
    let stub = json!({"_rev": rev, "_attachments": {"foo.txt": {"stub": true, "revpos": 1}}});
    assert_eq!(s.put("/shoko/hon", &stub).0, 201);
}

#[test]
fn view_rows_carry_attachment_data_with_attachments_true() {
    let s = setup();
    let doc = json!({"n": 1, "_attachments": {"foo.txt": {"content_type": "text/plain", "data": "aGVsbG8="}}});
    assert_eq!(s.put("/shoko/e1", &doc).0, 201);
    let ddoc = json!({"views": {"n": {"map": "function(doc) { emit(doc.n, 1); }"}}});
    assert_eq!(s.put("/shoko/_design/v", &ddoc).0, 201);
    let (_, plain) = s.get("/shoko/_design/v/_view/n?include_docs=true");
    let att = &plain["rows"][0]["doc"]["_attachments"]["foo.txt"];
    assert_eq!((att["stub"].clone(), att.get("data")), (json!(true), None), "{plain}");
    let (_, full) = s.get("/shoko/_design/v/_view/n?include_docs=true&attachments=true");
    let att = &full["rows"][0]["doc"]["_attachments"]["foo.txt"];
    assert_eq!(att["data"], "aGVsbG8=", "{full}");
    assert!(att.get("stub").is_none(), "{full}");
}

/// `GET /{db}/{doc}?attachments=true` with `Accept: multipart/related` answers the
/// document and its attachments as `multipart/related`, byte for byte CouchDB 3.4.3's
/// answer but for the random boundary (`attachments_multipart_test.exs`).
#[test]
fn attachments_true_answers_multipart_related_to_clients_that_ask() {
    let s = setup();
    let doc = r#"{"body":"This is a body.","_attachments":{"foo.txt":{"follows":true,"content_type":"application/test","length":21},"bar.txt":{"follows":true,"content_type":"text/plain","length":20}}}"#;
    let body = format!(
        "--abc123\r\ncontent-type: application/json\r\n\r\n{doc}\r\n--abc123\r\n\r\n\
         this is 21 chars long\r\n--abc123\r\n\r\nthis is 20 chars lon\r\n--abc123--"
    );
    let put = s
        .req(Method::PUT, "/shoko/mp")
        .header("Content-Type", "multipart/related;boundary=\"abc123\"")
        .body(body);
    assert_eq!(send(put).0, 201);
    let resp = s
        .req(Method::GET, "/shoko/mp?attachments=true")
        .header("Accept", "multipart/related,*/*;")
        .send()
        .expect("request");
    let header = |name: &str| resp.headers()[name].to_str().unwrap_or_default().to_string();
    let content_type = header("content-type");
    let boundary = content_type
        .strip_prefix("multipart/related; boundary=\"")
        .and_then(|b| b.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{content_type}"))
        .to_string();
    assert_eq!(boundary.len(), 32);
    assert_eq!(header("content-length"), "853");
    assert_eq!(header("etag"), "\"1-5b037e1919fbc0bd9f71b0fc8a60f951\"");
    let got = resp.bytes().expect("body");
    let want = concat!(
        "--B\r\nContent-Type: application/json\r\n\r\n",
        r#"{"_id":"mp","_rev":"1-5b037e1919fbc0bd9f71b0fc8a60f951","body":"This is a body.","_attachments":{"foo.txt":{"content_type":"application/test","revpos":1,"digest":"md5-P4hg4DHgYbmaLO7SG5Wisw==","length":21,"follows":true},"bar.txt":{"content_type":"text/plain","revpos":1,"digest":"md5-bmXC6adig4mlCT+G/28DXg==","length":20,"follows":true,"encoding":"gzip","encoded_length":38}}}"#,
        "\r\n--B\r\nContent-Disposition: attachment; filename=\"foo.txt\"\r\n",
        "Content-Type: application/test\r\nContent-Length: 21\r\n\r\nthis is 21 chars long\r\n--B",
        "\r\nContent-Disposition: attachment; filename=\"bar.txt\"\r\nContent-Type: text/plain\r\n",
        "Content-Length: 38\r\nContent-Encoding: gzip\r\n\r\n",
    )
    .replace("--B", &format!("--{boundary}"));
    let mut want = want.into_bytes();
    // CouchDB's stored gzip of "this is 20 chars lon".
    want.extend_from_slice(
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03+\xc9\xc8,V\x00\"#\x03\x85\xe4",
    );
    want.extend_from_slice(b"\x8c\xc4\xa2b\x85\x9c\xfc<\x00t,>G\x14\x00\x00\x00");
    want.extend_from_slice(format!("\r\n--{boundary}--").as_bytes());
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(&want));
    assert_eq!(got.len(), 853);
    // `open_revs` with the same `Accept` answers `multipart/mixed`, as CouchDB's (which
    // reads the `*/*`).
    let resp = s
        .req(Method::GET, "/shoko/mp?open_revs=all")
        .header("Accept", "multipart/related,*/*;")
        .send()
        .expect("request");
    let content_type = resp.headers()["content-type"].to_str().unwrap_or_default().to_string();
    assert!(content_type.starts_with("multipart/mixed; boundary="), "{content_type}");
    // Without asking for it, the answer is JSON with the data inline.
    let (_, json) = s.get("/shoko/mp?attachments=true");
    assert_eq!(json["_attachments"]["foo.txt"]["data"], "dGhpcyBpcyAyMSBjaGFycyBsb25n");
}

/// `POST /{db}/{doc}` as `multipart/form-data` (a browser's form upload): the files of
/// `_attachments` are added to the revision `_rev` names; the `Referer` must be this host.
/// Every answer is CouchDB 3.4.3's (`attachments_test.exs`).
#[test]
fn html_form_uploads_add_attachments() {
    let s = setup();
    let (_, created) = s.put("/shoko/form", &json!({"title": "吾輩は猫である"}));
    assert_eq!(created["rev"], "1-08d92b71f1c0faf80198b88c17c0e3a7");
    let form = "------TF\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n\
                1-08d92b71f1c0faf80198b88c17c0e3a7\r\n------TF\r\nContent-Disposition: \
                form-data; name=\"_attachments\"; filename=\"file.txt\"\r\nContent-Type: \
                text/plain\r\n\r\ncontents of file.txt\r\n\r\n------TF--";
    let post = |referer: Option<&str>| {
        let mut req = s
            .req(Method::POST, "/shoko/form")
            .header("Content-Type", "multipart/form-data; boundary=----TF");
        if let Some(referer) = referer {
            req = req.header("Referer", referer);
        }
        send(req.body(form))
    };
    assert_error(post(None), 400, "bad_request", "Referer header required.");
    let elsewhere = post(Some("http://elsewhere:1"));
    assert_error(elsewhere, 400, "bad_request", "Referer header must match host.");
    let (status, posted) = post(Some(s.base()));
    assert_eq!(status, 201, "{posted}");
    assert_eq!(
        posted,
        json!({"ok": true, "id": "form", "rev": "2-0ba2237848c88556fa1196a9b65ac4e8"})
    );
    let (_, doc) = s.get("/shoko/form?att_encoding_info=true");
    assert_eq!(doc["title"], "吾輩は猫である");
    assert_eq!(
        doc["_attachments"],
        json!({"file.txt": {"content_type": "text/plain", "revpos": 2,
                            "digest": "md5-TDLlICUJ4ZX/9jeDRiyarw==", "length": 22,
                            "stub": true, "encoding": "gzip", "encoded_length": 42}})
    );
    let text = s.req(Method::GET, "/shoko/form/file.txt").send().expect("request");
    assert_eq!(text.text().expect("body"), "contents of file.txt\r\n");
}
