#!/usr/bin/env python3
"""Differential checks: the same documents, design documents and queries sent to Bunko and to
a real CouchDB, answers compared as JSON (DESIGN.md section 7). Standard library only.

    BUNKO_URL=http://127.0.0.1:5984 COUCH_URL=http://127.0.0.1:15984 \
    DIFF_USER=admin DIFF_PASSWORD=secret scripts/couchdb-diff.py

Databases are created with q=1 on CouchDB so that `offset` is one shard's (exact) count.
What Bunko does differently on purpose is normalised before comparing and listed in
`DELIBERATE`; everything else must be identical. Exits 1 if any answer differs.
"""
import base64
import json
import os
import random
import sys
import urllib.error
import urllib.parse
import urllib.request

SERVERS = {"couchdb": os.environ.get("COUCH_URL", "http://127.0.0.1:15984"),
           "bunko": os.environ.get("BUNKO_URL", "http://127.0.0.1:5984")}
CREDS = f"{os.environ.get('DIFF_USER', 'admin')}:{os.environ.get('DIFF_PASSWORD', 'secret')}"
AUTH = "Basic " + base64.b64encode(CREDS.encode()).decode()

DELIBERATE = [
    "partition queries: Bunko's total_rows/offset count the partition, CouchDB's the shard",
    "a malformed JSON parameter: Bunko's reason names the parameter "
    "(CouchDB: 'invalid UTF-8 JSON')",
    "error bodies: CouchDB's 'ref' member is not compared",
]


def call(base, method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": AUTH, "Content-Type": "application/json"}
    request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            return err.code, json.loads(raw)
        except ValueError:
            return err.code, raw.decode(errors="replace")


def both(method, path, body=None):
    return {name: call(base, method, path, body) for name, base in SERVERS.items()}


def normalise(path, answer):
    status, body = answer
    if isinstance(body, dict):
        body = dict(body)
        body.pop("ref", None)
        if "update_seq" in body:
            body["update_seq"] = "<seq>"
        if "/_partition/" in path or "partition=" in path:
            body.pop("total_rows", None)
            body.pop("offset", None)
        if status == 400 and body.get("reason") == "invalid UTF-8 JSON":
            body["reason"] = "<malformed JSON parameter>"
        elif status == 400 and str(body.get("reason", "")).startswith("Invalid JSON value"):
            body["reason"] = "<malformed JSON parameter>"
    return status, body


class Report:
    def __init__(self):
        self.checked = 0
        self.differ = 0

    def compare(self, label, method, path, body=None):
        got = {name: normalise(path, ans) for name, ans in both(method, path, body).items()}
        self.checked += 1
        if got["couchdb"] != got["bunko"]:
            self.differ += 1
            print(f"--- {label}: {method} {path} {json.dumps(body) if body else ''}")
            for name, answer in got.items():
                print(f"  {name}: {json.dumps(answer)[:700]}")


def fresh_db(name, partitioned=False):
    flag = "&partitioned=true" if partitioned else ""
    for base in SERVERS.values():
        call(base, "DELETE", f"/{name}")
        status, body = call(base, "PUT", f"/{name}?q=1{flag}")
        if status != 201:
            sys.exit(f"cannot create {name} on {base}: {status} {body}")


def put_all(db, docs):
    for base in SERVERS.values():
        for i in range(0, len(docs), 500):
            call(base, "POST", f"/{db}/_bulk_docs", {"docs": docs[i:i + 500]})


COLLATION_KEYS = [None, False, True, 1, 2, 3.0, 4, "a", "A", "aa", "b", "B", "ba", "bb", ["a"],
                  ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"], {"a": 1},
                  {"a": 2}, {"b": 1}, {"b": 2}, {"b": 2, "a": 1}, {"b": 2, "c": 2}, "~", "é",
                  "e", "f", -1, 0, 1e3, "ä", ["a", 1], [], {}]


def random_value(rng, depth=0):
    pick = rng.random()
    if depth > 3 or pick < 0.3:
        return rng.choice([None, True, False, 0, 1, 255, 256, -1, 65535, 2**31, -2**31 - 1,
                           2**63, 10**30, 0.5, -2.25, 1e300, 1e-7, 3.0, "", "x", "héllo",
                           "日本語", "\u0000", "😀", "quote\"", "a" * 300])
    if pick < 0.65:
        return [random_value(rng, depth + 1) for _ in range(rng.randint(0, 6))]
    if pick < 0.8:
        return [rng.randint(0, 300) for _ in range(rng.randint(1, 5))]
    return {f"k{rng.randint(0, 20)}": random_value(rng, depth + 1)
            for _ in range(rng.randint(0, 5))}


def check_revisions(report):
    """Revision ids of random documents, their updates and deletions."""
    fresh_db("diff_revs")
    rng = random.Random(7)
    docs = [{"_id": f"r{i}", **{f"f{rng.randint(0, 9)}": random_value(rng)
                                for _ in range(rng.randint(0, 6))}} for i in range(300)]
    report.compare("revisions", "POST", "/diff_revs/_bulk_docs", {"docs": docs})
    status, first = call(SERVERS["couchdb"], "GET", "/diff_revs/_all_docs")
    if status == 200:
        for row in first["rows"][:50]:
            update = {"_rev": row["value"]["rev"], "changed": [1, 2, {"x": row["id"]}]}
            report.compare("update", "PUT", f"/diff_revs/{row['id']}", update)
        for row in first["rows"][50:60]:
            status, doc = call(SERVERS["couchdb"], "GET", f"/diff_revs/{row['id']}")
            report.compare("delete", "DELETE", f"/diff_revs/{row['id']}?rev={doc['_rev']}")


def map_queries(q):
    coll = [("coll", {}), ("coll", {"descending": "true"}), ("coll", {"limit": 5, "skip": 3}),
            ("coll", {"descending": "true", "limit": 4, "skip": 2})]
    for key in COLLATION_KEYS:
        coll.append(("coll", {"key": json.dumps(key)}))
    for key in COLLATION_KEYS[::3]:
        start = json.dumps(key)
        coll += [("coll", {"startkey": start}),
                 ("coll", {"endkey": start, "inclusive_end": "false"}),
                 ("coll", {"startkey": start, "descending": "true", "limit": 3})]
    coll += [("coll", {"keys": json.dumps(["b", 1, None, "zz", ["b", "c"]])}),
             ("coll", {"keys": json.dumps(["b", 1]), "descending": "true"}),
             ("coll", {"keys": json.dumps(["b", 1]), "limit": 1, "skip": 1}),
             ("coll", {"startkey": '"b"', "startkey_docid": "d010", "endkey": '"bb"'}),
             ("coll", {"key": '"b"', "include_docs": "true"}), ("link", {"include_docs": "true"}),
             ("multi", {"key": 1}), ("multi", {"startkey": 1, "endkey": 2, "limit": 3, "skip": 2}),
             ("multi", {"key": 1, "startkey_docid": "d010"}),
             ("coll", {"update_seq": "true", "limit": 1}),
             ("coll", {"conflicts": "true", "include_docs": "true", "limit": 2})]
    for view, params in coll:
        q("GET", view, params)


def reduce_queries(q):
    pair = json.dumps([["x", 1], ["y", 2]])
    for view in ["count", "sum", "js"]:
        for params in [{}, {"group": "true"}, {"group_level": 1}, {"group_level": 2},
                       {"group_level": 0}, {"reduce": "false", "limit": 5},
                       {"group": "true", "startkey": '["y"]', "endkey": '["y",{}]'},
                       {"group": "true", "descending": "true", "limit": 3, "skip": 1},
                       {"keys": pair}, {"keys": pair, "group": "true"},
                       {"keys": pair, "group_level": 1}, {"keys": '[["x",1]]'},
                       {"keys": pair, "group": "true", "descending": "true"},
                       {"keys": '[["x",1]]', "group_level": 1},
                       {"group": "true", "group_level": 1}]:
            q("GET", view, params)
    for view in ["stats", "arrsum"]:
        q("GET", view, {})
        q("GET", view, {"group": "true"})


def error_queries(q):
    for view, params in [
            ("coll", {"group": "true"}), ("coll", {"reduce": "true"}),
            ("count", {"include_docs": "true"}), ("coll", {"limit": -1}),
            ("coll", {"limit": "abc"}), ("coll", {"skip": -2}), ("coll", {"descending": "maybe"}),
            ("coll", {"key": "notjson"}), ("coll", {"keys": '"x"'}),
            ("coll", {"key": '"a"', "keys": '["a"]'}),
            ("count", {"group": "false", "group_level": 1}), ("count", {"group_level": -1}),
            ("coll", {"update": "sometimes"}), ("coll", {"stale": "nope"}),
            ("coll", {"inclusive_end": "x"}), ("nope", {}),
            ("coll", {"startkey": '"b"', "endkey": '"a"'}),
            ("coll", {"startkey": '"a"', "endkey": '"b"', "descending": "true"})]:
        q("GET", view, params)
    for body in [{"keys": "notarray"}, {"keys": ["a", "B", {"a": 1}]},
                 {"startkey": "b", "limit": 2}, {"limit": "2"}, {"descending": "true", "limit": 1}]:
        q("POST", "coll", {}, body)


def check_views(report):
    """Map queries over the collation key set, reducers, parameter errors."""
    fresh_db("diff_views")
    docs = [{"_id": f"d{i:03d}", "foo": v, "n": i, "tags": [i % 3, i % 5],
             "kind": ["x", "y", "z"][i % 3]} for i, v in enumerate(COLLATION_KEYS)]
    docs += [{"_id": f"link{i}", "ref": f"d{i:03d}"} for i in range(3)]
    put_all("diff_views", docs)
    views = {
        "coll": "function(doc) { if ('foo' in doc) emit(doc.foo, null); }",
        "multi": "function(doc) { if (doc.tags) doc.tags.forEach(function(t) { emit(t, doc._id); }); }",
        "link": "function(doc) { if (doc.ref) emit(doc._id, {_id: doc.ref}); }",
    }
    pair = "function(doc) { if (doc.kind) emit([doc.kind, doc.n % 4], doc.n); }"
    ddoc = {"views": {name: {"map": src} for name, src in views.items()}}
    ddoc["views"].update({
        "count": {"map": pair, "reduce": "_count"}, "sum": {"map": pair, "reduce": "_sum"},
        "js": {"map": pair, "reduce": "function(k, v, re) { return sum(v); }"},
        "stats": {"map": "function(doc) { if (doc.kind) emit(doc.kind, doc.n); }",
                  "reduce": "_stats"},
        "arrsum": {"map": "function(doc) { if (doc.tags) emit(doc.kind, doc.tags); }",
                   "reduce": "_sum"}})
    for base in SERVERS.values():
        call(base, "PUT", "/diff_views/_design/t", ddoc)

    def q(method, view, params, body=None):
        path = f"/diff_views/_design/t/_view/{view}?" + urllib.parse.urlencode(params)
        report.compare("view", method, path, body)
    for queries in (map_queries, reduce_queries, error_queries):
        queries(q)


def check_partitions(report):
    """Reducers over many rows (rereduce), partitioned views and _all_docs."""
    fresh_db("diff_parts", partitioned=True)
    docs = [{"_id": f"p{i % 7}:d{i:05d}", "n": i, "f": i * 0.25, "g": i % 13,
             "obj": {"a": i % 3, "b": 1}, "arr": [i % 2, 1, i % 5]} for i in range(2500)]
    put_all("diff_parts", docs)
    reducers = {"stats": ("[d.g, d.n % 2], d.f", "_stats"), "sum": ("d.g, d.n", "_sum"),
                "objsum": ("d.g, d.obj", "_sum"), "arrsum": ("d.g, d.arr", "_sum"),
                "distinct": ("d.g, null", "_approx_count_distinct"),
                "jsre": ("d.g, d.n", "function(k, v, re) { return re ? sum(v) : v.length; }"),
                "count": ("d.g, 1", "_count")}
    global_ddoc = {"options": {"partitioned": False}, "views": {
        name: {"map": f"function(d) {{ emit({emit}); }}", "reduce": red}
        for name, (emit, red) in reducers.items()}}
    part_ddoc = {"views": {"by_g": {"map": "function(d){ emit(d.g, d.n); }", "reduce": "_count"}}}
    for base in SERVERS.values():
        call(base, "PUT", "/diff_parts/_design/r", global_ddoc)
        call(base, "PUT", "/diff_parts/_design/p", part_ddoc)
    for view in reducers:
        for params in [{}, {"group": "true"}, {"group_level": 1}, {"startkey": 3, "endkey": 9},
                       {"group": "true", "descending": "true", "limit": 4}]:
            path = f"/diff_parts/_design/r/_view/{view}?" + urllib.parse.urlencode(params)
            report.compare("reduce", "GET", path)
    for part in ["p0", "p3", "p9"]:
        for params in [{}, {"group": "true"}, {"reduce": "false", "limit": 5, "skip": 3},
                       {"reduce": "false", "key": 4, "limit": 3},
                       {"reduce": "false", "descending": "true", "limit": 2, "skip": 1},
                       {"reduce": "false", "startkey": 5, "limit": 2}]:
            path = f"/diff_parts/_partition/{part}/_design/p/_view/by_g?" + urllib.parse.urlencode(params)
            report.compare("partition view", "GET", path)
        report.compare("partition", "GET", f"/diff_parts/_partition/{part}/_all_docs?limit=3&skip=2")
    for params in ["partition=p3&reduce=false&limit=2", "partition=_x", "partition=p3&stable=true",
                   "stable=x", "partition=p3&sorted=x"]:
        report.compare("partition", "GET", f"/diff_parts/_design/p/_view/by_g?{params}")
    report.compare("partition", "GET", "/diff_parts/_design/r/_view/count?partition=p3")
    report.compare("partition", "GET", "/diff_parts/_design/p/_view/by_g")
    report.compare("partition", "GET", "/diff_parts/_partition/p1/_design/r/_view/count")


def main():
    report = Report()
    for check in (check_revisions, check_views, check_partitions):
        check(report)
    for base in SERVERS.values():
        for db in ("diff_revs", "diff_views", "diff_parts"):
            call(base, "DELETE", f"/{db}")
    print(f"{report.checked} requests compared, {report.differ} differ")
    print("not compared (deliberate differences):")
    for item in DELIBERATE:
        print(f"  - {item}")
    return 1 if report.differ else 0


if __name__ == "__main__":
    sys.exit(main())
