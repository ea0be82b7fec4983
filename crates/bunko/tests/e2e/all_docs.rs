//! `_all_docs` (GET and POST) parameter matrix and `_design_docs`.

use serde_json::{Value, json};

use crate::harness::{Server, assert_error, enc, ids};

/// Books and publishers from the Cosmos DB modeling guide (`pub-id` references), written in an
/// order different from their id order. Returns the server and id → rev.
fn library() -> (Server, std::collections::BTreeMap<String, String>) {
    let s = Server::start();
    s.create_db("db");
    let mut revs = std::collections::BTreeMap::new();
    for (id, body) in [
        ("3", json!({"name": "Taking over the world one JSON doc at a time"})),
        ("1", json!({"name": "Azure Cosmos DB 101", "pub-id": "mspress"})),
        ("mspress", json!({"name": "Microsoft Press"})),
        ("2", json!({"name": "Azure Cosmos DB for RDBMS Users", "pub-id": "mspress"})),
        ("100", json!({"name": "Learn about Azure Cosmos DB", "pub-id": "mspress"})),
        ("1000", json!({"name": "Deep Dive in to Azure Cosmos DB", "pub-id": "mspress"})),
    ] {
        revs.insert(id.to_string(), s.put_doc("db", id, &body));
    }
    (s, revs)
}

const ORDER: [&str; 6] = ["1", "100", "1000", "2", "3", "mspress"];

fn all(s: &Server, query: &str) -> Value {
    let (status, body) = s.get(&format!("/db/_all_docs{query}"));
    assert_eq!(status, 200, "_all_docs{query} -> {body}");
    body
}

fn key(k: &str) -> String {
    enc(&json!(k).to_string())
}

#[test]
fn all_docs_returns_every_doc_in_id_order_with_total_rows_and_offset() {
    let (s, revs) = library();
    let body = all(&s, "");
    let expected: Vec<Value> =
        ORDER.iter().map(|id| json!({"id": id, "key": id, "value": {"rev": revs[*id]}})).collect();
    assert_eq!(body, json!({"total_rows": 6, "offset": 0, "rows": expected}));
}

#[test]
fn all_docs_collates_ids_by_raw_code_point_order() {
    // all_docs_test.exs "Confirm that queries may assume raw collation".
    let s = Server::start();
    s.create_db("db");
    for id in ["a", "Z", "_design/x", "b", "1", "~", "é", "A"] {
        s.put_doc("db", &enc(id), &json!({}));
    }
    let body = all(&s, "");
    assert_eq!(ids(&body["rows"]), ["1", "A", "Z", "_design/x", "a", "b", "~", "é"]);
    let body = all(&s, &format!("?startkey={}&endkey={}", key("Z"), key("Z")));
    assert_eq!(ids(&body["rows"]), ["Z"]);
    let body = all(
        &s,
        &format!("?startkey={}&endkey={}", key("org.couchdb.user:"), key("org.couchdb.user;")),
    );
    assert_eq!(body["rows"], json!([]));
}

#[test]
fn all_docs_startkey_endkey_and_underscore_aliases_select_a_range() {
    let (s, _) = library();
    let body = all(&s, &format!("?startkey={}&endkey={}", key("100"), key("2")));
    assert_eq!(ids(&body["rows"]), ["100", "1000", "2"]);
    assert_eq!(body["offset"], 1);
    assert_eq!(body["total_rows"], 6);
    let body = all(&s, &format!("?start_key={}&end_key={}", key("100"), key("2")));
    assert_eq!(ids(&body["rows"]), ["100", "1000", "2"]);
    // Bounds need not exist.
    let body = all(&s, &format!("?startkey={}&endkey={}", key("10"), key("1999")));
    assert_eq!(ids(&body["rows"]), ["100", "1000"]);
    // offset counts the rows before startkey (all_docs_test.exs).
    let body = all(&s, &format!("?startkey={}", key("2")));
    assert_eq!(body["offset"], 3);
    assert_eq!(ids(&body["rows"]), ["2", "3", "mspress"]);
}

#[test]
fn all_docs_inclusive_end_false_excludes_endkey() {
    let (s, _) = library();
    let body = all(&s, &format!("?startkey={}&endkey={}&inclusive_end=false", key("1"), key("2")));
    assert_eq!(ids(&body["rows"]), ["1", "100", "1000"]);
    let body = all(&s, &format!("?endkey={}&inclusive_end=true", key("2")));
    assert_eq!(ids(&body["rows"]), ["1", "100", "1000", "2"]);
}

#[test]
fn all_docs_key_selects_exactly_one_row() {
    let (s, revs) = library();
    let body = all(&s, &format!("?key={}", key("mspress")));
    assert_eq!(
        body["rows"],
        json!([{"id": "mspress", "key": "mspress",
                                      "value": {"rev": revs["mspress"]}}])
    );
    let body = all(&s, &format!("?key={}", key("nope")));
    assert_eq!(body["rows"], json!([]));
}

#[test]
fn all_docs_startkey_docid_acts_as_startkey_without_startkey() {
    // couch_mrview_util:ad_skey_opts / ad_ekey_opts.
    let (s, _) = library();
    let body = all(&s, "?startkey_docid=2&endkey_docid=3");
    assert_eq!(ids(&body["rows"]), ["2", "3"]);
}

#[test]
fn all_docs_limit_and_skip_page_through_rows() {
    let (s, _) = library();
    assert_eq!(ids(&all(&s, "?limit=2")["rows"]), ["1", "100"]);
    let body = all(&s, "?limit=2&skip=2");
    assert_eq!(ids(&body["rows"]), ["1000", "2"]);
    assert_eq!(body["offset"], 2, "offset includes skip");
    assert_eq!(all(&s, "?limit=0")["rows"], json!([]));
    let body = all(&s, "?skip=100");
    assert_eq!(body["rows"], json!([]));
    assert_eq!(body["offset"], 6, "offset is capped at total_rows");
}

#[test]
fn all_docs_descending_reverses_order_and_swaps_bounds() {
    let (s, _) = library();
    let body = all(&s, "?descending=true");
    let mut rev = ORDER.to_vec();
    rev.reverse();
    assert_eq!(ids(&body["rows"]), rev);
    assert_eq!(body["offset"], 0);
    let body = all(&s, &format!("?descending=true&startkey={}&endkey={}", key("2"), key("100")));
    assert_eq!(ids(&body["rows"]), ["2", "1000", "100"]);
    assert_eq!(body["offset"], 2, "rows after startkey in descending order");
    let body = all(&s, "?descending=true&limit=2&skip=1");
    assert_eq!(ids(&body["rows"]), ["3", "2"]);
    // A range in the wrong direction is simply empty for _all_docs (CouchDB's
    // "No rows can match your key range" check applies to views only).
    let body = all(&s, &format!("?startkey={}&endkey={}", key("3"), key("1")));
    assert_eq!(body["rows"], json!([]));
}

#[test]
fn all_docs_include_docs_embeds_bodies() {
    let (s, revs) = library();
    let body = all(&s, &format!("?include_docs=true&key={}", key("1")));
    assert_eq!(
        body["rows"],
        json!([{"id": "1", "key": "1", "value": {"rev": revs["1"]},
                "doc": {"_id": "1", "_rev": revs["1"], "name": "Azure Cosmos DB 101",
                        "pub-id": "mspress"}}])
    );
}

#[test]
fn all_docs_post_keys_returns_rows_in_key_order_with_missing_and_deleted() {
    let (s, revs) = library();
    let (_, del) = s.delete(&format!("/db/3?rev={}", revs["3"]));
    let del_rev = del["rev"].as_str().unwrap().to_string();
    let (status, body) = s.post("/db/_all_docs", &json!({"keys": ["mspress", "nope", "3", "1"]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body,
        json!({"total_rows": 5, "offset": null, "rows": [
            {"id": "mspress", "key": "mspress", "value": {"rev": revs["mspress"]}},
            {"key": "nope", "error": "not_found"},
            {"id": "3", "key": "3", "value": {"rev": del_rev, "deleted": true}},
            {"id": "1", "key": "1", "value": {"rev": revs["1"]}}
        ]})
    );
}

#[test]
fn all_docs_keys_with_include_docs_gives_null_doc_for_deleted() {
    let (s, revs) = library();
    let (_, del) = s.delete(&format!("/db/3?rev={}", revs["3"]));
    let (status, body) =
        s.post("/db/_all_docs?include_docs=true", &json!({"keys": ["3", "nope", "2"]}));
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["rows"],
        json!([
            {"id": "3", "key": "3", "value": {"rev": del["rev"], "deleted": true}, "doc": null},
            {"key": "nope", "error": "not_found"},
            {"id": "2", "key": "2", "value": {"rev": revs["2"]},
             "doc": {"_id": "2", "_rev": revs["2"], "name": "Azure Cosmos DB for RDBMS Users",
                     "pub-id": "mspress"}}
        ])
    );
}

#[test]
fn all_docs_get_keys_parameter_matches_post() {
    let (s, _) = library();
    let keys = enc(&json!(["2", "1", "nope"]).to_string());
    let get = all(&s, &format!("?keys={keys}"));
    let (_, post) = s.post("/db/_all_docs", &json!({"keys": ["2", "1", "nope"]}));
    assert_eq!(get, post);
    assert_eq!(get["rows"].as_array().map(Vec::len), Some(3));
}

#[test]
fn all_docs_keys_respect_limit_skip_and_descending() {
    let (s, _) = library();
    let (_, body) = s.post("/db/_all_docs", &json!({"keys": ["1", "2", "3"], "limit": 2}));
    assert_eq!(ids(&body["rows"]), ["1", "2"]);
    let (_, body) = s.post("/db/_all_docs?skip=1", &json!({"keys": ["1", "2", "3"]}));
    assert_eq!(ids(&body["rows"]), ["2", "3"]);
    let (_, body) = s.post("/db/_all_docs?descending=true", &json!({"keys": ["1", "2", "3"]}));
    assert_eq!(ids(&body["rows"]), ["3", "2", "1"]);
    // The query string wins over the body (all_docs_test.exs).
    let (_, body) = s.post("/db/_all_docs?limit=1", &json!({"keys": ["1", "2"], "limit": 2}));
    assert_eq!(ids(&body["rows"]), ["1"]);
}

#[test]
fn all_docs_post_with_empty_body_object_lists_everything() {
    let (s, _) = library();
    let (status, body) = s.post("/db/_all_docs", &json!({}));
    assert_eq!(status, 200);
    assert_eq!(ids(&body["rows"]), ORDER);
}

#[test]
fn all_docs_post_body_must_be_object_with_array_keys() {
    // basics_test.exs "_all_docs POST error when multi-get is not a {'key': [...]} structure".
    let (s, _) = library();
    assert_error(
        s.post("/db/_all_docs", &json!([])),
        400,
        "bad_request",
        "Request body must be a JSON object",
    );
    assert_error(
        s.post("/db/_all_docs", &json!({"keys": 1})),
        400,
        "bad_request",
        "`keys` body member must be an array.",
    );
}

#[test]
fn all_docs_conflicts_true_with_include_docs_shows_conflicts() {
    let (s, revs) = library();
    let branch = "2-ff01552213fafa022e6167113ed01087";
    let (status, _) = s.put(
        "/db/3?new_edits=false",
        &json!({"_rev": "2-aa01552213fafa022e6167113ed01087", "value": "X"}),
    );
    assert_eq!(status, 201);
    let (status, _) = s.put("/db/3?new_edits=false", &json!({"_rev": branch, "value": "Z"}));
    assert_eq!(status, 201);
    let body = all(&s, &format!("?include_docs=true&conflicts=true&key={}", key("3")));
    let row = &body["rows"][0];
    assert_eq!(row["value"]["rev"], branch);
    assert_eq!(row["doc"]["_rev"], branch);
    assert_eq!(row["doc"]["_conflicts"], json!(["2-aa01552213fafa022e6167113ed01087", revs["3"]]));
}

#[test]
fn all_docs_update_seq_true_adds_the_database_seq() {
    let (s, _) = library();
    let body = all(&s, "?update_seq=true&limit=1");
    let info = s.db_info("db");
    assert_eq!(body["update_seq"], info["update_seq"]);
    assert!(all(&s, "?limit=1").get("update_seq").is_none());
}

#[test]
fn all_docs_excludes_deleted_documents() {
    let (s, revs) = library();
    s.delete(&format!("/db/mspress?rev={}", revs["mspress"]));
    let body = all(&s, "");
    assert_eq!(ids(&body["rows"]), ["1", "100", "1000", "2", "3"]);
    assert_eq!(body["total_rows"], 5);
}

#[test]
fn all_docs_rejects_bad_parameter_values() {
    // couch_mrview_http:parse_int / parse_boolean.
    let (s, _) = library();
    assert_error(
        s.get("/db/_all_docs?limit=abc"),
        400,
        "query_parse_error",
        "Invalid value for integer: \"abc\"",
    );
    assert_error(
        s.get("/db/_all_docs?limit=-1"),
        400,
        "query_parse_error",
        "Invalid value for positive integer: \"-1\"",
    );
    assert_error(
        s.get("/db/_all_docs?descending=yes"),
        400,
        "query_parse_error",
        "Invalid boolean parameter: \"yes\"",
    );
    let (status, body) = s.get("/db/_all_docs?startkey=notjson");
    assert_eq!(status, 400, "{body}");
}

#[test]
fn design_docs_lists_only_design_documents() {
    let (s, _) = library();
    let r1 = s.put_doc("db", "_design/books", &json!({"views": {}}));
    let r2 = s.put_doc("db", "_design/authors", &json!({"views": {}}));
    let (status, body) = s.get("/db/_design_docs");
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["rows"],
        json!([
            {"id": "_design/authors", "key": "_design/authors", "value": {"rev": r2}},
            {"id": "_design/books", "key": "_design/books", "value": {"rev": r1}}
        ])
    );
    assert_eq!(body["total_rows"], 2);
    // _all_docs still lists them among the others.
    let ids_all = ids(&all(&s, "")["rows"]);
    assert!(ids_all.contains(&"_design/books".to_string()), "{ids_all:?}");
    assert_eq!(all(&s, "")["total_rows"], 8);
}

/// A deterministic pseudo-random sequence (no timing, same every run).
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % n.max(1)
    }
}

/// The documents the model holds: id → live, and their revisions.
type Model = std::collections::BTreeMap<String, (bool, String)>;

/// Writes `docs` (`(id, deleted)`) in one `_bulk_docs` and records them in `model`.
fn bulk_write(s: &Server, db: &str, model: &mut Model, docs: &[(String, bool)]) {
    let body: Vec<Value> = docs
        .iter()
        .map(|(id, deleted)| {
            let mut doc = json!({"_id": id, "n": id.len()});
            if let Some((_, rev)) = model.get(id) {
                doc["_rev"] = json!(rev);
            }
            if *deleted {
                doc["_deleted"] = json!(true);
            }
            doc
        })
        .collect();
    let (status, results) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": body}));
    assert_eq!(status, 201, "{results}");
    for ((id, deleted), result) in docs.iter().zip(results.as_array().into_iter().flatten()) {
        assert_eq!(result["ok"], true, "{result}");
        model.insert(id.clone(), (!deleted, result["rev"].as_str().unwrap_or_default().into()));
    }
}

/// One page asked of `_all_docs`.
#[derive(Debug, Clone, Copy)]
struct Page<'a> {
    start: &'a str,
    end: &'a str,
    inclusive_end: bool,
    descending: bool,
    skip: usize,
    limit: usize,
}

/// Checks one `_all_docs` query (`path` is the database's or a partition's) against the
/// model: `total_rows`, `offset` and the rows, as CouchDB computes them.
fn check_page(s: &Server, path: &str, live: &[&String], page: Page<'_>) {
    let Page { start, end, inclusive_end, descending, skip, limit } = page;
    let query = format!(
        "{path}?startkey={}&endkey={}&inclusive_end={inclusive_end}&descending={descending}\
         &skip={skip}&limit={limit}",
        key(start),
        key(end)
    );
    let (status, body) = s.get(&query);
    assert_eq!(status, 200, "{query} -> {body}");
    let (low, high) = if descending { (end, start) } else { (start, end) };
    let past_end = |id: &str| !inclusive_end && id == end;
    let inside: Vec<&String> = live
        .iter()
        .copied()
        .filter(|id| id.as_str() >= low && id.as_str() <= high && !past_end(id))
        .collect();
    let before = if descending {
        live.iter().filter(|id| id.as_str() > start).count()
    } else {
        live.iter().filter(|id| id.as_str() < start).count()
    };
    let mut rows = inside;
    if descending {
        rows.reverse();
    }
    let rows: Vec<String> = rows.into_iter().skip(skip).take(limit).cloned().collect();
    assert_eq!(body["total_rows"], live.len(), "{query}");
    assert_eq!(body["offset"], (before + skip).min(live.len()), "{query}");
    assert_eq!(ids(&body["rows"]), rows, "{query}");
}

/// Random pages of the database and of its partitions, checked against the model.
fn check_pages(s: &Server, db: &str, model: &Model, rng: &mut Lcg, partitions: &[&str]) {
    let live: Vec<&String> = model.iter().filter(|(_, (l, _))| *l).map(|(id, _)| id).collect();
    let every: Vec<&String> = model.keys().collect();
    let bound = |rng: &mut Lcg| match rng.below(4) {
        0 => String::new(),
        1 => "\u{fff0}".to_string(),
        _ => every[rng.below(every.len())].clone(),
    };
    let skips = [0, 0, 1, 7, 33, 64, 600, 1500];
    for _ in 0..48 {
        let (a, b) = (bound(rng), bound(rng));
        let descending = rng.below(2) == 1;
        let (start, end) = if (a <= b) != descending { (a, b) } else { (b, a) };
        let (inclusive_end, skip) = (rng.below(3) > 0, skips[rng.below(skips.len())]);
        let limit = [1, 5, 25][rng.below(3)];
        let page = Page { start: &start, end: &end, inclusive_end, descending, skip, limit };
        check_page(s, &format!("/{db}/_all_docs"), &live, page);
    }
    for p in partitions {
        let prefix = format!("{p}:");
        let part: Vec<&String> =
            live.iter().copied().filter(|id| id.starts_with(&prefix)).collect();
        let every_part: Vec<&String> =
            every.iter().copied().filter(|id| id.starts_with(&prefix)).collect();
        let (first, last) = (prefix.clone(), format!("{prefix}\u{fff0}"));
        for _ in 0..10 {
            let pick = |rng: &mut Lcg, edge: &String| match rng.below(3) {
                0 => edge.clone(),
                _ => every_part[rng.below(every_part.len())].clone(),
            };
            let (a, b) = (pick(rng, &first), pick(rng, &last));
            let descending = rng.below(2) == 1;
            let (start, end) = if (a <= b) != descending { (a, b) } else { (b, a) };
            let inclusive_end = rng.below(3) > 0;
            let skip = [0, 0, 3, 40, 200][rng.below(5)];
            let path = format!("/{db}/_partition/{p}/_all_docs");
            let page =
                Page { start: &start, end: &end, inclusive_end, descending, skip, limit: 10 };
            check_page(s, &path, &part, page);
        }
    }
}

/// Issue 20, point 7: `offset`, `skip` and `total_rows` come from the order statistics of
/// document ids once a page starts deep in the database or skips far; whether counted
/// directly or through them, they equal a full count on random ranges, as documents are
/// written, deleted, written again and added.
fn offsets_follow_writes_and_deletes(partitioned: bool) {
    let s = Server::start();
    let db = "offsets";
    let path = if partitioned { "/offsets?partitioned=true" } else { "/offsets" };
    assert_eq!(s.put_empty(path).0, 201);
    let partitions = ["bridge-1", "bridge-10", "bridge-2", "bridge-a-b"];
    let mut rng = Lcg(if partitioned { 11 } else { 12 });
    let mut model = Model::new();
    let new_id = |rng: &mut Lcg, n: usize| {
        let p = partitions[rng.below(partitions.len())];
        if partitioned { format!("{p}:device-{n:05}") } else { format!("{p}-device-{n:05}") }
    };
    let docs: Vec<(String, bool)> = (0..2600).map(|n| (new_id(&mut rng, n), false)).collect();
    bulk_write(&s, db, &mut model, &docs);
    bulk_write(&s, db, &mut model, &[("_design/a".to_string(), false)]);
    let shown: &[&str] = if partitioned { &partitions } else { &[] };
    check_pages(&s, db, &model, &mut rng, shown);
    for round in 0..3 {
        let ids: Vec<String> = model.keys().filter(|id| !id.starts_with('_')).cloned().collect();
        let mut docs: Vec<(String, bool)> = Vec::new();
        for _ in 0..400 {
            let id = ids[rng.below(ids.len())].clone();
            if !docs.iter().any(|(d, _)| *d == id) {
                let live = model[&id].0;
                // Delete live documents and write deleted ones again.
                docs.push((id, live));
            }
        }
        docs.extend((0..300).map(|n| (new_id(&mut rng, 10_000 * (round + 1) + n), false)));
        bulk_write(&s, db, &mut model, &docs);
        check_pages(&s, db, &model, &mut rng, shown);
    }
}

#[test]
fn all_docs_offset_and_skip_equal_a_full_count_across_writes_and_deletes() {
    offsets_follow_writes_and_deletes(false);
}

#[test]
fn partitioned_all_docs_offset_and_skip_equal_a_full_count_across_writes_and_deletes() {
    offsets_follow_writes_and_deletes(true);
}
