//! Show and list functions (issue 16), deprecated in CouchDB 3 but still served: the cases
//! of CouchDB 3.4's `show_documents_test.exs` and `list_views_test.exs` on the seeds'
//! library data: bodies and codes, `req`, the `list()`-style API inside shows, `provides`
//! by `?format=` and `Accept` with `registerType`, errors, ETags, lists over views of the
//! same or another design document with query parameters and `keys`, and who may call them.

use reqwest::Method;
use reqwest::blocking::Response;
use serde_json::{Value, json};

use crate::harness::{Server, body_json, send};

fn template() -> Value {
    json!({"language": "javascript", "shows": {
        "hello": "function(doc, req) { if (doc) { return 'Hello World'; } else { if (req.id) { return 'New World'; } else { return 'Empty World'; } } }",
        "just-name": "function(doc, req) { if (doc) { return {body: 'Just ' + doc.name}; } else { return {body: 'No such doc', code: 404}; } }",
        "req-info": "function(doc, req) { return {json: req}; }",
        "show-deleted": "function(doc, req) { if (doc) { return doc._id; } else { return 'No doc ' + req.id; } }",
        "render-error": "function(doc, req) { return noSuchVariable; }",
        "fail": "function(doc, req) { return doc._id; }",
        "no-set-etag": "function(doc, req) { return {headers: {'Etag': 'skipped'}, body: 'something'}; }",
        "list-api": "function(doc, req) { start({'X-Couch-Test-Header': 'Yeah'}); send('Hey'); }",
        "list-api-provides-and-return": "function(doc, req) { provides('text', function() { send('4, '); send('5, '); send('6, '); return '7!'; }); send('1, '); send('2, '); return '3, '; }",
        "list-api-mix-with-header": "function(doc, req) { start({'X-Couch-Test-Header': 'Yeah'}); send('Hey '); return {headers: {'X-Couch-Test-Header-Awesome': 'Oh Yeah!'}, body: 'Dude'}; }",
        "provides": "function(doc, req) { registerType('foo', 'application/foo', 'application/x-foo'); provides('html', function() { return 'Ha ha, you said \"' + doc.word + '\".'; }); provides('foo', function() { return 'foofoo'; }); }",
        "secObj": "function(doc, req) { return {json: req.secObj}; }",
        "this": "function(doc, req) { return this._id + ' ' + this.title; }"
    }, "title": "書庫"})
}

fn set_up(s: &Server) {
    s.create_db("shows");
    s.put_doc("shows", "_design/template", &template());
    s.put_doc("shows", "test-doc-id", &json!({"word": "plankton", "name": "Rusty"}));
}

fn raw(s: &Server, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut req = s.req(Method::GET, path);
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    req.send().expect("GET")
}

fn text(resp: Response) -> (u16, String) {
    let status = resp.status().as_u16();
    (status, resp.text().expect("body"))
}

fn header(resp: &Response, name: &str) -> String {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
}

const SHOW: &str = "/shows/_design/template/_show";

#[test]
fn shows_answer_as_couchdbs_show_documents_test() {
    let s = Server::start();
    set_up(&s);
    let resp = raw(&s, &format!("{SHOW}/hello/test-doc-id"), &[]);
    assert!(header(&resp, "content-type").contains("charset=utf-8"));
    assert_eq!(text(resp), (200, "Hello World".into()));
    assert_eq!(text(raw(&s, &format!("{SHOW}/hello"), &[])), (200, "Empty World".into()));
    assert_eq!(
        text(raw(&s, &format!("{SHOW}/hello/nonExistingDoc"), &[])),
        (200, "New World".into())
    );
    assert_eq!(
        text(raw(&s, &format!("{SHOW}/just-name/test-doc-id"), &[])),
        (200, "Just Rusty".into())
    );
    assert_eq!(
        text(raw(&s, &format!("{SHOW}/just-name/missingdoc"), &[])),
        (404, "No such doc".into())
    );
    assert_eq!(text(raw(&s, &format!("{SHOW}/this"), &[])), (200, "_design/template 書庫".into()));

    for path in [SHOW.to_string(), format!("{SHOW}/")] {
        let answer = s.get(&path);
        assert_eq!(
            answer,
            (404, json!({"error": "show_error", "reason": "Invalid path."})),
            "{path}"
        );
    }
    let (status, body) = s.get(&format!("{SHOW}/fail/nonExistingDoc"));
    assert_eq!((status, body["error"].clone()), (404, json!("not_found")), "{body}");
    let (status, body) = s.get("/shows/_design/missingddoc/_show/just-name/test-doc-id");
    assert_eq!((status, body["error"].clone()), (404, json!("not_found")));
    let (status, body) = s.get(&format!("{SHOW}/render-error/test-doc-id"));
    assert_eq!((status, body["error"].clone()), (500, json!("render_error")), "{body}");
    assert!(body["reason"].as_str().is_some_and(|r| r.contains("noSuchVariable")), "{body}");

    let resp = raw(&s, &format!("{SHOW}/req-info/test-doc-id?foo=bar"), &[("X-Foo", "bar")]);
    let req = body_json(resp);
    assert_eq!(req["headers"]["X-Foo"], json!("bar"), "{req}");
    assert_eq!(req["query"], json!({"foo": "bar"}));
    assert_eq!(req["method"], json!("GET"));
    assert_eq!(req["path"][5], json!("test-doc-id"));
    assert_eq!(req["id"], json!("test-doc-id"));
    assert_eq!(req["info"]["db_name"], json!("shows"));
    assert_eq!(req["userCtx"]["name"], json!("admin"));

    // Deleted documents are shown as missing.
    let rev = s.put_doc("shows", "testdoc", &json!({"foo": 1}));
    assert_eq!(text(raw(&s, &format!("{SHOW}/show-deleted/testdoc"), &[])).1, "testdoc");
    assert_eq!(s.delete(&format!("/shows/testdoc?rev={rev}")).0, 200);
    assert_eq!(text(raw(&s, &format!("{SHOW}/show-deleted/testdoc"), &[])).1, "No doc testdoc");
    // An id with slashes.
    s.put_doc("shows", "a%2Fb%2Fc", &json!({"a": 1}));
    assert_eq!(text(raw(&s, &format!("{SHOW}/show-deleted/a/b/c"), &[])), (200, "a/b/c".into()));
    // `req.secObj` is the database's security object.
    let security = json!({"members": {"names": ["admin"]}, "admins": {"names": []}});
    assert_eq!(s.put("/shows/_security", &security).0, 200);
    assert_eq!(s.get(&format!("{SHOW}/secObj")).1, security);
}

#[test]
fn the_list_api_and_provides_inside_shows() {
    let s = Server::start();
    set_up(&s);
    let resp = raw(&s, &format!("{SHOW}/list-api/foo"), &[]);
    assert_eq!(header(&resp, "x-couch-test-header"), "Yeah");
    assert_eq!(text(resp), (200, "Hey".into()));
    let order = raw(&s, &format!("{SHOW}/list-api-provides-and-return/foo?format=text"), &[]);
    assert_eq!(text(order).1, "1, 2, 3, 4, 5, 6, 7!");
    let mixed = raw(&s, &format!("{SHOW}/list-api-mix-with-header/foo"), &[]);
    assert_eq!(header(&mixed, "x-couch-test-header"), "Yeah");
    assert_eq!(header(&mixed, "x-couch-test-header-awesome"), "Oh Yeah!");
    assert_eq!(text(mixed).1, "Hey Dude");

    let accept = [("Accept", "text/html,application/atom+xml; q=0.9")];
    let html = raw(&s, &format!("{SHOW}/provides/test-doc-id"), &accept);
    assert_eq!(header(&html, "content-type"), "text/html; charset=utf-8");
    assert_eq!(text(html).1, "Ha ha, you said \"plankton\".");
    let foo = raw(&s, &format!("{SHOW}/provides/test-doc-id"), &[("Accept", "application/x-foo")]);
    assert_eq!(header(&foo, "content-type"), "application/x-foo");
    assert_eq!(text(foo).1, "foofoo");
    let monkeys = raw(&s, &format!("{SHOW}/provides/test-doc-id"), &[("Accept", "text/monkeys")]);
    assert_eq!(monkeys.status(), 406);
    assert_eq!(body_json(monkeys)["error"], json!("not_acceptable"));
}

#[test]
fn a_show_has_its_own_etag() {
    let s = Server::start();
    set_up(&s);
    let path = format!("{SHOW}/just-name/test-doc-id");
    let first = raw(&s, &path, &[]);
    let etag = header(&first, "etag");
    assert_eq!(header(&first, "vary"), "Accept");
    assert!(etag.starts_with('"'), "{etag}");
    assert_eq!(raw(&s, &path, &[("If-None-Match", &etag)]).status(), 304);
    let doc = s.get_doc("shows", "test-doc-id");
    s.put_doc("shows", "test-doc-id", &json!({"_rev": doc["_rev"], "name": "Crusty"}));
    let changed = raw(&s, &path, &[("If-None-Match", &etag)]);
    assert_eq!(text(changed), (200, "Just Crusty".into()));
    let skipped = raw(&s, &format!("{SHOW}/no-set-etag/test-doc-id"), &[]);
    assert_ne!(header(&skipped, "etag"), "skipped", "a function cannot set the ETag");
    // CouchDB's `show_etag`: a quoted base-36 hash of the design document's and the
    // document's revisions, the `Accept` header and the caller's roles, made before the
    // function runs, so it is the same for every function of the design document.
    let now = header(&raw(&s, &path, &[]), "etag");
    assert_eq!(header(&skipped, "etag"), now);
    let inner = now.trim_matches('"');
    assert!(inner.chars().all(|c| c.is_ascii_digit() || c.is_ascii_uppercase()), "{now}");
    let html = header(&raw(&s, &path, &[("Accept", "text/html")]), "etag");
    assert_ne!(html, now, "the Accept header is part of it");
    let anonymous = s.anon_req(reqwest::Method::GET, &path).send().expect("show");
    assert_ne!(header(&anonymous, "etag"), now, "the roles are part of it");
}

fn lists() -> Value {
    json!({"language": "javascript",
    "views": {
        "basicView": {"map": "function(doc) { emit(doc.integer, doc.string); }"},
        "withReduce": {"map": "function(doc) { emit(doc.integer, doc.string); }",
            "reduce": "function(keys, values, rereduce) { if (rereduce) { return sum(values); } else { return values.length; } }"}
    },
    "lists": {
        "basicBasic": "function(head, req) { send('head'); var row; while (row = getRow()) { send(row.key); }; return 'tail'; }",
        "basicJSON": "function(head, req) { start({'headers': {'Content-Type': 'application/json'}}); send('{\"head\":' + toJSON(head) + ', '); send('\"req\":' + toJSON(req) + ', '); send('\"rows\":['); var row, sep = ''; while (row = getRow()) { send(sep + toJSON(row)); sep = ', '; } return ']}'; }",
        "simpleForm": "function(head, req) { send('<ul>'); var row, n = 0, prevKey, firstKey = null; while (row = getRow()) { n += 1; if (!firstKey) firstKey = row.key; prevKey = row.key; send('\\n<li>Key: ' + row.key + ' Value: ' + row.value + ' LineNo: ' + n + '</li>'); } return '</ul><p>FirstKey: ' + firstKey + ' LastKey: ' + prevKey + '</p>'; }",
        "acceptSwitch": "function(head, req) { provides('html', function() { send('HTML <ul>'); var row; while (row = getRow()) { send('\\n<li>Key: ' + row.key + ' Value: ' + row.value + '</li>'); } return '</ul>'; }); }",
        "qsParams": "function(head, req) { return toJSON(req.query) + '\\n'; }",
        "stopIter": "function(req) { send('head'); var row, n = 0; while (row = getRow()) { if (n > 2) break; send(' ' + n); n += 1; }; return ' tail'; }",
        "tooManyGetRows": "function() { send('head'); var row; while (row = getRow()) { send(row.key); }; getRow(); getRow(); getRow(); row = getRow(); return 'after row: ' + toJSON(row); }"
    }})
}

fn list_db(s: &Server) {
    s.create_db("lists");
    s.put_doc("lists", "_design/lists", &lists());
    let docs: Vec<Value> = (0..10)
        .map(|i| json!({"_id": i.to_string(), "integer": i, "string": i.to_string()}))
        .collect();
    let (status, body) = s.post("/lists/_bulk_docs", &json!({"docs": docs}));
    assert_eq!(status, 201, "{body}");
    let other =
        json!({"views": {"names": {"map": "function(doc) { emit(-doc.integer, doc.string); }"}}});
    s.put_doc("lists", "_design/views", &other);
}

const LIST: &str = "/lists/_design/lists/_list";

#[test]
fn lists_render_view_rows_as_couchdbs_list_views_test() {
    let s = Server::start();
    list_db(&s);
    let basic = raw(&s, &format!("{LIST}/basicBasic/basicView"), &[]);
    assert_eq!(header(&basic, "content-type"), "application/json");
    assert_eq!(text(basic), (200, "head0123456789tail".into()));

    let (status, rich) = s.get(&format!("{LIST}/basicJSON/basicView"));
    assert_eq!(status, 200, "{rich}");
    assert_eq!(
        (rich["head"]["total_rows"].clone(), rich["head"]["offset"].clone()),
        (json!(10), json!(0))
    );
    assert_eq!(rich["rows"].as_array().map(Vec::len), Some(10));
    assert_eq!(rich["rows"][0], json!({"id": "0", "key": 0, "value": "0"}));
    assert_eq!(rich["req"]["info"]["db_name"], json!("lists"));
    assert_eq!(
        rich["req"]["path"],
        json!(["lists", "_design", "lists", "_list", "basicJSON", "basicView"])
    );
    assert!(rich["req"]["headers"].get("Host").is_some(), "{}", rich["req"]["headers"]);
    let (_, seq) = s.get(&format!("{LIST}/basicJSON/basicView?update_seq=true"));
    let raw_path = "/lists/_design/lists/_list/basicJSON/basicView?update_seq=true";
    assert_eq!(seq["req"]["raw_path"], raw_path, "the path as requested");
    // `OPTIONS` runs the list as `GET` does, and `_all_docs` can be listed too.
    let options = s.req(Method::OPTIONS, &format!("{LIST}/basicBasic/basicView")).send();
    assert_eq!(options.ok().map(text), Some((200, "head0123456789tail".into())));
    let (status, listed) = s.get(&format!("{LIST}/basicJSON/_all_docs?limit=2"));
    assert_eq!(status, 200, "{listed}");
    let (_, all) = s.get("/lists/_all_docs?limit=2");
    assert_eq!(
        (&listed["head"]["total_rows"], &listed["rows"]),
        (&all["total_rows"], &all["rows"])
    );

    let (_, form) = text(raw(&s, &format!("{LIST}/simpleForm/basicView?startkey=3&endkey=8"), &[]));
    assert!(
        !form.contains("Key: 1 ") && form.contains("FirstKey: 3") && form.contains("LastKey: 8"),
        "{form}"
    );
    let (_, empty) = text(raw(&s, &format!("{LIST}/simpleForm/basicView?startkey=30"), &[]));
    assert!(empty.contains("</ul>") && empty.contains("FirstKey: null"), "{empty}");
    let (_, more) = text(raw(&s, &format!("{LIST}/tooManyGetRows/basicView"), &[]));
    assert!(more.ends_with("9after row: null"), "{more}");
    let (_, reduced) = text(raw(&s, &format!("{LIST}/simpleForm/withReduce?group=true"), &[]));
    assert!(reduced.contains("Key: 1 Value: 1"), "{reduced}");
    let (_, unreduced) = text(raw(&s, &format!("{LIST}/simpleForm/withReduce?reduce=false"), &[]));
    assert!(unreduced.contains("Key: 1 Value: 1 LineNo: 2"), "{unreduced}");
    let (_, stopped) = text(raw(&s, &format!("{LIST}/stopIter/basicView"), &[]));
    assert_eq!(stopped, "head 0 1 2 tail");
    let (_, qs) = text(raw(&s, &format!("{LIST}/qsParams/basicView?foo=blam"), &[]));
    assert!(qs.contains("blam"), "{qs}");

    let html = raw(&s, &format!("{LIST}/acceptSwitch/basicView"), &[("Accept", "text/html")]);
    assert_eq!(header(&html, "content-type"), "text/html; charset=utf-8");
    assert!(text(html).1.starts_with("HTML <ul>"));

    // A view of another design document, and `keys` by GET and by POST.
    let (_, other) =
        text(raw(&s, &format!("{LIST}/simpleForm/views/names?startkey=-3&endkey=0"), &[]));
    assert!(
        other.contains("FirstKey: -3")
            && other.contains("LastKey: 0")
            && !other.contains("Key: -4"),
        "{other}"
    );
    let keys = json!([2, 4, 5, 7]);
    let by_get = text(raw(&s, &format!("{LIST}/simpleForm/basicView?keys={keys}"), &[]));
    let by_post = send(
        s.req(Method::POST, &format!("{LIST}/simpleForm/basicView")).json(&json!({"keys": keys})),
    );
    for body in [by_get.1, by_post.1.as_str().unwrap_or_default().to_string()] {
        assert!(
            body.contains("FirstKey: 2")
                && body.contains("LastKey: 7")
                && !body.contains("Key: 1 "),
            "{body}"
        );
    }
    let answer = s.get(&format!("{LIST}/simpleForm"));
    assert_eq!(answer, (404, json!({"error": "list_error", "reason": "Invalid path."})));
    // A missing view or list function.
    assert_eq!(s.get(&format!("{LIST}/simpleForm/nope")).0, 404);
    assert_eq!(s.get(&format!("{LIST}/nope/basicView")).0, 404);
}

#[test]
fn only_members_call_shows_and_lists() {
    let s = Server::start();
    set_up(&s);
    list_db(&s);
    let user = json!({"_id": "org.couchdb.user:kana", "name": "kana", "type": "user", "roles": [], "password": "pw"});
    assert_eq!(s.put("/_users/org.couchdb.user:kana", &user).0, 201);
    for db in ["shows", "lists"] {
        let security = json!({"members": {"names": ["someone"]}});
        assert_eq!(s.put(&format!("/{db}/_security"), &security).0, 200);
    }
    for path in [format!("{SHOW}/hello/test-doc-id"), format!("{LIST}/basicBasic/basicView")] {
        let (status, body) = send(s.user_req(Method::GET, &path, "kana", "pw"));
        assert_eq!((status, body["error"].clone()), (403, json!("forbidden")), "{path}: {body}");
    }
}

/// CommonJS `require` in design functions resolves against the design document, with
/// CouchDB's module ids and circular requires (`design_docs_test.exs`); update functions
/// get it too.
#[test]
fn design_functions_require_modules_of_their_design_document() {
    let s = Server::start();
    s.create_db("shelf");
    let ddoc = json!({
        "whatever": {
            "commonjs": {
                "upper": "exports.testing = require('./names').first.toUpperCase() + module.id;",
                "names": "exports.first = 'soseki';"
            },
            "one": "require('./two'); exports.name = 'One';",
            "two": "require('./one'); exports.name = 'Two';"
        },
        "shows": {
            "requirey": "function(doc, req) { return require('whatever/commonjs/upper').testing; }",
            "circular": "function(doc, req) { return require('whatever/one').name; }",
            "missing": "function(doc, req) { return require('whatever/nothing'); }"
        },
        "updates": {
            "stamp": "function(doc, req) { return [null, require('whatever/commonjs/names').first]; }"
        }
    });
    s.put_doc("shelf", "_design/app", &ddoc);
    let show = |name: &str| text(raw(&s, &format!("/shelf/_design/app/_show/{name}"), &[]));
    assert_eq!(show("requirey"), (200, "SOSEKIwhatever/commonjs/upper".into()));
    assert_eq!(show("circular"), (200, "One".into()));
    let (status, missing) = show("missing");
    let missing: Value = serde_json::from_str(&missing).unwrap_or_default();
    assert_eq!(status, 500, "{missing}");
    assert_eq!(missing["error"], "invalid_require_path", "CouchDB 3.4.3's answer");
    let reason = missing["reason"].as_str().unwrap_or_default();
    assert!(reason.starts_with("Object has no property \"nothing\". {"), "{reason}");
    let update = s.req(Method::POST, "/shelf/_design/app/_update/stamp").send().expect("update");
    assert_eq!(text(update), (200, "soseki".into()));
}
