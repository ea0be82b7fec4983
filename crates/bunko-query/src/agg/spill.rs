//! Blocking stages past their memory budget: `$sort` and `$group` (also `$sortByCount`
//! and `$bucket`) hold at most [`Env::memory_limit`] bytes of their own state; past it
//! they fail with MongoDB's `QueryExceededMemoryLimitNoDiskUseAllowed` (292) unless
//! [`Env::allow_disk_use`], and then spill to a [`Spill`]: temporary storage that reads
//! entries back in key order (the engine's temporary keys; [`MemorySpill`] in tests).
//!
//! - `$sort` ([`sort`]) is an external merge sort: the input is cut into runs of at most
//!   the budget, each sorted in memory and written under `(run, position)`; the runs are
//!   then merged, holding one document per run.
//! - `$group` ([`group`]) first groups in memory by reference; if the groups outgrow the
//!   budget it starts over and writes each input document under `(group key, position)`,
//!   so reading the spill back yields one group's documents after another, in input
//!   order within a group, and only one group's accumulators are held at a time. Groups
//!   then come out in the order of their keys rather than first seen (MongoDB does not
//!   promise an order either).
//!
//! Keys use [`bunko_doc::keycode`], so a group key is prefix-free and ends before the
//! 8-byte position.

use std::collections::BTreeMap;

use bson::{Bson, Document};
use bunko_doc::keycode::KeyWriter;

use super::Env;
use super::group::canonical;
use super::stages;
use crate::expr::accum::{Acc, AccSpec};
use crate::expr::value::{approx_size, doc_size};
use crate::expr::{ExprError, Result, Vars};

/// One entry of a spill: key and value bytes.
pub type Entry = (Vec<u8>, Vec<u8>);

/// Temporary storage a blocking stage spills to; removed when dropped.
pub trait Spill {
    /// Stores `entries` (keys unique within this spill).
    fn put(&mut self, entries: Vec<Entry>) -> Result<()>;
    /// The entries whose key starts with `prefix`, in key order.
    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<Entry>> + '_>;
}

/// A [`Spill`] in memory (tests, and callers without a store).
#[derive(Default)]
pub struct MemorySpill(BTreeMap<Vec<u8>, Vec<u8>>);

impl Spill for MemorySpill {
    fn put(&mut self, entries: Vec<Entry>) -> Result<()> {
        self.0.extend(entries);
        Ok(())
    }

    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<Entry>> + '_> {
        let prefix = prefix.to_vec();
        Box::new(
            self.0
                .range(prefix.clone()..)
                .take_while(move |(k, _)| k.starts_with(&prefix))
                .map(|(k, v)| Ok((k.clone(), v.clone()))),
        )
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

/// `$sort`: in memory within the budget, else an external merge sort through a spill.
pub fn sort(
    docs: Vec<Document>,
    keys: &[(Vec<String>, bool)],
    env: &dyn Env,
) -> Result<Vec<Document>> {
    let limit = env.memory_limit();
    let mut total = 0usize;
    if docs.iter().all(|d| {
        total += doc_size(d);
        total <= limit
    }) {
        return Ok(stages::sort(docs, keys));
    }
    if !env.allow_disk_use() {
        return Err(exceeded("$sort", limit));
    }
    let mut spill = env.spill()?;
    let mut runs = 0u64;
    let mut run = Vec::new();
    let mut used = 0usize;
    let mut rest = docs.into_iter().peekable();
    while let Some(d) = rest.next() {
        used += doc_size(&d);
        run.push(d);
        if used > limit || rest.peek().is_none() {
            let sorted = stages::sort(std::mem::take(&mut run), keys);
            let entries = sorted
                .iter()
                .enumerate()
                .map(|(i, d)| Ok((run_key(runs, i as u64), encode(d)?)))
                .collect::<Result<Vec<_>>>()?;
            drop(sorted);
            spill.put(entries)?;
            runs += 1;
            used = 0;
        }
    }
    merge(spill.as_ref(), runs, keys)
}

fn run_key(run: u64, i: u64) -> Vec<u8> {
    [run.to_be_bytes(), i.to_be_bytes()].concat()
}

/// Merges sorted runs, holding one document per run; equal documents come in run order
/// (the input's order: the sort is stable).
fn merge(spill: &dyn Spill, runs: u64, keys: &[(Vec<String>, bool)]) -> Result<Vec<Document>> {
    let mut heads = Vec::new();
    for r in 0..runs {
        let mut it = spill.scan(&r.to_be_bytes());
        let first = next_doc(&mut it)?;
        heads.push((it, first));
    }
    let mut out = Vec::new();
    loop {
        let mut best: Option<usize> = None;
        for (i, (_, head)) in heads.iter().enumerate() {
            let Some(h) = head else { continue };
            let better = match best.and_then(|b| heads.get(b)).and_then(|(_, d)| d.as_ref()) {
                None => true,
                Some(b) => stages::compare_docs(keys, h, b).is_lt(),
            };
            if better {
                best = Some(i);
            }
        }
        let Some((it, head)) = best.and_then(|b| heads.get_mut(b)) else { return Ok(out) };
        let next = next_doc(it)?;
        if let Some(Bson::Document(d)) = std::mem::replace(head, next) {
            out.push(d);
        }
    }
}

fn next_doc(it: &mut dyn Iterator<Item = Result<Entry>>) -> Result<Option<Bson>> {
    match it.next() {
        Some(entry) => Ok(Some(Bson::Document(decode(&entry?.1)?))),
        None => Ok(None),
    }
}

/// `$group` of documents keyed by their group `_id`: in memory within the budget, else
/// through a spill. `stage` names the stage in the error.
pub fn group(
    docs: Vec<(Bson, Document)>,
    vars: &Vars,
    accs: &[(String, AccSpec)],
    env: &dyn Env,
    stage: &str,
) -> Result<Vec<Document>> {
    let limit = env.memory_limit();
    if let Some(out) = group_in_memory(&docs, vars, accs, limit)? {
        return Ok(out);
    }
    if !env.allow_disk_use() {
        return Err(exceeded(stage, limit));
    }
    let mut spill = env.spill()?;
    let mut entries = Vec::new();
    let mut used = 0usize;
    for (i, (id, d)) in docs.into_iter().enumerate() {
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
type Open = (Vec<u8>, Bson, Vec<Acc>);

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

fn finish((_, id, state): Open, accs: &[(String, AccSpec)]) -> Document {
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
    docs: &[(Bson, Document)],
    vars: &Vars,
    accs: &[(String, AccSpec)],
    limit: usize,
) -> Result<Option<Vec<Document>>> {
    let mut index: std::collections::HashMap<String, usize> = Default::default();
    let mut groups: Vec<(Bson, Vec<Acc>)> = Vec::new();
    let mut held = 0usize;
    for (id, d) in docs {
        let mut v = vars.with_doc(d);
        let k = canonical(id);
        let slot = match index.get(&k) {
            Some(&i) => i,
            None => {
                let started =
                    accs.iter().map(|(_, a)| a.start(&mut v)).collect::<Result<Vec<_>>>()?;
                held += k.len() + approx_size(id);
                groups.push((id.clone(), started));
                index.insert(k, groups.len() - 1);
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
