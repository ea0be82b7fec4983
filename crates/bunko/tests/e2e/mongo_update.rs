//! MongoDB update operators through pymongo (issue 13, point 6): the subset pattern of shared
//! seed 001 as its guide writes it (a product keeps its newest 10 reviews, kept by `$push` with
//! `$each`/`$sort`/`$slice` while every review also goes to the `reviews` collection), the
//! positional `$`, `$[]` and `$[<identifier>]` with `arrayFilters` on `update` and
//! `findAndModify`, and MongoDB's error codes for bad updates.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn subset_pattern_keeps_the_newest_reviews_with_push_each_sort_slice() {
    let server = Server::start();
    let script = r#"
c = client()
shop = c.shop
shop.product.insert_one({"_id": 1, "name": "Super Widget",
    "description": "This is the most useful item in your toolbox.",
    "price": {"value": Decimal128("119.99"), "currency": "USD"}, "reviews": []})
authors = ["Kristina", "Trina", "Hans", "Pablo", "Ana", "Ken", "Yui", "Sora", "Mei", "Ren", "Aoi", "Kai"]
for i, author in enumerate(authors):
    review = {"review_id": 775 + i, "product_id": 1, "review_author": author,
              "review_text": f"review {i}", "published_date": datetime.datetime(2019, 2, 5 + i)}
    shop.review.insert_one(dict(review))
    del review["product_id"]
    r = shop.product.update_one({"_id": 1}, {"$push": {"reviews": {
        "$each": [review], "$sort": {"published_date": -1}, "$slice": 10}}})
    assert (r.matched_count, r.modified_count) == (1, 1)
product = shop.product.find_one({"_id": 1})
ids = [r["review_id"] for r in product["reviews"]]
assert ids == list(range(786, 776, -1)), ids
assert product["price"]["value"] == Decimal128("119.99")
all_reviews = sorted(r["review_id"] for r in shop.review.find({"product_id": 1}))
assert all_reviews == list(range(775, 787)), all_reviews
# An older review arriving late does not enter the newest ten.
shop.product.update_one({"_id": 1}, {"$push": {"reviews": {"$each": [
    {"review_id": 1, "review_author": "Hans", "published_date": datetime.datetime(2017, 12, 6)}],
    "$sort": {"published_date": -1}, "$slice": 10}}})
again = [r["review_id"] for r in shop.product.find_one({"_id": 1})["reviews"]]
assert again == ids, again
print(json.dumps({"ok": True, "newest": ids[0]}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true, "newest": 786}));
    let product = server.get_doc("shop%24product", "{\"$numberInt\":\"1\"}");
    assert_eq!(product["reviews"].as_array().map(Vec::len), Some(10), "{product}");
}

#[test]
fn positional_paths_and_array_filters_update_the_matched_elements() {
    let server = Server::start();
    let script = r#"
from pymongo import ReturnDocument
from pymongo.errors import WriteError
c = client()
s = c.school.students
s.insert_many([
    {"_id": 1, "grades": [85, 80, 80], "tags": ["a", "b"], "n": 5},
    {"_id": 2, "grades": [{"grade": 80, "mean": 75}, {"grade": 85, "mean": 90}, {"grade": 85, "mean": 85}]},
])
s.update_one({"_id": 1, "grades": 80}, {"$set": {"grades.$": 82}})
assert s.find_one({"_id": 1})["grades"] == [85, 82, 80]
s.update_one({"_id": 1}, {"$inc": {"grades.$[]": 10}, "$addToSet": {"tags": {"$each": ["b", "c"]}}, "$mul": {"n": 2}})
assert s.find_one({"_id": 1}) == {"_id": 1, "grades": [95, 92, 90], "tags": ["a", "b", "c"], "n": 10}
s.update_one({"_id": 1}, {"$pull": {"grades": {"$gte": 92}}, "$rename": {"n": "count"}, "$pop": {"tags": -1}})
assert s.find_one({"_id": 1}) == {"_id": 1, "grades": [90], "tags": ["b", "c"], "count": 10}
r = s.update_many({}, {"$set": {"grades.$[g].mean": 100}}, array_filters=[{"g.grade": {"$gte": 85}}])
assert r.modified_count == 1 and r.matched_count == 2
assert [g["mean"] for g in s.find_one({"_id": 2})["grades"]] == [75, 100, 100]
got = s.find_one_and_update({"_id": 2}, {"$inc": {"grades.$[low].grade": 1}},
                            array_filters=[{"low.grade": {"$lt": 85}}], return_document=ReturnDocument.AFTER)
assert [g["grade"] for g in got["grades"]] == [81, 85, 85], got
got = s.find_one_and_update({"_id": 2, "grades.grade": 85}, {"$set": {"grades.$.first": True}},
                            return_document=ReturnDocument.AFTER)
assert got["grades"][1] == {"grade": 85, "mean": 100, "first": True}, got
s.update_one({"_id": 2}, {"$currentDate": {"seen": True}})
assert isinstance(s.find_one({"_id": 2})["seen"], datetime.datetime)
def write_error(fn):
    try:
        fn()
    except (WriteError, OperationFailure) as e:
        return [e.code, e.details.get("errmsg")]
errors = [
    write_error(lambda: s.update_one({"_id": 1}, {"$set": {"grades.$[x]": 1}}, array_filters=[{"x": 1}, {"y": 1}])),
    write_error(lambda: s.update_one({"_id": 1}, {"$set": {"grades.$": 1}})),
    write_error(lambda: s.update_one({"_id": 1}, {"$push": {"count": 1}})),
    write_error(lambda: s.update_one({"_id": 1}, {"$set": {"grades.$[Y]": 1}}, array_filters=[{"Y": 1}])),
]
print(json.dumps({"errors": errors}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(
        result,
        json!({"errors": [
            [9, "The array filter for identifier 'y' was not used in the update { $set: { grades.$[x]: 1 } }"],
            [2, "The positional operator did not find the match needed from the query."],
            [2, "The field 'count' must be an array but is of type int in document {_id: 1}"],
            [2, "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found 'Y'"],
        ]})
    );
}

/// MongoDB 8's `sort` on `updateOne` and `replaceOne` (also in `bulkWrite` and inside a
/// transaction) picks the document a single update changes; with `multi` it is refused.
#[test]
fn update_one_and_replace_one_with_sort_change_the_first_in_order() {
    let server = Server::start();
    let script = r#"
from pymongo import UpdateOne, ReplaceOne
c = client()
q = c.shop.queue
q.insert_many([{"_id": i, "prio": p} for i, p in [(1, 5), (2, 9), (3, 7), (4, 1)]])
q.update_one({"prio": {"$gt": 2}}, {"$set": {"taken": "first"}}, sort={"prio": -1})
q.replace_one({"prio": {"$gt": 2}}, {"prio": 0, "replaced": True}, sort={"prio": 1})
c.bulk_write([UpdateOne(namespace="shop.queue", filter={}, update={"$set": {"bulk": True}}, sort={"prio": 1})])
with c.start_session() as s:
    with s.start_transaction():
        q.update_one({"taken": {"$exists": False}}, {"$set": {"txn": True}}, sort={"_id": -1}, session=s)
r = c.shop.command("update", "queue", updates=[{"q": {}, "u": {"$set": {"x": 1}}, "multi": True, "sort": {"_id": 1}}])
multi = r["writeErrors"][0]["code"]
print(json.dumps({"docs": list(q.find({}, {"_id": 1, "taken": 1, "replaced": 1, "bulk": 1, "txn": 1}).sort("_id", 1)),
                  "multi": multi}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(
        result,
        json!({"docs": [{"_id": 1, "replaced": true, "bulk": true}, {"_id": 2, "taken": "first"},
                        {"_id": 3}, {"_id": 4, "txn": true}],
               "multi": 72})
    );
}
