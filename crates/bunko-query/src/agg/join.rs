//! Stages that read or write other collections, through the [`Env`]: `$lookup`
//! (equality form, `let` + `pipeline` form, or both), `$graphLookup` and `$merge`.
//!
//! A `$lookup` on `localField`/`foreignField` does not query once per input document: it
//! runs over batches of its input stream; the local values of a batch are gathered and
//! fetched with `_id` point reads, `$in` queries through the foreign field's index, or
//! (unindexed) one read of the foreign collection per stream, then joined in memory
//! through a canonical key of each foreign value — every element of a multikey (array)
//! foreign field, and the missing field as `null`, as MongoDB matches.

use std::collections::HashMap;

use bson::{Bson, Document, doc};

use super::group::canonical;
use super::stages::set;
use super::{Env, EnvRef, Pipeline};
use crate::expr::value::{get_path, or_null};
use crate::expr::{Expr, ExprError, MISSING, Result, Vars};

/// The most distinct local values a `$lookup` asks for with one `$in` query.
const IN_QUERY_MAX: usize = 64;
/// The most `_id` values a `$lookup` asks for (as point reads) instead of one scan.
const ID_READS_MAX: usize = 1000;
/// The most values of an indexed foreign field one `$in` query asks for (each value is an
/// index range; the engine scans at most 256 ranges per query).
const IN_INDEX_MAX: usize = 200;

fn path(s: &str) -> Vec<String> {
    s.split('.').map(str::to_string).collect()
}

fn string_field(spec: &Document, stage: &str, name: &str) -> Result<Option<String>> {
    match spec.get(name) {
        None => Ok(None),
        Some(Bson::String(s)) => Ok(Some(s.clone())),
        Some(_) => {
            Err(ExprError::failed_to_parse(format!("{stage} argument '{name}' must be a string")))
        }
    }
}

/// The values a document's field is matched by: each element of an array (and the array
/// itself), `null` when missing.
fn values_of(doc: &Bson, field: &[String]) -> Vec<Bson> {
    match get_path(doc, field) {
        Bson::Array(items) => {
            let mut out: Vec<Bson> = items
                .iter()
                .flat_map(|i| match i {
                    Bson::Array(inner) => inner.clone(),
                    other => vec![other.clone()],
                })
                .collect();
            if out.is_empty() {
                out.push(Bson::Array(Vec::new()));
            }
            out
        }
        v => vec![or_null(v)],
    }
}

/// A parsed `$lookup`.
#[derive(Clone)]
pub struct Lookup {
    from: String,
    local: Option<Vec<String>>,
    foreign: Option<String>,
    as_: Vec<String>,
    lets: Vec<(String, Expr)>,
    pipeline: Option<Pipeline>,
}

impl Lookup {
    pub fn parse(spec: &Document, env: Option<&dyn Env>) -> Result<Lookup> {
        let from = match spec.get("from") {
            Some(Bson::String(s)) => s.clone(),
            Some(Bson::Document(d)) => d
                .get_str("coll")
                .map_err(|_| ExprError::failed_to_parse("$lookup 'from' needs 'coll'"))?
                .to_string(),
            Some(_) => {
                return Err(ExprError::failed_to_parse("$lookup argument 'from' must be a string"));
            }
            None => {
                return Err(ExprError::failed_to_parse(
                    "missing 'from' option to $lookup stage specification",
                ));
            }
        };
        let Some(as_) = string_field(spec, "$lookup", "as")? else {
            return Err(ExprError::failed_to_parse("must specify 'as' field for a $lookup"));
        };
        let local = string_field(spec, "$lookup", "localField")?;
        let foreign = string_field(spec, "$lookup", "foreignField")?;
        if local.is_some() != foreign.is_some() {
            return Err(ExprError::failed_to_parse(
                "$lookup requires both or neither of 'localField' and 'foreignField' to be specified",
            ));
        }
        let pipeline = match spec.get("pipeline") {
            Some(Bson::Array(items)) => Some(Pipeline::parse(items, env)?),
            Some(_) => {
                return Err(ExprError::failed_to_parse(
                    "$lookup argument 'pipeline' must be an array",
                ));
            }
            None => None,
        };
        if local.is_none() && pipeline.is_none() {
            return Err(ExprError::failed_to_parse(
                "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified",
            ));
        }
        let mut lets = Vec::new();
        match spec.get("let") {
            Some(Bson::Document(d)) => {
                for (k, v) in d {
                    crate::expr::cond_check_var_name(k)?;
                    lets.push((k.clone(), Expr::parse(v)?));
                }
            }
            Some(_) => {
                return Err(ExprError::failed_to_parse("$lookup argument 'let' must be an object"));
            }
            None => {}
        }
        if let Some(bad) = spec.keys().find(|k| {
            !matches!(
                k.as_str(),
                "from" | "as" | "localField" | "foreignField" | "let" | "pipeline"
            )
        }) {
            return Err(ExprError::failed_to_parse(format!("unknown argument to $lookup: {bad}")));
        }
        Ok(Lookup {
            from,
            local: local.map(|l| path(&l)),
            foreign,
            as_: path(&as_),
            lets,
            pipeline,
        })
    }

    /// The stage ready to run over the batches of one stream.
    pub fn opened(&self) -> OpenLookup {
        OpenLookup { spec: self.clone(), whole: None, batches: 0 }
    }
}

/// A `$lookup` running over one stream, batch by batch.
pub struct OpenLookup {
    spec: Lookup,
    /// The whole foreign collection, once one batch needed it (read once per stream).
    whole: Option<Table>,
    /// Batches run so far.
    batches: usize,
}

impl OpenLookup {
    /// Joins one batch of input documents.
    pub fn run(
        &mut self,
        docs: Vec<Document>,
        env: &EnvRef<'_>,
        vars: &Vars,
    ) -> Result<Vec<Document>> {
        let spec = &self.spec;
        let joined: Vec<Vec<Document>> = match (&spec.local, &spec.foreign) {
            (Some(local), Some(foreign)) => {
                let first = self.batches == 0;
                self.batches += 1;
                equality_join(
                    &docs,
                    local,
                    foreign,
                    &spec.from,
                    env.as_ref(),
                    &mut self.whole,
                    first,
                )?
            }
            _ => {
                let all = env.find(&spec.from, &Document::new())?;
                vec![all; docs.len()]
            }
        };
        let mut out = Vec::with_capacity(docs.len());
        for (mut d, matched) in docs.into_iter().zip(joined) {
            let matched = match &spec.pipeline {
                Some(p) => {
                    let mut v = vars.with_doc(&d);
                    let mut bindings = Vec::new();
                    for (name, e) in &spec.lets {
                        bindings.push((name.clone(), or_null(e.eval(&mut v)?)));
                    }
                    let mut scope = vars.clone();
                    for (n, b) in bindings {
                        scope.bind(&n, b);
                    }
                    p.run(matched, env, &scope)?
                }
                None => matched,
            };
            set(&mut d, &spec.as_, Bson::Array(matched.into_iter().map(Bson::Document).collect()));
            out.push(d);
        }
        Ok(out)
    }
}

/// Foreign documents and, for each canonical key of their foreign field, which they are.
struct Table {
    docs: Vec<Document>,
    index: HashMap<String, Vec<usize>>,
}

impl Table {
    fn new(docs: Vec<Document>, foreign: &str) -> Table {
        let fpath = path(foreign);
        let mut index: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, f) in docs.iter().enumerate() {
            let f = Bson::Document(f.clone());
            let mut keys: Vec<String> = values_of(&f, &fpath).iter().map(canonical).collect();
            if let whole @ Bson::Array(_) = get_path(&f, &fpath) {
                keys.push(canonical(&whole));
            }
            keys.sort();
            keys.dedup();
            for k in keys {
                index.entry(k).or_default().push(i);
            }
        }
        Table { docs, index }
    }

    /// The documents matching any of `values`, each once, in the table's order.
    fn matching(&self, values: &[Bson]) -> Vec<Document> {
        let mut hits: Vec<usize> = values
            .iter()
            .flat_map(|v| self.index.get(&canonical(v)).cloned().unwrap_or_default())
            .collect();
        hits.sort_unstable();
        hits.dedup();
        hits.into_iter().filter_map(|i| self.docs.get(i).cloned()).collect()
    }
}

/// For each input document, the foreign documents whose `foreign` field equals its
/// `local` field, read in the cheapest way:
/// - `_id` values: point reads;
/// - a foreign field with an index: `$in` queries of at most [`IN_INDEX_MAX`] values,
///   each a set of index ranges (one lookup per value, not a scan);
/// - otherwise, on the first batch with few values, one `$in` query; past that the whole
///   foreign collection, read once per stream (`whole`) and joined in memory.
fn equality_join(
    docs: &[Document],
    local: &[String],
    foreign: &str,
    from: &str,
    env: &dyn Env,
    whole: &mut Option<Table>,
    first: bool,
) -> Result<Vec<Vec<Document>>> {
    let locals: Vec<Vec<Bson>> =
        docs.iter().map(|d| values_of(&Bson::Document(d.clone()), local)).collect();
    let mut wanted: Vec<Bson> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for v in locals.iter().flatten() {
        if seen.insert(canonical(v)) {
            wanted.push(v.clone());
        }
    }
    let fresh = if wanted.is_empty() || whole.is_some() {
        None
    } else if foreign == "_id" && wanted.len() <= ID_READS_MAX {
        Some(env.find(from, &doc! {foreign: {"$in": wanted}})?)
    } else if env.index_on(from, foreign).is_some() {
        let mut found = Vec::new();
        let mut ids = std::collections::HashSet::new();
        for chunk in wanted.chunks(IN_INDEX_MAX) {
            for f in env.find(from, &doc! {foreign: {"$in": chunk.to_vec()}})? {
                if ids.insert(canonical(f.get("_id").unwrap_or(&Bson::Null))) {
                    found.push(f);
                }
            }
        }
        Some(found)
    } else if first && wanted.len() <= IN_QUERY_MAX {
        Some(env.find(from, &doc! {foreign: {"$in": wanted}})?)
    } else {
        *whole = Some(Table::new(env.find(from, &Document::new())?, foreign));
        None
    };
    let table = match (fresh, whole.as_ref()) {
        (Some(found), _) => &Table::new(found, foreign),
        (None, Some(table)) => table,
        (None, None) => return Ok(vec![Vec::new(); docs.len()]),
    };
    Ok(locals.iter().map(|vals| table.matching(vals)).collect())
}

/// A parsed `$graphLookup`.
#[derive(Clone)]
pub struct GraphLookup {
    from: String,
    start_with: Expr,
    connect_from: Vec<String>,
    connect_to: String,
    as_: String,
    max_depth: Option<i64>,
    depth_field: Option<String>,
    restrict: Document,
}

impl GraphLookup {
    pub fn parse(spec: &Document) -> Result<GraphLookup> {
        let need = |name: &str| -> Result<String> {
            string_field(spec, "$graphLookup", name)?
                .ok_or_else(|| ExprError::location(40105, format!("{name} was not specified")))
        };
        let start_with = Expr::parse(
            spec.get("startWith")
                .ok_or_else(|| ExprError::location(40105, "startWith was not specified"))?,
        )?;
        let max_depth = match spec.get("maxDepth") {
            None => None,
            Some(v) => match crate::expr::value::to_int(v) {
                Some(n) if n >= 0 => Some(n),
                _ => {
                    return Err(ExprError::location(
                        40101,
                        "maxDepth requires a nonnegative argument",
                    ));
                }
            },
        };
        let restrict = match spec.get("restrictSearchWithMatch") {
            None => Document::new(),
            Some(Bson::Document(d)) => d.clone(),
            Some(_) => {
                return Err(ExprError::location(
                    40185,
                    "restrictSearchWithMatch must be an object",
                ));
            }
        };
        Ok(GraphLookup {
            from: need("from")?,
            start_with,
            connect_from: path(&need("connectFromField")?),
            connect_to: need("connectToField")?,
            as_: need("as")?,
            max_depth,
            depth_field: string_field(spec, "$graphLookup", "depthField")?,
            restrict,
        })
    }

    pub fn run(&self, docs: Vec<Document>, env: &dyn Env, vars: &Vars) -> Result<Vec<Document>> {
        let mut out = Vec::new();
        for mut d in docs {
            let start = self.start_with.eval(&mut vars.with_doc(&d))?;
            let mut frontier: Vec<Bson> = match start {
                Bson::Array(items) => items,
                v if v == MISSING => Vec::new(),
                v => vec![v],
            };
            let mut found: Vec<Document> = Vec::new();
            let mut visited = std::collections::HashSet::new();
            let mut depth = 0i64;
            while !frontier.is_empty() && self.max_depth.is_none_or(|m| depth <= m) {
                let mut filter = self.restrict.clone();
                filter.insert(self.connect_to.clone(), doc! {"$in": frontier.clone()});
                let mut next = Vec::new();
                for mut f in env.find(&self.from, &filter)? {
                    let id = canonical(f.get("_id").unwrap_or(&Bson::Null));
                    if !visited.insert(id) {
                        continue;
                    }
                    next.extend(
                        values_of(&Bson::Document(f.clone()), &self.connect_from)
                            .into_iter()
                            .filter(|v| *v != Bson::Null),
                    );
                    if let Some(df) = &self.depth_field {
                        f.insert(df.clone(), Bson::Int64(depth));
                    }
                    found.push(f);
                }
                frontier = next;
                depth += 1;
            }
            d.insert(self.as_.clone(), found.into_iter().map(Bson::Document).collect::<Vec<_>>());
            out.push(d);
        }
        Ok(out)
    }
}

/// A parsed `$merge`.
#[derive(Clone)]
pub struct Merge {
    db: Option<String>,
    coll: String,
    on: Vec<String>,
    when_matched: WhenMatched,
    when_not_matched: String,
}

#[derive(Clone)]
enum WhenMatched {
    Replace,
    KeepExisting,
    Merge,
    Fail,
    Pipeline(Pipeline),
}

impl Merge {
    pub fn parse(arg: &Bson, env: Option<&dyn Env>) -> Result<Merge> {
        let spec = match arg {
            Bson::String(c) => doc! {"into": c},
            Bson::Document(d) => d.clone(),
            _ => {
                return Err(ExprError::location(
                    51182,
                    "$merge only supports a string or object argument",
                ));
            }
        };
        let (db, coll) = match spec.get("into") {
            Some(Bson::String(c)) => (None, c.clone()),
            Some(Bson::Document(d)) => (
                d.get_str("db").ok().map(str::to_string),
                d.get_str("coll")
                    .map_err(|_| ExprError::failed_to_parse("$merge 'into' needs 'coll'"))?
                    .to_string(),
            ),
            _ => {
                return Err(ExprError::failed_to_parse(
                    "BSON field '$merge.into' is missing but a required field",
                ));
            }
        };
        let on = match spec.get("on") {
            None => vec!["_id".to_string()],
            Some(Bson::String(s)) => vec![s.clone()],
            Some(Bson::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str().map(str::to_string).ok_or_else(|| {
                        ExprError::location(51134, "$merge 'on' array elements must be strings")
                    })
                })
                .collect::<Result<_>>()?,
            Some(_) => {
                return Err(ExprError::location(
                    51186,
                    "$merge 'on' field must be either a string or an array of strings",
                ));
            }
        };
        let when_matched = match spec.get("whenMatched") {
            None => WhenMatched::Merge,
            Some(Bson::String(s)) => match s.as_str() {
                "replace" => WhenMatched::Replace,
                "keepExisting" => WhenMatched::KeepExisting,
                "merge" => WhenMatched::Merge,
                "fail" => WhenMatched::Fail,
                other => {
                    return Err(ExprError::bad_value(format!(
                        "Enumeration value '{other}' for field '$merge.whenMatched' is not a valid value."
                    )));
                }
            },
            Some(Bson::Array(items)) => WhenMatched::Pipeline(Pipeline::parse(items, env)?),
            Some(_) => {
                return Err(ExprError::type_mismatch(
                    "$merge 'whenMatched' must be a string or an array",
                ));
            }
        };
        let when_not_matched = match spec.get("whenNotMatched") {
            None => "insert".to_string(),
            Some(Bson::String(s)) if matches!(s.as_str(), "insert" | "discard" | "fail") => {
                s.clone()
            }
            Some(other) => {
                return Err(ExprError::bad_value(format!(
                    "Enumeration value '{other}' for field '$merge.whenNotMatched' is not a valid value."
                )));
            }
        };
        Ok(Merge { db, coll, on, when_matched, when_not_matched })
    }

    pub fn run(&self, docs: Vec<Document>, env: &EnvRef<'_>, vars: &Vars) -> Result<()> {
        let mut writes = Vec::new();
        for d in docs {
            let mut filter = Document::new();
            for f in &self.on {
                let v = get_path(&Bson::Document(d.clone()), &path(f));
                if v == MISSING || matches!(v, Bson::Array(_)) {
                    return Err(ExprError::location(
                        51132,
                        format!(
                            "$merge write error: 'on' field '{f}' cannot be missing, null, undefined or an array"
                        ),
                    ));
                }
                filter.insert(f.clone(), v);
            }
            let existing = env.find_in(self.db.as_deref(), &self.coll, &filter)?;
            let Some(old) = existing.into_iter().next() else {
                match self.when_not_matched.as_str() {
                    "insert" => {
                        let mut new = d;
                        if !new.contains_key("_id") {
                            let mut with_id = doc! {"_id": bson::oid::ObjectId::new()};
                            with_id.extend(new);
                            new = with_id;
                        }
                        writes.push(new);
                    }
                    "fail" => {
                        return Err(ExprError::location(
                            13113,
                            "$merge could not find a matching document in the target collection for at least one document in the source collection",
                        ));
                    }
                    _ => {}
                }
                continue;
            };
            let id = old.get("_id").cloned().unwrap_or(Bson::Null);
            let new = match &self.when_matched {
                WhenMatched::KeepExisting => continue,
                WhenMatched::Fail => {
                    return Err(ExprError::new(
                        11000,
                        "DuplicateKey",
                        format!("$merge failed due to a DuplicateKey error: {{ _id: {id} }}"),
                    ));
                }
                WhenMatched::Replace => d,
                WhenMatched::Merge => {
                    let mut m = old.clone();
                    m.extend(d);
                    m
                }
                WhenMatched::Pipeline(p) => {
                    let mut scope = vars.clone();
                    scope.bind("new", Bson::Document(d));
                    p.run(vec![old.clone()], env, &scope)?.into_iter().next().unwrap_or(old.clone())
                }
            };
            let mut with_id = doc! {"_id": id};
            with_id.extend(new.into_iter().filter(|(k, _)| k != "_id"));
            writes.push(with_id);
        }
        env.upsert(self.db.as_deref(), &self.coll, writes)
    }
}
