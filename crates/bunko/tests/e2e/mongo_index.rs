//! MongoDB-semantics indexes through pymongo (issue 13, point 8/9): the single-collection
//! pattern of shared seed 002 (`createIndex({"links.target": 1, "links.doc_type": 1})`, then
//! `find({"links.target": "S12345"})` answered by an index scan that reads only the matching
//! documents), `unique` (E11000 with `keyPattern`/`keyValue` on insert, update, upsert and
//! when building over existing data), sparse and partial indexes, parallel arrays, `hint`,
//! `explain`, `listIndexes` and `dropIndexes`.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn links_index_answers_the_single_collection_query_by_an_index_scan() {
    let server = Server::start();
    let script = r#"
c = client()
sc = c.school.students_classes
sc.insert_one({"_id": "CS101-001", "doc_type": "class", "class_name": "Introduction to Programming",
    "course_id": "CS101", "semester": "Spring 2025",
    "links": [{"target": "CS101-001", "doc_type": "class"}, {"target": "S10023", "doc_type": "student"},
              {"target": "S12345", "doc_type": "student"}]})
sc.insert_one({"_id": "S12345", "doc_type": "student", "name": "Jane Doe", "major": "Computer Science",
    "links": [{"target": "CS101-001", "doc_type": "class"}, {"target": "MATH201-002", "doc_type": "class"},
              {"target": "S12345", "doc_type": "student"}]})
sc.insert_many([{"_id": f"S2{i:04}", "doc_type": "student", "links": [{"target": f"S2{i:04}", "doc_type": "student"},
                 {"target": "MATH201-002", "doc_type": "class"}]} for i in range(40)])
name = sc.create_index([("links.target", 1), ("links.doc_type", 1)])
assert name == "links.target_1_links.doc_type_1", name
found = sorted(d["_id"] for d in sc.find({"links.target": "S12345"}))
assert found == ["CS101-001", "S12345"], found
plan = sc.find({"links.target": "S12345"}).explain()
winning = plan["queryPlanner"]["winningPlan"]
assert winning["stage"] == "FETCH" and winning["inputStage"]["stage"] == "IXSCAN", winning
ix = winning["inputStage"]
assert ix["indexName"] == name and ix["keyPattern"] == {"links.target": 1, "links.doc_type": 1}, ix
assert ix["indexBounds"] == {"links.target": ['["S12345", "S12345"]'], "links.doc_type": ["[MinKey, MaxKey]"]}, ix
stats = plan["executionStats"]
assert stats["nReturned"] == 2 and stats["totalDocsExamined"] == 2 and stats["totalKeysExamined"] == 2, stats
students = sorted(d["_id"] for d in sc.find({"doc_type": "student", "links.target": "CS101-001"}))
assert students == ["S12345"], students
# Each condition may hold in another element (MATH201-002 < S20010), as in MongoDB: 40.
ranged = len(list(sc.find({"links.target": {"$gte": "S2", "$lt": "S20010"}})))
assert ranged == 40, ranged
natural = sc.find({"links.target": {"$gte": "S2", "$lt": "S20010"}}).hint([("$natural", 1)])
assert len(list(natural)) == 40
ranged = len(list(sc.find({"links": {"$elemMatch": {"target": {"$gte": "S2", "$lt": "S20010"}}}})))
assert ranged == 10, ranged
both = sorted(d["_id"] for d in sc.find({"links.target": {"$in": ["S20003", "S12345"]}}))
assert both == ["CS101-001", "S12345", "S20003"], both
assert sc.estimated_document_count() == 42
natural = sc.find({"links.target": "S12345"}).hint([("$natural", 1)]).explain()
assert natural["queryPlanner"]["winningPlan"]["stage"] == "COLLSCAN", natural["queryPlanner"]
assert natural["executionStats"]["totalDocsExamined"] == 42, natural["executionStats"]
sorted_plan = sc.find({"links.target": "MATH201-002"}).sort("_id", -1).limit(3).explain()["queryPlanner"]["winningPlan"]
assert [sorted_plan["stage"], sorted_plan["inputStage"]["stage"]] == ["LIMIT", "SORT"], sorted_plan
top = [d["_id"] for d in sc.find({"links.target": "MATH201-002"}).sort("_id", -1).limit(3)]
assert top == ["S20039", "S20038", "S20037"], top
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}

#[test]
fn unique_sparse_partial_and_dropping_indexes_behave_as_mongodb() {
    let server = Server::start();
    let script = r#"
from pymongo.errors import DuplicateKeyError, WriteError
c = client()
users = c.app.users
users.insert_many([{"_id": 1, "email": "a@x", "age": 30}, {"_id": 2, "email": "b@x"}, {"_id": 3, "age": 5}])
assert users.create_index("email", unique=True) == "email_1"
def dup(fn):
    try:
        fn()
    except (DuplicateKeyError, WriteError, OperationFailure) as e:
        d = e.details
        return [e.code, d.get("errmsg"), d.get("keyPattern"), d.get("keyValue")]
    return None
out = {
  "insert": dup(lambda: users.insert_one({"_id": 4, "email": "a@x"})),
  "update": dup(lambda: users.update_one({"_id": 2}, {"$set": {"email": "a@x"}})),
  "upsert": dup(lambda: users.update_one({"_id": 9}, {"$set": {"email": "b@x"}}, upsert=True)),
  # a second document without email is a second null key
  "null": dup(lambda: users.insert_one({"_id": 5})),
}
users.update_one({"_id": 1}, {"$set": {"email": "c@x"}})
users.insert_one({"_id": 6, "email": "a@x"})
out["build"] = dup(lambda: c.app.people.insert_many([{"n": 1}, {"n": 1}]) and c.app.people.create_index("n", unique=True))
users.create_index([("age", -1)], sparse=True, name="age_sparse")
users.create_index("kind", partialFilterExpression={"age": {"$gt": 10}}, expireAfterSeconds=3600)
out["list"] = list(users.list_indexes())
out["sparse_hint"] = sorted(d["_id"] for d in users.find({}).hint("age_sparse"))
out["sparse_unhinted"] = users.find({"age": {"$exists": False}}).explain()["queryPlanner"]["winningPlan"]["stage"]
out["parallel"] = None
c.app.pairs.create_index([("a", 1), ("b", 1)])
try:
    c.app.pairs.insert_one({"a": [1, 2], "b": [3]})
except WriteError as e:
    out["parallel"] = [e.code, e.details["errmsg"]]
out["bad_hint"] = code_of(lambda: list(users.find({}).hint("nope")))
c.app.command("dropIndexes", "users", index={"age": -1})
users.drop_index("kind_1")
out["after_drop"] = [i["name"] for i in users.list_indexes()]
out["drop_missing"] = code_of(lambda: users.drop_index("nope"))
out["drop_id"] = code_of(lambda: users.drop_index("_id_"))
users.drop_indexes()
out["after_all"] = [i["name"] for i in users.list_indexes()]
users.insert_one({"_id": 7, "email": "a@x"})
print(json.dumps(out, default=str))
"#;
    let Some(result) = python(&server, script) else { return };
    let msg = |v: &str| {
        format!(
            "E11000 duplicate key error collection: app.users index: email_1 dup key: {{ email: {v} }}"
        )
    };
    assert_eq!(result["insert"], json!([11000, msg("\"a@x\""), {"email": 1}, {"email": "a@x"}]));
    assert_eq!(result["update"], json!([11000, msg("\"a@x\""), {"email": 1}, {"email": "a@x"}]));
    assert_eq!(result["upsert"], json!([11000, msg("\"b@x\""), {"email": 1}, {"email": "b@x"}]));
    assert_eq!(result["null"], json!([11000, msg("null"), {"email": 1}, {"email": null}]));
    assert_eq!(result["build"][0], 11000, "{result}");
    assert_eq!(
        result["list"],
        json!([
            {"v": 2, "key": {"_id": 1}, "name": "_id_"},
            {"v": 2, "key": {"age": -1}, "name": "age_sparse", "sparse": true},
            {"v": 2, "key": {"email": 1}, "name": "email_1", "unique": true},
            {"v": 2, "key": {"kind": 1}, "name": "kind_1", "partialFilterExpression": {"age": {"$gt": 10}}, "expireAfterSeconds": 3600},
        ])
    );
    assert_eq!(result["sparse_hint"], json!([1, 3]));
    assert_eq!(result["sparse_unhinted"], "COLLSCAN");
    assert_eq!(result["parallel"], json!([171, "cannot index parallel arrays [b] [a]"]));
    assert_eq!(result["bad_hint"], 2);
    assert_eq!(result["after_drop"], json!(["_id_", "email_1"]));
    assert_eq!(result["drop_missing"], 27);
    assert_eq!(result["drop_id"], 72);
    assert_eq!(result["after_all"], json!(["_id_"]));
}

/// `createIndexes` checks the documents already stored a page at a time: a duplicate key
/// or parallel arrays far past the first page still refuse the index, and an index over
/// many clean documents is built and used.
#[test]
fn building_over_existing_documents_checks_every_page() {
    let server = Server::start();
    let script = r#"
c = client()
docs = [{"_id": "d%04d" % i, "n": i, "a": [i], "b": i} for i in range(700)]
c.app.many.insert_many(docs)
c.app.many.insert_many([{"_id": "z1", "n": 7}, {"_id": "z2", "n": "late", "a": [1, 2], "b": [3, 4]}])
out = {
  "dup": code_of(lambda: c.app.many.create_index("n", unique=True)),
  "parallel": code_of(lambda: c.app.many.create_index([("a", 1), ("b", 1)])),
  "plain": c.app.many.create_index("n"),
}
out["names"] = sorted(i["name"] for i in c.app.many.list_indexes())
out["found"] = [d["_id"] for d in c.app.many.find({"n": 7}).sort("_id", 1)]
print(json.dumps(out))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result["dup"], 11000, "{result}");
    assert_eq!(result["parallel"], 171, "{result}");
    assert_eq!(result["plain"], "n_1");
    assert_eq!(result["names"], json!(["_id_", "n_1"]));
    assert_eq!(result["found"], json!(["d0007", "z1"]));
}

#[test]
fn ttl_index_deletes_expired_documents_through_the_write_path() {
    let server = Server::start_with(&["--mongo-ttl-monitor-secs", "1"], &[]);
    let script = r#"
import time
c = client()
log = c.app.sessions
now = datetime.datetime.now(datetime.timezone.utc)
log.insert_many([
    {"_id": "old1", "createdAt": now - datetime.timedelta(hours=2)},
    {"_id": "old2", "createdAt": [now - datetime.timedelta(hours=3), now]},
    {"_id": "fresh", "createdAt": now},
    {"_id": "text", "createdAt": "2000-01-01"},
    {"_id": "none"},
])
log.create_index("createdAt", expireAfterSeconds=3600)
deadline = time.time() + 60
while time.time() < deadline and log.find_one({"_id": "old1"}) is not None:
    time.sleep(0.2)
time.sleep(1.5)
print(json.dumps(sorted(d["_id"] for d in log.find({}))))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!(["fresh", "none", "text"]));
    let (status, _) = server.get("/app%24sessions/old1");
    assert_eq!(status, 404);
}

/// The `IXSCAN` of a winning plan (under `FETCH`, and `LIMIT`/`SKIP`/`SORT` if any).
const IXSCAN_OF: &str = r#"
def ixscan_of(plan):
    while plan.get("stage") != "IXSCAN":
        plan = plan["inputStage"]
    return plan
"#;

#[test]
fn explain_reports_multikey_indexes_from_the_first_array_on_and_after_a_restart() {
    let mut server = Server::start();
    let script = format!(
        "{IXSCAN_OF}{}",
        r#"
c = client()
t = c.app.tagged
t.create_index("tags")
t.insert_many([{"_id": i, "tags": f"t{i}"} for i in range(5)])
def mk(coll, q):
    ix = ixscan_of(coll.find(q).explain()["queryPlanner"]["winningPlan"])
    return [ix["isMultiKey"], ix["multiKeyPaths"]]
out = {"scalars": mk(t, {"tags": "t1"})}
t.insert_one({"_id": 9, "tags": ["t1", "t2"]})
out["array"] = mk(t, {"tags": "t1"})
t.delete_one({"_id": 9})
out["after_delete"] = mk(t, {"tags": "t1"})
s = c.app.school
s.insert_one({"_id": "S1", "links": [{"target": "C1", "doc_type": "class"}]})
s.create_index([("links.target", 1), ("links.doc_type", 1)])
s.create_index([("name", 1)])
out["built"] = mk(s, {"links.target": "C1"})
out["plain"] = mk(s, {"name": "x"})
print(json.dumps(out))
"#
    );
    let Some(result) = python(&server, &script) else { return };
    assert_eq!(result["scalars"], json!([false, {"tags": []}]));
    assert_eq!(result["array"], json!([true, {"tags": ["tags"]}]));
    assert_eq!(result["after_delete"], json!([true, {"tags": ["tags"]}]), "kept, as MongoDB");
    let links = json!({"links.target": ["links"], "links.doc_type": ["links"]});
    assert_eq!(result["built"], json!([true, links]));
    assert_eq!(result["plain"], json!([false, {"name": []}]));
    server.kill9();
    server.restart();
    let script = format!(
        "{IXSCAN_OF}{}",
        r#"
c = client()
def mk(coll, q):
    ix = ixscan_of(coll.find(q).explain()["queryPlanner"]["winningPlan"])
    return [ix["isMultiKey"], ix["multiKeyPaths"]]
print(json.dumps([mk(c.app.tagged, {"tags": "t1"}), mk(c.app.school, {"links.target": "C1"}),
                  mk(c.app.school, {"name": "x"})]))
"#
    );
    let Some(result) = python(&server, &script) else { return };
    assert_eq!(
        result,
        json!([[true, {"tags": ["tags"]}], [true, links], [false, {"name": []}]]),
        "the multikey state is stored"
    );
}

#[test]
fn all_plans_execution_runs_every_candidate_for_a_trial() {
    let server = Server::start();
    let script = format!(
        "{IXSCAN_OF}{}",
        r#"
c = client()
t = c.app.pairs
t.insert_many([{"_id": i, "a": i % 3, "b": i % 100} for i in range(300)])
t.create_index("a")
t.create_index("b")
found = sorted(d["_id"] for d in t.find({"a": 1, "b": 2}))
plan = c.app.command("explain", {"find": "pairs", "filter": {"a": 1, "b": 2}}, verbosity="allPlansExecution")
qp = plan["queryPlanner"]
rejected = [ixscan_of(p) for p in qp["rejectedPlans"]]
trials = [[ixscan_of(p["executionStages"])["indexName"], p["nReturned"], p["totalKeysExamined"],
           p["totalDocsExamined"], p["executionStages"]["stage"]] for p in plan["executionStats"]["allPlansExecution"]]
limited = c.app.command("explain", {"find": "pairs", "filter": {"a": 1, "b": {"$gte": 0}}, "limit": 5},
                        verbosity="allPlansExecution")["executionStats"]["allPlansExecution"]
stats_only = c.app.command("explain", {"find": "pairs", "filter": {"a": 1, "b": 2}}, verbosity="executionStats")
single = c.app.command("explain", {"find": "pairs", "filter": {"a": 1}}, verbosity="allPlansExecution")
print(json.dumps({
    "found": found,
    "winner": ixscan_of(qp["winningPlan"])["indexName"],
    "rejected": [[r["indexName"], r["indexBounds"]] for r in rejected],
    "trials": trials,
    "limited": [[ixscan_of(p["executionStages"])["indexName"], p["nReturned"], p["executionStages"]["stage"]] for p in limited],
    "stats_only": "allPlansExecution" in stats_only["executionStats"],
    "single": single["executionStats"]["allPlansExecution"],
}))
"#
    );
    let Some(result) = python(&server, &script) else { return };
    assert_eq!(result["found"], json!([202]));
    assert_eq!(result["winner"], "a_1");
    assert_eq!(result["rejected"], json!([["b_1", {"b": ["[2, 2]"]}]]));
    // a_1 reads its 100 keys (a = 1) and finds one match; b_1 reads 3 keys (b = 2).
    assert_eq!(result["trials"], json!([["a_1", 1, 100, 100, "FETCH"], ["b_1", 1, 3, 3, "FETCH"]]));
    // With a limit the trial stops at it: 5 matches for a = 1 in a_1's first keys.
    assert_eq!(result["limited"], json!([["a_1", 5, "LIMIT"], ["b_1", 5, "LIMIT"]]));
    assert_eq!(result["stats_only"], false);
    assert_eq!(result["single"], json!([]));
}

#[test]
fn hashed_indexes_hold_mongodb_hashes_and_serve_equalities() {
    let server = Server::start();
    let script = format!(
        "{IXSCAN_OF}{}",
        r#"
import hashlib, struct
from pymongo.errors import WriteError, BulkWriteError
def h(v):
    # MongoDB's BSONElementHasher, computed here independently: seed, canonical type, value.
    if isinstance(v, int):
        data = struct.pack("<iiq", 0, 10, v)
    else:
        b = v.encode()
        data = struct.pack("<iii", 0, 15, len(b) + 1) + b + b"\0"
    return struct.unpack("<q", hashlib.md5(data).digest()[:8])[0]
def iv(n):
    return f"[{n}, {n}]"
c = client()
t = c.app.hashed
t.insert_many([{"_id": i, "a": i, "s": f"s{i}"} for i in range(20)] + [{"_id": 100, "a": 3.1}, {"_id": 101, "s": "string to hash"}])
out = {"name": t.create_index([("a", "hashed")])}
t.create_index([("s", "hashed")])
out["list"] = [i["key"] for i in t.list_indexes()]
e = t.find({"a": 3}).explain()
ix = ixscan_of(e["queryPlanner"]["winningPlan"])
out["eq"] = [sorted(d["_id"] for d in t.find({"a": 3})), ix["indexName"], ix["keyPattern"], ix["indexBounds"],
             ix["isMultiKey"], ix["multiKeyPaths"], e["executionStats"]["totalKeysExamined"], e["executionStats"]["totalDocsExamined"]]
out["expect_eq"] = {"a": [iv(h(3))]}
out["hash42"] = ixscan_of(t.find({"a": 42}).explain()["queryPlanner"]["winningPlan"])["indexBounds"]
out["in"] = [sorted(d["_id"] for d in t.find({"a": {"$in": [1, 2]}})),
             ixscan_of(t.find({"a": {"$in": [1, 2]}}).explain()["queryPlanner"]["winningPlan"])["indexBounds"]]
out["expect_in"] = {"a": [iv(x) for x in sorted([h(1), h(2)])]}
out["str"] = [[d["_id"] for d in t.find({"s": "string to hash"})],
              ixscan_of(t.find({"s": "string to hash"}).explain()["queryPlanner"]["winningPlan"])["indexBounds"]]
out["range"] = [len(list(t.find({"a": {"$gt": 15}}))), t.find({"a": {"$gt": 15}}).explain()["queryPlanner"]["winningPlan"]["stage"]]
out["hint"] = len(list(t.find({}).hint([("a", "hashed")])))
out["unique"] = code_of(lambda: t.create_index([("u", "hashed")], unique=True))
out["two"] = code_of(lambda: t.create_index([("x", "hashed"), ("y", "hashed")]))
out["ttl"] = code_of(lambda: t.create_index([("z", "hashed")], expireAfterSeconds=10))
try:
    t.insert_one({"_id": 200, "a": [1, 2]})
    out["array"] = None
except WriteError as err:
    out["array"] = [err.code, err.details["errmsg"]]
t.create_index([("b", 1), ("c.d", "hashed")])
t.insert_one({"_id": 300, "b": 1, "c": {"d": "x"}})
ce = ixscan_of(t.find({"b": 1, "c.d": "x"}).explain()["queryPlanner"]["winningPlan"])
out["compound"] = [[d["_id"] for d in t.find({"b": 1, "c.d": "x"})], ce["indexName"], ce["keyPattern"], ce["indexBounds"]]
out["expect_compound"] = {"b": ["[1, 1]"], "c.d": [iv(h("x"))]}
try:
    t.insert_one({"_id": 301, "b": 2, "c": [{"d": "y"}]})
    out["nested_array"] = None
except WriteError as err:
    out["nested_array"] = [err.code, err.details["errmsg"]]
out["kept_out"] = t.count_documents({"_id": {"$in": [200, 301]}})
c.app.arrays.insert_one({"a": [1]})
out["build"] = code_of(lambda: c.app.arrays.create_index([("a", "hashed")]))
c.app.drop_h.create_index([("a", "hashed")])
c.app.command("dropIndexes", "drop_h", index={"a": "hashed"})
out["dropped"] = [i["name"] for i in c.app.drop_h.list_indexes()]
print(json.dumps(out))
"#
    );
    let Some(r) = python(&server, &script) else { return };
    assert_eq!(r["name"], "a_hashed");
    assert_eq!(r["list"], json!([{"_id": 1}, {"a": "hashed"}, {"s": "hashed"}]));
    // 3 and 3.1 share a hash (numbers hash as their truncated integer): two keys read, one match.
    assert_eq!(
        r["eq"],
        json!([[3], "a_hashed", {"a": "hashed"}, r["expect_eq"], false, {"a": []}, 2, 2])
    );
    // MongoDB's own check value: 42 hashes to -944302157085130861.
    assert_eq!(r["hash42"], json!({"a": ["[-944302157085130861, -944302157085130861]"]}));
    assert_eq!(r["in"], json!([[1, 2], r["expect_in"]]));
    // The `$toHashedIndexKey` reference example: "string to hash" hashes to 763543691661428748.
    assert_eq!(r["str"], json!([[101], {"s": ["[763543691661428748, 763543691661428748]"]}]));
    assert_eq!(r["range"], json!([4, "COLLSCAN"]), "a hashed index holds no order");
    assert_eq!(r["hint"], 22);
    assert_eq!(r["unique"], 16764);
    assert_eq!(r["two"], 31303);
    assert_eq!(r["ttl"], 238);
    let array =
        "Error: hashed indexes do not currently support array values. Found array at path: ";
    assert_eq!(r["array"], json!([16766, format!("{array}a")]));
    assert_eq!(
        r["compound"],
        json!([[300], "b_1_c.d_hashed", {"b": 1, "c.d": "hashed"}, r["expect_compound"]])
    );
    assert_eq!(r["nested_array"], json!([16766, format!("{array}c")]));
    assert_eq!(r["kept_out"], 0);
    assert_eq!(r["build"], 16766);
    assert_eq!(r["dropped"], json!(["_id_"]));
}

#[test]
fn collated_indexes_serve_queries_with_their_collation_only() {
    let server = Server::start();
    let script = format!(
        "{IXSCAN_OF}{}",
        r#"
from pymongo.errors import DuplicateKeyError
c = client()
w = c.app.words
w.insert_many([{"_id": i, "x": x, "n": i} for i, x in enumerate(["ping", "Ping", "PING", "pong", "apple", "Banana", "cherry", "Éclair"])])
ci = {"locale": "en", "strength": 2}
w.create_index("x", collation=ci, name="x_ci")
w.create_index("n", collation=ci, name="n_ci")
def stage(cur):
    plan = cur.explain()["queryPlanner"]["winningPlan"]
    try:
        ix = ixscan_of(plan)
        return [ix["indexName"], ix["indexBounds"]]
    except KeyError:
        return plan["stage"]
out = {"list": [i.get("collation") for i in w.list_indexes()]}
out["eq"] = [sorted(d["_id"] for d in w.find({"x": "PING"}, collation=ci)), stage(w.find({"x": "PING"}, collation=ci))]
out["eq_simple"] = [sorted(d["_id"] for d in w.find({"x": "PING"})), stage(w.find({"x": "PING"}))]
out["eq_other"] = stage(w.find({"x": "PING"}, collation={"locale": "fr", "strength": 2}))
out["range"] = [sorted(d["x"] for d in w.find({"x": {"$gte": "b", "$lt": "d"}}, collation=ci)),
                stage(w.find({"x": {"$gte": "b", "$lt": "d"}}, collation=ci))[0]]
out["regex"] = [sorted(d["_id"] for d in w.find({"x": {"$regex": "^p"}}, collation=ci)), stage(w.find({"x": {"$regex": "^p"}}, collation=ci))]
out["numbers_simple"] = [[d["_id"] for d in w.find({"n": 3})], stage(w.find({"n": 3}))]
sorted_plan = w.find({}, collation=ci).sort("x", 1).explain()["queryPlanner"]["winningPlan"]
out["sort"] = [[d["x"] for d in w.find({}, collation=ci).sort("x", 1)], "SORT" in json.dumps(sorted_plan)]
u = c.app.emails
u.create_index("e", unique=True, collation=ci)
u.insert_one({"_id": 1, "e": "a@x"})
try:
    u.insert_one({"_id": 2, "e": "A@X"})
    out["dup"] = None
except DuplicateKeyError as e:
    out["dup"] = e.code
u.create_index("e", unique=True, name="e_simple")
out["both"] = [i["name"] for i in u.list_indexes()]
out["hashed"] = code_of(lambda: u.create_index([("h", "hashed")], collation=ci))
out["bad"] = code_of(lambda: u.create_index("z", collation={"strength": 2}))
out["simple"] = [i.get("collation") for i in u.list_indexes() if i["name"] == "e_simple"]
print(json.dumps(out))
"#
    );
    let Some(r) = python(&server, &script) else { return };
    let full = json!({"locale": "en", "caseLevel": false, "caseFirst": "off", "strength": 2,
        "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
        "normalization": false, "backwards": false, "version": "57.1"});
    assert_eq!(r["list"], json!([null, full, full]));
    assert_eq!(r["eq"][0], json!([0, 1, 2]));
    assert_eq!(r["eq"][1][0], "x_ci");
    let bound = r["eq"][1][1]["x"][0].as_str().unwrap_or_default().to_string();
    assert!(bound.starts_with("[CollationKey(0x") && bound.ends_with(")]"), "{bound}");
    // A query under the simple collation (or another one) reads the collection for strings.
    assert_eq!(r["eq_simple"], json!([[2], "COLLSCAN"]));
    assert_eq!(r["eq_other"], "COLLSCAN");
    assert_eq!(r["range"], json!([["Banana", "cherry"], "x_ci"]));
    // A regex is not collation-aware: the collated index gives it no bounds.
    assert_eq!(r["regex"], json!([[0, 3], "COLLSCAN"]));
    // Numbers have no collation: a simple query uses the collated index for them.
    assert_eq!(r["numbers_simple"], json!([[3], ["n_ci", {"n": ["[3, 3]"]}]]));
    let order = &r["sort"][0];
    assert_eq!(order[0], "apple");
    assert_eq!(order[1], "Banana");
    assert_eq!(r["sort"][1], false, "the collated index yields the order");
    assert_eq!(r["dup"], 11000);
    assert_eq!(r["both"], json!(["_id_", "e_1", "e_simple"]));
    assert_eq!(r["hashed"], 238);
    assert_eq!(r["bad"], 2);
    assert_eq!(r["simple"], json!([null]));
}

/// Regression (session 26): bounds on a multikey index were intersected as on a scalar one,
/// so `{a: {$gt: 1, $lt: 5}}` missed `{a: [0, 10]}` (0 < 5 and 10 > 1), and
/// `{"links.t": "S1", "links.d": "c"}` missed a document whose two conditions hold in
/// different elements of `links`. A multikey field's range keeps its lower side only, and
/// a field sharing an array with an earlier bounded one bounds nothing, as in MongoDB.
#[test]
fn multikey_bounds_are_not_intersected_across_elements() {
    let server = Server::start();
    let script = r#"
db = client().mk
co = db.items
co.insert_many([{"_id": 1, "a": [0, 10]}, {"_id": 2, "a": 3}, {"_id": 3, "a": [7, 8]}])
co.create_index("a")
l = db.links
l.insert_many([{"_id": 1, "links": [{"t": "S1", "d": "x"}, {"t": "S2", "d": "c"}]},
               {"_id": 2, "links": [{"t": "S1", "d": "c"}]}, {"_id": 3, "links": [{"t": "S2", "d": "x"}]}])
l.create_index([("links.t", 1), ("links.d", 1)])
natural = [("$natural", 1)]
def ids(cursor):
    return sorted(d["_id"] for d in cursor)
out = {}
for name, coll, q in [("range", co, {"a": {"$gt": 1, "$lt": 5}}),
                      ("shared", l, {"links.t": "S1", "links.d": "c"}),
                      ("elem", l, {"links": {"$elemMatch": {"t": "S1", "d": "c"}}})]:
    e = coll.find(q).explain()["queryPlanner"]["winningPlan"]
    assert e["stage"] == "FETCH" and e["inputStage"]["stage"] == "IXSCAN", e
    out[name] = [ids(coll.find(q)), ids(coll.find(q).hint(natural)), coll.count_documents(q),
                 e["inputStage"]["indexBounds"]]
print(json.dumps(out))
"#;
    let Some(r) = python(&server, script) else { return };
    assert_eq!(r["range"], json!([[1, 2], [1, 2], 2, {"a": ["(1, inf.0]"]}]));
    assert_eq!(
        r["shared"],
        json!([[1, 2], [1, 2], 2, {"links.t": ["[\"S1\", \"S1\"]"], "links.d": ["[MinKey, MaxKey]"]}])
    );
    assert_eq!(r["elem"][0], json!([2]));
    assert_eq!(r["elem"][1], json!([2]));
    // One `$elemMatch` joins both conditions in one element: both fields are bounded.
    assert_eq!(
        r["elem"][3],
        json!({"links.t": ["[\"S1\", \"S1\"]"], "links.d": ["[\"c\", \"c\"]"]})
    );
}

/// Bounds joined by `$elemMatch` as MongoDB combines them (its "Compound Bounds of Multiple
/// Fields from the Same Array" and "Bounds Intersection"): both fields of `links` bounded,
/// both sides of a range kept; not when a condition sits outside the `$elemMatch`, nor for
/// an array inside it. Every answer is the collection scan's.
#[test]
fn elem_match_joins_multikey_bounds_as_mongodb_does() {
    let server = Server::start();
    let script = r#"
db = client().em
l = db.links
l.insert_many([{"_id": 1, "links": [{"t": "S1", "d": "x"}, {"t": "S2", "d": "c"}]},
               {"_id": 2, "links": [{"t": "S1", "d": "c"}]},
               {"_id": 3, "links": [{"t": "S2", "d": "x"}]},
               {"_id": 4, "links": [{"t": ["S0", "S3"], "d": "c"}]},
               {"_id": 5, "links": [{"t": "S15", "d": "c"}, {"t": "S1", "d": "y"}]}])
l.create_index([("links.t", 1), ("links.d", 1)])
g = db.grades
g.insert_many([{"_id": 1, "a": [0, 10]}, {"_id": 2, "a": [2, 9]}, {"_id": 3, "a": 3}])
g.create_index("a")
natural = [("$natural", 1)]
def ids(cursor):
    return sorted(d["_id"] for d in cursor)
out = {}
for name, coll, q in [
        ("both", l, {"links": {"$elemMatch": {"t": "S1", "d": "c"}}}),
        ("in", l, {"links": {"$elemMatch": {"t": {"$in": ["S1", "S2"]}, "d": "c"}}}),
        ("range", l, {"links": {"$elemMatch": {"t": {"$gte": "S1", "$lt": "S2"}, "d": "c"}}}),
        ("outside", l, {"links": {"$elemMatch": {"t": "S1"}}, "links.d": "c"}),
        ("inner", l, {"links": {"$elemMatch": {"t": {"$gt": "S0", "$lt": "S2"}}}}),
        ("scalar", g, {"a": {"$elemMatch": {"$gt": 1, "$lt": 5}}})]:
    e = coll.find(q).explain()["queryPlanner"]["winningPlan"]
    assert e["stage"] == "FETCH" and e["inputStage"]["stage"] == "IXSCAN", e
    out[name] = [ids(coll.find(q)), ids(coll.find(q).hint(natural)), e["inputStage"]["indexBounds"]]
print(json.dumps(out))
"#;
    let Some(r) = python(&server, script) else { return };
    for (name, found) in r.as_object().into_iter().flatten() {
        assert_eq!(found[0], found[1], "{name}: the index scan answers as the collection scan");
    }
    let s = |v: &str| format!("[\"{v}\", \"{v}\"]");
    assert_eq!(r["both"][0], json!([2]));
    assert_eq!(r["both"][2], json!({"links.t": [s("S1")], "links.d": [s("c")]}));
    assert_eq!(r["in"][0], json!([1, 2]));
    assert_eq!(r["in"][2], json!({"links.t": [s("S1"), s("S2")], "links.d": [s("c")]}));
    // `links.t` is an array in document 4, inside the `$elemMatch`: its range keeps the
    // lower side only, and a range ends the walk (so `links.d` is unbounded).
    assert_eq!(r["range"][0], json!([2, 4, 5]));
    assert_eq!(
        r["range"][2],
        json!({"links.t": ["[\"S1\", {})"], "links.d": ["[MinKey, MaxKey]"]})
    );
    assert_eq!(r["outside"][0], json!([1, 2, 5]));
    assert_eq!(r["outside"][2], json!({"links.t": [s("S1")], "links.d": ["[MinKey, MaxKey]"]}));
    assert_eq!(r["inner"][0], json!([1, 2, 4, 5]));
    assert_eq!(r["inner"][2]["links.t"], json!(["(\"S0\", {})"]));
    // No array inside the `$elemMatch` on `a`: both sides of the range bound it.
    assert_eq!(r["scalar"][0], json!([2]));
    assert_eq!(r["scalar"][2], json!({"a": ["(1, 5)"]}));
}

/// A `find` hinted to an index with a descending field and no sort returns the documents
/// in the index's order, as MongoDB reads them (across `getMore`s too); a sort still wins.
#[test]
fn a_find_hinted_to_a_descending_index_returns_the_index_order() {
    let server = Server::start();
    let script = r#"
c = client()
t = c.app.readings
xs = [3, 1, 4, 15, 5, 9, 2, 6]
t.insert_many([{"_id": i, "x": x, "a": i % 2, "b": x} for i, x in enumerate(xs)] + [{"_id": 99, "a": 0}])
t.create_index([("x", -1)])
t.create_index([("x", 1)], name="x_up")
t.create_index([("a", 1), ("b", -1)])
out = {}
out["desc"] = [d.get("x") for d in t.find({}, hint=[("x", -1)], batch_size=3)]
out["filtered"] = [d["x"] for d in t.find({"x": {"$gt": 2}}, hint="x_-1")]
out["up"] = [d.get("x") for d in t.find({}, hint="x_up")]
out["compound"] = [[d["a"], d.get("b")] for d in t.find({}, hint="a_1_b_-1")]
out["sorted"] = [d.get("x") for d in t.find({}, hint=[("x", -1)], sort=[("x", 1)])]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["desc"], json!([15, 9, 6, 5, 4, 3, 2, 1, null]));
    assert_eq!(out["filtered"], json!([15, 9, 6, 5, 4, 3]));
    assert_eq!(out["up"], json!([null, 1, 2, 3, 4, 5, 6, 9, 15]));
    assert_eq!(
        out["compound"],
        json!([[0, 5], [0, 4], [0, 3], [0, 2], [0, null], [1, 15], [1, 9], [1, 6], [1, 1]])
    );
    assert_eq!(out["sorted"], json!([null, 1, 2, 3, 4, 5, 6, 9, 15]));
}

/// The index that serves the filter also serves the sort when the sort's fields follow
/// fields the filter fixes (`{sensor: 1, ts: 1}`: the newest readings of one sensor): no
/// `SORT` stage, the scan stops at `skip + limit`, and the answers are those of a
/// collection scan sorted in memory. Several points (`$in`) merge one scan per point
/// (`SORT_MERGE`, `mongo_sort_merge`). A multikey index or a sort that skips an index field
/// still sort in memory, with the same answers.
#[test]
fn a_filter_index_serves_a_sort_on_the_fields_after_its_fixed_ones() {
    let server = Server::start();
    let script = r#"
c = client()
t = c.app.readings
t.insert_many([{"_id": i, "sensor": i % 5, "ts": (i * 7919) % 1000, "v": i % 3} for i in range(500)])
t.create_index([("sensor", 1), ("ts", 1), ("v", 1)])
cases = [
    ({"sensor": 3}, [("ts", -1)], 0, 5),
    ({"sensor": 3}, [("ts", 1)], 4, 5),
    ({"sensor": 3, "ts": {"$gte": 400}}, [("ts", 1)], 0, 7),
    ({"sensor": 3}, [("sensor", -1), ("ts", -1)], 0, 3),
    ({"sensor": 2, "ts": 18}, [("v", -1)], 0, 2),
    ({"sensor": 3, "v": 1}, [("ts", -1)], 0, 4),
    ({"sensor": {"$in": [1, 2]}}, [("ts", -1)], 0, 5),
    ({"sensor": 3}, [("v", 1), ("ts", 1)], 0, 5),
    ({"sensor": 3}, [("ts", 1), ("v", -1)], 0, 5),
]
out = {"mismatch": [], "stages": [], "examined": []}
for q, sort, skip, limit in cases:
    got = [d["_id"] for d in t.find(q).sort(sort).skip(skip).limit(limit)]
    want = [d["_id"] for d in t.find(q).sort(sort + [("_id", 1)]).hint([("$natural", 1)]).skip(skip).limit(limit)]
    if got != want:
        out["mismatch"].append([repr(q), repr(sort), got, want])
    plan = t.find(q).sort(sort).skip(skip).limit(limit).explain()
    out["stages"].append(stages(plan["queryPlanner"]["winningPlan"]))
    out["examined"].append(plan["executionStats"]["totalDocsExamined"])
agg = list(t.aggregate([{"$match": {"sensor": 4}}, {"$sort": {"ts": -1}}, {"$limit": 2}]))
out["agg"] = [d["_id"] for d in agg]
out["agg_want"] = [d["_id"] for d in sorted(t.find({"sensor": 4}), key=lambda d: -d["ts"])[:2]]
t.insert_one({"_id": 1000, "sensor": 3, "ts": [1, 999], "v": 0})
got = [d["_id"] for d in t.find({"sensor": 3}).sort("ts", -1).limit(3)]
want = [d["_id"] for d in t.find({"sensor": 3}).sort([("ts", -1), ("_id", 1)]).hint([("$natural", 1)]).limit(3)]
out["multikey"] = [got == want, got[0], stages(t.find({"sensor": 3}).sort("ts", -1).limit(3).explain()["queryPlanner"]["winningPlan"])]
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["mismatch"], json!([]), "answers differ from a sorted collection scan");
    let served = json!(["LIMIT", "FETCH", "IXSCAN"]);
    let stages = out["stages"].as_array().unwrap();
    for i in [0, 2, 3, 4, 5] {
        assert_eq!(stages[i], served, "case {i}: {}", out["stages"]);
    }
    assert_eq!(stages[1], json!(["LIMIT", "SKIP", "FETCH", "IXSCAN"]), "{}", out["stages"]);
    assert_eq!(stages[6], json!(["LIMIT", "FETCH", "SORT_MERGE"]), "{}", out["stages"]);
    for i in [7, 8] {
        assert_eq!(stages[i][1], json!("SORT"), "case {i}: {}", out["stages"]);
    }
    // Served cases stop at `skip + limit` matches: the documents read are those, and for
    // `{sensor: 3, v: 1}` the readings of sensor 3 newest first up to the fourth with v 1.
    // The merge of two points reads the 5 plus the one each scan holds ready.
    let examined = &out["examined"].as_array().unwrap()[..7];
    let counts = [5, 9, 7, 3, 1, 14, 7];
    assert_eq!(examined, counts.map(|n| json!(n)));
    assert_eq!(out["agg"], out["agg_want"]);
    assert_eq!(out["multikey"], json!([true, 1000, ["LIMIT", "SORT", "FETCH", "IXSCAN"]]));
}
