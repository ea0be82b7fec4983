//! Grouping stages: `$group`, `$sortByCount` (a `$group` then a `$sort`), `$bucket`,
//! `$bucketAuto`. Groups are found through a canonical key of the `_id` value under which
//! MongoDB-equal values (`1`, `1.0`, `NumberLong(1)`) coincide; groups come out in the order
//! they were first seen. Each consumes its input stream within the memory budget (`spill`).

use std::sync::Arc;

use bson::{Bson, Document};

use super::granularity::Granularity;
use super::spill;
use super::stream::map_docs;
use super::{Docs, EnvRef, Source};
use crate::expr::accum::{Acc, AccSpec};
use crate::expr::value::{compare, or_null, to_f64, to_int, type_name};
use crate::expr::{Expr, ExprError, Result, Vars};

/// A key under which MongoDB-equal values are equal.
pub fn canonical(v: &Bson) -> String {
    let mut out = String::new();
    canonical_into(v, &mut out);
    out
}

/// [`canonical`] written into `out` (a stage keying every document reuses one buffer).
pub fn canonical_into(v: &Bson, out: &mut String) {
    use std::fmt::Write;
    // Writing into a String does not fail.
    let _ = match v {
        Bson::Null | Bson::Undefined => write!(out, "n"),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            match to_int(v) {
                Some(i) => write!(out, "i{i}"),
                None => write!(out, "f{}", to_f64(v).unwrap_or(f64::NAN)),
            }
        }
        Bson::String(s) | Bson::Symbol(s) => write!(out, "s{s:?}"),
        Bson::Document(d) => {
            out.push('{');
            for (i, (k, v)) in d.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{k:?}:");
                canonical_into(v, out);
            }
            write!(out, "}}")
        }
        Bson::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_into(item, out);
            }
            write!(out, "]")
        }
        other => write!(out, "{}{other}", type_name(other)),
    };
}

/// A parsed `$group`.
#[derive(Clone, Debug, PartialEq)]
pub struct Group {
    id: Expr,
    accs: Vec<(String, AccSpec)>,
    /// `$sortByCount`: sort by `count` descending afterwards.
    sort_by_count: bool,
}

impl Group {
    pub fn parse(spec: &Document) -> Result<Group> {
        let Some(id) = spec.get("_id") else {
            return Err(ExprError::location(15955, "a group specification must include an _id"));
        };
        let mut accs = Vec::new();
        for (field, v) in spec.iter().filter(|(k, _)| *k != "_id") {
            if field.starts_with('$') || field.contains('.') {
                return Err(ExprError::location(
                    40236,
                    format!("The field name '{field}' cannot be an operator name"),
                ));
            }
            accs.push((field.clone(), AccSpec::parse(field, v)?));
        }
        Ok(Group { id: Expr::parse(id)?, accs, sort_by_count: false })
    }

    pub fn sort_by_count(arg: &Bson) -> Result<Group> {
        let id = match arg {
            Bson::String(s) if s.starts_with('$') => Expr::parse(arg)?,
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                Expr::parse(arg)?
            }
            _ => {
                return Err(ExprError::location(
                    40148,
                    "the sortByCount field must be defined as a $-prefixed path or an expression",
                ));
            }
        };
        let count = AccSpec::parse("count", &Bson::Document(bson::doc! {"$sum": 1}))?;
        Ok(Group { id, accs: vec![("count".to_string(), count)], sort_by_count: true })
    }

    /// The top-level fields of its input the group reads (`None`: it may read any).
    pub fn reads(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let all = self.id.reads(&mut out) && self.accs.iter().all(|(_, a)| a.reads(&mut out));
        all.then_some(out)
    }

    /// The whole (dotted) paths of its input the group reads (`None`: it may read any).
    pub fn paths(&self) -> Option<Vec<String>> {
        let mut out = Vec::new();
        let all = self.id.paths(&mut out) && self.accs.iter().all(|(_, a)| a.paths(&mut out));
        all.then_some(out)
    }

    /// Groups the documents of `input` (opened again if the groups spill).
    pub fn open<'a>(&self, input: &Source<'a>, env: &EnvRef<'a>, vars: &Vars) -> Result<Docs<'a>> {
        let key = |v: &mut Vars| Ok(or_null(self.id.eval(v)?));
        let out = spill::group(&**input, &key, (vars, &self.accs), env.as_ref(), "$group")?;
        let out: Docs<'a> = Box::new(out.into_iter().map(Ok));
        if !self.sort_by_count {
            return Ok(out);
        }
        spill::sort(out, &[(vec!["count".to_string()], false)], env)
    }
}

fn output_of(spec: &Document, stage: &str) -> Result<Vec<(String, AccSpec)>> {
    match spec.get("output") {
        None => Ok(vec![(
            "count".to_string(),
            AccSpec::parse("count", &Bson::Document(bson::doc! {"$sum": 1}))?,
        )]),
        Some(Bson::Document(o)) => {
            o.iter().map(|(k, v)| Ok((k.clone(), AccSpec::parse(k, v)?))).collect()
        }
        Some(_) => {
            Err(ExprError::location(40196, format!("The {stage} 'output' field must be an object")))
        }
    }
}

fn group_by(spec: &Document, stage: &str) -> Result<Expr> {
    match spec.get("groupBy") {
        Some(v @ Bson::String(s)) if s.starts_with('$') => Expr::parse(v),
        Some(v @ Bson::Document(_)) => Expr::parse(v),
        Some(_) => Err(ExprError::location(
            40202,
            format!(
                "The {stage} 'groupBy' field must be defined as a $-prefixed path or an expression"
            ),
        )),
        None => Err(ExprError::location(
            40198,
            format!("{stage} requires 'groupBy' and 'boundaries' to be specified."),
        )),
    }
}

/// A parsed `$bucket`.
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    group_by: Expr,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Vec<(String, AccSpec)>,
}

impl Bucket {
    pub fn parse(spec: &Document) -> Result<Bucket> {
        let group_by = group_by(spec, "$bucket")?;
        let Some(Bson::Array(boundaries)) = spec.get("boundaries") else {
            return Err(ExprError::location(
                40198,
                "$bucket requires 'groupBy' and 'boundaries' to be specified.",
            ));
        };
        if boundaries.len() < 2 {
            return Err(ExprError::location(
                40192,
                format!(
                    "The $bucket 'boundaries' field must have at least 2 values, but found {} value(s).",
                    boundaries.len()
                ),
            ));
        }
        for pair in boundaries.windows(2) {
            if let [a, b] = pair
                && compare(a, b).is_ge()
            {
                return Err(ExprError::location(
                    40194,
                    format!(
                        "The 'boundaries' option to $bucket must be sorted in ascending order, but elements {a} and {b} are not in ascending order"
                    ),
                ));
            }
        }
        let default = spec.get("default").cloned();
        if let (Some(d), Some(lo), Some(hi)) = (&default, boundaries.first(), boundaries.last())
            && compare(d, lo).is_ge()
            && compare(d, hi).is_lt()
        {
            return Err(ExprError::location(
                40199,
                "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.",
            ));
        }
        Ok(Bucket {
            group_by,
            boundaries: boundaries.clone(),
            default,
            output: output_of(spec, "$bucket")?,
        })
    }

    /// The bucket of one document (its group `_id`), from the document's variables.
    fn bucket_of(&self, vars: &mut Vars) -> Result<Bson> {
        let v = or_null(self.group_by.eval(vars)?);
        let slot = self.boundaries.windows(2).position(
            |w| matches!(w, [lo, hi] if compare(&v, lo).is_ge() && compare(&v, hi).is_lt()),
        );
        match (slot.and_then(|i| self.boundaries.get(i)), &self.default) {
            (Some(lo), _) => Ok(lo.clone()),
            (None, Some(def)) => Ok(def.clone()),
            (None, None) => Err(ExprError::location(
                40066,
                "$bucket could not find a matching branch for an input, and no default was specified.",
            )),
        }
    }

    /// Groups the documents of `input` into buckets (opened again if the groups spill).
    pub fn open<'a>(
        &self,
        input: &Source<'a>,
        env: &EnvRef<'a>,
        vars: &Vars,
    ) -> Result<Vec<Document>> {
        let key = |v: &mut Vars| self.bucket_of(v);
        let mut out = spill::group(&**input, &key, (vars, &self.output), env.as_ref(), "$bucket")?;
        // Buckets in boundary order, the default bucket last.
        out.sort_by(|a, b| {
            let pos = |d: &Document| {
                d.get("_id")
                    .and_then(|id| self.boundaries.iter().position(|x| compare(x, id).is_eq()))
                    .unwrap_or(usize::MAX)
            };
            pos(a).cmp(&pos(b))
        });
        Ok(out)
    }
}

/// A parsed `$bucketAuto`.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketAuto {
    group_by: Expr,
    buckets: usize,
    output: Vec<(String, AccSpec)>,
    granularity: Option<Granularity>,
}

/// A `$bucketAuto` bucket being filled: its bounds, size and accumulators.
struct Filling {
    min: Bson,
    max: Bson,
    count: usize,
    accs: Vec<Acc>,
}

impl BucketAuto {
    pub fn parse(spec: &Document) -> Result<BucketAuto> {
        let group_by = group_by(spec, "$bucketAuto")?;
        let buckets = match spec.get("buckets").and_then(to_int) {
            Some(n) if n > 0 => n as usize,
            _ => {
                return Err(ExprError::location(
                    40243,
                    "The $bucketAuto 'buckets' field must be greater than 0",
                ));
            }
        };
        let granularity = spec.get("granularity").map(Granularity::parse).transpose()?;
        let output = output_of(spec, "$bucketAuto")?;
        Ok(BucketAuto { group_by, buckets, output, granularity })
    }

    /// Buckets of the documents of `input`, as MongoDB cuts them: sorted by their `groupBy`
    /// value (through a spill past the memory budget), then read in order, each bucket
    /// taking `round(n / buckets)` documents (the last bucket all that remain) plus those
    /// after them with the same value, or, with a granularity, those below its maximum
    /// rounded up. Only one bucket's accumulators are held.
    pub fn open<'a>(
        &self,
        input: Docs<'a>,
        env: &EnvRef<'a>,
        vars: &Vars,
    ) -> Result<Vec<Document>> {
        let (group_by, v) = (self.group_by.clone(), vars.clone());
        let checked = self.granularity.is_some();
        let keyed = map_docs(input, move |d| {
            let value = or_null(group_by.eval(&mut v.with_doc(&d))?);
            if checked {
                Granularity::check(&value)?;
            }
            Ok(bson::doc! {"v": value, "d": d})
        });
        let order: spill::Order = Arc::new(|a, b| compare(value_of(a), value_of(b)));
        let (n, mut sorted) = spill::sort_by(keyed, order, env.as_ref(), "$bucketAuto")?;
        let per = ((n as f64) / (self.buckets as f64)).round().max(1.0) as usize;
        let mut out = Vec::new();
        let mut next = sorted.next().transpose()?;
        let mut previous_max: Option<Bson> = None;
        while let Some(first) = next.take() {
            let last_bucket = out.len() + 1 == self.buckets;
            let mut bucket = self.start(&first, vars)?;
            self.add(&mut bucket, &first, vars)?;
            while bucket.count < per || last_bucket {
                let Some(rec) = sorted.next().transpose()? else { break };
                self.add(&mut bucket, &rec, vars)?;
            }
            next = sorted.next().transpose()?;
            let Some(granularity) = &self.granularity else {
                // Equal values stay in one bucket; the maximum is the next bucket's minimum.
                while let Some(rec) = next.take_if(|r| compare(value_of(r), &bucket.max).is_eq()) {
                    self.add(&mut bucket, &rec, vars)?;
                    next = sorted.next().transpose()?;
                }
                if let Some(rec) = &next {
                    bucket.max = value_of(rec).clone();
                }
                out.push(self.finish(bucket));
                continue;
            };
            let boundary = granularity.round_up(&bucket.max)?;
            while let Some(rec) = next.take_if(|r| compare(&boundary, value_of(r)).is_gt()) {
                self.add(&mut bucket, &rec, vars)?;
                next = sorted.next().transpose()?;
            }
            bucket.min = match previous_max.take() {
                Some(max) => max,
                None => granularity.round_down(value_of(&first))?,
            };
            bucket.max = match &next {
                Some(rec) if to_f64(&boundary) == Some(0.0) => {
                    granularity.round_down(value_of(rec))?
                }
                _ => boundary,
            };
            previous_max = Some(bucket.max.clone());
            out.push(self.finish(bucket));
        }
        Ok(out)
    }

    /// A bucket whose first record is `rec`.
    fn start(&self, rec: &Document, vars: &Vars) -> Result<Filling> {
        let empty = Document::new();
        let mut vars = vars.with_doc(record_doc(rec).unwrap_or(&empty));
        let accs = self.output.iter().map(|(_, a)| a.start(&mut vars)).collect::<Result<_>>()?;
        let v = value_of(rec).clone();
        Ok(Filling { min: v.clone(), max: v, count: 0, accs })
    }

    /// Adds the document of sort record `rec` to `bucket`.
    fn add(&self, bucket: &mut Filling, rec: &Document, vars: &Vars) -> Result<()> {
        bucket.max = value_of(rec).clone();
        bucket.count += 1;
        let Some(d) = record_doc(rec) else { return Ok(()) };
        let mut vars = vars.with_doc(d);
        for ((_, spec), acc) in self.output.iter().zip(bucket.accs.iter_mut()) {
            spec.feed(acc, &mut vars)?;
        }
        Ok(())
    }

    /// A bucket's output document.
    fn finish(&self, bucket: Filling) -> Document {
        let mut out = bson::doc! {"_id": {"min": bucket.min, "max": bucket.max}};
        for ((name, _), acc) in self.output.iter().zip(bucket.accs) {
            out.insert(name.clone(), acc.finish());
        }
        out
    }
}

/// The document of a `$bucketAuto` sort record.
fn record_doc(rec: &Document) -> Option<&Document> {
    match rec.get("d") {
        Some(Bson::Document(d)) => Some(d),
        _ => None,
    }
}

/// The `groupBy` value of a `$bucketAuto` sort record.
fn value_of(rec: &Document) -> &Bson {
    rec.get("v").unwrap_or(&Bson::Null)
}
