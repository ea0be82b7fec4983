//! Mango text indexes served by this crate: the [`TextSearch`] the engine calls for a
//! `_find` it planned on a text index ([`MangoText`], registered at server start).
//!
//! The engine hands over the selector as a [`Text`] tree; it becomes a tantivy query on
//! the index's schema (`index.rs`) directly, leaf by leaf, as Clouseau parses the Lucene
//! text CouchDB sends it:
//! - a string is analyzed with its field's analyzer (`keyword` by default, `standard` for
//!   `$default`): one token is a term, several a phrase;
//! - a number is a point of the field's number column, a numeric range a range of it;
//! - a boolean (and `null`, indexed as `true`) is the term `true`/`false`;
//! - a range on strings compares the raw terms (CouchDB's upper bound `u0x10FFFF` is
//!   taken as open, so strings sorting after it are not lost);
//! - `$fieldnames` entries are the names of the fields each document has.
//!
//! Matches are ordered by relevance (only the page asked for is read) or by the request's
//! sort (Lucene 4's: the largest of a field's several values, a missing value first; ranked
//! from the index's sort columns, `ranked.rs`), and returned from an offset.

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use bunko_engine::find::text::{TextRequest, TextSearch};
use bunko_engine::index::text::TextIndexDef;
use bunko_engine::{Database, Error, Result};
use bunko_query::text::entries::FIELD_NAMES;
use bunko_query::text::{End, Kind, Term as TextTerm, Text};
use serde_json::Value;
use tantivy::collector::TopDocs;
use tantivy::query::{
    AllQuery, BooleanQuery, EmptyQuery, Occur, PhraseQuery, Query, RangeQuery, RegexQuery,
    TermQuery,
};
use tantivy::schema::IndexRecordOption;
use tantivy::schema::Value as _;
use tantivy::{TantivyDocument, Term};

use crate::Search;
use crate::index::{SEP, SearchIndex, number_path};
use crate::ranked::{self, Key, Order, Ranked};

/// The search service as the engine's [`TextSearch`].
#[derive(Debug)]
pub struct MangoText(pub Arc<Search>);

impl TextSearch for MangoText {
    fn search(
        &self,
        db: &Arc<Database>,
        def: &TextIndexDef,
        req: &TextRequest,
    ) -> Result<Vec<String>> {
        let index = self.0.index(db, &def.ddoc, &def.name)?;
        if req.update {
            index.update(db)?;
        }
        let builder = Builder { index: &index };
        let Some(query) = builder.text(req.query)? else { return Ok(Vec::new()) };
        let query: Box<dyn Query> = match req.partition {
            None => query,
            Some(p) => {
                let part = Term::from_field_text(index.fields.part, p);
                let part = Box::new(TermQuery::new(part, IndexRecordOption::Basic));
                Box::new(BooleanQuery::new(vec![(Occur::Must, query), (Occur::Must, part)]))
            }
        };
        if req.sort.is_empty() {
            return relevant(&index, query.as_ref(), req.offset, req.limit);
        }
        sorted(&index, query.as_ref(), req)
    }
}

/// The ids of the matches in `req.sort` order from `req.offset`, ranked from the index's
/// sort columns (each field's largest value) without reading stored fields.
fn sorted(index: &SearchIndex, query: &dyn Query, req: &TextRequest) -> Result<Vec<String>> {
    let keys: Vec<Key> = req.sort.iter().map(|(field, _, _)| Key::Field(field.clone())).collect();
    let sort: Vec<(Kind, bool)> = req.sort.iter().map(|(_, kind, desc)| (*kind, *desc)).collect();
    let order: Order = Arc::new(move |a: &Ranked, b: &Ranked| {
        compare_sorted(&a.values, &b.values, &sort).then(a.doc.cmp(&b.doc))
    });
    let wanted = req.offset.saturating_add(req.limit);
    let top = ranked::top(index, query, &keys, true, wanted, order)?;
    Ok(top.into_iter().skip(req.offset).take(req.limit).filter_map(|(r, _)| r.id).collect())
}

/// The ids of the `limit` most relevant matches after the first `offset` (equally
/// relevant ones in index order, as Lucene's), reading only those documents.
fn relevant(
    index: &SearchIndex,
    query: &dyn Query,
    offset: usize,
    limit: usize,
) -> Result<Vec<String>> {
    let err = |e: tantivy::TantivyError| Error::Unknown(format!("search: {e}"));
    let searcher = index.reader.searcher();
    let top = TopDocs::with_limit(offset.saturating_add(limit).max(1));
    let mut ids = Vec::new();
    for (_, address) in searcher.search(query, &top).map_err(err)?.into_iter().skip(offset) {
        let stored: TantivyDocument = searcher.doc(address).map_err(err)?;
        if let Some(id) = stored.get_first(index.fields.id).and_then(|v| v.as_str()) {
            ids.push(id.to_string());
        }
    }
    Ok(ids)
}

/// A sort value as the field's kind reads it: a number for a number field, a string
/// otherwise, `None` if the document has none.
fn typed(value: &Value, kind: Kind) -> Option<&Value> {
    match kind {
        Kind::Number => Some(value).filter(|v| v.is_number()),
        _ => Some(value).filter(|v| v.is_string()),
    }
}

/// Lucene 4's order: a missing value first, numbers by value, strings by text; `desc`
/// reverses it all.
fn compare_sorted(xs: &[Value], ys: &[Value], sort: &[(Kind, bool)]) -> Ordering {
    for ((x, y), (kind, descending)) in xs.iter().zip(ys).zip(sort) {
        let ord = match (typed(x, *kind), typed(y, *kind)) {
            (None, None) => Ordering::Equal,
            (None, Some(_)) => Ordering::Less,
            (Some(_), None) => Ordering::Greater,
            (Some(Value::Number(x)), Some(Value::Number(y))) => {
                x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0))
            }
            (Some(x), Some(y)) => x.as_str().cmp(&y.as_str()),
        };
        let ord = if *descending { ord.reverse() } else { ord };
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// Builds tantivy queries on one index.
struct Builder<'a> {
    index: &'a SearchIndex,
}

impl Builder<'_> {
    /// The query of a tree; `None` when it searches nothing (an empty group).
    fn text(&self, text: &Text) -> Result<Option<Box<dyn Query>>> {
        Ok(match text {
            Text::And(items) => self.group(items, Occur::Must)?,
            Text::Or(items) => self.group(items, Occur::Should)?,
            Text::Not(exists, arg) => {
                let (base, excluded) = match arg {
                    Some(arg) => (self.text(exists)?, self.text(arg)?),
                    None => (Some(self.field_names("", true)?), self.text(exists)?),
                };
                let base: Box<dyn Query> = base.unwrap_or_else(|| Box::new(AllQuery));
                match excluded {
                    None => Some(base),
                    Some(excluded) => Some(Box::new(BooleanQuery::new(vec![
                        (Occur::Must, base),
                        (Occur::MustNot, excluded),
                    ]))),
                }
            }
            Text::Field(field, term) => Some(self.field(&field.name(), field.kind, term)?),
            Text::FieldName { name, prefix } => Some(self.field_names(name, *prefix)?),
            Text::Regex(field) => Some(self.field_names(&field.name(), false)?),
            Text::Default(value) => Some(self.words("$default", &scalar_text(value))),
        })
    }

    fn group(&self, items: &[Text], occur: Occur) -> Result<Option<Box<dyn Query>>> {
        let mut parts = Vec::new();
        for item in items {
            if let Some(q) = self.text(item)? {
                parts.push((occur, q));
            }
        }
        Ok((!parts.is_empty()).then(|| Box::new(BooleanQuery::new(parts)) as Box<dyn Query>))
    }

    fn field(&self, name: &str, kind: Kind, term: &TextTerm) -> Result<Box<dyn Query>> {
        let numeric = matches!(kind, Kind::Number | Kind::Length);
        Ok(match term {
            TextTerm::Value(v) if numeric => {
                let x = self.number(name, v.as_f64().unwrap_or(0.0));
                Box::new(RangeQuery::new(Bound::Included(x.clone()), Bound::Included(x)))
            }
            TextTerm::Value(v) => self.words(name, &scalar_text(v)),
            TextTerm::Range(lower, upper) if numeric => {
                let end = |e: &End, open: f64| match e {
                    End::Open => Bound::Included(self.number(name, open)),
                    End::Inclusive(v) => Bound::Included(self.number(name, num(v))),
                    End::Exclusive(v) => Bound::Excluded(self.number(name, num(v))),
                };
                let lo = end(lower, f64::NEG_INFINITY);
                let hi = end(upper, f64::INFINITY);
                Box::new(RangeQuery::new(lo, hi))
            }
            TextTerm::Range(lower, upper) => {
                let end = |e: &End, open: Bound<Term>| match e {
                    End::Open => open,
                    End::Inclusive(v) => Bound::Included(self.term(name, &scalar_text(v))),
                    End::Exclusive(v) => Bound::Excluded(self.term(name, &scalar_text(v))),
                };
                let lo = end(lower, Bound::Included(self.term(name, "")));
                let hi = end(upper, Bound::Excluded(self.text_term(&format!("{name}\u{2}"))));
                Box::new(RangeQuery::new(lo, hi))
            }
            TextTerm::Prefix(prefix) => self.regex(name, prefix, true)?,
        })
    }

    /// `$fieldnames:name` or, with `prefix`, every field name starting with `name`.
    fn field_names(&self, name: &str, prefix: bool) -> Result<Box<dyn Query>> {
        if prefix {
            return self.regex(FIELD_NAMES, name, true);
        }
        let term = self.term(FIELD_NAMES, name);
        Ok(Box::new(TermQuery::new(term, IndexRecordOption::Basic)))
    }

    /// Terms of `field` equal to `text` (or starting with it, with `prefix`).
    fn regex(&self, field: &str, text: &str, prefix: bool) -> Result<Box<dyn Query>> {
        let mut pattern = regex::escape(&format!("{field}{SEP}{text}"));
        if prefix {
            pattern.push_str("(.|\n)*");
        }
        let query = RegexQuery::from_pattern(&pattern, self.index.fields.text)
            .map_err(|e| Error::BadRequest(format!("text query on {field}: {e}")))?;
        Ok(Box::new(query))
    }

    /// Analyzed text: a term, or a phrase of the tokens.
    fn words(&self, field: &str, text: &str) -> Box<dyn Query> {
        let tokens = self.index.def.analyzers.tokens(field, text);
        match tokens.as_slice() {
            [] => Box::new(EmptyQuery),
            [one] => {
                Box::new(TermQuery::new(self.term(field, &one.text), IndexRecordOption::Basic))
            }
            [first, ..] => {
                let base = first.position;
                let terms =
                    tokens.iter().map(|t| (t.position - base, self.term(field, &t.text))).collect();
                Box::new(PhraseQuery::new_with_offset(terms))
            }
        }
    }

    fn term(&self, field: &str, token: &str) -> Term {
        self.text_term(&format!("{field}{SEP}{token}"))
    }

    fn text_term(&self, text: &str) -> Term {
        Term::from_field_text(self.index.fields.text, text)
    }

    fn number(&self, field: &str, x: f64) -> Term {
        let mut term =
            Term::from_field_json_path(self.index.fields.num, &number_path(field), false);
        term.append_type_and_fast_value(if x == 0.0 { 0.0 } else { x });
        term
    }
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(0.0)
}

/// A scalar as the text the index holds for it.
fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "true".to_string(),
        other => other.to_string(),
    }
}
