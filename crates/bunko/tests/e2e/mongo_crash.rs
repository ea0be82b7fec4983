//! `kill -9` during MongoDB writes: every acknowledged `insert_many` and `$inc` survives
//! the restart. The server answers a MongoDB write only once its sync is done (awaited on
//! the runtime, not on the command's blocking thread); this checks that promise from the
//! driver's side, through pymongo.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{ADMIN, ADMIN_PASSWORD, Server};
use crate::mongo::{PRELUDE, pymongo, python};

/// Writers run this long after their first answers; the kill lands mid-request.
const WRITE_FOR: Duration = Duration::from_millis(1500);

/// Four threads insert batches of ten new documents (retryable writes: pymongo sends
/// `txnNumber`), a fifth `$inc`s one counter; each prints what the server acknowledged,
/// one JSON line per answer, and stops at the first error (the server is gone).
const WRITERS: &str = r#"
import sys, threading
lock = threading.Lock()
def fast_failing_client():
    url = f"mongodb://{USER}:{PASSWORD}@{ADDR}/?authSource=admin"
    return MongoClient(url, serverSelectionTimeoutMS=1000)
def say(line):
    with lock:
        print(json.dumps(line), flush=True)
def inserts(w):
    coll = fast_failing_client().app.iot
    try:
        for i in range(1_000_000):
            docs = [{"_id": f"w{w}-{i:06}-{k}", "deviceID": f"device-{w}", "seq": i} for k in range(10)]
            coll.insert_many(docs)
            say({"ids": [d["_id"] for d in docs]})
    except Exception:
        pass
def increments():
    coll = fast_failing_client().app.counters
    try:
        for n in range(1, 1_000_000):
            coll.update_one({"_id": "c"}, {"$inc": {"n": 1}}, upsert=True)
            say({"n": n})
    except Exception:
        pass
threads = [threading.Thread(target=inserts, args=(w,)) for w in range(4)]
threads.append(threading.Thread(target=increments))
for t in threads: t.start()
for t in threads: t.join()
"#;

#[test]
fn mongo_kill9_during_inserts_and_updates_loses_no_acknowledged_write() {
    let Some(deps) = pymongo() else { return };
    let mut s = Server::start();
    let mut writers = Command::new("python3")
        .arg("-c")
        .arg(format!("{PRELUDE}\n{WRITERS}"))
        .env("PYTHONPATH", deps)
        .env("MONGO_ADDR", s.mongo_addr())
        .env("MONGO_ADMIN", format!("{ADMIN}:{ADMIN_PASSWORD}"))
        .stdout(Stdio::piped())
        .spawn()
        .expect("run python3");
    let lines = Arc::new(Mutex::new(Vec::<Value>::new()));
    let reader = {
        let (stdout, lines) = (writers.stdout.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                lines.lock().unwrap().push(serde_json::from_str(&line).unwrap());
            }
        })
    };
    // The kill lands once the writers are well under way, however slow the machine.
    let started = Instant::now();
    while lines.lock().unwrap().len() < 50 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(WRITE_FOR);
    s.kill9();
    assert!(writers.wait().unwrap().success(), "the writers stop at the first error");
    reader.join().unwrap();
    let (mut ids, mut counted) = (Vec::new(), 0);
    for line in lines.lock().unwrap().iter() {
        match line.get("ids") {
            Some(batch) => ids.extend(batch.as_array().unwrap().iter().cloned()),
            None => counted = counted.max(line["n"].as_u64().unwrap()),
        }
    }
    assert!(ids.len() >= 100 && counted >= 10, "too few acknowledged writes: {}", ids.len());
    eprintln!("acknowledged {} inserts and {counted} $inc before kill -9", ids.len());

    s.restart();
    let check = r#"
db = client().app
stored = [d["_id"] for d in db.iot.find({}, {"_id": 1})]
last = db.iot.find_one(sort=[("_id", -1)])
print(json.dumps({"ids": stored, "n": db.counters.find_one({"_id": "c"})["n"], "last": last}))
"#;
    let got = python(&s, check).unwrap();
    let stored: HashSet<&Value> = got["ids"].as_array().unwrap().iter().collect();
    let lost: Vec<&Value> = ids.iter().filter(|id| !stored.contains(id)).collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged inserts lost, e.g. {:?}",
        lost.len(),
        &lost[..lost.len().min(5)]
    );
    let n = got["n"].as_u64().unwrap();
    assert!(n >= counted, "counter at {n} after kill -9, {counted} increments acknowledged");
    // Bodies too, not just ids; and the data stays writable.
    assert!(got["last"]["deviceID"].as_str().unwrap().starts_with("device-"), "{}", got["last"]);
    let more =
        python(&s, r#"print(json.dumps(client().app.iot.insert_one({"after": 1}).acknowledged))"#);
    assert_eq!(more, Some(json!(true)));
}
