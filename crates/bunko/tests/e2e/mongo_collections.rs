//! `renameCollection` (within and across MongoDB databases, `dropTarget`), `collStats` and
//! `dbStats` index sizes through pymongo (issue 13, point 2).

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn rename_collection_moves_documents_and_indexes_and_stats_count_them() {
    let server = Server::start();
    let script = r#"
c = client()
c.shop.books.insert_many([{"_id": i, "title": f"t{i}", "isbn": f"i{i}"} for i in range(20)])
c.shop.books.create_index("isbn", unique=True)
stats = c.shop.command("collStats", "books")
out = {"count": stats["count"], "nindexes": stats["nindexes"], "names": sorted(stats["indexSizes"]),
       "sized": stats["size"] > 0 and stats["totalIndexSize"] > 0 and stats["avgObjSize"] > 0,
       "sum": stats["totalIndexSize"] == sum(stats["indexSizes"].values())}
db_stats = c.shop.command("dbStats")
out["db_indexes"] = [db_stats["indexes"], db_stats["indexSize"] == stats["totalIndexSize"]]
c.admin.command("renameCollection", "shop.books", to="shop.novels")
out["after"] = sorted(c.shop.list_collection_names())
out["moved"] = c.shop.novels.find_one({"_id": 3})
out["index_kept"] = [i["name"] for i in c.shop.novels.list_indexes()]
out["still_unique"] = code_of(lambda: c.shop.novels.insert_one({"isbn": "i3"}))
c.archive.old.insert_one({"_id": "x"})
out["exists"] = code_of(lambda: c.admin.command("renameCollection", "shop.novels", to="archive.old"))
c.admin.command("renameCollection", "shop.novels", to="archive.old", dropTarget=True)
out["across"] = [c.archive.old.count_documents({}) if False else c.archive.old.estimated_document_count(),
                 c.archive.old.find_one({"_id": "x"})]
out["missing"] = code_of(lambda: c.admin.command("renameCollection", "shop.nothing", to="shop.x"))
out["not_admin"] = code_of(lambda: c.shop.command("renameCollection", "archive.old", to="archive.new"))
out["stats_missing"] = code_of(lambda: c.shop.command("collStats", "nothing"))
print(json.dumps(out))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(
        result,
        json!({
            "count": 20, "nindexes": 2, "names": ["_id_", "isbn_1"], "sized": true, "sum": true,
            "db_indexes": [2, true],
            "after": ["novels"], "moved": {"_id": 3, "title": "t3", "isbn": "i3"},
            "index_kept": ["_id_", "isbn_1"], "still_unique": 11000,
            "exists": 48, "across": [20, null], "missing": 26, "not_admin": 13,
            "stats_missing": 26,
        })
    );
    // Over HTTP the renamed collection is the database `archive$old`; `shop$books` is gone.
    let (status, info) = server.get("/archive%24old");
    assert_eq!((status, info["db_name"].as_str()), (200, Some("archive$old")));
    assert_eq!(server.get("/shop%24books").0, 404);
}
