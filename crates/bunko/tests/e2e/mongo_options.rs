//! Command options the drivers' CRUD specification tests send (issue 13, found by
//! `scripts/mongo-spec.sh`): `let` variables in `find`, `update` (also pipeline-style),
//! `delete`, `findAndModify` and `bulkWrite`; `hint` naming the `_id` index (`"_id_"`,
//! `{_id: 1}`) everywhere a hint is taken, and `hint` on `findAndModify` and `distinct`;
//! a `$`-prefixed field inside `_id` refused as MongoDB does; the `failCommand` and
//! `onPrimaryTransactionalWrite` fail points of a server started with
//! `--mongo-test-commands`, through which pymongo's retryable writes are seen retrying;
//! `batchSize` of a `find` in a transaction; `$listLocalSessions`.
//! Through pymongo.

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

#[test]
fn fail_points_exist_only_with_test_commands_and_drive_pymongo_retries() {
    let plain = Server::start();
    let script = r#"
c = client()
assert c.admin.command("getParameter", 1, enableTestCommands=1)["enableTestCommands"] is False
assert code_of(lambda: c.admin.command("configureFailPoint", "failCommand", mode="alwaysOn", data={"failCommands": ["insert"], "errorCode": 91})) == 59
print(json.dumps({"ok": True}))
"#;
    let Some(out) = crate::mongo::python(&plain, script) else { return };
    assert_eq!(out, json!({"ok": true}));
    let s = Server::start_with(&["--mongo-test-commands"], &[]);
    let script = r#"
seen = CommandNames()
c = client(event_listeners=[seen], appName="spec")
books = c.shop.books
fp = lambda **kw: c.admin.command("configureFailPoint", **kw)
# An error with a retryable code: pymongo retries once, the insert is done once.
fp(configureFailPoint="failCommand", mode={"times": 1}, data={"failCommands": ["insert"], "errorCode": 91})
books.insert_one({"_id": 1})
assert seen.names.count("insert") == 2 and books.count_documents({}) == 1, seen.names
# A closed connection after the write: the retry finds it done (one document, not two).
fp(configureFailPoint="onPrimaryTransactionalWrite", mode={"times": 1})
books.insert_one({"_id": 2})
assert books.count_documents({}) == 2
# Counted per statement (issue 13): `skip: 2` passes a 1-statement insert and the first of
# a 2-statement update, and fails (after its write) the update, which pymongo retries.
from pymongo import InsertOne, UpdateOne
seen.names.clear()
fp(configureFailPoint="onPrimaryTransactionalWrite", mode={"skip": 2})
books.bulk_write([InsertOne({"_id": 5, "x": 0}), UpdateOne({"_id": 1}, {"$inc": {"x": 1}}), UpdateOne({"_id": 5}, {"$inc": {"x": 1}})])
fp(configureFailPoint="onPrimaryTransactionalWrite", mode="off")
assert seen.names.count("insert") == 1 and seen.names.count("update") == 2, seen.names
assert [d.get("x") for d in books.find({"_id": {"$in": [1, 5]}}, sort=[("_id", 1)])] == [1, 1]
books.delete_one({"_id": 5})
# Not retryable, and labels as named: the error reaches the application.
fp(configureFailPoint="failCommand", mode={"times": 1}, data={"failCommands": ["find"], "errorCode": 2, "errorLabels": []})
assert code_of(lambda: books.find_one()) == 2
# A write concern error is added to the answer of a command that ran.
fp(configureFailPoint="failCommand", mode={"times": 1}, data={"failCommands": ["delete"], "writeConcernError": {"code": 100, "errmsg": "no"}})
from pymongo.errors import WriteConcernError
try:
    books.delete_one({"_id": 2}); raise AssertionError("no write concern error")
except WriteConcernError as e:
    assert e.code == 100
assert books.count_documents({}) == 1
# appName: other clients are not affected; off clears it.
fp(configureFailPoint="failCommand", mode="alwaysOn", data={"failCommands": ["count", "aggregate"], "errorCode": 2, "appName": "other"})
assert books.count_documents({}) == 1
# Inside a transaction MongoDB labels transient errors; with_transaction retries on them.
fp(configureFailPoint="failCommand", mode={"times": 1}, data={"failCommands": ["commitTransaction"], "errorCode": 24})
with c.start_session() as s:
    s.with_transaction(lambda s: books.insert_one({"_id": 3}, session=s))
assert books.count_documents({"_id": 3}) == 1
fp(configureFailPoint="failCommand", mode={"times": 1}, data={"failCommands": ["insert"], "errorCode": 112})
with c.start_session() as s:
    s.start_transaction()
    try:
        books.insert_one({"_id": 4}, session=s); raise AssertionError("no error")
    except OperationFailure as e:
        assert e.has_error_label("TransientTransactionError"), e.details
    s.abort_transaction()
fp(configureFailPoint="failCommand", mode="off")
print(json.dumps({"ok": True}))
"#;
    assert_eq!(crate::mongo::python(&s, script), Some(json!({"ok": true})));
}

/// `find` inside a transaction answers `batchSize` documents and a cursor, which `getMore`
/// (also inside the transaction) continues; the snapshot is the transaction's.
#[test]
fn find_in_a_transaction_honours_batch_size() {
    let s = Server::start();
    let script = r#"
seen = CommandNames()
c = client(event_listeners=[seen])
books = c.shop.books
books.insert_many([{"_id": i} for i in range(5)])
with c.start_session() as s:
    with s.start_transaction():
        books.insert_one({"_id": 5}, session=s)
        got = [d["_id"] for d in books.find({}, batch_size=2, session=s).sort("_id", 1)]
        assert got == [0, 1, 2, 3, 4, 5], got
        assert [d["_id"] for d in books.find({}, batch_size=2, session=s).limit(3).sort("_id", 1)] == [0, 1, 2]
assert seen.names.count("getMore") >= 3, seen.names
# The session that ran the transaction is listed by $listLocalSessions (an aggregate: 1).
mine = list(c.shop.aggregate([{"$listLocalSessions": {}}, {"$project": {"_id": 0, "user": 1}}]))
assert mine and all(m == {"user": {"name": f"{USER}@admin"}} for m in mine), mine
assert len(list(c.admin.aggregate([{"$listLocalSessions": {"allUsers": True}}]))) >= len(mine)
assert code_of(lambda: list(books.aggregate([{"$listLocalSessions": {}}]))) == 73
print(json.dumps({"ok": True}))
"#;
    if let Some(out) = crate::mongo::python(&s, script) {
        assert_eq!(out, json!({"ok": true}));
    }
}
