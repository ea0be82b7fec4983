//! One search index: a tantivy index in its own directory (or in memory), and its update
//! from the database's `_changes`, driven by the index framework ([`bunko_indexer::run`]).
//!
//! Schema (every index has the same one; the user's field names live inside the terms):
//! - `_id` (raw, stored): the document id, so an update deletes the document's old entry
//!   by term before adding its new one;
//! - `_part` (raw): the partition, for partition searches;
//! - `_fields` (stored): the document's `index()` calls as JSON `[[name, value, store,
//!   facet], ...]`, read back for `fields`, `sort`, facets, groups and highlights;
//! - `t` (text with positions): each analyzed token of a string value as `name SEP token`,
//!   tokenized here by the field's analyzer and added pre-tokenized;
//! - `n` (JSON, fast): each number under its field name (dots replaced, see
//!   [`number_path`]) as a 64-bit float column, so a numeric term or range is a range scan
//!   of the column;
//! - `o` (JSON, fast, not indexed): each field's sort value under its name: for a design
//!   document's index its first value (a number, or else text: what `sort` orders by), for
//!   a Mango text index its largest (Lucene 4's sort over several values), so a sorted query
//!   ranks its matches from columns and reads only the stored fields of the page
//!   (`ranked.rs`). `_id` is a fast column too, for relevance ties.
//!
//! An index written before a field was added no longer opens with the schema and is
//! rebuilt (`open_dir`).
//!
//! Checkpoint: each page of changes is one tantivy commit whose payload is the seq it
//! reached and the purge seq it applied (`"{seq} {purge_seq}"`), so the index and its
//! checkpoint cannot disagree, and a restart resumes there. An update first deletes the
//! documents purged since its purge seq (`Database::purged_since`; all of them, from seq
//! 0, when compaction already dropped the records it needed).
//! A missing or unreadable directory is rebuilt from seq 0.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use bunko_doc::id::{DocKind, kind, partition_of};
use bunko_engine::changes::{ChangesFilter, ChangesQuery};
use bunko_engine::{Database, Error, Result};
use bunko_indexer::{Activity, Page};
use bunko_js::{CompiledViews, Limits, Runtime};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, JsonObjectOptions, OwnedValue, STORED, STRING, Schema,
    TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{PreTokenizedString, Token as TantivyToken};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::def::{IndexDef, Source};

/// Separates a field name from its token in `t` and `n` terms.
pub const SEP: char = '\u{1}';

/// Changes indexed per commit.
const BATCH: u64 = 5000;

/// Memory tantivy's writer may use before it flushes a segment.
const WRITER_MEMORY: usize = 32 << 20;

/// The schema's fields.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    pub id: Field,
    pub part: Field,
    pub stored: Field,
    pub text: Field,
    pub num: Field,
    pub sort: Field,
}

/// The schema; `norms: false` (Mango text indexes) scores a term alike in every document
/// whatever else it holds, as Lucene's per-field norms do for the one-value fields Mango
/// indexes (all fields share `t` here), so equally relevant rows keep their order.
fn schema(norms: bool) -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("raw")
            .set_fieldnorms(norms)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let fields = Fields {
        id: builder.add_text_field("_id", STRING | STORED | FAST),
        part: builder.add_text_field("_part", STRING),
        stored: builder.add_text_field("_fields", STORED),
        text: builder.add_text_field("t", text),
        num: builder.add_json_field("n", JsonObjectOptions::default().set_fast(None)),
        sort: builder.add_json_field("o", JsonObjectOptions::default().set_fast(Some("raw"))),
    };
    (builder.build(), fields)
}

/// The JSON path of field `name` in `n`: dots would nest, so they become `\u{1f}`.
pub fn number_path(name: &str) -> String {
    name.replace('.', "\u{1f}")
}

fn tantivy_err(err: tantivy::TantivyError) -> Error {
    Error::Unknown(format!("search index: {err}"))
}

/// One registered search index.
pub struct SearchIndex {
    pub def: IndexDef,
    pub index: Index,
    pub reader: IndexReader,
    pub fields: Fields,
    /// The seq the last commit reached.
    seq: AtomicU64,
    /// The purge seq applied.
    purge_seq: AtomicU64,
    /// Held while the index is updated; the compiled `index` function.
    build: Mutex<Option<CompiledViews>>,
    /// The index's writer, kept between updates (opening one per update costs more than
    /// a small update); dropped, with what it had not committed, when an update fails.
    writer: Mutex<Option<IndexWriter>>,
    /// Its database was deleted: the index is updated no more.
    retired: AtomicBool,
    pub activity: Activity,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex").field("sig", &self.def.sig).finish()
    }
}

impl SearchIndex {
    /// Opens the index in `dir` (creating or rebuilding it), or an in-memory one.
    pub fn open(def: IndexDef, dir: Option<&Path>) -> Result<SearchIndex> {
        let (schema, fields) = schema(matches!(def.source, Source::Js(_)));
        let index = match dir {
            None => Index::create_in_ram(schema),
            Some(dir) => open_dir(dir, schema)?,
        };
        let payload = index.load_metas().ok().and_then(|metas| metas.payload);
        let mut checkpoint = payload.as_deref().unwrap_or("").split(' ').map(|s| s.parse().ok());
        let seq = checkpoint.next().flatten().unwrap_or(0);
        let purge_seq = checkpoint.next().flatten().unwrap_or(0);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(tantivy_err)?;
        Ok(SearchIndex {
            def,
            index,
            reader,
            fields,
            seq: AtomicU64::new(seq),
            purge_seq: AtomicU64::new(purge_seq),
            build: Mutex::new(None),
            writer: Mutex::new(None),
            retired: AtomicBool::new(false),
            activity: Activity::default(),
        })
    }

    /// The seq the index has reached.
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Acquire)
    }

    /// Whether an update runs now.
    pub fn is_updating(&self) -> bool {
        self.build.is_locked()
    }

    /// Brings the index up to the database's latest change.
    pub fn update(&self, db: &Database) -> Result<()> {
        if self.seq() >= db.update_seq() {
            return Ok(());
        }
        let mut compiled = self.build.lock();
        if self.retired.load(Ordering::Acquire) {
            return Ok(());
        }
        let mango = match &self.def.source {
            Source::Mango(def) => Some(def.options()),
            Source::Js(_) => None,
        };
        if compiled.is_none() && mango.is_none() {
            let runtime = Runtime::new(Limits::default());
            *compiled = Some(runtime.compile_view_set(None, &[&self.def.program()])?);
        }
        let source = match (mango, compiled.as_ref()) {
            (Some(options), _) => Entries::Mango(options),
            (None, Some(views)) => Entries::Js(views),
            (None, None) => return Ok(()),
        };
        let mut slot = self.writer.lock();
        if slot.is_none() {
            *slot =
                Some(self.index.writer_with_num_threads(1, WRITER_MEMORY).map_err(tantivy_err)?);
        }
        let Some(writer) = slot.as_mut() else { return Ok(()) };
        if let Err(err) = self.apply_purges(db, writer) {
            *slot = None;
            return Err(err);
        }
        let mut build = Update { db, index: self, source, writer };
        if let Err(err) = bunko_indexer::run(&mut build, &self.activity, 1) {
            *slot = None;
            return Err(err);
        }
        self.reader.reload().map_err(tantivy_err)
    }

    /// Stops the index for good once any running update is done (its database was
    /// deleted), closing its writer so that its directory can be removed.
    pub fn retire(&self) {
        let _update = self.build.lock();
        self.retired.store(true, Ordering::Release);
        *self.writer.lock() = None;
    }

    /// Deletes the documents purged since the index's purge seq, and commits the new one.
    fn apply_purges(&self, db: &Database, writer: &mut IndexWriter) -> Result<()> {
        let (latest, ids) = db.purged_since(self.purge_seq.load(Ordering::Acquire))?;
        if latest <= self.purge_seq.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut seq = self.seq();
        match ids {
            Some(ids) => {
                for id in ids {
                    writer.delete_term(Term::from_field_text(self.fields.id, &id));
                }
            }
            None => {
                writer.delete_all_documents().map_err(tantivy_err)?;
                seq = 0;
            }
        }
        let mut commit = writer.prepare_commit().map_err(tantivy_err)?;
        commit.set_payload(&format!("{seq} {latest}"));
        commit.commit().map_err(tantivy_err)?;
        self.seq.store(seq, Ordering::Release);
        self.purge_seq.store(latest, Ordering::Release);
        Ok(())
    }

    /// The tantivy document of one document's `index()` calls, `None` if it made none.
    fn document(&self, id: &str, rows: bunko_js::Rows) -> Option<TantivyDocument> {
        let mut doc = TantivyDocument::default();
        doc.add_text(self.fields.id, id);
        if self.def.partitioned
            && let Some(part) = partition_of(id)
        {
            doc.add_text(self.fields.part, part);
        }
        let mut stored = Vec::new();
        let mut numbers: std::collections::BTreeMap<String, Vec<OwnedValue>> = Default::default();
        let mut sort: std::collections::BTreeMap<String, OwnedValue> = Default::default();
        let mango = matches!(self.def.source, Source::Mango(_));
        for (call, options) in rows {
            let (Some(name), Some(value)) = (call.get(0).and_then(Value::as_str), call.get(1))
            else {
                continue;
            };
            let flag = |key: &str, default: bool| {
                options.get(key).and_then(Value::as_bool).unwrap_or(default)
            };
            let text = match value {
                Value::String(s) => Some(s.clone()),
                Value::Bool(b) => Some(b.to_string()),
                Value::Number(n) => {
                    if flag("index", true) {
                        let x = n.as_f64().unwrap_or(0.0);
                        let x = if x == 0.0 { 0.0 } else { x };
                        numbers.entry(number_path(name)).or_default().push(OwnedValue::F64(x));
                    }
                    None
                }
                _ => continue,
            };
            if let Some(text) = text.filter(|_| flag("index", true)) {
                doc.add_pre_tokenized_text(self.fields.text, self.pre_tokenized(name, &text));
            }
            sort_value(&mut sort, name, value, mango);
            stored.push(json!([name, value, flag("store", false), flag("facet", false)]));
        }
        if stored.is_empty() {
            return None;
        }
        if !numbers.is_empty() {
            let object = numbers
                .into_iter()
                .map(|(k, mut v)| match v.len() {
                    1 => (k, v.remove(0)),
                    _ => (k, OwnedValue::Array(v)),
                })
                .collect();
            doc.add_object(self.fields.num, object);
        }
        if !sort.is_empty() {
            doc.add_object(self.fields.sort, sort.into_iter().collect());
        }
        doc.add_text(self.fields.stored, Value::Array(stored).to_string());
        Some(doc)
    }

    fn pre_tokenized(&self, name: &str, text: &str) -> PreTokenizedString {
        let tokens = self
            .def
            .analyzers
            .tokens(name, text)
            .into_iter()
            .map(|t| TantivyToken {
                offset_from: t.from,
                offset_to: t.to,
                position: t.position,
                text: format!("{name}{SEP}{}", t.text),
                position_length: 1,
            })
            .collect();
        PreTokenizedString { text: text.to_string(), tokens }
    }
}

/// Records `value` of field `name` in the sort values `o`: the first value of a design
/// document's field (a number, or else its text), the largest number or string of a Mango
/// field.
fn sort_value(
    sort: &mut std::collections::BTreeMap<String, OwnedValue>,
    name: &str,
    value: &Value,
    mango: bool,
) {
    let new = match value {
        Value::Number(n) => OwnedValue::F64(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => OwnedValue::Str(s.clone()),
        Value::Bool(b) if !mango => OwnedValue::Str(b.to_string()),
        _ => return,
    };
    let path = number_path(name);
    match sort.get_mut(&path) {
        None => {
            sort.insert(path, new);
        }
        Some(old) if mango => match (&*old, &new) {
            (OwnedValue::F64(a), OwnedValue::F64(b)) if b > a => *old = new,
            (OwnedValue::Str(a), OwnedValue::Str(b)) if b > a => *old = new,
            _ => {}
        },
        Some(_) => {}
    }
}

/// Opens the tantivy index in `dir`, creating it if missing and recreating it if it
/// cannot be read (it is rebuilt from the documents).
fn open_dir(dir: &Path, schema: Schema) -> Result<Index> {
    let io = |e: std::io::Error| Error::Unknown(format!("search index directory: {e}"));
    std::fs::create_dir_all(dir).map_err(io)?;
    let directory = tantivy::directory::MmapDirectory::open(dir)
        .map_err(|e| Error::Unknown(format!("search index directory: {e}")))?;
    match Index::open_or_create(directory, schema.clone()) {
        Ok(index) => Ok(index),
        Err(err) => {
            tracing::warn!(%err, dir = %dir.display(), "search index unreadable, rebuilding");
            std::fs::remove_dir_all(dir).map_err(io)?;
            std::fs::create_dir_all(dir).map_err(io)?;
            Index::create_in_dir(dir, schema).map_err(tantivy_err)
        }
    }
}

/// Where an update gets each document's `index()` calls.
enum Entries<'a> {
    /// The design document's `index` function.
    Js(&'a CompiledViews),
    /// A Mango text index's fields.
    Mango(bunko_query::text::entries::Options),
}

impl Entries<'_> {
    /// The calls of each document (`map_input` texts), in order.
    fn rows(&self, ddoc: &str, texts: &[&str]) -> Result<Vec<bunko_js::Rows>> {
        match self {
            Entries::Js(views) => Ok(views
                .map_batch_json(texts)?
                .into_iter()
                .map(|output| {
                    output.trace(ddoc);
                    output.rows.into_iter().next().unwrap_or_default()
                })
                .collect()),
            Entries::Mango(options) => Ok(texts
                .iter()
                .map(|text| {
                    let doc: Value = serde_json::from_str(text).unwrap_or(Value::Null);
                    bunko_query::text::entries::entries(&doc, options)
                        .into_iter()
                        .map(|(name, value)| (json!([name, value]), json!({})))
                        .collect()
                })
                .collect()),
        }
    }
}

/// One update of a search index, as the index framework drives it.
struct Update<'a> {
    db: &'a Database,
    index: &'a SearchIndex,
    source: Entries<'a>,
    writer: &'a mut IndexWriter,
}

impl bunko_indexer::Build for Update<'_> {
    type Error = Error;

    fn pending(&mut self) -> Result<u64> {
        self.db.pending_changes(self.index.seq())
    }

    fn step(&mut self) -> Result<Option<Page>> {
        let since = self.index.seq();
        let query = ChangesQuery {
            since,
            limit: Some(BATCH),
            descending: false,
            include_docs: true,
            all_leaves: false,
            filter: ChangesFilter::All,
        };
        let mut last = since;
        let mut changes = 0;
        let mut inputs = Vec::new();
        // An index reads every document whole, as CouchDB's indexers do (as an admin).
        for row in self.db.changes(&bunko_engine::security::UserCtx::system(), query)? {
            let row = row?;
            last = row.seq;
            changes += 1;
            let id_term = Term::from_field_text(self.index.fields.id, &row.id);
            self.writer.delete_term(id_term);
            if row.deleted || kind(&row.id) == DocKind::Design {
                continue;
            }
            if let Some(doc) = row.doc {
                inputs.push((row.id, map_input(&doc)));
            }
        }
        if last == since {
            return Ok(None);
        }
        let texts: Vec<&str> = inputs.iter().map(|(_, t)| t.as_str()).collect();
        let outputs = self.source.rows(&self.index.def.ddoc, &texts)?;
        for ((id, _), rows) in inputs.iter().zip(outputs) {
            if let Some(doc) = self.index.document(id, rows) {
                self.writer.add_document(doc).map_err(tantivy_err)?;
            }
        }
        let mut commit = self.writer.prepare_commit().map_err(tantivy_err)?;
        let purge_seq = self.index.purge_seq.load(Ordering::Acquire);
        commit.set_payload(&format!("{last} {purge_seq}"));
        commit.commit().map_err(tantivy_err)?;
        self.index.seq.store(last, Ordering::Release);
        Ok(Some(Page { changes, more: true }))
    }

    fn sync(&mut self) -> Result<()> {
        // Each tantivy commit is durable when it returns.
        Ok(())
    }

    fn stopped(&self) -> bool {
        self.index.seq() >= self.db.update_seq() || self.db.is_dropped()
    }
}

/// What the `index` function sees: the body with `_id` and `_rev`.
pub(crate) fn map_input(doc: &bunko_engine::read::DocOut) -> String {
    let body = std::str::from_utf8(&doc.body).unwrap_or("{}");
    let inner = body.trim().strip_prefix('{').and_then(|b| b.strip_suffix('}')).unwrap_or("");
    let mut text = format!(
        "{{\"_id\":{},\"_rev\":{}",
        Value::from(doc.id.as_str()),
        json!(doc.rev.to_string())
    );
    if !inner.trim().is_empty() {
        text.push(',');
        text.push_str(inner);
    }
    text.push('}');
    text
}

/// Shared handle to an index.
pub type Shared = Arc<SearchIndex>;
