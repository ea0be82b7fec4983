//! Rule 1, unbounded arrays: arrays that are long in the sample (length distribution per
//! field path), or that keep growing (longer than in the document's previous revision).

use serde_json::json;

use super::sample::{ArrayStat, Sample};
use super::{Finding, Severity, Thresholds, guides};

pub const RULE: &str = "unbounded-array";
pub const GROWTH_RULE: &str = "growing-array";

/// Documents compared with their previous revision before growth is judged.
const MIN_COMPARED: u32 = 3;

pub fn check(sample: &Sample, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for (path, stat) in &sample.arrays {
        let mut lengths = stat.lengths.clone();
        lengths.sort_unstable();
        let max = lengths.last().copied().unwrap_or(0);
        let p99 = percentile(&lengths, 0.99);
        if max >= t.array_length {
            out.push(large(path, stat, &lengths, t));
        } else if p99 >= t.array_growth_length && grows(stat) {
            out.push(growing(path, stat, &lengths));
        }
    }
    out
}

fn grows(stat: &ArrayStat) -> bool {
    stat.compared >= MIN_COMPARED && stat.grew * 2 > stat.compared
}

fn large(path: &str, stat: &ArrayStat, lengths: &[usize], t: &Thresholds) -> Finding {
    let max = lengths.last().copied().unwrap_or(0);
    let over = lengths.iter().filter(|&&n| n >= t.array_length).count();
    let severity = if max >= t.array_length.saturating_mul(10) {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let growth = if grows(stat) { " and keeps growing" } else { "" };
    Finding {
        rule: RULE,
        severity,
        summary: format!(
            "`{path}` holds up to {max} elements (p50 {}, p99 {}){growth}",
            percentile(lengths, 0.5),
            percentile(lengths, 0.99)
        ),
        guide: guides::BOUNDED_ARRAYS,
        evidence: evidence(
            path,
            stat,
            lengths,
            json!({"threshold": t.array_length,
            "documents_over_threshold": over}),
        ),
        suggestion: suggestion(path),
    }
}

fn growing(path: &str, stat: &ArrayStat, lengths: &[usize]) -> Finding {
    Finding {
        rule: GROWTH_RULE,
        severity: Severity::Warning,
        summary: format!(
            "`{path}` got longer in {} of {} documents since their previous revision \
             (p99 length {})",
            stat.grew,
            stat.compared,
            percentile(lengths, 0.99)
        ),
        guide: guides::BOUNDED_ARRAYS,
        evidence: evidence(path, stat, lengths, json!({})),
        suggestion: suggestion(path),
    }
}

fn evidence(
    path: &str,
    stat: &ArrayStat,
    lengths: &[usize],
    extra: serde_json::Value,
) -> serde_json::Value {
    let mut out = json!({
        "field": path,
        "documents_sampled_with_field": lengths.len(),
        "length": {"p50": percentile(lengths, 0.5), "p99": percentile(lengths, 0.99),
                   "max": lengths.last().copied().unwrap_or(0)},
        "longest": {"id": stat.longest.0, "length": stat.longest.1},
        "growth": {"documents_compared": stat.compared, "documents_grown": stat.grew,
                   "elements_added": stat.added},
    });
    if let (Some(out), serde_json::Value::Object(extra)) = (out.as_object_mut(), extra) {
        out.extend(extra);
    }
    out
}

fn suggestion(path: &str) -> String {
    format!(
        "Keep a bounded subset of `{path}` in the document (for instance the newest 10, \
         trimmed on every write) and store every element as a document of its own that holds \
         this document's id (the subset pattern), with an index on that id field; if the \
         elements are only read on their own, drop the array and reference the parent from \
         each element instead. For time series, bucket elements into one document per period."
    )
}

/// The `q` quantile of sorted `values` (nearest rank).
pub fn percentile(sorted: &[usize], q: f64) -> usize {
    if sorted.is_empty() {
        return 0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted.get(rank - 1).copied().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(lengths: Vec<usize>, compared: u32, grew: u32) -> ArrayStat {
        let longest = ("d".to_string(), lengths.iter().copied().max().unwrap_or(0));
        ArrayStat { lengths, longest, compared, grew, added: u64::from(grew) }
    }

    fn sample(stats: Vec<(&str, ArrayStat)>) -> Sample {
        Sample {
            arrays: stats.into_iter().map(|(p, s)| (p.to_string(), s)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<usize> = (1..=100).collect();
        assert_eq!((percentile(&v, 0.5), percentile(&v, 0.99), percentile(&[], 0.5)), (50, 99, 0));
    }

    #[test]
    fn long_arrays_are_reported_and_bounded_ones_are_not() {
        let t = Thresholds::default();
        let found = check(
            &sample(vec![
                ("reviews", stat(vec![3, 10, 900], 0, 0)),
                ("addresses", stat(vec![1, 2, 3], 5, 5)),
            ]),
            &t,
        );
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].rule, found[0].evidence["field"].as_str()), (RULE, Some("reviews")));
        assert_eq!(found[0].evidence["length"]["max"], 900);
    }

    #[test]
    fn growth_counts_only_for_arrays_past_the_growth_length() {
        let t = Thresholds::default();
        let grown = check(&sample(vec![("events", stat(vec![150; 10], 6, 5))]), &t);
        assert_eq!(grown.iter().map(|f| f.rule).collect::<Vec<_>>(), [GROWTH_RULE]);
        let steady = check(&sample(vec![("events", stat(vec![150; 10], 6, 1))]), &t);
        assert!(steady.is_empty());
    }
}
