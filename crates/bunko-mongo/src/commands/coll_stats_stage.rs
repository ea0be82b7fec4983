//! `$collStats` as the first stage of `aggregate` (what mongosh's `db.coll.stats()`,
//! `dataSize()`, `totalSize()` and `totalIndexSize()` send): `storageStats` (with `scale`)
//! is the `collStats` command's answer, `count` the number of documents. `latencyStats` and
//! `queryExecStats` are `NotImplemented` (Bunko keeps no such counters). The stage becomes
//! `$documents` holding the one statistics document, and the rest of the pipeline runs over
//! it as usual.

use bson::{Bson, doc};

use super::{Ctx, stats};
use crate::error::MongoError;
use crate::names::Namespace;

/// The pipeline with a leading `$collStats` replaced by `$documents`; `None` without one.
pub(super) fn rewrite(
    ctx: &mut Ctx,
    ns: &Namespace,
    stages: &[Bson],
) -> Result<Option<Vec<Bson>>, MongoError> {
    let Some(spec) = stages.first().and_then(Bson::as_document).and_then(|s| s.get("$collStats"))
    else {
        return Ok(None);
    };
    let Bson::Document(spec) = spec else {
        return Err(MongoError::failed_to_parse("$collStats must take a nested object"));
    };
    let mut out = doc! {
        "ns": ns.full(),
        "host": ctx.session.local.to_string(),
        "localTime": bson::DateTime::now(),
    };
    for (key, value) in spec {
        match key.as_str() {
            "storageStats" | "count" => {}
            "latencyStats" | "queryExecStats" => {
                return Err(MongoError::not_implemented(format!(
                    "$collStats {key} is not supported: Bunko keeps no such counters"
                )));
            }
            _ => return Err(MongoError::unknown_field(&format!("$collStats.{key}"))),
        }
        let Bson::Document(options) = value else {
            return Err(MongoError::type_mismatch(format!(
                "BSON field '$collStats.{key}' is the wrong type, expected type 'object'"
            )));
        };
        let mut command = doc! {"collStats": &ns.coll};
        if let Some(scale) = options.get("scale").filter(|_| key == "storageStats") {
            command.insert("scale", scale.clone());
        }
        let mut stats = stats::coll_stats(ctx, &command)?;
        if key == "count" {
            out.insert("count", stats.remove("count").unwrap_or(Bson::Int64(0)));
        } else {
            stats.remove("ns");
            out.insert("storageStats", stats);
        }
    }
    let mut rewritten = vec![Bson::Document(doc! {"$documents": [out]})];
    rewritten.extend(stages[1..].iter().cloned());
    Ok(Some(rewritten))
}
