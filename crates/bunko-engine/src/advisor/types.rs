//! Rule 7, mixed entity types without a discriminator: the sampled documents fall into
//! clearly different shapes (top-level field sets that share less than half their fields)
//! and no top-level field tells them apart (a field present in nearly every document whose
//! value is the same within each shape and different between shapes, as `type` or
//! `doc_type` is). A document whose fields are a subset of another's has the same shape
//! (optional fields do not make an entity type).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::sample::{Sample, Shape};
use super::{Finding, Severity, guides};

pub const RULE: &str = "missing-discriminator";

/// Jaccard similarity of field sets at which two documents have the same shape.
const SAME_SHAPE: f64 = 0.5;
/// Shapes tracked at most.
const MAX_SHAPES: usize = 50;
/// A shape counts as an entity type from this share of the sample (and 5 documents).
const MIN_SHARE: f64 = 0.02;

struct Cluster<'a> {
    fields: BTreeSet<&'a str>,
    members: Vec<&'a Shape>,
}

pub fn check(sample: &Sample) -> Vec<Finding> {
    let clusters = cluster(&sample.shapes);
    let min = ((sample.shapes.len() as f64 * MIN_SHARE).ceil() as usize).max(5);
    let major: Vec<&Cluster> = clusters.iter().filter(|c| c.members.len() >= min).collect();
    if major.len() < 2 || discriminator(&sample.shapes, &major).is_some() {
        return Vec::new();
    }
    let shapes: Vec<Value> = major
        .iter()
        .map(|c| {
            json!({"documents": c.members.len(),
            "fields": c.fields.iter().collect::<Vec<_>>(),
            "example_ids": c.members.iter().take(3).map(|s| s.id.as_str()).collect::<Vec<_>>()})
        })
        .collect();
    vec![Finding {
        rule: RULE,
        severity: Severity::Warning,
        summary: format!(
            "{} different document shapes and no field that says which is which",
            major.len()
        ),
        guide: guides::DISCRIMINATOR,
        evidence: json!({"documents_sampled": sample.shapes.len(), "shapes": shapes}),
        suggestion: "Add a field such as `type` (or `doc_type`) with one value per entity type \
                     to every document, and name it in queries and in partial index filters."
            .to_string(),
    }]
}

fn cluster(shapes: &[Shape]) -> Vec<Cluster<'_>> {
    let mut clusters: Vec<Cluster> = Vec::new();
    for shape in shapes {
        let fields: BTreeSet<&str> = shape.keys.iter().map(String::as_str).collect();
        let same = clusters.iter().position(|c| same_shape(&c.fields, &fields));
        if let Some(c) = same.and_then(|i| clusters.get_mut(i)) {
            c.members.push(shape);
        } else if clusters.len() < MAX_SHAPES {
            clusters.push(Cluster { fields, members: vec![shape] });
        }
    }
    clusters
}

/// Field sets sharing at least half their fields, or one holding all of the other's (a
/// document missing optional fields has the same shape).
fn same_shape(a: &BTreeSet<&str>, b: &BTreeSet<&str>) -> bool {
    jaccard(a, b) >= SAME_SHAPE || a.is_subset(b) || b.is_subset(a)
}

fn jaccard(a: &BTreeSet<&str>, b: &BTreeSet<&str>) -> f64 {
    let union = a.union(b).count();
    if union == 0 { 1.0 } else { a.intersection(b).count() as f64 / union as f64 }
}

/// A field whose value separates the shapes: in 90% of all documents, the same value in
/// 90% of each shape's documents, a different value per shape.
fn discriminator(shapes: &[Shape], major: &[&Cluster]) -> Option<String> {
    let mut present: BTreeMap<&str, usize> = BTreeMap::new();
    for shape in shapes {
        for key in shape.strings.keys() {
            *present.entry(key.as_str()).or_default() += 1;
        }
    }
    let candidates = present.into_iter().filter(|(_, n)| n * 10 >= shapes.len() * 9);
    for (field, _) in candidates {
        let mut values = BTreeSet::new();
        let separates = major.iter().all(|c| match dominant(c, field) {
            Some((value, n)) if n * 10 >= c.members.len() * 9 => values.insert(value),
            _ => false,
        });
        if separates {
            return Some(field.to_string());
        }
    }
    None
}

fn dominant<'a>(cluster: &Cluster<'a>, field: &str) -> Option<(&'a str, usize)> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for shape in &cluster.members {
        if let Some(v) = shape.strings.get(field) {
            *counts.entry(v.as_str()).or_default() += 1;
        }
    }
    counts.into_iter().max_by_key(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(id: usize, fields: &[(&str, &str)]) -> Shape {
        Shape {
            id: format!("d{id}"),
            keys: fields.iter().map(|(k, _)| k.to_string()).collect(),
            strings: fields
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    fn students_and_classes(with_type: bool) -> Sample {
        let mut shapes = Vec::new();
        for i in 0..30 {
            let mut student =
                vec![("name", "n"), ("major", "cs"), ("semester", "Spring 2025"), ("links", "")];
            let mut class = vec![
                ("class_name", "c"),
                ("course_id", "CS101"),
                ("instructor", ""),
                ("semester", "Spring 2025"),
                ("schedule", ""),
                ("current_topic", "t"),
                ("links", ""),
            ];
            if with_type {
                student.push(("doc_type", "student"));
                class.push(("doc_type", "class"));
            }
            shapes.push(shape(i, &student));
            shapes.push(shape(100 + i, &class));
        }
        Sample { shapes, ..Default::default() }
    }

    #[test]
    fn two_shapes_need_a_field_that_tells_them_apart() {
        let found = check(&students_and_classes(false));
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].evidence["shapes"].as_array().map(Vec::len), Some(2));
        assert!(check(&students_and_classes(true)).is_empty(), "doc_type discriminates");
    }

    #[test]
    fn a_document_with_only_some_of_the_fields_has_the_same_shape() {
        let shapes = (0..40)
            .map(|i| {
                if i % 4 == 0 {
                    shape(i, &[("name", "a")])
                } else {
                    shape(i, &[("name", "a"), ("addresses", ""), ("contactDetails", "")])
                }
            })
            .collect();
        assert!(check(&Sample { shapes, ..Default::default() }).is_empty());
    }

    #[test]
    fn optional_fields_do_not_make_a_new_shape() {
        let shapes = (0..40)
            .map(|i| {
                if i % 2 == 0 {
                    shape(i, &[("name", "a"), ("email", "e"), ("phone", "p")])
                } else {
                    shape(i, &[("name", "a"), ("email", "e")])
                }
            })
            .collect();
        assert!(check(&Sample { shapes, ..Default::default() }).is_empty());
    }
}
