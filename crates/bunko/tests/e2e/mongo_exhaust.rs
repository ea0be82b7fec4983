//! Exhaust cursors (issue 13): a `getMore` sent with `OP_MSG`'s `exhaustAllowed` flag is
//! answered by a stream of replies flagged `moreToCome`, one batch each, until the cursor
//! is exhausted; pymongo's `CursorType.EXHAUST` reads them without asking again, and the
//! connection serves ordinary commands afterwards.

use serde_json::json;

use crate::harness::Server;
use crate::mongo::python;

#[test]
fn exhaust_cursors_stream_every_batch_unasked() {
    let server = Server::start();
    let script = r#"
from pymongo import CursorType
names = CommandNames()
c = client(event_listeners=[names], maxPoolSize=1)
co = c.ex.items
co.insert_many([{"_id": i, "v": "x" * 50} for i in range(1000)])
cur = co.find({"_id": {"$gte": 0}}, cursor_type=CursorType.EXHAUST, batch_size=100).sort("_id", 1)
got, streamed = [], 0
for doc in cur:
    got.append(doc["_id"])
    mgr = cur._sock_mgr
    if mgr is not None and mgr.more_to_come:
        streamed += 1
assert got == list(range(1000)), got[:5]
# The replies after the first getMore came flagged moreToCome (pymongo then only reads).
assert streamed > 0, streamed
assert cur.alive is False
# The pinned connection is back in the pool and serves the next commands.
assert co.count_documents({}) == 1000
assert c.ex.command("ping")["ok"] == 1.0
# A short answer needs no getMore at all; a cursor's last batch ends the stream.
assert len(list(co.find({"_id": {"$lt": 5}}, cursor_type=CursorType.EXHAUST))) == 5
assert len(list(co.find({}, cursor_type=CursorType.EXHAUST, batch_size=999))) == 1000
print(json.dumps({"ok": True}))
"#;
    let Some(result) = python(&server, script) else { return };
    assert_eq!(result, json!({"ok": true}));
}
