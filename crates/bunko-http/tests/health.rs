//! `/_up` must tell a health check that the store refuses writes (issue 11): it answered
//! `ok` while the store was poisoned after a failed sync and no write could succeed. The
//! real router is served on an ephemeral port over the in-memory store, whose syncs can be
//! made to fail (a real disk cannot be made to fail on demand in a test).

use std::sync::Arc;

use bunko_engine::security::UserCtx;
use bunko_storage::Memory;
use serde_json::{Value, json};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn up_reports_a_poisoned_store_with_503() -> Result {
    let store = Arc::new(Memory::new());
    let config =
        bunko_engine::Config { admins: vec![("admin".into(), "pw".into())], ..Default::default() };
    let engine = Arc::new(bunko_engine::Engine::open(store.clone(), config)?);
    engine.create_db(&UserCtx::system(), "db", false)?;
    let state = bunko_http::AppState::new(engine, Default::default())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    tokio::spawn(async move { axum::serve(listener, bunko_http::router(state)).await });
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
