//! `{$meta: "sortKey"}` in a pipeline. MongoDB's `$sort` gives each document it outputs
//! its sort key as metadata, which the documents keep through the stages that keep their
//! metadata, and a stage after a `$group` (or with no `$sort` before it) finds none, so the
//! expression is missing there. Bunko's documents carry no metadata: a stage reading the
//! key computes it from its input document ([`Vars::sorted_by`]), which is the key the sort
//! used as long as no stage since the `$sort` changed the sort's fields. Where one may have
//! (a `$project`, a `$replaceRoot`, a `$set` of a sort field, `$unwind` of one, ...), the
//! stage reading the key is refused when the pipeline is parsed (`NotImplemented`), never
//! answered with a different key. `$sortByCount` sorts by `count` descending, as it does
//! in MongoDB.
//!
//! [`Vars::sorted_by`]: crate::expr::Vars::sorted_by

use std::sync::Arc;

use bson::{Bson, Document};

use super::Stage;
use crate::expr::{ExprError, Result, SortSpec};

/// The documents a stage reads, as to their sort key.
#[derive(Clone)]
enum State {
    /// No sort key (nothing sorted them, or a stage made new documents since).
    Missing,
    /// Sorted by this sort, their sort fields unchanged since.
    Sorted(SortSpec),
    /// Sorted, but a stage since may have changed a sort field.
    Changed,
}

/// For each stage of `stages` (parsed from `raw`), the sort whose key its
/// `{$meta: "sortKey"}` reads (`None`: missing), or `NotImplemented` where the key may
/// differ from the one the sort used.
pub(super) fn sorts(stages: &[(String, Stage)], raw: &[Bson]) -> Result<Vec<Option<SortSpec>>> {
    let mut out = Vec::with_capacity(stages.len());
    let mut state = State::Missing;
    for ((name, stage), raw) in stages.iter().zip(raw) {
        let arg = arg_of(name, raw);
        // A `$lookup` or `$unionWith` pipeline reads another collection (its own stages
        // are judged when it is parsed); a `$facet`'s reads this stage's documents.
        let reads = match (name.as_str(), arg) {
            ("$lookup", Bson::Document(d)) => d.get("let").is_some_and(reads_sort_key),
            ("$unionWith", _) => false,
            _ => reads_sort_key(arg),
        };
        out.push(match (&state, reads) {
            (_, false) | (State::Missing, true) => None,
            (State::Sorted(sort), true) if name != "$facet" => Some(sort.clone()),
            _ => {
                return Err(ExprError::new(
                    238,
                    "NotImplemented",
                    format!(
                        "$meta \"sortKey\" in {name} after a stage that may change the sort's fields is not supported yet"
                    ),
                ));
            }
        });
        state = next(state, name, stage, arg);
    }
    Ok(out)
}

/// The argument of the stage `name` as it was given (`raw`).
pub(super) fn arg_of<'r>(name: &str, raw: &'r Bson) -> &'r Bson {
    match raw {
        Bson::Document(d) => d.get(name).unwrap_or(&Bson::Null),
        _ => &Bson::Null,
    }
}

/// The state of the documents a stage outputs.
fn next(state: State, name: &str, stage: &Stage, arg: &Bson) -> State {
    match (name, stage) {
        (_, Stage::Sort(keys)) => State::Sorted(Arc::new(keys.clone())),
        ("$sortByCount", _) => State::Sorted(Arc::new(vec![(vec!["count".to_string()], false)])),
        ("$match" | "$skip" | "$limit", _) => state,
        // It sorts by its partition value (maybe an expression), then `sortBy`.
        ("$setWindowFields" | "$fill" | "$densify", _) => State::Changed,
        ("$group" | "$bucket" | "$bucketAuto" | "$count" | "$facet" | "$documents", _) => {
            State::Missing
        }
        _ => match state {
            State::Sorted(sort) if writes(name, arg).is_some_and(|w| !overlaps(&w, &sort)) => {
                State::Sorted(sort)
            }
            State::Missing => State::Missing,
            _ => State::Changed,
        },
    }
}

/// The paths a stage that keeps the rest of the document sets or removes; `None` for any
/// other stage.
fn writes(name: &str, arg: &Bson) -> Option<Vec<String>> {
    match (name, arg) {
        ("$addFields" | "$set", Bson::Document(d)) => Some(d.keys().cloned().collect()),
        ("$unset", Bson::String(s)) => Some(vec![s.clone()]),
        ("$unset", Bson::Array(items)) => {
            items.iter().map(|i| i.as_str().map(str::to_string)).collect()
        }
        ("$unwind", Bson::String(s)) => Some(vec![s.trim_start_matches('$').to_string()]),
        ("$unwind", Bson::Document(d)) => {
            let mut out = vec![field(d.get("path"))?.to_string()];
            out.extend(field(d.get("includeArrayIndex")).map(str::to_string));
            Some(out)
        }
        ("$lookup" | "$graphLookup", Bson::Document(d)) => {
            Some(vec![field(d.get("as"))?.to_string()])
        }
        _ => None,
    }
}

/// A field path a stage's option names (`"$a.b"` or `"a.b"`).
fn field(value: Option<&Bson>) -> Option<&str> {
    value.and_then(Bson::as_str).map(|s| s.trim_start_matches('$'))
}

/// Whether one of `written` is a sort path, inside one or holds one.
fn overlaps(written: &[String], sort: &SortSpec) -> bool {
    written.iter().any(|w| {
        let w: Vec<&str> = w.split('.').collect();
        sort.iter().any(|(path, _)| path.iter().zip(&w).all(|(a, b)| a == b))
    })
}

/// Whether `value` holds `{$meta: "sortKey"}` anywhere.
fn reads_sort_key(value: &Bson) -> bool {
    match value {
        Bson::Document(d) => is_sort_key(d) || d.values().any(reads_sort_key),
        Bson::Array(items) => items.iter().any(reads_sort_key),
        _ => false,
    }
}

fn is_sort_key(d: &Document) -> bool {
    d.len() == 1 && matches!(d.get("$meta"), Some(Bson::String(s)) if s == "sortKey")
}
