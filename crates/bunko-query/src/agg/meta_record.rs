//! `{$meta: "indexKey"}` and `{$meta: "recordId"}` in a pipeline. MongoDB's collection
//! read gives each document its record id, and an index scan its index key, as metadata
//! the documents keep through the stages that keep metadata; a stage after a `$group` (or
//! `$documents`, ...) finds none, so the expression is missing there. Bunko's documents
//! carry no metadata: a stage reading it computes it from its input document (the record
//! id from `_id`, the index key through the [`IndexKeys`] the database layer gives for the
//! read it planned), which is the collection read's as long as the stages since only
//! filtered, sorted, skipped or limited the documents. After any other stage (`$project`,
//! `$set`, `$unwind`, ...) the stage reading it is refused when the pipeline is parsed
//! (`NotImplemented`), never answered with a different value; so is a `$lookup`,
//! `$unionWith`, `$graphLookup` or `$facet` reading it.
//!
//! [`IndexKeys`]: crate::expr::IndexKeys

use bson::{Bson, Document};

use super::Stage;
use crate::expr::{ExprError, RecordMeta, Result};

/// The documents a stage reads, as to their record metadata.
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// The collection read's, unchanged.
    Source,
    /// Made anew: no metadata.
    Missing,
    /// Changed by a stage since the read.
    Changed,
}

/// For each stage of `stages` (parsed from `raw`), what its `{$meta: "indexKey"}` and
/// `{$meta: "recordId"}` read ([`RecordMeta::Unknown`] where it reads neither), or
/// `NotImplemented` where the value may differ from the collection read's.
pub(super) fn states(stages: &[(String, Stage)], raw: &[Bson]) -> Result<Vec<RecordMeta>> {
    let mut out = Vec::with_capacity(stages.len());
    let mut state = State::Source;
    for ((name, stage), raw) in stages.iter().zip(raw) {
        let arg = super::meta_sort::arg_of(name, raw);
        let nested = matches!(name.as_str(), "$lookup" | "$unionWith" | "$graphLookup" | "$facet");
        out.push(match (state, reads_record_meta(arg)) {
            (_, false) => RecordMeta::Unknown,
            (State::Source, true) if !nested => RecordMeta::Source,
            (State::Missing, true) if !nested => RecordMeta::Missing,
            _ => {
                return Err(ExprError::new(
                    238,
                    "NotImplemented",
                    format!(
                        "$meta \"indexKey\" or \"recordId\" in {name} after a stage that changes the documents is not supported yet"
                    ),
                ));
            }
        });
        state = next(state, name, stage);
    }
    Ok(out)
}

/// The state of the documents a stage outputs.
fn next(state: State, name: &str, stage: &Stage) -> State {
    match (name, stage) {
        ("$match" | "$skip" | "$limit", _) | (_, Stage::Sort(_)) => state,
        (
            "$group" | "$bucket" | "$bucketAuto" | "$sortByCount" | "$count" | "$facet"
            | "$documents",
            _,
        ) => State::Missing,
        _ if state == State::Missing => State::Missing,
        _ => State::Changed,
    }
}

/// Whether `value` holds `{$meta: "indexKey"}` or `{$meta: "recordId"}` anywhere.
pub(super) fn reads_record_meta(value: &Bson) -> bool {
    match value {
        Bson::Document(d) => is_record_meta(d) || d.values().any(reads_record_meta),
        Bson::Array(items) => items.iter().any(reads_record_meta),
        _ => false,
    }
}

fn is_record_meta(d: &Document) -> bool {
    d.len() == 1
        && matches!(d.get("$meta"), Some(Bson::String(s)) if s == "indexKey" || s == "recordId")
}
