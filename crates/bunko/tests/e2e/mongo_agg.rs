//! MongoDB `aggregate` through pymongo (issue 14): the seeds' reference resolution with
//! `$lookup` (books ↔ publishers from seed 000, students ↔ classes through `links` from
//! seed 002), `count_documents`, a per-device average over IoT readings (seed 003),
//! `$facet`, `$out`, cursors with `getMore`, `explain` and the unknown-stage error.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

/// Books reference their publisher by `pub-id`; students and classes reference each other
/// through `links`; `$lookup` resolves both, with the `let` + `pipeline` form too.
#[test]
fn lookup_resolves_the_seeds_references() {
    let server = Server::start();
    let script = r#"
db = client().library
db.publishers.insert_many([{"_id": "mspress", "name": "Microsoft Press"}, {"_id": "oreilly", "name": "O'Reilly"}])
db.books.insert_many([
    {"_id": "1", "name": "Azure Cosmos DB 101", "pub-id": "mspress"},
    {"_id": "2", "name": "Azure Cosmos DB for RDBMS Users", "pub-id": "mspress"},
    {"_id": "3", "name": "Taking over the world one JSON doc at a time"},
])
books = list(db.books.aggregate([
    {"$lookup": {"from": "publishers", "localField": "pub-id", "foreignField": "_id", "as": "publisher"}},
    {"$project": {"_id": 0, "name": 1, "publisher": "$publisher.name"}},
    {"$sort": {"name": 1}},
]))
count_of_books = list(db.books.aggregate([
    {"$match": {"pub-id": {"$exists": True}}},
    {"$group": {"_id": "$pub-id", "countOfBooks": {"$sum": 1}}},
]))
sc = client().school.students_classes
sc.insert_many([
    {"_id": "CS101-001", "doc_type": "class", "class_name": "Introduction to Programming",
     "links": [{"target": "CS101-001", "doc_type": "class"}, {"target": "S10023", "doc_type": "student"},
               {"target": "S12345", "doc_type": "student"}]},
    {"_id": "MATH201-002", "doc_type": "class", "class_name": "Calculus II",
     "links": [{"target": "MATH201-002", "doc_type": "class"}, {"target": "S12345", "doc_type": "student"}]},
    {"_id": "S12345", "doc_type": "student", "name": "Jane Doe",
     "links": [{"target": "CS101-001", "doc_type": "class"}, {"target": "MATH201-002", "doc_type": "class"},
               {"target": "S12345", "doc_type": "student"}]},
    {"_id": "S10023", "doc_type": "student", "name": "Taro Yamada",
     "links": [{"target": "CS101-001", "doc_type": "class"}, {"target": "S10023", "doc_type": "student"}]},
])
# Multikey foreign field: classes whose links name the student.
classes = list(sc.aggregate([
    {"$match": {"_id": "S12345"}},
    {"$lookup": {"from": "students_classes", "localField": "_id", "foreignField": "links.target", "as": "related"}},
    {"$project": {"name": 1, "classes": {"$filter": {"input": "$related", "cond": {"$eq": ["$$this.doc_type", "class"]}}}}},
    {"$project": {"name": 1, "classes": {"$sortArray": {"input": "$classes.class_name", "sortBy": 1}}}},
]))
roster = list(sc.aggregate([
    {"$match": {"doc_type": "class"}},
    {"$lookup": {"from": "students_classes", "let": {"cls": "$_id"}, "as": "students", "pipeline": [
        {"$match": {"doc_type": "student", "$expr": {"$in": ["$$cls", "$links.target"]}}},
        {"$project": {"_id": 0, "name": 1}}, {"$sort": {"name": 1}}]}},
    {"$project": {"students": "$students.name"}},
    {"$sort": {"_id": 1}},
]))
explain = db.command("aggregate", "books", pipeline=[
    {"$lookup": {"from": "publishers", "localField": "pub-id", "foreignField": "_id", "as": "publisher"}}], explain=True)
strategy = explain["stages"][1]["$lookup"]["bunkoStrategy"]
print(json.dumps({"books": books, "count": count_of_books, "classes": classes, "roster": roster, "strategy": strategy}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out,
        json!({
            "books": [
                {"name": "Azure Cosmos DB 101", "publisher": ["Microsoft Press"]},
                {"name": "Azure Cosmos DB for RDBMS Users", "publisher": ["Microsoft Press"]},
                {"name": "Taking over the world one JSON doc at a time", "publisher": []},
            ],
            "count": [{"_id": "mspress", "countOfBooks": 2}],
            "classes": [{"_id": "S12345", "name": "Jane Doe", "classes": ["Calculus II", "Introduction to Programming"]}],
            "roster": [
                {"_id": "CS101-001", "students": ["Jane Doe", "Taro Yamada"]},
                {"_id": "MATH201-002", "students": ["Jane Doe"]},
            ],
            "strategy": "IdLookups",
        })
    );
}

/// IoT readings (seed 003): the per-device average with `$group`, `count_documents`,
/// `estimated_document_count`, `$facet`, `$out` (read back over HTTP too), a small
/// `batchSize` answered through `getMore`, `explain` showing the pushed-down stages, and
/// MongoDB's errors for an unknown stage and a bad expression.
#[test]
fn iot_readings_group_facet_out_and_cursor() {
    let server = Server::start();
    let script = r#"
db = client().acme
docs = []
for i in range(30):
    dev = "device-%d" % (i % 3)
    docs.append({"_id": "r%02d" % i, "deviceID": dev, "ts": datetime.datetime(2024, 1, 1 + i % 5, tzinfo=datetime.timezone.utc),
                 "reading": {"temperature": {"value": i, "unit": "c"}}})
db.readings.insert_many(docs)
avg = list(db.readings.aggregate([
    {"$match": {"reading.temperature.unit": "c"}},
    {"$group": {"_id": "$deviceID", "avg": {"$avg": "$reading.temperature.value"},
                "max": {"$max": "$reading.temperature.value"}, "n": {"$count": {}}}},
    {"$sort": {"_id": 1}},
]))
count = db.readings.count_documents({"deviceID": "device-1"})
count_skip = db.readings.count_documents({}, skip=5, limit=10)
estimated = db.readings.estimated_document_count()
facet = list(db.readings.aggregate([
    {"$facet": {
        "byDay": [{"$group": {"_id": {"$dayOfMonth": "$ts"}, "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}],
        "hot": [{"$match": {"reading.temperature.value": {"$gte": 27}}}, {"$count": "n"}],
        "buckets": [{"$bucket": {"groupBy": "$reading.temperature.value", "boundaries": [0, 10, 20, 30]}}],
    }}
]))
db.readings.aggregate([
    {"$match": {"deviceID": "device-2"}},
    {"$project": {"deviceID": 1, "f": {"$add": [{"$multiply": ["$reading.temperature.value", 1.8]}, 32]}}},
    {"$out": "fahrenheit"},
])
out_docs = list(db.fahrenheit.find({}, {"_id": 1, "f": 1}).sort("_id", 1).limit(2))
batches = db.command("aggregate", "readings", pipeline=[{"$sort": {"_id": -1}}], cursor={"batchSize": 4})
all_ids = [d["_id"] for d in db.readings.aggregate([{"$sort": {"_id": -1}}, {"$project": {"_id": 1}}], batchSize=4)]
explain = db.command("aggregate", "readings", pipeline=[
    {"$match": {"_id": "r01"}}, {"$limit": 5}, {"$group": {"_id": "$deviceID"}}], explain=True)
first = explain["stages"][0]["$cursor"]
docs_stage = list(client().acme.aggregate([{"$documents": [{"x": 1}, {"x": 2}]}, {"$set": {"y": {"$multiply": ["$x", 10]}}}]))
print(json.dumps({
    "avg": avg, "count": count, "count_skip": count_skip, "estimated": estimated, "facet": facet,
    "out": out_docs, "first_batch": len(batches["cursor"]["firstBatch"]), "cursor_open": batches["cursor"]["id"] != 0,
    "all_ids": len(all_ids), "first_id": all_ids[0],
    "pushed": first["pushedDown"], "plan": first["queryPlanner"]["winningPlan"]["stage"],
    "rest": [list(s.keys())[0] for s in explain["stages"][1:]],
    "unknown": code_of(lambda: list(db.readings.aggregate([{"$foo": {}}]))),
    "bad_expr": code_of(lambda: list(db.readings.aggregate([{"$project": {"x": {"$frob": 1}}}]))),
    "size_err": code_of(lambda: list(db.readings.aggregate([{"$project": {"x": {"$size": "$deviceID"}}}]))),
    "documents": docs_stage,
}, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out["avg"],
        json!([
            {"_id": "device-0", "avg": 13.5, "max": 27, "n": 10},
            {"_id": "device-1", "avg": 14.5, "max": 28, "n": 10},
            {"_id": "device-2", "avg": 15.5, "max": 29, "n": 10},
        ])
    );
    assert_eq!((out["count"].clone(), out["count_skip"].clone()), (json!(10), json!(10)));
    assert_eq!(out["estimated"], 30);
    assert_eq!(
        out["facet"],
        json!([{
            "byDay": [{"_id": 1, "n": 6}, {"_id": 2, "n": 6}, {"_id": 3, "n": 6}, {"_id": 4, "n": 6}, {"_id": 5, "n": 6}],
            "hot": [{"n": 3}],
            "buckets": [{"_id": 0, "count": 10}, {"_id": 10, "count": 10}, {"_id": 20, "count": 10}],
        }])
    );
    assert_eq!(out["out"], json!([{"_id": "r02", "f": 35.6}, {"_id": "r05", "f": 41.0}]));
    assert_eq!((out["first_batch"].clone(), out["cursor_open"].clone()), (json!(4), json!(true)));
    assert_eq!((out["all_ids"].clone(), out["first_id"].clone()), (json!(30), json!("r29")));
    assert_eq!(out["pushed"], json!(["$match", "$limit"]));
    assert_eq!(out["plan"], "IDHACK");
    assert_eq!(out["rest"], json!(["$group"]));
    assert_eq!(out["unknown"], 40324);
    assert_eq!(out["bad_expr"], 168);
    assert_eq!(out["size_err"], 17124);
    assert_eq!(out["documents"], json!([{"x": 1, "y": 10}, {"x": 2, "y": 20}]));
    // `$out` wrote ordinary documents: the CouchDB API sees them.
    let doc = server.get_doc("acme$fahrenheit", "r02");
    assert_eq!(doc["deviceID"], "device-2", "{doc}");
}

/// `$expr` in `find`, `count_documents`, `delete` and `update` filters, and pipeline-style
/// updates (`update_one`/`update_many`/`find_one_and_update` with a list of stages), both
/// through the aggregation evaluator; the result is a new revision over HTTP too.
#[test]
fn expr_filters_and_pipeline_updates() {
    let server = Server::start();
    let script = r#"
c = client().shop.budgets
c.insert_many([
    {"_id": 1, "category": "food", "budget": 400, "spent": 450},
    {"_id": 2, "category": "drinks", "budget": 100, "spent": 150},
    {"_id": 3, "category": "clothes", "budget": 100, "spent": 50},
    {"_id": 4, "category": "misc", "budget": 500, "spent": 300},
])
over = sorted(d["_id"] for d in c.find({"$expr": {"$gt": ["$spent", "$budget"]}}))
over_food = [d["_id"] for d in c.find({"category": "food", "$expr": {"$gt": ["$spent", "$budget"]}})]
n = c.count_documents({"$expr": {"$lt": ["$spent", 100]}})
upd = c.update_many({"$expr": {"$gt": ["$spent", "$budget"]}},
                    [{"$set": {"over": {"$subtract": ["$spent", "$budget"]}, "category": {"$toUpper": "$category"}}}])
one = c.find_one_and_update({"_id": 4}, [{"$set": {"left": {"$subtract": ["$budget", "$spent"]}}}, {"$unset": "spent"}],
                            return_document=True)
c.update_one({"_id": 9}, [{"$set": {"created": {"$literal": True}, "n": {"$add": [1, 2]}}}], upsert=True)
deleted = c.delete_many({"$expr": {"$eq": ["$spent", 50]}}).deleted_count
print(json.dumps({"over": over, "over_food": over_food, "n": n, "modified": upd.modified_count,
                  "one": one, "upserted": c.find_one({"_id": 9}), "deleted": deleted,
                  "food": c.find_one({"_id": 1}),
                  "nested": len(list(c.find({"$and": [{"$expr": False}]}))),
                  "bad_stage": code_of(lambda: c.update_one({"_id": 1}, [{"$group": {"_id": 1}}]))}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["over"], json!([1, 2]));
    assert_eq!(out["over_food"], json!([1]));
    assert_eq!(out["n"], 1);
    assert_eq!(out["modified"], 2);
    assert_eq!(out["one"], json!({"_id": 4, "category": "misc", "budget": 500, "left": 200}));
    assert_eq!(out["upserted"], json!({"_id": 9, "created": true, "n": 3}));
    assert_eq!(out["deleted"], 1);
    assert_eq!(
        out["food"],
        json!({"_id": 1, "category": "FOOD", "budget": 400, "spent": 450, "over": 50})
    );
    assert_eq!((out["nested"].clone(), out["bad_stage"].clone()), (json!(0), json!(72)));
}

/// `aggregate` (and so `count_documents`) inside a transaction reads the transaction's own
/// writes, including through `$lookup`; `$out` there is `OperationNotSupportedInTransaction`.
#[test]
fn aggregate_in_a_transaction_sees_its_own_writes() {
    let server = Server::start();
    let script = r#"
c = client()
db = c.library
db.publishers.insert_one({"_id": "mspress", "name": "Microsoft Press"})
db.books.insert_one({"_id": "1", "name": "Azure Cosmos DB 101", "pub-id": "mspress"})
seen = {}
def add_book(s):
    db.books.insert_one({"_id": "2", "name": "Azure Cosmos DB for RDBMS Users", "pub-id": "mspress"}, session=s)
    db.publishers.update_one({"_id": "mspress"}, {"$set": {"name": "MS Press"}}, session=s)
    seen["inside"] = db.books.count_documents({"pub-id": "mspress"}, session=s)
    seen["joined"] = [d["p"] for d in db.books.aggregate([
        {"$lookup": {"from": "publishers", "localField": "pub-id", "foreignField": "_id", "as": "p"}},
        {"$project": {"p": {"$first": "$p.name"}}}, {"$sort": {"_id": 1}}], session=s)]
    seen["outside"] = db.books.count_documents({"pub-id": "mspress"})
with c.start_session() as s:
    s.with_transaction(add_book)
seen["after"] = db.books.count_documents({"pub-id": "mspress"})
with c.start_session() as s:
    s.start_transaction()
    seen["out"] = code_of(lambda: list(db.books.aggregate([{"$out": "copy"}], session=s)))
    s.abort_transaction()
print(json.dumps(seen))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out,
        json!({"inside": 2, "joined": ["MS Press", "MS Press"], "outside": 1, "after": 2, "out": 263})
    );
}

/// `$group` and `$sort` over more data than the server's memory budget (here 20 kB, set
/// with `--mongo-agg-memory-limit`): with `allowDiskUse` (the default, as MongoDB 6+) they
/// spill to temporary keys and answer exactly what Python computes in memory; with
/// `allowDiskUse: false` they fail with MongoDB's 292 and its message.
#[test]
fn group_and_sort_past_the_memory_budget_spill_to_disk() {
    let server = Server::start_with(&["--mongo-agg-memory-limit", "20000"], &[]);
    let script = r#"
db = client().acme
docs = [{"_id": i, "deviceID": "device-%03d" % ((i * 7) % 300), "t": (i * 37) % 1000,
         "value": (i % 13) / 2, "pad": "x" * 40} for i in range(3000)]
db.readings.insert_many(docs)
groups = list(db.readings.aggregate([
    {"$sort": {"_id": 1}},
    {"$group": {"_id": "$deviceID", "n": {"$sum": 1}, "avg": {"$avg": "$value"},
                "first": {"$first": "$t"}, "ts": {"$push": "$t"}}},
    {"$sort": {"_id": 1}},
]))
expected = {}
for d in docs:
    g = expected.setdefault(d["deviceID"], {"_id": d["deviceID"], "n": 0, "sum": 0, "first": d["t"], "ts": []})
    g["n"] += 1; g["sum"] += d["value"]; g["ts"].append(d["t"])
expected = [{"_id": k, "n": g["n"], "avg": g["sum"] / g["n"], "first": g["first"], "ts": g["ts"]}
            for k, g in sorted(expected.items())]
sorted_ids = [d["_id"] for d in db.readings.aggregate([{"$sort": {"t": -1, "deviceID": 1}}, {"$project": {"_id": 1}}])]
expected_ids = [d["_id"] for d in sorted(docs, key=lambda d: (-d["t"], d["deviceID"]))]
def failure(pipeline):
    try:
        db.command("aggregate", "readings", pipeline=pipeline, cursor={}, allowDiskUse=False)
    except OperationFailure as e:
        return [e.code, e.details.get("codeName"), e.details.get("errmsg")]
print(json.dumps({
    "groups_equal": groups == expected, "groups": len(groups), "diff": [[g, e] for g, e in zip(groups, expected) if g != e][:1],
    "sort_equal": sorted_ids == expected_ids, "sorted": len(sorted_ids),
    "group_err": failure([{"$group": {"_id": "$deviceID", "all": {"$push": "$$ROOT"}}}]),
    "sort_err": failure([{"$sort": {"t": 1}}]),
    "small_ok": list(db.readings.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}}}], allowDiskUse=False)),
}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        (out["groups_equal"].clone(), out["groups"].clone()),
        (json!(true), json!(300)),
        "{}",
        out["diff"]
    );
    assert_eq!((out["sort_equal"].clone(), out["sorted"].clone()), (json!(true), json!(3000)));
    assert_eq!(
        out["group_err"],
        json!([
            292,
            "QueryExceededMemoryLimitNoDiskUseAllowed",
            "Exceeded memory limit for $group, but didn't allow external spilling; pass allowDiskUse:true to opt in"
        ])
    );
    assert_eq!(
        out["sort_err"],
        json!([
            292,
            "QueryExceededMemoryLimitNoDiskUseAllowed",
            "Sort exceeded memory limit of 20000 bytes, but did not opt in to external sorting."
        ])
    );
    assert_eq!(out["small_ok"], json!([{"_id": null, "n": 3000}]));
}

/// `$expr` inside `$and`/`$or`/`$nor` and `$jsonSchema` as a query operator, in `find`,
/// `count_documents`, `delete_many` and `$match` (pushed down or after another stage).
#[test]
fn expr_in_logical_operators_and_json_schema_filters() {
    let server = Server::start();
    let script = r#"
db = client().shop
db.items.insert_many([
    {"_id": 1, "name": "pen", "qty": 5, "limit": 3},
    {"_id": 2, "name": "ink", "qty": 1, "limit": 3},
    {"_id": 3, "name": "pad", "qty": 2.5, "limit": 3},
    {"_id": 4, "qty": 9, "limit": 10},
])
over = {"$expr": {"$gt": ["$qty", "$limit"]}}
ints = {"$jsonSchema": {"required": ["name"], "properties": {"qty": {"bsonType": "int"}}}}
ids = lambda f: sorted(d["_id"] for d in db.items.find(f))
out = {
    "or": ids({"$or": [over, {"name": "ink"}]}),
    "and": ids({"$and": [over, {"name": "ink"}]}),
    "nor": ids({"$nor": [over, {"name": "pad"}]}),
    "nested": ids({"qty": {"$gte": 1}, "$or": [{"$and": [over, {"qty": {"$lt": 6}}]}, {"_id": 4}]}),
    "schema": ids(ints),
    "schema_or": ids({"$or": [ints, {"_id": 4}]}),
    "count": db.items.count_documents({"$or": [over, ints]}),
    "match": [d["_id"] for d in db.items.aggregate([{"$match": {"$or": [over, {"name": "ink"}]}}, {"$sort": {"_id": -1}}])],
    "match_later": [d["_id"] for d in db.items.aggregate([{"$set": {"limit": 0}}, {"$match": {"$and": [over, ints]}}, {"$sort": {"_id": 1}}])],
    "bad_schema": code_of(lambda: list(db.items.find({"$jsonSchema": {"bogus": 1}}))),
}
doubles = {"$jsonSchema": {"properties": {"qty": {"bsonType": "double"}}}}
out["deleted"] = db.items.delete_many({"$or": [over, doubles]}).deleted_count
out["left"] = ids({})
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out,
        json!({
            "or": [1, 2], "and": [], "nor": [2, 4], "nested": [1, 4], "schema": [1, 2],
            "schema_or": [1, 2, 4], "count": 2, "match": [2, 1], "match_later": [1, 2],
            "bad_schema": 9, "deleted": 2, "left": [2, 4],
        })
    );
}

/// `$sort` + `$limit` (and `find().sort().limit()`) on the leading field of an index are
/// served by scanning the index in order, forwards or backwards, and answer what an
/// in-memory sort answers: numbers across types, a missing field as `null`, an array at its
/// smallest element ascending and its largest descending, a filter applied on the way.
#[test]
fn sort_and_limit_on_an_indexed_field_match_the_in_memory_sort() {
    let server = Server::start();
    let script = r#"
db = client().iot
docs = [{"_id": "r%03d" % i, "ts": (i * 37) % 200, "even": i % 2 == 0} for i in range(200)]
docs += [{"_id": "no-ts"}, {"_id": "arr", "ts": [150, -5, 999]}, {"_id": "dbl", "ts": 10.5}]
db.readings.insert_many(docs)
def run(pipeline):
    return [d["_id"] for d in db.readings.aggregate(pipeline)]
pipelines = [
    [{"$sort": {"ts": -1}}, {"$limit": 5}],
    [{"$sort": {"ts": 1}}, {"$limit": 4}],
    [{"$match": {"even": True}}, {"$sort": {"ts": -1}}, {"$skip": 2}, {"$limit": 3}],
]
before = [run(p) for p in pipelines]
db.readings.create_index([("ts", -1)])
after = [run(p) for p in pipelines]
found = [d["_id"] for d in db.readings.find({}, {"_id": 1}).sort("ts", -1).limit(3)]
print(json.dumps({"before": before, "after": after, "found": found}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["before"], out["after"], "{out}");
    assert_eq!(out["after"][0], json!(["arr", "r027", "r054", "r081", "r108"]));
    assert_eq!(
        (out["after"][1][0].clone(), out["after"][1][1].clone()),
        (json!("no-ts"), json!("arr"))
    );
    assert_eq!(out["found"], json!(["arr", "r027", "r054"]));
}

/// A pipeline reads one storage snapshot for its whole life: documents written, changed or
/// deleted after `aggregate` returned its first batch are not seen by the `getMore`s that
/// stream the rest, neither in the collection nor in a `$lookup`'s foreign collection.
#[test]
fn a_pipeline_cursor_reads_one_snapshot_across_get_more() {
    let server = Server::start();
    let script = r#"
db = client().snap
db.items.insert_many([{"_id": i, "v": i} for i in range(2500)])
db.other.insert_many([{"_id": i, "w": i * 2} for i in range(2500)])
cur = db.items.aggregate([
    {"$match": {"v": {"$gte": 0}}},
    {"$lookup": {"from": "other", "localField": "_id", "foreignField": "_id", "as": "o"}},
    {"$project": {"v": 1, "w": {"$first": "$o.w"}}},
], batchSize=10)
first = [next(cur) for _ in range(10)]
db.items.delete_many({"_id": {"$gte": 100}})
db.items.insert_one({"_id": 5000, "v": 1})
db.other.update_many({}, {"$set": {"w": -1}})
rest = list(cur)
docs = first + rest
now = list(db.items.aggregate([{"$count": "n"}]))
print(json.dumps({
    "n": len(docs), "ids": sorted(d["_id"] for d in docs) == list(range(2500)),
    "joined": all(d["w"] == 2 * d["_id"] for d in docs), "now": now,
}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out, json!({"n": 2500, "ids": true, "joined": true, "now": [{"n": 101}]}));
}

/// `explain` shows an index-served sort as MongoDB does, for `find` and `aggregate`: an
/// `IXSCAN` with its `direction` (and bounds in scan order) under `FETCH` and `LIMIT`, no
/// `SORT` stage; an unindexed sort keeps its `SORT`. A `$lookup` on an indexed foreign
/// field (1000 documents, 100 values asked) reads each value through the index
/// (`IndexedLoopJoin` with the index's name), and answers as the unindexed join (`HashJoin`)
/// does.
#[test]
fn explain_shows_index_served_sorts_and_indexed_lookups() {
    let server = Server::start();
    let script = r#"
db = client().plans
db.readings.insert_many([{"_id": "r%03d" % i, "ts": i, "code": "c%d" % (i % 100)} for i in range(300)])
db.codes.insert_many([{"_id": i, "code": "c%d" % i, "label": "L%d" % i} for i in range(1000)])
db.readings.create_index([("ts", -1)])
def plan(p):
    return db.command("aggregate", "readings", pipeline=p, explain=True)["stages"]
agg = plan([{"$sort": {"ts": -1}}, {"$limit": 10}, {"$project": {"ts": 1}}])
find_desc = db.readings.find().sort("ts", -1).limit(10).explain()["queryPlanner"]["winningPlan"]
find_asc = db.readings.find().sort("ts", 1).limit(3).explain()["queryPlanner"]["winningPlan"]
unindexed = db.readings.find().sort("code", 1).limit(3).explain()["queryPlanner"]["winningPlan"]
top = [d["ts"] for d in db.readings.aggregate([{"$sort": {"ts": -1}}, {"$limit": 3}])]
lookup = [{"$lookup": {"from": "codes", "localField": "code", "foreignField": "code", "as": "c"}},
          {"$project": {"label": {"$first": "$c.label"}}}, {"$sort": {"_id": 1}}]
hash_join = list(db.readings.aggregate(lookup))
hash_plan = plan(lookup)[1]
db.codes.create_index("code")
index_join = list(db.readings.aggregate(lookup))
index_plan = plan(lookup)[1]
def ix(p):
    while p.get("inputStage"):
        p = p["inputStage"]
    return p
def chain(p):
    out = [p["stage"]]
    while p.get("inputStage"):
        p = p["inputStage"]
        out.append(p["stage"])
    return out
print(json.dumps({
    "agg": chain(agg[0]["$cursor"]["queryPlanner"]["winningPlan"]),
    "agg_ix": {k: ix(agg[0]["$cursor"]["queryPlanner"]["winningPlan"])[k] for k in ["keyPattern", "indexName", "direction", "indexBounds"]},
    "agg_rest": [list(s.keys())[0] for s in agg[1:]],
    "find_desc": chain(find_desc), "desc_dir": ix(find_desc)["direction"], "desc_bounds": ix(find_desc)["indexBounds"],
    "find_asc": chain(find_asc), "asc_dir": ix(find_asc)["direction"], "asc_bounds": ix(find_asc)["indexBounds"],
    "unindexed": chain(unindexed), "top": top,
    "joins_agree": hash_join == index_join, "label": index_join[7]["label"], "n": len(index_join),
    "hash": [hash_plan["strategy"], hash_plan["$lookup"]["bunkoStrategy"], hash_plan.get("indexName")],
    "indexed": [index_plan["strategy"], index_plan["$lookup"]["bunkoStrategy"], index_plan.get("indexName")],
}))
"#;
    let Some(out) = python(&server, script) else { return };
    let ixscan = json!(["LIMIT", "FETCH", "IXSCAN"]);
    assert_eq!(out["agg"], ixscan, "{out}");
    assert_eq!(
        out["agg_ix"],
        json!({"keyPattern": {"ts": -1}, "indexName": "ts_-1", "direction": "forward",
               "indexBounds": {"ts": ["[MaxKey, MinKey]"]}})
    );
    assert_eq!(out["agg_rest"], json!(["$project"]));
    assert_eq!((&out["find_desc"], &out["desc_dir"]), (&ixscan, &json!("forward")));
    assert_eq!(out["desc_bounds"], json!({"ts": ["[MaxKey, MinKey]"]}));
    assert_eq!((&out["find_asc"], &out["asc_dir"]), (&ixscan, &json!("backward")));
    assert_eq!(out["asc_bounds"], json!({"ts": ["[MinKey, MaxKey]"]}));
    assert_eq!(out["unindexed"], json!(["LIMIT", "SORT", "COLLSCAN"]));
    assert_eq!(out["top"], json!([299, 298, 297]));
    assert_eq!(
        (&out["joins_agree"], &out["label"], &out["n"]),
        (&json!(true), &json!("L7"), &json!(300))
    );
    assert_eq!(out["hash"], json!(["HashJoin", "CollectionRead", null]));
    assert_eq!(out["indexed"], json!(["IndexedLoopJoin", "IndexLookups", "code_1"]));
}

/// A `$lookup`'s `let` variables are visible in every `$expr` of its sub-pipeline: nested in
/// `$and`/`$or`, in a nested `$lookup` and in a `$facet` (MongoDB's documented "multiple
/// join conditions with `$lookup`" example, written with nested `$expr`s).
#[test]
fn lookup_let_variables_reach_nested_expr() {
    let server = Server::start();
    let script = r#"
db = client().letvars
db.orders.insert_many([
    {"_id": 1, "item": "almonds", "price": 12, "ordered": 2},
    {"_id": 2, "item": "pecans", "price": 20, "ordered": 1},
    {"_id": 3, "item": "cookies", "price": 10, "ordered": 60},
])
db.warehouses.insert_many([
    {"_id": 1, "stock_item": "almonds", "warehouse": "A", "instock": 120},
    {"_id": 2, "stock_item": "pecans", "warehouse": "A", "instock": 80},
    {"_id": 3, "stock_item": "almonds", "warehouse": "B", "instock": 60},
    {"_id": 4, "stock_item": "cookies", "warehouse": "B", "instock": 40},
    {"_id": 5, "stock_item": "cookies", "warehouse": "A", "instock": 80},
])
def joined(match):
    return list(db.orders.aggregate([
        {"$lookup": {"from": "warehouses", "let": {"order_item": "$item", "order_qty": "$ordered"},
                     "pipeline": [match, {"$project": {"stock_item": 0, "_id": 0}}], "as": "stockdata"}},
        {"$sort": {"_id": 1}},
    ]))
top = joined({"$match": {"$expr": {"$and": [{"$eq": ["$stock_item", "$$order_item"]},
                                              {"$gte": ["$instock", "$$order_qty"]}]}}})
nested = joined({"$match": {"$and": [{"$expr": {"$eq": ["$stock_item", "$$order_item"]}},
                                     {"$or": [{"$expr": {"$gte": ["$instock", "$$order_qty"]}}]}]}})
deeper = list(db.orders.aggregate([
    {"$match": {"_id": 1}},
    {"$lookup": {"from": "warehouses", "let": {"order_item": "$item", "order_qty": "$ordered"}, "as": "w", "pipeline": [
        {"$match": {"$and": [{"$expr": {"$eq": ["$stock_item", "$$order_item"]}}]}},
        {"$lookup": {"from": "orders", "as": "same", "pipeline": [
            {"$match": {"$or": [{"$expr": {"$eq": ["$item", "$$order_item"]}}]}}, {"$count": "n"}]}},
        {"$facet": {"big": [{"$match": {"$and": [{"$expr": {"$gt": ["$instock", {"$multiply": ["$$order_qty", 40]}]}}]}},
                            {"$project": {"_id": 1}}],
                    "same": [{"$limit": 1}, {"$project": {"_id": 0, "same": 1}}]}},
    ]}},
]))
print(json.dumps({"top": top, "nested": nested, "deeper": deeper[0]["w"]}))
"#;
    let Some(out) = python(&server, script) else { return };
    let expected = json!([
        {"_id": 1, "item": "almonds", "price": 12, "ordered": 2,
         "stockdata": [{"warehouse": "A", "instock": 120}, {"warehouse": "B", "instock": 60}]},
        {"_id": 2, "item": "pecans", "price": 20, "ordered": 1,
         "stockdata": [{"warehouse": "A", "instock": 80}]},
        {"_id": 3, "item": "cookies", "price": 10, "ordered": 60,
         "stockdata": [{"warehouse": "A", "instock": 80}]},
    ]);
    assert_eq!(out["top"], expected, "{out}");
    assert_eq!(out["nested"], expected);
    assert_eq!(out["deeper"], json!([{"big": [{"_id": 1}], "same": [{"same": [{"n": 1}]}]}]));
}

/// The advisor's query log sees aggregation pipelines as it sees `find`: a `$match` on an
/// unindexed field, run three times, is a `missing-index` finding with the documents the
/// pipeline read.
#[test]
fn aggregate_queries_reach_the_advisors_query_log() {
    let server = Server::start();
    let script = r#"
shop = client().shop
shop.reviews.insert_many([{"_id": n, "product": f"p{n % 30}", "stars": n % 5} for n in range(300)])
for p in range(3):
    list(shop.reviews.aggregate([{"$match": {"product": f"p{p}"}},
                                 {"$group": {"_id": "$product", "avg": {"$avg": "$stars"}}}]))
advice = shop.command("advise", "reviews")
missing = [f["evidence"] for f in advice["findings"] if f["rule"] == "missing-index"]
print(json.dumps({"missing": missing}, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    let e = &out["missing"][0];
    assert_eq!(out["missing"].as_array().map(Vec::len), Some(1), "{out}");
    assert_eq!(e["selector"], json!({"product": {"$eq": "?"}}), "{out}");
    assert_eq!(
        (e["runs"].clone(), e["docs_examined"].clone(), e["results_returned"].clone()),
        (json!(3), json!(900), json!(30))
    );
    assert_eq!(
        (e["suggested_index"].clone(), e["api"].clone()),
        (json!(["product"]), json!("mongodb"))
    );
}

/// A double becomes a Decimal128 as MongoDB converts it, rounded to 15 significant digits
/// (MongoDB's documented `$toDecimal` examples), also inside decimal arithmetic.
#[test]
fn doubles_enter_decimals_with_fifteen_significant_digits() {
    let server = Server::start();
    let script = r#"
from bson.decimal128 import Decimal128
db = client().shop
out = db.aggregate([{"$documents": [{"d": 2.5, "i": 5, "b": True, "s": "-5.5"}]},
    {"$project": {"_id": 0, "d": {"$toDecimal": "$d"}, "i": {"$toDecimal": "$i"},
                  "b": {"$toDecimal": "$b"}, "s": {"$toDecimal": "$s"},
                  "sum": {"$add": [Decimal128("1"), 0.1]}}}]).next()
print(json.dumps({k: str(v) for k, v in out.items()}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(
        out,
        json!({"d": "2.50000000000000", "i": "5", "b": "1", "s": "-5.5", "sum": "1.100000000000000"})
    );
}

/// `$facet` keeps to the memory budget (its input past the budget is spilled and each facet
/// reads it back; without `allowDiskUse` it fails with 292), and `$unionWith` streams the
/// other collection from the pipeline's snapshot: the answers equal Python's.
#[test]
fn facet_and_union_with_keep_to_the_memory_budget() {
    let server = Server::start_with(&["--mongo-agg-memory-limit", "20000"], &[]);
    let script = r#"
db = client().acme
docs = [{"_id": i, "deviceID": "device-%03d" % ((i * 7) % 300), "t": (i * 37) % 1000,
         "pad": "x" * 40} for i in range(3000)]
db.readings.insert_many(docs)
db.archive.insert_many([{"_id": 10000 + i, "deviceID": "old", "t": i} for i in range(2000)])
facet = db.readings.aggregate([{"$facet": {
    "n": [{"$count": "n"}],
    "late": [{"$match": {"t": {"$gte": 990}}}, {"$sort": {"_id": 1}}, {"$project": {"_id": 1}}],
    "first": [{"$limit": 2}, {"$project": {"_id": 1, "t": 1}}],
}}]).next()
late = [{"_id": d["_id"]} for d in docs if d["t"] >= 990]
union = list(db.readings.aggregate([{"$project": {"_id": 1}},
                                    {"$unionWith": {"coll": "archive", "pipeline": [{"$match": {"t": {"$lt": 5}}}, {"$project": {"_id": 1}}]}}]))
try:
    db.command("aggregate", "readings", pipeline=[{"$facet": {"all": [{"$project": {"_id": 1}}]}}], cursor={}, allowDiskUse=False)
    refused = None
except OperationFailure as e:
    refused = e.code
print(json.dumps({
    "n": facet["n"], "late_equal": facet["late"] == late, "late": len(facet["late"]),
    "first": facet["first"], "union": len(union),
    "union_tail": [d["_id"] for d in union[-5:]], "refused": refused,
}))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["n"], json!([{"n": 3000}]));
    assert_eq!((out["late_equal"].clone(), out["late"].clone()), (json!(true), json!(30)));
    assert_eq!(out["first"], json!([{"_id": 0, "t": 0}, {"_id": 1, "t": 37}]));
    assert_eq!(out["union"], json!(3005));
    assert_eq!(out["union_tail"], json!([10000, 10001, 10002, 10003, 10004]));
    assert_eq!(out["refused"], json!(292));
}

/// Issue 13: `$merge` with `whenMatched: "fail"` answers MongoDB's duplicate key error with
/// the `keyPattern` and `keyValue` drivers and Mongoose read.
#[test]
fn merge_fail_reports_the_duplicate_key() {
    let server = Server::start();
    let script = r#"
c = client()
c.shop.test.insert_many([{"_id": 1, "x": 1}, {"_id": 2, "x": 1}])
try:
    c.shop.aggregate([{"$documents": [{"_id": 2, "x": 1}]}, {"$merge": {"into": "test", "whenMatched": "fail"}}])
    out = None
except OperationFailure as e:
    out = {"code": e.code, "keyPattern": e.details.get("keyPattern"), "keyValue": e.details.get("keyValue")}
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out, json!({"code": 11000, "keyPattern": {"_id": 1}, "keyValue": {"_id": 2}}));
}

/// A `$match` + `$group` over a collection parses only the members the filter and the
/// group read (issue 14, point 3): answers are the same whatever the filter reads
/// (`$expr`, a nested path, `$jsonSchema`, which may read every member, a field name with
/// an escape), for BSON-only types, and for a `$match` after the `$group`.
#[test]
fn group_reads_only_the_fields_it_needs_with_the_same_answer() {
    let server = Server::start();
    let script = r#"
db = client().acme
docs = []
for i in range(40):
    docs.append({"_id": i, "pad": "x" * 500, "deviceID": "d%d" % (i % 4), "big": bson.int64.Int64(10**12 + i),
                 "dec": bson.decimal128.Decimal128("%d.5" % i), "s\u00e9": {"t": i % 2, "u": [i, i + 1]},
                 "type": "reading" if i % 5 else "other", "when": datetime.datetime(2024, 1, 1 + i % 3)})
db.r.insert_many(docs)
def run(*stages):
    return list(db.r.aggregate(list(stages) + [{"$sort": {"_id": 1}}]))
grp = {"$group": {"_id": "$deviceID", "n": {"$sum": 1}, "big": {"$max": "$big"}, "dec": {"$sum": "$dec"}}}
print(json.dumps({
    "plain": run({"$match": {"type": "reading"}}, grp),
    "expr": run({"$match": {"$expr": {"$lt": ["$big", 10**12 + 20]}}}, grp),
    "nested": run({"$match": {"s\u00e9.u": {"$in": [3, 4]}, "s\u00e9.t": 1}}, grp),
    "schema": run({"$match": {"$jsonSchema": {"required": ["pad"], "properties": {"pad": {"maxLength": 10}}}}}, grp),
    "after": run({"$match": {"when": {"$gte": datetime.datetime(2024, 1, 2)}}}, grp, {"$match": {"n": {"$gt": 6}}}),
    "dates": run({"$group": {"_id": {"$dayOfMonth": "$when"}, "last": {"$max": "$when"}}}),
}, default=str))
"#;
    let Some(out) = python(&server, script) else { return };
    let group = |n: i64, big: i64, dec: &str| json!({"n": n, "big": big, "dec": dec});
    let with_id = |id: &str, mut g: serde_json::Value| {
        g["_id"] = json!(id);
        g
    };
    // Readings are the ids not divisible by 5: device d0 holds 4, 8, 12, ... 36 (8 of 10).
    assert_eq!(out["plain"][0], with_id("d0", group(8, 1_000_000_000_036, "164.0")));
    assert_eq!(out["plain"].as_array().map(Vec::len), Some(4));
    assert_eq!(out["expr"][1], with_id("d1", group(5, 1_000_000_000_017, "47.5")));
    assert_eq!(out["nested"], json!([with_id("d3", group(1, 1_000_000_000_003, "3.5"))]));
    assert_eq!(out["schema"], json!([]));
    // Days 2 and 3 are the ids with i % 3 != 0: d1 and d2 hold 7 of them, d0 and d3 6.
    let after = out["after"].as_array().map(|a| a.iter().map(|g| g["_id"].clone()).collect());
    assert_eq!(after, Some(vec![json!("d1"), json!("d2")]), "{}", out["after"]);
    assert_eq!(out["dates"][2], json!({"_id": 3, "last": "2024-01-03 00:00:00"}));
}

/// `$indexStats` (MongoDB's manual example: `orders` with two compound indexes, one query
/// each): one document per index in MongoDB's shape, `accesses.ops` counting the operations
/// whose plan used the index — `find`, `aggregate`, `count`, `update`, `delete`, and reads
/// by a string `_id` for `_id_` — and starting again from zero after a restart of the
/// server.
#[test]
fn index_stats_count_index_use_until_a_restart() {
    let mut server = Server::start();
    let script = r#"
import datetime
c = client()
orders = c.shop.orders
orders.insert_many([
    {"_id": 1, "item": "abc", "price": 12, "quantity": 2, "type": "apparel"},
    {"_id": 2, "item": "jkl", "price": 20, "quantity": 1, "type": "electronics"},
    {"_id": 3, "item": "abc", "price": 10, "quantity": 5, "type": "apparel"},
])
orders.create_index([("item", 1), ("quantity", 1)])
orders.create_index([("type", 1), ("item", 1)])
before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) - datetime.timedelta(seconds=5)
assert len(list(orders.find({"type": "apparel"}))) == 2
assert [d["_id"] for d in orders.find({"item": "abc"}).sort("quantity", 1)] == [1, 3]
stats = {s["name"]: s for s in orders.aggregate([{"$indexStats": {}}])}
assert set(stats) == {"_id_", "item_1_quantity_1", "type_1_item_1"}, stats
s = stats["item_1_quantity_1"]
assert list(s.keys()) == ["name", "key", "host", "accesses", "spec"], s
assert s["key"] == {"item": 1, "quantity": 1} and s["spec"] == {"v": 2, "key": {"item": 1, "quantity": 1}, "name": "item_1_quantity_1"}, s
assert isinstance(s["accesses"]["ops"], bson.int64.Int64) and s["accesses"]["ops"] == 1, s
assert s["accesses"]["since"] >= before and ":" in s["host"], s
assert stats["type_1_item_1"]["accesses"]["ops"] == 1 and stats["_id_"]["accesses"]["ops"] == 0, stats
# Every kind of operation whose plan reads an index counts; reads by _id count for _id_.
list(orders.aggregate([{"$match": {"type": "apparel"}}, {"$group": {"_id": None, "n": {"$sum": 1}}}]))
assert orders.count_documents({"type": "apparel"}) == 2
orders.update_one({"type": "electronics"}, {"$set": {"price": 21}})
orders.delete_many({"item": "nothing"})
orders.insert_one({"_id": "x1", "item": "xyz", "price": 5})
assert orders.find_one({"_id": "x1"})["price"] == 5
assert [d["_id"] for d in orders.find({"_id": "x1", "price": {"$gt": 1}})] == ["x1"]
# An aggregate's hint decides the index its pushed-down $match reads.
assert len(list(orders.aggregate([{"$match": {"item": "abc"}}], hint="type_1_item_1"))) == 2
ops = {s["name"]: s["accesses"]["ops"] for s in orders.aggregate([
    {"$indexStats": {}}, {"$sort": {"name": 1}}, {"$project": {"name": 1, "accesses.ops": 1}}])}
assert ops == {"_id_": 2, "item_1_quantity_1": 2, "type_1_item_1": 5}, ops
assert list(c.shop.nothing.aggregate([{"$indexStats": {}}])) == []
# A partial index's filter is shown as given: its operators are not read as expressions.
c.shop.partial.create_index([("price", 1)], partialFilterExpression={"price": {"$gt": 10}})
spec = [s["spec"] for s in c.shop.partial.aggregate([{"$indexStats": {}}]) if s["name"] == "price_1"]
assert spec == [{"v": 2, "key": {"price": 1}, "name": "price_1", "partialFilterExpression": {"price": {"$gt": 10}}}], spec
assert code_of(lambda: list(orders.aggregate([{"$match": {}}, {"$indexStats": {}}]))) == 40602
assert code_of(lambda: list(orders.aggregate([{"$indexStats": {"x": 1}}]))) == 28803
with c.start_session() as session:
    session.start_transaction()
    assert code_of(lambda: list(orders.aggregate([{"$indexStats": {}}], session=session))) == 263
    session.abort_transaction()
print(json.dumps({"ok": True}))
"#;
    assert_eq!(python(&server, script), Some(json!({"ok": true})));
    assert!(server.terminate());
    server.restart();
    let script = r#"
stats = list(client().shop.orders.aggregate([{"$indexStats": {}}]))
assert sorted(s["name"] for s in stats) == ["_id_", "item_1_quantity_1", "type_1_item_1"], stats
assert all(s["accesses"]["ops"] == 0 for s in stats), stats
print(json.dumps({"ok": True}))
"#;
    assert_eq!(python(&server, script), Some(json!({"ok": true})));
}
