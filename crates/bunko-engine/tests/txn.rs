//! Engine transactions (issue 15, point 1): snapshot reads, first-committer-wins
//! validation of reads, expected revisions and scanned ranges (phantoms), one commit across
//! databases, limits, and a randomized transfer test whose invariant must hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bunko_doc::body::{ParsedDoc, from_value};
use bunko_engine::security::UserCtx;
use bunko_engine::{Config, Engine, Error, WriteOptions};
use bunko_storage::Memory;
use serde_json::{Value, json};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn admin() -> UserCtx {
    UserCtx::admin("test")
}

fn doc(value: Value) -> Result<ParsedDoc> {
    Ok(from_value(value, &Default::default())?)
}

fn engine(config: Config) -> Result<Arc<Engine>> {
    let engine = Engine::open(Arc::new(Memory::new()), config)?;
    for db in ["a", "b"] {
        engine.create_db(&admin(), db, false)?;
    }
    Ok(Arc::new(engine))
}

fn put(engine: &Engine, db: &str, value: Value) -> Result<String> {
    Ok(engine.db(db)?.put(&admin(), doc(value)?, WriteOptions::default())?.to_string())
}

/// The transaction's view of `id` as a full document (body with `_id` and `_rev`).
fn read(txn: &mut bunko_engine::Transaction<'_>, db: &str, id: &str) -> Result<Value> {
    let found = txn.get(db, id)?.ok_or("missing")?;
    let mut body = found.body;
    body.insert("_id".into(), json!(id));
    body.insert("_rev".into(), json!(found.rev.to_string()));
    Ok(Value::Object(body))
}

#[test]
fn a_transaction_commits_across_databases_at_once() -> Result<()> {
    let engine = engine(Config::default())?;
    put(&engine, "a", json!({"_id": "x", "n": 1}))?;
    let seq_b = engine.db("b")?.update_seq();
    let mut txn = engine.begin(&admin());
    let mut x = read(&mut txn, "a", "x")?;
    x["n"] = json!(2);
    txn.put("a", doc(x)?)?;
    txn.put("b", doc(json!({"_id": "y", "from": "x"}))?)?;
    assert_eq!(engine.db("b")?.update_seq(), seq_b, "nothing is written before commit");
    let written = txn.commit()?;
    assert_eq!(
        written.iter().map(|w| (w.db.as_str(), w.id.as_str())).collect::<Vec<_>>(),
        [("a", "x"), ("b", "y")]
    );
    assert_eq!(engine.db("a")?.get(&admin(), "x", None)?.body, br#"{"n":2}"#);
    assert_eq!(engine.db("b")?.get(&admin(), "y", None)?.body, br#"{"from":"x"}"#);
    Ok(())
}

#[test]
fn one_failing_document_writes_nothing() -> Result<()> {
    let engine = engine(Config::default())?;
    put(&engine, "b", json!({"_id": "taken"}))?;
    let mut txn = engine.begin(&admin());
    txn.put("a", doc(json!({"_id": "new"}))?)?;
    txn.put("b", doc(json!({"_id": "taken"}))?)?;
    match txn.commit() {
        Err(Error::InTxn { db, id, error }) => {
            assert_eq!((db.as_str(), id.as_str()), ("b", "taken"));
            assert!(matches!(*error, Error::Conflict));
        }
        other => panic!("expected a document conflict, got {other:?}"),
    }
    assert!(engine.db("a")?.doc_info("new")?.is_none());
    Ok(())
}

#[test]
fn the_second_of_two_conflicting_transactions_fails() -> Result<()> {
    let engine = engine(Config::default())?;
    put(&engine, "a", json!({"_id": "x", "n": 1}))?;
    let mut first = engine.begin(&admin());
    let mut second = engine.begin(&admin());
    read(&mut first, "a", "x")?;
    read(&mut second, "a", "x")?;
    first.put("b", doc(json!({"_id": "from-first"}))?)?;
    second.put("b", doc(json!({"_id": "from-second"}))?)?;
    put(
        &engine,
        "a",
        json!({"_id": "x", "_rev": engine.db("a")?.get(&admin(), "x", None)?.rev.to_string(), "n": 5}),
    )?;
    assert!(matches!(first.commit(), Err(Error::TxnConflict(_))));
    assert!(matches!(second.commit(), Err(Error::TxnConflict(_))));
    assert!(engine.db("b")?.doc_info("from-first")?.is_none());
    Ok(())
}

#[test]
fn a_transaction_that_only_read_commits_after_others_wrote() -> Result<()> {
    let engine = engine(Config::default())?;
    put(&engine, "a", json!({"_id": "x", "n": 1}))?;
    let mut reader = engine.begin(&admin());
    read(&mut reader, "a", "x")?;
    assert_eq!(reader.ids("a", "", "z")?, ["x"]);
    put(
        &engine,
        "a",
        json!({"_id": "x", "_rev": engine.db("a")?.get(&admin(), "x", None)?.rev.to_string(), "n": 2}),
    )?;
    put(&engine, "a", json!({"_id": "y"}))?;
    // It saw one consistent snapshot and wrote nothing: nothing to conflict with.
    assert_eq!(reader.commit()?, []);
    Ok(())
}

#[test]
fn a_phantom_in_a_scanned_range_forces_a_retry() -> Result<()> {
    let engine = engine(Config::default())?;
    put(&engine, "a", json!({"_id": "book-1"}))?;
    let mut txn = engine.begin(&admin());
    let books = txn.ids("a", "book-", "book.")?;
    assert_eq!(books, ["book-1"]);
    txn.put("b", doc(json!({"_id": "count", "books": books.len()}))?)?;
    put(&engine, "a", json!({"_id": "book-2"}))?;
    assert!(matches!(txn.commit(), Err(Error::TxnConflict(_))));
    let mut retry = engine.begin(&admin());
    let books = retry.ids("a", "book-", "book.")?;
    retry.put("b", doc(json!({"_id": "count", "books": books.len()}))?)?;
    retry.commit()?;
    assert_eq!(engine.db("b")?.get(&admin(), "count", None)?.body, br#"{"books":2}"#);
    Ok(())
}

#[test]
fn expected_revisions_are_checked_at_commit() -> Result<()> {
    let engine = engine(Config::default())?;
    let rev = put(&engine, "a", json!({"_id": "x"}))?;
    let mut txn = engine.begin(&admin());
    txn.expect("a", "x", Some(rev.parse()?))?;
    txn.expect("a", "absent", None)?;
    txn.put("b", doc(json!({"_id": "y"}))?)?;
    txn.commit()?;
    let mut stale = engine.begin(&admin());
    stale.expect("a", "absent", None)?;
    stale.put("b", doc(json!({"_id": "z"}))?)?;
    put(&engine, "a", json!({"_id": "absent"}))?;
    assert!(matches!(stale.commit(), Err(Error::TxnConflict(_))));
    Ok(())
}

#[test]
fn transactions_past_their_limits_are_aborted() -> Result<()> {
    let config =
        Config { txn_lifetime: Duration::from_millis(50), txn_max_bytes: 100, ..Config::default() };
    let engine = engine(config)?;
    let mut big = engine.begin(&admin());
    let err = big.put("a", doc(json!({"_id": "big", "text": "x".repeat(200)}))?).err();
    assert!(matches!(err, Some(Error::TxnAborted(_))), "{err:?}");
    let mut slow = engine.begin(&admin());
    slow.put("a", doc(json!({"_id": "slow"}))?)?;
    std::thread::sleep(Duration::from_millis(80));
    assert!(matches!(slow.commit(), Err(Error::TxnAborted(_))));
    assert!(engine.db("a")?.doc_info("slow")?.is_none());
    Ok(())
}

/// Random transfers between accounts in two databases from several threads, each a
/// read-modify-write transaction retried on conflict: the total never changes.
#[test]
fn concurrent_transfers_keep_the_total() -> Result<()> {
    let engine = engine(Config::default())?;
    let accounts: Vec<(&str, String)> =
        (0..6).map(|i| (if i % 2 == 0 { "a" } else { "b" }, format!("acct-{i}"))).collect();
    for (db, id) in &accounts {
        put(&engine, db, json!({"_id": id, "balance": 100}))?;
    }
    let committed = Arc::new(AtomicUsize::new(0));
    let conflicts = Arc::new(AtomicUsize::new(0));
    let deadline = Instant::now() + Duration::from_secs(2);
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (engine, accounts) = (engine.clone(), accounts.clone());
            let (committed, conflicts) = (committed.clone(), conflicts.clone());
            std::thread::spawn(move || -> std::result::Result<(), String> {
                let mut seed = t + 1;
                while Instant::now() < deadline {
                    seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let from = &accounts[(seed >> 33) as usize % accounts.len()];
                    let to = &accounts[(seed >> 40) as usize % accounts.len()];
                    if from == to {
                        continue;
                    }
                    match transfer(&engine, from, to, (seed % 7) as i64 + 1) {
                        Ok(()) => committed.fetch_add(1, Ordering::Relaxed),
                        Err(Error::TxnConflict(_)) => conflicts.fetch_add(1, Ordering::Relaxed),
                        Err(Error::InTxn { error, .. }) if matches!(*error, Error::Conflict) => {
                            conflicts.fetch_add(1, Ordering::Relaxed)
                        }
                        Err(other) => return Err(other.to_string()),
                    };
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| "thread panicked")??;
    }
    let mut total = 0;
    for (db, id) in &accounts {
        let body: Value = serde_json::from_slice(&engine.db(db)?.get(&admin(), id, None)?.body)?;
        total += body["balance"].as_i64().ok_or("balance")?;
    }
    assert_eq!(total, 600, "money was created or lost");
    assert!(committed.load(Ordering::Relaxed) > 10, "too few transfers committed");
    Ok(())
}

fn transfer(
    engine: &Engine,
    from: &(&str, String),
    to: &(&str, String),
    amount: i64,
) -> std::result::Result<(), Error> {
    let mut txn = engine.begin(&admin());
    let mut a = txn.get(from.0, &from.1)?.ok_or_else(|| Error::BadRequest("gone".into()))?;
    let mut b = txn.get(to.0, &to.1)?.ok_or_else(|| Error::BadRequest("gone".into()))?;
    let balance = |m: &serde_json::Map<String, Value>| m["balance"].as_i64().unwrap_or(0);
    a.body.insert("balance".into(), json!(balance(&a.body) - amount));
    b.body.insert("balance".into(), json!(balance(&b.body) + amount));
    for (db, id, found) in [(from.0, &from.1, a), (to.0, &to.1, b)] {
        let mut body = found.body;
        body.insert("_id".into(), json!(id));
        body.insert("_rev".into(), json!(found.rev.to_string()));
        txn.put(db, from_value(Value::Object(body), &Default::default())?)?;
    }
    txn.commit().map(drop)
}

/// `Transaction::apply` makes the writes visible at once; `Applied::durable` resolves with
/// them once their sync is done, without a thread waiting (issue 20 point 3).
#[tokio::test]
async fn an_applied_transaction_is_acknowledged_once_durable() -> Result<()> {
    let engine = engine(Config::default())?;
    let mut txn = engine.begin(&admin());
    txn.put("a", doc(json!({"_id": "x", "n": 1}))?)?;
    txn.put("b", doc(json!({"_id": "y", "n": 2}))?)?;
    let applied = txn.apply()?;
    assert!(engine.begin(&admin()).get("a", "x")?.is_some(), "visible once applied");
    let written = applied.durable().await?;
    assert_eq!(written.iter().map(|w| w.id.as_str()).collect::<Vec<_>>(), ["x", "y"]);
    let y = engine.begin(&admin()).get("b", "y")?.ok_or("y missing")?;
    assert_eq!(y.rev, written[1].rev);
    // A transaction that wrote nothing has nothing to wait for.
    assert!(engine.begin(&admin()).apply()?.durable().await?.is_empty());
    Ok(())
}

/// Issue 13: a database created by a transaction exists for it at once and for everyone at
/// its commit (catalog entry, documents and `_security` together, and after a restart);
/// an abort leaves nothing; a database of that name created meanwhile fails the commit.
#[test]
fn a_database_created_by_a_transaction_appears_with_its_commit() -> Result<()> {
    let store = Arc::new(Memory::new());
    let engine = Engine::open(store.clone(), Config::default())?;
    let mut txn = engine.begin(&admin());
    let created = txn.create_db("c")?;
    assert!(matches!(txn.create_db("c"), Err(Error::FileExists)));
    created.set_security(&admin(), r#"{"members":{"roles":["c.readWrite"]}}"#.into())?;
    txn.put("c", doc(json!({"_id": "x", "n": 1}))?)?;
    assert_eq!(read(&mut txn, "c", "x")?["n"], json!(1));
    assert!(engine.get_db("c").is_none(), "invisible before the commit");
    txn.commit()?;
    let c = engine.db("c")?;
    assert_eq!(c.security(), r#"{"members":{"roles":["c.readWrite"]}}"#);
    assert!(c.get(&admin(), "x", None).is_ok());

    let mut aborted = engine.begin(&admin());
    aborted.create_db("d")?;
    aborted.put("d", doc(json!({"_id": "y"}))?)?;
    drop(aborted);
    assert!(engine.get_db("d").is_none());

    let mut raced = engine.begin(&admin());
    raced.create_db("e")?;
    raced.put("e", doc(json!({"_id": "z"}))?)?;
    engine.create_db(&admin(), "e", false)?;
    assert!(matches!(raced.commit(), Err(Error::TxnConflict(_))));
    assert_eq!(engine.db("e")?.update_seq(), 0);

    drop(engine);
    let reopened = Engine::open(store, Config::default())?;
    assert!(reopened.db("c")?.get(&admin(), "x", None).is_ok());
    assert!(reopened.get_db("d").is_none());
    Ok(())
}
