//! Bounded sampling of a database, through the engine's public reads (`all_docs`, `get`).
//!
//! One pass over `_all_docs` without bodies keeps a uniform reservoir of ids (algorithm R)
//! and, from the body size each revision record holds, the largest documents and how many
//! are over the large-document threshold; then the sampled bodies, plus those of the five
//! largest documents (where rare huge arrays live), are read one by one and reduced to
//! bounded statistics. The pass gets three quarters of the time budget, the bodies the rest. Memory is bounded by the sample size (ids, top-level
//! shapes, one length per array path per document), never by the database size.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bunko_doc::RevId;
use rand::Rng;
use serde_json::Value;

use super::{Options, SampleInfo};
use crate::Result;
use crate::all_docs::AllDocsQuery;
use crate::database::Database;

/// Largest documents remembered by the pass.
const LARGEST: usize = 5;
/// Array elements of one array walked into (for nested paths such as `links.target`).
const ELEMENTS_WALKED: usize = 64;
/// Deepest nesting walked.
const MAX_DEPTH: usize = 16;
/// Distinct array paths tracked per database, and per document.
const MAX_PATHS: usize = 2000;
const MAX_DOC_PATHS: usize = 64;
/// Longest string value kept for discriminator checks.
const MAX_VALUE_LEN: usize = 64;
/// Rows between two looks at the clock.
const CLOCK_EVERY: u64 = 1024;

/// Lengths of the arrays at one field path.
#[derive(Debug, Default, Clone)]
pub struct ArrayStat {
    /// One length per sampled document holding the path (its longest array there).
    pub lengths: Vec<usize>,
    /// The document with the longest array, and that length.
    pub longest: (String, usize),
    /// Documents whose previous revision also had the path.
    pub compared: u32,
    /// Of those, documents where the array got longer.
    pub grew: u32,
    /// Elements added over those documents.
    pub added: u64,
}

/// A sampled document's top level: its field names and short string values.
#[derive(Debug, Clone)]
pub struct Shape {
    pub id: String,
    pub keys: Vec<String>,
    pub strings: BTreeMap<String, String>,
}

/// What the pass and the sampled bodies showed.
#[derive(Debug, Default)]
pub struct Sample {
    pub read: usize,
    pub scanned: u64,
    pub complete: bool,
    pub elapsed: Duration,
    pub arrays: BTreeMap<String, ArrayStat>,
    pub shapes: Vec<Shape>,
    /// The largest documents seen by the pass, largest first: (body bytes, id).
    pub largest: Vec<(u64, String)>,
    /// Documents of the pass at or over the large-document threshold.
    pub large: u64,
    /// Embedded objects that refer to another document and copy some of its fields.
    pub copies: Vec<super::copies::Copy>,
}

impl Sample {
    pub fn info(&self, options: &Options, doc_count: u64) -> SampleInfo {
        SampleInfo {
            requested: options.sample_size,
            size: self.read,
            scanned: self.scanned,
            doc_count,
            complete: self.complete,
            elapsed_ms: self.elapsed.as_millis() as u64,
            time_budget_ms: options.time_budget.as_millis() as u64,
        }
    }
}

/// Samples `db` within `options`' bounds.
pub fn take(db: &Database, options: &Options) -> Result<Sample> {
    let started = Instant::now();
    let max_doc = db.config.get().limits.max_document_size as f64;
    let large_at = (options.thresholds.document_fraction * max_doc) as u64;
    let mut sample = Sample { complete: true, ..Default::default() };
    let mut reservoir: Vec<String> = Vec::with_capacity(options.sample_size);
    let mut rng = rand::rng();
    // The pass leaves a quarter of the budget to reading the sampled bodies.
    let pass_budget = options.time_budget.mul_f64(0.75);
    for row in
        db.all_docs(&crate::security::UserCtx::system(), &AllDocsQuery::default(), None)?.rows
    {
        let row = row?;
        if row.id.starts_with("_design/") {
            continue;
        }
        let seen = sample.scanned;
        sample.scanned += 1;
        if row.info.size >= large_at {
            sample.large += 1;
        }
        remember_largest(&mut sample.largest, row.info.size, &row.id);
        if reservoir.len() < options.sample_size {
            reservoir.push(row.id);
        } else {
            let j = rng.random_range(0..=seen) as usize;
            if let Some(slot) = reservoir.get_mut(j) {
                *slot = row.id;
            }
        }
        if sample.scanned.is_multiple_of(CLOCK_EVERY) && started.elapsed() >= pass_budget {
            sample.complete = false;
            break;
        }
    }
    // The largest documents are read whatever the draw: they are where huge arrays live.
    for (_, id) in &sample.largest {
        if !reservoir.contains(id) {
            reservoir.push(id.clone());
        }
    }
    for id in reservoir {
        if started.elapsed() >= options.time_budget {
            sample.complete = false;
            break;
        }
        read_one(db, &id, &mut sample)?;
    }
    sample.elapsed = started.elapsed();
    Ok(sample)
}

fn remember_largest(largest: &mut Vec<(u64, String)>, size: u64, id: &str) {
    if largest.len() == LARGEST && largest.last().is_some_and(|(s, _)| *s >= size) {
        return;
    }
    largest.push((size, id.to_string()));
    largest.sort_by_key(|(size, _)| std::cmp::Reverse(*size));
    largest.truncate(LARGEST);
}

/// Folds one sampled document (and its previous revision, for growth) into `sample`.
fn read_one(db: &Database, id: &str, sample: &mut Sample) -> Result<()> {
    let doc = match db.get_stored(id, None) {
        Ok(doc) => doc,
        Err(crate::Error::NotFound(_)) => return Ok(()), // deleted since the pass
        Err(err) => return Err(err),
    };
    let Ok(body) = serde_json::from_slice::<Value>(&doc.body) else { return Ok(()) };
    sample.read += 1;
    sample.shapes.push(shape(id, &body));
    super::copies::collect(id, &body, &mut sample.copies);
    let current = array_lengths(&body);
    if current.is_empty() {
        return Ok(());
    }
    let previous = previous_lengths(db, &doc);
    for (path, len) in current {
        if !sample.arrays.contains_key(&path) && sample.arrays.len() >= MAX_PATHS {
            continue;
        }
        let stat = sample.arrays.entry(path.clone()).or_default();
        stat.lengths.push(len);
        if len > stat.longest.1 || stat.longest.0.is_empty() {
            stat.longest = (id.to_string(), len);
        }
        if let Some(before) = previous.as_ref().and_then(|p| p.get(&path)) {
            stat.compared += 1;
            if len > *before {
                stat.grew += 1;
                stat.added += (len - before) as u64;
            }
        }
    }
    Ok(())
}

/// The array lengths of the document's previous revision, while its body is kept.
fn previous_lengths(db: &Database, doc: &crate::read::DocOut) -> Option<BTreeMap<String, usize>> {
    let (pos, hashes) = doc.revisions();
    let hash = hashes.get(1)?;
    let rev = RevId { pos: pos.checked_sub(1)?, hash: hash.clone() };
    let old = db.get_stored(&doc.id, Some(&rev)).ok().filter(|d| !d.deleted)?;
    let body = serde_json::from_slice::<Value>(&old.body).ok()?;
    Some(array_lengths(&body))
}

fn shape(id: &str, body: &Value) -> Shape {
    let mut keys = Vec::new();
    let mut strings = BTreeMap::new();
    if let Value::Object(map) = body {
        for (key, value) in map {
            if key.starts_with('_') {
                continue;
            }
            keys.push(key.clone());
            if let Value::String(s) = value
                && s.len() <= MAX_VALUE_LEN
            {
                strings.insert(key.clone(), s.clone());
            }
        }
    }
    Shape { id: id.to_string(), keys, strings }
}

/// The longest array at each field path of `body` (paths through array elements name the
/// elements' fields: `links.target`).
pub fn array_lengths(body: &Value) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    walk(body, &mut String::new(), 0, &mut out);
    out
}

fn walk(value: &Value, path: &mut String, depth: usize, out: &mut BTreeMap<String, usize>) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if depth == 0 && key.starts_with('_') {
                    continue;
                }
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key.replace('.', "\\."));
                walk(child, path, depth + 1, out);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if out.len() >= MAX_DOC_PATHS && !out.contains_key(path.as_str()) {
                return;
            }
            let longest = out.entry(path.clone()).or_insert(0);
            *longest = (*longest).max(items.len());
            for item in items.iter().take(ELEMENTS_WALKED) {
                if item.is_object() {
                    walk(item, path, depth + 1, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn array_paths_reach_into_elements_and_keep_the_longest() {
        let body = json!({"links": [{"target": "a", "tags": [1, 2]}, {"tags": [1, 2, 3]}],
                          "a.b": {"c": []}, "n": 1});
        let lengths = array_lengths(&body);
        let expected: BTreeMap<String, usize> = [("links", 2), ("links.tags", 3), ("a\\.b.c", 0)]
            .into_iter()
            .map(|(p, n)| (p.to_string(), n))
            .collect();
        assert_eq!(lengths, expected);
    }

    #[test]
    fn the_largest_documents_are_kept_in_order() {
        let mut largest = Vec::new();
        for (size, id) in [(5, "e"), (9, "a"), (1, "x"), (7, "b"), (8, "c"), (6, "d"), (2, "y")] {
            remember_largest(&mut largest, size, id);
        }
        let ids: Vec<&str> = largest.iter().map(|(_, id)| id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b", "d", "e"]);
    }
}
