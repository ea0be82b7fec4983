//! What search and geo indexes keep across restarts and what a query reads: a geo index
//! kept in the store answers after `kill -9` without being rebuilt, and `update=false` /
//! `stale=ok` read an index as it is while the default brings it up to date first.

use serde_json::{Value, json};

use crate::harness::Server;
use crate::search::{bulk, ids, q, sorted};

const GEO: &str = "/devices/_design/geo/_geo/where";

/// Sensors of the IoT walkthrough along a bridge, and their geo index.
fn sensors(s: &Server) {
    assert_eq!(s.put_empty("/devices").0, 201);
    let sensors =
        [("device-1", -0.0800, 51.5000), ("device-2", -0.0790, 51.5005), ("device-3", 2.35, 48.85)];
    let docs = sensors
        .iter()
        .map(|(id, lon, lat)| {
            json!({"_id": id, "geometry": {"type": "Point", "coordinates": [lon, lat]}})
        })
        .collect();
    bulk(s, "devices", docs);
    let index = "function(doc) { if (doc.geometry) { st_index(doc.geometry); } }";
    let ddoc = json!({"st_indexes": {"where": {"index": index}}});
    assert_eq!(s.put("/devices/_design/geo", &ddoc).0, 201);
}

fn geo(s: &Server, params: &[(&str, Value)]) -> Vec<String> {
    let (status, body) = s.get(&q(GEO, params));
    assert_eq!(status, 200, "{params:?}: {body}");
    sorted(ids(&body))
}

fn near_bridge(s: &Server, stale: bool) -> Vec<String> {
    let mut params = vec![("lat", json!(51.5)), ("lon", json!(-0.08)), ("radius", json!(2000))];
    if stale {
        params.push(("stale", json!("ok")));
    }
    geo(s, &params)
}

#[test]
fn a_geo_index_is_read_back_from_the_store_after_kill_9() {
    let mut s = Server::start();
    sensors(&s);
    assert_eq!(near_bridge(&s, false), ["device-1", "device-2"]);
    s.kill9();
    s.restart();
    // `stale=ok` does not update: the answer is the index the store kept.
    assert_eq!(near_bridge(&s, true), ["device-1", "device-2"]);
    let (status, info) = s.get("/devices/_design/geo/_geo_info/where");
    assert_eq!((status, &info["geo_index"]["doc_count"]), (200, &json!(3)), "{info}");
    assert!(info["geo_index"]["disk_size"].as_u64().is_some_and(|n| n > 0), "{info}");
    // Edits and deletes after the restart still leave the results, and survive another.
    let mut moved = s.get_doc("devices", "device-3");
    moved["geometry"] = json!({"type": "Point", "coordinates": [-0.0801, 51.5001]});
    assert_eq!(s.put("/devices/device-3", &moved).0, 201);
    let rev = s.get_doc("devices", "device-1")["_rev"].as_str().unwrap_or_default().to_string();
    assert_eq!(s.delete(&format!("/devices/device-1?rev={rev}")).0, 200);
    assert_eq!(near_bridge(&s, false), ["device-2", "device-3"]);
    s.kill9();
    s.restart();
    assert_eq!(near_bridge(&s, true), ["device-2", "device-3"]);
    // A design document that no longer defines the index lets cleanup drop it.
    let mut ddoc = s.get_doc("devices", "_design/geo");
    ddoc["st_indexes"] = json!({});
    assert_eq!(s.put("/devices/_design/geo", &ddoc).0, 201);
    assert_eq!(s.post("/devices/_search_cleanup", &json!({})).0, 202);
    // Defined again, the index starts empty: its stored entries were removed.
    ddoc = s.get_doc("devices", "_design/geo");
    let index = "function(doc) { if (doc.geometry) { st_index(doc.geometry); } }";
    ddoc["st_indexes"] = json!({"where": {"index": index}});
    assert_eq!(s.put("/devices/_design/geo", &ddoc).0, 201);
    assert_eq!(near_bridge(&s, true), Vec::<String>::new());
    assert_eq!(near_bridge(&s, false), ["device-2", "device-3"]);
}

/// Notes of the IoT walkthrough's readings, a Mango text index and two search indexes on
/// them, none queried yet (so no background update has started).
fn notes(s: &Server) {
    assert_eq!(s.put_empty("/notes").0, 201);
    let docs = vec![
        json!({"_id": "r1", "note": "bridge sensor calibrated"}),
        json!({"_id": "r2", "note": "second sensor offline"}),
    ];
    bulk(s, "notes", docs);
    let index = json!({"index": {"fields": [{"name": "note", "type": "string"}]}, "type": "text"});
    assert_eq!(s.post("/notes/_index", &index).0, 200);
    let f = "function(d) { index('default', d.note); }";
    let ddoc = json!({"indexes": {"n": {"index": f}, "lazy": {"index": f, "analyzer": "simple"}}});
    assert_eq!(s.put("/notes/_design/s", &ddoc).0, 201);
}

fn find(s: &Server, extra: &[(&str, Value)]) -> Vec<String> {
    let mut body = json!({"selector": {"$text": "sensor"}});
    for (k, v) in extra {
        body[*k] = v.clone();
    }
    let (status, answer) = s.post("/notes/_find", &body);
    assert_eq!(status, 200, "{body}: {answer}");
    let docs = answer["docs"].as_array().cloned().unwrap_or_default();
    sorted(docs.iter().filter_map(|d| d["_id"].as_str().map(String::from)).collect())
}

fn search(s: &Server, index: &str, extra: &[(&str, Value)]) -> Vec<String> {
    let mut params = vec![("q", json!("sensor"))];
    params.extend(extra.iter().cloned());
    let (status, body) = s.get(&q(&format!("/notes/_design/s/_search/{index}"), &params));
    assert_eq!(status, 200, "{params:?}: {body}");
    sorted(ids(&body))
}

/// A query with `update=false` (or `stale=ok`) reads the index as it is, here not yet built,
/// while a default query brings it up to date first; `update=lazy` answers first and
/// updates after.
#[test]
fn update_false_reads_text_indexes_as_they_are() {
    let s = Server::start();
    notes(&s);
    let none = Vec::<String>::new();
    assert_eq!(find(&s, &[("update", json!(false))]), none);
    assert_eq!(find(&s, &[("stale", json!("ok"))]), none);
    assert_eq!(find(&s, &[]), ["r1", "r2"]);
    assert_eq!(search(&s, "n", &[("update", json!("false"))]), none);
    assert_eq!(search(&s, "n", &[("stale", json!("ok"))]), none);
    assert_eq!(search(&s, "n", &[]), ["r1", "r2"]);
    search(&s, "lazy", &[("update", json!("lazy"))]);
    let mut lazy = none.clone();
    for _ in 0..600 {
        lazy = search(&s, "lazy", &[("update", json!("false"))]);
        if !lazy.is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(lazy, ["r1", "r2"], "update=lazy updated the index after answering");
}

/// A sorted (or relevance-ordered) page is ranked from the index's sort columns and reads
/// only its rows; with `counts` every match is read. Both give the same rows in the same
/// order, over several segments, numbers and strings in one field, and missing values.
#[test]
fn pages_ranked_from_columns_equal_pages_from_every_match() {
    let s = Server::start();
    assert_eq!(s.put_empty("/shop").0, 201);
    let index = "function(doc) { index('default', doc.text); index('class', doc.class, \
                 {store: true}); if (doc.price !== undefined) { index('price', doc.price, \
                 {store: true}); index('a\\\\b', doc.price); } \
                 if (doc.tag) index('tag', doc.tag); }";
    let ddoc = json!({"indexes": {"items": {"index": index}}});
    assert_eq!(s.put("/shop/_design/s", &ddoc).0, 201);
    let path = "/shop/_design/s/_search/items";
    let classes = ["tool", "toy", "book"];
    for round in 0..3 {
        let docs = (0..20)
            .map(|n| {
                let i = round * 20 + n;
                let mut doc = json!({"_id": format!("item-{:02}", (i * 7) % 60),
                    "text": if i % 3 == 0 { "red red box" } else { "red box" },
                    "class": classes[i % 3]});
                match i % 5 {
                    0 => {}
                    1 => doc["price"] = json!("n/a"),
                    _ => doc["price"] = json!((i * 13) % 17),
                }
                if i % 4 == 0 {
                    doc["tag"] = json!(true);
                }
                doc
            })
            .collect();
        bulk(&s, "shop", docs);
        // One update per round: each is a segment of its own.
        assert_eq!(s.get(&q(path, &[("q", json!("box")), ("limit", json!(0))])).0, 200);
    }
    let sorts = [
        json!(null),
        json!("-price<number>"),
        json!(["class<string>", "price"]),
        json!(["-class", "-price"]),
        json!(["<score>", "-price"]),
        json!(["tag", "<doc>"]),
        // A backslash in a field name (tantivy's column paths escape with it).
        json!("-a\\b<number>"),
    ];
    for sort in sorts {
        for (skip, limit) in [(0, 7), (7, 7), (50, 25)] {
            let mut params = vec![("q", json!("red")), ("limit", json!(limit))];
            if !sort.is_null() {
                params.push(("sort", sort.clone()));
            }
            let mut bookmark = None;
            if skip > 0 {
                let mut first = params.clone();
                first[1] = ("limit", json!(skip));
                let (_, page) = s.get(&q(path, &first));
                bookmark = Some(page["bookmark"].clone());
            }
            if let Some(b) = &bookmark {
                params.push(("bookmark", b.clone()));
            }
            let (status, ranked) = s.get(&q(path, &params));
            assert_eq!(status, 200, "{params:?}: {ranked}");
            params.push(("counts", json!(["class"])));
            let (status, full) = s.get(&q(path, &params));
            assert_eq!(status, 200, "{params:?}: {full}");
            assert_eq!(ranked["total_rows"], full["total_rows"], "{params:?}");
            assert_eq!(ranked["rows"], full["rows"], "{params:?}");
            assert_eq!(ranked["bookmark"], full["bookmark"], "{params:?}");
            assert!(!ids(&ranked).is_empty() || skip >= 50, "{params:?}: {ranked}");
        }
    }
}

/// The directories under `data/search` (one per database with search indexes).
fn search_dirs(s: &Server) -> Vec<std::path::PathBuf> {
    let entries = std::fs::read_dir(s.data_dir().join("search")).into_iter().flatten();
    let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    dirs
}

/// Waits up to ten seconds for `dir` to be gone; whether it is.
fn gone(dir: &std::path::Path) -> bool {
    for _ in 0..200 {
        if !dir.exists() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    false
}

/// A database `keep` with one note and a search index on it, queried once.
fn keep(s: &Server) {
    assert_eq!(s.put_empty("/keep").0, 201);
    bulk(s, "keep", vec![json!({"_id": "k1", "note": "sensor kept"})]);
    let ddoc = json!({"indexes": {"n": {"index": "function(d) { index('default', d.note); }"}}});
    assert_eq!(s.put("/keep/_design/s", &ddoc).0, 201);
    assert_eq!(keep_hits(s), ["k1"]);
}

fn keep_hits(s: &Server) -> Vec<String> {
    let (status, body) = s.get(&q("/keep/_design/s/_search/n", &[("q", json!("sensor"))]));
    assert_eq!(status, 200, "{body}");
    ids(&body)
}

/// Issue 20 point 5: a deleted database's search index directories stayed on disk until a
/// `_search_cleanup` (which a deleted database can no longer be sent). As CouchDB's search
/// index manager does on the `deleted` event, they now go with the database, and a
/// database created again under the same name starts with empty indexes.
#[test]
fn a_deleted_database_takes_its_search_indexes_with_it() {
    let mut s = Server::start();
    notes(&s);
    sensors(&s);
    assert_eq!(search(&s, "n", &[]), ["r1", "r2"]);
    assert_eq!(find(&s, &[]), ["r1", "r2"]);
    assert_eq!(near_bridge(&s, false), ["device-1", "device-2"]);
    let notes_dir = match search_dirs(&s).as_slice() {
        [dir] => dir.clone(),
        other => panic!("one directory expected (geo indexes live in the store): {other:?}"),
    };
    let indexes = std::fs::read_dir(&notes_dir).map(|r| r.count()).unwrap_or(0);
    assert_eq!(indexes, 2, "the search index and the Mango text index");
    keep(&s);
    let keep_dir = search_dirs(&s).into_iter().find(|d| *d != notes_dir).unwrap_or_default();

    assert_eq!(s.delete("/notes"), (200, json!({"ok": true})));
    assert_eq!(s.delete("/devices").0, 200);
    assert!(gone(&notes_dir), "{} is still there", notes_dir.display());
    assert!(keep_dir.is_dir(), "another database's indexes stay");
    assert_eq!(keep_hits(&s), ["k1"]);
    let (status, body) = s.get(&q("/notes/_design/s/_search/n", &[("q", json!("sensor"))]));
    assert_eq!((status, &body["error"]), (404, &json!("not_found")), "{body}");

    // Created again with other documents: no hit of the deleted database's documents.
    assert_eq!(s.put_empty("/notes").0, 201);
    bulk(&s, "notes", vec![json!({"_id": "r3", "note": "sensor replaced"})]);
    let f = "function(d) { index('default', d.note); }";
    let ddoc = json!({"indexes": {"n": {"index": f}, "lazy": {"index": f, "analyzer": "simple"}}});
    assert_eq!(s.put("/notes/_design/s", &ddoc).0, 201);
    let index = json!({"index": {"fields": [{"name": "note", "type": "string"}]}, "type": "text"});
    assert_eq!(s.post("/notes/_index", &index).0, 200);
    assert_eq!(search(&s, "n", &[("stale", json!("ok"))]), Vec::<String>::new());
    assert_eq!(search(&s, "n", &[]), ["r3"]);
    assert_eq!(find(&s, &[]), ["r3"]);
    sensors(&s);
    assert_eq!(near_bridge(&s, true), Vec::<String>::new());
    assert_eq!(near_bridge(&s, false), ["device-1", "device-2"]);

    // A directory no database owns (its database deleted while the server was down) goes
    // at the next start; the live databases' indexes stay and answer.
    s.kill9();
    let orphan = s.data_dir().join("search").join("987654321");
    assert!(std::fs::create_dir_all(orphan.join("sig")).is_ok());
    s.restart();
    assert!(gone(&orphan), "{} is still there", orphan.display());
    assert_eq!(search_dirs(&s).len(), 2, "the new notes' and keep's");
    assert_eq!(search(&s, "n", &[("stale", json!("ok"))]), ["r3"]);
    assert_eq!(keep_hits(&s), ["k1"]);
}
