//! Pull-based execution of a pipeline: each stage is a [`Source`] (a function that opens
//! its stream of documents) built over the previous stage's [`Source`].
//!
//! 1. [`Pipeline::stream`] wraps the input source in one source per stage and opens the
//!    last; opening a stage opens its input.
//! 2. A streaming stage (`$match`, `$project`/`$addFields`/`$unset`, `$unwind`,
//!    `$replaceRoot`, `$limit`, `$skip`, `$lookup` in batches, `$graphLookup`) maps its
//!    input's iterator: a document is read from storage only when the consumer asks for
//!    the next one, so a cursor's first batch does not materialise the rest.
//! 3. A blocking stage (`$group`, `$sort`, `$bucket`, `$bucketAuto`, `$count`, `$facet`,
//!    `$sample`, `$out`; `$setWindowFields` per partition) consumes its input when
//!    opened, within [`Env::memory_limit`] (`spill`). `$group` that outgrows its budget opens its input a second time (the
//!    caller's source reads one storage snapshot, so the replay sees the same documents)
//!    and groups through the spill instead.
//!
//! Streams own what they use (stages through the shared [`Pipeline::stages`], the
//! [`EnvRef`], the variables), so a cursor can keep one between `getMore`s.

use std::sync::Arc;

use bson::{Bson, Document};

use super::{Env, Pipeline, Stage, spill, stages};
use crate::expr::{Result, Vars};

/// A stream of documents.
pub type Docs<'a> = Box<dyn Iterator<Item = Result<Document>> + Send + 'a>;

/// Opens a stream of documents; opening it again yields the same documents (a blocking
/// stage replays its input through it).
pub type Source<'a> = Arc<dyn Fn() -> Result<Docs<'a>> + Send + Sync + 'a>;

/// The database a pipeline runs against, shared by its stages' streams.
pub type EnvRef<'a> = Arc<dyn Env + 'a>;

/// Input documents per `$lookup` batch (one foreign query per batch).
const LOOKUP_BATCH: usize = 1000;

/// Output documents of a `$merge` per write.
const MERGE_BATCH: usize = 1000;

/// A source over documents held in memory.
pub fn vec_source<'a>(docs: Vec<Document>) -> Source<'a> {
    Arc::new(move || Ok(Box::new(docs.clone().into_iter().map(Ok)) as Docs<'a>))
}

/// Every document of `docs`, or its first error.
pub fn collect(docs: Docs<'_>) -> Result<Vec<Document>> {
    docs.collect()
}

impl Pipeline {
    /// The stream of stages `from..` over `input`.
    pub fn stream<'a>(
        &self,
        from: usize,
        input: Source<'a>,
        env: &EnvRef<'a>,
        vars: &Vars,
    ) -> Result<Docs<'a>> {
        let mut source = input;
        for i in from..self.stages.len() {
            let sort = self.sorts.get(i).cloned().flatten();
            let record = self.records.get(i).copied().unwrap_or_default();
            let vars = vars.clone().sorted_by(sort).with_record_meta(record, None);
            let (stages, env, prev) = (self.stages.clone(), env.clone(), source);
            source = Arc::new(move || match stages.get(i) {
                Some((_, stage)) => open(stage, &prev, &env, &vars),
                None => prev(),
            });
        }
        source()
    }

    /// Runs every stage over `docs`.
    pub fn run(&self, docs: Vec<Document>, env: &EnvRef<'_>, vars: &Vars) -> Result<Vec<Document>> {
        collect(self.stream(0, vec_source(docs), env, vars)?)
    }
}

/// Opens one stage over `input`.
fn open<'a>(stage: &Stage, input: &Source<'a>, env: &EnvRef<'a>, vars: &Vars) -> Result<Docs<'a>> {
    let vars = vars.clone();
    Ok(match stage {
        Stage::Match { filter, matcher, expr } => {
            let matcher = match (matcher, filter.is_empty()) {
                _ if let Some(scoped) = super::with_lets(filter, vars.bound()) => {
                    Some(env.matcher(&scoped)?)
                }
                (Some(m), _) => Some(m.clone()),
                (None, false) => Some(env.matcher(filter)?),
                (None, true) => None,
            };
            let expr = expr.clone();
            filter_docs(input()?, move |d| {
                if matcher.as_ref().is_some_and(|m| !m(d)) {
                    return Ok(false);
                }
                match &expr {
                    Some(e) => Ok(crate::expr::value::truthy(&e.eval(&mut vars.with_doc(d))?)),
                    None => Ok(true),
                }
            })
        }
        Stage::Shape(shape) => {
            let shape = shape.clone();
            map_docs(input()?, move |d| shape.apply(&d, &mut vars.with_doc(&d)))
        }
        Stage::Group(g) => g.open(input, env, &vars)?,
        Stage::Sort(keys) => spill::sort(input()?, keys, env)?,
        Stage::Limit(n) => Box::new(input()?.take(*n)),
        Stage::Skip(n) => {
            let mut left = *n;
            Box::new(input()?.filter(move |d| match d {
                Ok(_) if left > 0 => {
                    left -= 1;
                    false
                }
                _ => true,
            }))
        }
        Stage::Count(field) => {
            let n = input()?.try_fold(0usize, |n, d| d.map(|_| n + 1))?;
            from_vec(stages::count(field, n))
        }
        Stage::Unwind(u) => {
            let u = u.clone();
            flat_docs(input()?, move |d| Ok(u.run(vec![d])))
        }
        Stage::ReplaceRoot(e) => {
            let e = e.clone();
            map_docs(input()?, move |d| stages::replace_root(&e, &mut vars.with_doc(&d)))
        }
        Stage::Facet(facets) => {
            let held = spill::hold(input()?, env.as_ref(), "$facet")?;
            let mut out = Document::new();
            for (name, p) in facets {
                let result = collect(p.stream(0, held.clone(), env, &vars)?)?;
                out.insert(
                    name.clone(),
                    result.into_iter().map(Bson::Document).collect::<Vec<_>>(),
                );
            }
            from_vec(vec![out])
        }
        Stage::Bucket(b) => from_vec(b.open(input, env, &vars)?),
        Stage::BucketAuto(b) => from_vec(b.open(input()?, env, &vars)?),
        Stage::SetWindowFields(w) => w.open(input()?, env, &vars)?,
        Stage::Densify(d) => d.open(input()?, env, &vars)?,
        Stage::Fill(f) => f.open(input()?, env, &vars)?,
        Stage::Sample(n) => from_vec(stages::sample(input()?, *n)?),
        Stage::Documents(e) => from_vec(stages::documents(e, &mut vars.clone())?),
        Stage::Lookup(l) => {
            let (mut l, env) = (l.opened(), env.clone());
            batch_docs(input()?, LOOKUP_BATCH, move |docs| l.run(docs, &env, &vars))
        }
        Stage::GraphLookup(g) => {
            let (g, env) = (g.clone(), env.clone());
            flat_docs(input()?, move |d| g.run(vec![d], env.as_ref(), &vars))
        }
        Stage::UnionWith(coll, p) => {
            let (coll, from) = (coll.clone(), env.clone());
            let source: Source<'a> = Arc::new(move || from.find_stream(&coll, &Document::new()));
            let other = p.stream(0, source, env, &vars)?;
            Box::new(input()?.chain(other))
        }
        Stage::Out(db, coll) => {
            env.replace_collection(db.as_deref(), coll, collect(input()?)?)?;
            from_vec(Vec::new())
        }
        Stage::Merge(m) => {
            let (m, env) = (m.clone(), env.clone());
            batch_docs(input()?, MERGE_BATCH, move |docs| {
                m.run(docs, &env, &vars)?;
                Ok(Vec::new())
            })
        }
    })
}

fn from_vec<'a>(docs: Vec<Document>) -> Docs<'a> {
    Box::new(docs.into_iter().map(Ok))
}

/// The documents `keep` says yes to; errors pass through.
fn filter_docs<'a>(
    input: Docs<'a>,
    mut keep: impl FnMut(&Document) -> Result<bool> + Send + 'a,
) -> Docs<'a> {
    Box::new(input.filter_map(move |d| match d.and_then(|d| Ok((keep(&d)?, d))) {
        Ok((true, d)) => Some(Ok(d)),
        Ok((false, _)) => None,
        Err(e) => Some(Err(e)),
    }))
}

/// Each document changed by `f`.
pub(super) fn map_docs<'a, T: 'a>(
    input: Docs<'a>,
    mut f: impl FnMut(Document) -> Result<T> + Send + 'a,
) -> Box<dyn Iterator<Item = Result<T>> + Send + 'a> {
    Box::new(input.map(move |d| d.and_then(&mut f)))
}

/// The documents `f` makes of each document.
fn flat_docs<'a>(
    input: Docs<'a>,
    mut f: impl FnMut(Document) -> Result<Vec<Document>> + Send + 'a,
) -> Docs<'a> {
    Box::new(input.flat_map(move |d| match d.and_then(&mut f) {
        Ok(docs) => docs.into_iter().map(Ok).collect::<Vec<_>>(),
        Err(e) => vec![Err(e)],
    }))
}

/// The documents `f` makes of each batch of at most `size` documents.
fn batch_docs<'a>(
    mut input: Docs<'a>,
    size: usize,
    mut f: impl FnMut(Vec<Document>) -> Result<Vec<Document>> + Send + 'a,
) -> Docs<'a> {
    let (mut done, mut first) = (false, true);
    let batches = std::iter::from_fn(move || {
        if done {
            return None;
        }
        let mut batch = Vec::with_capacity(size.min(64));
        while batch.len() < size {
            match input.next() {
                Some(Ok(d)) => batch.push(d),
                Some(Err(e)) => {
                    done = true;
                    return Some(vec![Err(e)]);
                }
                None => {
                    done = true;
                    break;
                }
            }
        }
        // An empty input is still one (empty) batch: `$merge` creates its target.
        if batch.is_empty() && !std::mem::take(&mut first) {
            return None;
        }
        first = false;
        match f(batch) {
            Ok(out) => Some(out.into_iter().map(Ok).collect()),
            Err(e) => {
                done = true;
                Some(vec![Err(e)])
            }
        }
    });
    Box::new(batches.flatten())
}
