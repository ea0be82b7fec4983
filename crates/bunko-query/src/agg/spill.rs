//! Blocking stages past their memory budget: `$sort` and `$group` (also `$sortByCount`
//! and `$bucket`) hold at most [`Env::memory_limit`] bytes of their own state; past it
//! they fail with MongoDB's `QueryExceededMemoryLimitNoDiskUseAllowed` (292) unless
//! [`Env::allow_disk_use`], and then spill to a [`Spill`]: temporary storage that reads
//! entries back in key order (the engine's temporary keys; [`MemorySpill`] in tests).
//!
//! - `$sort` ([`sort`]) is an external merge sort: the input is read into runs of at most
//!   the budget, each sorted in memory and written under `(run, position)`; the runs are
//!   then merged as the sorted stream is read, holding one document per run. `$bucketAuto`
//!   sorts its input by its `groupBy` value the same way ([`sort_by`]).
//! - `$group` ([`group`]) first groups its input stream in memory; if the groups outgrow
//!   the budget it opens its input again (the same documents: one storage snapshot) and
//!   writes each input document under `(group key, position)`,
//!   so reading the spill back yields one group's documents after another, in input
//!   order within a group, and only one group's accumulators are held at a time. Groups
//!   then come out in the order of their keys rather than first seen (MongoDB does not
//!   promise an order either).
//!
//! Keys use [`bunko_doc::keycode`], so a group key is prefix-free and ends before the
//! 8-byte position.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;

use bson::{Bson, Document};
use bunko_doc::keycode::KeyWriter;

use super::group::{canonical, canonical_into};
use super::stages;
use super::{Docs, Env, EnvRef, Source};
use crate::expr::accum::{Acc, AccSpec};
use crate::expr::value::{approx_size, doc_size};
use crate::expr::{ExprError, Result, Vars};

/// One entry of a spill: key and value bytes.
pub type Entry = (Vec<u8>, Vec<u8>);

/// Temporary storage a blocking stage spills to; removed when dropped.
pub trait Spill: Send {
    /// Stores `entries` (keys unique within this spill).
    fn put(&mut self, entries: Vec<Entry>) -> Result<()>;
    /// The entries whose key starts with `prefix`, in key order (as they were when the
    /// scan began).
    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<Entry>> + Send>;
}

/// A [`Spill`] in memory (tests, and callers without a store).
#[derive(Default)]
pub struct MemorySpill(BTreeMap<Vec<u8>, Vec<u8>>);

impl Spill for MemorySpill {
    fn put(&mut self, entries: Vec<Entry>) -> Result<()> {
        self.0.extend(entries);
        Ok(())
    }

    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<Entry>> + Send> {
        let entries: Vec<Result<Entry>> = self
            .0
            .range(prefix.to_vec()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| Ok((k.clone(), v.clone())))
            .collect();
        Box::new(entries.into_iter())
    }
}

/// MongoDB's error for a blocking stage past its budget without `allowDiskUse`.
pub fn exceeded(stage: &str, limit: usize) -> ExprError {
    let message = match stage {
        "$sort" => format!(
            "Sort exceeded memory limit of {limit} bytes, but did not opt in to external sorting."
        ),
        _ => format!(
            "Exceeded memory limit for {stage}, but didn't allow external spilling; pass allowDiskUse:true to opt in"
        ),
    };
    ExprError::new(292, "QueryExceededMemoryLimitNoDiskUseAllowed", message)
}

fn encode(d: &Document) -> Result<Vec<u8>> {
    d.to_vec().map_err(|e| ExprError::new(1, "InternalError", format!("spilling: {e}")))
}

fn decode(bytes: &[u8]) -> Result<Document> {
    Document::from_reader(bytes)
        .map_err(|e| ExprError::new(1, "InternalError", format!("reading a spill: {e}")))
}

/// Orders two documents.
pub type Order = Arc<dyn Fn(&Document, &Document) -> Ordering + Send + Sync>;

/// `$sort`: in memory within the budget, else an external merge sort through a spill.
pub fn sort<'a>(
    input: Docs<'a>,
    keys: &[(Vec<String>, bool)],
    env: &EnvRef<'a>,
) -> Result<Docs<'a>> {
    let keys = keys.to_vec();
    let order: Order = Arc::new(move |a, b| stages::compare_docs(&keys, a, b));
    Ok(sort_by(input, order, env.as_ref(), "$sort")?.1)
}

/// Sorts `input` by `order` (stable): in memory within the budget, else in runs of about
/// the budget written to a spill and merged as the answer is read. Also the number of
/// documents. `stage` names the stage in the error.
pub fn sort_by<'a>(
    input: Docs<'a>,
    order: Order,
    env: &dyn Env,
    stage: &str,
) -> Result<(usize, Docs<'a>)> {
    let limit = env.memory_limit();
    let mut spill: Option<Box<dyn Spill>> = None;
    let (mut runs, mut count, mut used) = (0u64, 0usize, 0usize);
    let mut run = Vec::new();
    for d in input {
        let d = d?;
        used += doc_size(&d);
        count += 1;
        run.push(d);
        if used > limit {
            if !env.allow_disk_use() {
                return Err(exceeded(stage, limit));
            }
            let target = match &mut spill {
                Some(s) => s,
                None => spill.insert(env.spill()?),
            };
            write_run(target.as_mut(), runs, std::mem::take(&mut run), &order)?;
            runs += 1;
            used = 0;
        }
    }
    let Some(mut spill) = spill else {
        run.sort_by(|a, b| order(a, b));
        return Ok((count, Box::new(run.into_iter().map(Ok))));
    };
    if !run.is_empty() {
        write_run(spill.as_mut(), runs, run, &order)?;
        runs += 1;
    }
    Ok((count, Box::new(Merged::new(spill, runs, order)?)))
}

/// Sorts one run in memory and writes it under `(run, position)`.
fn write_run(
    spill: &mut dyn Spill,
    run: u64,
    mut docs: Vec<Document>,
    order: &Order,
) -> Result<()> {
    docs.sort_by(|a, b| order(a, b));
    let entries = docs
        .iter()
        .enumerate()
        .map(|(i, d)| Ok((run_key(run, i as u64), encode(d)?)))
        .collect::<Result<Vec<_>>>()?;
    drop(docs);
    spill.put(entries)
}

fn run_key(run: u64, i: u64) -> Vec<u8> {
    [run.to_be_bytes(), i.to_be_bytes()].concat()
}

/// Spilled runs merged as they are read, holding one document per run; equal documents
/// come in run order (the input's order: the sort is stable).
struct Merged {
    heads: Vec<(Entries, Option<Document>)>,
    order: Order,
    /// Removes the runs when the merge is dropped.
    _spill: Box<dyn Spill>,
}

type Entries = Box<dyn Iterator<Item = Result<Entry>> + Send>;

impl Merged {
    fn new(spill: Box<dyn Spill>, runs: u64, order: Order) -> Result<Merged> {
        let mut heads = Vec::new();
        for r in 0..runs {
            let mut it = spill.scan(&r.to_be_bytes());
            let first = next_doc(&mut it)?;
            heads.push((it, first));
        }
        Ok(Merged { heads, order, _spill: spill })
    }

    fn pop(&mut self) -> Result<Option<Document>> {
        let mut best: Option<usize> = None;
        for (i, (_, head)) in self.heads.iter().enumerate() {
            let Some(h) = head else { continue };
            let better = match best.and_then(|b| self.heads.get(b)).and_then(|(_, d)| d.as_ref()) {
                None => true,
                Some(b) => (self.order)(h, b).is_lt(),
            };
            if better {
                best = Some(i);
            }
        }
        let Some((it, head)) = best.and_then(|b| self.heads.get_mut(b)) else { return Ok(None) };
        let next = next_doc(it)?;
        Ok(std::mem::replace(head, next))
    }
}

impl Iterator for Merged {
    type Item = Result<Document>;

    fn next(&mut self) -> Option<Result<Document>> {
        self.pop().transpose()
    }
}

fn next_doc(it: &mut Entries) -> Result<Option<Document>> {
    match it.next() {
        Some(entry) => Ok(Some(decode(&entry?.1)?)),
        None => Ok(None),
    }
}

/// A document's group `_id`, evaluated with the variables of that document.
pub type Key<'k> = &'k dyn Fn(&mut Vars) -> Result<Bson>;

/// `$group` of the documents `input` opens, by their group `_id` (`key`): in memory within
/// the budget, else (opening `input` again) through a spill. `stage` names the stage in
/// the error.
pub fn group<'a>(
    input: &dyn Fn() -> Result<Docs<'a>>,
    key: Key<'_>,
    (vars, accs): (&Vars, &[(String, AccSpec)]),
    env: &dyn Env,
    stage: &str,
) -> Result<Vec<Document>> {
    let limit = env.memory_limit();
    if let Some(out) = group_in_memory(input()?, key, vars, accs, limit)? {
        return Ok(out);
    }
    if !env.allow_disk_use() {
        return Err(exceeded(stage, limit));
    }
    let mut spill = env.spill()?;
    let mut entries = Vec::new();
    let mut used = 0usize;
    for (i, d) in input()?.enumerate() {
        let d = d?;
        let id = key(&mut vars.with_doc(&d))?;
        let key = KeyWriter::new(0).str(&canonical(&id)).u64(i as u64).finish();
        let value = encode(&bson::doc! {"i": id, "d": d})?;
        used += key.len() + value.len();
        entries.push((key, value));
        if used > limit / 2 {
            spill.put(std::mem::take(&mut entries))?;
            used = 0;
        }
    }
    spill.put(entries)?;
    group_spilled(spill.as_ref(), vars, accs)
}

/// One group being accumulated: its key bytes, `_id` and accumulators.
pub(super) type Open = (Vec<u8>, Bson, Vec<Acc>);

fn group_spilled(
    spill: &dyn Spill,
    vars: &Vars,
    accs: &[(String, AccSpec)],
) -> Result<Vec<Document>> {
    let mut out = Vec::new();
    let mut open: Option<Open> = None;
    for entry in spill.scan(&[]) {
        let (mut key, value) = entry?;
        key.truncate(key.len().saturating_sub(8));
        let mut rec = decode(&value)?;
        let id = rec.remove("i").unwrap_or(Bson::Null);
        let d = match rec.remove("d") {
            Some(Bson::Document(d)) => d,
            _ => Document::new(),
        };
        let mut v = vars.with_doc(&d);
        if open.as_ref().is_none_or(|(k, _, _)| *k != key) {
            if let Some(done) = open.take() {
                out.push(finish(done, accs));
            }
            let started = accs.iter().map(|(_, a)| a.start(&mut v)).collect::<Result<Vec<_>>>()?;
            open = Some((key, id, started));
        }
        if let Some((_, _, state)) = open.as_mut() {
            for ((_, spec), acc) in accs.iter().zip(state.iter_mut()) {
                spec.feed(acc, &mut v)?;
            }
        }
    }
    out.extend(open.map(|done| finish(done, accs)));
    Ok(out)
}

pub(super) fn finish((_, id, state): Open, accs: &[(String, AccSpec)]) -> Document {
    let mut out = Document::new();
    out.insert("_id", id);
    for ((name, _), acc) in accs.iter().zip(state) {
        out.insert(name.clone(), acc.finish());
    }
    out
}

/// Groups in memory, in the order groups are first seen; `None` once the groups hold
/// more than `limit` bytes.
pub fn group_in_memory(
    docs: Docs<'_>,
    key: Key<'_>,
    vars: &Vars,
    accs: &[(String, AccSpec)],
    limit: usize,
) -> Result<Option<Vec<Document>>> {
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    let mut groups: Vec<(Bson, Vec<Acc>)> = Vec::new();
    let mut held = 0usize;
    let mut k = String::new();
    for d in docs {
        let mut v = vars.with_owned(d?);
        let id = key(&mut v)?;
        k.clear();
        canonical_into(&id, &mut k);
        let slot = match index.get(k.as_str()) {
            Some(&i) => i,
            None => {
                let started =
                    accs.iter().map(|(_, a)| a.start(&mut v)).collect::<Result<Vec<_>>>()?;
                held += k.len() + approx_size(&id);
                groups.push((id, started));
                index.insert(k.clone(), groups.len() - 1);
                groups.len() - 1
            }
        };
        if let Some((_, state)) = groups.get_mut(slot) {
            for ((_, spec), acc) in accs.iter().zip(state.iter_mut()) {
                let before = acc.held();
                spec.feed(acc, &mut v)?;
                held += acc.held() - before;
            }
            if held + groups.len() * 64 * accs.len() > limit {
                return Ok(None);
            }
        }
    }
    Ok(Some(groups.into_iter().map(|(id, state)| finish((Vec::new(), id, state), accs)).collect()))
}

/// `$facet`'s input, read once and replayed for each facet: in memory within the budget,
/// else in a spill (in input order), which each facet reads back as a stream.
pub fn hold<'a>(docs: Docs<'_>, env: &dyn Env, stage: &str) -> Result<Source<'a>> {
    let limit = env.memory_limit();
    let (mut held, mut used) = (Vec::new(), 0usize);
    let mut docs = docs;
    for d in docs.by_ref() {
        let d = d?;
        used += approx_size(&Bson::Document(d.clone()));
        held.push(d);
        if used > limit {
            break;
        }
    }
    if used <= limit {
        return Ok(super::stream::vec_source(held));
    }
    if !env.allow_disk_use() {
        return Err(exceeded(stage, limit));
    }
    let mut spill = env.spill()?;
    let (mut entries, mut used) = (Vec::new(), 0usize);
    for (i, d) in held.into_iter().map(Ok).chain(docs).enumerate() {
        let value = encode(&d?)?;
        used += value.len() + 8;
        entries.push(((i as u64).to_be_bytes().to_vec(), value));
        if used > limit / 2 {
            spill.put(std::mem::take(&mut entries))?;
            used = 0;
        }
    }
    spill.put(entries)?;
    let spill = Arc::new(std::sync::Mutex::new(spill));
    Ok(Arc::new(move || {
        let locked = spill.lock().map_err(|_| ExprError::new(1, "InternalError", "spill lock"))?;
        let scan = locked.scan(&[]);
        Ok(Box::new(scan.map(|entry| entry.and_then(|(_, v)| decode(&v)))) as Docs<'a>)
    }))
}
