//! `_find` over a Mango text index (`mango_cursor_text`).
//!
//! The engine keeps text index definitions and plans with them, but does not build or
//! search them: that is the search service's (`bunko-search`, on tantivy), a crate above
//! the engine. The engine defines what it needs as the [`TextSearch`] trait; the server
//! registers the search service's implementation at start-up ([`crate::Engine::set_text_search`]).
//! This keeps the planner, the matching, the paging and the bookmark in one place for
//! every index type, and the engine free of full-text code (an embedder without search
//! gets no text indexes: `POST /_index` with `"type": "text"` answers `503`, as CouchDB
//! without its search service).
//!
//! A run: the selector becomes a [`Text`] query; the search service returns the ids of
//! its matches in order (relevance, or the request's `sort`), at most 200 at a time from
//! an offset; each document is read from one snapshot and matched against the whole
//! selector (the index only narrows), skipped or taken, until `limit` documents are
//! taken or the matches run out. The bookmark is the offset after the last match read.

use std::sync::{Arc, OnceLock};

use bunko_query::text::{Kind, Text};
use serde_json::Value;

use super::scan::Run;
use super::{ExecStats, FindQuery, FindResult};
use crate::database::Database;
use crate::index::text::TextIndexDef;
use crate::keys::Key;
use crate::{Error, Result, records};

/// Most matches one search returns (CouchDB's `dreyfus` `max_limit`), and so the most
/// documents one text `_find` answers with.
pub const MAX_LIMIT: usize = 200;

/// The index number bookmarks of text queries carry (JSON indexes have smaller ones).
pub(super) const BOOKMARK_NUM: u64 = u64::MAX;

/// One search of a text index.
#[derive(Debug)]
pub struct TextRequest<'a> {
    pub query: &'a Text,
    /// `(escaped field, kind, descending)`; empty: by relevance.
    pub sort: &'a [(String, Kind, bool)],
    /// Matches to pass over first.
    pub offset: usize,
    pub limit: usize,
    pub partition: Option<&'a str>,
    /// Bring the index up to date first (`_find`'s `update`); `false` reads it as it is.
    pub update: bool,
}

/// The search service, as the engine sees it.
pub trait TextSearch: Send + Sync {
    /// The ids of the matches of `req` in index `def` of `db`, in order, from
    /// `req.offset`; the index is brought up to date first if `req.update`.
    fn search(
        &self,
        db: &Arc<Database>,
        def: &TextIndexDef,
        req: &TextRequest,
    ) -> Result<Vec<String>>;
}

/// Where the registered search service lives (shared by every database of an engine).
pub type Hook = Arc<OnceLock<Arc<dyn TextSearch>>>;

/// A sort of a text query: each field typed by its suffix or by the selector.
fn sort_fields(query: &FindQuery) -> Result<Vec<(String, Kind, bool)>> {
    let typed = |f: &bunko_query::FieldPath| {
        bunko_query::text::sort_field(&f.to_string(), &query.selector)
            .map(|(name, kind)| (name, kind, query.descending))
            .map_err(|e| Error::Invalid { error: e.error_name(), reason: e.reason() })
    };
    query.sort.iter().map(typed).collect()
}

impl Database {
    /// Whether a search service serves text indexes.
    pub fn has_text_search(&self) -> bool {
        self.text.get().is_some()
    }

    /// Runs `query` on text index `def` (the plan chose it).
    pub(super) fn find_text(
        &self,
        query: &FindQuery,
        def: &TextIndexDef,
        offset: usize,
        sight: crate::read_gate::Sight,
    ) -> Result<(Vec<Value>, usize, ExecStats)> {
        let search = self.text.get().cloned().ok_or_else(unavailable)?;
        let db = self.arc().ok_or_else(|| Error::NotFound("Database does not exist.".into()))?;
        let text = Text::from_selector(&query.selector);
        let sort = sort_fields(query)?;
        let limited = FindQuery { limit: query.limit.min(MAX_LIMIT), ..query.clone() };
        let mut run = Run::new(&limited, None, sight);
        let mut offset = offset;
        if text.is_empty() {
            return Ok((Vec::new(), offset, run.stats));
        }
        // Taken after the first search brought the index up to date, so that every
        // document it found can be read.
        let mut snapshot = None;
        loop {
            let want = run.wanted().saturating_sub(1).clamp(1, MAX_LIMIT);
            let req = TextRequest {
                query: &text,
                sort: &sort,
                offset,
                limit: want,
                partition: query.partition.as_deref(),
                // Once is enough: later pages read the index the first one updated.
                update: query.update && snapshot.is_none(),
            };
            let ids = search.search(&db, def, &req)?;
            if ids.is_empty() {
                break;
            }
            let snapshot = snapshot.get_or_insert_with(|| self.store.snapshot());
            if self.take(snapshot, ids, query, &mut run, &mut offset)? {
                break;
            }
        }
        Ok((run.docs, offset, run.stats))
    }

    /// Reads, matches and takes the documents of one page of matches, counting each read
    /// in `offset`; `true` once the page is full (the rest stays for the next bookmark).
    fn take(
        &self,
        snapshot: &bunko_storage::Snapshot,
        ids: Vec<String>,
        query: &FindQuery,
        run: &mut Run,
        offset: &mut usize,
    ) -> Result<bool> {
        for id in ids {
            if run.full() {
                return Ok(true);
            }
            *offset += 1;
            run.stats.keys_examined += 1;
            let Some(info) = snapshot.get(&Key::Doc(self.id(), &id).encode())? else { continue };
            let record = records::DocRecord::decode(&info)?;
            let Some(doc) = self.read_doc(snapshot, &id, &record, query, run)? else { continue };
            if run.seen.insert(id) {
                run.offer(doc, &[]);
            }
        }
        Ok(run.full())
    }

    /// The answer of a text query, with its bookmark.
    pub(super) fn text_result(
        &self,
        query: &FindQuery,
        def: &TextIndexDef,
        offset: usize,
        plan: bunko_query::plan::Plan,
        sight: crate::read_gate::Sight,
    ) -> Result<FindResult> {
        let (docs, offset, mut stats) = self.find_text(query, def, offset, sight)?;
        stats.results_returned = docs.len() as u64;
        let bytes = postcard::to_stdvec(&(BOOKMARK_NUM, (offset as u64).to_be_bytes().to_vec()))
            .unwrap_or_default();
        let bookmark =
            base64::Engine::encode(&base64::engine::general_purpose::URL_SAFE_NO_PAD, bytes);
        let warning = super::outcome::warnings(query, &plan, &stats);
        Ok(FindResult { docs, bookmark, warning, stats, index: None, plan, scanned: Vec::new() })
    }
}

/// CouchDB's answer when the text search service is missing (`mango_idx`'s
/// `index_service_unavailable`).
pub fn unavailable() -> Error {
    Error::ServiceUnavailable("text".into())
}
