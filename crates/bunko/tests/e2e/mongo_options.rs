//! Command options the drivers' CRUD specification tests send (issue 13, found by
//! `scripts/mongo-spec.sh`): `let` variables in `find`, `update` (also pipeline-style),
//! `delete`, `findAndModify` and `bulkWrite`; `hint` naming the `_id` index (`"_id_"`,
//! `{_id: 1}`) everywhere a hint is taken, and `hint` on `findAndModify` and `distinct`;
//! a `$`-prefixed field inside `_id` refused as MongoDB does. Through pymongo.

use serde_json::json;

use crate::harness::Server;

#[test]
fn let_variables_and_id_hints_work_as_in_mongodb() {
    let s = Server::start();
    let script = r#"
c = client().shop.books
c.insert_many([{"_id": 1, "x": 11}, {"_id": 2, "x": 22}, {"_id": 3, "x": 33}])
# let: bound in $expr and pipeline updates only; elsewhere "$$id" is a plain string.
by_let = {"$expr": {"$eq": ["$_id", "$$id"]}}
assert [d["x"] for d in c.find(by_let, let={"id": 2})] == [22]
assert list(c.find({"x": "$$id"}, let={"id": 2})) == []
r = c.update_one(by_let, [{"$set": {"y": "$$y", "z": {"$literal": "$$y"}}}], let={"id": 1, "y": {"$concat": ["f", "oo"]}})
assert r.modified_count == 1 and c.find_one({"_id": 1}) == {"_id": 1, "x": 11, "y": "foo", "z": "$$y"}
doc = c.find_one_and_update(by_let, {"$inc": {"x": 1}}, let={"id": 3}, return_document=True)
assert doc == {"_id": 3, "x": 34}, doc
from pymongo import UpdateOne, DeleteOne
r = c.bulk_write([UpdateOne(by_let, {"$set": {"b": True}})], let={"id": 2})
assert r.modified_count == 1 and c.find_one({"_id": 2})["b"] is True
assert c.delete_one(by_let, let={"id": 3}).deleted_count == 1
assert code_of(lambda: list(c.find(by_let, let={"Id": 1}))) is not None
# hint: the _id index by name or key pattern; unknown indexes are still refused.
assert c.update_one({"_id": {"$gt": 1}}, {"$inc": {"x": 1}}, hint="_id_").modified_count == 1
assert c.count_documents({"_id": {"$gte": 1}}, hint=[("_id", 1)]) == 2
assert c.find_one_and_update({"_id": 1}, {"$inc": {"x": 1}}, hint="_id_", return_document=True)["x"] == 12
assert c.find_one_and_delete({"_id": 2}, hint={"_id": 1})["_id"] == 2
assert c.distinct("x", {"_id": 1}, hint="_id_") == [12]
assert code_of(lambda: c.distinct("x", {}, hint="nope_1")) == 2
assert code_of(lambda: c.find_one_and_update({"_id": 1}, {"$set": {"a": 1}}, hint="nope_1")) == 2
# A $-prefixed field in _id is DollarPrefixedFieldName (52); elsewhere it is stored as sent.
assert code_of(lambda: c.insert_one({"_id": {"$a": 1}})) == 52
assert code_of(lambda: c.insert_one({"_id": {"a": {"$b": 1}}})) == 52
c.insert_one({"_id": 9, "p": {"$price": 1}})
assert c.find_one({"_id": 9})["p"] == {"$price": 1}
print(json.dumps({"ok": True}))
"#;
    if let Some(out) = crate::mongo::python(&s, script) {
        assert_eq!(out, json!({"ok": true}));
    }
}
