//! `GET /{db}/_advise`: the data-modeling advisor's findings for one database
//! ([`bunko_engine::advisor`], `docs/advisor.md`).
//!
//! Database admins only (`_security` admins and server admins), like `_compact` and
//! `_view_cleanup`: the answer shows example document ids, field names and the shapes of
//! every user's `_find` queries, and a run reads up to `sample_size` documents. Parameters:
//! `sample_size` (1..=100000, default 1000) and `time_budget_ms` (1..=300000, default
//! 10000), integers as CouchDB parses them (`400 query_parse_error` otherwise).

use std::time::Duration;

use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use axum::{Extension, Router};
use bunko_engine::advisor::{MAX_SAMPLE_SIZE, MAX_TIME_BUDGET, Options};

use crate::db::{Access, open};
use crate::error::{ApiError, ApiResult};
use crate::params::Params;
use crate::{State, UserCtx, blocking, render};

pub fn routes() -> Router<State> {
    Router::new().route("/{db}/_advise", get(advise))
}

async fn advise(
    AxState(state): AxState<State>,
    Extension(ctx): Extension<UserCtx>,
    Path(name): Path<String>,
    RawQuery(query): RawQuery,
) -> ApiResult<Response> {
    let db = open(&state, &ctx, &name, Access::Admin)?;
    let options = options(&Params::parse(query.as_deref()))?;
    let advice = blocking(move || Ok(db.advise(&options)?)).await?;
    let body = serde_json::to_value(advice).map_err(|e| {
        let reason = format!("cannot render the advice: {e}");
        ApiError::Other(StatusCode::INTERNAL_SERVER_ERROR, "internal_server_error", reason)
    })?;
    Ok(render::json(StatusCode::OK, body))
}

/// The advisor's options from the query string.
fn options(p: &Params) -> ApiResult<Options> {
    let mut options = Options::default();
    if let Some(n) = bounded(p, "sample_size", MAX_SAMPLE_SIZE as u64)? {
        options.sample_size = n as usize;
    }
    let max_ms = MAX_TIME_BUDGET.as_millis() as u64;
    if let Some(ms) = bounded(p, "time_budget_ms", max_ms)? {
        options.time_budget = Duration::from_millis(ms);
    }
    Ok(options)
}

fn bounded(p: &Params, name: &str, max: u64) -> ApiResult<Option<u64>> {
    match p.u64(name)? {
        Some(n) if n == 0 || n > max => Err(ApiError::query_parse(format!(
            "Invalid value for `{name}`: {n} (must be between 1 and {max})"
        ))),
        other => Ok(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_integers_within_bounds() -> ApiResult<()> {
        let got = options(&Params::parse(Some("sample_size=50&time_budget_ms=2000")))?;
        assert_eq!((got.sample_size, got.time_budget), (50, Duration::from_secs(2)));
        let reason = |q: &str| match options(&Params::parse(Some(q))) {
            Err(ApiError::Other(status, error, reason)) => Some((status.as_u16(), error, reason)),
            _ => None,
        };
        let zero = "Invalid value for `sample_size`: 0 (must be between 1 and 100000)";
        assert_eq!(reason("sample_size=0"), Some((400, "query_parse_error", zero.to_string())));
        let text = "Invalid value for integer: \"ten\"".to_string();
        assert_eq!(reason("sample_size=ten"), Some((400, "query_parse_error", text)));
        assert!(reason("time_budget_ms=300001").is_some());
        Ok(())
    }
}
