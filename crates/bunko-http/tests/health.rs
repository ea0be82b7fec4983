//! `/_up` must tell a health check that the store refuses writes (issue 11): it answered
//! `ok` while the store was poisoned after a failed sync and no write could succeed. The
//! real router is served on an ephemeral port over the in-memory store, whose syncs can be
//! made to fail (a real disk cannot be made to fail on demand in a test).

use std::sync::Arc;

use bunko_engine::security::UserCtx;
use bunko_storage::Memory;
use serde_json::{Value, json};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

/// Serves the real router over `store` with one database `db`; returns its base URL.
async fn serve(store: Arc<Memory>) -> Result<(String, Arc<bunko_engine::Engine>)> {
    let config =
        bunko_engine::Config { admins: vec![("admin".into(), "pw".into())], ..Default::default() };
    let engine = Arc::new(bunko_engine::Engine::open(store, config)?);
    engine.create_db(&UserCtx::system(), "db", false)?;
    let state = bunko_http::AppState::new(engine.clone(), Default::default())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, bunko_http::router(state)).await });
    Ok((base, engine))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_reports_a_poisoned_store_with_503() -> Result {
    let store = Arc::new(Memory::new());
    let (base, _) = serve(store.clone()).await?;
    let client = reqwest::Client::new();
    let up = || async {
        let resp = client.get(format!("{base}/_up")).send().await?;
        Ok::<_, reqwest::Error>((resp.status().as_u16(), resp.json::<Value>().await?))
    };
    assert_eq!(up().await?, (200, json!({"status": "ok", "seeds": {}})));

    store.fail_syncs(true);
    let put = client
        .put(format!("{base}/db/doc"))
        .basic_auth("admin", Some("pw"))
        .header("Content-Type", "application/json")
        .body(r#"{"a": 1}"#)
        .send()
        .await?;
    assert_eq!(put.status().as_u16(), 503, "the write whose sync failed is not acknowledged");
    store.fail_syncs(false);
    let (status, body) = up().await?;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "error");
    assert!(body["reason"].as_str().is_some_and(|r| r.contains("poisoned")), "{body}");
    Ok(())
}

/// A write whose sync fails is not acknowledged: `PUT` (staged on the async worker once the
/// database is known to have no validators, issue 20) and `_bulk_docs` (staged on a
/// blocking thread) both await the sync as a future, and the failure reaches them as `503`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_whose_sync_fails_are_not_acknowledged() -> Result {
    for failing in ["PUT", "_bulk_docs"] {
        let store = Arc::new(Memory::new());
        let (base, engine) = serve(store.clone()).await?;
        let client = reqwest::Client::new();
        let put = |id: &str| {
            client.put(format!("{base}/db/{id}")).basic_auth("admin", Some("pw")).json(&json!({}))
        };
        let bulk = |id: &str| {
            let docs = json!({"docs": [{"_id": id}, {"_id": format!("{id}-2")}]});
            client.post(format!("{base}/db/_bulk_docs")).basic_auth("admin", Some("pw")).json(&docs)
        };
        // The first write compiles the (absent) validators; later PUTs are light.
        assert_eq!(put("a").send().await?.status().as_u16(), 201);
        assert_eq!(bulk("b").send().await?.status().as_u16(), 201);
        store.fail_syncs(true);
        let failed = if failing == "PUT" { put("c") } else { bulk("c") }.send().await?;
        assert_eq!(failed.status().as_u16(), 503, "{failing}: {}", failed.text().await?);
        store.fail_syncs(false);
        let later = put("d").send().await?;
        assert_eq!(later.status().as_u16(), 503, "{failing}: a poisoned store refuses writes");
        // What was acknowledged before the failure is still there.
        let db = engine.db("db")?;
        assert!(db.doc_info("a")?.is_some() && db.doc_info("b-2")?.is_some(), "{failing}");
    }
    Ok(())
}
