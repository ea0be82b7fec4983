//! Golden tests of the pipeline stages on MongoDB's documented examples, over an in-memory
//! [`Env`] holding other collections.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bson::{Bson, DateTime, Document, bson, doc};

use super::spill::{Entry, MemorySpill, Spill};
use super::{Docs, Env, EnvRef, Matcher, Pipeline, Source};
use crate::expr::{ExprError, Result, Vars};

/// Collections in memory; filters are equality or `$in` on one path (enough here). Also a
/// memory limit, `allowDiskUse`, and what was spilled: (puts, entries, largest put in bytes).
/// Clones share the spill counts.
#[derive(Clone, Default)]
pub(super) struct Mem(HashMap<String, Vec<Document>>, Option<usize>, bool, Spilled);

impl Mem {
    /// No other collections; a memory limit (the default without one) and `allowDiskUse`.
    pub(super) fn limited(limit: Option<usize>, allow_disk_use: bool) -> Mem {
        Mem(HashMap::new(), limit, allow_disk_use, Spilled::default())
    }
}

/// What was spilled: (puts, entries, largest put in bytes).
#[derive(Clone, Default)]
pub(super) struct Spilled(Arc<Mutex<(usize, usize, usize)>>);

impl Spilled {
    fn get(&self) -> (usize, usize, usize) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A [`MemorySpill`] that records its puts in the [`Mem`] that made it.
struct Counted(MemorySpill, Spilled);

impl Spill for Counted {
    fn put(&mut self, entries: Vec<Entry>) -> Result<()> {
        let mut seen = self.1.0.lock().unwrap_or_else(|e| e.into_inner());
        let (puts, n, largest) = *seen;
        let bytes = entries.iter().map(|(k, v)| k.len() + v.len()).sum::<usize>();
        *seen = (puts + 1, n + entries.len(), largest.max(bytes));
        self.0.put(entries)
    }
    fn scan(&self, prefix: &[u8]) -> Box<dyn Iterator<Item = Result<Entry>> + Send> {
        self.0.scan(prefix)
    }
}

fn test(filter: &Document, d: &Document) -> bool {
    filter.iter().all(|(k, v)| {
        let path: Vec<String> = k.split('.').map(str::to_string).collect();
        let got = crate::expr::value::get_path(&Bson::Document(d.clone()), &path);
        let values: Vec<Bson> = match &got {
            Bson::Array(items) => items.iter().cloned().chain([got.clone()]).collect(),
            other => vec![crate::expr::value::or_null(other.clone())],
        };
        let wanted: Vec<Bson> = match v {
            Bson::Document(c) if c.contains_key("$in") => {
                c.get_array("$in").cloned().unwrap_or_default()
            }
            other => vec![other.clone()],
        };
        values.iter().any(|x| wanted.iter().any(|w| crate::expr::value::equal(x, w)))
    })
}

impl Env for Mem {
    fn matcher(&self, filter: &Document) -> Result<Matcher> {
        let f = filter.clone();
        Ok(Arc::new(move |d: &Document| test(&f, d)))
    }
    fn find(&self, coll: &str, filter: &Document) -> Result<Vec<Document>> {
        Ok(self
            .0
            .get(coll)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|d| test(filter, d))
            .collect())
    }
    fn replace_collection(&self, _: Option<&str>, _: &str, _: Vec<Document>) -> Result<()> {
        Ok(())
    }
    fn upsert(&self, _: Option<&str>, _: &str, _: Vec<Document>) -> Result<()> {
        Ok(())
    }
    fn memory_limit(&self) -> usize {
        self.1.unwrap_or(super::MEMORY_LIMIT)
    }
    fn allow_disk_use(&self) -> bool {
        self.2
    }
    fn spill(&self) -> Result<Box<dyn Spill>> {
        Ok(Box::new(Counted(MemorySpill::default(), self.3.clone())))
    }
}

pub(super) fn run(env: &Mem, input: Vec<Document>, stages: Bson) -> Result<Vec<Document>> {
    let Bson::Array(stages) = stages else { return Err(ExprError::bad_value("stages")) };
    let p = Pipeline::parse(&stages, Some(env))?;
    let env: EnvRef = Arc::new(env.clone());
    p.run(input, &env, &Vars::new(&doc! {}, DateTime::from_millis(0)))
}

fn sales() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "item": "abc", "price": 10, "quantity": 2, "tags": ["a", "b"]},
        doc! {"_id": 2, "item": "jkl", "price": 20, "quantity": 1, "tags": []},
        doc! {"_id": 3, "item": "xyz", "price": 5, "quantity": 10, "tags": ["b"]},
        doc! {"_id": 4, "item": "abc", "price": 10, "quantity": 5},
    ]
}

#[test]
fn group_sort_project_and_count() -> Result<()> {
    let env = Mem::default();
    let out = run(
        &env,
        sales(),
        bson!([
            {"$group": {"_id": "$item", "total": {"$sum": {"$multiply": ["$price", "$quantity"]}},
                        "avgQty": {"$avg": "$quantity"}, "n": {"$count": {}}, "ids": {"$push": "$_id"}}},
            {"$sort": {"total": -1, "_id": 1}},
        ]),
    )?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": "abc", "total": 70, "avgQty": 3.5, "n": 2, "ids": [1, 4]},
            doc! {"_id": "xyz", "total": 50, "avgQty": 10.0, "n": 1, "ids": [3]},
            doc! {"_id": "jkl", "total": 20, "avgQty": 1.0, "n": 1, "ids": [2]},
        ]
    );
    let out = run(
        &env,
        sales(),
        bson!([{"$group": {"_id": null, "top": {"$topN": {"n": 2, "sortBy": {"price": -1}, "output": "$item"}},
        "bottom": {"$bottom": {"sortBy": {"price": -1}, "output": "$item"}}, "set": {"$addToSet": "$item"}, "sd": {"$stdDevPop": "$price"}}}]),
    )?;
    assert_eq!(out[0].get("top"), Some(&bson!(["jkl", "abc"])));
    assert_eq!(out[0].get("bottom"), Some(&bson!("xyz")));
    assert_eq!(out[0].get_array("set").map(Vec::len).ok(), Some(3));
    let out = run(&env, sales(), bson!([{"$match": {"item": "abc"}}, {"$count": "abcs"}]))?;
    assert_eq!(out, vec![doc! {"abcs": 2}]);
    let out = run(
        &env,
        sales(),
        bson!([{"$match": {"_id": 1}}, {"$project": {"_id": 0, "item": 1, "value": {"$multiply": ["$price", "$quantity"]}}}]),
    )?;
    assert_eq!(out, vec![doc! {"item": "abc", "value": 20}]);
    let out = run(&env, sales(), bson!([{"$match": {"_id": 3}}, {"$project": {"_id": 0}}]))?;
    assert_eq!(out, vec![doc! {"item": "xyz", "price": 5, "quantity": 10, "tags": ["b"]}]);
    let out = run(
        &env,
        sales(),
        bson!([{"$match": {"_id": 1}}, {"$unset": ["tags", "price"]}, {"$set": {"a.b": 1}}]),
    )?;
    assert_eq!(out, vec![doc! {"_id": 1, "item": "abc", "quantity": 2, "a": {"b": 1}}]);
    let out = run(&env, sales(), bson!([{"$sortByCount": "$item"}, {"$limit": 1}]))?;
    assert_eq!(out, vec![doc! {"_id": "abc", "count": 2}]);
    Ok(())
}

#[test]
fn unwind_options() -> Result<()> {
    let env = Mem::default();
    let out = run(&env, sales(), bson!([{"$unwind": "$tags"}, {"$project": {"tags": 1}}]))?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "tags": "a"},
            doc! {"_id": 1, "tags": "b"},
            doc! {"_id": 3, "tags": "b"}
        ]
    );
    let out = run(
        &env,
        sales(),
        bson!([
        {"$unwind": {"path": "$tags", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
        {"$project": {"tags": 1, "i": 1}}]),
    )?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "tags": "a", "i": 0_i64},
            doc! {"_id": 1, "tags": "b", "i": 1_i64},
            doc! {"_id": 2, "i": Bson::Null},
            doc! {"_id": 3, "tags": "b", "i": 0_i64},
            doc! {"_id": 4, "i": Bson::Null},
        ]
    );
    Ok(())
}

#[test]
fn lookup_bucket_facet_and_errors() -> Result<()> {
    let mut env = Mem::default();
    env.0.insert(
        "inventory".into(),
        vec![
            doc! {"_id": 1, "sku": "abc", "instock": 120},
            doc! {"_id": 2, "sku": ["xyz", "abc"], "instock": 80},
            doc! {"_id": 3, "description": "Incomplete"},
        ],
    );
    let orders = vec![doc! {"_id": 1, "item": "abc"}, doc! {"_id": 3}];
    let out = run(
        &env,
        orders,
        bson!([{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inv"}},
        {"$project": {"ids": "$inv._id"}}]),
    )?;
    // Multikey foreign field; a missing local field matches a missing foreign field.
    assert_eq!(out, vec![doc! {"_id": 1, "ids": [1, 2]}, doc! {"_id": 3, "ids": [3]}]);
    // Many distinct local values: one read of the foreign collection, the same join.
    let many: Vec<Document> = (0..100)
        .map(|i| doc! {"_id": i, "item": if i == 7 { "xyz".to_string() } else { format!("v{i}") }})
        .collect();
    let out = run(
        &env,
        many,
        bson!([{"$lookup": {"from": "inventory", "localField": "item", "foreignField": "sku", "as": "inv"}},
        {"$project": {"n": {"$size": "$inv"}, "ids": "$inv._id"}}, {"$match": {"n": 1}}]),
    )?;
    assert_eq!(out, vec![doc! {"_id": 7, "n": 1, "ids": [2]}]);
    let out = run(
        &env,
        sales(),
        bson!([{"$bucket": {"groupBy": "$price", "boundaries": [0, 10, 100], "default": "other",
        "output": {"n": {"$sum": 1}, "items": {"$push": "$item"}}}}]),
    )?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": 0, "n": 1, "items": ["xyz"]},
            doc! {"_id": 10, "n": 3, "items": ["abc", "jkl", "abc"]}
        ]
    );
    let out = run(&env, sales(), bson!([{"$bucketAuto": {"groupBy": "$_id", "buckets": 2}}]))?;
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"min": 1, "max": 3}, "count": 2},
            doc! {"_id": {"min": 3, "max": 4}, "count": 2}
        ]
    );
    let out = run(
        &env,
        sales(),
        bson!([{"$facet": {"n": [{"$count": "n"}], "first": [{"$limit": 1}, {"$project": {"item": 1}}]}}]),
    )?;
    assert_eq!(out, vec![doc! {"n": [{"n": 4}], "first": [{"_id": 1, "item": "abc"}]}]);
    let out =
        run(&env, vec![], bson!([{"$documents": [{"a": 1}]}, {"$replaceWith": {"b": "$a"}}]))?;
    assert_eq!(out, vec![doc! {"b": 1}]);
    let err = |stages: Bson| run(&env, sales(), stages).err().map(|e| e.code);
    assert_eq!(err(bson!([{"$foo": {}}])), Some(40324));
    assert_eq!(err(bson!([{"$out": "x"}, {"$limit": 1}])), Some(40601));
    assert_eq!(err(bson!([{"$limit": 0}])), Some(15958));
    assert_eq!(err(bson!([{"$project": {"a": 1, "b": 0}}])), Some(31254));
    assert_eq!(err(bson!([{"$group": {"total": {"$sum": 1}}}])), Some(15955));
    Ok(())
}

#[test]
fn pushdown_takes_the_leading_match_sort_skip_limit() -> Result<()> {
    let env = Mem::default();
    let stages = bson!([{"$match": {"a": 1}}, {"$sort": {"b": -1}}, {"$skip": 2}, {"$limit": 5}, {"$group": {"_id": null}}]);
    let Bson::Array(stages) = stages else { return Ok(()) };
    let p = Pipeline::parse(&stages, Some(&env))?;
    let push = p.pushdown();
    assert_eq!((push.filter, push.skip, push.limit, push.stages), (doc! {"a": 1}, 2, Some(5), 4));
    assert_eq!(push.sort, vec![(vec!["b".to_string()], false)]);
    assert_eq!(push.reads, Some(Vec::new()), "a $group by null reads no field");
    let reads = |stages: Bson| -> Result<Option<Vec<String>>> {
        let Bson::Array(stages) = stages else { return Ok(None) };
        Ok(Pipeline::parse(&stages, Some(&env))?.pushdown().reads)
    };
    let names = |v: &[&str]| Some(v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    let by_device = bson!([{"$match": {"type": "reading"}},
        {"$group": {"_id": "$deviceID", "avg": {"$avg": "$reading.value"}, "top": {"$top": {"sortBy": {"ts": -1}, "output": "$ts"}}}}]);
    assert_eq!(reads(by_device)?, names(&["deviceID", "reading", "ts"]));
    assert_eq!(reads(bson!([{"$sortByCount": "$tag"}]))?, names(&["tag"]));
    assert_eq!(reads(bson!([{"$group": {"_id": "$a", "all": {"$push": "$$ROOT"}}}]))?, None);
    assert_eq!(reads(bson!([{"$project": {"a": 1}}, {"$group": {"_id": "$a"}}]))?, None);
    Ok(())
}

#[test]
fn blocking_stages_past_the_memory_limit_fail_without_allow_disk_use() -> Result<()> {
    let docs: Vec<Document> =
        (0..1000).map(|i| doc! {"_id": i, "device": i % 2, "pad": "x".repeat(100)}).collect();
    let tight = Mem(HashMap::new(), Some(10_000), false, Spilled::default());
    let err = |stages: Bson| run(&tight, docs.clone(), stages).err().map(|e| (e.code, e.code_name));
    let over = Some((292, "QueryExceededMemoryLimitNoDiskUseAllowed"));
    assert_eq!(err(bson!([{"$sort": {"pad": 1}}])), over);
    assert_eq!(err(bson!([{"$group": {"_id": "$device", "all": {"$push": "$$ROOT"}}}])), over);
    // A small group state stays within the limit however many documents feed it.
    let avg = run(
        &tight,
        docs.clone(),
        bson!([{"$group": {"_id": "$device", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]),
    )?;
    assert_eq!(avg, vec![doc! {"_id": 0, "n": 500}, doc! {"_id": 1, "n": 500}]);
    // allowDiskUse: the same pipeline runs.
    let free = Mem(HashMap::new(), Some(10_000), true, Spilled::default());
    assert_eq!(
        run(&free, docs, bson!([{"$sort": {"_id": -1}}, {"$limit": 1}, {"$project": {"_id": 1}}]))?,
        vec![doc! {"_id": 999}]
    );
    Ok(())
}

/// Two answers of one pipeline and what the first spilled: (puts, entries, largest put).
type Compared = (Vec<Document>, Vec<Document>, (usize, usize, usize));

/// Runs `stages` over `docs` with a 10 kB budget and `allowDiskUse`, and with no budget
/// problem at all; returns both answers and what the first spilled.
fn spilled_and_in_memory(docs: &[Document], stages: Bson) -> Result<Compared> {
    let tight = Mem(HashMap::new(), Some(10_000), true, Spilled::default());
    let roomy = Mem::default();
    let spilled = run(&tight, docs.to_vec(), stages.clone())?;
    let in_memory = run(&roomy, docs.to_vec(), stages)?;
    assert_eq!(roomy.3.get().0, 0, "the roomy run must not spill");
    Ok((spilled, in_memory, tight.3.get()))
}

fn readings() -> Vec<Document> {
    (0..3000)
        .map(|i| {
            doc! {"_id": i, "device": format!("d{}", (i * 7) % 400), "t": (i * 37) % 1000,
            "v": f64::from(i % 13) / 2.0, "pad": "x".repeat(40)}
        })
        .collect()
}

#[test]
fn a_sort_past_the_budget_spills_and_answers_as_in_memory() -> Result<()> {
    // ~300 kB of documents, a 10 kB budget: about thirty runs merged; ties on `t` keep the
    // input order (a stable sort), as in memory.
    let (spilled, in_memory, (puts, entries, largest)) =
        spilled_and_in_memory(&readings(), bson!([{"$sort": {"t": -1, "device": 1}}]))?;
    assert_eq!(spilled.len(), 3000);
    assert_eq!(spilled, in_memory);
    assert_eq!(entries, 3000);
    assert!(puts > 20, "{puts} runs");
    assert!(largest < 2 * 10_000, "a run holds about the budget, not {largest} bytes");
    Ok(())
}

#[test]
fn a_group_past_the_budget_spills_and_answers_as_in_memory() -> Result<()> {
    // 400 groups each pushing its documents: far past 10 kB of group state.
    let stages = bson!([
        {"$group": {"_id": "$device", "n": {"$sum": 1}, "avg": {"$avg": "$v"},
            "first": {"$first": "$t"}, "last": {"$last": "$t"}, "ts": {"$push": "$t"},
            "max": {"$max": "$v"}}},
        {"$sort": {"_id": 1}}
    ]);
    let (spilled, in_memory, (puts, entries, _)) = spilled_and_in_memory(&readings(), stages)?;
    assert_eq!(spilled.len(), 400);
    assert_eq!(spilled, in_memory);
    assert_eq!(spilled.first(), in_memory.first());
    assert!(puts > 1 && entries >= 3000, "{puts} puts of {entries} entries");
    // `$sortByCount` and `$bucket` go the same way.
    let by_count = bson!([{"$sortByCount": "$device"}, {"$sort": {"count": -1, "_id": 1}}]);
    let (spilled, in_memory, _) = spilled_and_in_memory(&readings(), by_count)?;
    assert_eq!((spilled.len(), &spilled), (400, &in_memory));
    let bucket = bson!([{"$bucket": {"groupBy": "$t", "boundaries": [0, 500, 1000],
        "output": {"ids": {"$push": "$_id"}}}}]);
    let (spilled, in_memory, _) = spilled_and_in_memory(&readings(), bucket)?;
    assert_eq!((spilled.len(), &spilled), (2, &in_memory));
    Ok(())
}

#[test]
fn a_facet_past_the_budget_spills_its_input_and_answers_as_in_memory() -> Result<()> {
    // 3000 documents of ~80 bytes are far past 10 kB: each facet reads them back in order.
    let stages = bson!([{"$facet": {
        "count": [{"$count": "n"}],
        "first": [{"$limit": 3}, {"$project": {"_id": 1}}],
        "by_t": [{"$match": {"t": {"$in": [0, 37]}}}, {"$project": {"_id": 1, "t": 1}}],
        "top": [{"$sortByCount": "$device"}, {"$sort": {"count": -1, "_id": 1}}, {"$limit": 2}]
    }}]);
    let (spilled, in_memory, (puts, entries, _)) = spilled_and_in_memory(&readings(), stages)?;
    assert_eq!(spilled, in_memory);
    assert!(puts > 1 && entries >= 3000, "{puts} puts of {entries} entries");
    let facet = spilled.first().cloned().unwrap_or_default();
    assert_eq!(facet.get_array("count").ok(), Some(&vec![Bson::Document(doc! {"n": 3000})]));
    let first: Vec<Bson> = (0..3).map(|i| Bson::Document(doc! {"_id": i})).collect();
    assert_eq!(facet.get_array("first").ok(), Some(&first));
    // Without allowDiskUse the same input is refused past the budget.
    let tight = Mem(HashMap::new(), Some(10_000), false, Spilled::default());
    let stages = bson!([{"$facet": {"all": [{"$project": {"_id": 1}}]}}]);
    let err = run(&tight, readings(), stages).err().map(|e| e.code);
    assert_eq!(err, Some(292));
    Ok(())
}

#[test]
fn equal_group_keys_of_different_numeric_types_meet_in_one_spilled_group() -> Result<()> {
    let docs: Vec<Document> = (0..2000)
        .map(|i| {
            let k = match i % 3 {
                0 => Bson::Int32(i % 5),
                1 => Bson::Int64(i64::from(i % 5)),
                _ => Bson::Double(f64::from(i % 5)),
            };
            doc! {"k": k, "pad": "y".repeat(30), "i": i}
        })
        .collect();
    let stages = bson!([{"$group": {"_id": "$k", "n": {"$sum": 1}, "all": {"$push": "$i"}}}, {"$sort": {"_id": 1}}]);
    let (spilled, in_memory, (puts, _, _)) = spilled_and_in_memory(&docs, stages)?;
    assert!(puts > 0);
    assert_eq!(spilled.len(), 5);
    assert_eq!(spilled, in_memory);
    Ok(())
}

#[test]
fn streaming_stages_read_only_what_the_consumer_pulls() -> Result<()> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let pulled = Arc::new(AtomicUsize::new(0));
    let counter = pulled.clone();
    let source: Source = Arc::new(move || {
        let counter = counter.clone();
        let docs = (0..1_000_000).map(move |i| {
            counter.fetch_add(1, Ordering::Relaxed);
            Ok(doc! {"_id": i, "tags": ["a", "b"]})
        });
        Ok(Box::new(docs) as Docs)
    });
    let stages = bson!([
        {"$match": {"$expr": {"$gte": ["$_id", 10]}}}, {"$unwind": "$tags"},
        {"$project": {"tags": 1}}, {"$skip": 1}, {"$limit": 5}
    ]);
    let Bson::Array(stages) = stages else { return Ok(()) };
    let env: EnvRef = Arc::new(Mem::default());
    let p = Pipeline::parse(&stages, Some(env.as_ref()))?;
    let mut docs = p.stream(0, source, &env, &Vars::new(&doc! {}, DateTime::from_millis(0)))?;
    assert_eq!(docs.next().transpose()?, Some(doc! {"_id": 10, "tags": "b"}));
    assert_eq!(pulled.load(Ordering::Relaxed), 11, "the first answer reads 11 documents");
    assert_eq!(docs.count(), 4);
    assert_eq!(pulled.load(Ordering::Relaxed), 13, "a $limit stops reading");
    Ok(())
}

#[test]
fn a_bucket_auto_past_the_budget_sorts_through_the_spill() -> Result<()> {
    let stages = bson!([{"$bucketAuto": {"groupBy": "$t", "buckets": 7,
        "output": {"n": {"$sum": 1}, "avg": {"$avg": "$v"}, "first": {"$first": "$_id"}}}}]);
    let (spilled, in_memory, (puts, entries, _)) = spilled_and_in_memory(&readings(), stages)?;
    assert_eq!(spilled, in_memory);
    assert_eq!(spilled.len(), 7);
    assert_eq!(spilled.iter().filter_map(|b| b.get_i32("n").ok()).sum::<i32>(), 3000);
    assert_eq!(spilled.first().and_then(|b| b.get("_id")), Some(&bson!({"min": 0, "max": 143})));
    assert!(puts > 20 && entries == 3000, "{puts} runs of {entries} entries");
    let tight = Mem(HashMap::new(), Some(10_000), false, Spilled::default());
    let err = run(&tight, readings(), bson!([{"$bucketAuto": {"groupBy": "$t", "buckets": 2}}]));
    assert_eq!(err.err().map(|e| e.code), Some(292));
    Ok(())
}

/// MongoDB's manual, `$bucketAuto`, *Comparing Different Granularities*: `things` with
/// `_id` 0 to 99, `{groupBy: "$_id", buckets: 5, granularity: <g>}` (values, types, order).
#[test]
fn bucket_auto_granularities_as_the_manual_shows_them() -> Result<()> {
    let things: Vec<Document> = (0..100).map(|i| doc! {"_id": i}).collect();
    let buckets = |granularity: Option<&str>| -> Result<Vec<(Bson, Bson, i32)>> {
        let mut spec = doc! {"groupBy": "$_id", "buckets": 5};
        if let Some(g) = granularity {
            spec.insert("granularity", g);
        }
        let out = run(&Mem::default(), things.clone(), bson!([{"$bucketAuto": spec}]))?;
        let bounds = |b: &Document| -> Option<(Bson, Bson, i32)> {
            let id = b.get_document("_id").ok()?;
            Some((id.get("min")?.clone(), id.get("max")?.clone(), b.get_i32("count").ok()?))
        };
        Ok(out.iter().filter_map(bounds).collect())
    };
    let (i, f) = (Bson::Int32, Bson::Double);
    let none: Vec<(Bson, Bson, i32)> =
        [(0, 20), (20, 40), (40, 60), (60, 80), (80, 99)].map(|(a, b)| (i(a), i(b), 20)).into();
    assert_eq!(buckets(None)?, none);
    let series = |rows: &[(f64, f64, i32)]| -> Vec<(Bson, Bson, i32)> {
        // The first minimum is the smallest value itself (0 rounds to 0): an int.
        let min = |k: usize, m: f64| if k == 0 { i(0) } else { f(m) };
        rows.iter().enumerate().map(|(k, (a, b, n))| (min(k, *a), f(*b), *n)).collect()
    };
    let r20 = [(0., 20., 20), (20., 40., 20), (40., 63., 23), (63., 90., 27), (90., 100., 10)];
    assert_eq!(buckets(Some("R20"))?, series(&r20));
    let e24 = [(0., 20., 20), (20., 43., 23), (43., 68., 25), (68., 91., 23), (91., 100., 9)];
    assert_eq!(buckets(Some("E24"))?, series(&e24));
    let one_two_five = [(0., 20., 20), (20., 50., 30), (50., 100., 50)];
    assert_eq!(buckets(Some("1-2-5"))?, series(&one_two_five));
    // Powers of two of an int are ints (`$pow` of ints).
    let powers = vec![(i(0), i(32), 32), (i(32), i(64), 32), (i(64), i(128), 36)];
    assert_eq!(buckets(Some("POWERSOF2"))?, powers);
    Ok(())
}

/// MongoDB's manual, `$bucketAuto` *Example* (`artwork` by Decimal128 `price`, and years
/// with a missing one as `null` inside `$facet`), and the size rule: `round(n / buckets)`
/// documents a bucket, the last one taking the rest (101 values in 5 buckets: 20 each, then
/// 21, as MongoDB's forum answer shows).
#[test]
fn bucket_auto_sizes_and_decimal_boundaries_as_mongodb_cuts_them() -> Result<()> {
    let dec = |s: &str| s.parse::<bson::Decimal128>().map(Bson::Decimal128).unwrap_or(Bson::Null);
    let prices = ["199.99", "280.00", "76.04", "167.30", "483.00", "385.00", "159.00", "118.42"];
    let years =
        [Some(1926), Some(1902), Some(1925), None, Some(1931), Some(1913), None, Some(1918)];
    let artwork: Vec<Document> = prices
        .iter()
        .zip(years)
        .enumerate()
        .map(|(k, (p, y))| {
            let mut d = doc! {"_id": k as i32 + 1, "price": dec(p)};
            if let Some(y) = y {
                d.insert("year", y);
            }
            d
        })
        .collect();
    let out = run(
        &Mem::default(),
        artwork,
        bson!([{"$facet": {
            "price": [{"$bucketAuto": {"groupBy": "$price", "buckets": 4}}],
            "year": [{"$bucketAuto": {"groupBy": "$year", "buckets": 3,
                "output": {"count": {"$sum": 1}, "years": {"$push": "$year"}}}}],
        }}]),
    )?;
    let price: Vec<Bson> =
        [("76.04", "159.00"), ("159.00", "199.99"), ("199.99", "385.00"), ("385.00", "483.00")]
            .iter()
            .map(|(a, b)| bson!({"_id": {"min": dec(a), "max": dec(b)}, "count": 2}))
            .collect();
    assert_eq!(out[0].get_array("price").ok(), Some(&price));
    let year = bson!([
        {"_id": {"min": null, "max": 1913}, "count": 3, "years": [1902]},
        {"_id": {"min": 1913, "max": 1926}, "count": 3, "years": [1913, 1918, 1925]},
        {"_id": {"min": 1926, "max": 1931}, "count": 2, "years": [1926, 1931]},
    ]);
    assert_eq!(out[0].get("year"), Some(&year));
    let things: Vec<Document> = (1..=101).map(|i| doc! {"_id": i}).collect();
    let out =
        run(&Mem::default(), things, bson!([{"$bucketAuto": {"groupBy": "$_id", "buckets": 5}}]))?;
    let counts: Vec<i32> = out.iter().filter_map(|b| b.get_i32("count").ok()).collect();
    assert_eq!(counts, [20, 20, 20, 20, 21]);
    assert_eq!(out[4].get("_id"), Some(&bson!({"min": 81, "max": 101})));
    let bad =
        |spec: Bson| run(&Mem::default(), vec![doc! {"_id": "a"}], bson!([{"$bucketAuto": spec}]));
    let code = |r: Result<Vec<Document>>| r.err().map(|e| e.code);
    assert_eq!(
        code(bad(bson!({"groupBy": "$_id", "buckets": 2, "granularity": "R7"}))),
        Some(40257)
    );
    assert_eq!(
        code(bad(bson!({"groupBy": "$_id", "buckets": 2, "granularity": "R5"}))),
        Some(40258)
    );
    Ok(())
}

/// MongoDB's manual, `$graphLookup`: the `employees` reporting chain, and the `airports`
/// example with `maxDepth` and `depthField` (depths are longs). MongoDB promises no order
/// inside the `as` array, so each is compared sorted.
#[test]
fn graph_lookup_as_the_manual_shows_it() -> Result<()> {
    let employees = vec![
        doc! {"_id": 1, "name": "Dev"},
        doc! {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
        doc! {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
        doc! {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
        doc! {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
        doc! {"_id": 6, "name": "Dan", "reportsTo": "Andrew"},
    ];
    let mut env = Mem::default();
    env.0.insert("employees".into(), employees.clone());
    let out = run(
        &env,
        employees,
        bson!([{"$graphLookup": {"from": "employees", "startWith": "$reportsTo",
            "connectFromField": "reportsTo", "connectToField": "name", "as": "reportingHierarchy"}}]),
    )?;
    let chain = |d: &Document| -> Vec<String> {
        let mut names: Vec<String> = d
            .get_array("reportingHierarchy")
            .map(|a| a.iter().filter_map(|e| e.as_document()?.get_str("name").ok()))
            .into_iter()
            .flatten()
            .map(str::to_string)
            .collect();
        names.sort();
        names
    };
    let chains: Vec<Vec<String>> = out.iter().map(chain).collect();
    let want: Vec<Vec<&str>> = vec![
        vec![],
        vec!["Dev"],
        vec!["Dev", "Eliot"],
        vec!["Dev", "Eliot"],
        vec!["Dev", "Eliot", "Ron"],
        vec!["Andrew", "Dev", "Eliot"],
    ];
    assert_eq!(chains, want);
    let airports = vec![
        doc! {"_id": 0, "airport": "JFK", "connects": ["BOS", "ORD"]},
        doc! {"_id": 1, "airport": "BOS", "connects": ["JFK", "PWM"]},
        doc! {"_id": 2, "airport": "ORD", "connects": ["JFK"]},
        doc! {"_id": 3, "airport": "PWM", "connects": ["BOS", "LHR"]},
        doc! {"_id": 4, "airport": "LHR", "connects": ["PWM"]},
    ];
    env.0.insert("airports".into(), airports);
    let travelers = vec![
        doc! {"_id": 1, "name": "Dev", "nearestAirport": "JFK"},
        doc! {"_id": 2, "name": "Eliot", "nearestAirport": "JFK"},
        doc! {"_id": 3, "name": "Jeff", "nearestAirport": "BOS"},
    ];
    let out = run(
        &env,
        travelers,
        bson!([{"$graphLookup": {"from": "airports", "startWith": "$nearestAirport",
            "connectFromField": "connects", "connectToField": "airport", "maxDepth": 2,
            "depthField": "numConnections", "as": "destinations"}}]),
    )?;
    let reach = |d: &Document| -> Vec<(String, Bson)> {
        let mut r: Vec<(String, Bson)> = d
            .get_array("destinations")
            .map(|a| {
                a.iter()
                    .filter_map(Bson::as_document)
                    .filter_map(|x| {
                        Some((
                            x.get_str("airport").ok()?.to_string(),
                            x.get("numConnections")?.clone(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        r.sort_by(|a, b| a.0.cmp(&b.0));
        r
    };
    let l = Bson::Int64;
    let from_jfk = vec![
        ("BOS".into(), l(1)),
        ("JFK".into(), l(0)),
        ("ORD".into(), l(1)),
        ("PWM".into(), l(2)),
    ];
    let from_bos = vec![
        ("BOS".into(), l(0)),
        ("JFK".into(), l(1)),
        ("LHR".into(), l(2)),
        ("ORD".into(), l(2)),
        ("PWM".into(), l(1)),
    ];
    assert_eq!(
        out.iter().map(reach).collect::<Vec<_>>(),
        vec![from_jfk.clone(), from_jfk, from_bos]
    );
    Ok(())
}

/// MongoDB's manual, `$replaceRoot`/`$replaceWith` (`produce`: the embedded `in_stock`
/// document becomes the document; a `$mergeObjects` default for a missing one) and
/// `$sample` (`size` distinct documents of the input; all of them when it has fewer).
#[test]
fn replace_root_and_sample_as_the_manual_shows_them() -> Result<()> {
    let produce = vec![
        doc! {"_id": 1, "fruit": ["apples", "oranges"], "in_stock": {"oranges": 20, "apples": 60},
        "on_order": {"oranges": 35, "apples": 75}},
        doc! {"_id": 2, "vegetables": ["beets", "yams"], "in_stock": {"beets": 130, "yams": 200},
        "on_order": {"beets": 90, "yams": 145}},
    ];
    let out = run(&Mem::default(), produce, bson!([{"$replaceRoot": {"newRoot": "$in_stock"}}]))?;
    assert_eq!(out, vec![doc! {"oranges": 20, "apples": 60}, doc! {"beets": 130, "yams": 200}]);
    let people = vec![
        doc! {"_id": 1, "name": "Arlene", "age": 34, "pets": {"dogs": 2, "cats": 1}},
        doc! {"_id": 2, "name": "Sam", "age": 41, "pets": {"cats": 1, "fish": 3}},
        doc! {"_id": 3, "name": "Maria", "age": 25},
    ];
    let stages = bson!([{"$replaceWith": {"$mergeObjects": [
        {"dogs": 0, "cats": 0, "birds": 0, "fish": 0}, "$pets"]}}]);
    let out = run(&Mem::default(), people.clone(), stages)?;
    assert_eq!(
        out,
        vec![
            doc! {"dogs": 2, "cats": 1, "birds": 0, "fish": 0},
            doc! {"dogs": 0, "cats": 1, "birds": 0, "fish": 3},
            doc! {"dogs": 0, "cats": 0, "birds": 0, "fish": 0},
        ]
    );
    let bad = run(&Mem::default(), people.clone(), bson!([{"$replaceRoot": {"newRoot": "$pets"}}]));
    assert_eq!(bad.err().map(|e| e.code), Some(40228));
    let users: Vec<Document> = (1..=7).map(|i| doc! {"_id": i, "name": format!("u{i}")}).collect();
    let out = run(&Mem::default(), users.clone(), bson!([{"$sample": {"size": 3}}]))?;
    let mut ids: Vec<i32> = out.iter().filter_map(|d| d.get_i32("_id").ok()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 3, "{out:?}");
    assert!(out.iter().all(|d| users.contains(d)), "{out:?}");
    let out = run(&Mem::default(), users.clone(), bson!([{"$sample": {"size": 10}}]))?;
    assert_eq!(out.len(), 7);
    Ok(())
}

/// MongoDB's manual, the `gamescores` examples of `$bottomN`, `$minN`, `$firstN`, `$lastN`
/// and `$stdDevSamp` as `$group` accumulators (values, types and order).
#[test]
fn n_accumulators_on_the_manuals_gamescores() -> Result<()> {
    let scores = [("A", "G1", 31), ("B", "G1", 33), ("C", "G1", 99), ("D", "G1", 1)]
        .into_iter()
        .chain([("A", "G2", 10), ("B", "G2", 14), ("C", "G2", 66), ("D", "G2", 80)])
        .map(|(p, g, s)| doc! {"playerId": format!("Player{p}"), "gameId": g, "score": s})
        .collect();
    let out = run(
        &Mem::default(),
        scores,
        bson!([
            {"$group": {"_id": "$gameId",
                "bottom": {"$bottomN": {"output": ["$playerId", "$score"], "sortBy": {"score": -1}, "n": 3}},
                "min": {"$minN": {"input": ["$score", "$playerId"], "n": 3}},
                "first": {"$firstN": {"input": "$playerId", "n": 2}},
                "last": {"$lastN": {"input": "$score", "n": 2}},
                "sd": {"$stdDevSamp": "$score"}}},
            {"$sort": {"_id": 1}},
        ]),
    )?;
    let g1 = out.first().cloned().unwrap_or_default();
    assert_eq!(g1.get("bottom"), Some(&bson!([["PlayerB", 33], ["PlayerA", 31], ["PlayerD", 1]])));
    assert_eq!(g1.get("min"), Some(&bson!([[1, "PlayerD"], [31, "PlayerA"], [33, "PlayerB"]])));
    assert_eq!(g1.get("first"), Some(&bson!(["PlayerA", "PlayerB"])));
    assert_eq!(g1.get("last"), Some(&bson!([99, 1])));
    let sd = |d: &Document| d.get_f64("sd").unwrap_or(f64::NAN);
    assert!((sd(&g1) - 41.34408462323641).abs() < 1e-9, "{g1}");
    assert!(out.get(1).is_some_and(|g2| (sd(g2) - 35.7164761233057).abs() < 1e-9), "{out:?}");
    Ok(())
}

/// `$median` and `$percentile` accumulators on the manual's `testScores` (MongoDB 7.0).
#[test]
fn median_and_percentile_accumulators_on_the_manuals_test_scores() -> Result<()> {
    let scores = [("2345", 62, 81), ("2356", 60, 83), ("2358", 67, 82), ("2367", 64, 72)]
        .into_iter()
        .chain([("2369", 60, 53)])
        .map(|(id, a, b)| doc! {"studentId": id, "test01": a, "test02": b})
        .chain([doc! {"studentId": "none", "test01": "absent"}])
        .collect();
    let out = run(
        &Mem::default(),
        scores,
        bson!([{"$group": {"_id": null,
            "median": {"$median": {"input": "$test01", "method": "approximate"}},
            "pct": {"$percentile": {"input": "$test01", "p": [0.5, 0.75, 0.9, 0.95], "method": "approximate"}},
            "none": {"$percentile": {"input": "$missing", "p": [0.5, 1], "method": "approximate"}}}}]),
    )?;
    let g = out.first().cloned().unwrap_or_default();
    assert_eq!(g.get("median"), Some(&Bson::Double(62.0)), "{g}");
    assert_eq!(g.get("pct"), Some(&bson!([62.0, 64.0, 67.0, 67.0])), "{g}");
    assert_eq!(g.get("none"), Some(&bson!([null, null])), "{g}");
    let bad = |spec: Bson| {
        let stage = bson!([{"$group": {"_id": null, "x": spec}}]);
        run(&Mem::default(), vec![doc! {"v": 1}], stage).err().map(|e| e.code)
    };
    assert_eq!(bad(bson!({"$median": 5})), Some(7436100));
    assert_eq!(bad(bson!({"$percentile": 5})), Some(7429703));
    assert_eq!(bad(bson!({"$median": [1, 2]})), Some(40237));
    assert_eq!(bad(bson!({"$median": {"input": "$v"}})), Some(40414));
    assert_eq!(bad(bson!({"$percentile": {"input": "$v", "method": "approximate"}})), Some(40414));
    assert_eq!(
        bad(bson!({"$median": {"input": "$v", "p": [0.5], "method": "approximate"}})),
        Some(40415)
    );
    let p = |p: Bson| bad(bson!({"$percentile": {"input": "$v", "p": p, "method": "approximate"}}));
    assert_eq!(
        (p(bson!(0.5)), p(bson!([])), p(bson!(["a"])), p(bson!([1.5]))),
        (Some(7750301), Some(7750301), Some(7750302), Some(7750303))
    );
    assert_eq!(p(bson!(["$v"])), Some(7750300));
    assert_eq!(bad(bson!({"$median": {"input": "$v", "method": "exact"}})), Some(2));
    Ok(())
}

/// A/B micro-benchmark of `$group`'s per-document cost (issue 14, point 3), not a check:
/// 200k IoT readings of 1 kB (the bench's `agg` workload: 4000 devices) handed over as the
/// engine hands them to `[{$match: {type: "reading"}}, {$group: {_id: "$deviceID", avg:
/// {$avg: "$reading"}}}]` (the stored JSON text with `_id` added, matched on its
/// stored form, then converted to BSON as `bunko-mongo`'s `AggEnv::stream` converts it),
/// then grouped per device. A parses each whole body, as the engine did before; B parses
/// only the members the filter and the `$group` read (`bunko_doc::fields`), as it does
/// now. Run: `cargo test --release -p bunko-query --lib group_speed -- --ignored
/// --nocapture`.
#[test]
#[ignore]
fn group_speed() -> Result<()> {
    let (n, devices) = (200_000usize, 4000usize);
    let text = |i: usize| crate::bench_docs::iot_reading(i, |ts| ts.to_string());
    let texts: Arc<Vec<String>> = Arc::new((0..n).map(text).collect());
    let stages = bson!([{"$match": {"type": "reading"}},
        {"$group": {"_id": "$deviceID", "avg": {"$avg": "$reading"}}}]);
    let Bson::Array(stages) = stages else { return Ok(()) };
    let env: EnvRef = Arc::new(Mem::default());
    let pipeline = Pipeline::parse(&stages, Some(env.as_ref()))?;
    let push = pipeline.pushdown();
    let selector = crate::Selector::parse(&serde_json::to_value(&push.filter).unwrap_or_default())
        .map_err(|e| ExprError::new(2, "BadValue", e.to_string()))?;
    let mut parse = selector.reads().unwrap_or_default();
    parse.extend(push.reads.clone().unwrap_or_default());
    let parse: Arc<Vec<String>> = Arc::new(parse);
    for run in 0..6 {
        let (texts, reads, sel, parse) =
            (texts.clone(), push.reads.clone(), selector.clone(), parse.clone());
        let whole = run % 2 == 0;
        let source: Source = Arc::new(move || {
            let (texts, reads, sel, parse) =
                (texts.clone(), reads.clone(), sel.clone(), parse.clone());
            Ok(Box::new((0..texts.len()).filter_map(move |i| {
                let body = texts[i].as_bytes();
                let fields = match whole {
                    true => match serde_json::from_slice(body) {
                        Ok(serde_json::Value::Object(fields)) => Some(fields),
                        _ => None,
                    },
                    false => bunko_doc::fields::parse_fields(body, &parse),
                };
                let mut doc = serde_json::Map::new();
                doc.insert("_id".to_string(), serde_json::Value::String(format!("r{i}")));
                doc.extend(fields.unwrap_or_default());
                let doc = serde_json::Value::Object(doc);
                if !sel.matches(&doc, crate::Dialect::Mongo) {
                    return None;
                }
                let serde_json::Value::Object(mut fields) = doc else { return None };
                if let Some(keep) = &reads {
                    fields.retain(|name, _| keep.contains(name));
                }
                Some(Ok(bunko_doc::ejson::from_json(&fields)))
            })) as Docs)
        });
        let started = std::time::Instant::now();
        let vars = Vars::new(&Document::new(), DateTime::now());
        let out = super::stream::collect(pipeline.stream(push.stages, source, &env, &vars)?)?;
        assert_eq!(out.len(), devices);
        let variant = if whole { "A whole body" } else { "B fields read" };
        println!("group_speed run {run} {variant}: {n} docs: {:?}", started.elapsed());
    }
    Ok(())
}

/// `{$meta: "sortKey"}`: the last `$sort`'s key where no stage since changed its fields,
/// missing with none (or after `$group`), refused where a stage may have changed it.
#[test]
fn sort_key_meta_follows_the_last_sort() {
    let env = Mem::default();
    let input = vec![doc! {"_id": 1, "a": [3, 0]}, doc! {"_id": 2, "a": 1, "b": 7}];
    let key = bson!({"$meta": "sortKey"});
    let sorted = run(
        &env,
        input.clone(),
        bson!([{"$sort": {"a": -1, "b": 1}}, {"$set": {"c": 1}}, {"$project": {"k": key.clone()}}]),
    );
    assert_eq!(
        sorted.ok(),
        Some(vec![doc! {"_id": 1, "k": [3, Bson::Null]}, doc! {"_id": 2, "k": [1, 7]}])
    );
    let none = run(&env, input.clone(), bson!([{"$project": {"k": key.clone()}}]));
    assert_eq!(none.ok(), Some(vec![doc! {"_id": 1}, doc! {"_id": 2}]));
    let grouped = run(
        &env,
        input.clone(),
        bson!([{"$sort": {"a": 1}}, {"$group": {"_id": "$b", "k": {"$push": key.clone()}}}, {"$set": {"m": key.clone()}}, {"$sort": {"_id": 1}}]),
    );
    let want = vec![doc! {"_id": Bson::Null, "k": [[0]]}, doc! {"_id": 7, "k": [[1]]}];
    assert_eq!(grouped.ok(), Some(want));
    for changed in [
        bson!([{"$sort": {"a": 1}}, {"$set": {"a": 0}}, {"$project": {"k": key.clone()}}]),
        bson!([{"$sort": {"a": 1}}, {"$unwind": "$a"}, {"$project": {"k": key.clone()}}]),
        bson!([{"$sort": {"a": 1}}, {"$project": {"a": 1}}, {"$addFields": {"k": key.clone()}}]),
        bson!([{"$sort": {"a": 1}}, {"$facet": {"x": [{"$project": {"k": key.clone()}}]}}]),
    ] {
        let code = run(&env, input.clone(), changed).err().map(|e| e.code);
        assert_eq!(code, Some(238));
    }
}

/// `{$meta: "recordId"}` and `{$meta: "indexKey"}`: computed from the collection's
/// documents while only filtered, sorted, skipped or limited (the index key through the
/// caller's `IndexKeys`), missing after `$group`, refused after a stage that changes them.
#[test]
fn record_meta_follows_the_collection_read() -> Result<()> {
    let env = Mem::default();
    let input = vec![doc! {"_id": 1, "a": 5}, doc! {"_id": 2, "a": 3}];
    let (rid, ik) = (bson!({"$meta": "recordId"}), bson!({"$meta": "indexKey"}));
    let stages = bson!([{"$sort": {"a": 1}}, {"$limit": 1}, {"$project": {"r": rid.clone(), "k": ik.clone()}}]);
    let Bson::Array(stages) = stages else { return Err(ExprError::bad_value("stages")) };
    let p = Pipeline::parse(&stages, Some(&env))?;
    let envr: EnvRef = Arc::new(env.clone());
    let keys: crate::expr::IndexKeys = Arc::new(|d: &Document| Some(doc! {"a": d.get("a")?}));
    let vars = Vars::new(&doc! {}, DateTime::from_millis(0))
        .with_record_meta(crate::expr::RecordMeta::Unknown, Some(keys));
    let rid2 = bunko_doc::bson_hash::hash64(&Bson::Int32(2));
    assert_eq!(
        p.run(input.clone(), &envr, &vars)?,
        vec![doc! {"_id": 2, "r": rid2, "k": {"a": 3}}]
    );
    // Without index keys (a collection scan) the key is left out.
    let plain = run(
        &env,
        input.clone(),
        bson!([{"$match": {"_id": 1}}, {"$addFields": {"k": ik.clone()}}]),
    )?;
    assert_eq!(plain, vec![doc! {"_id": 1, "a": 5}]);
    let grouped =
        run(&env, input.clone(), bson!([{"$group": {"_id": null}}, {"$set": {"r": rid.clone()}}]))?;
    assert_eq!(grouped, vec![doc! {"_id": Bson::Null}]);
    for changed in [
        bson!([{"$set": {"b": 1}}, {"$project": {"r": rid.clone()}}]),
        bson!([{"$unwind": "$a"}, {"$project": {"k": ik.clone()}}]),
        bson!([{"$facet": {"x": [{"$project": {"r": rid.clone()}}]}}]),
    ] {
        let code = run(&env, input.clone(), changed).err().map(|e| e.code);
        assert_eq!(code, Some(238));
    }
    Ok(())
}
