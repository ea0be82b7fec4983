//! The first matches of a query in sort order, ranked from fast columns (`o`, `_id`; see
//! `index.rs`) by tantivy's top-N collector: a sorted query costs a column read per match
//! and a stored-fields read per returned row, instead of a stored-fields read per match.
//!
//! A [`Ranked`] holds what the order needs (the sort values, the score, the document's
//! number, its id for relevance ties); the caller's comparison decides the order, so
//! `_search` (Cloudant's: first values, missing last) and Mango (Lucene 4's: largest values,
//! missing first) keep their own rules and their answers stay those of the full sort.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use bunko_engine::{Error, Result};
use serde_json::{Value, json};
use tantivy::collector::TopDocs;
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::Query;
use tantivy::{DocAddress, DocId, Score, SegmentReader};

use crate::index::{SearchIndex, number_path};

/// How two ranked matches compare (`Less`: the first comes first).
pub type Order = Arc<dyn Fn(&Ranked, &Ranked) -> Ordering + Send + Sync>;

/// What one column holds of a sort key.
#[derive(Debug, Clone, PartialEq)]
pub enum Key {
    /// A field's sort value (`null` when the document has none).
    Field(String),
    /// The relevance score.
    Score,
    /// The document's number in the index.
    Doc,
}

/// One match as the order sees it.
#[derive(Clone)]
pub struct Ranked {
    /// One value per [`Key`], as JSON: a number, a string or `null`.
    pub values: Vec<Value>,
    pub score: Score,
    pub doc: u64,
    /// The document id, when the order asked for it.
    pub id: Option<String>,
    order: Order,
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.partial_cmp(other) == Some(Ordering::Equal)
    }
}

impl PartialOrd for Ranked {
    /// The collector keeps the greatest: the match that comes first is the greatest.
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some((self.order)(other, self))
    }
}

/// The columns of one key in one segment.
enum Columns {
    Field(Option<Column<f64>>, Option<StrColumn>),
    Score,
    Doc,
}

impl Columns {
    fn open(segment: &SegmentReader, key: &Key) -> Columns {
        match key {
            Key::Field(name) => {
                // tantivy reads `\` in a path as an escape.
                let path = format!("o.{}", number_path(name).replace('\\', "\\\\"));
                let fast = segment.fast_fields();
                Columns::Field(
                    fast.column_opt::<f64>(&path).ok().flatten(),
                    fast.str(&path).ok().flatten(),
                )
            }
            Key::Score => Columns::Score,
            Key::Doc => Columns::Doc,
        }
    }

    fn value(&self, doc: DocId, score: Score, number: u64) -> Value {
        match self {
            Columns::Score => json!(score),
            Columns::Doc => json!(number),
            Columns::Field(numbers, strings) => {
                if let Some(x) = numbers.as_ref().and_then(|c| c.first(doc)) {
                    return json!(x);
                }
                strings.as_ref().and_then(|c| text(c, doc)).map_or(Value::Null, Value::String)
            }
        }
    }
}

fn text(column: &StrColumn, doc: DocId) -> Option<String> {
    let ord = column.term_ords(doc).next()?;
    let mut out = String::new();
    column.ord_to_str(ord, &mut out).ok()?.then_some(out)
}

/// The first `limit` matches of `query` in `order` (by `keys`; with `with_id`, each knows
/// its document id), and their addresses.
pub fn top(
    index: &SearchIndex,
    query: &dyn Query,
    keys: &[Key],
    with_id: bool,
    limit: usize,
    order: Order,
) -> Result<Vec<(Ranked, DocAddress)>> {
    let searcher = index.reader.searcher();
    let mut bases = HashMap::new();
    let mut base = 0u64;
    for segment in searcher.segment_readers() {
        bases.insert(segment.segment_id(), base);
        base += u64::from(segment.max_doc());
    }
    let keys = keys.to_vec();
    let collector =
        TopDocs::with_limit(limit.max(1)).tweak_score(move |segment: &SegmentReader| {
            let base = bases.get(&segment.segment_id()).copied().unwrap_or(0);
            let columns: Vec<Columns> = keys.iter().map(|k| Columns::open(segment, k)).collect();
            let ids = if with_id { segment.fast_fields().str("_id").ok().flatten() } else { None };
            let order = order.clone();
            move |doc: DocId, score: Score| {
                let number = base + u64::from(doc);
                Ranked {
                    values: columns.iter().map(|c| c.value(doc, score, number)).collect(),
                    score,
                    doc: number,
                    id: ids.as_ref().and_then(|c| text(c, doc)),
                    order: order.clone(),
                }
            }
        });
    searcher.search(query, &collector).map_err(|e| Error::Unknown(format!("search: {e}")))
}
