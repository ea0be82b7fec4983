//! Search requests: parameters ([`SearchQuery::parse`]), execution on one index
//! ([`run`]) and the answer in Cloudant's shape.
//!
//! tantivy finds and scores the matching documents. Without `drilldown`, `counts`, `ranges`
//! or `group_field`, the page is ranked from fast columns (`ranked.rs`: by `sort`, or by
//! relevance) and only its rows' stored `index()` calls are read (`_fields`, `index.rs`);
//! those options look at every match's values, so they read every match's.
//! `bookmark` is the number of rows already returned, base64-encoded.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use bunko_engine::{Error, Result};
use bunko_indexer::Update;
use serde_json::{Map, Value, json};
use tantivy::collector::{Count, TopDocs};
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value as _};
use tantivy::{DocAddress, Searcher, TantivyDocument, Term};

use crate::compile::compile;
use crate::index::SearchIndex;
use crate::ranked::{self, Key, Order, Ranked};

/// Most rows one global search may ask for, as Cloudant.
const MAX_LIMIT: usize = 200;

/// Most rows one partition search may ask for (CouchDB's `max_limit_partitions`).
const MAX_PARTITION_LIMIT: usize = 2000;

/// One sort key: `field`, `-field`, `field<number>`, `field<string>`, `<score>`, `<doc>`.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub field: String,
    pub descending: bool,
}

/// `highlight_*` options.
#[derive(Debug, Clone, PartialEq)]
pub struct Highlight {
    pub fields: Vec<String>,
    pub pre: String,
    pub post: String,
    pub number: usize,
    pub size: usize,
}

/// A search request.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchQuery {
    pub q: String,
    pub limit: usize,
    pub skip: usize,
    pub sort: Vec<SortKey>,
    pub include_docs: bool,
    pub include_fields: Option<Vec<String>>,
    pub highlight: Option<Highlight>,
    pub counts: Vec<String>,
    pub ranges: Option<Map<String, Value>>,
    /// `[field, value, value...]`: a match has one of the values in the field.
    pub drilldown: Vec<Vec<String>>,
    pub group_field: Option<String>,
    pub group_limit: usize,
    pub group_sort: Vec<SortKey>,
    pub update: Update,
}

/// A parameter as JSON: its JSON text, or else the text as a string.
fn lenient(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|_| Value::String(text.to_string()))
}

fn strings(value: Value, name: &str) -> Result<Vec<String>> {
    let bad = || Error::BadRequest(format!("`{name}` must be an array of strings"));
    match value {
        Value::String(s) => Ok(vec![s]),
        Value::Array(items) => items
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                Value::Number(n) => Ok(n.to_string()),
                Value::Bool(b) => Ok(b.to_string()),
                _ => Err(bad()),
            })
            .collect(),
        _ => Err(bad()),
    }
}

fn sort_keys(value: Value) -> Result<Vec<SortKey>> {
    strings(value, "sort")?
        .into_iter()
        .map(|s| {
            let (descending, rest) = match s.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, s.strip_prefix('+').unwrap_or(&s)),
            };
            let field = rest
                .strip_suffix("<number>")
                .or_else(|| rest.strip_suffix("<string>"))
                .unwrap_or(rest);
            if field.is_empty() {
                return Err(Error::BadRequest(format!("bad sort field: {s}")));
            }
            Ok(SortKey { field: field.to_string(), descending })
        })
        .collect()
}

impl SearchQuery {
    /// Reads the parameters given by `get` (query string values, or a POST body's members
    /// as JSON text).
    pub fn parse(get: &dyn Fn(&str) -> Option<String>) -> Result<SearchQuery> {
        // The query is text as given (a POST body's string member arrives unquoted).
        let q = get("q").or_else(|| get("query"));
        let q = q.ok_or_else(|| {
            Error::BadRequest("Query must include a 'q' or 'query' argument".into())
        })?;
        let number = |name: &str, default: usize| -> Result<usize> {
            match get(name) {
                None => Ok(default),
                Some(text) => match lenient(&text) {
                    Value::Number(n) => n.as_u64().map(|n| n as usize),
                    Value::String(s) => s.parse().ok(),
                    _ => None,
                }
                .ok_or_else(|| Error::BadRequest(format!("`{name}` must be a positive integer"))),
            }
        };
        let flag = |name: &str| -> Result<bool> {
            match get(name).map(|t| lenient(&t)) {
                None => Ok(false),
                Some(Value::Bool(b)) => Ok(b),
                Some(Value::String(s)) if s == "true" || s == "false" => Ok(s == "true"),
                Some(_) => Err(Error::BadRequest(format!("`{name}` must be a boolean"))),
            }
        };
        let text = |name: &str| {
            get(name).map(|t| match lenient(&t) {
                Value::String(s) => s,
                other => other.to_string(),
            })
        };
        let limit = number("limit", 25)?;
        if limit > MAX_PARTITION_LIMIT {
            return Err(limit_error(MAX_PARTITION_LIMIT));
        }
        let skip = match get("bookmark") {
            None => 0,
            Some(b) => decode_bookmark(&text_of(&b))?,
        };
        let highlight = match get("highlight_fields") {
            None => None,
            Some(fields) => Some(Highlight {
                fields: strings(lenient(&fields), "highlight_fields")?,
                pre: text("highlight_pre_tag").unwrap_or_else(|| "<em>".into()),
                post: text("highlight_post_tag").unwrap_or_else(|| "</em>".into()),
                number: number("highlight_number", 1)?.max(1),
                size: number("highlight_size", 100)?.max(1),
            }),
        };
        let drilldown = match get("drilldown").map(|d| lenient(&d)) {
            None => Vec::new(),
            Some(Value::Array(items)) if items.iter().all(Value::is_array) => {
                items.into_iter().map(|d| strings(d, "drilldown")).collect::<Result<_>>()?
            }
            Some(d) => vec![strings(d, "drilldown")?],
        };
        if drilldown.iter().any(|d| d.len() < 2) {
            return Err(Error::BadRequest("`drilldown` must be [field, value, ...]".into()));
        }
        let ranges = match get("ranges").map(|r| lenient(&r)) {
            None => None,
            Some(Value::Object(r)) => Some(r),
            Some(_) => return Err(Error::BadRequest("`ranges` must be a JSON object".into())),
        };
        let update = Update::parse(text("update").as_deref(), text("stale").as_deref())
            .map_err(|name| Error::BadRequest(format!("Invalid value for `{name}`.")))?;
        Ok(SearchQuery {
            q,
            limit,
            skip,
            sort: get("sort").map(|s| sort_keys(lenient(&s))).transpose()?.unwrap_or_default(),
            include_docs: flag("include_docs")?,
            include_fields: get("include_fields")
                .map(|f| strings(lenient(&f), "include_fields"))
                .transpose()?,
            highlight,
            counts: get("counts")
                .map(|c| strings(lenient(&c), "counts"))
                .transpose()?
                .unwrap_or_default(),
            ranges,
            drilldown,
            group_field: text("group_field"),
            group_limit: number("group_limit", 1)?,
            group_sort: get("group_sort")
                .map(|s| sort_keys(lenient(&s)))
                .transpose()?
                .unwrap_or_default(),
            update,
        })
    }
}

fn limit_error(max: usize) -> Error {
    Error::BadRequest(format!("Limit must be less than or equal to {max}"))
}

impl SearchQuery {
    /// Adds the `drilldown` parameters of a query string that repeats it (each a JSON
    /// array), in place of the one [`SearchQuery::parse`] saw.
    pub fn set_drilldowns(&mut self, values: &[String]) -> Result<()> {
        let mut all = Vec::new();
        for value in values {
            all.push(strings(lenient(value), "drilldown")?);
        }
        if all.iter().any(|d| d.len() < 2) {
            return Err(Error::BadRequest("`drilldown` must be [field, value, ...]".into()));
        }
        self.drilldown = all;
        Ok(())
    }
}

fn text_of(value: &str) -> String {
    match lenient(value) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

fn encode_bookmark(skip: usize) -> String {
    URL_SAFE_NO_PAD.encode(json!([skip]).to_string())
}

fn decode_bookmark(bookmark: &str) -> Result<usize> {
    let bad = || Error::BadRequest("Invalid bookmark".into());
    let bytes = URL_SAFE_NO_PAD.decode(bookmark).map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    value.get(0).and_then(Value::as_u64).map(|n| n as usize).ok_or_else(bad)
}

/// What rendering a row needs besides the row.
struct Ctx<'a> {
    terms: &'a HashMap<String, HashSet<String>>,
    analyzers: &'a crate::analyzer::Analyzers,
    doc: &'a dyn Fn(&str) -> Option<Value>,
}

/// One matching document.
#[derive(Debug, Clone)]
pub struct Hit {
    pub id: String,
    pub score: f32,
    /// Position in index order, Lucene's doc number.
    pub doc: u64,
    /// The document's `index()` calls: name, value, store, facet.
    pub fields: Vec<(String, Value, bool, bool)>,
}

impl Hit {
    fn first(&self, field: &str) -> Option<&Value> {
        self.fields.iter().find(|f| f.0 == field).map(|f| &f.1)
    }

    fn sort_value(&self, field: &str) -> Value {
        match field {
            "<score>" => json!(self.score),
            "<doc>" => json!(self.doc),
            _ => self.first(field).cloned().unwrap_or(Value::Null),
        }
    }

    /// `order`: the sort values, then the doc number (relevance: score, doc number).
    fn order(&self, sort: &[SortKey]) -> Value {
        let mut order: Vec<Value> = if sort.is_empty() {
            vec![json!(self.score)]
        } else {
            sort.iter().map(|k| self.sort_value(&k.field)).collect()
        };
        order.push(json!(self.doc));
        Value::Array(order)
    }
}

/// Compares field values as Lucene sorts: numbers by value, strings by text, a missing
/// value last.
fn compare_values(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Greater,
        (_, Value::Null) => Ordering::Less,
        (Value::Number(x), Value::Number(y)) => {
            x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0))
        }
        (Value::Number(_), _) => Ordering::Less,
        (_, Value::Number(_)) => Ordering::Greater,
        _ => value_text(a).cmp(&value_text(b)),
    }
}

fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn compare_hits(a: &Hit, b: &Hit, sort: &[SortKey]) -> Ordering {
    if sort.is_empty() {
        return by_relevance((a.score, &a.id, a.doc), (b.score, &b.id, b.doc));
    }
    let values = |h: &Hit| sort.iter().map(|k| h.sort_value(&k.field)).collect::<Vec<_>>();
    compare_sorted(&values(a), &values(b), sort).then(a.doc.cmp(&b.doc))
}

/// Equally relevant rows in id order, as Clouseau answers within one shard.
fn by_relevance(a: (f32, &str, u64), b: (f32, &str, u64)) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(b.1)).then(a.2.cmp(&b.2))
}

/// Compares two rows' sort values, key by key (`<score>` descends by default, a missing
/// value stays last either way).
fn compare_sorted(xs: &[Value], ys: &[Value], sort: &[SortKey]) -> Ordering {
    for ((key, x), y) in sort.iter().zip(xs).zip(ys) {
        let mut ord = compare_values(x, y);
        if key.field == "<score>" {
            ord = ord.reverse();
        }
        if key.descending && !(x.is_null() || y.is_null()) {
            ord = ord.reverse();
        }
        if ord != Ordering::Equal {
            return ord;
        }
    }
    Ordering::Equal
}

/// Runs `q` on `index`, in `partition` if given; `doc` loads a document for
/// `include_docs`.
pub fn run(
    index: &SearchIndex,
    q: &SearchQuery,
    partition: Option<&str>,
    doc: &dyn Fn(&str) -> Option<Value>,
) -> Result<Value> {
    if partition.is_none() && q.limit > MAX_LIMIT {
        return Err(limit_error(MAX_LIMIT));
    }
    let compiled = compile(&q.q, index.fields, &index.def.analyzers)?;
    let query: Box<dyn Query> = match partition {
        None => compiled.query,
        Some(p) => {
            let part = Term::from_field_text(index.fields.part, p);
            let part = Box::new(TermQuery::new(part, IndexRecordOption::Basic));
            Box::new(BooleanQuery::new(vec![(Occur::Must, compiled.query), (Occur::Must, part)]))
        }
    };
    let ctx = Ctx { terms: &compiled.terms, analyzers: &index.def.analyzers, doc };
    if q.group_field.is_none()
        && q.counts.is_empty()
        && q.ranges.is_none()
        && q.drilldown.is_empty()
    {
        return ranked_page(index, query.as_ref(), q, &ctx);
    }
    let mut hits = matches(index, query.as_ref())?;
    hits.retain(|h| drilled(h, &q.drilldown));
    let mut out = Map::new();
    out.insert("total_rows".into(), json!(hits.len()));
    if let Some(group) = &q.group_field {
        out.insert("groups".into(), groups(&mut hits, group, q, &ctx));
        return Ok(Value::Object(out));
    }
    hits.sort_by(|a, b| compare_hits(a, b, &q.sort));
    let page: Vec<&Hit> = hits.iter().skip(q.skip).take(q.limit).collect();
    out.insert("bookmark".into(), json!(encode_bookmark(q.skip + page.len())));
    let rows: Vec<Value> = page.iter().map(|h| row(h, q, &ctx)).collect();
    out.insert("rows".into(), Value::Array(rows));
    if !q.counts.is_empty() {
        out.insert("counts".into(), counts(&hits, &q.counts));
    }
    if let Some(ranges) = &q.ranges {
        out.insert("ranges".into(), range_counts(&hits, ranges)?);
    }
    Ok(Value::Object(out))
}

/// The page of `q` ranked from fast columns: the count of matches, then only the rows'
/// stored fields.
fn ranked_page(
    index: &SearchIndex,
    query: &dyn Query,
    q: &SearchQuery,
    ctx: &Ctx,
) -> Result<Value> {
    let searcher = index.reader.searcher();
    let total = searcher.search(query, &Count).map_err(search_err)?;
    let keys: Vec<Key> = (q.sort.iter())
        .map(|k| match k.field.as_str() {
            "<score>" => Key::Score,
            "<doc>" => Key::Doc,
            field => Key::Field(field.to_string()),
        })
        .collect();
    let sort = q.sort.clone();
    let order: Order = if sort.is_empty() {
        Arc::new(|a: &Ranked, b: &Ranked| {
            let id = |r: &Ranked| r.id.clone().unwrap_or_default();
            by_relevance((a.score, &id(a), a.doc), (b.score, &id(b), b.doc))
        })
    } else {
        Arc::new(move |a: &Ranked, b: &Ranked| {
            compare_sorted(&a.values, &b.values, &sort).then(a.doc.cmp(&b.doc))
        })
    };
    let wanted = q.skip.saturating_add(q.limit);
    let top = ranked::top(index, query, &keys, q.sort.is_empty(), wanted, order)?;
    let mut rows = Vec::new();
    for (ranked, address) in top.into_iter().skip(q.skip).take(q.limit) {
        rows.push(row(&hit(index, &searcher, ranked.score, address)?, q, ctx));
    }
    let mut out = Map::new();
    out.insert("total_rows".into(), json!(total));
    out.insert("bookmark".into(), json!(encode_bookmark(q.skip + rows.len())));
    out.insert("rows".into(), Value::Array(rows));
    Ok(Value::Object(out))
}

fn search_err(e: tantivy::TantivyError) -> Error {
    Error::Unknown(format!("search: {e}"))
}

/// Every match of `query`, with its score and stored fields.
pub(crate) fn matches(index: &SearchIndex, query: &dyn Query) -> Result<Vec<Hit>> {
    let searcher = index.reader.searcher();
    let total = searcher.search(query, &Count).map_err(search_err)?;
    let top = searcher.search(query, &TopDocs::with_limit(total.max(1))).map_err(search_err)?;
    top.into_iter().map(|(score, address)| hit(index, &searcher, score, address)).collect()
}

/// The match at `address`, with its stored fields.
pub(crate) fn hit(
    index: &SearchIndex,
    searcher: &Searcher,
    score: f32,
    address: DocAddress,
) -> Result<Hit> {
    let stored: TantivyDocument = searcher.doc(address).map_err(search_err)?;
    let text =
        |field| stored.get_first(field).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let id = text(index.fields.id);
    let calls: Vec<Value> = serde_json::from_str(&text(index.fields.stored)).unwrap_or_default();
    let fields = calls
        .into_iter()
        .filter_map(|c| {
            let name = c.get(0)?.as_str()?.to_string();
            let store = c.get(2).and_then(Value::as_bool).unwrap_or(false);
            let facet = c.get(3).and_then(Value::as_bool).unwrap_or(false);
            Some((name, c.get(1)?.clone(), store, facet))
        })
        .collect();
    let base = searcher.segment_readers().iter().take(address.segment_ord as usize);
    let doc = base.map(|s| u64::from(s.max_doc())).sum::<u64>() + u64::from(address.doc_id);
    Ok(Hit { id, score, doc, fields })
}

/// Whether `hit` passes every drilldown: one of the values, unanalyzed, in the field.
fn drilled(hit: &Hit, drilldown: &[Vec<String>]) -> bool {
    drilldown.iter().all(|d| {
        let (field, values) = (&d[0], &d[1..]);
        hit.fields.iter().any(|f| &f.0 == field && values.contains(&value_text(&f.1)))
    })
}

fn row(hit: &Hit, q: &SearchQuery, ctx: &Ctx) -> Value {
    let sort = if q.group_field.is_some() { &q.group_sort } else { &q.sort };
    let mut fields = Map::new();
    for (name, value, store, _) in &hit.fields {
        let wanted = match &q.include_fields {
            Some(list) => list.contains(name),
            None => true,
        };
        if !*store || !wanted {
            continue;
        }
        match fields.get_mut(name) {
            None => {
                fields.insert(name.clone(), value.clone());
            }
            Some(Value::Array(values)) => values.push(value.clone()),
            Some(first) => *first = json!([first.clone(), value.clone()]),
        }
    }
    let mut row = Map::new();
    row.insert("id".into(), json!(hit.id));
    row.insert("order".into(), hit.order(sort));
    row.insert("fields".into(), Value::Object(fields));
    if let Some(h) = &q.highlight {
        row.insert(
            "highlights".into(),
            crate::highlight::highlights(hit, h, ctx.terms, ctx.analyzers),
        );
    }
    if q.include_docs {
        row.insert("doc".into(), (ctx.doc)(&hit.id).unwrap_or(Value::Null));
    }
    Value::Object(row)
}

/// `counts`: per field, the number of matches per value, most frequent first.
fn counts(hits: &[Hit], fields: &[String]) -> Value {
    let mut out = Map::new();
    for field in fields {
        let mut tally: BTreeMap<String, u64> = BTreeMap::new();
        for hit in hits {
            let values: HashSet<String> =
                hit.fields.iter().filter(|f| &f.0 == field).map(|f| value_text(&f.1)).collect();
            for value in values {
                *tally.entry(value).or_default() += 1;
            }
        }
        let map: Map<String, Value> = tally.into_iter().map(|(k, n)| (k, json!(n))).collect();
        out.insert(field.clone(), Value::Object(map));
    }
    Value::Object(out)
}

/// `ranges`: per field and label, the matches whose number falls in the label's range.
fn range_counts(hits: &[Hit], ranges: &Map<String, Value>) -> Result<Value> {
    let mut out = Map::new();
    for (field, labels) in ranges {
        let Value::Object(labels) = labels else {
            return Err(Error::BadRequest(format!("ranges of {field} must be an object")));
        };
        let mut counted = Map::new();
        for (label, range) in labels {
            let range = range
                .as_str()
                .ok_or_else(|| Error::BadRequest("a range must be a string".into()))?;
            let bounds = crate::highlight::parse_range(range)?;
            let n = hits
                .iter()
                .filter(|h| {
                    h.fields
                        .iter()
                        .any(|f| &f.0 == field && f.1.as_f64().is_some_and(|x| bounds.contains(x)))
                })
                .count();
            counted.insert(label.clone(), json!(n));
        }
        out.insert(field.clone(), Value::Object(counted));
    }
    Ok(Value::Object(out))
}

/// `group_field`: the matches by the field's value, each group's rows sorted by `sort`
/// and cut to `group_limit`; groups in `group_sort` order (by default, of their best row).
fn groups(hits: &mut [Hit], field: &str, q: &SearchQuery, ctx: &Ctx) -> Value {
    hits.sort_by(|a, b| compare_hits(a, b, &q.sort));
    let mut order: Vec<Value> = Vec::new();
    let mut by: HashMap<String, Vec<&Hit>> = HashMap::new();
    for hit in hits.iter() {
        let key = hit.first(field).cloned().unwrap_or(Value::Null);
        let text = value_text(&key);
        if !by.contains_key(&text) {
            order.push(key);
        }
        by.entry(text).or_default().push(hit);
    }
    if !q.group_sort.is_empty() {
        order.sort_by(|a, b| {
            let (x, y) = (&by[&value_text(a)][0], &by[&value_text(b)][0]);
            compare_hits(x, y, &q.group_sort)
        });
    }
    let q_rows = SearchQuery { group_field: None, ..q.clone() };
    order
        .into_iter()
        .skip(q.skip)
        .take(q.limit)
        .map(|key| {
            let members = &by[&value_text(&key)];
            let rows: Vec<Value> =
                members.iter().take(q.group_limit).map(|h| row(h, &q_rows, ctx)).collect();
            json!({"by": key, "total_rows": members.len(), "rows": rows})
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn parameters_parse_as_cloudant_documents_them() -> Result<()> {
        let q = SearchQuery::parse(&params(&[
            ("q", "name:bridge"),
            ("sort", r#"["-price<number>", "name<string>"]"#),
            ("limit", "5"),
            ("drilldown", r#"["type", "sensor"]"#),
            ("stale", "ok"),
        ]))?;
        assert_eq!(q.q, "name:bridge");
        assert_eq!(q.limit, 5);
        assert_eq!(
            q.sort,
            vec![
                SortKey { field: "price".into(), descending: true },
                SortKey { field: "name".into(), descending: false }
            ]
        );
        assert_eq!(q.drilldown, vec![vec!["type".to_string(), "sensor".to_string()]]);
        assert_eq!(q.update, Update::False);
        assert!(SearchQuery::parse(&params(&[])).is_err(), "q is required");
        assert!(SearchQuery::parse(&params(&[("q", "a"), ("limit", "2001")])).is_err());
        let next = SearchQuery::parse(&params(&[("q", "a"), ("bookmark", &encode_bookmark(25))]))?;
        assert_eq!(next.skip, 25);
        Ok(())
    }
}
