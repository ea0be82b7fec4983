//! `$lookup` (equality form, `let` + `pipeline` form, or both), through the [`Env`].
//!
//! A `$lookup` on `localField`/`foreignField` does not query once per input document: it
//! runs over batches of its input stream ([`OpenLookup`]); the local values of a batch are
//! gathered and fetched with `_id` point reads, `$in` queries through the foreign field's
//! index, or (unindexed) one read of the foreign collection per stream, then joined in
//! memory through a canonical key of each foreign value — every element of a multikey
//! (array) foreign field, and the missing field as `null`, as MongoDB matches.

use std::collections::HashMap;

use bson::{Bson, Document, doc};

use super::group::canonical;
use super::join::{path, string_field, values_of};
use super::stages::set;
use super::{Env, EnvRef, Pipeline};
use crate::expr::value::{get_path, or_null};
use crate::expr::{Expr, ExprError, Result, Vars};

/// The most distinct local values a `$lookup` asks for with one `$in` query.
const IN_QUERY_MAX: usize = 64;
/// The most `_id` values a `$lookup` asks for (as point reads) instead of one scan.
const ID_READS_MAX: usize = 1000;
/// Index lookups serve a stream until it has asked for one value per this many foreign
/// documents; past that, one read of the foreign collection (kept for the rest of the
/// stream) costs less (measured: 10k inputs into 4k documents took 2.2 times as long by
/// index lookups).
const INDEX_SHARE: usize = 4;
/// The most values of an indexed foreign field one `$in` query asks for (each value is an
/// index range; the engine scans at most 256 ranges per query).
const IN_INDEX_MAX: usize = 200;

/// A parsed `$lookup`.
#[derive(Clone)]
pub struct Lookup {
    from: String,
    local: Option<Vec<String>>,
    foreign: Option<String>,
    as_: Vec<String>,
    lets: Vec<(String, Expr)>,
    pipeline: Option<Pipeline>,
}

impl Lookup {
    pub fn parse(spec: &Document, env: Option<&dyn Env>) -> Result<Lookup> {
        let from = match spec.get("from") {
            Some(Bson::String(s)) => s.clone(),
            Some(Bson::Document(d)) => d
                .get_str("coll")
                .map_err(|_| ExprError::failed_to_parse("$lookup 'from' needs 'coll'"))?
                .to_string(),
            Some(_) => {
                return Err(ExprError::failed_to_parse("$lookup argument 'from' must be a string"));
            }
            None => {
                return Err(ExprError::failed_to_parse(
                    "missing 'from' option to $lookup stage specification",
                ));
            }
        };
        let Some(as_) = string_field(spec, "$lookup", "as")? else {
            return Err(ExprError::failed_to_parse("must specify 'as' field for a $lookup"));
        };
        let local = string_field(spec, "$lookup", "localField")?;
        let foreign = string_field(spec, "$lookup", "foreignField")?;
        if local.is_some() != foreign.is_some() {
            return Err(ExprError::failed_to_parse(
                "$lookup requires both or neither of 'localField' and 'foreignField' to be specified",
            ));
        }
        let pipeline = match spec.get("pipeline") {
            Some(Bson::Array(items)) => Some(Pipeline::parse(items, env)?),
            Some(_) => {
                return Err(ExprError::failed_to_parse(
                    "$lookup argument 'pipeline' must be an array",
                ));
            }
            None => None,
        };
        if local.is_none() && pipeline.is_none() {
            return Err(ExprError::failed_to_parse(
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified",
            ));
        }
        let mut lets = Vec::new();
        match spec.get("let") {
            Some(Bson::Document(d)) => {
                for (k, v) in d {
                    crate::expr::cond_check_var_name(k)?;
                    lets.push((k.clone(), Expr::parse(v)?));
                }
            }
            Some(_) => {
                return Err(ExprError::failed_to_parse("$lookup argument 'let' must be an object"));
            }
            None => {}
        }
        if let Some(bad) = spec.keys().find(|k| {
            !matches!(
                k.as_str(),
                "from" | "as" | "localField" | "foreignField" | "let" | "pipeline"
            )
        }) {
            return Err(ExprError::failed_to_parse(format!("unknown argument to $lookup: {bad}")));
        }
        Ok(Lookup {
            from,
            local: local.map(|l| path(&l)),
            foreign,
            as_: path(&as_),
            lets,
            pipeline,
        })
    }

    /// The stage ready to run over the batches of one stream.
    pub fn opened(&self) -> OpenLookup {
        OpenLookup { spec: self.clone(), reads: Reads::default() }
    }
}

/// A `$lookup` running over one stream, batch by batch.
pub struct OpenLookup {
    spec: Lookup,
    reads: Reads,
}

/// What a `$lookup` has read of the foreign collection over one stream.
#[derive(Default)]
struct Reads {
    /// The whole foreign collection, once a batch needed it (read once per stream).
    whole: Option<Table>,
    /// Values looked up through the index so far.
    asked: usize,
    /// Batches run so far.
    batches: usize,
}

impl OpenLookup {
    /// Joins one batch of input documents.
    pub fn run(
        &mut self,
        docs: Vec<Document>,
        env: &EnvRef<'_>,
        vars: &Vars,
    ) -> Result<Vec<Document>> {
        let spec = &self.spec;
        let joined: Vec<Vec<Document>> = match (&spec.local, &spec.foreign) {
            (Some(local), Some(foreign)) => {
                equality_join(&docs, local, foreign, &spec.from, env.as_ref(), &mut self.reads)?
            }
            _ => {
                let all = env.find(&spec.from, &Document::new())?;
                vec![all; docs.len()]
            }
        };
        let mut out = Vec::with_capacity(docs.len());
        for (mut d, matched) in docs.into_iter().zip(joined) {
            let matched = match &spec.pipeline {
                Some(p) => {
                    let mut v = vars.with_doc(&d);
                    let mut bindings = Vec::new();
                    for (name, e) in &spec.lets {
                        bindings.push((name.clone(), or_null(e.eval(&mut v)?)));
                    }
                    let mut scope = vars.clone();
                    for (n, b) in bindings {
                        scope.bind(&n, b);
                    }
                    p.run(matched, env, &scope)?
                }
                None => matched,
            };
            set(&mut d, &spec.as_, Bson::Array(matched.into_iter().map(Bson::Document).collect()));
            out.push(d);
        }
        Ok(out)
    }
}

/// Foreign documents and, for each canonical key of their foreign field, which they are.
struct Table {
    docs: Vec<Document>,
    index: HashMap<String, Vec<usize>>,
}

impl Table {
    fn new(docs: Vec<Document>, foreign: &str) -> Table {
        let fpath = path(foreign);
        let mut index: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, f) in docs.iter().enumerate() {
            let f = Bson::Document(f.clone());
            let mut keys: Vec<String> = values_of(&f, &fpath).iter().map(canonical).collect();
            if let whole @ Bson::Array(_) = get_path(&f, &fpath) {
                keys.push(canonical(&whole));
            }
            keys.sort();
            keys.dedup();
            for k in keys {
                index.entry(k).or_default().push(i);
            }
        }
        Table { docs, index }
    }

    /// The documents matching any of `values`, each once, in the table's order.
    fn matching(&self, values: &[Bson]) -> Vec<Document> {
        let mut hits: Vec<usize> = values
            .iter()
            .flat_map(|v| self.index.get(&canonical(v)).cloned().unwrap_or_default())
            .collect();
        hits.sort_unstable();
        hits.dedup();
        hits.into_iter().filter_map(|i| self.docs.get(i).cloned()).collect()
    }
}

/// For each input document, the foreign documents whose `foreign` field equals its
/// `local` field, read in the cheapest way:
/// - `_id` values: point reads;
/// - a foreign field with an index: `$in` queries of at most [`IN_INDEX_MAX`] values,
///   each a set of index ranges (one lookup per value, not a scan), until the stream has
///   asked for a quarter as many values as the collection has documents ([`INDEX_SHARE`]);
/// - otherwise, on the first batch with few values, one `$in` query; past that the whole
///   foreign collection, read once per stream (`whole`) and joined in memory.
fn equality_join(
    docs: &[Document],
    local: &[String],
    foreign: &str,
    from: &str,
    env: &dyn Env,
    reads: &mut Reads,
) -> Result<Vec<Vec<Document>>> {
    let first = reads.batches == 0;
    reads.batches += 1;
    let locals: Vec<Vec<Bson>> =
        docs.iter().map(|d| values_of(&Bson::Document(d.clone()), local)).collect();
    let mut wanted: Vec<Bson> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for v in locals.iter().flatten() {
        if seen.insert(canonical(v)) {
            wanted.push(v.clone());
        }
    }
    let asked = reads.asked.saturating_add(wanted.len());
    let fresh = if wanted.is_empty() || reads.whole.is_some() {
        None
    } else if foreign == "_id" && wanted.len() <= ID_READS_MAX {
        Some(env.find(from, &doc! {foreign: {"$in": wanted}})?)
    } else if env.index_on(from, foreign).is_some()
        && env.count(from).is_none_or(|n| asked.saturating_mul(INDEX_SHARE) < n)
    {
        reads.asked = asked;
        let mut found = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for chunk in wanted.chunks(IN_INDEX_MAX) {
            for f in env.find(from, &doc! {foreign: {"$in": chunk.to_vec()}})? {
                if ids.insert(canonical(f.get("_id").unwrap_or(&Bson::Null))) {
                    found.push(f);
                }
            }
        }
        Some(found)
    } else if first && wanted.len() <= IN_QUERY_MAX {
        Some(env.find(from, &doc! {foreign: {"$in": wanted}})?)
    } else {
        reads.whole = Some(Table::new(env.find(from, &Document::new())?, foreign));
        None
    };
    let table = match (fresh, reads.whole.as_ref()) {
        (Some(found), _) => &Table::new(found, foreign),
        (None, Some(table)) => table,
        (None, None) => return Ok(vec![Vec::new(); docs.len()]),
    };
    Ok(locals.iter().map(|vals| table.matching(vals)).collect())
}
