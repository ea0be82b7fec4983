//! `$group`'s accumulators, also `$setWindowFields`' (fed over each document's window,
//! `agg::window`); the `$sum`/`$avg`/... expressions over an array fold through the same
//! [`Acc`].
//!
//! An [`AccSpec`] is one `field: {$op: argument}` of a `$group`, parsed once; each group
//! keeps one [`Acc`] per spec, fed one document at a time ([`AccSpec::feed`]) and turned
//! into the field's value by [`Acc::finish`]. Running totals are kept where the result
//! allows (`$sum`, `$avg`, `$min`, `$max`, `$first`, `$last`, `$count`, `$stdDev*`); the
//! others keep the values they need (`$push`, `$addToSet`, the `N` forms keep at most `n`
//! beyond a sort).

use bson::{Bson, Document};

use super::array::{compare_by, sort_spec};
use super::value::{compare, equal, is_nullish, is_number, or_null, to_f64, to_int, type_name};
use super::{Expr, ExprError, MISSING, Result, Vars};

/// A sort specification: paths with ascending (`true`) or descending.
pub type SortSpec = Vec<(Vec<String>, bool)>;

/// The accumulators `$group` knows.
pub const NAMES: &[&str] = &[
    "$sum",
    "$avg",
    "$min",
    "$max",
    "$first",
    "$last",
    "$push",
    "$addToSet",
    "$count",
    "$top",
    "$topN",
    "$bottom",
    "$bottomN",
    "$firstN",
    "$lastN",
    "$maxN",
    "$minN",
    "$stdDevPop",
    "$stdDevSamp",
    "$mergeObjects",
    "$median",
    "$percentile",
];

/// One parsed accumulator.
#[derive(Clone, Debug, PartialEq)]
pub struct AccSpec {
    pub op: &'static str,
    /// The value fed per document (`output` of `$top*`/`$bottom*`, `input` of the `N` forms).
    pub expr: Expr,
    pub n: Option<Expr>,
    pub sort: Option<Vec<(Vec<String>, bool)>>,
    /// The percentiles of `$median` (`[0.5]`) and `$percentile`; empty for the others.
    pub ps: Vec<f64>,
}

impl AccSpec {
    /// Parses `{$op: argument}` for the output field `field`.
    pub fn parse(field: &str, spec: &Bson) -> Result<AccSpec> {
        let Bson::Document(d) = spec else {
            return Err(ExprError::location(
                40234,
                format!("The field '{field}' must be an accumulator object"),
            ));
        };
        let (Some((name, arg)), 1) = (d.iter().next(), d.len()) else {
            return Err(ExprError::location(
                40238,
                format!("The field '{field}' must specify one accumulator"),
            ));
        };
        let Some(op) = NAMES.iter().copied().find(|n| n == name) else {
            return Err(ExprError::location(15952, format!("unknown group operator '{name}'")));
        };
        let named = |key: &str| -> Result<Option<Expr>> {
            match arg {
                Bson::Document(a) => a.get(key).map(Expr::parse).transpose(),
                _ => Ok(None),
            }
        };
        let need = |key: &str| -> Result<Expr> {
            named(key)?
                .ok_or_else(|| ExprError::location(5787907, format!("Missing value for '{key}'")))
        };
        let sort_of = || -> Result<Option<SortSpec>> {
            match arg {
                Bson::Document(a) => match a.get("sortBy") {
                    Some(Bson::Document(s)) => Ok(Some(sort_spec(&Bson::Document(s.clone()))?)),
                    _ => {
                        Err(ExprError::location(5788604, format!("{op} requires a sortBy object")))
                    }
                },
                _ => Err(ExprError::location(
                    5788001,
                    format!("specification must be an object; found {}", type_name(arg)),
                )),
            }
        };
        if matches!(op, "$median" | "$percentile") {
            let q = super::quantile::parse(op, arg, true)?;
            return Ok(AccSpec { op, expr: q.input, n: None, sort: None, ps: q.ps });
        }
        let (expr, n, sort) = match op {
            "$count" => match arg {
                Bson::Document(a) if a.is_empty() => (Expr::Literal(Bson::Int32(1)), None, None),
                _ => {
                    return Err(ExprError::location(
                        40237,
                        "$count takes no arguments, i.e. $count:{}",
                    ));
                }
            },
            "$top" | "$bottom" => (need("output")?, None, sort_of()?),
            "$topN" | "$bottomN" => (need("output")?, Some(need("n")?), sort_of()?),
            "$firstN" | "$lastN" | "$maxN" | "$minN" => (need("input")?, Some(need("n")?), None),
            _ => {
                if matches!(arg, Bson::Array(_)) {
                    return Err(ExprError::location(
                        40237,
                        format!("The {op} accumulator is a unary operator"),
                    ));
                }
                (Expr::parse(arg)?, None, None)
            }
        };
        Ok(AccSpec { op, expr, n, sort, ps: Vec::new() })
    }

    /// A fresh accumulator for one group (its `n` evaluated against the group's first
    /// document).
    pub fn start(&self, vars: &mut Vars) -> Result<Acc> {
        let n = match &self.n {
            Some(e) => {
                let v = e.eval(vars)?;
                match to_int(&v) {
                    Some(k) if k > 0 && is_number(&v) => Some(k as usize),
                    _ => {
                        return Err(ExprError::location(
                            5787908,
                            format!("'n' must be a positive integral value, found {v}"),
                        ));
                    }
                }
            }
            None => None,
        };
        let mut acc = Acc::new(self.op, n)?;
        acc.sort = self.sort.clone();
        acc.ps = self.ps.clone();
        Ok(acc)
    }

    /// Feeds one document.
    pub fn feed(&self, acc: &mut Acc, vars: &mut Vars) -> Result<()> {
        let v = self.expr.eval(vars)?;
        match &self.sort {
            Some(spec) => {
                let mut key = Document::new();
                for (i, (path, _)) in spec.iter().enumerate() {
                    key.insert(
                        i.to_string(),
                        or_null(super::value::get_path(vars.current(), path)),
                    );
                }
                acc.add_keyed(Bson::Document(key), or_null(v));
                Ok(())
            }
            None => acc.add(v),
        }
    }
}

/// The state of one accumulator in one group.
#[derive(Clone, Debug)]
pub struct Acc {
    op: &'static str,
    n: Option<usize>,
    sort: Option<Vec<(Vec<String>, bool)>>,
    count: u64,
    total: Bson,
    /// Welford's running mean and sum of squared deviations (`$stdDev*`).
    mean: f64,
    m2: f64,
    decimal: bool,
    best: Option<Bson>,
    values: Vec<Bson>,
    keyed: Vec<(Bson, Bson)>,
    merged: Document,
    /// `$median`/`$percentile`: the percentiles asked and the numbers seen (as doubles).
    ps: Vec<f64>,
    samples: Vec<f64>,
    /// Roughly the bytes this state holds (grows with the values it keeps).
    held: usize,
}

impl Acc {
    /// A new accumulator of `op` (`n` for the `N` forms).
    pub fn new(op: &str, n: Option<usize>) -> Result<Acc> {
        let op =
            NAMES.iter().copied().find(|x| *x == op).ok_or_else(|| {
                ExprError::location(15952, format!("unknown group operator '{op}'"))
            })?;
        Ok(Acc {
            op,
            n,
            sort: None,
            count: 0,
            total: Bson::Int32(0),
            mean: 0.0,
            m2: 0.0,
            decimal: false,
            best: None,
            values: Vec::new(),
            keyed: Vec::new(),
            merged: Document::new(),
            ps: Vec::new(),
            samples: Vec::new(),
            held: 64,
        })
    }

    /// Roughly the bytes this state holds (a `$group`'s memory accounting).
    pub fn held(&self) -> usize {
        self.held
    }

    /// Adds one value.
    pub fn add(&mut self, v: Bson) -> Result<()> {
        if matches!(
            self.op,
            "$push" | "$addToSet" | "$mergeObjects" | "$firstN" | "$lastN" | "$maxN" | "$minN"
        ) {
            self.held += super::value::approx_size(&v);
        }
        match self.op {
            "$sum" | "$count" | "$avg" if is_number(&v) => {
                self.decimal |= matches!(v, Bson::Decimal128(_));
                self.total = super::arith::add("$sum", &[self.total.clone(), v])?;
                self.count += 1;
            }
            "$stdDevPop" | "$stdDevSamp" => {
                if let Some(x) = to_f64(&v).filter(|_| is_number(&v)) {
                    self.count += 1;
                    let delta = x - self.mean;
                    self.mean += delta / self.count as f64;
                    self.m2 += delta * (x - self.mean);
                }
            }
            "$min" | "$max" if !is_nullish(&v) => {
                let better = match &self.best {
                    None => true,
                    Some(b) if self.op == "$min" => compare(&v, b).is_lt(),
                    Some(b) => compare(&v, b).is_gt(),
                };
                if better {
                    self.best = Some(v);
                }
            }
            "$first" => {
                if self.count == 0 {
                    self.best = Some(or_null(v));
                }
                self.count += 1;
            }
            "$last" => self.best = Some(or_null(v)),
            "$push" if v != MISSING => {
                self.values.push(v);
            }
            "$addToSet"
                if v != MISSING
                    && !self
                        .values
                        .iter()
                        .any(|x| equal(x, &v) && type_name(x) == type_name(&v)) =>
            {
                self.values.push(v);
            }
            "$mergeObjects" => match v {
                Bson::Document(d) => self.merged.extend(d),
                v if is_nullish(&v) => {}
                v => {
                    return Err(ExprError::location(
                        40400,
                        format!(
                            "$mergeObjects requires object inputs, but input {v} is of type {}",
                            type_name(&v)
                        ),
                    ));
                }
            },
            "$firstN" if self.values.len() < self.n.unwrap_or(usize::MAX) => {
                self.values.push(or_null(v));
            }
            "$lastN" => {
                self.values.push(or_null(v));
                let keep = self.n.unwrap_or(usize::MAX);
                if self.values.len() > keep {
                    self.values.remove(0);
                }
            }
            "$maxN" | "$minN" if !is_nullish(&v) => {
                self.values.push(v);
            }
            "$median" | "$percentile" if is_number(&v) => {
                self.held += 8;
                self.samples.extend(to_f64(&v));
            }
            _ => {}
        }
        Ok(())
    }

    /// Adds one value with its sort key (`$top`/`$bottom` forms).
    pub fn add_keyed(&mut self, key: Bson, v: Bson) {
        self.held += super::value::approx_size(&key) + super::value::approx_size(&v);
        self.keyed.push((key, v));
    }

    /// The accumulated value.
    pub fn finish(mut self) -> Bson {
        match self.op {
            "$sum" | "$count" => self.total,
            "$avg" if self.count == 0 => Bson::Null,
            "$avg" => {
                let mean = to_f64(&self.total).unwrap_or(0.0) / self.count as f64;
                if !self.decimal {
                    return Bson::Double(mean);
                }
                let count = Bson::Int64(i64::try_from(self.count).unwrap_or(i64::MAX));
                super::decimal::apply(&self.total, &count, super::decimal::divide)
                    .unwrap_or_else(|| super::value::decimal(mean))
            }
            "$stdDevPop" if self.count == 0 => Bson::Null,
            "$stdDevPop" => Bson::Double((self.m2 / self.count as f64).sqrt()),
            "$stdDevSamp" if self.count < 2 => Bson::Null,
            "$stdDevSamp" => Bson::Double((self.m2 / (self.count - 1) as f64).sqrt()),
            "$min" | "$max" | "$first" | "$last" => self.best.unwrap_or(Bson::Null),
            "$push" | "$addToSet" | "$firstN" | "$lastN" => Bson::Array(self.values),
            "$mergeObjects" => Bson::Document(self.merged),
            "$median" | "$percentile" => {
                let median = self.op == "$median";
                let q = super::quantile::Quantile {
                    input: Expr::Literal(Bson::Null),
                    ps: self.ps,
                    median,
                };
                super::quantile::finish(&q, self.samples)
            }
            "$maxN" | "$minN" => {
                super::value::sort_values(&mut self.values);
                if self.op == "$maxN" {
                    self.values.reverse();
                }
                self.values.truncate(self.n.unwrap_or(usize::MAX));
                Bson::Array(self.values)
            }
            _ => {
                // $top, $topN, $bottom, $bottomN: order by the sort keys.
                let spec: Vec<(Vec<String>, bool)> = self
                    .sort
                    .unwrap_or_default()
                    .iter()
                    .enumerate()
                    .map(|(i, (_, asc))| (vec![i.to_string()], *asc))
                    .collect();
                self.keyed.sort_by(|a, b| compare_by(&spec, &a.0, &b.0));
                let bottom = self.op.starts_with("$bottom");
                if bottom {
                    self.keyed.reverse();
                }
                let n = self.n.unwrap_or(1);
                let mut picked: Vec<Bson> =
                    self.keyed.into_iter().take(n).map(|(_, v)| v).collect();
                if bottom {
                    picked.reverse();
                }
                match self.op {
                    "$top" | "$bottom" => picked.into_iter().next().unwrap_or(Bson::Null),
                    _ => Bson::Array(picked),
                }
            }
        }
    }
}
