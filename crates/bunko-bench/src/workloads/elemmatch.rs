//! `elemmatch`: `$elemMatch` on an array of links, the single-collection pattern.
//! [`crate::cli::Sizes::elemmatch`] students (100k at full scale) each link three classes
//! and a school in `links: [{target, doc_type}]`. After an index on `links.target,
//! links.doc_type` (over the existing documents), 16 connections ask for the students of
//! a random class: `{"links": {"$elemMatch": {"target": "class-K", "doc_type": "class"}}}`,
//! limit 25. Bunko answers from its array index; CouchDB's json indexes do not reach into
//! arrays, so CouchDB scans (the first row's note shows its warning).

use bytes::Bytes;

use super::find::{Plan, index_then_query};
use super::{Ctx, Feature};
use crate::cli::Workload;
use crate::data::Students;
use crate::error::Result;
use crate::report::Row;

pub async fn run(ctx: &Ctx, rows: &mut Vec<Row>) -> Result {
    ctx.require(Feature::Find).await?;
    let db = ctx.create_db(Workload::Elemmatch, false).await?;
    let students = Students::new(ctx.sizes.elemmatch);
    let began = std::time::Instant::now();
    let sample = ctx
        .bulk_load(&db, students.docs, 4, move |_, range| Bytes::from(students.bulk(range)))
        .await;
    let preloaded = super::preload_note(&sample, began)?;
    let index =
        r#"{"index":{"fields":["links.target","links.doc_type"]},"name":"by-link","type":"json"}"#;
    let plan = Plan {
        workload: "elemmatch",
        db: &db,
        docs: students.docs,
        index,
        case: "$elemMatch on links, limit 25, 16 connections",
        preloaded,
    };
    index_then_query(ctx, rows, plan, move |r| selector(students, r)).await
}

/// A `_find` body: the students of a random class, limit 25.
pub fn selector(students: Students, r: u64) -> String {
    let class = students.class(r as usize % students.classes);
    format!(
        r#"{{"selector":{{"links":{{"$elemMatch":{{"target":"{class}","doc_type":"class"}}}}}},"limit":25}}"#
    )
}
