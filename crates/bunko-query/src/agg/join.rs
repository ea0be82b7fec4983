//! Stages that read or write other collections, through the [`Env`]: `$graphLookup` and
//! `$merge` (`$lookup` is in `lookup`), and what they share with `$lookup`.

use bson::{Bson, Document, doc};

use super::group::canonical;
use super::{Env, EnvRef, Pipeline};
use crate::expr::value::{get_path, or_null};
use crate::expr::{Expr, ExprError, MISSING, Result, Vars};

pub(super) fn path(s: &str) -> Vec<String> {
    s.split('.').map(str::to_string).collect()
}

pub(super) fn string_field(spec: &Document, stage: &str, name: &str) -> Result<Option<String>> {
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
pub(super) fn values_of(doc: &Bson, field: &[String]) -> Vec<Bson> {
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

impl WhenMatched {
    /// MongoDB's name of the mode, as its error messages spell it.
    fn name(&self) -> &'static str {
        match self {
            WhenMatched::Replace => "replace",
            WhenMatched::KeepExisting => "keepExisting",
            WhenMatched::Merge => "merge",
            WhenMatched::Fail => "fail",
            WhenMatched::Pipeline(_) => "pipeline",
        }
    }

    /// `keepExisting` and `fail` go only with `whenNotMatched: "insert"`: MongoDB refuses
    /// the other combinations (51181) before it looks at the target.
    fn supports(&self, when_not_matched: &str) -> Result<()> {
        if matches!(self, WhenMatched::KeepExisting | WhenMatched::Fail)
            && when_not_matched != "insert"
        {
            return Err(ExprError::location(
                51181,
                format!(
                    "Combination of $merge modes 'whenMatched: {}' and 'whenNotMatched: {when_not_matched}' is not supported",
                    self.name()
                ),
            ));
        }
        Ok(())
    }
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
        when_matched.supports(&when_not_matched)?;
        if let Some(env) = env {
            env.check_output("$merge", db.as_deref(), &coll)?;
        }
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
                    let key = doc! {"keyPattern": {"_id": 1}, "keyValue": {"_id": id.clone()}};
                    return Err(ExprError::new(
                        11000,
                        "DuplicateKey",
                        format!("$merge failed due to a DuplicateKey error: {{ _id: {id} }}"),
                    )
                    .with_extra(&key));
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
