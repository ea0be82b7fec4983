//! What the engine observes for the advisor while it serves queries: a bounded log of
//! `_find` query shapes (the selector with its values replaced by `"?"`, the sort, partition
//! or global) with the documents they examined and returned, how often each index was
//! chosen, and how many requests fetched documents by id (`_all_docs` with `keys` and
//! `include_docs`). `Database::find` and `Database::all_docs_keys` record here (one short
//! lock); writes never do.
//! In memory only: it starts empty with the process and fills again with the queries
//! (DESIGN §8: in-memory structures must be rebuildable).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use bunko_query::{FieldPath, Selector};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::find::ExecStats;
use crate::index::Index;

/// Query shapes kept per database; the least run one makes room for a new one.
pub const MAX_SHAPES: usize = 256;

/// One query shape and what its runs cost.
#[derive(Debug, Clone)]
pub struct QueryShape {
    /// The selector with every value replaced by `"?"`.
    pub shape: Value,
    /// The first query of this shape, for planning it again.
    pub selector: Selector,
    pub sort: Vec<FieldPath>,
    pub partition: bool,
    pub runs: u64,
    pub docs_examined: u64,
    pub keys_examined: u64,
    pub results: u64,
    /// The index the last run used (`None`: all documents).
    pub index: Option<(String, String)>,
}

/// The observation window, as the advisor reports it.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Start of the window (this process's first use of the database), seconds since the
    /// Unix epoch.
    pub since: u64,
    pub queries: u64,
    pub query_shapes: usize,
    /// `_all_docs` requests with `keys` and `include_docs` (documents fetched by id).
    pub lookups: u64,
    /// Ids those requests asked for.
    pub looked_up: u64,
}

#[derive(Debug, Default)]
struct Log {
    queries: u64,
    lookups: u64,
    looked_up: u64,
    shapes: HashMap<String, QueryShape>,
    uses: HashMap<(String, String), u64>,
}

/// The query log and index use counts of one database.
#[derive(Debug)]
pub struct Observed {
    since: u64,
    log: Mutex<Log>,
}

impl Default for Observed {
    fn default() -> Self {
        let since = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Self { since, log: Mutex::new(Log::default()) }
    }
}

impl Observed {
    /// Records one run of a query: its selector, sort, whether it was a partition query,
    /// the index it used and what it cost.
    pub fn record(
        &self,
        selector: &Selector,
        sort: &[FieldPath],
        partition: bool,
        index: Option<&Index>,
        stats: &ExecStats,
    ) {
        let shape = shape_of(&selector.to_json());
        let sort_names: Vec<String> = sort.iter().map(ToString::to_string).collect();
        let key = json!([shape, sort_names, partition]).to_string();
        let used = index.map(|i| (i.def.ddoc.clone(), i.def.name.clone()));
        let mut log = self.log.lock();
        log.queries += 1;
        if let Some(used) = &used {
            *log.uses.entry(used.clone()).or_default() += 1;
        }
        if !log.shapes.contains_key(&key) && log.shapes.len() >= MAX_SHAPES {
            let rarest = log.shapes.iter().min_by_key(|(_, s)| s.runs).map(|(k, _)| k.clone());
            if let Some(rarest) = rarest {
                log.shapes.remove(&rarest);
            }
        }
        let entry = log.shapes.entry(key).or_insert_with(|| QueryShape {
            shape,
            selector: selector.clone(),
            sort: sort.to_vec(),
            partition,
            runs: 0,
            docs_examined: 0,
            keys_examined: 0,
            results: 0,
            index: None,
        });
        entry.runs += 1;
        entry.docs_examined += stats.docs_examined;
        entry.keys_examined += stats.keys_examined;
        entry.results += stats.results_returned;
        entry.index = used;
    }

    /// Records one request fetching `ids` documents by id.
    pub fn record_lookup(&self, ids: usize) {
        let mut log = self.log.lock();
        log.lookups += 1;
        log.looked_up += ids as u64;
    }

    pub fn summary(&self) -> Summary {
        let log = self.log.lock();
        Summary {
            since: self.since,
            queries: log.queries,
            query_shapes: log.shapes.len(),
            lookups: log.lookups,
            looked_up: log.looked_up,
        }
    }

    /// The logged query shapes, most run first.
    pub fn shapes(&self) -> Vec<QueryShape> {
        let mut shapes: Vec<QueryShape> = self.log.lock().shapes.values().cloned().collect();
        shapes.sort_by(|a, b| {
            b.runs.cmp(&a.runs).then_with(|| a.shape.to_string().cmp(&b.shape.to_string()))
        });
        shapes
    }

    /// Queries that used index `name` of design document `ddoc`.
    pub fn uses(&self, ddoc: &str, name: &str) -> u64 {
        self.log.lock().uses.get(&(ddoc.to_string(), name.to_string())).copied().unwrap_or(0)
    }

    pub fn queries(&self) -> u64 {
        self.log.lock().queries
    }
}

/// A selector's JSON with every value replaced by `"?"` (operators and field names kept;
/// an array of values becomes `["?"]`).
pub fn shape_of(selector: &Value) -> Value {
    match selector {
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), shape_of(v))).collect::<Map<_, _>>())
        }
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            json!(["?"])
        }
        Value::Array(items) => Value::Array(items.iter().map(shape_of).collect()),
        _ => json!("?"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_hide_values_and_keep_structure() {
        let selector = json!({"product_id": {"$eq": "p1"}, "tags": {"$in": [1, 2]},
                              "$or": [{"a": 1}, {"b": {"$gt": 2}}]});
        assert_eq!(
            shape_of(&selector),
            json!({"product_id": {"$eq": "?"}, "tags": {"$in": ["?"]},
                                               "$or": [{"a": "?"}, {"b": {"$gt": "?"}}]})
        );
    }

    #[test]
    fn the_log_is_bounded_and_counts_runs() -> Result<(), String> {
        let observed = Observed::default();
        let selector =
            |n: usize| Selector::parse(&json!({format!("f{n}"): 1})).map_err(|e| e.to_string());
        let stats = ExecStats { keys_examined: 10, docs_examined: 10, results_returned: 1 };
        for n in 0..MAX_SHAPES + 10 {
            observed.record(&selector(n)?, &[], false, None, &stats);
        }
        observed.record(&selector(0)?, &[], false, None, &stats);
        assert_eq!(observed.queries(), MAX_SHAPES as u64 + 11);
        let shapes = observed.shapes();
        assert_eq!(shapes.len(), MAX_SHAPES);
        Ok(())
    }
}
