//! Database lifecycle: create, info, HEAD, delete, name rules.

use serde_json::{Value, json};

use crate::harness::{Server, assert_error, assert_seq};

fn illegal_name_reason(name: &str) -> String {
    // chttpd:error_info({error, {illegal_database_name, Name}})
    format!(
        "Name: '{name}'. Only lowercase characters (a-z), digits (0-9), and any of the characters \
         _, $, (, ), +, -, and / are allowed. Must begin with a letter."
    )
}

#[test]
fn create_database_returns_201_ok_and_location() {
    let s = Server::start();
    let resp = s.req(reqwest::Method::PUT, "/people").send().unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let location = resp.headers().get("location").map(|v| v.to_str().unwrap().to_string());
    assert!(location.as_deref().is_some_and(|l| l.ends_with("/people")), "Location: {location:?}");
    assert_eq!(crate::harness::body_json(resp), json!({"ok": true}));
}

#[test]
fn create_existing_database_is_412_file_exists() {
    let s = Server::start();
    s.create_db("people");
    assert_error(
        s.put_empty("/people"),
        412,
        "file_exists",
        "The database could not be created, the file already exists.",
    );
}

#[test]
fn missing_database_is_404_for_get_delete_and_doc_routes() {
    let s = Server::start();
    let reason = "Database does not exist.";
    assert_error(s.get("/nope"), 404, "not_found", reason);
    assert_error(s.delete("/nope"), 404, "not_found", reason);
    assert_error(s.get("/nope/some-doc"), 404, "not_found", reason);
    assert_error(s.get("/nope/_all_docs"), 404, "not_found", reason);
    assert_error(s.put("/nope/doc", &json!({"a": 1})), 404, "not_found", reason);
    let head = s.head("/nope");
    assert_eq!(head.status().as_u16(), 404);
}

#[test]
fn illegal_database_names_are_rejected_with_couchdb_reason() {
    let s = Server::start();
    // (URL path segment, decoded name)
    for (path, name) in [
        ("Books", "Books"),
        ("1books", "1books"),
        ("books!", "books!"),
        ("my%20books", "my books"),
        ("_books", "_books"),
        ("b%C3%BCcher", "bücher"),
    ] {
        assert_error(
            s.put_empty(&format!("/{path}")),
            400,
            "illegal_database_name",
            &illegal_name_reason(name),
        );
    }
    let (_, all) = s.get("/_all_dbs");
    let user_dbs: Vec<&Value> =
        all.as_array().unwrap().iter().filter(|n| !n.as_str().unwrap().starts_with('_')).collect();
    assert!(user_dbs.is_empty(), "nothing created: {all}");
}

#[test]
fn legal_database_names_with_special_characters_are_accepted() {
    let s = Server::start();
    // a-z, 0-9, _ $ ( ) + - / are allowed after a leading letter; `/` arrives as %2F.
    for (path, name) in
        [("a", "a"), ("db_1%24(x)%2By-z", "db_1$(x)+y-z"), ("tenant%2Fbooks", "tenant/books")]
    {
        s.create_db(path);
        let info = s.db_info(path);
        assert_eq!(info["db_name"], name);
    }
    let (_, all) = s.get("/_all_dbs");
    let all: Vec<&str> = all.as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
    for name in ["a", "db_1$(x)+y-z", "tenant/books"] {
        assert!(all.contains(&name), "{name} in {all:?}");
    }
}

#[test]
fn fresh_database_info_has_couchdb_fields() {
    let s = Server::start();
    s.create_db("people");
    let info = s.db_info("people");
    assert_eq!(info["db_name"], "people");
    assert_eq!(info["doc_count"], 0);
    assert_eq!(info["doc_del_count"], 0);
    assert_seq(&info["update_seq"]);
    assert_eq!(info["instance_start_time"], "0");
    assert_eq!(info["compact_running"], false);
    assert_eq!(info["props"], json!({}));
    for size in ["file", "external", "active"] {
        assert!(info["sizes"][size].is_u64(), "sizes.{size} is a number: {info}");
    }
    assert!(info["purge_seq"].is_string() || info["purge_seq"].is_u64(), "purge_seq: {info}");
}

#[test]
fn database_info_counts_follow_writes_and_deletes() {
    let s = Server::start();
    s.create_db("people");
    let seq0 = s.db_info("people")["update_seq"].clone();
    let r1 = s.put_doc("people", "thomas", &json!({"firstName": "Thomas"}));
    s.put_doc("people", "william", &json!({"firstName": "William"}));
    s.put_doc("people", "_design/people", &json!({"views": {}}));
    s.put_doc("people", "_local/checkpoint", &json!({"seq": 1}));
    let info = s.db_info("people");
    // Design docs count; _local docs do not.
    assert_eq!((info["doc_count"].clone(), info["doc_del_count"].clone()), (json!(3), json!(0)));
    assert_ne!(info["update_seq"], seq0);

    let (status, _) = s.delete(&format!("/people/thomas?rev={r1}"));
    assert_eq!(status, 200);
    let info = s.db_info("people");
    assert_eq!((info["doc_count"].clone(), info["doc_del_count"].clone()), (json!(2), json!(1)));

    // Recreating the deleted document moves it back.
    s.put_doc("people", "thomas", &json!({"firstName": "Thomas", "again": true}));
    let info = s.db_info("people");
    assert_eq!((info["doc_count"].clone(), info["doc_del_count"].clone()), (json!(3), json!(0)));
}

#[test]
fn head_database_is_200_without_body() {
    let s = Server::start();
    s.create_db("people");
    let resp = s.head("/people");
    assert_eq!(resp.status().as_u16(), 200);
    assert!(resp.bytes().unwrap().is_empty());
}

#[test]
fn delete_database_removes_it_and_its_documents() {
    let s = Server::start();
    s.create_db("people");
    s.put_doc("people", "thomas", &json!({"firstName": "Thomas"}));
    assert_eq!(s.delete("/people"), (200, json!({"ok": true})));
    assert_error(s.get("/people"), 404, "not_found", "Database does not exist.");
    let (_, all) = s.get("/_all_dbs");
    assert!(!all.as_array().unwrap().contains(&json!("people")));

    // A database recreated under the same name starts empty.
    s.create_db("people");
    let info = s.db_info("people");
    assert_eq!((info["doc_count"].clone(), info["doc_del_count"].clone()), (json!(0), json!(0)));
    assert_error(s.get("/people/thomas"), 404, "not_found", "missing");
}

#[test]
fn delete_database_with_rev_parameter_is_bad_request() {
    // basics_test.exs "oops, the doc id got lost in code nirwana".
    let s = Server::start();
    s.create_db("people");
    assert_error(
        s.delete("/people/?rev=1-abc"),
        400,
        "bad_request",
        "You tried to DELETE a database with a ?=rev parameter. Did you mean to DELETE a document \
         instead?",
    );
    assert_eq!(s.db_info("people")["db_name"], "people", "database still exists");
}
