//! `find`'s `projection` (and `findAndModify`'s `fields`) as MongoDB 4.4+ reads it: the
//! `$project` part (inclusion, exclusion, dotted paths, sub-documents, computed fields and
//! literals, evaluated by the shared expression evaluator's [`Shape`]) plus the find-only
//! operators applied to the document first: `{arr: {$slice: n | [skip, limit]}}`,
//! `{arr: {$elemMatch: cond}}` and positional `{"arr.$": 1}` (the first element the query's
//! condition on `arr` matched). `{_id: 1}` alone keeps only `_id`. `{$meta: "sortKey"}`
//! adds the values the find's sort ordered the document by (one per sort field, as the sort
//! reads them: a missing field `null`, an array its smallest element ascending, its largest
//! descending), without turning the projection into an inclusion; without a sort it is
//! MongoDB's `BadValue`. `{$meta: "indexKey"}` adds the key of the index the query found
//! the document at (left out when no index was used) and `{$meta: "recordId"}` the
//! document's record id ([`crate::record_meta`]); a `returnKey` projection keeps only the
//! index key and the sort keys (MongoDB ignores the rest of the projection then). These
//! fields go after the projected ones, in the projection's order. Other `$meta` arguments
//! are refused as MongoDB refuses them without the metadata (`textScore` without `$text`:
//! 40218; an unknown argument: 17308); the others MongoDB knows (search and geo metadata)
//! are `NotImplemented`, and so are `indexKey`/`recordId` inside computed expressions.

use std::sync::Arc;

use bson::{Bson, DateTime, Document, doc};
use bunko_query::agg::Shape;
use bunko_query::expr::{Expr, SortSpec, Vars};
use bunko_query::update::{Filter, first_matched};
use bunko_query::{Direction, FieldPath, Selector};

use crate::error::MongoError;
use crate::query::{self, matches};
use crate::record_meta::{self, KeySource};

/// A parsed projection.
#[derive(Debug, Clone)]
pub struct Projection {
    /// The `$project` part; `None` keeps the (operated) document whole.
    shape: Option<Shape>,
    /// Find-only operators, applied to the input before `shape`.
    ops: Vec<(Vec<String>, Op)>,
    /// The paths it reads, when an index holding them may answer (a plain inclusion).
    paths: Option<Vec<FieldPath>>,
    /// Fields set to the document's metadata (`{$meta: "sortKey"}` and the like).
    metas: Vec<(String, Meta)>,
    /// The find's sort (paths, ascending), which the sort keys hold values of.
    order: Option<SortSpec>,
    /// `returnKey`: the document is its index key (and its sort keys) alone.
    return_key: bool,
    /// Where index keys come from ([`Projection::needs_keys`]); unset: no index.
    keys: Option<Arc<KeySource>>,
}

/// A `{$meta: …}` field a find's projection fills.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Meta {
    SortKey,
    IndexKey,
    RecordId,
}

#[derive(Clone)]
enum Op {
    Slice(Option<i64>, i64),
    ElemMatch(Selector),
    Positional(Filter),
}

impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Op::Slice(..) => "$slice",
            Op::ElemMatch(_) => "$elemMatch",
            Op::Positional(_) => "$",
        })
    }
}

/// What parsing learned of the projection's type (MongoDB's rules for ambiguous ones).
#[derive(Default)]
struct Seen {
    include: Option<bool>,
    id: Option<bool>,
    slice: bool,
    elem_match: bool,
    positional: bool,
    computed: bool,
}

fn err(code: i32, msg: impl Into<String>) -> MongoError {
    bunko_query::expr::ExprError::location(code, msg).into()
}

fn is_number_or_bool(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Boolean(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

impl Seen {
    /// Records an inclusion (`true`) or exclusion of `field`, refusing a mix.
    fn mode(&mut self, field: &str, on: bool) -> Result<(), MongoError> {
        match self.include {
            Some(true) if !on => Err(err(
                31254,
                format!("Cannot do exclusion on field {field} in inclusion projection"),
            )),
            Some(false) if on => Err(err(
                31253,
                format!("Cannot do inclusion on field {field} in exclusion projection"),
            )),
            _ => {
                self.include = Some(on);
                Ok(())
            }
        }
    }

    /// Whether the projection includes (MongoDB's `computeProjectionType`).
    fn inclusion(&self) -> bool {
        self.include.unwrap_or(if self.slice {
            self.id == Some(true)
        } else {
            self.elem_match || self.id == Some(true)
        })
    }
}

impl Projection {
    /// `None` for an empty projection (whole documents). `filter` is the query's, which
    /// positional `$` refers to.
    pub fn parse(spec: &Document, filter: &Document) -> Result<Option<Projection>, MongoError> {
        if spec.is_empty() {
            return Ok(None);
        }
        let mut seen = Seen::default();
        let mut plain = Document::new();
        let mut ops = Vec::new();
        let mut metas = Vec::new();
        let mut flat = Vec::new();
        flatten(spec, "", &mut flat)?;
        for (field, value) in &flat {
            if field.contains(".$.") {
                return Err(err(
                    31394,
                    "As of 4.4, it's illegal to specify positional operator in the middle of a path.Positional projection may only be used at the end, for example: a.b.$. If the query previously used a form like a.b.$.d, remove the parts following the '$' and the results will be equivalent.",
                ));
            }
            if let Some(path) = field.strip_suffix(".$").or((field == "$").then_some("")) {
                let op = positional(&mut seen, field, path, value, filter)?;
                ops.push((split(path), op));
                continue;
            }
            if let Some(meta) = meta_of(value) {
                if field.contains('.') {
                    return Err(MongoError::not_implemented(format!(
                        "$meta projection into a dotted field ({field}) is not supported yet"
                    )));
                }
                metas.push((field.clone(), meta));
                continue;
            }
            if let Some(op) = find_operator(&mut seen, field, value)? {
                ops.push((split(field), op));
                continue;
            }
            classify(&mut seen, field, value)?;
            plain.insert(field.clone(), (*value).clone());
        }
        let include = seen.inclusion();
        if include {
            for (path, _) in &ops {
                plain.insert(path.join("."), 1);
            }
        }
        let shape = if plain.is_empty() { None } else { Some(Shape::project(&plain)?) };
        let paths = match &shape {
            Some(s) if include && ops.is_empty() && !seen.computed => s
                .paths()
                .map(|p| p.iter().map(|p| FieldPath::from_segments(p.split('.'))).collect()),
            _ => None,
        };
        let paths = paths.filter(|_| metas.is_empty());
        let (return_key, keys) = (false, None);
        Ok(Some(Projection { shape, ops, paths, metas, order: None, return_key, keys }))
    }

    /// The projection of a `find` with `returnKey` (and `showRecordId`, which adds
    /// `{$recordId: {$meta: "recordId"}}` unless the projection names `$recordId`), as
    /// MongoDB builds it: `spec` is checked as usual, but with `returnKey` only its sort
    /// key fields are kept.
    pub fn parse_find(
        spec: &Document,
        filter: &Document,
        order: &[(FieldPath, Direction)],
        (return_key, show_record_id): (bool, bool),
    ) -> Result<Option<Projection>, MongoError> {
        let mut spec = spec.clone();
        if show_record_id && !spec.contains_key("$recordId") {
            spec.insert("$recordId", doc! {"$meta": "recordId"});
        }
        let projection = Projection::parse_sorted(&spec, filter, order)?;
        if !return_key {
            return Ok(projection);
        }
        let sort_keys = projection.map(|p| p.metas).unwrap_or_default();
        let mut keyed = Projection {
            shape: None,
            ops: Vec::new(),
            paths: None,
            metas: sort_keys.into_iter().filter(|(_, m)| *m == Meta::SortKey).collect(),
            order: None,
            return_key: true,
            keys: None,
        };
        keyed.sorted_by(order)?;
        Ok(Some(keyed))
    }

    /// Whether the projection shows index keys, which [`Projection::keyed`] must give it.
    pub fn needs_keys(&self) -> bool {
        self.return_key || self.metas.iter().any(|(_, m)| *m == Meta::IndexKey)
    }

    /// Gives the projection where the query found its documents (their index keys).
    pub fn keyed(&mut self, keys: KeySource) {
        self.keys = Some(Arc::new(keys));
    }

    /// [`Projection::parse`] of the projection of a query sorted by `order` (empty: not
    /// sorted), which `{$meta: "sortKey"}` reports.
    pub fn parse_sorted(
        spec: &Document,
        filter: &Document,
        order: &[(FieldPath, Direction)],
    ) -> Result<Option<Projection>, MongoError> {
        let mut projection = Projection::parse(spec, filter)?;
        if let Some(p) = projection.as_mut() {
            p.sorted_by(order)?;
        }
        Ok(projection)
    }

    /// Gives the projection the find's sort, which `{$meta: "sortKey"}` reports; without
    /// one such a projection is MongoDB's `BadValue`.
    fn sorted_by(&mut self, order: &[(FieldPath, Direction)]) -> Result<(), MongoError> {
        if self.metas.iter().any(|(_, m)| *m == Meta::SortKey) && order.is_empty() {
            return Err(MongoError::bad_value(
                "cannot use sortKey $meta projection without a sort",
            ));
        }
        self.order = (!order.is_empty()).then(|| {
            Arc::new(
                (order.iter())
                    .map(|(path, dir)| (path.segments().to_vec(), *dir == Direction::Asc))
                    .collect(),
            )
        });
        Ok(())
    }

    /// The paths an inclusion projection reads (`_id` among them unless excluded), so an
    /// index holding them all may answer from its entries (a covered query); `None` for an
    /// exclusion, which keeps every other field, and for computed fields and the find-only
    /// operators (never covered).
    pub fn paths(&self) -> Option<Vec<FieldPath>> {
        self.paths.clone()
    }

    /// The projected document; an expression's error, or `51246` when a positional `$`
    /// finds no matching element.
    pub fn apply(&self, doc: &Document) -> Result<Document, MongoError> {
        let key = match &self.keys {
            Some(keys) if self.needs_keys() => keys.key(doc)?,
            _ => None,
        };
        if self.return_key {
            let mut out = key.unwrap_or_default();
            self.add_metas(doc, None, &mut out);
            return Ok(out);
        }
        let mut input = doc.clone();
        for (path, op) in &self.ops {
            operate(&mut input, doc, path, op)?;
        }
        let mut out = match &self.shape {
            Some(shape) => {
                let mut vars = Vars::new(&input, DateTime::now()).sorted_by(self.order.clone());
                shape.apply(&input, &mut vars)?
            }
            None => input,
        };
        self.add_metas(doc, key, &mut out);
        Ok(out)
    }

    /// Adds the metadata fields of `doc` to its projected form `out`; `key`: its index key.
    fn add_metas(&self, doc: &Document, key: Option<Document>, out: &mut Document) {
        for (field, meta) in &self.metas {
            let value: Bson = match meta {
                Meta::SortKey => (self.order.iter().flat_map(|o| o.iter()))
                    .map(|(path, asc)| bunko_query::agg::document_sort_key(doc, path, *asc))
                    .collect::<Vec<Bson>>()
                    .into(),
                Meta::IndexKey => match &key {
                    Some(key) => key.clone().into(),
                    None => continue,
                },
                Meta::RecordId => record_meta::record_id(doc).into(),
            };
            out.insert(field.clone(), value);
        }
    }
}

/// The entries of `spec` with sub-projections (`{a: {b: 1}}`) as dotted paths (`a.b`), so
/// the find operators apply inside them too.
fn flatten<'a>(
    spec: &'a Document,
    prefix: &str,
    out: &mut Vec<(String, &'a Bson)>,
) -> Result<(), MongoError> {
    for (field, value) in spec {
        let path = if prefix.is_empty() { field.clone() } else { format!("{prefix}.{field}") };
        match value {
            Bson::Document(sub) if sub.is_empty() => {
                return Err(err(51270, format!("Invalid empty sub-projection: {field}")));
            }
            Bson::Document(sub) if sub.keys().next().is_some_and(|k| !k.starts_with('$')) => {
                flatten(sub, &path, out)?;
            }
            _ => out.push((path, value)),
        }
    }
    Ok(())
}

fn split(path: &str) -> Vec<String> {
    path.split('.').map(str::to_string).collect()
}

/// A positional `field.$` entry.
fn positional(
    seen: &mut Seen,
    field: &str,
    path: &str,
    value: &Bson,
    filter: &Document,
) -> Result<Op, MongoError> {
    if matches!(value, Bson::Document(_)) {
        return Err(err(
            31271,
            "positional projection cannot be used with an expression or sub object",
        ));
    }
    if !is_number_or_bool(value) {
        return Err(err(31308, "positional projection cannot be used with a literal"));
    }
    if !bunko_query::expr::value::truthy(value) {
        return Err(err(31395, "positional projection cannot be used with exclusion"));
    }
    if seen.positional {
        return Err(err(31276, "Cannot specify more than one positional projection per query."));
    }
    if seen.elem_match {
        return Err(err(31256, "Cannot specify positional operator and $elemMatch."));
    }
    if path.is_empty() {
        return Err(err(5392900, format!("Projection on field {field} is invalid")));
    }
    seen.mode(field, true)?;
    seen.positional = true;
    let selector = query::selector(filter)?;
    Ok(Op::Positional(Filter::new(move |d| matches(&selector, d))))
}

/// `{field: {$slice: ...}}` or `{field: {$elemMatch: ...}}` as find reads them; `None` for
/// anything else (a `$slice` that is not find's falls to the aggregation expression).
fn find_operator(seen: &mut Seen, field: &str, value: &Bson) -> Result<Option<Op>, MongoError> {
    let Bson::Document(sub) = value else { return Ok(None) };
    let mut entries = sub.iter();
    let (Some((op, arg)), None) = (entries.next(), entries.next()) else { return Ok(None) };
    match op.as_str() {
        "$slice" => match find_slice(arg) {
            Ok((skip, limit)) => {
                seen.slice = true;
                Ok(Some(Op::Slice(skip, limit)))
            }
            Err(find_err) => match Expr::parse(value) {
                Ok(_) => Ok(None),
                Err(e) => {
                    let e = MongoError::from(e);
                    Err(MongoError::new(
                        e.code,
                        e.code_name,
                        format!(
                            "Invalid $slice syntax. The given syntax {value} did not match the find() syntax because :: {} :: The given syntax did not match the expression $slice syntax. :: caused by :: {}",
                            find_err.errmsg, e.errmsg
                        ),
                    ))
                }
            },
        },
        "$elemMatch" => {
            let Bson::Document(cond) = arg else {
                return Err(err(
                    31274,
                    format!(
                        "elemMatch: Invalid argument, object required, but got {}",
                        type_name(arg)
                    ),
                ));
            };
            if seen.positional {
                return Err(err(31255, "Cannot specify positional operator and $elemMatch."));
            }
            if field.contains('.') {
                return Err(err(31275, "Cannot use $elemMatch projection on a nested field."));
            }
            seen.elem_match = true;
            let selector = query::selector(&doc! {field: {"$elemMatch": cond.clone()}})?;
            Ok(Some(Op::ElemMatch(selector)))
        }
        "$meta" => Err(meta_error(arg)),
        _ => Ok(None),
    }
}

/// The metadata a projection value `{$meta: "sortKey" | "indexKey" | "recordId"}` asks for.
fn meta_of(value: &Bson) -> Option<Meta> {
    let Bson::Document(sub) = value else { return None };
    match (sub.len(), sub.get("$meta")) {
        (1, Some(Bson::String(s))) if s == "sortKey" => Some(Meta::SortKey),
        (1, Some(Bson::String(s))) if s == "indexKey" => Some(Meta::IndexKey),
        (1, Some(Bson::String(s))) if s == "recordId" => Some(Meta::RecordId),
        _ => None,
    }
}

/// Why a `{$meta: arg}` projection other than `sortKey` is refused, as MongoDB refuses
/// it when it parses the projection ([`bunko_query::expr::meta`]).
fn meta_error(arg: &Bson) -> MongoError {
    bunko_query::expr::meta::unavailable(arg).into()
}

fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Array(_) => "array",
        Bson::String(_) => "string",
        Bson::Null => "null",
        Bson::Boolean(_) => "bool",
        Bson::Int32(_) => "int",
        Bson::Int64(_) => "long",
        Bson::Double(_) => "double",
        _ => "object",
    }
}

fn number(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        // MongoDB's safeNumberInt truncates.
        Bson::Double(d) if d.is_finite() => Some(*d as i64),
        Bson::Decimal128(d) => d.to_string().parse::<f64>().ok().map(|d| d as i64),
        _ => None,
    }
}

/// find's `$slice` argument: `n` or `[skip, limit]`.
fn find_slice(arg: &Bson) -> Result<(Option<i64>, i64), MongoError> {
    if let Some(n) = number(arg) {
        return Ok((None, n));
    }
    let Bson::Array(items) = arg else {
        return Err(err(31273, "$slice only supports numbers and [skip, limit] arrays"));
    };
    let [skip, limit] = items.as_slice() else {
        return Err(err(31272, "$slice array argument should be of form [skip, limit]"));
    };
    let skip = number(skip).ok_or_else(|| {
        err(
            31257,
            format!("$slice expects the skip argument to be a number, got {}", type_name(skip)),
        )
    })?;
    let limit = number(limit).ok_or_else(|| {
        err(
            31258,
            format!("$slice expects the limit argument to be a number, got {}", type_name(limit)),
        )
    })?;
    if limit <= 0 {
        return Err(err(31259, format!("$slice limit must be positive, got {limit}")));
    }
    Ok((Some(skip), limit))
}

/// Records what a plain (`$project`-like) entry of the flattened spec says of the
/// projection's type.
fn classify(seen: &mut Seen, field: &str, value: &Bson) -> Result<(), MongoError> {
    if field == "_id" && is_number_or_bool(value) {
        seen.id = Some(bunko_query::expr::value::truthy(value));
        return Ok(());
    }
    match value {
        v if is_number_or_bool(v) => seen.mode(field, bunko_query::expr::value::truthy(v)),
        Bson::Document(_) => {
            seen.computed = true;
            if seen.include == Some(false) {
                return Err(err(
                    31252,
                    "Cannot use expression other than $meta in exclusion projection",
                ));
            }
            seen.include = Some(true);
            Ok(())
        }
        other => {
            seen.computed = true;
            if seen.include == Some(false) {
                return Err(err(
                    31310,
                    format!("Cannot use an expression {field}: {other} in an exclusion projection"),
                ));
            }
            seen.include = Some(true);
            Ok(())
        }
    }
}

/// Applies a find-only operator at `path` of `input` (`original`: the stored document).
fn operate(
    input: &mut Document,
    original: &Document,
    path: &[String],
    op: &Op,
) -> Result<(), MongoError> {
    match op {
        Op::Slice(skip, limit) => {
            each_at(input, path, &mut |v| {
                if let Bson::Array(items) = v {
                    *items = slice(std::mem::take(items), *skip, *limit);
                }
            });
            Ok(())
        }
        Op::ElemMatch(selector) => {
            let field = &path[0];
            let first = match input.get(field) {
                Some(Bson::Array(items)) => {
                    items.iter().find(|i| matches(selector, &doc! {field: [(*i).clone()]})).cloned()
                }
                _ => None,
            };
            match first {
                Some(item) => input.insert(field.clone(), Bson::Array(vec![item])),
                None => input.remove(field),
            };
            Ok(())
        }
        Op::Positional(filter) => {
            let Some(Bson::Array(items)) = get(original, path) else { return Ok(()) };
            let item = first_matched(original, path, filter)
                .and_then(|i| items.get(i).cloned())
                .ok_or_else(|| {
                    err(
                        51246,
                        "Executor error during find command :: caused by :: positional operator '.$' couldn't find a matching element in the array",
                    )
                })?;
            each_at(input, path, &mut |v| *v = Bson::Array(vec![item.clone()]));
            Ok(())
        }
    }
}

fn get<'a>(doc: &'a Document, path: &[String]) -> Option<&'a Bson> {
    let (first, rest) = path.split_first()?;
    let v = doc.get(first)?;
    match (rest.is_empty(), v) {
        (true, v) => Some(v),
        (false, Bson::Document(d)) => get(d, rest),
        _ => None,
    }
}

/// Calls `f` on the values at `path`, through sub-documents and arrays of them.
fn each_at(doc: &mut Document, path: &[String], f: &mut dyn FnMut(&mut Bson)) {
    let Some((first, rest)) = path.split_first() else { return };
    let Some(v) = doc.get_mut(first) else { return };
    if rest.is_empty() {
        f(v);
        return;
    }
    match v {
        Bson::Document(d) => each_at(d, rest, f),
        Bson::Array(items) => items.iter_mut().for_each(|i| {
            if let Bson::Document(d) = i {
                each_at(d, rest, f);
            }
        }),
        _ => {}
    }
}

/// find's `$slice`: the first `n` (last `-n`) elements, or `limit` from `skip` (from the end
/// when negative).
fn slice(items: Vec<Bson>, skip: Option<i64>, limit: i64) -> Vec<Bson> {
    let len = items.len() as i64;
    let (from, count) = match skip {
        None if limit >= 0 => (0, limit),
        None => ((len + limit).max(0), len),
        Some(s) if s >= 0 => (s.min(len), limit),
        Some(s) => ((len + s).max(0), limit),
    };
    items.into_iter().skip(from as usize).take(count.max(0) as usize).collect()
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::*;

    fn project(spec: Document, filter: Document, d: &Document) -> Result<Document, MongoError> {
        Projection::parse(&spec, &filter)?.map_or(Ok(d.clone()), |p| p.apply(d))
    }

    #[test]
    fn projections_as_mongodb() -> Result<(), MongoError> {
        let d = doc! {"_id": 1, "name": "Sato", "addr": [{"city": "Nagoya", "zip": "460"}, 5], "x": {"y": 1, "z": 2}};
        let p = |spec| project(spec, doc! {}, &d);
        assert_eq!(p(doc! {"name": 1})?, doc! {"_id": 1, "name": "Sato"});
        assert_eq!(p(doc! {"addr.city": 1, "_id": 0})?, doc! {"addr": [{"city": "Nagoya"}]});
        assert_eq!(p(doc! {"x.y": 0, "addr": 0})?, doc! {"_id": 1, "name": "Sato", "x": {"z": 2}});
        assert!(!p(doc! {"_id": 0})?.contains_key("_id"));
        assert_eq!(p(doc! {"_id": 1})?, doc! {"_id": 1});
        assert_eq!(p(doc! {})?, d);
        assert_eq!(p(doc! {"a": 1, "b": 0}).err().map(|e| e.code), Some(31254));
        assert_eq!(p(doc! {"a": {"$meta": "textScore"}}).err().map(|e| e.code), Some(40218));
        assert_eq!(p(doc! {"a": {"$meta": "indexKey"}})?, d, "no index: no key");
        assert_eq!(p(doc! {"a": {"$meta": "searchScore"}}).err().map(|e| e.code), Some(238));
        let id = record_meta::record_id(&d);
        assert_eq!(
            p(doc! {"name": 1, "r": {"$meta": "recordId"}})?,
            doc! {"_id": 1, "name": "Sato", "r": id}
        );
        assert_eq!(p(doc! {"a": {"$meta": "bogus"}}).err().map(|e| e.code), Some(17308));
        assert_eq!(
            p(doc! {"_id": 0, "n": {"$concat": ["$name", "!"]}, "c": "$x.z"})?,
            doc! {"n": "Sato!", "c": 2}
        );
        Ok(())
    }

    #[test]
    fn find_operators() -> Result<(), MongoError> {
        let d = doc! {"_id": 1, "a": [1, 2, 3, 4, 5], "s": [{"k": 1}, {"k": 2}, {"k": 2}]};
        let p = |spec| project(spec, doc! {"a": {"$gt": 2}}, &d);
        let a = |spec| p(spec).map(|d| d.get("a").cloned());
        assert_eq!(a(doc! {"a": {"$slice": 2}})?, Some(bson::bson!([1, 2])));
        assert_eq!(a(doc! {"a": {"$slice": -1}})?, Some(bson::bson!([5])));
        assert_eq!(a(doc! {"a": {"$slice": [-2, 5]}})?, Some(bson::bson!([4, 5])));
        assert_eq!(p(doc! {"a.$": 1})?, doc! {"_id": 1, "a": [3]});
        assert_eq!(
            p(doc! {"s": {"$elemMatch": {"k": 2}}})?,
            doc! {"_id": 1, "s": [{"k": 2}]},
            "the first match only, as an inclusion"
        );
        assert_eq!(p(doc! {"s": {"$elemMatch": {"k": 3}}})?, doc! {"_id": 1});
        let nested = doc! {"_id": 1, "o": {"a": [1, 2, 3], "b": 2}};
        let n = |spec| project(spec, doc! {}, &nested);
        assert_eq!(n(doc! {"o": {"a": {"$slice": 1}}})?, doc! {"_id": 1, "o": {"a": [1], "b": 2}});
        assert_eq!(n(doc! {"o": {"b": 1}})?, doc! {"_id": 1, "o": {"b": 2}});
        assert_eq!(n(doc! {"o": {"a": {"$elemMatch": {}}}}).err().map(|e| e.code), Some(31275));
        assert_eq!(n(doc! {"o": {}}).err().map(|e| e.code), Some(51270));
        // Not find's `$slice`, nor the expression's.
        let bad = p(doc! {"a": {"$slice": "x"}}).err().map(|e| e.errmsg).unwrap_or_default();
        assert!(bad.starts_with("Invalid $slice syntax."), "{bad}");
        Ok(())
    }

    #[test]
    fn only_plain_inclusions_are_covered() -> Result<(), MongoError> {
        let paths = |spec| {
            Projection::parse(&spec, &doc! {"a": 1}).map(|p| p.and_then(|p| p.paths()).is_some())
        };
        assert!(paths(doc! {"a": 1, "b.c": 1})?);
        assert!(!paths(doc! {"a": 0})?);
        assert!(!paths(doc! {"a": {"$slice": 1}, "_id": 1})?);
        assert!(!paths(doc! {"a.$": 1})?);
        assert!(!paths(doc! {"a": {"$elemMatch": {"x": 1}}})?);
        assert!(!paths(doc! {"b": 1, "c": {"$add": ["$a", 1]}})?);
        Ok(())
    }
}
