//! Rule 3, partition keys (partitioned databases): too few partitions, one document per
//! partition, one partition holding most documents, partitions near `max_partition_size`,
//! one partition taking most writes, and keys that look like dates or a small set of
//! statuses — the cases of the Cloudant guide's table of good and bad partition keys. Read
//! from the per-partition counters (`PartStats`: documents, bytes and writes) every write
//! keeps, not from the sample.

use serde_json::{Value, json};

use super::{Finding, Severity, Thresholds, guides};
use crate::Result;
use crate::database::Database;
use crate::records::Stats;

pub const RULES: [&str; 6] = [
    "partition-too-few",
    "partition-one-document",
    "partition-hot-spot",
    "partition-write-hot-spot",
    "partition-size",
    "partition-key-shape",
];

/// Partitions whose counters are read at most.
const MAX_PARTITIONS: usize = 100_000;
/// Example partitions shown.
const EXAMPLES: usize = 5;

struct Parts {
    list: Vec<(String, Stats)>,
    truncated: bool,
    docs: u64,
    writes: u64,
}

pub fn check(db: &Database, t: &Thresholds) -> Result<Vec<Finding>> {
    let (mut list, truncated) = db.partitions(MAX_PARTITIONS)?;
    list.retain(|(_, s)| s.doc_count > 0);
    list.sort_by_key(|(_, s)| std::cmp::Reverse(s.doc_count));
    let docs = list.iter().map(|(_, s)| s.doc_count).sum();
    let writes = list.iter().map(|(_, s)| s.writes).sum();
    let parts = Parts { list, truncated, docs, writes };
    if parts.list.is_empty() {
        return Ok(Vec::new());
    }
    let cap = db.config.get().max_partition_size;
    let found = [
        too_few(&parts, t),
        one_document(&parts),
        hot_spot(&parts, t),
        write_hot_spot(&parts, t),
        near_cap(&parts, t, cap),
        key_shape(&parts),
    ];
    Ok(found.into_iter().flatten().collect())
}

fn finding(
    rule: &'static str,
    severity: Severity,
    summary: String,
    evidence: Value,
    suggestion: &str,
) -> Finding {
    Finding {
        rule,
        severity,
        summary,
        guide: guides::PARTITION_KEY,
        evidence,
        suggestion: suggestion.to_string(),
    }
}

fn base(parts: &Parts) -> Value {
    let examples: Vec<Value> = parts
        .list
        .iter()
        .take(EXAMPLES)
        .map(|(p, s)| json!({"partition": p, "doc_count": s.doc_count, "bytes": s.external}))
        .collect();
    json!({"partitions": parts.list.len(), "documents": parts.docs,
           "partitions_truncated": parts.truncated, "largest_partitions": examples})
}

fn too_few(parts: &Parts, t: &Thresholds) -> Option<Finding> {
    (parts.docs >= t.few_partitions_docs && parts.list.len() < t.min_partitions).then(|| {
        finding(
            "partition-too-few",
            Severity::Warning,
            format!("{} documents in only {} partitions", parts.docs, parts.list.len()),
            base(parts),
            "Choose a partition key with many values (a user, device or author id), so that the \
         data spreads over many small partitions; if no field has many values, use a \
         database without partitions.",
        )
    })
}

fn one_document(parts: &Parts) -> Option<Finding> {
    let singles = parts.list.iter().filter(|(_, s)| s.doc_count == 1).count();
    (parts.list.len() >= 10 && singles * 10 >= parts.list.len() * 9).then(|| {
        let mut evidence = base(parts);
        evidence["partitions_with_one_document"] = json!(singles);
        finding(
            "partition-one-document",
            Severity::Info,
            format!("{singles} of {} partitions hold a single document", parts.list.len()),
            evidence,
            "A key unique to each document (like an order id) gains nothing from partition \
             queries: key by what documents are read together with (the user id of an order, \
             the device of a reading), or use a database without partitions.",
        )
    })
}

fn hot_spot(parts: &Parts, t: &Thresholds) -> Option<Finding> {
    let (name, top) = parts.list.first()?;
    let share = top.doc_count as f64 / parts.docs.max(1) as f64;
    (parts.list.len() >= 3 && parts.docs >= 100 && share > t.hot_partition_share).then(|| {
        let mut evidence = base(parts);
        evidence["largest_share"] = json!((share * 100.0).round() / 100.0);
        finding(
            "partition-hot-spot",
            Severity::Warning,
            format!("partition `{name}` holds {:.0}% of the documents", share * 100.0),
            evidence,
            "Spread the work: pick a key whose values each hold a similar share (no device \
             sending far more readings than the others), or split the busy key (for example \
             append a bucket number to it).",
        )
    })
}

/// One partition taking most writes, well beyond its share of the documents (documents
/// updated over and over: a counter, a status document, one busy device). A partition whose
/// share of writes follows its share of documents is `partition-hot-spot`'s case.
fn write_hot_spot(parts: &Parts, t: &Thresholds) -> Option<Finding> {
    let (name, top) = parts.list.iter().max_by_key(|(_, s)| s.writes)?;
    let share = top.writes as f64 / parts.writes.max(1) as f64;
    let doc_share = top.doc_count as f64 / parts.docs.max(1) as f64;
    let hot = parts.list.len() >= 3
        && parts.writes >= t.hot_partition_writes
        && share > t.hot_partition_share
        && share > 1.5 * doc_share;
    hot.then(|| {
        let per_doc =
            |s: &Stats| (s.writes as f64 / s.doc_count.max(1) as f64 * 10.0).round() / 10.0;
        let rest_writes = parts.writes - top.writes;
        let rest_docs = (parts.docs - top.doc_count).max(1);
        let mut busiest: Vec<&(String, Stats)> = parts.list.iter().collect();
        busiest.sort_by_key(|(_, s)| std::cmp::Reverse(s.writes));
        let busiest: Vec<Value> = busiest
            .iter()
            .take(EXAMPLES)
            .map(|(p, s)| json!({"partition": p, "writes": s.writes, "doc_count": s.doc_count}))
            .collect();
        finding(
            "partition-write-hot-spot",
            Severity::Warning,
            format!(
                "partition `{name}` took {:.0}% of the writes with {:.0}% of the documents",
                share * 100.0,
                doc_share * 100.0
            ),
            json!({"partition": name, "writes": top.writes, "all_writes": parts.writes,
                   "write_share": (share * 100.0).round() / 100.0,
                   "document_share": (doc_share * 100.0).round() / 100.0,
                   "writes_per_document": per_doc(top),
                   "writes_per_document_elsewhere":
                       (rest_writes as f64 / rest_docs as f64 * 10.0).round() / 10.0,
                   "busiest_partitions": busiest,
                   "counted_since": "the partition's first write"}),
            "Writes that keep landing on the same few documents of one partition serialize \
             there: keep per-event data in new documents (one reading, one order event) rather \
             than updating a shared document, and derive totals with a reduce view; if one \
             entity is simply busier than the rest, split its key (append a bucket or period).",
        )
    })
}

fn near_cap(parts: &Parts, t: &Thresholds, cap: u64) -> Option<Finding> {
    let at = (t.partition_fraction * cap as f64) as u64;
    let near: Vec<Value> = parts
        .list
        .iter()
        .filter(|(_, s)| s.external >= at)
        .take(EXAMPLES)
        .map(|(p, s)| {
            json!({"partition": p, "bytes": s.external,
            "fraction_of_limit": (s.external as f64 / cap.max(1) as f64 * 100.0).round() / 100.0})
        })
        .collect();
    let max = parts.list.iter().map(|(_, s)| s.external).max().unwrap_or(0);
    (!near.is_empty() && cap > 0).then(|| {
        finding(
            "partition-size",
            if max as f64 >= 0.9 * cap as f64 { Severity::Critical } else { Severity::Warning },
            format!(
                "{} partitions are at least {:.0}% of max_partition_size ({cap} bytes)",
                near.len(),
                t.partition_fraction * 100.0
            ),
            json!({"max_partition_size": cap, "threshold_bytes": at, "partitions": near}),
            "A partition stops accepting growing writes at max_partition_size: split the key \
         (for example add a period or a bucket to it) before it fills.",
        )
    })
}

fn key_shape(parts: &Parts) -> Option<Finding> {
    let names: Vec<&str> = parts.list.iter().map(|(p, _)| p.as_str()).collect();
    let dates = names.iter().filter(|n| looks_like_date(n)).count();
    let examples: Vec<&str> = names.iter().take(EXAMPLES).copied().collect();
    if names.len() >= 2 && dates * 5 >= names.len() * 4 {
        return Some(finding(
            "partition-key-shape",
            Severity::Warning,
            format!("{dates} of {} partition keys look like dates or times", names.len()),
            json!({"kind": "date", "partitions": names.len(), "examples": examples}),
            "A date key puts all current writes in today's partition (a hot spot): key by the \
             device, user or other entity instead, and keep the time in the document id after \
             the colon (`device-123:2018-12-11T11:13:24Z`).",
        ));
    }
    let words = names.iter().all(|n| looks_like_word(n));
    (words && names.len() <= 20 && parts.docs >= 100).then(|| {
        finding(
            "partition-key-shape",
            Severity::Warning,
            format!(
                "{} partition keys that look like a small set of statuses or categories ({})",
                names.len(),
                examples.join(", ")
            ),
            json!({"kind": "status", "partitions": names.len(), "documents": parts.docs,
               "examples": examples}),
            "A status or category has few values and makes a few huge partitions: key by the \
         entity the documents belong to (for orders, the user id) and query statuses through \
         an index instead.",
        )
    })
}

/// A key made of digits and date/time separators that starts with a plausible year.
fn looks_like_date(key: &str) -> bool {
    let digits = key.bytes().filter(u8::is_ascii_digit).count();
    let chars = key.bytes().all(|b| b.is_ascii_digit() || b"-_:.TZ+/ ".contains(&b));
    let year =
        key.get(..4).and_then(|y| y.parse::<u32>().ok()).is_some_and(|y| (1900..2200).contains(&y));
    chars && digits >= 6 && year
}

/// A bare word: letters, `_` or `-`, no digits (statuses, categories).
fn looks_like_word(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_and_word_keys() {
        for date in ["2018-12-11", "20181211", "2018-12-11T11:13:24Z", "2024-01"] {
            assert!(looks_like_date(date), "{date}");
        }
        for other in ["bridge-9876", "device-123456", "1700000000", "paid"] {
            assert!(!looks_like_date(other), "{other}");
        }
        assert!(looks_like_word("refunded") && looks_like_word("in_transit"));
        assert!(!looks_like_word("bridge-9876") && !looks_like_word("user42"));
    }

    fn parts(counts: &[(&str, u64)]) -> Parts {
        let list: Vec<(String, Stats)> = counts
            .iter()
            .map(|(p, n)| {
                let s =
                    Stats { doc_count: *n, external: n * 100, writes: *n, ..Default::default() };
                (p.to_string(), s)
            })
            .collect();
        let docs = counts.iter().map(|(_, n)| n).sum();
        Parts { list, truncated: false, docs, writes: docs }
    }

    #[test]
    fn status_keys_are_few_words_and_hot() {
        let t = Thresholds::default();
        let p = parts(&[("provisional", 700), ("paid", 200), ("refunded", 60), ("cancelled", 40)]);
        assert!(too_few(&p, &t).is_some() && hot_spot(&p, &t).is_some());
        assert_eq!(key_shape(&p).map(|f| f.evidence["kind"].clone()), Some(json!("status")));
    }

    #[test]
    fn an_even_spread_over_many_keys_passes() {
        let t = Thresholds::default();
        let names: Vec<String> = (0..40).map(|i| format!("bridge-{i:04}")).collect();
        let counts: Vec<(&str, u64)> = names.iter().map(|n| (n.as_str(), 50)).collect();
        let p = parts(&counts);
        let found = [
            too_few(&p, &t),
            one_document(&p),
            hot_spot(&p, &t),
            write_hot_spot(&p, &t),
            near_cap(&p, &t, 10 << 30),
            key_shape(&p),
        ];
        assert!(found.iter().all(Option::is_none));
    }

    #[test]
    fn one_partition_rewritten_over_and_over_is_a_write_hot_spot() {
        let t = Thresholds::default();
        let mut p = parts(&[("bridge-1", 200), ("bridge-2", 200), ("counters", 10)]);
        p.list[2].1.writes = 3000;
        p.writes = 3400;
        let found = write_hot_spot(&p, &t).map(|f| f.evidence);
        assert_eq!(found.as_ref().map(|e| e["partition"].clone()), Some(json!("counters")));
        assert_eq!(found.map(|e| e["writes_per_document"].clone()), Some(json!(300.0)));
        assert!(hot_spot(&p, &t).is_none());
    }

    #[test]
    fn writes_following_documents_are_not_a_write_hot_spot() {
        let t = Thresholds::default();
        let mut p = parts(&[("bridge-1", 2000), ("bridge-2", 200), ("bridge-3", 200)]);
        for (_, s) in &mut p.list {
            s.writes *= 3;
        }
        p.writes *= 3;
        assert!(write_hot_spot(&p, &t).is_none());
        assert!(hot_spot(&p, &t).is_some());
    }
}
