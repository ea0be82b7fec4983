//! Rule 2, large documents: documents over a fraction of `max_document_size` (counted over
//! the whole pass from the size every revision record holds), and the top-level fields
//! that make up most of the largest ones.

use serde_json::{Value, json};

use super::sample::Sample;
use super::{Finding, Severity, Thresholds, guides};
use crate::Result;
use crate::database::Database;

pub const RULE: &str = "large-document";

/// Fields shown per large document.
const TOP_FIELDS: usize = 3;

pub fn check(db: &Database, sample: &Sample, t: &Thresholds, max_doc: u64) -> Result<Vec<Finding>> {
    let threshold = (t.document_fraction * max_doc as f64) as u64;
    if sample.large == 0 || max_doc == 0 {
        return Ok(Vec::new());
    }
    let mut examples = Vec::new();
    let mut dominant: Vec<String> = Vec::new();
    for (size, id) in sample.largest.iter().filter(|(s, _)| *s >= threshold) {
        let fields = match db.get_stored(id, None) {
            Ok(doc) => field_sizes(&doc.body),
            Err(_) => Vec::new(),
        };
        if let Some((name, bytes)) = fields.first()
            && *bytes * 2 >= *size
            && !dominant.contains(name)
        {
            dominant.push(name.clone());
        }
        let fields: Vec<Value> = fields
            .iter()
            .take(TOP_FIELDS)
            .map(|(name, bytes)| {
                json!({"field": name, "bytes": bytes,
                "share": round2(*bytes as f64 / (*size).max(1) as f64)})
            })
            .collect();
        examples.push(json!({"id": id, "bytes": size,
            "fraction_of_limit": round2(*size as f64 / max_doc as f64), "largest_fields": fields}));
    }
    let largest = sample.largest.first().map_or(0, |(s, _)| *s);
    let severity = if largest as f64 >= 0.75 * max_doc as f64 {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let split = match dominant.as_slice() {
        [] => "the parts that are rarely read with the rest".to_string(),
        names => names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", "),
    };
    Ok(vec![Finding {
        rule: RULE,
        severity,
        summary: format!(
            "{} documents are at least {}% of the {} byte document size limit (largest {} bytes)",
            sample.large,
            (t.document_fraction * 100.0).round(),
            max_doc,
            largest
        ),
        guide: guides::DOCUMENT_SIZE,
        evidence: json!({
            "max_document_size": max_doc,
            "threshold_bytes": threshold,
            "documents_over_threshold": sample.large,
            "documents_scanned": sample.scanned,
            "largest": examples,
        }),
        suggestion: format!(
            "Move {split} out into documents of their own that hold this document's id, read \
             only when needed, so that the documents read together stay small."
        ),
    }])
}

/// The top-level fields of a body with the bytes of their compact JSON, largest first.
fn field_sizes(body: &[u8]) -> Vec<(String, u64)> {
    let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) else { return Vec::new() };
    let mut out: Vec<(String, u64)> =
        map.iter().map(|(k, v)| (k.clone(), (k.len() + 3 + v.to_string().len()) as u64)).collect();
    out.sort_by_key(|(_, bytes)| std::cmp::Reverse(*bytes));
    out
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_measured_largest_first() {
        let sizes = field_sizes(br#"{"a":1,"blob":"xxxxxxxxxx","b":[1,2]}"#);
        assert_eq!(sizes.first().map(|(k, _)| k.as_str()), Some("blob"));
        assert_eq!(sizes.first().map(|(_, n)| *n), Some(4 + 3 + 12));
    }
}
