//! Replication with a real CouchDB (issue 16), run only when `BUNKO_TEST_COUCHDB_URL` names
//! one with admin credentials in the URL (`http://admin:secret@127.0.0.1:5984`); without it
//! the test says so on stderr and passes (CI has no CouchDB). Both replicators, both ways:
//! Bunko's pulling and pushing, CouchDB's pushing (compressible attachments arrive gzipped)
//! and pulling (`multipart/mixed`), a conflict, and CouchDB's `_local` checkpoints on Bunko.
//! `scripts/replicate-couchdb.sh` runs more scenarios by hand.

use std::time::{SystemTime, UNIX_EPOCH};

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, client, send};

const VAR: &str = "BUNKO_TEST_COUCHDB_URL";

fn couchdb() -> Option<String> {
    match std::env::var(VAR) {
        Ok(url) if !url.is_empty() => Some(url.trim_end_matches('/').to_string()),
        _ => {
            eprintln!("skipped: set {VAR} to a CouchDB 3.4 URL with admin credentials");
            None
        }
    }
}

/// `(status, JSON)` of a request to the CouchDB (credentials from its URL).
fn couch(method: Method, url: &str, body: Option<&Value>) -> (u16, Value) {
    let req = client().request(method, url).header("Accept", "application/json");
    send(match body {
        Some(body) => req.json(body),
        None => req,
    })
}

/// The documents of `db` at `base`, winners with their conflicts, as `_all_docs` lists them.
fn contents(base: &str, db: &str) -> Value {
    let (status, body) = couch(
        Method::GET,
        &format!("{base}/{db}/_all_docs?include_docs=true&conflicts=true"),
        None,
    );
    assert_eq!(status, 200, "{body}");
    body["rows"].clone()
}

fn replicate(via: &str, source: String, target: String) {
    let body = json!({"source": source, "target": target, "create_target": true});
    let (status, answer) = couch(Method::POST, &format!("{via}/_replicate"), Some(&body));
    assert_eq!(status, 200, "{via}: {answer}");
    assert_eq!(answer["history"][0]["doc_write_failures"].as_u64().unwrap_or(0), 0, "{answer}");
}

#[test]
fn both_replicators_copy_attachments_and_conflicts_with_a_real_couchdb() {
    let Some(couchdb) = couchdb() else { return };
    let s = Server::start();
    let bunko = s.base().replacen("http://", &format!("http://{ADMIN}:{ADMIN_PASSWORD}@"), 1);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let db = format!("bunko_e2e_{nanos}");
    let text: String = (0..5000).map(|i| format!("{i}: ドキュメント指向データベース\n")).collect();
    let b64 =
        |bytes: &[u8]| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bytes);
    let docs = json!({"docs": [
        {"_id": "1", "firstName": "Thomas", "lastName": "Andersen"},
        {"_id": "files", "_attachments": {
            "guide.txt": {"content_type": "text/plain", "data": b64(text.as_bytes())},
            "raw.bin": {"content_type": "application/octet-stream", "data": b64(&[0, 1, 2, 255])}}}
    ]});
    assert_eq!(couch(Method::PUT, &format!("{couchdb}/{db}"), None).0, 201);
    assert_eq!(couch(Method::POST, &format!("{couchdb}/{db}/_bulk_docs"), Some(&docs)).0, 201);

    // Bunko pulls; CouchDB pushes into another Bunko database (gzipped parts).
    replicate(&bunko, format!("{couchdb}/{db}"), "pulled".into());
    replicate(&couchdb, format!("{couchdb}/{db}"), format!("{bunko}/pushed"));
    let source = contents(&couchdb, &db);
    assert_eq!(contents(&bunko, "pulled"), source);
    assert_eq!(contents(&bunko, "pushed"), source);
    let (_, got) = couch(Method::GET, &format!("{bunko}/pushed/files/guide.txt"), None);
    assert_eq!(got, Value::String(text.clone()));
    // Both store the text gzipped, the same gzip (`encoded_length`, digest); CouchDB's
    // replicator pulls it from Bunko gzipped (`open_revs` multipart) and stores it so.
    let stored = |base: &str, db: &str| {
        let url = format!("{base}/{db}/files?att_encoding_info=true");
        couch(Method::GET, &url, None).1["_attachments"].clone()
    };
    let on_couchdb = stored(&couchdb, &db);
    assert_eq!(on_couchdb["guide.txt"]["encoding"], "gzip", "{on_couchdb}");
    assert_eq!(stored(&bunko, "pulled"), on_couchdb);
    assert_eq!(stored(&bunko, "pushed"), on_couchdb);
    replicate(&couchdb, format!("{bunko}/pulled"), format!("{couchdb}/{db}_from_bunko"));
    assert_eq!(stored(&couchdb, &format!("{db}_from_bunko")), on_couchdb);
    let url = format!("{couchdb}/{db}_from_bunko/files/guide.txt");
    assert_eq!(couch(Method::GET, &url, None).1, Value::String(text.clone()));

    // The same revision edited on both sides, then CouchDB's replicator both ways (its
    // second run updates its `_local` checkpoint on Bunko).
    let rev = source[0]["value"]["rev"].clone();
    let edit = |base: &str, name: &str| {
        let body = json!({"_rev": rev.clone(), "firstName": name});
        assert_eq!(couch(Method::PUT, &format!("{base}/1"), Some(&body)).0, 201);
    };
    edit(&format!("{couchdb}/{db}"), "couch");
    edit(&format!("{bunko}/pushed"), "bunko");
    let (on_couch, on_bunko) = (format!("{couchdb}/{db}"), format!("{bunko}/pushed"));
    replicate(&couchdb, on_couch.clone(), on_bunko.clone());
    replicate(&couchdb, on_bunko.clone(), on_couch.clone());
    replicate(&couchdb, on_couch, on_bunko);
    let both = contents(&couchdb, &db);
    assert_eq!(both[0]["doc"]["_conflicts"].as_array().map(Vec::len), Some(1), "{both}");
    assert_eq!(contents(&bunko, "pushed"), both);

    // Bunko pushes into a new CouchDB database.
    replicate(&bunko, "pushed".into(), format!("{couchdb}/{db}_back"));
    assert_eq!(contents(&couchdb, &format!("{db}_back")), both);
    for name in [db.clone(), format!("{db}_back"), format!("{db}_from_bunko")] {
        couch(Method::DELETE, &format!("{couchdb}/{name}"), None);
    }
}
