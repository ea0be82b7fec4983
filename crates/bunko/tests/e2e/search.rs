//! Cloudant Search (`_search` on tantivy): Lucene syntax, sort, bookmarks, facets,
//! drilldown, groups, highlights, stored fields and `include_docs`, the IoT walkthrough's
//! partitioned readings searched per partition, deleted and edited documents, `stale`,
//! `_search_info`, `_search_cleanup`, security, and a restart while an index builds.
//! Answers follow the Cloudant and CouchDB 3.4 search documentation
//! (`api/ddoc/search`, "Search" in the Cloudant docs).

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, enc, send};

/// `path` with `?name=value` parameters, percent-encoded (strings as given, other JSON as
/// its text).
pub(crate) fn q(path: &str, params: &[(&str, Value)]) -> String {
    let query: Vec<String> = params
        .iter()
        .map(|(name, v)| {
            let text = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            format!("{name}={}", enc(&text))
        })
        .collect();
    format!("{path}?{}", query.join("&"))
}

pub(crate) fn ids(answer: &Value) -> Vec<String> {
    answer["rows"]
        .as_array()
        .map(|rows| rows.iter().filter_map(|r| r["id"].as_str().map(String::from)).collect())
        .unwrap_or_default()
}

pub(crate) fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

pub(crate) fn bulk(s: &Server, db: &str, docs: Vec<Value>) {
    let (status, body) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": docs}));
    assert_eq!(status, 201, "{body}");
}

/// The animals of the Cloudant search documentation's examples, with a price.
fn animals(s: &Server) {
    assert_eq!(s.put_empty("/animals").0, 201);
    let animals = [
        ("aardvark", "mammal", 50, "The aardvark is a medium-sized burrowing nocturnal mammal"),
        ("badger", "mammal", 30, "Badgers are short-legged omnivores that dig burrows"),
        ("kookaburra", "bird", 20, "Kookaburras are terrestrial tree kingfishers"),
        ("panda", "mammal", 90, "The giant panda is a bear native to China"),
        ("snipe", "bird", 10, "Snipes are wading birds with long slender bills"),
        ("zander", "fish", 15, "The zander is a fish of fresh and brackish waters"),
    ];
    let docs = animals
        .iter()
        .map(|(id, class, price, text)| {
            json!({"_id": id, "name": id, "class": class, "price": price, "description": text})
        })
        .collect();
    bulk(s, "animals", docs);
    let index = "function(doc) { \
        index('default', doc.description); \
        index('name', doc.name, {store: true}); \
        index('class', doc.class, {store: true, facet: true}); \
        index('price', doc.price, {store: true, facet: true}); }";
    let ddoc = json!({"indexes": {"animals": {"index": index, "analyzer": "english"}}});
    assert_eq!(s.put("/animals/_design/search", &ddoc).0, 201);
}

const ANIMALS: &str = "/animals/_design/search/_search/animals";

fn search(s: &Server, params: &[(&str, Value)]) -> Value {
    let (status, body) = s.get(&q(ANIMALS, params));
    assert_eq!(status, 200, "{params:?}: {body}");
    body
}

fn hits(s: &Server, query: &str) -> Vec<String> {
    sorted(ids(&search(s, &[("q", json!(query)), ("limit", json!(200))])))
}

#[test]
fn lucene_syntax_fields_phrases_wildcards_fuzzy_ranges_booleans() {
    let s = Server::start();
    animals(&s);
    assert_eq!(hits(&s, "class:bird"), ["kookaburra", "snipe"]);
    // The default field, analyzed in English: "burrows" and "burrowing" share a stem.
    assert_eq!(hits(&s, "burrow"), ["aardvark", "badger"]);
    assert_eq!(hits(&s, "\"giant panda\""), ["panda"]);
    assert_eq!(hits(&s, "\"panda giant\""), Vec::<String>::new());
    assert_eq!(hits(&s, "name:kook*"), ["kookaburra"]);
    assert_eq!(hits(&s, "name:z?nder"), ["zander"]);
    assert_eq!(hits(&s, "name:badgr~1"), ["badger"]);
    assert_eq!(hits(&s, "name:badgr~"), ["badger"]);
    // Numeric ranges on numbers, inclusive and exclusive; `price:15` is numeric too.
    assert_eq!(hits(&s, "price:[10 TO 20]"), ["kookaburra", "snipe", "zander"]);
    assert_eq!(hits(&s, "price:{10 TO 20}"), ["zander"]);
    assert_eq!(hits(&s, "price:[50 TO Infinity]"), ["aardvark", "panda"]);
    assert_eq!(hits(&s, "price:15"), ["zander"]);
    // String ranges compare the field's tokens.
    assert_eq!(hits(&s, "name:[a TO c]"), ["aardvark", "badger"]);
    assert_eq!(hits(&s, "class:mammal AND price:[40 TO 100]"), ["aardvark", "panda"]);
    assert_eq!(hits(&s, "class:mammal AND NOT name:panda"), ["aardvark", "badger"]);
    assert_eq!(hits(&s, "class:fish OR class:bird"), ["kookaburra", "snipe", "zander"]);
    assert_eq!(hits(&s, "+class:mammal -name:badger -name:panda"), ["aardvark"]);
    assert_eq!(hits(&s, "-class:mammal"), ["kookaburra", "snipe", "zander"]);
    assert_eq!(hits(&s, "*:*").len(), 6);
    // A boost changes the order, not the matches.
    let boosted = search(&s, &[("q", json!("name:snipe^10 OR class:bird"))]);
    assert_eq!(ids(&boosted).first().map(String::as_str), Some("snipe"));
    let (status, body) = s.get(&q(ANIMALS, &[("q", json!("class:(bird"))]));
    assert_eq!((status, &body["error"]), (400, &json!("bad_request")), "{body}");
}

#[test]
fn sort_limit_bookmark_fields_and_include_docs() {
    let s = Server::start();
    animals(&s);
    let first =
        search(&s, &[("q", json!("*:*")), ("sort", json!("-price<number>")), ("limit", json!(2))]);
    assert_eq!(first["total_rows"], 6);
    assert_eq!(ids(&first), ["panda", "aardvark"]);
    assert_eq!(first["rows"][0]["order"][0], 90);
    assert_eq!(
        first["rows"][0]["fields"],
        json!({"name": "panda", "class": "mammal", "price": 90})
    );
    let next = search(
        &s,
        &[
            ("q", json!("*:*")),
            ("sort", json!("-price<number>")),
            ("limit", json!(2)),
            ("bookmark", first["bookmark"].clone()),
        ],
    );
    assert_eq!(ids(&next), ["badger", "kookaburra"]);
    let by_name = search(&s, &[("q", json!("class:bird")), ("sort", json!(["name<string>"]))]);
    assert_eq!(ids(&by_name), ["kookaburra", "snipe"]);
    let only = search(
        &s,
        &[
            ("q", json!("name:snipe")),
            ("include_fields", json!(["price"])),
            ("include_docs", json!(true)),
        ],
    );
    assert_eq!(only["rows"][0]["fields"], json!({"price": 10}));
    assert_eq!(only["rows"][0]["doc"]["_id"], "snipe");
    assert_eq!(only["rows"][0]["doc"]["class"], "bird");
    assert!(only["rows"][0]["doc"]["_rev"].as_str().is_some_and(|r| r.starts_with("1-")));
    // POST takes the same parameters as a JSON body.
    let (status, posted) =
        s.post(ANIMALS, &json!({"q": "class:bird", "sort": ["-price<number>"], "limit": 1}));
    assert_eq!(status, 200, "{posted}");
    assert_eq!(
        (posted["total_rows"].clone(), ids(&posted)),
        (json!(2), vec!["kookaburra".to_string()])
    );
    assert_error(
        s.get(&q(ANIMALS, &[("q", json!("a")), ("limit", json!(201))])),
        400,
        "bad_request",
        "Limit must be less than or equal to 200",
    );
}

#[test]
fn counts_ranges_drilldown_groups_and_highlights() {
    let s = Server::start();
    animals(&s);
    let facets = search(
        &s,
        &[
            ("q", json!("*:*")),
            ("counts", json!(["class"])),
            ("ranges", json!({"price": {"cheap": "[0 TO 20]", "dear": "{20 TO Infinity}"}})),
            ("limit", json!(0)),
        ],
    );
    assert_eq!(facets["counts"], json!({"class": {"bird": 2, "fish": 1, "mammal": 3}}));
    assert_eq!(facets["ranges"], json!({"price": {"cheap": 3, "dear": 3}}));
    assert_eq!(facets["rows"], json!([]));
    let drilled = search(&s, &[("q", json!("*:*")), ("drilldown", json!(["class", "bird"]))]);
    assert_eq!(sorted(ids(&drilled)), ["kookaburra", "snipe"]);
    assert_eq!(drilled["total_rows"], 2);
    let grouped = search(
        &s,
        &[
            ("q", json!("*:*")),
            ("group_field", json!("class")),
            ("group_limit", json!(2)),
            ("sort", json!("price<number>")),
            ("group_sort", json!("class<string>")),
        ],
    );
    assert_eq!(grouped["total_rows"], 6);
    let groups = grouped["groups"].as_array().cloned().unwrap_or_default();
    let summary: Vec<(Value, Value, Vec<String>)> =
        groups.iter().map(|g| (g["by"].clone(), g["total_rows"].clone(), ids(g))).collect();
    assert_eq!(
        summary,
        vec![
            (json!("bird"), json!(2), vec!["snipe".to_string(), "kookaburra".to_string()]),
            (json!("fish"), json!(1), vec!["zander".to_string()]),
            (json!("mammal"), json!(3), vec!["badger".to_string(), "aardvark".to_string()]),
        ]
    );
    let lit = search(
        &s,
        &[
            ("q", json!("class:bird")),
            ("highlight_fields", json!(["class"])),
            ("highlight_pre_tag", json!("<b>")),
            ("highlight_post_tag", json!("</b>")),
            ("limit", json!(1)),
        ],
    );
    assert_eq!(lit["rows"][0]["highlights"], json!({"class": ["<b>bird</b>"]}));
}

#[test]
fn deleted_and_edited_documents_leave_the_results() {
    let s = Server::start();
    animals(&s);
    assert_eq!(hits(&s, "class:fish"), ["zander"]);
    let zander = s.get_doc("animals", "zander");
    let mut edited = zander.clone();
    edited["class"] = json!("bird");
    assert_eq!(s.put("/animals/zander", &edited).0, 201);
    assert_eq!(hits(&s, "class:fish"), Vec::<String>::new());
    assert_eq!(hits(&s, "class:bird"), ["kookaburra", "snipe", "zander"]);
    let rev = s.get_doc("animals", "snipe")["_rev"].as_str().unwrap_or_default().to_string();
    assert_eq!(s.delete(&format!("/animals/snipe?rev={rev}")).0, 200);
    assert_eq!(hits(&s, "class:bird"), ["kookaburra", "zander"]);
    let info = s.get("/animals/_design/search/_search_info/animals");
    assert_eq!(info.0, 200, "{}", info.1);
    assert_eq!(info.1["name"], "_design/search/animals");
    assert_eq!(info.1["search_index"]["doc_count"], 5);
    assert_eq!(info.1["search_index"]["committed_seq"], info.1["search_index"]["pending_seq"]);
    // A new document is found by the next default (updating) query. What `stale=ok` misses is
    // checked in `search_state` against an index no background update can have reached.
    bulk(&s, "animals", vec![json!({"_id": "tuna", "class": "fish", "price": 5})]);
    assert_eq!(hits(&s, "class:fish"), ["tuna"]);
}

#[test]
fn design_document_changes_cleanup_and_security() {
    let s = Server::start();
    animals(&s);
    assert_eq!(hits(&s, "class:fish"), ["zander"]);
    let mut ddoc = s.get_doc("animals", "_design/search");
    ddoc["indexes"]["animals"]["index"] = json!("function(doc) { index('class', doc.name); }");
    assert_eq!(s.put("/animals/_design/search", &ddoc).0, 201);
    assert_eq!(hits(&s, "class:zander"), ["zander"], "the edited function rebuilt the index");
    let search_dir = s.data_dir().join("search");
    let dirs = |d: &std::path::Path| std::fs::read_dir(d).map(|r| r.count()).unwrap_or(0);
    let db_dir =
        std::fs::read_dir(&search_dir).ok().and_then(|mut r| r.next()).and_then(|e| e.ok());
    let db_dir = db_dir.map(|e| e.path()).unwrap_or_default();
    assert_eq!(dirs(&db_dir), 2, "the old and the new index");
    let (status, body) = s.post("/animals/_search_cleanup", &json!({}));
    assert_eq!((status, body), (202, json!({"ok": true})));
    assert_eq!(dirs(&db_dir), 1, "only the index the design document defines is left");
    assert_eq!(hits(&s, "class:zander"), ["zander"]);
    let missing = s.get(&q("/animals/_design/search/_search/nope", &[("q", json!("a"))]));
    assert_eq!((missing.0, &missing.1["error"]), (404, &json!("not_found")), "{}", missing.1);
    // Only members read a database with members.
    let security = json!({"members": {"names": ["alice"]}});
    assert_eq!(s.put("/animals/_security", &security).0, 200);
    let (status, _) = send(s.anon_req(Method::GET, &q(ANIMALS, &[("q", json!("*:*"))])));
    assert_eq!(status, 401);
}

/// The IoT walkthrough of the Cloudant partitioning guide: readings partitioned by
/// infrastructure, each with a text note, searched within one bridge's partition.
#[test]
fn iot_readings_search_within_a_partition() {
    let s = Server::start();
    assert_eq!(s.put_empty("/readings?partitioned=true").0, 201);
    let notes = ["vibration high on the north span", "normal", "cable vibration check", "normal"];
    let mut docs = Vec::new();
    for (b, bridge) in ["bridge-9876", "bridge-1234"].iter().enumerate() {
        for (n, note) in notes.iter().enumerate() {
            docs.push(json!({
                "_id": format!("{bridge}:device-12345{n}-20181211T11:13:2{b}.123456Z"),
                "deviceID": format!("device-12345{n}"),
                "infrastructureID": bridge,
                "ts": "20181211T11:13:24.123456Z",
                "note": note,
                "reading": {"temperature": {"value": 10 + n, "unit": "c"}}
            }));
        }
    }
    bulk(&s, "readings", docs);
    let index = "function(doc) { index('note', doc.note, {store: true}); \
                 index('device', doc.deviceID, {store: true}); \
                 index('temperature', doc.reading.temperature.value); }";
    let ddoc = json!({"options": {"partitioned": true}, "indexes": {"notes": {"index": index}}});
    assert_eq!(s.put("/readings/_design/notes", &ddoc).0, 201);
    let (status, body) = s.get(&q(
        "/readings/_partition/bridge-9876/_design/notes/_search/notes",
        &[("q", json!("note:vibration")), ("sort", json!("device<string>"))],
    ));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total_rows"], 2);
    let devices: Vec<Value> = body["rows"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["fields"]["device"].clone())
        .collect();
    assert_eq!(devices, [json!("device-123450"), json!("device-123452")]);
    assert!(ids(&body).iter().all(|id| id.starts_with("bridge-9876:")));
    let (status, body) = s.post(
        "/readings/_partition/bridge-1234/_design/notes/_search/notes",
        &json!({"q": "temperature:[11 TO 13]"}),
    );
    assert_eq!((status, body["total_rows"].clone()), (200, json!(3)), "{body}");
    assert_error(
        s.get(&q("/readings/_design/notes/_search/notes", &[("q", json!("note:normal"))])),
        400,
        "bad_request",
        "`partition` parameter is mandatory for queries to this index.",
    );
}

/// A crash (`kill -9`) while an index is being built, then a restart: the index resumes
/// from its last checkpoint and ends with every document indexed once.
#[test]
fn a_restart_while_the_index_builds_resumes_it() {
    let mut s = Server::start();
    assert_eq!(s.put_empty("/notes").0, 201);
    for chunk in 0..4 {
        let docs = (0..2500)
            .map(|n| json!({"_id": format!("n{chunk}-{n:05}"), "text": format!("word{} common", n % 10)}))
            .collect();
        bulk(&s, "notes", docs);
    }
    let ddoc = json!({"indexes": {"text": {"index": "function(d) { index('default', d.text); }"}}});
    assert_eq!(s.put("/notes/_design/s", &ddoc).0, 201);
    let path = "/notes/_design/s/_search/text";
    // `stale=update_after` starts the build in the background and answers at once.
    let (status, _) = s.get(&q(path, &[("q", json!("common")), ("stale", json!("update_after"))]));
    assert_eq!(status, 200);
    s.kill9();
    s.restart();
    let (status, body) = s.get(&q(path, &[("q", json!("common")), ("limit", json!(1))]));
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total_rows"], 10_000);
    let (_, word3) = s.get(&q(path, &[("q", json!("word3")), ("limit", json!(0))]));
    assert_eq!(word3["total_rows"], 1000);
}

/// Cloudant Geo over the IoT walkthrough's sensors: each device's location as a GeoJSON
/// point, found by bounding box, radius, WKT polygon and nearest-first.
#[test]
fn iot_sensor_locations_by_bbox_radius_polygon_and_nearest() {
    let s = Server::start();
    assert_eq!(s.put_empty("/devices").0, 201);
    // Sensors along a bridge near (-0.08, 51.5), one far away, one with no location.
    let sensors = [
        ("device-123450", -0.0800, 51.5000),
        ("device-123451", -0.0790, 51.5005),
        ("device-123452", -0.0700, 51.5030),
        ("device-999999", 2.3522, 48.8566),
    ];
    let mut docs: Vec<Value> = sensors
        .iter()
        .map(|(id, lon, lat)| {
            json!({"_id": id, "infrastructureID": "bridge-9876",
                   "geometry": {"type": "Point", "coordinates": [lon, lat]}})
        })
        .collect();
    docs.push(json!({"_id": "device-nowhere", "infrastructureID": "bridge-9876"}));
    bulk(&s, "devices", docs);
    let index = "function(doc) { if (doc.geometry) { st_index(doc.geometry); } }";
    assert_eq!(
        s.put("/devices/_design/geo", &json!({"st_indexes": {"where": {"index": index}}})).0,
        201
    );
    let geo = |params: &[(&str, Value)]| {
        let (status, body) = s.get(&q("/devices/_design/geo/_geo/where", params));
        assert_eq!(status, 200, "{params:?}: {body}");
        body
    };
    let bbox = geo(&[("bbox", json!("-0.09,51.49,-0.075,51.51"))]);
    assert_eq!(sorted(ids(&bbox)), ["device-123450", "device-123451"]);
    assert_eq!(bbox["rows"][0]["geometry"]["type"], "Point");
    assert!(bbox["rows"][0]["rev"].as_str().is_some_and(|r| r.starts_with("1-")));
    // 200 m around the first sensor: it and its neighbour (~90 m), not the one ~770 m
    // east; within 2 km, all three on the bridge.
    let near = geo(&[("lat", json!(51.5)), ("lon", json!(-0.08)), ("radius", json!(200))]);
    assert_eq!(sorted(ids(&near)), ["device-123450", "device-123451"]);
    let bridge = geo(&[("lat", json!(51.5)), ("lon", json!(-0.08)), ("radius", json!(2000))]);
    assert_eq!(sorted(ids(&bridge)), ["device-123450", "device-123451", "device-123452"]);
    let nearest = geo(&[
        ("lat", json!(51.503)),
        ("lon", json!(-0.07)),
        ("nearest", json!(true)),
        ("limit", json!(2)),
    ]);
    assert_eq!(ids(&nearest), ["device-123452", "device-123451"]);
    let next = geo(&[
        ("lat", json!(51.503)),
        ("lon", json!(-0.07)),
        ("nearest", json!(true)),
        ("limit", json!(2)),
        ("bookmark", nearest["bookmark"].clone()),
    ]);
    assert_eq!(ids(&next), ["device-123450", "device-999999"]);
    let polygon = "POLYGON((-0.1 51.4,-0.06 51.4,-0.06 51.6,-0.1 51.6,-0.1 51.4))";
    let within = geo(&[("g", json!(polygon)), ("relation", json!("contains"))]);
    assert_eq!(sorted(ids(&within)).len(), 3);
    let disjoint = geo(&[("g", json!(polygon)), ("relation", json!("disjoint"))]);
    assert_eq!(ids(&disjoint), ["device-999999"]);
    let features = geo(&[
        ("bbox", json!("2,48,3,49")),
        ("format", json!("geojson")),
        ("include_docs", json!(true)),
    ]);
    assert_eq!(features["type"], "FeatureCollection");
    assert_eq!(features["features"][0]["_id"], "device-999999");
    assert_eq!(features["features"][0]["type"], "Feature");
    // A moved sensor is found where it is now.
    let mut moved = s.get_doc("devices", "device-999999");
    moved["geometry"] = json!({"type": "Point", "coordinates": [-0.0801, 51.5001]});
    assert_eq!(s.put("/devices/device-999999", &moved).0, 201);
    let bbox = geo(&[("bbox", json!("-0.09,51.49,-0.075,51.51"))]);
    assert_eq!(sorted(ids(&bbox)), ["device-123450", "device-123451", "device-999999"]);
    let (status, info) = s.get("/devices/_design/geo/_geo_info/where");
    assert_eq!((status, info["geo_index"]["doc_count"].clone()), (200, json!(4)), "{info}");
    // A deleted sensor leaves the tree and the answers.
    let gone = s.get_doc("devices", "device-123452");
    let rev = gone["_rev"].as_str().unwrap_or_default();
    assert_eq!(s.delete(&format!("/devices/device-123452?rev={rev}")).0, 200);
    let bridge = geo(&[("lat", json!(51.5)), ("lon", json!(-0.08)), ("radius", json!(2000))]);
    assert_eq!(sorted(ids(&bridge)), ["device-123450", "device-123451", "device-999999"]);
    let (status, info) = s.get("/devices/_design/geo/_geo_info/where");
    assert_eq!((status, info["geo_index"]["doc_count"].clone()), (200, json!(3)), "{info}");
    let (status, body) =
        s.get(&q("/devices/_design/geo/_geo/where", &[("relation", json!("near"))]));
    assert_eq!((status, &body["error"]), (400, &json!("bad_request")), "{body}");
}

/// Points are decided from the index's tree alone, other geometries from the store: both
/// kinds answer the same queries, and a document changing kind moves between them.
#[test]
fn points_lines_and_polygons_answer_radius_nearest_and_relations_alike() {
    let s = Server::start();
    assert_eq!(s.put_empty("/assets").0, 201);
    let point = |lon: f64, lat: f64| json!({"type": "Point", "coordinates": [lon, lat]});
    // A cable whose ends are both ~1.1 km from (0, 51.5) but which passes ~110 m from it.
    let cable = json!({"type": "LineString", "coordinates": [[-0.016, 51.501], [0.016, 51.501]]});
    let zone = json!({"type": "Polygon",
        "coordinates": [[[0.1, 51.6], [0.2, 51.6], [0.2, 51.7], [0.1, 51.7], [0.1, 51.6]]]});
    bulk(
        &s,
        "assets",
        vec![
            json!({"_id": "sensor", "geometry": point(0.0005, 51.5)}),
            json!({"_id": "cable", "geometry": cable}),
            json!({"_id": "zone", "geometry": zone}),
            json!({"_id": "far", "geometry": point(0.3, 51.5)}),
        ],
    );
    let index = "function(doc) { if (doc.geometry) { st_index(doc.geometry); } }";
    let ddoc = json!({"st_indexes": {"where": {"index": index}}});
    assert_eq!(s.put("/assets/_design/geo", &ddoc).0, 201);
    let geo = |params: &[(&str, Value)]| {
        let (status, body) = s.get(&q("/assets/_design/geo/_geo/where", params));
        assert_eq!(status, 200, "{params:?}: {body}");
        ids(&body)
    };
    let around = |radius: u32| {
        sorted(geo(&[("lat", json!(51.5)), ("lon", json!(0.0)), ("radius", json!(radius))]))
    };
    assert_eq!(around(60), ["sensor"]);
    assert_eq!(around(200), ["cable", "sensor"]);
    assert_eq!(around(30_000), ["cable", "far", "sensor", "zone"]);
    let nearest = geo(&[("lat", json!(51.5)), ("lon", json!(0.0)), ("nearest", json!(true))]);
    assert_eq!(nearest, ["sensor", "cable", "zone", "far"]);
    let square = "POLYGON((-0.001 51.499,0.001 51.499,0.001 51.502,-0.001 51.502,-0.001 51.499))";
    let met = |relation: &str| sorted(geo(&[("g", json!(square)), ("relation", json!(relation))]));
    assert_eq!(met("intersects"), ["cable", "sensor"]);
    assert_eq!(met("contains"), ["sensor"]);
    assert_eq!(met("crosses"), ["cable"]);
    // The sensor becomes a polygon far away, the far point a point beside the origin.
    let mut sensor = s.get_doc("assets", "sensor");
    sensor["geometry"] = json!({"type": "Polygon",
        "coordinates": [[[0.5, 51.5], [0.6, 51.5], [0.6, 51.6], [0.5, 51.5]]]});
    assert_eq!(s.put("/assets/sensor", &sensor).0, 201);
    let mut far = s.get_doc("assets", "far");
    far["geometry"] = point(-0.0005, 51.5);
    assert_eq!(s.put("/assets/far", &far).0, 201);
    assert_eq!(around(60), ["far"]);
    assert_eq!(around(200), ["cable", "far"]);
    assert_eq!(met("contains"), ["far"]);
    let nearest = geo(&[("lat", json!(51.5)), ("lon", json!(0.0)), ("nearest", json!(true))]);
    assert_eq!(nearest, ["far", "cable", "zone", "sensor"]);
}

/// The inventory and library examples of CouchDB 3.4's `search_test.exs` and
/// `partition_search_test.exs`, with the answers those tests expect.
#[test]
fn couchdb_search_suite_examples() {
    let s = Server::start();
    assert_eq!(s.put_empty("/inventory").0, 201);
    let items = [
        ("apple", "kitchen", "new", 0.99),
        ("banana", "kitchen", "new", 1.49),
        ("carrot", "kitchen", "old", 0.75),
        ("date", "lobby", "unknown", 1.25),
    ];
    let docs = items
        .iter()
        .map(|(item, place, state, price)| json!({"item": item, "place": place, "state": state, "price": price}))
        .collect();
    bulk(&s, "inventory", docs);
    let index = "function (doc) { index(\"item\", doc.item, {facet: true}); \
                 index(\"place\", doc.place, {facet: true}); \
                 index(\"state\", doc.state, {facet: true}); \
                 index(\"price\", doc.price, {facet: true}); }";
    let ddoc = json!({"indexes": {"fruits": {"analyzer": {"name": "standard"}, "index": index}}});
    assert_eq!(s.put("/inventory/_design/inventory", &ddoc).0, 201);
    let url = "/inventory/_design/inventory/_search/fruits";
    let items = |body: &Value| -> Vec<String> {
        let mut v: Vec<String> = body["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["doc"]["item"].as_str().map(String::from))
            .collect();
        v.sort();
        v
    };
    let get = |params: &[(&str, Value)]| {
        let (status, body) = s.get(&q(url, params));
        assert_eq!(status, 200, "{body}");
        body
    };
    let all = get(&[("q", json!("*:*")), ("include_docs", json!(true))]);
    assert_eq!(items(&all), ["apple", "banana", "carrot", "date"]);
    let many = get(&[
        ("q", json!("*:*")),
        ("drilldown", json!(["state", "new", "unknown"])),
        ("include_docs", json!(true)),
    ]);
    assert_eq!(items(&many), ["apple", "banana", "date"]);
    let both = get(&[
        ("q", json!("*:*")),
        ("drilldown", json!([["state", "old"], ["item", "apple"]])),
        ("include_docs", json!(true)),
    ]);
    assert_eq!(items(&both), Vec::<String>::new());
    // A repeated `drilldown` parameter: every one applies.
    let (_, repeated) = s.get(&format!(
        "{url}?q=*:*&drilldown={}&drilldown={}&include_docs=true",
        enc(r#"["state","old"]"#),
        enc(r#"["item","apple"]"#)
    ));
    assert_eq!(items(&repeated), Vec::<String>::new());
    // A JSON body that repeats `drilldown`: the last one counts.
    let (status, last) = s.raw(
        Method::POST,
        url,
        r#"{"include_docs": true, "q": "*:*", "drilldown": ["state", "old"], "drilldown": ["item", "apple"]}"#,
    );
    assert_eq!((status, items(&last)), (200, vec!["apple".to_string()]));
    let (_, three) = s.post(url, &json!({"q": "*:*", "drilldown": [["place", "kitchen"], ["state", "new"], ["item", "apple"]], "include_docs": true}));
    assert_eq!(items(&three), ["apple"]);
    let counts = get(&[("q", json!("*:*")), ("limit", json!(0)), ("counts", json!(["place"]))]);
    assert_eq!(counts["counts"], json!({"place": {"kitchen": 3, "lobby": 1}}));
    let none =
        get(&[("q", json!("item:tomato")), ("limit", json!(0)), ("counts", json!(["place"]))]);
    assert_eq!(none["counts"], json!({"place": {}}));
    let ranges = json!({"price": {"cheap": "[0 TO 0.99]", "expensive": "[1.00 TO Infinity]"}});
    let ranged = get(&[("q", json!("*:*")), ("limit", json!(0)), ("ranges", ranges)]);
    assert_eq!(ranged["ranges"], json!({"price": {"cheap": 2, "expensive": 2}}));
    let empty = get(&[("q", json!("*:*")), ("limit", json!(0)), ("ranges", json!({"price": {}}))]);
    assert_eq!(empty["ranges"], json!({"price": {}}));
    let invalid = json!({"indexes": [{"name": "foo", "ddoc": "bar", "type": "text"}]});
    assert_eq!(s.put("/inventory/_design/search", &invalid).0, 201);
    assert_eq!(s.post("/inventory/_search_cleanup", &json!({})).0, 202);

    assert_eq!(s.put_empty("/library?partitioned=true").0, 201);
    let docs = (1..=10)
        .map(|i| json!({"_id": format!("{}:{i}", if i % 2 == 0 { "foo" } else { "bar" }), "value": i, "some": "field"}))
        .collect();
    bulk(&s, "library", docs);
    let index = "function(doc) {\n  if (doc.some) {\n    index('some', doc.some);\n }\n}";
    let ddoc = json!({"indexes": {"books": {"analyzer": {"name": "standard"}, "index": index}}});
    assert_eq!(s.put("/library/_design/library", &ddoc).0, 201);
    let books = "/library/_partition/foo/_design/library/_search/books";
    let (_, foo) = s.get(&q(books, &[("q", json!("some:field"))]));
    assert_eq!(ids(&foo), ["foo:10", "foo:2", "foo:4", "foo:6", "foo:8"]);
    let (_, page) = s.get(&q(books, &[("q", json!("some:field")), ("limit", json!(3))]));
    assert_eq!(ids(&page), ["foo:10", "foo:2", "foo:4"]);
    let bookmark = page["bookmark"].clone();
    let (_, rest) = s.get(&q(
        books,
        &[("q", json!("some:field")), ("limit", json!(2000)), ("bookmark", bookmark.clone())],
    ));
    assert_eq!(ids(&rest), ["foo:6", "foo:8"]);
    let (status, _) = s.get(&q(
        books,
        &[("q", json!("some:field")), ("limit", json!(2001)), ("bookmark", bookmark)],
    ));
    assert_eq!(status, 400);
    let (status, _) = s.post(books, &json!({"q": "some:field", "limit": 1, "partition": "foo"}));
    assert_eq!(status, 200);
    // `partition_search_test.exs`: another partition in the body, and options that need
    // every partition, are refused (`dreyfus_httpd`'s reasons).
    let conflicting = json!({"q": "some:field", "partition": "bar"});
    assert_error(
        s.post(books, &conflicting),
        400,
        "bad_request",
        "Multiple conflicting values for `partition` provided",
    );
    for (key, value) in [
        ("counts", json!("[\"type\"]")),
        ("group_field", json!("some")),
        ("ranges", json!({"price": {"cheap": "[0 TO 100]"}}).to_string().into()),
        ("drilldown", json!("[\"key\",\"a\"]")),
    ] {
        let params = [("q", json!("some:field")), (key, value.clone())];
        let (status, body) = s.get(&q(books, &params));
        assert_eq!(status, 400, "{key}: {body}");
        assert!(body["reason"].as_str().unwrap_or_default().ends_with("are incompatible"));
        let (status, _) = s.post(books, &json!({"q": "some:field", key: value}));
        assert_eq!(status, 400, "{key}");
    }
    let global = json!({"options": {"partitioned": false}, "indexes": {"books": {"index": index}}});
    assert_eq!(s.put("/library/_design/global", &global).0, 201);
    assert_error(
        s.get(&q(
            "/library/_partition/foo/_design/global/_search/books",
            &[("q", json!("some:field"))],
        )),
        400,
        "bad_request",
        "`partition` not supported on this index",
    );
    let (status, _) = s.get(&q(
        "/library/_design/global/_search/books",
        &[("q", json!("some:field")), ("limit", json!(201))],
    ));
    assert_eq!(status, 400);
}
