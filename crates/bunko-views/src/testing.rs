//! What the unit tests share: an admin and a document write.

use bunko_engine::security::UserCtx;
use bunko_engine::{Database, Result, WriteOptions};
use serde_json::Value;

pub(crate) fn admin() -> UserCtx {
    UserCtx::admin("test")
}

/// Writes `doc` as an admin.
pub(crate) fn put(db: &Database, doc: Value) -> Result<()> {
    let doc = bunko_doc::body::from_value(doc, &Default::default())?;
    db.put(&admin(), doc, WriteOptions::default()).map(drop)
}
