//! The data-modeling advisor, `GET /{db}/_advise` and `bunko advise` (issue 18): for each
//! rule, a dataset generated here that breaks it (the advisor reports it with the right
//! evidence), and the source documents' good models (a person with embedded addresses,
//! products with their newest 10 reviews embedded and reviews referring to the product,
//! the students/classes `links` model with its index, IoT readings partitioned by
//! infrastructure), on which it must report nothing.

use std::process::Command;

use reqwest::Method;
use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server, assert_error_kind, send};

fn bulk(s: &Server, db: &str, docs: Vec<Value>) {
    for chunk in docs.chunks(500) {
        let (status, body) = s.post(&format!("/{db}/_bulk_docs"), &json!({"docs": chunk}));
        assert_eq!(status, 201, "bulk into {db}: {body}");
        let failed: Vec<&Value> =
            body.as_array().into_iter().flatten().filter(|r| r.get("error").is_some()).collect();
        assert!(failed.is_empty(), "bulk into {db}: {failed:?}");
    }
}

fn advise(s: &Server, db: &str) -> Value {
    let (status, body) = s.get(&format!("/{db}/_advise"));
    assert_eq!(status, 200, "_advise {db}: {body}");
    body
}

fn rules(advice: &Value) -> Vec<String> {
    advice["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| f["rule"].as_str().unwrap_or("").to_string())
        .collect()
}

#[track_caller]
fn finding<'a>(advice: &'a Value, rule: &str) -> &'a Value {
    advice["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|f| f["rule"] == rule)
        .unwrap_or_else(|| panic!("no {rule} finding in {advice:#}"))
}

#[track_caller]
fn assert_clean(advice: &Value) {
    assert_eq!(rules(advice), Vec::<String>::new(), "false alarm on a good model: {advice:#}");
}

fn review(n: usize, product: &str) -> Value {
    json!({"review_id": n, "product_id": product, "review_author": "Kristina",
           "review_text": "This is indeed an amazing widget."})
}

fn find(s: &Server, db: &str, query: Value) -> Value {
    let (status, body) = s.post(&format!("/{db}/_find"), &query);
    assert_eq!(status, 200, "_find {db} {query}: {body}");
    body
}

fn index(s: &Server, db: &str, def: Value) {
    let (status, body) = s.post(&format!("/{db}/_index"), &def);
    assert_eq!(status, 200, "_index {db}: {body}");
}

/// The subset pattern (seed 001): products keep their newest 10 reviews, every review is a
/// document of its own with `product_id`, indexed and queried by it.
fn subset_pattern(s: &Server) {
    s.create_db("products");
    s.create_db("reviews");
    let mut products = Vec::new();
    let mut reviews = Vec::new();
    for p in 0..20 {
        let id = format!("product-{p}");
        let all: Vec<Value> = (0..40).map(|n| review(p * 100 + n, &id)).collect();
        reviews.extend(all.iter().cloned());
        let newest: Vec<Value> = all.iter().rev().take(10).cloned().collect();
        products
            .push(json!({"_id": id, "name": "Super Widget", "price": 29.99, "reviews": newest}));
    }
    bulk(s, "products", products);
    bulk(s, "reviews", reviews);
    // New reviews arrive: the product keeps its newest 10 (push, then trim).
    for p in 0..5 {
        let id = format!("product-{p}");
        let mut doc = s.get_doc("products", &id);
        let mut newest = vec![review(9000 + p, &id)];
        newest.extend(doc["reviews"].as_array().into_iter().flatten().take(9).cloned());
        doc["reviews"] = json!(newest);
        s.put_doc("products", &id, &doc);
    }
    index(s, "reviews", json!({"index": {"fields": ["product_id"]}, "name": "by-product"}));
    for p in 0..5 {
        let got = find(s, "reviews", json!({"selector": {"product_id": format!("product-{p}")}}));
        assert_eq!(got["docs"].as_array().map(Vec::len), Some(25));
    }
}

#[test]
fn unbounded_and_growing_arrays_are_found_and_the_subset_pattern_passes() {
    let s = Server::start();
    subset_pattern(&s);
    assert_clean(&advise(&s, "products"));
    assert_clean(&advise(&s, "reviews"));

    // Every review embedded: a few products have hundreds.
    s.create_db("shop");
    let products = (0..20).map(|p| {
        let n = if p < 3 { 600 + p } else { 5 };
        json!({"_id": format!("product-{p:02}"), "name": "Widget",
               "reviews": (0..n).map(|r| review(r, "")).collect::<Vec<_>>()})
    });
    bulk(&s, "shop", products.collect());
    let advice = advise(&s, "shop");
    assert_eq!(rules(&advice), ["unbounded-array"]);
    let f = finding(&advice, "unbounded-array");
    assert_eq!(f["evidence"]["field"], "reviews");
    assert_eq!(f["evidence"]["length"]["max"], 602);
    assert_eq!(f["evidence"]["length"]["p50"], 5);
    assert_eq!(f["evidence"]["longest"], json!({"id": "product-02", "length": 602}));
    assert_eq!(f["evidence"]["documents_over_threshold"], 3);
    assert!(f["suggestion"].as_str().is_some_and(|t| t.contains("subset pattern")), "{f}");
    assert!(f["guide"]["source"].as_str().is_some_and(|t| t.contains("MongoDB")), "{f}");

    // An activity log that every edit appends to: not yet huge, but growing.
    s.create_db("accounts");
    let accounts = (0..10).map(|a| {
        json!({"_id": format!("acct-{a}"),
        "events": (0..150).map(|e| json!({"n": e})).collect::<Vec<_>>()})
    });
    bulk(&s, "accounts", accounts.collect());
    for a in 0..10 {
        let id = format!("acct-{a}");
        let mut doc = s.get_doc("accounts", &id);
        if let Some(events) = doc["events"].as_array_mut() {
            events.extend((0..12).map(|e| json!({"n": 1000 + e})));
        }
        s.put_doc("accounts", &id, &doc);
    }
    let advice = advise(&s, "accounts");
    assert_eq!(rules(&advice), ["growing-array"]);
    let growth = &finding(&advice, "growing-array")["evidence"]["growth"];
    assert_eq!(
        *growth,
        json!({"documents_compared": 10, "documents_grown": 10, "elements_added": 120})
    );
}

#[test]
fn large_documents_name_the_field_that_dominates_and_embedded_addresses_pass() {
    let s = Server::start_with(&["--max-document-size", "200000"], &[]);
    s.create_db("people");
    let people = (0..50).map(|i| {
        json!({"_id": format!("person-{i}"), "name": "Ada Lovelace",
        "addresses": [{"street": "1 Main St", "city": "London", "type": "home"},
                      {"street": "2 Work Rd", "city": "London", "type": "work"}],
        "contactDetails": [{"email": "ada@example.com"}, {"phone": "+44 1234"}]})
    });
    bulk(&s, "people", people.collect());
    assert_clean(&advise(&s, "people"));

    s.create_db("scans");
    let mut docs: Vec<Value> =
        (0..30).map(|i| json!({"_id": format!("scan-{i:02}"), "title": "t"})).collect();
    for i in 0..4 {
        docs.push(json!({"_id": format!("big-{i}"), "title": "contract",
                         "pdf_base64": "x".repeat(80_000 + i * 1000)}));
    }
    bulk(&s, "scans", docs);
    let advice = advise(&s, "scans");
    assert_eq!(rules(&advice), ["large-document"]);
    let e = &finding(&advice, "large-document")["evidence"];
    assert_eq!(
        (e["max_document_size"].clone(), e["documents_over_threshold"].clone()),
        (json!(200000), json!(4))
    );
    assert_eq!(e["largest"][0]["id"], "big-3");
    assert_eq!(e["largest"][0]["largest_fields"][0]["field"], "pdf_base64");
    assert!(e["largest"][0]["fraction_of_limit"].as_f64().is_some_and(|f| f > 0.4));
    let suggestion = finding(&advice, "large-document")["suggestion"].as_str().unwrap_or("");
    assert!(suggestion.contains("`pdf_base64`"), "{suggestion}");
}

fn reading(infra: &str, device: usize, n: usize) -> Value {
    json!({"_id": format!("{infra}:device-{device}-20181211T11:{n:02}:24.123456Z"),
           "deviceID": format!("device-{device}"), "infrastructureID": infra,
           "ts": format!("20181211T11:{n:02}:24.123456Z"),
           "reading": {"temperature": {"value": 12, "unit": "c"}}})
}

#[test]
fn partition_keys_follow_the_cloudant_table() {
    let s = Server::start_with(&["--max-partition-size", "100000"], &[]);
    // Good (seed 003): readings partitioned by infrastructure, a partitioned index on device.
    s.put_empty("/readings?partitioned=true");
    let mut docs = Vec::new();
    for b in 0..40 {
        let infra = format!("bridge-{}", 9800 + b);
        docs.extend((0..25).map(|n| reading(&infra, b * 10 + n % 3, n)));
    }
    bulk(&s, "readings", docs);
    index(
        &s,
        "readings",
        json!({"index": {"fields": ["deviceID"]}, "name": "by-device",
                                 "partitioned": true}),
    );
    let got = find(
        &s,
        "readings/_partition/bridge-9800",
        json!({"selector": {"deviceID": "device-1"}, "limit": 100}),
    );
    assert_eq!(got["docs"].as_array().map(Vec::len), Some(8));
    assert_clean(&advise(&s, "readings"));

    // Orders keyed by status: few, huge, word-like partitions.
    s.put_empty("/orders?partitioned=true");
    let statuses = [("provisional", 700), ("paid", 200), ("refunded", 60), ("cancelled", 40)];
    let orders = statuses.iter().flat_map(|(st, n)| {
        (0..*n).map(move |i| json!({"_id": format!("{st}:o{i}"), "user": "u"}))
    });
    bulk(&s, "orders", orders.collect());
    let advice = advise(&s, "orders");
    assert_eq!(rules(&advice), ["partition-too-few", "partition-hot-spot", "partition-key-shape"]);
    assert_eq!(finding(&advice, "partition-hot-spot")["evidence"]["largest_share"], 0.7);
    let shape = &finding(&advice, "partition-key-shape")["evidence"];
    assert_eq!(
        (shape["kind"].clone(), shape["examples"][0].clone()),
        (json!("status"), json!("provisional"))
    );

    // Readings keyed by date, and orders keyed by order id (one document each).
    s.put_empty("/by-date?partitioned=true");
    let days = (1..=30)
        .flat_map(|d| (0..5).map(move |i| json!({"_id": format!("2018-12-{d:02}:r{i}"), "v": i})));
    bulk(&s, "by-date", days.collect());
    let advice = advise(&s, "by-date");
    assert_eq!(rules(&advice), ["partition-key-shape"]);
    assert_eq!(finding(&advice, "partition-key-shape")["evidence"]["kind"], "date");
    s.put_empty("/by-order?partitioned=true");
    let singles = (0..50).map(|i| json!({"_id": format!("order{i}:order"), "user": "u"}));
    bulk(&s, "by-order", singles.collect());
    let advice = advise(&s, "by-order");
    assert_eq!(rules(&advice), ["partition-one-document"]);
    assert_eq!(
        finding(&advice, "partition-one-document")["evidence"]["partitions_with_one_document"],
        50
    );

    // One partition past half of max_partition_size.
    s.put_empty("/archive?partitioned=true");
    let big = (0..6).map(|i| json!({"_id": format!("site-1:log{i}"), "text": "y".repeat(10_000)}));
    bulk(&s, "archive", big.collect());
    let advice = advise(&s, "archive");
    assert_eq!(rules(&advice), ["partition-size"]);
    assert_eq!(
        finding(&advice, "partition-size")["evidence"]["partitions"][0]["partition"],
        "site-1"
    );
}

#[test]
fn a_partition_whose_documents_are_rewritten_over_and_over_is_a_write_hot_spot() {
    let s = Server::start();
    // Readings per bridge (inserted once each), plus running totals kept in ten documents
    // of one partition and updated after every reading: the shared-counter anti-pattern.
    s.put_empty("/iot?partitioned=true");
    let mut docs = Vec::new();
    for b in 0..3 {
        let infra = format!("bridge-{}", 9800 + b);
        docs.extend((0..40).map(|n| reading(&infra, b * 10 + n % 3, n)));
    }
    bulk(&s, "iot", docs);
    let mut totals: Vec<Value> =
        (0..10).map(|d| json!({"_id": format!("totals:device-{d}"), "count": 0})).collect();
    for round in 1..=100 {
        let (status, body) = s.post("/iot/_bulk_docs", &json!({"docs": totals}));
        assert_eq!(status, 201, "{body}");
        for (doc, result) in totals.iter_mut().zip(body.as_array().into_iter().flatten()) {
            doc["_rev"] = result["rev"].clone();
            doc["count"] = json!(round);
        }
    }
    let advice = advise(&s, "iot");
    // The totals are also a second entity type without a discriminator, rightly.
    let want = ["partition-write-hot-spot", "missing-discriminator"];
    assert_eq!(rules(&advice), want, "{advice:#}");
    let evidence = &finding(&advice, "partition-write-hot-spot")["evidence"];
    assert_eq!(
        (&evidence["partition"], &evidence["writes"], &evidence["all_writes"]),
        (&json!("totals"), &json!(1000), &json!(1120))
    );
    let per_document =
        (&evidence["writes_per_document"], &evidence["writes_per_document_elsewhere"]);
    assert_eq!(per_document, (&json!(100.0), &json!(1.0)));
}

fn class(id: &str, students: &[String], typed: bool) -> Value {
    let mut links = vec![json!({"target": id, "doc_type": "class"})];
    links.extend(students.iter().map(|s| json!({"target": s, "doc_type": "student"})));
    let mut doc = json!({"_id": id, "class_name": "Introduction to Programming", "course_id": "CS101",
        "instructor": {"name": "Dr. Emily Smith", "email": "emily.smith@example.com"},
        "semester": "Spring 2025", "schedule": [{"day_time": "Monday 10:00 AM"}],
        "current_topic": "Loops and Iterations", "next_class_time": "2025-01-09T10:00:00Z",
        "links": links});
    if typed {
        doc["doc_type"] = json!("class");
    }
    doc
}

fn student(id: &str, classes: &[String], typed: bool) -> Value {
    let mut links: Vec<Value> =
        classes.iter().map(|c| json!({"target": c, "doc_type": "class"})).collect();
    links.push(json!({"target": id, "doc_type": "student"}));
    let mut doc = json!({"_id": id, "name": "Jane Doe", "major": "Computer Science",
        "semester": "Spring 2025", "links": links});
    if typed {
        doc["doc_type"] = json!("student");
    }
    doc
}

/// The single-collection `links` model (seed 002), with or without `doc_type`.
fn school(s: &Server, db: &str, typed: bool) {
    s.create_db(db);
    let classes: Vec<String> = (0..10).map(|c| format!("CS{}-001", 100 + c)).collect();
    let students: Vec<String> = (0..200).map(|i| format!("S{}", 12300 + i)).collect();
    let mut docs = Vec::new();
    for (c, id) in classes.iter().enumerate() {
        let members: Vec<String> = students.iter().skip(c * 5).take(30).cloned().collect();
        docs.push(class(id, &members, typed));
    }
    for (i, id) in students.iter().enumerate() {
        let mine: Vec<String> = classes.iter().skip(i % 9).take(2).cloned().collect();
        docs.push(student(id, &mine, typed));
    }
    bulk(s, db, docs);
}

#[test]
fn mixed_types_need_a_discriminator_and_the_links_model_passes() {
    let s = Server::start();
    school(&s, "school", true);
    index(
        &s,
        "school",
        json!({"index": {"fields": ["links.target", "links.doc_type"]}, "name": "links"}),
    );
    // "This student and all their classes" (seed 002: find({"links.target": "S12345"})).
    for i in 0..20 {
        let link = json!({"target": format!("S{}", 12300 + i), "doc_type": "student"});
        let q = json!({"selector": {"links": {"$elemMatch": link}}, "execution_stats": true});
        let got = find(&s, "school", q);
        let stats = &got["execution_stats"];
        assert!(stats["results_returned"].as_u64().is_some_and(|n| n >= 2), "{got}");
        assert_eq!(stats["total_docs_examined"], stats["results_returned"], "{got}");
    }
    assert_clean(&advise(&s, "school"));
    // In Mango an index holds only documents with all its fields, so the two-field index
    // cannot serve `$elemMatch` on `target` alone: the advisor names the index that can.
    for i in 0..3 {
        let link = json!({"target": format!("S{}", 12300 + i)});
        find(&s, "school", json!({"selector": {"links": {"$elemMatch": link}}}));
    }
    let advice = advise(&s, "school");
    assert_eq!(rules(&advice), ["missing-index"]);
    let e = &finding(&advice, "missing-index")["evidence"];
    assert_eq!(e["selector"], json!({"links": {"$elemMatch": {"target": {"$eq": "?"}}}}));
    assert_eq!(
        (e["suggested_index"].clone(), e["planner_would_choose_it"].clone()),
        (json!(["links.target"]), json!(true))
    );

    school(&s, "school-untyped", false);
    let advice = advise(&s, "school-untyped");
    assert_eq!(rules(&advice), ["missing-discriminator"]);
    let shapes = finding(&advice, "missing-discriminator")["evidence"]["shapes"].clone();
    let mut sizes: Vec<u64> =
        shapes.as_array().into_iter().flatten().filter_map(|s| s["documents"].as_u64()).collect();
    sizes.sort_unstable();
    assert_eq!(sizes, [10, 200]);
}

#[test]
fn copies_that_drifted_from_their_source_are_found() {
    let s = Server::start();
    s.create_db("library");
    let mut docs: Vec<Value> = (0..5)
        .map(|a| json!({"_id": format!("author-{a}"), "type": "author", "name": format!("Author {a}")}))
        .collect();
    docs.extend((0..40).map(|b| {
        json!({"_id": format!("book-{b:02}"), "type": "book", "title": "T",
        "author": {"author_id": format!("author-{}", b % 5), "name": format!("Author {}", b % 5)}})
    }));
    bulk(&s, "library", docs);
    assert_clean(&advise(&s, "library"));
    // The author renames; the books keep the old name.
    let mut ada = s.get_doc("library", "author-2");
    ada["name"] = json!("Ada King");
    s.put_doc("library", "author-2", &ada);
    let advice = advise(&s, "library");
    assert_eq!(rules(&advice), ["drifted-copy"]);
    let e = &finding(&advice, "drifted-copy")["evidence"];
    assert_eq!(
        (e["field"].clone(), e["copies_compared"].clone(), e["copies_drifted"].clone()),
        (json!("author.name"), json!(40), json!(8))
    );
    assert_eq!(
        e["examples"][0],
        json!({"id": "book-02", "refers_to": "author-2",
                                        "copy": "Author 2", "source": "Ada King"})
    );
}

#[test]
fn top_level_copies_of_documents_that_change_often_suggest_a_reference() {
    let s = Server::start();
    s.create_db("forum");
    // Users whose profile changes all the time (a status line), and messages that copy the
    // poster's name and status beside `posted_by_id`.
    let users: Vec<Value> = (0..4)
        .map(|u| {
            json!({"_id": format!("user-{u}"), "type": "user", "name": format!("User {u}"),
                        "status": "s0"})
        })
        .collect();
    bulk(&s, "forum", users);
    let messages = (0..20).map(|m| {
        json!({"_id": format!("msg-{m:02}"), "type": "message", "text": "hi",
               "posted_by_id": format!("user-{}", m % 4), "posted_by_name": format!("User {}", m % 4)})
    });
    bulk(&s, "forum", messages.collect());
    assert_clean(&advise(&s, "forum"));
    for round in 1..25 {
        for u in 0..4 {
            let id = format!("user-{u}");
            let mut user = s.get_doc("forum", &id);
            user["status"] = json!(format!("s{round}"));
            s.put_doc("forum", &id, &user);
        }
    }
    let advice = advise(&s, "forum");
    assert_eq!(rules(&advice), ["changing-copy-source"], "{advice:#}");
    let e = &finding(&advice, "changing-copy-source")["evidence"];
    assert_eq!(
        (&e["field"], &e["source_field"], &e["sources_compared"], &e["source_revisions"]["p50"]),
        (&json!("posted_by_name"), &json!("name"), &json!(4), &json!(25))
    );
}

#[test]
fn missing_duplicate_and_unused_indexes_come_from_the_query_log() {
    let s = Server::start();
    subset_pattern(&s);
    // The same reviews without an index: every query by product reads them all.
    s.create_db("reviews-bare");
    bulk(&s, "reviews-bare", (0..300).map(|n| review(n, &format!("product-{}", n % 30))).collect());
    for p in 0..3 {
        find(&s, "reviews-bare", json!({"selector": {"product_id": format!("product-{p}")}}));
    }
    let advice = advise(&s, "reviews-bare");
    assert_eq!(rules(&advice), ["missing-index"]);
    let e = &finding(&advice, "missing-index")["evidence"];
    assert_eq!(e["selector"], json!({"product_id": {"$eq": "?"}}));
    assert_eq!(
        (e["runs"].clone(), e["docs_examined"].clone(), e["results_returned"].clone()),
        (json!(3), json!(900), json!(30))
    );
    assert_eq!(
        (e["suggested_index"].clone(), e["planner_would_choose_it"].clone()),
        (json!(["product_id"]), json!(true))
    );
    assert_eq!(e["index_used"], Value::Null);
    // With the index the advisor would have suggested, the same shape is no longer a finding.
    assert_clean(&advise(&s, "reviews"));

    // Two indexes on the same field, and one on a field no query uses.
    index(&s, "reviews", json!({"index": {"fields": ["product_id"]}, "name": "by-product-again"}));
    index(&s, "reviews", json!({"index": {"fields": ["review_author"]}, "name": "by-author"}));
    for i in 0..100 {
        find(
            &s,
            "reviews",
            json!({"selector": {"product_id": format!("product-{}", i % 20)},
                                    "use_index": ["by-product", "by-product"]}),
        );
    }
    let advice = advise(&s, "reviews");
    let mut found = rules(&advice);
    found.sort();
    assert_eq!(found, ["duplicate-index", "unused-index"]);
    let dup = &finding(&advice, "duplicate-index")["evidence"]["indexes"];
    assert_eq!(
        (dup[0]["def"].clone(), dup[1]["def"].clone()),
        (json!({"fields": [{"product_id": "asc"}]}), json!({"fields": [{"product_id": "asc"}]}))
    );
    let unused = &finding(&advice, "unused-index")["evidence"];
    assert_eq!(unused["index"]["name"], "by-author");
    assert_eq!(unused["queries_observed"], 105);
}

fn post(n: usize, embedded: bool) -> Value {
    let author = format!("author-{}", n % 4);
    let comments: Vec<String> = (0..3).map(|c| format!("comment-{n}-{c}")).collect();
    match embedded {
        true => json!({"_id": format!("post-{n:02}"), "tag": format!("t{}", n % 5),
            "author": {"author_id": author, "name": format!("Author {}", n % 4)},
            "comments": comments.iter().map(|c| json!({"id": c, "text": "Nice"})).collect::<Vec<_>>()}),
        false => json!({"_id": format!("post-{n:02}"), "tag": format!("t{}", n % 5),
            "author_id": author, "comment_ids": comments}),
    }
}

/// A blog whose posts refer to their authors and comments in other databases, or embed
/// them (the guides' model), with an index on `tag` for the query.
fn blog(s: &Server, embedded: bool) {
    s.create_db("posts");
    bulk(s, "posts", (0..40).map(|n| post(n, embedded)).collect());
    index(s, "posts", json!({"index": {"fields": ["tag"]}, "name": "by-tag"}));
    if !embedded {
        s.create_db("authors");
        s.create_db("comments");
        bulk(
            s,
            "authors",
            (0..4).map(|a| json!({"_id": format!("author-{a}"), "name": "A"})).collect(),
        );
        let comments = (0..40).flat_map(|n| (0..3).map(move |c| format!("comment-{n}-{c}")));
        bulk(s, "comments", comments.map(|id| json!({"_id": id, "text": "Nice"})).collect());
    }
}

/// Rule 8 over HTTP: every query for posts is followed, from the same client, by an
/// `_all_docs` lookup of the authors and a `_bulk_get` of the comments; the advisor files
/// both under the query's shape. Lookups by another client (no query of its own before
/// them) are not tied to it.
#[test]
fn lookups_by_id_after_each_query_are_too_many_joins() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    blog(&s, false);
    let amy = json!({"name": "amy", "password": "pw", "roles": [], "type": "user"});
    assert_eq!(s.put("/_users/org.couchdb.user:amy", &amy).0, 201);
    let members = json!({"members": {"names": ["amy"]}});
    assert_eq!(s.put("/authors/_security", &members).0, 200);
    let keys = json!({"keys": ["author-0", "author-1"]});
    for i in 0..20 {
        let posts =
            find(&s, "posts", json!({"selector": {"tag": format!("t{}", i % 5)}, "limit": 2}));
        let docs = posts["docs"].as_array().cloned().unwrap_or_default();
        assert_eq!(docs.len(), 2, "{posts}");
        let authors: Vec<&Value> = docs.iter().map(|d| &d["author_id"]).collect();
        let (status, body) =
            s.post("/authors/_all_docs?include_docs=true", &json!({"keys": authors}));
        assert_eq!(status, 200, "{body}");
        let wanted: Vec<Value> = docs
            .iter()
            .flat_map(|d| d["comment_ids"].as_array().cloned().unwrap_or_default())
            .map(|id| json!({"id": id}))
            .collect();
        let (status, body) = s.post("/comments/_bulk_get", &json!({"docs": wanted}));
        assert_eq!(status, 200, "{body}");
        // Another client reading authors by id, without a query of its own.
        let req = s.user_req(Method::POST, "/authors/_all_docs?include_docs=true", "amy", "pw");
        assert_eq!(send(req.json(&keys)).0, 200);
    }
    let advice = advise(&s, "posts");
    assert_eq!(rules(&advice), ["follow-up-lookups"]);
    let f = finding(&advice, "follow-up-lookups");
    assert_eq!(f["severity"], "info");
    let e = &f["evidence"];
    assert_eq!(e["selector"], json!({"tag": {"$eq": "?"}}));
    assert_eq!(
        [&e["runs"], &e["runs_followed"], &e["follow_up_requests"], &e["follow_ups_per_query"]],
        [&json!(20), &json!(20), &json!(40), &json!(2.0)]
    );
    assert_eq!(e["ids_per_follow_up"], json!(4.0), "2 authors and 6 comments per query");
    assert_eq!(e["by"], json!({"_all_docs": 20, "_bulk_get": 20}));
    assert_eq!(e["databases_looked_up"], json!(["authors", "comments"]));
    assert_eq!(e["examples"][0]["db"], "authors");
    assert_eq!(e["examples"][1]["kind"], "_bulk_get");
    let how = f["suggestion"].as_str().unwrap_or_default();
    assert!(how.contains("about 2 requests") && how.contains("embed"), "{how}");
    // The looked-up databases ran no query: nothing to report there.
    assert_clean(&advise(&s, "authors"));
    assert_clean(&advise(&s, "comments"));
}

/// The same reads on the guides' model: authors and comments embedded in the post, read
/// with the query alone (and `_all_docs` with `keys` but no documents, as a client
/// checking revisions does): no follow-ups, no finding.
#[test]
fn embedded_data_read_in_one_request_has_no_joins() {
    let s = Server::start();
    blog(&s, true);
    for i in 0..20 {
        let posts =
            find(&s, "posts", json!({"selector": {"tag": format!("t{}", i % 5)}, "limit": 2}));
        assert_eq!(
            posts["docs"][0]["author"]["name"].as_str().map(|n| n.starts_with("Author")),
            Some(true)
        );
        let (status, _) = s.post("/posts/_all_docs", &json!({"keys": ["post-00", "post-01"]}));
        assert_eq!(status, 200);
    }
    let advice = advise(&s, "posts");
    assert_clean(&advice);
    assert!(
        advice["rules_checked"].as_array().is_some_and(|r| r.contains(&json!("follow-up-lookups")))
    );
}

#[test]
fn advise_is_for_database_admins_and_validates_its_parameters() {
    let s = Server::start_with(&["--pbkdf2-iterations", "10"], &[]);
    s.create_db("people");
    s.put_doc("people", "ada", &json!({"name": "Ada"}));
    let user = json!({"_id": "org.couchdb.user:bob", "name": "bob", "type": "user", "roles": [], "password": "pw"});
    assert_eq!(s.put("/_users/org.couchdb.user:bob", &user).0, 201);
    let security = json!({"admins": {"names": []}, "members": {"names": ["bob"]}});
    assert_eq!(s.put("/people/_security", &security).0, 200);
    // A member may read documents but not the advice (it shows every user's query shapes).
    assert_eq!(send(s.user_req(Method::GET, "/people/ada", "bob", "pw")).0, 200);
    assert_error_kind(
        send(s.user_req(Method::GET, "/people/_advise", "bob", "pw")),
        403,
        "forbidden",
    );
    assert_error_kind(send(s.anon_req(Method::GET, "/people/_advise")), 401, "unauthorized");
    assert_error_kind(s.get("/nothing/_advise"), 404, "not_found");
    for bad in [
        "sample_size=0",
        "sample_size=-1",
        "sample_size=abc",
        "sample_size=100001",
        "time_budget_ms=0",
    ] {
        assert_error_kind(s.get(&format!("/people/_advise?{bad}")), 400, "query_parse_error");
    }
    assert_error_kind(
        send(s.req(Method::POST, "/people/_advise").json(&json!({}))),
        405,
        "method_not_allowed",
    );
    let advice = {
        let (status, body) = s.get("/people/_advise?sample_size=1&time_budget_ms=5000");
        assert_eq!(status, 200, "{body}");
        body
    };
    assert_eq!(advice["sample"]["requested"], 1);
    assert_eq!(advice["sample"]["size"], 1);
    assert_eq!(advice["sample"]["complete"], true);
    assert_eq!(advice["db_name"], "people");
    assert_eq!(advice["rules_checked"].as_array().map(Vec::len), Some(11), "{advice}");
}

#[test]
fn the_cli_prints_a_report_from_a_running_server() {
    let s = Server::start();
    s.create_db("shop");
    let products = (0..5).map(|p| {
        json!({"_id": format!("product-{p}"),
        "reviews": (0..(if p == 0 { 700 } else { 3 })).map(|r| review(r, "")).collect::<Vec<_>>()})
    });
    bulk(&s, "shop", products.collect());
    let url = s.base().replace("http://", &format!("http://{ADMIN}:{ADMIN_PASSWORD}@"));
    let out = Command::new(env!("CARGO_BIN_EXE_bunko"))
        .args(["advise", "--url", &url, "shop"])
        .env_remove("BUNKO_ADMIN")
        .output()
        .expect("run bunko advise");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "stdout {text} stderr {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("Bunko advisor: database \"shop\""), "{text}");
    assert!(
        text.contains("1. [WARNING] unbounded-array: `reviews` holds up to 700 elements"),
        "{text}"
    );
    assert!(text.contains("longest: {\"id\":\"product-0\",\"length\":700}"), "{text}");
    assert!(text.contains("Suggestion:") && text.contains("subset pattern"), "{text}");

    // Credentials from BUNKO_ADMIN; a clean database says so.
    s.create_db("people");
    s.put_doc("people", "ada", &json!({"name": "Ada", "addresses": [{"city": "London"}]}));
    let out = Command::new(env!("CARGO_BIN_EXE_bunko"))
        .args(["advise", "--url", s.base(), "people"])
        .env("BUNKO_ADMIN", format!("{ADMIN}:{ADMIN_PASSWORD}"))
        .output()
        .expect("run bunko advise");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("No findings"), "{text}");

    // Without credentials the server's error is shown and the exit status fails.
    let out = Command::new(env!("CARGO_BIN_EXE_bunko"))
        .args(["advise", "--url", s.base(), "people"])
        .env_remove("BUNKO_ADMIN")
        .output()
        .expect("run bunko advise");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("401 unauthorized"), "{err}");

    // `--data` opens the store itself: refused while the server holds it, fine once stopped.
    let data = s.data_dir();
    let direct = || {
        Command::new(env!("CARGO_BIN_EXE_bunko"))
            .arg("advise")
            .arg("--data")
            .arg(&data)
            .arg("shop")
            .output()
            .expect("run bunko advise --data")
    };
    let out = direct();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("cannot open the store"), "{err}");
    let mut s = s;
    assert!(s.terminate());
    let out = direct();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text} {}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("1. [WARNING] unbounded-array: `reviews` holds up to 700"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.is_empty(), "the report is not mixed with log lines: {err}");
}
