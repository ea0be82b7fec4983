//! `advise`: the data-modeling advisor ([`bunko_engine::advisor`], `docs/advisor.md`) for one
//! collection, `db.runCommand({advise: "coll", sampleSize: N, timeBudgetMS: N})`. It answers
//! what `GET /{db}/_advise` answers over HTTP, to the same people: the collection's database
//! admins (the findings show document ids and every user's query shapes).

use bson::{Bson, Document};
use bunko_engine::advisor::{MAX_SAMPLE_SIZE, Options};
use bunko_engine::security::Security;

use super::admin::user;
use super::{Ctx, int_of, namespace};
use crate::error::MongoError;

/// The longest time budget a caller may give, as over HTTP.
const MAX_TIME_BUDGET_MS: i64 = 300_000;

pub(super) fn advise(ctx: &mut Ctx, command: &Document) -> Result<Document, MongoError> {
    let ns = namespace(ctx, command)?;
    let mut options = Options { collection: Some(ns.coll.clone()), ..Options::default() };
    if let Some(n) = bounded(command, "sampleSize", MAX_SAMPLE_SIZE as i64)? {
        options.sample_size = n as usize;
    }
    if let Some(ms) = bounded(command, "timeBudgetMS", MAX_TIME_BUDGET_MS)? {
        options.time_budget = std::time::Duration::from_millis(ms as u64);
    }
    let Some(db) = ctx.server.engine.get_db(&ns.engine_name()) else {
        return Err(MongoError::namespace_not_found(format!(
            "ns not found: {}.{}",
            ns.db, ns.coll
        )));
    };
    if !Security::parse(&db.security()).is_ok_and(|s| s.is_admin(&user(ctx))) {
        return Err(MongoError::unauthorized(format!(
            "not authorized on {} to execute command {{ advise: \"{}\" }}",
            ns.db, ns.coll
        )));
    }
    let advice = db.advise(&options)?;
    let json = serde_json::to_value(advice).map_err(|e| MongoError::internal(e.to_string()))?;
    match Bson::try_from(json) {
        Ok(Bson::Document(doc)) => Ok(doc),
        _ => Err(MongoError::internal("the advice is not a document")),
    }
}

/// An integer option between 1 and `max`.
fn bounded(command: &Document, field: &str, max: i64) -> Result<Option<i64>, MongoError> {
    match int_of(command, field)? {
        Some(n) if !(1..=max).contains(&n) => {
            Err(MongoError::bad_value(format!("{field} must be between 1 and {max}")))
        }
        other => Ok(other),
    }
}
