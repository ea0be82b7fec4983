//! Partitioned databases: the IoT walkthrough of the Cloudant guide (seed 003) and CouchDB
//! 3.4's `partition_crud_test.exs`, `partition_all_docs_test.exs`, `partition_size_test.exs`,
//! `partition_size_limit_test.exs` and `partition_ddoc_test.exs`.

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{Server, assert_error, assert_error_kind, enc, ids, send};

/// One IoT reading as the guide writes it, in the partition of its infrastructure.
fn reading(infra: &str, device: &str, ts: &str, celsius: i64) -> Value {
    json!({
        "_id": format!("{infra}:{device}-{ts}"),
        "deviceID": device,
        "infrastructureID": infra,
        "ts": ts,
        "reading": {"temperature": {"value": celsius, "unit": "c"}}
    })
}

/// `readings`, partitioned, with 3 devices on each of 3 bridges and 4 readings a device.
fn readings() -> Server {
    let s = Server::start();
    assert_eq!(s.put_empty("/readings?partitioned=true").0, 201);
    let mut docs = Vec::new();
    for (b, infra) in ["bridge-1234", "bridge-5555", "bridge-9876"].iter().enumerate() {
        for d in 0..3 {
            let device = format!("device-{}", 123_450 + b * 3 + d);
            for t in 0..4 {
                let ts = format!("20181211T11:1{t}:24.123456Z");
                docs.push(reading(infra, &device, &ts, (b * 10 + d + t) as i64));
            }
        }
    }
    let (status, results) = s.post("/readings/_bulk_docs", &json!({"docs": docs}));
    assert_eq!(status, 201, "{results}");
    assert!(results.as_array().is_some_and(|r| r.iter().all(|r| r["ok"] == true)), "{results}");
    s
}

#[test]
fn the_iot_walkthrough_reads_one_partition_with_all_docs() {
    let s = readings();
    let info = s.db_info("readings");
    assert_eq!(info["props"], json!({"partitioned": true}));
    assert_eq!(info["doc_count"], 36);

    let (status, body) = s.get("/readings/_partition/bridge-1234/_all_docs?include_docs=true");
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["total_rows"], 12);
    assert_eq!(body["offset"], 0);
    let rows = body["rows"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 12);
    for row in &rows {
        assert!(row["id"].as_str().is_some_and(|id| id.starts_with("bridge-1234:")), "{row}");
        assert_eq!(row["doc"]["infrastructureID"], "bridge-1234");
        assert_eq!(row["doc"]["_id"], row["id"]);
    }
    assert_eq!(rows[0]["id"], "bridge-1234:device-123450-20181211T11:10:24.123456Z");
    assert_eq!(rows[0]["doc"]["reading"], json!({"temperature": {"value": 0, "unit": "c"}}));

    // The same partition through a global range gives the same ids.
    let global = s.get(&format!(
        "/readings/_all_docs?startkey={}&endkey={}",
        enc("\"bridge-1234:\""),
        enc("\"bridge-1234:\u{fff0}\"")
    ));
    assert_eq!(ids(&global.1["rows"]), ids(&body["rows"]));
    assert_eq!(global.1["total_rows"], 36);
}

#[test]
fn partition_info_counts_documents_and_sizes_of_one_partition() {
    let s = readings();
    let (status, info) = s.get("/readings/_partition/bridge-9876");
    assert_eq!(status, 200, "{info}");
    let keys: Vec<&String> = info.as_object().map(|o| o.keys().collect()).unwrap_or_default();
    assert_eq!(keys, ["db_name", "sizes", "partition", "doc_count", "doc_del_count"]);
    assert_eq!(info["db_name"], "readings");
    assert_eq!(info["partition"], "bridge-9876");
    assert_eq!((info["doc_count"].as_u64(), info["doc_del_count"].as_u64()), (Some(12), Some(0)));
    let external = info["sizes"]["external"].as_u64().unwrap_or(0);
    assert!(external > 12 * 100 && info["sizes"]["active"].as_u64() >= Some(external), "{info}");

    // Sizes of all partitions add up to the database's (partition_size_test "get all").
    let db = s.db_info("readings");
    let sum: u64 = ["bridge-1234", "bridge-5555", "bridge-9876"]
        .iter()
        .map(|p| s.get(&format!("/readings/_partition/{p}")).1["sizes"]["external"].as_u64())
        .map(|v| v.unwrap_or(0))
        .sum();
    assert_eq!(db["sizes"]["external"].as_u64(), Some(sum));

    let (status, empty) = s.get("/readings/_partition/non_existent_partition");
    assert_eq!(status, 200);
    assert_eq!(
        empty,
        json!({"db_name": "readings", "sizes": {"active": 0, "external": 0},
               "partition": "non_existent_partition", "doc_count": 0, "doc_del_count": 0})
    );
}

#[test]
fn partition_sizes_follow_inserts_updates_and_deletes() {
    let s = Server::start();
    s.put_empty("/db?partitioned=true");
    let size = |s: &Server| {
        let info = s.get("/db/_partition/foo").1;
        (
            info["doc_count"].as_u64(),
            info["doc_del_count"].as_u64(),
            info["sizes"]["external"].as_u64(),
        )
    };
    let other_before = s.get("/db/_partition/bar").1;
    let rev1 = s.put_doc("db", "foo:bar", &json!({"val": ""}));
    let (c1, _, e1) = size(&s);
    assert_eq!(c1, Some(1));
    let rev2 =
        s.put_doc("db", "foo:bar", &json!({"_rev": rev1, "val": "a much longer value here"}));
    let (_, _, e2) = size(&s);
    let rev3 = s.put_doc("db", "foo:bar", &json!({"_rev": rev2, "val": "shorter"}));
    let (c3, d3, e3) = size(&s);
    assert_eq!((c3, d3), (Some(1), Some(0)));
    assert!(e2 > e3 && e3 > e1, "{e1:?} {e2:?} {e3:?}");
    s.put_doc("db", "foo:baz", &json!({"val": 24}));
    assert_eq!(size(&s).0, Some(2));
    let (status, _) = s.delete(&format!("/db/foo:bar?rev={rev3}"));
    assert_eq!(status, 200);
    let (c5, d5, e5) = size(&s);
    assert_eq!((c5, d5), (Some(1), Some(1)));
    assert!(e5 < e3.map(|e| e + 100), "{e5:?}");
    // Design documents and other partitions' activity leave the partition alone.
    let before = s.get("/db/_partition/foo").1;
    s.put_doc("db", "_design/x", &json!({"value": "some stuff here"}));
    s.put_doc("db", "baz:1", &json!({"v": 1}));
    assert_eq!(s.get("/db/_partition/foo").1, before);
    assert_eq!(s.get("/db/_partition/bar").1, other_before);
}

#[test]
fn partition_all_docs_takes_every_all_docs_parameter() {
    // partition_all_docs_test.exs, with its 100 documents over `foo` and `bar`.
    let s = Server::start();
    s.put_empty("/db?partitioned=true");
    let docs: Vec<Value> = (1..=100)
        .map(|i| {
            let p = if i % 2 == 0 { "foo" } else { "bar" };
            json!({"_id": format!("{p}:{i}"), "value": i, "some": "field"})
        })
        .collect();
    assert_eq!(s.post("/db/_bulk_docs", &json!({"docs": docs})).0, 201);
    let get = |q: &str| {
        let (status, body) = s.get(&format!("/db/_partition/foo/_all_docs{q}"));
        assert_eq!(status, 200, "{q}: {body}");
        body
    };
    let all = get("");
    assert_eq!(all["rows"].as_array().map(Vec::len), Some(50));
    assert_eq!(all["total_rows"], 50);
    assert!(ids(&all["rows"]).iter().all(|id| id.starts_with("foo:")));
    let range = get(&format!("?start_key={}&end_key={}", enc("\"foo:12\""), enc("\"foo:2\"")));
    assert_eq!(ids(&range["rows"]), ["foo:12", "foo:14", "foo:16", "foo:18", "foo:2"]);
    assert_eq!(ids(&get("?limit=5")["rows"]).len(), 5);
    assert_eq!(
        ids(&get("?descending=true&limit=5")["rows"]),
        ["foo:98", "foo:96", "foo:94", "foo:92", "foo:90"]
    );
    assert_eq!(
        ids(&get("?descending=false&limit=5")["rows"]),
        ["foo:10", "foo:100", "foo:12", "foo:14", "foo:16"]
    );
    let skipped = get("?skip=5&limit=5");
    assert_eq!(ids(&skipped["rows"]), ["foo:18", "foo:2", "foo:20", "foo:22", "foo:24"]);
    assert_eq!(skipped["offset"], 5);
    assert_eq!(ids(&get(&format!("?key={}", enc("\"foo:22\"")))["rows"]), ["foo:22"]);
    // A start key outside the partition is bounded to it.
    assert_eq!(ids(&get(&format!("?startkey={}&limit=1", enc("\"a\"")))["rows"]), ["foo:10"]);
    assert_eq!(ids(&get(&format!("?startkey={}", enc("\"zzz\"")))["rows"]).len(), 0);

    let (status, body) =
        s.post("/db/_partition/foo/_all_docs", &json!({"keys": ["foo:2", "foo:4", "foo:6"]}));
    assert_eq!(status, 200);
    assert_eq!(ids(&body["rows"]), ["foo:2", "foo:4", "foo:6"]);
    let (_, body) = s.post("/db/_partition/foo/_all_docs", &json!({"keys": ["foo:2", "bar:3"]}));
    assert_eq!(body["rows"][1], json!({"key": "bar:3", "error": "not_found"}));
    let (status, body) =
        s.post("/db/_partition/foo/_all_docs?include_docs=true", &json!({"limit": 1}));
    assert_eq!(status, 200);
    assert_eq!(body["rows"][0]["doc"]["value"], 10);
    // The partition in the query string must agree with the path.
    assert_eq!(s.get("/db/_partition/foo/_all_docs?partition=foo&limit=1").0, 200);
    assert_error(
        s.get("/db/_partition/foo/_all_docs?partition=bar"),
        400,
        "bad_request",
        "Conflicting value for `partition` in query string",
    );
    assert_error(
        s.get("/db/_partition/foo/_all_docs?limit=268435457"),
        400,
        "query_parse_error",
        "Limit is too large, must not exceed 268435456",
    );
}

#[test]
fn partition_routes_answer_couchdbs_errors() {
    let s = readings();
    s.create_db("plain");
    let underscore = "Partition must not start with an underscore";
    assert_error(
        s.get("/readings/_partition/_bar/_all_docs"),
        400,
        "illegal_partition",
        underscore,
    );
    assert_error(
        s.get("/readings/_partition//_all_docs"),
        400,
        "illegal_partition",
        "Partition must not be empty",
    );
    assert_error(s.get("/readings/_partition/_bar"), 400, "illegal_partition", underscore);
    assert_error(s.get("/readings/_partition"), 400, "bad_request", "invalid_partition_req");
    assert_error(s.get("/readings/_partition/"), 400, "bad_request", "invalid_partition_req");
    let not_partitioned = "database is not partitioned";
    assert_error(s.get("/plain/_partition/foo"), 400, "bad_request", not_partitioned);
    assert_error(s.get("/plain/_partition/foo/_all_docs"), 400, "bad_request", not_partitioned);
    assert_error(
        s.post("/readings/_partition/_x", &json!({})),
        400,
        "illegal_partition",
        underscore,
    );
    assert_error_kind(s.post("/readings/_partition/foo", &json!({})), 405, "method_not_allowed");
    assert_error_kind(s.get("/readings/_partition/foo/_nothing"), 404, "not_found");
    assert_error_kind(s.get("/missing/_partition/foo"), 404, "not_found");
    // partition_design_docs_test.exs: a view of a missing design document.
    assert_error_kind(
        s.get("/readings/_partition/foo/_design/mrtest/_view/some"),
        404,
        "not_found",
    );
    assert_error_kind(
        send(s.anon_req(Method::GET, "/readings/_partition/bridge-1234")),
        401,
        "unauthorized",
    );
}

#[test]
fn partitioned_ids_are_enforced_on_every_write_path() {
    let s = Server::start();
    s.put_empty("/db?partitioned=true");
    let form = "Doc id must be of form partition:id";
    let underscore = "Only reserved document ids may start with underscore.";
    let empty = "Document id must not be empty";
    assert_error(s.put("/db/not-partitioned", &json!({})), 400, "illegal_docid", form);
    assert_error(s.put("/db/_bad:partitioned", &json!({})), 400, "illegal_docid", underscore);
    assert_error(s.put("/db/bad:", &json!({})), 400, "illegal_docid", empty);
    assert_error(s.post("/db", &json!({"_id": "nocolon"})), 400, "illegal_docid", form);
    for (id, reason) in [("foo1", form), ("_foo:1", underscore), ("foo:", empty)] {
        let got = s.post("/db/_bulk_docs", &json!({"docs": [{"_id": id}]}));
        assert_error(got, 400, "illegal_docid", reason);
    }
    let replicated = json!({"docs": [{"_id": "nocolon", "_rev": "1-abc"}], "new_edits": false});
    assert_error(s.post("/db/_bulk_docs", &replicated), 400, "illegal_docid", form);
    let (status, body) = s.post("/db/_bulk_get", &json!({"docs": [{"id": "my-partition-post"}]}));
    assert_eq!(status, 200);
    assert_eq!(
        body["results"][0]["docs"][0]["error"],
        json!({"id": "my-partition-post", "rev": null, "error": "illegal_docid", "reason": form})
    );
    // The one that passes, as in partition_crud_test.exs "POST and _bulk_get document".
    let (status, body) =
        s.post("/db", &json!({"_id": "my-partition-post:doc", "partitioned_doc": true}));
    assert_eq!(status, 201, "{body}");
    let (_, got) = s.post("/db/_bulk_get", &json!({"docs": [{"id": "my-partition-post:doc"}]}));
    assert_eq!(
        got["results"][0]["docs"][0]["ok"],
        json!({"_id": "my-partition-post:doc", "_rev": body["rev"], "partitioned_doc": true})
    );
    // Design and local documents carry no partition.
    assert_eq!(s.put("/db/_design/foo", &json!({"stuff": "here"})).0, 201);
    assert_eq!(s.put("/db/_local/foo", &json!({"stuff": "here"})).0, 201);
    assert_eq!(s.db_info("db")["doc_count"], 2);
}

#[test]
fn design_documents_are_partitioned_unless_they_say_otherwise() {
    let s = Server::start();
    s.put_empty("/db?partitioned=true");
    s.create_db("plain");
    let global = json!({"options": {"partitioned": false},
        "views": {"by-device": {"map": "function(doc) { emit(doc.deviceID, doc.infrastructureID) }"}}});
    assert_eq!(s.put("/db/_design/infrastructure-mapping", &global).0, 201);
    assert_eq!(s.put("/db/_design/p", &json!({"options": {"partitioned": true}})).0, 201);
    assert_error(
        s.put("/plain/_design/p", &json!({"options": {"partitioned": true}})),
        400,
        "invalid_design_doc",
        "partitioned option cannot be true in a non-partitioned database.",
    );
    assert_error(
        s.put("/db/_design/q", &json!({"options": {"partitioned": "yes"}})),
        400,
        "invalid_design_doc",
        "`options.partitioned` field must have boolean type",
    );
    assert_error(
        s.put("/db/_design/r", &json!({"views": {"v": {"reduce": "_count"}}})),
        400,
        "invalid_design_doc",
        "View `v` must contain map function",
    );
    assert_eq!(s.get("/plain/_design/p").0, 404, "nothing written");
}

#[test]
fn a_full_partition_refuses_growth_but_not_reads_deletes_or_replication() {
    // partition_size_limit_test.exs with max_partition_size = 10240.
    let s = Server::start_with(&["--max-partition-size", "10240"], &[]);
    s.put_empty("/db?partitioned=true");
    let docs: Vec<Value> = (1..=15)
        .map(|i| json!({"_id": format!("foo:{i:04}"), "value": format!("{:>1024}", "0")}))
        .collect();
    let (status, results) = s.post("/db/_bulk_docs", &json!({"docs": docs}));
    assert_eq!(status, 201);
    assert!(results.as_array().is_some_and(|r| r.iter().all(|r| r["ok"] == true)), "{results}");
    assert!(s.get("/db/_partition/foo").1["sizes"]["external"].as_u64() >= Some(10240));

    let overflow = "Partition limit exceeded due to update on 'foo:bar'";
    assert_error(
        s.put("/db/foo:bar", &json!({"value": "stuff"})),
        403,
        "partition_overflow",
        overflow,
    );
    assert_error(
        s.post("/db", &json!({"_id": "foo:bar", "value": "stuff"})),
        403,
        "partition_overflow",
        overflow,
    );
    let (status, mixed) =
        s.post("/db/_bulk_docs", &json!({"docs": [{"_id": "foo:bar"}, {"_id": "baz:bang"}]}));
    assert_eq!(status, 201);
    assert_eq!(mixed[0]["error"], "partition_overflow");
    assert_eq!(mixed[0]["reason"], overflow);
    assert_eq!(mixed[1]["ok"], true);
    assert_eq!(s.get("/db/foo:bar").0, 404, "nothing written");

    // Reads, shrinking updates, deletes, other partitions, design docs and replication work.
    let doc = s.get_doc("db", "foo:0001");
    let shrunk = s.put_doc("db", "foo:0001", &json!({"_rev": doc["_rev"], "value": ""}));
    assert_eq!(s.delete(&format!("/db/foo:0001?rev={shrunk}")).0, 200);
    s.put_doc("db", "bar:foo", &json!({"value": "stuff"}));
    s.put_doc("db", "_design/foo", &json!({"value": "stuff"}));
    let replicated =
        json!({"_id": "foo:bar", "_rev": "1-23202479633c2b380f79507a776743d5", "value": "stuff"});
    assert_eq!(s.put("/db/foo:bar?new_edits=false", &replicated).0, 201);
    assert_eq!(s.get_doc("db", "foo:bar")["value"], "stuff");
}
