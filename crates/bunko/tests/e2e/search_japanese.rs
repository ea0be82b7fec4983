//! The `japanese` analyzer (Cloudant's Kuromoji) in `_search` and Mango text indexes, with
//! sentences of the Cloudant partitioning guide (the project's seed document): a word inside
//! a sentence is found, by its base form too; part of a word is not.

use serde_json::json;

use crate::harness::Server;
use crate::search::{bulk, ids, q, sorted};

/// Sentences of the Cloudant guide on partitioned databases.
const GUIDE: [(&str, &str); 3] = [
    (
        "merit",
        "パーティション・データベースには、大きなパフォーマンス上およびコスト面でのメリットがあります。",
    ),
    ("create", "または、非パーティション・データベースを作成することもできます。"),
    ("support", "次の 2 つのタイプのデータベースがサポートされます。"),
];

fn guide(s: &Server) {
    assert_eq!(s.put_empty("/guide").0, 201);
    let docs = GUIDE.iter().map(|(id, text)| json!({"_id": id, "text": text})).collect();
    bulk(s, "guide", docs);
}

#[test]
fn japanese_search_finds_words_and_base_forms_not_parts_of_words() {
    let s = Server::start();
    guide(&s);
    let index = "function(doc) { index('default', doc.text); }";
    let ddoc = json!({"indexes": {"ja": {"index": index, "analyzer": "japanese"}}});
    assert_eq!(s.put("/guide/_design/s", &ddoc).0, 201);
    let hits = |query: &str| {
        let (status, body) = s.get(&q("/guide/_design/s/_search/ja", &[("q", json!(query))]));
        assert_eq!(status, 200, "{query}: {body}");
        sorted(ids(&body))
    };
    assert_eq!(hits("メリット"), ["merit"]);
    assert_eq!(hits("データベース"), ["create", "merit", "support"]);
    // できます and される are indexed as their base forms できる and する.
    assert_eq!(hits("できる"), ["create"]);
    assert_eq!(hits("サポート"), ["support"]);
    // Part of a word is not a word.
    assert_eq!(hits("メリ"), Vec::<String>::new());
    assert_eq!(hits("ベース"), Vec::<String>::new());
    // A phrase is analyzed the same way: 作成する in the text, 作成し in the query.
    assert_eq!(hits("\"データベースを作成し\""), ["create"]);
}

#[test]
fn japanese_mango_text_index() {
    let s = Server::start();
    guide(&s);
    let index = json!({"index": {"default_field": {"enabled": true, "analyzer": "japanese"}},
                       "type": "text"});
    let (status, body) = s.post("/guide/_index", &index);
    assert_eq!(status, 200, "{body}");
    let find = |text: &str| -> Vec<String> {
        let (status, body) = s.post("/guide/_find", &json!({"selector": {"$text": text}}));
        assert_eq!(status, 200, "{text}: {body}");
        let docs = body["docs"].as_array().cloned().unwrap_or_default();
        sorted(docs.iter().filter_map(|d| d["_id"].as_str().map(String::from)).collect())
    };
    assert_eq!(find("メリット"), ["merit"]);
    assert_eq!(find("メリ"), Vec::<String>::new());
}
