//! `find` projection as MongoDB 4.4+ answers it, through pymongo: the manual's examples of
//! inclusion, `_id`, computed fields, `$slice`, `$elemMatch` and positional `$` (inventory,
//! students, schools), `findAndModify`'s `fields`, and the parser's errors with their codes.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

const SETUP: &str = r#"
from pymongo.errors import OperationFailure
db = client().acme
db.inventory.insert_many([
    {"_id": 1, "item": "journal", "status": "A", "size": {"h": 14, "w": 21, "uom": "cm"}, "instock": [{"warehouse": "A", "qty": 5}]},
    {"_id": 2, "item": "notebook", "status": "A", "size": {"h": 8.5, "w": 11, "uom": "in"}, "instock": [{"warehouse": "C", "qty": 5}]},
    {"_id": 3, "item": "paper", "status": "D", "size": {"h": 8.5, "w": 11, "uom": "in"}, "instock": [{"warehouse": "A", "qty": 60}]},
    {"_id": 5, "item": "postcard", "status": "A", "size": {"h": 10, "w": 15.25, "uom": "cm"}, "instock": [{"warehouse": "B", "qty": 15}, {"warehouse": "C", "qty": 35}]},
])
db.students.insert_many([
    {"_id": 1, "semester": 1, "grades": [70, 87, 90]},
    {"_id": 2, "semester": 1, "grades": [90, 88, 92]},
    {"_id": 3, "semester": 1, "grades": [85, 100, 90]},
    {"_id": 4, "semester": 2, "grades": [79, 85, 80]},
    {"_id": 5, "semester": 2, "grades": [88, 88, 92]},
    {"_id": 6, "semester": 2, "grades": [95, 90, 96]},
])
db.schools.insert_many([
    {"_id": 1, "zipcode": "63109", "students": [{"name": "john", "school": 102, "age": 10}, {"name": "jess", "school": 102, "age": 11}, {"name": "jeff", "school": 108, "age": 15}]},
    {"_id": 2, "zipcode": "63110", "students": [{"name": "ajax", "school": 100, "age": 7}, {"name": "achilles", "school": 100, "age": 8}]},
    {"_id": 3, "zipcode": "63109", "students": [{"name": "ajax", "school": 100, "age": 7}, {"name": "achilles", "school": 100, "age": 8}]},
    {"_id": 4, "zipcode": "63109", "students": [{"name": "barney", "school": 102, "age": 7}, {"name": "ruth", "school": 102, "age": 16}]},
])
db.arr.insert_one({"_id": 1, "a": [1, 2, 3, 4, 5], "b": "x"})
def find(coll, flt, proj):
    try:
        return list(db[coll].find(flt, proj).sort("_id", 1))
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
"#;

/// The manual's "Project Fields to Return from Query" examples, computed fields through the
/// aggregation evaluator, and `{_id: 1}` alone.
#[test]
fn inclusion_exclusion_and_computed_fields_answer_as_the_manual() {
    let server = Server::start();
    let script = format!(
        r#"{SETUP}
out = {{}}
out["fields"] = find("inventory", {{"status": "A"}}, {{"item": 1, "status": 1}})
out["no_id"] = find("inventory", {{"status": "A"}}, {{"item": 1, "status": 1, "_id": 0}})
out["exclude"] = find("inventory", {{"_id": 5}}, {{"status": 0, "instock": 0}})
out["embedded"] = find("inventory", {{"_id": 5}}, {{"item": 1, "size.uom": 1}})
out["in_array"] = find("inventory", {{"_id": 5}}, {{"item": 1, "instock.qty": 1}})
out["only_id"] = find("inventory", {{"status": "D"}}, {{"_id": 1}})
out["computed"] = find("inventory", {{"_id": {{"$in": [1, 3]}}}}, {{"_id": 0, "item": 1,
    "status": {{"$cond": {{"if": {{"$eq": ["$status", "A"]}}, "then": "Available", "else": "Not available"}}}},
    "area": {{"$multiply": ["$size.h", "$size.w"]}}, "unit": "$size.uom", "tag": "lit"}})
out["agg_slice"] = find("arr", {{}}, {{"a": {{"$slice": ["$a", 1, 2]}}}})
db.students.create_index("semester")
plain = {{"_id": 0, "semester": 1}}
computed = {{"_id": 0, "semester": 1, "next": {{"$add": ["$semester", 1]}}}}
plan = lambda p: db.students.find({{"semester": 2}}, p).explain()["queryPlanner"]["winningPlan"]
out["plans"] = [[plan(p)["stage"], plan(p)["inputStage"]["stage"]] for p in [plain, computed, {{"grades": {{"$slice": 1}}}}]]
out["computed_indexed"] = find("students", {{"semester": 2}}, computed)
print(json.dumps(out, default=str))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    assert_eq!(
        out["fields"],
        json!([
            {"_id": 1, "item": "journal", "status": "A"},
            {"_id": 2, "item": "notebook", "status": "A"},
            {"_id": 5, "item": "postcard", "status": "A"}
        ])
    );
    assert_eq!(out["no_id"][0], json!({"item": "journal", "status": "A"}));
    assert_eq!(
        out["exclude"],
        json!([{"_id": 5, "item": "postcard", "size": {"h": 10, "w": 15.25, "uom": "cm"}}])
    );
    assert_eq!(out["embedded"], json!([{"_id": 5, "item": "postcard", "size": {"uom": "cm"}}]));
    assert_eq!(
        out["in_array"],
        json!([{"_id": 5, "item": "postcard", "instock": [{"qty": 15}, {"qty": 35}]}])
    );
    assert_eq!(out["only_id"], json!([{"_id": 3}]), "{{_id: 1}} alone keeps only _id");
    assert_eq!(
        out["computed"],
        json!([
            {"item": "journal", "status": "Available", "area": 294, "unit": "cm", "tag": "lit"},
            {"item": "paper", "status": "Not available", "area": 93.5, "unit": "in", "tag": "lit"}
        ])
    );
    assert_eq!(out["agg_slice"], json!([{"_id": 1, "a": [2, 3]}]), "an aggregation $slice");
    // Only a plain inclusion is answered from the index entries.
    assert_eq!(
        out["plans"],
        json!([
            ["PROJECTION_COVERED", "IXSCAN"],
            ["PROJECTION_DEFAULT", "FETCH"],
            ["PROJECTION_DEFAULT", "FETCH"]
        ])
    );
    assert_eq!(
        out["computed_indexed"],
        json!([{"semester": 2, "next": 3}, {"semester": 2, "next": 3}, {"semester": 2, "next": 3}])
    );
}

/// find's `$slice`, `$elemMatch` and positional `$` on the manual's documents, and
/// `findAndModify`'s `fields` with a positional projection.
#[test]
fn slice_elem_match_and_positional_answer_as_the_manual() {
    let server = Server::start();
    let script = format!(
        r#"{SETUP}
out = {{}}
out["last_instock"] = find("inventory", {{"status": "A"}}, {{"item": 1, "status": 1, "instock": {{"$slice": -1}}}})
out["slices"] = [find("arr", {{}}, {{"a": {{"$slice": s}}}})[0] for s in [2, -2, [1, 2], [-3, 2], [10, 2], 0]]
out["slice_id0"] = find("arr", {{}}, {{"_id": 0, "a": {{"$slice": 1}}}})
out["slice_id1"] = find("arr", {{}}, {{"_id": 1, "a": {{"$slice": 1}}}})
out["positional"] = find("students", {{"semester": 1, "grades": {{"$gte": 85}}}}, {{"grades.$": 1}})
out["elem"] = find("schools", {{"zipcode": "63109"}}, {{"students": {{"$elemMatch": {{"school": 102}}}}}})
out["elem2"] = find("schools", {{"zipcode": "63109"}}, {{"zipcode": 1, "students": {{"$elemMatch": {{"school": 102, "age": {{"$gt": 10}}}}}}}})
out["fam"] = db.students.find_one_and_update({{"_id": 6, "grades": {{"$gte": 95}}}}, {{"$set": {{"seen": True}}}}, projection={{"grades.$": 1}})
print(json.dumps(out, default=str))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    assert_eq!(
        out["last_instock"],
        json!([
            {"_id": 1, "item": "journal", "status": "A", "instock": [{"warehouse": "A", "qty": 5}]},
            {"_id": 2, "item": "notebook", "status": "A", "instock": [{"warehouse": "C", "qty": 5}]},
            {"_id": 5, "item": "postcard", "status": "A", "instock": [{"warehouse": "C", "qty": 35}]}
        ])
    );
    let sliced = |a: serde_json::Value| json!({"_id": 1, "a": a, "b": "x"});
    assert_eq!(
        out["slices"],
        json!([
            sliced(json!([1, 2])),
            sliced(json!([4, 5])),
            sliced(json!([2, 3])),
            sliced(json!([3, 4])),
            sliced(json!([])),
            sliced(json!([]))
        ]),
        "a find $slice keeps the other fields"
    );
    assert_eq!(out["slice_id0"], json!([{"a": [1], "b": "x"}]));
    assert_eq!(out["slice_id1"], json!([{"_id": 1, "a": [1]}]), "{{_id: 1}} makes it inclusion");
    assert_eq!(
        out["positional"],
        json!([{"_id": 1, "grades": [87]}, {"_id": 2, "grades": [90]}, {"_id": 3, "grades": [85]}])
    );
    assert_eq!(
        out["elem"],
        json!([
            {"_id": 1, "students": [{"name": "john", "school": 102, "age": 10}]},
            {"_id": 3},
            {"_id": 4, "students": [{"name": "barney", "school": 102, "age": 7}]}
        ])
    );
    assert_eq!(
        out["elem2"],
        json!([
            {"_id": 1, "zipcode": "63109", "students": [{"name": "jess", "school": 102, "age": 11}]},
            {"_id": 3, "zipcode": "63109"},
            {"_id": 4, "zipcode": "63109", "students": [{"name": "ruth", "school": 102, "age": 16}]}
        ])
    );
    assert_eq!(out["fam"], json!({"_id": 6, "grades": [95]}));
}

/// The projection parser's errors, with MongoDB's codes and messages.
#[test]
fn bad_projections_get_mongodbs_errors() {
    let server = Server::start();
    let script = format!(
        r#"{SETUP}
cases = [
    ("students", {{}}, {{"semester": 1, "grades": 0}}),
    ("students", {{}}, {{"semester": 0, "grades": 1}}),
    ("students", {{"grades": 90}}, {{"grades.$": 1, "semester.$": 1}}),
    ("students", {{"grades": 90}}, {{"grades.$": 0}}),
    ("students", {{"grades": 90}}, {{"grades.$.x": 1}}),
    ("schools", {{}}, {{"students.name": {{"$elemMatch": {{"a": 1}}}}}}),
    ("schools", {{"students.school": 1}}, {{"students.$": 1, "zipcode": {{"$elemMatch": {{"a": 1}}}}}}),
    ("arr", {{}}, {{"a": {{"$slice": [1, 0]}}}}),
    ("arr", {{}}, {{"a": {{"$slice": "x"}}}}),
    ("arr", {{}}, {{"a": {{"$slice": [1, 2, 3]}}}}),
    ("students", {{"semester": 1}}, {{"grades.$": 1}}),
    ("arr", {{}}, {{"b": 0, "c": "lit"}}),
    ("arr", {{}}, {{"score": {{"$meta": "textScore"}}}}),
    ("arr", {{}}, {{"score": {{"$meta": "bogus"}}}}),
    ("arr", {{}}, {{"k": {{"$meta": "searchScore"}}}}),
]
out = [find(c, f, p) for c, f, p in cases]
print(json.dumps(out, default=str))
"#
    );
    let Some(out) = python(&server, &script) else { return };
    let codes: Vec<_> = out.as_array().into_iter().flatten().map(|e| e[0].clone()).collect();
    assert_eq!(
        codes,
        vec![
            json!(31254),
            json!(31253),
            json!(31276),
            json!(31395),
            json!(31394),
            json!(31275),
            json!(31255),
            json!(28724),
            json!(16021),
            json!(28724),
            json!(51246),
            json!(31310),
            json!(40218),
            json!(17308),
            json!(238)
        ],
        "{out}"
    );
    assert_eq!(out[0][1], "Cannot do exclusion on field grades in inclusion projection");
    assert_eq!(out[12][1], "query requires text score metadata, but it is not available");
    assert_eq!(out[13][1], "Unsupported $meta field: bogus");
    assert_eq!(out[5][1], "Cannot use $elemMatch projection on a nested field.");
    // Neither find's `$slice` (limit must be positive) nor an expression that can run.
    assert_eq!(out[7][1], "First argument to $slice must be an array, but is of type: int");
    assert_eq!(
        out[10][1],
        "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array"
    );
}

/// `{$meta: "sortKey"}` holds the values the sort ordered each document by (a missing field
/// `null`, an array its smallest element ascending, its largest descending), keeps the
/// rest of the document, and is the same whether an index or memory sorted; `$meta` in
/// an aggregation expression is refused with MongoDB's codes.
#[test]
fn sort_key_meta_reports_what_the_sort_compared() {
    let server = Server::start();
    let script = r#"
from pymongo.errors import OperationFailure
db = client().shop
db.sk.insert_many([{"_id": 1, "a": 1, "b": "x", "arr": [3, 1]}, {"_id": 2, "a": 3, "b": "y"}])
meta = {"m": {"$meta": "sortKey"}}
keys = lambda cur: [d["m"] for d in cur]
out = {}
out["two"] = keys(db.sk.find({}, meta).sort([("a", 1), ("b", -1)]))
out["missing"] = keys(db.sk.find({}, meta).sort("zzz", 1))
out["array_asc"] = keys(db.sk.find({"_id": 1}, meta).sort("arr", 1))
out["array_desc"] = keys(db.sk.find({"_id": 1}, meta).sort("arr", -1))
out["whole"] = sorted(db.sk.find_one({"_id": 1}, meta, sort=[("a", 1)]))
out["inclusion"] = list(db.sk.find({}, {"a": 1, **meta}).sort("a", -1))
out["fam"] = db.sk.find_one_and_update({"_id": 2}, {"$set": {"c": 1}}, projection={"b": 1, **meta}, sort=[("b", 1)])
try:
    db.command("find", "sk", projection=meta)
except OperationFailure as e:
    out["unsorted"] = [e.code, e.details.get("codeName"), e.details.get("errmsg")]
def agg_code(meta):
    try:
        list(db.sk.aggregate([{"$addFields": {"m": {"$meta": meta}}}]))
        return None
    except OperationFailure as e:
        return [e.code, e.details.get("errmsg")]
out["agg"] = [agg_code("zzz"), agg_code(1)[0], agg_code("searchScore")[0], agg_code("textScore")[0]]
db.sk.create_index("a")
out["indexed"] = keys(db.sk.find({"a": {"$gte": 0}}, meta).sort("a", -1))
print(json.dumps(out))
"#;
    let Some(out) = python(&server, script) else { return };
    assert_eq!(out["two"], json!([[1, "x"], [3, "y"]]));
    assert_eq!(out["missing"], json!([[null], [null]]));
    assert_eq!(out["array_asc"], json!([[1]]));
    assert_eq!(out["array_desc"], json!([[3]]));
    assert_eq!(out["whole"], json!(["_id", "a", "arr", "b", "m"]));
    assert_eq!(
        out["inclusion"],
        json!([{"_id": 2, "a": 3, "m": [3]}, {"_id": 1, "a": 1, "m": [1]}])
    );
    assert_eq!(out["fam"], json!({"_id": 2, "b": "y", "m": ["y"]}));
    assert_eq!(out["indexed"], json!([[3], [1]]));
    // In an aggregation expression no metadata is produced yet: refused as MongoDB refuses
    // an unknown argument (17308), a non-string (17307), and the rest (not yet, 40218).
    assert_eq!(out["agg"], json!([[17308, "Unsupported $meta field: zzz"], 17307, 238, 40218]));
    assert_eq!(
        out["unsorted"],
        json!([2, "BadValue", "cannot use sortKey $meta projection without a sort"])
    );
}
