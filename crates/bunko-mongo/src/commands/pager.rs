//! A `find`'s answer in batches. Unsorted, the query is run one batch at a time, each batch
//! resuming the engine's scan after the last document returned (the engine's bookmark), so
//! an open cursor holds a position, not the answer. Sorted (a blocking sort), the whole answer
//! is computed once and handed out.
//!
//! Without a projection a found document is held as the engine gave it (its parsed stored
//! JSON) until it is returned: as a `bson::Document`, or (a `find`'s first batch, which the
//! connection frames itself) as BSON bytes written straight from it
//! ([`ejson::raw::object`]), the bytes the document would have encoded to.

use std::collections::VecDeque;
use std::sync::Arc;

use bson::{Document, RawArrayBuf, RawDocumentBuf};
use bunko_doc::ejson;
use bunko_engine::Database;
use bunko_engine::find::FindQuery;
use bunko_engine::security::UserCtx;
use bunko_query::{Direction, FieldPath, Selector};
use serde_json::{Map, Value};

use crate::error::MongoError;
use crate::projection::Projection;
use crate::wire;

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
    buffer: VecDeque<Held>,
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
            pager.buffer = pager.convert_all(result.docs)?.into();
            pager.done = true;
        }
        Ok(pager)
    }

    /// A found document held as the client will see it (projected now, so a projection's
    /// error comes with the batch that fetched it); `None` if it is not an object.
    fn convert(&self, doc: Value) -> Result<Option<Held>, MongoError> {
        let Value::Object(doc) = doc else { return Ok(None) };
        Ok(Some(match &self.projection {
            Some(p) => Held::Doc(p.apply(&ejson::from_json(&doc))?),
            None => Held::Json(doc),
        }))
    }

    fn convert_all(&self, docs: Vec<Value>) -> Result<Vec<Held>, MongoError> {
        let mut out = Vec::with_capacity(docs.len());
        for d in docs {
            out.extend(self.convert(d)?);
        }
        Ok(out)
    }

    /// The next batch of at most `size` documents (`0`: as many as fit in 16 MiB) and
    /// whether more may follow.
    pub fn next(&mut self, size: usize) -> Result<(Vec<Document>, bool), MongoError> {
        self.fill(size)?;
        let mut batch = Vec::new();
        let mut bytes = 0;
        while batch.len() < limit_of(size) {
            let Some(next) = self.buffer.pop_front() else { break };
            let doc = match next {
                Held::Doc(doc) => doc,
                Held::Json(doc) => ejson::from_json(&doc),
            };
            let len = doc.to_vec().map_or(0, |v| v.len());
            if !batch.is_empty() && bytes + len > wire::MAX_BSON_SIZE {
                self.buffer.push_front(Held::Doc(doc));
                break;
            }
            bytes += len;
            batch.push(doc);
        }
        Ok((batch, self.more()))
    }

    /// [`Pager::next`] written as BSON bytes, the documents [`Pager::next`] would return
    /// encoded; `None` (nothing taken) when that batch cannot be written so: a projection,
    /// or a document that would not encode (the reply's encoding then reports it).
    pub fn next_raw(&mut self, size: usize) -> Result<Option<(RawArrayBuf, bool)>, MongoError> {
        if self.projection.is_some() {
            return Ok(None);
        }
        self.fill(size)?;
        let mut written: Vec<RawDocumentBuf> = Vec::new();
        let mut bytes = 0;
        for held in self.buffer.iter().take(limit_of(size)) {
            let Held::Json(doc) = held else { return Ok(None) };
            let Some(raw) = ejson::raw::object(doc) else { return Ok(None) };
            if !written.is_empty() && bytes + raw.as_bytes().len() > wire::MAX_BSON_SIZE {
                break;
            }
            bytes += raw.as_bytes().len();
            written.push(raw);
        }
        self.buffer.drain(..written.len());
        let mut batch = RawArrayBuf::new();
        for raw in written {
            batch.push(raw);
        }
        Ok(Some((batch, self.more())))
    }

    /// Whether documents may follow those taken.
    fn more(&self) -> bool {
        !(self.done && self.buffer.is_empty())
    }

    /// Fetches until `size` documents are held (`0`: a page) or the scan is over.
    fn fill(&mut self, size: usize) -> Result<(), MongoError> {
        let want = if size == 0 { DEFAULT_PAGE } else { size };
        while self.buffer.len() < want && !self.done {
            let page = (want - self.buffer.len()).min(self.remaining);
            let query = FindQuery { limit: page, ..self.query.clone() };
            let result = self.db.find_mongo(&self.user, &query, &[])?;
            let fetched = result.docs.len();
            let converted = self.convert_all(result.docs)?;
            self.buffer.extend(converted);
            self.remaining -= fetched.min(self.remaining);
            self.query.skip = 0;
            self.query.bookmark = Some(result.bookmark);
            self.done = fetched < page || self.remaining == 0;
        }
        Ok(())
    }
}

/// A fetched document not yet returned.
enum Held {
    /// Projected, as the client sees it.
    Doc(Document),
    /// Unprojected: the engine's MongoDB form of it, converted when returned.
    Json(Map<String, Value>),
}

/// How many documents a batch of `size` holds at most (`0`: no count limit).
fn limit_of(size: usize) -> usize {
    if size == 0 { usize::MAX } else { size }
}
