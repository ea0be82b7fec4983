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

/// A `_bulk_docs` whose sync fails is not acknowledged either: it awaits the sync as a
/// future on the runtime (issue 20), and the failure reaches it as `503`, not `201`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_docs_whose_sync_fails_is_not_acknowledged() -> Result {
    let store = Arc::new(Memory::new());
    let (base, engine) = serve(store.clone()).await?;
    let bulk = |docs: Value| {
        reqwest::Client::new()
            .post(format!("{base}/db/_bulk_docs"))
            .basic_auth("admin", Some("pw"))
            .json(&json!({ "docs": docs }))
            .send()
    };
    let ok = bulk(json!([{"_id": "a"}, {"_id": "b"}])).await?;
    assert_eq!(ok.status().as_u16(), 201);
    store.fail_syncs(true);
    let failed = bulk(json!([{"_id": "c"}, {"_id": "d"}])).await?;
    assert_eq!(failed.status().as_u16(), 503, "{}", failed.text().await?);
    store.fail_syncs(false);
    let later = bulk(json!([{"_id": "e"}])).await?;
    assert_eq!(later.status().as_u16(), 503, "a poisoned store refuses later writes");
    // What was acknowledged before the failure is still there.
    assert!(engine.db("db")?.doc_info("a")?.is_some());
    Ok(())
}
