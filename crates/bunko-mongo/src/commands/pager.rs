//! A `find`'s answer in batches. Unsorted, the query is run one batch at a time, each batch
//! resuming the engine's scan after the last document returned (the engine's bookmark), so
//! an open cursor holds a position, not the answer. Sorted (a blocking sort), the whole answer
//! is computed once and handed out.

use std::collections::VecDeque;
use std::sync::Arc;

use bson::Document;
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::find::FindQuery;
use bunko_engine::security::UserCtx;
use bunko_query::{Direction, FieldPath, Selector};
use serde_json::Value;

use super::crud::take_batch;
use crate::error::MongoError;
use crate::projection::Projection;

/// Documents fetched per engine run when the client names no batch size.
const DEFAULT_PAGE: usize = 1000;

/// The source of a `find`'s batches.
pub(super) struct Pager {
    /// Who reads (the engine shows them the documents they may see).
    user: UserCtx,
    db: Arc<Database>,
    query: FindQuery,
    projection: Option<Projection>,
    /// Documents still to return (the `limit` left).
    remaining: usize,
    /// Fetched but not yet returned (a batch is also capped at 16 MiB).
    buffer: VecDeque<Document>,
    /// The scan is over.
    done: bool,
}

impl Pager {
    /// A pager over `selector` (`(skip, limit)`, the index `hint` names); sorted by `order`
    /// if given. An answer from an index is computed at once, like a sorted one.
    pub fn new(
        user: UserCtx,
        db: Arc<Database>,
        selector: Selector,
        order: &[(FieldPath, Direction)],
        (skip, limit): (usize, usize),
        projection: Option<Projection>,
        hint: Option<String>,
    ) -> Result<Pager, MongoError> {
        let mut query = super::crud::mongo_query(selector, skip, limit);
        query.use_index = hint.map(|h| (h, None));
        // An index holding every path the projection reads answers from its entries.
        query.fields = projection.as_ref().and_then(Projection::paths);
        let hint = query.use_index.as_ref().map(|(h, _)| h.as_str());
        let indexed = db.mongo_plan(&query.selector, hint)?.is_some();
        let mut pager = Pager {
            user,
            db,
            query,
            projection,
            remaining: limit,
            buffer: VecDeque::new(),
            done: false,
        };
        // A capped collection read in natural order has no bookmark to page on.
        if !order.is_empty() || indexed || pager.db.is_capped()? {
            let result = pager.db.find_mongo(&pager.user, &pager.query, order)?;
            pager.buffer = pager.convert_all(&result.docs)?.into();
            pager.done = true;
        }
        Ok(pager)
    }

    /// A found document as the client sees it (projected); `None` if it is not an object.
    fn convert(&self, doc: &Value) -> Result<Option<Document>, MongoError> {
        let Some(doc) = doc.as_object().map(ejson::from_json) else { return Ok(None) };
        Ok(Some(match &self.projection {
            Some(p) => p.apply(&doc)?,
            None => doc,
        }))
    }

    fn convert_all(&self, docs: &[Value]) -> Result<Vec<Document>, MongoError> {
        let mut out = Vec::with_capacity(docs.len());
        for d in docs {
            out.extend(self.convert(d)?);
        }
        Ok(out)
    }

    /// The next batch of at most `size` documents (`0`: as many as fit in 16 MiB) and
    /// whether more may follow.
    pub fn next(&mut self, size: usize) -> Result<(Vec<Document>, bool), MongoError> {
        let want = if size == 0 { DEFAULT_PAGE } else { size };
        while self.buffer.len() < want && !self.done {
            let page = (want - self.buffer.len()).min(self.remaining);
            let query = FindQuery { limit: page, ..self.query.clone() };
            let result = self.db.find_mongo(&self.user, &query, &[])?;
            let fetched = result.docs.len();
            let converted = self.convert_all(&result.docs)?;
            self.buffer.extend(converted);
            self.remaining -= fetched.min(self.remaining);
            self.query.skip = 0;
            self.query.bookmark = Some(result.bookmark);
            self.done = fetched < page || self.remaining == 0;
        }
        let batch = take_batch(&mut self.buffer, size);
        Ok((batch, !(self.done && self.buffer.is_empty())))
    }
}
