//! What the engine observes for the advisor while it serves queries: a bounded log of
//! query shapes (`_find` and MongoDB `find`: the selector with its values replaced by `"?"`,
//! the sort, partition or global, the dialect) with the documents they examined and
//! returned, how often each index was chosen, how many requests fetched documents by id
//! (`_all_docs` with `keys` and `include_docs`, `_bulk_get`) and which query shape each
//! such follow-up came after ([`super::follow`]), and the aggregation pipelines that join
//! (`$lookup`). `Database::find`, `Database::all_docs_keys` and the lookup and pipeline
//! hooks of [`super::follow`] record here (one short lock); writes never do.
//! In memory only: it starts empty with the process and fills again with the queries
//! (DESIGN §8: in-memory structures must be rebuildable).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use bunko_query::{Dialect, FieldPath, Selector};
use parking_lot::Mutex;
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::find::{ExecStats, FindQuery};
use crate::index::Index;

/// Query shapes kept per database; the least run one makes room for a new one.
pub const MAX_SHAPES: usize = 256;
/// Joining pipeline shapes kept per database, likewise.
pub const MAX_PIPELINES: usize = 64;
/// Databases and examples a shape's follow-ups keep.
const MAX_FOLLOW_EXAMPLES: usize = 3;
const MAX_FOLLOW_DATABASES: usize = 5;

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
    /// Mango (`_find`) or MongoDB (`find`, `count`, an aggregation's `$match`).
    pub dialect: Dialect,
    /// The lookups by id that followed runs of this shape.
    pub follow: FollowUps,
}

/// Lookups by id that followed a query shape's runs from the same client
/// ([`super::follow`]).
#[derive(Debug, Clone, Default)]
pub struct FollowUps {
    /// Runs followed by at least one lookup.
    pub runs_followed: u64,
    /// Lookup requests.
    pub requests: u64,
    /// Ids they asked for.
    pub ids: u64,
    /// Requests by kind (`_all_docs`, `_bulk_get`).
    pub by: BTreeMap<&'static str, u64>,
    /// The databases looked up (the first few).
    pub databases: BTreeSet<String>,
    /// The first few lookups: kind, database, the first ids.
    pub examples: Vec<Value>,
}

/// One lookup by id, as [`Observed::record_follow_up`] files it.
pub struct Lookup<'a> {
    pub kind: &'static str,
    pub db: String,
    pub ids: &'a [String],
}

/// An aggregation pipeline that joins other collections, and how often it ran.
#[derive(Debug, Clone)]
pub struct PipelineShape {
    /// The pipeline with every value replaced by `"?"` (the joined collections kept).
    pub shape: Value,
    /// `$lookup` and `$graphLookup` stages, nested ones included.
    pub lookups: usize,
    /// The collections joined, in pipeline order.
    pub from: Vec<String>,
    pub runs: u64,
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
    pipelines: HashMap<String, PipelineShape>,
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
    /// its dialect, the index it used and what it cost. Returns the shape's key (for
    /// [`Observed::record_follow_up`]).
    pub fn record(&self, query: &FindQuery, index: Option<&Index>, stats: &ExecStats) -> String {
        let (selector, sort) = (&query.selector, &query.sort);
        let partition = query.partition.is_some();
        let mongo = query.dialect == Dialect::Mongo;
        let shape = shape_of(&selector.to_json());
        let sort_names: Vec<String> = sort.iter().map(ToString::to_string).collect();
        let key = json!([shape, sort_names, partition, mongo]).to_string();
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
        let entry = log.shapes.entry(key.clone()).or_insert_with(|| QueryShape {
            shape,
            selector: selector.clone(),
            sort: sort.to_vec(),
            partition,
            runs: 0,
            docs_examined: 0,
            keys_examined: 0,
            results: 0,
            index: None,
            dialect: query.dialect,
            follow: FollowUps::default(),
        });
        entry.runs += 1;
        entry.docs_examined += stats.docs_examined;
        entry.keys_examined += stats.keys_examined;
        entry.results += stats.results_returned;
        entry.index = used;
        key
    }

    /// Files a lookup by id under the query shape `key` it followed; `first`: the first
    /// lookup after that run. Nothing when the shape has left the log since.
    pub fn record_follow_up(&self, key: &str, first: bool, lookup: &Lookup) {
        let mut log = self.log.lock();
        let Some(shape) = log.shapes.get_mut(key) else { return };
        let f = &mut shape.follow;
        f.runs_followed += u64::from(first);
        f.requests += 1;
        f.ids += lookup.ids.len() as u64;
        *f.by.entry(lookup.kind).or_default() += 1;
        if f.databases.len() < MAX_FOLLOW_DATABASES {
            f.databases.insert(lookup.db.clone());
        }
        if f.examples.len() < MAX_FOLLOW_EXAMPLES {
            let ids: Vec<&String> = lookup.ids.iter().take(3).collect();
            f.examples.push(json!({"kind": lookup.kind, "db": lookup.db,
                                   "ids": ids, "id_count": lookup.ids.len()}));
        }
    }

    /// Records one run of an aggregation pipeline (as JSON) that joins; pipelines without
    /// `$lookup` are not kept.
    pub fn record_pipeline(&self, stages: &[Value]) {
        let mut from = Vec::new();
        let lookups = count_lookups(stages, &mut from);
        if lookups == 0 {
            return;
        }
        let shape = shape_of(&Value::Array(stages.to_vec()));
        let key = json!([shape, from]).to_string();
        let mut log = self.log.lock();
        if !log.pipelines.contains_key(&key) && log.pipelines.len() >= MAX_PIPELINES {
            let rarest = log.pipelines.iter().min_by_key(|(_, p)| p.runs).map(|(k, _)| k.clone());
            if let Some(rarest) = rarest {
                log.pipelines.remove(&rarest);
            }
        }
        let entry = log.pipelines.entry(key).or_insert_with(|| PipelineShape {
            shape,
            lookups,
            from,
            runs: 0,
        });
        entry.runs += 1;
    }

    /// The logged joining pipelines, most run first.
    pub fn pipelines(&self) -> Vec<PipelineShape> {
        let mut out: Vec<PipelineShape> = self.log.lock().pipelines.values().cloned().collect();
        out.sort_by(|a, b| {
            b.runs.cmp(&a.runs).then_with(|| a.shape.to_string().cmp(&b.shape.to_string()))
        });
        out
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

/// The `$lookup` and `$graphLookup` stages of a pipeline, counting those nested in a
/// `$lookup`'s or `$unionWith`'s `pipeline` and in `$facet`; pushes the joined collections
/// (`from`) to `from`.
fn count_lookups(stages: &[Value], from: &mut Vec<String>) -> usize {
    let mut count = 0;
    for stage in stages {
        let Some((name, spec)) = stage.as_object().and_then(|s| s.iter().next()) else {
            continue;
        };
        let nested = |spec: &Value, from: &mut Vec<String>| match spec.get("pipeline") {
            Some(Value::Array(inner)) => count_lookups(inner, from),
            _ => 0,
        };
        match name.as_str() {
            "$lookup" | "$graphLookup" => {
                count += 1;
                if let Some(coll) = spec.get("from").and_then(Value::as_str) {
                    from.push(coll.to_string());
                }
                count += nested(spec, from);
            }
            "$unionWith" => count += nested(spec, from),
            "$facet" => {
                for inner in spec.as_object().into_iter().flat_map(|m| m.values()) {
                    count += inner.as_array().map_or(0, |i| count_lookups(i, from));
                }
            }
            _ => {}
        }
    }
    count
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

    fn query(n: usize) -> Result<FindQuery, String> {
        let selector = Selector::parse(&json!({format!("f{n}"): 1})).map_err(|e| e.to_string())?;
        Ok(FindQuery::new(selector, Dialect::Mango))
    }

    #[test]
    fn the_log_is_bounded_and_counts_runs() -> Result<(), String> {
        let observed = Observed::default();
        let stats = ExecStats { keys_examined: 10, docs_examined: 10, results_returned: 1 };
        for n in 0..MAX_SHAPES + 10 {
            observed.record(&query(n)?, None, &stats);
        }
        observed.record(&query(0)?, None, &stats);
        assert_eq!(observed.queries(), MAX_SHAPES as u64 + 11);
        let shapes = observed.shapes();
        assert_eq!(shapes.len(), MAX_SHAPES);
        Ok(())
    }

    #[test]
    fn follow_ups_are_filed_under_their_query_shape() -> Result<(), String> {
        let observed = Observed::default();
        let stats = ExecStats::default();
        let key = observed.record(&query(1)?, None, &stats);
        let ids = ["a".to_string(), "b".to_string()];
        let lookup = Lookup { kind: "_bulk_get", db: "users".to_string(), ids: &ids };
        observed.record_follow_up(&key, true, &lookup);
        observed.record_follow_up(&key, false, &lookup);
        observed.record_follow_up("gone", true, &lookup);
        let shapes = observed.shapes();
        let f = &shapes[0].follow;
        assert_eq!((f.runs_followed, f.requests, f.ids), (1, 2, 4));
        assert_eq!(f.by.get("_bulk_get"), Some(&2));
        Ok(())
    }

    #[test]
    fn pipelines_count_their_lookups_nested_ones_too() {
        let observed = Observed::default();
        let lookup = |from: &str, inner: Value| json!({"$lookup": {"from": from, "as": "x", "pipeline": inner}});
        let stages = [
            json!({"$match": {"status": "paid"}}),
            lookup("customers", json!([lookup("addresses", json!([]))])),
            json!({"$facet": {"a": [{"$graphLookup": {"from": "parts"}}]}}),
        ];
        observed.record_pipeline(&stages);
        observed.record_pipeline(&stages);
        observed.record_pipeline(&[json!({"$match": {"status": "paid"}})]);
        let pipelines = observed.pipelines();
        assert_eq!(pipelines.len(), 1, "pipelines without $lookup are not kept");
        assert_eq!(pipelines[0].lookups, 3);
        assert_eq!(pipelines[0].from, ["customers", "addresses", "parts"]);
        assert_eq!(pipelines[0].runs, 2);
    }
}
