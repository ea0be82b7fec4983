//! `kill -9` during writes: every acknowledged write survives the restart.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, client, rev_gen};

const WRITERS: usize = 4;
/// Writers run this long before the kill; the kill lands while they are mid-request.
const WRITE_FOR: Duration = Duration::from_millis(2000);

/// Acknowledged (201) writes: doc id -> rev.
type Acked = Arc<Mutex<BTreeMap<String, String>>>;

/// Documents per `_bulk_docs` request in [`Writes::Bulk`].
const BULK: usize = 10;

/// How the creators write: one `PUT` per document, `_bulk_docs` requests, or
/// `POST /_transaction` requests.
#[derive(Clone, Copy)]
enum Writes {
    Put,
    Bulk,
    Txn,
}

/// A new IoT reading document of writer `w`.
fn reading(w: usize, i: usize) -> serde_json::Value {
    json!({"deviceID": format!("device-{w}"), "infrastructureID": "bridge-9876", "seq": i,
        "reading": {"temperature": {"value": i % 40, "unit": "c"}}})
}

/// [`BULK`] new readings of writer `w`, with ids `{id}-0`, `{id}-1`, …
fn batch(w: usize, i: usize, id: &str) -> Vec<serde_json::Value> {
    (0..BULK)
        .map(|k| {
            let mut doc = reading(w, i);
            doc["_id"] = json!(format!("{id}-{k}"));
            doc
        })
        .collect()
}

/// Spawns writer threads that create new IoT reading documents until `stop` is set or the
/// server goes away, recording every acknowledged (201) document in `acked`.
fn spawn_creators(
    base: &str,
    stop: &Arc<AtomicBool>,
    acked: &Acked,
    writes: Writes,
) -> Vec<std::thread::JoinHandle<usize>> {
    (0..WRITERS)
        .map(|w| {
            let (base, stop, acked) = (base.to_string(), stop.clone(), acked.clone());
            std::thread::spawn(move || {
                let http = client();
                let mut attempts = 0;
                for i in 0.. {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let id = format!("bridge-9876:device-{w}-{i:06}");
                    let request = match writes {
                        Writes::Put => {
                            attempts += 1;
                            http.put(format!("{base}/iot/{id}")).json(&reading(w, i))
                        }
                        Writes::Bulk => {
                            attempts += BULK;
                            let docs = batch(w, i, &id);
                            http.post(format!("{base}/iot/_bulk_docs")).json(&json!({"docs": docs}))
                        }
                        Writes::Txn => {
                            attempts += BULK;
                            let docs: Vec<_> = batch(w, i, &id)
                                .into_iter()
                                .map(|doc| json!({"db": "iot", "doc": doc}))
                                .collect();
                            http.post(format!("{base}/_transaction")).json(&json!({"docs": docs}))
                        }
                    };
                    let resp = request.basic_auth(ADMIN, Some(ADMIN_PASSWORD)).send();
                    let Ok(resp) = resp else { break };
                    if resp.status().as_u16() != 201 {
                        break;
                    }
                    let Ok(v) = resp.json::<serde_json::Value>() else { break };
                    let rows = match (v.as_array(), v["results"].as_array()) {
                        (Some(rows), _) | (None, Some(rows)) => rows.clone(),
                        (None, None) => vec![json!({"id": id, "rev": v["rev"]})],
                    };
                    for row in rows {
                        if let (Some(id), Some(rev)) = (row["id"].as_str(), row["rev"].as_str()) {
                            acked.lock().unwrap().insert(id.to_string(), rev.to_string());
                        }
                    }
                }
                attempts
            })
        })
        .collect()
}

#[test]
fn kill9_during_concurrent_creates_loses_no_acknowledged_document() {
    creates_survive_kill9(Writes::Put);
}

/// `_bulk_docs` awaits its sync on the async runtime like a `PUT`: the same guarantee.
#[test]
fn kill9_during_concurrent_bulk_docs_loses_no_acknowledged_document() {
    creates_survive_kill9(Writes::Bulk);
}

/// `POST /_transaction` awaits its sync on the async runtime too (issue 20 point 3).
#[test]
fn kill9_during_concurrent_transactions_loses_no_acknowledged_document() {
    creates_survive_kill9(Writes::Txn);
}

fn creates_survive_kill9(writes: Writes) {
    let mut s = Server::start();
    s.create_db("iot");
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Acked = Arc::default();
    let writers = spawn_creators(s.base(), &stop, &acked, writes);
    std::thread::sleep(WRITE_FOR);
    s.kill9();
    stop.store(true, Ordering::Relaxed);
    let attempts: usize = writers.into_iter().map(|w| w.join().unwrap()).sum();
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= 10, "too few acknowledged writes to mean anything: {}", acked.len());
    eprintln!("acknowledged {} of {attempts} attempted writes before kill -9", acked.len());

    s.restart();
    let info = s.db_info("iot");
    let count = info["doc_count"].as_u64().unwrap() as usize;
    assert!(count >= acked.len(), "doc_count {count} < acknowledged {}", acked.len());
    assert!(count <= attempts, "doc_count {count} > attempted {attempts}");

    let keys: Vec<&String> = acked.keys().collect();
    let (status, body) = s.post("/iot/_all_docs", &json!({"keys": keys}));
    assert_eq!(status, 200);
    let mut lost = Vec::new();
    for row in body["rows"].as_array().unwrap() {
        let id = row["key"].as_str().unwrap();
        if row["value"]["rev"].as_str() != Some(acked[id].as_str()) {
            lost.push(format!("{id}: acked {} now {row}", acked[id]));
        }
    }
    assert!(
        lost.is_empty(),
        "{} acknowledged writes lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    // Bodies too, not just the index.
    let some = acked.keys().next_back().unwrap();
    let doc = s.get_doc("iot", &crate::harness::enc(some));
    assert_eq!(doc["infrastructureID"], "bridge-9876");
    // The database keeps working after recovery.
    assert_eq!(s.put("/iot/after-restart", &json!({})).0, 201);
}

#[test]
fn kill9_during_updates_keeps_each_document_at_or_after_its_acknowledged_rev() {
    let mut s = Server::start();
    s.create_db("iot");
    let ids: Vec<String> = (0..WRITERS).map(|w| format!("bridge-9876:device-{w}")).collect();
    for id in &ids {
        s.put_doc("iot", id, &json!({"n": 0}));
    }
    let stop = Arc::new(AtomicBool::new(false));
    // id -> last acknowledged rev
    let acked: Acked = Arc::default();
    let writers: Vec<_> = ids
        .iter()
        .map(|id| {
            let (base, stop, acked) = (s.base().to_string(), stop.clone(), acked.clone());
            let id = id.clone();
            let mut rev = s.get_doc("iot", &id)["_rev"].as_str().unwrap().to_string();
            std::thread::spawn(move || {
                let http = client();
                let started = Instant::now();
                for n in 1.. {
                    if stop.load(Ordering::Relaxed) || started.elapsed() > Duration::from_secs(30) {
                        break;
                    }
                    let resp = http
                        .put(format!("{base}/iot/{id}"))
                        .basic_auth(ADMIN, Some(ADMIN_PASSWORD))
                        .json(&json!({"_rev": rev, "n": n}))
                        .send();
                    let Ok(resp) = resp else { break };
                    if resp.status().as_u16() != 201 {
                        break;
                    }
                    let Ok(v) = resp.json::<serde_json::Value>() else { break };
                    rev = v["rev"].as_str().unwrap().to_string();
                    acked.lock().unwrap().insert(id.clone(), rev.clone());
                }
            })
        })
        .collect();
    std::thread::sleep(WRITE_FOR);
    s.kill9();
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    s.restart();
    for (id, rev) in &acked {
        let doc = s.get_doc("iot", &crate::harness::enc(id));
        let now = doc["_rev"].as_str().unwrap();
        // The write in flight at the kill may or may not have landed; nothing older may show.
        let (acked_gen, now_gen) = (rev_gen(rev), rev_gen(now));
        assert!(
            now == rev || now_gen == acked_gen + 1,
            "{id}: acknowledged {rev}, after restart {now}"
        );
        assert!(doc["n"].as_u64().unwrap() + 1 >= acked_gen, "{doc}");
    }
}
