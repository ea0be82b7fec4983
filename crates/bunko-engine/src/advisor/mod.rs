//! The data-modeling advisor: the modeling guides' rules checked against a live database
//! (issue 18, `docs/advisor.md`).
//!
//! 1. `sample` reads the database as a client would: one pass over `_all_docs` (ids and
//!    revision records only, on a snapshot, so writes never wait) keeps a reservoir of
//!    [`Options::sample_size`] ids (Vitter's algorithm R) plus the largest documents by the
//!    size the engine records for every document; then it reads the sampled bodies one at a
//!    time and folds them into bounded statistics: array lengths per field path, array
//!    growth against each document's previous revision (while its body is kept, until
//!    compaction), top-level shapes. The pass stops at [`Options::time_budget`] and says so.
//! 2. One module per rule family turns those statistics into [`Finding`]s: `arrays`
//!    (unbounded arrays), `size` (large documents), `partitions` (partition keys, from
//!    the per-partition counters every write keeps), `types` (mixed entity types without
//!    a discriminator), `copies` (embedded copies that drifted from the document they
//!    refer to), `indexes` (duplicate and unused indexes), `queries` (missing indexes,
//!    from the query log) and `joins` (lookups by id following queries, `$lookup` chains).
//! 3. `observe` is the state the advisor adds to the engine beside the per-partition write
//!    counters: a bounded in-memory log of query shapes (`_find` and MongoDB `find`) with
//!    the documents they examined and returned, per-index use counts, lookups by id and
//!    the query each followed (`follow`), and joining aggregation pipelines, updated by
//!    `Database::find`, `Database::all_docs_keys` and the front ends' lookup and pipeline
//!    hooks. It lives in memory only and restarts empty (it is rebuilt by the queries
//!    themselves, DESIGN §8); writes never touch it.
//!
//! Each finding names its rule, a severity, the guide the rule comes from (in our words),
//! the evidence (numbers, example ids, field paths, query shapes) and a suggestion.

mod arrays;
mod copies;
pub mod follow;
mod guides;
mod indexes;
mod joins;
pub mod observe;
mod partitions;
mod queries;
pub mod sample;
mod size;
mod types;

use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::database::Database;
use crate::{Error, Result};
pub use follow::{Client, Clients};
pub use observe::Observed;

/// How much the advisor reads.
#[derive(Debug, Clone)]
pub struct Options {
    /// Documents whose bodies are read (default 1000, at most [`MAX_SAMPLE_SIZE`]).
    pub sample_size: usize,
    /// When the pass over `_all_docs` stops, sampled or not (default 10 s).
    pub time_budget: Duration,
    pub thresholds: Thresholds,
    /// The MongoDB collection name suggestions use (`db.<collection>.createIndex`); by
    /// default the part of the database name after `$` when it needs no decoding.
    pub collection: Option<String>,
}

/// The largest `sample_size` accepted.
pub const MAX_SAMPLE_SIZE: usize = 100_000;
/// The longest `time_budget` accepted.
pub const MAX_TIME_BUDGET: Duration = Duration::from_secs(300);

impl Default for Options {
    fn default() -> Self {
        Self {
            sample_size: 1000,
            time_budget: Duration::from_secs(10),
            thresholds: Thresholds::default(),
            collection: None,
        }
    }
}

/// When a rule fires; the defaults are documented in `docs/advisor.md`.
#[derive(Debug, Clone)]
pub struct Thresholds {
    /// An array this long (in any sampled document) is reported as large.
    pub array_length: usize,
    /// An array at least this long (p99) that grew since the previous revision in most
    /// documents compared is reported as growing without bound.
    pub array_growth_length: usize,
    /// A document at least this fraction of `max_document_size` is large.
    pub document_fraction: f64,
    /// A partitioned database with at least this many documents and fewer partitions than
    /// [`Thresholds::min_partitions`] has too few partitions.
    pub few_partitions_docs: u64,
    pub min_partitions: usize,
    /// The largest partition holding at least this share of the documents is a hot spot.
    pub hot_partition_share: f64,
    /// Writes the database's partitions must have taken before one is a write hot spot.
    pub hot_partition_writes: u64,
    /// Copies whose sources were written at least this many times (median revision
    /// generation) are `changing-copy-source`...
    pub source_edits: u64,
    /// ... once at least this many distinct sources were compared.
    pub changing_sources: usize,
    /// A partition at least this fraction of `max_partition_size` is near the cap.
    pub partition_fraction: f64,
    /// A query shape that examined at least this many documents per run, and more than
    /// ten per result (CouchDB's own warning ratio), lacks an index.
    pub examined_per_query: u64,
    /// Indexes are reported unused only after this many `_find` queries were observed.
    pub queries_for_unused: u64,
    /// Runs a query shape or a joining pipeline must have before rule 8 judges it.
    pub join_runs: u64,
    /// Lookups by id following a query's runs, on average, from which rule 8 reports it.
    pub follow_ups_per_query: f64,
    /// `$lookup` stages in one pipeline from which rule 8 reports it (a chain).
    pub lookups_per_pipeline: usize,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            array_length: 500,
            array_growth_length: 100,
            document_fraction: 0.25,
            few_partitions_docs: 1000,
            min_partitions: 10,
            hot_partition_share: 0.5,
            hot_partition_writes: 1000,
            source_edits: 20,
            changing_sources: 3,
            partition_fraction: 0.5,
            examined_per_query: 100,
            queries_for_unused: 100,
            join_runs: 10,
            follow_ups_per_query: 1.0,
            lookups_per_pipeline: 2,
        }
    }
}

/// What the index and query rules read: the indexes, the query log, the thresholds and
/// the MongoDB collection name their suggestions use.
#[derive(Clone, Copy)]
struct QueryLog<'a> {
    indexes: &'a [std::sync::Arc<crate::index::Index>],
    observed: &'a Observed,
    t: &'a Thresholds,
    coll: &'a str,
}

/// How urgent a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

/// The guide a rule comes from.
#[derive(Debug, Clone, Serialize)]
pub struct Guide {
    /// Which guide (vendor and topic).
    pub source: &'static str,
    /// The rule, in our own words.
    pub rule: &'static str,
}

/// One rule the data breaks, with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    /// A stable rule id (`unbounded-array`, `large-document`, …).
    pub rule: &'static str,
    pub severity: Severity,
    /// One line saying what was found.
    pub summary: String,
    pub guide: Guide,
    pub evidence: Value,
    pub suggestion: String,
}

/// What the sample covered.
#[derive(Debug, Clone, Serialize)]
pub struct SampleInfo {
    pub requested: usize,
    /// Bodies read.
    pub size: usize,
    /// Live documents seen by the pass over `_all_docs`.
    pub scanned: u64,
    pub doc_count: u64,
    /// The pass reached the end of the database within the time budget.
    pub complete: bool,
    pub elapsed_ms: u64,
    pub time_budget_ms: u64,
}

/// The advisor's answer for one database.
#[derive(Debug, Clone, Serialize)]
pub struct Advice {
    pub db_name: String,
    pub sample: SampleInfo,
    pub observed: observe::Summary,
    /// The rule ids checked (a rule with no finding was checked and passed).
    pub rules_checked: Vec<&'static str>,
    /// Most severe first.
    pub findings: Vec<Finding>,
}

impl Database {
    /// Checks the modeling rules against this database (reads only; never blocks writes).
    pub fn advise(&self, options: &Options) -> Result<Advice> {
        if options.sample_size == 0 || options.sample_size > MAX_SAMPLE_SIZE {
            return Err(Error::BadRequest(format!(
                "sample_size must be between 1 and {MAX_SAMPLE_SIZE}"
            )));
        }
        let sample = sample::take(self, options)?;
        let t = &options.thresholds;
        let max_doc = self.config.get().limits.max_document_size as u64;
        let mut findings = Vec::new();
        findings.extend(arrays::check(&sample, t));
        findings.extend(size::check(self, &sample, t, max_doc)?);
        if self.is_partitioned() {
            findings.extend(partitions::check(self, t)?);
        }
        findings.extend(types::check(&sample));
        findings.extend(copies::check(self, &sample, t));
        let indexes = self.indexes.all();
        let coll = options.collection.clone().unwrap_or_else(|| collection_of(&self.name()));
        let log = QueryLog { indexes: &indexes, observed: &self.observed, t, coll: &coll };
        findings.extend(indexes::check(&log));
        findings.extend(queries::check(&log));
        findings.extend(joins::check(&self.observed, t));
        findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
        let mut rules_checked = vec![arrays::RULE, arrays::GROWTH_RULE, size::RULE];
        if self.is_partitioned() {
            rules_checked.extend(partitions::RULES);
        }
        rules_checked.extend([
            types::RULE,
            copies::RULE,
            copies::CHANGING_RULE,
            indexes::DUPLICATE,
            indexes::UNUSED,
            queries::RULE,
            joins::FOLLOW_UPS,
            joins::CHAIN,
        ]);
        Ok(Advice {
            db_name: self.name(),
            sample: sample.info(options, self.info().stats.doc_count),
            observed: self.observed.summary(),
            rules_checked,
            findings,
        })
    }
}

/// The MongoDB collection of engine database `name` (`shop$orders`: `orders`; a CouchDB
/// database without `$` is itself a collection, of `_couchdb`), when the name needs no
/// decoding (the MongoDB front end's mapping escapes other characters); otherwise a
/// placeholder.
fn collection_of(name: &str) -> String {
    let plain = |c: &str| c.chars().all(|ch| ch.is_ascii_alphanumeric() || "_-".contains(ch));
    match name.split_once('$') {
        Some((_, coll)) if !coll.is_empty() && plain(coll) => coll.to_string(),
        None if plain(name) => name.to_string(),
        _ => "<collection>".to_string(),
    }
}
