//! What every request passes on its way to a handler, in one middleware layer ([`admit`]):
//! the body limit, the request metrics ([`crate::metrics`]), authentication
//! ([`crate::auth`]), and the refusals of a path or query that is not UTF-8
//! ([`crate::params::require_utf8`]) and of a JSON endpoint posted without a JSON
//! content type ([`crate::ctype`]), in that order.
//!
//! They were five layers. Each `axum::middleware::from_fn` layer clones the services below
//! it and boxes its future and the rest of the stack on every request, so five layers cost
//! a point `GET` more than its two store lookups' worth of the work around them (issue 20,
//! docs/performance.md, session 28).

use std::sync::atomic::Ordering::Relaxed;

use axum::extract::{DefaultBodyLimit, Request, State as AxState};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::State;

/// Admits `req` to its handler; see the module docs. A refusal by the UTF-8 or content-type
/// check is an answer like the handler's: it is counted and may renew the session cookie.
pub async fn admit(AxState(state): AxState<State>, mut req: Request, next: Next) -> Response {
    DefaultBodyLimit::max(state.max_request_size.load(Relaxed)).apply(&mut req);
    let timing = crate::metrics::Timing::start(&req);
    let response = match crate::auth::admit(&state, &mut req).await {
        Err(refusal) => refusal,
        Ok(renewal) => {
            let checked =
                crate::params::require_utf8(&req).and_then(|()| crate::ctype::require_json(&req));
            let response = match checked {
                Err(refusal) => refusal.into_response(),
                Ok(()) => next.run(req).await,
            };
            crate::auth::renew(&state, renewal, response)
        }
    };
    timing.count(&state, &response);
    response
}
