//! `$densify`: documents added where a sequence of numbers or dates has gaps, each holding
//! only the densified field and the partition fields.
//!
//! As in MongoDB, the input is sorted (by `partitionByFields`, unless `bounds` is
//! `"full"`, then by `field`; through `spill::sort`) and read once, keeping per partition
//! the last value on the step grid ([`Densify::open`]). A document past the next step gets
//! the missing steps generated before it; documents without the field (or null) pass
//! unchanged. The grid starts at the explicit lower bound, or the partition's first value
//! (`"partition"`), or the smallest value of all (`"full"`). At the end, explicit bounds
//! fill each partition up to the upper bound (exclusive) and `"full"` up to the largest
//! value of all (inclusive). Dates step by `unit` as `$dateAdd` does.

use bson::{Bson, Document};

use super::window::bounds::offset;
use super::{Docs, EnvRef, spill, stages};
use crate::expr::value::{compare, get_path, is_nullish, is_number, to_int, type_name};
use crate::expr::{Expr, ExprError, Result, Vars};

/// MongoDB's default `internalQueryMaxAllowedDensifyDocs`.
const MAX_DOCS: usize = 500_000;

const STAGE: &str = "$densify";

/// `range.bounds`.
#[derive(Clone, Debug, PartialEq)]
enum Bounds {
    Full,
    Partition,
    /// Boxed: two values are much larger than the other variants.
    Explicit(Box<(Bson, Bson)>),
}

/// A parsed `$densify`.
#[derive(Clone, Debug, PartialEq)]
pub struct Densify {
    field: Vec<String>,
    partitions: Vec<String>,
    step: Bson,
    unit: Option<&'static str>,
    bounds: Bounds,
}

fn loc(code: i32, message: impl Into<String>) -> ExprError {
    ExprError::location(code, message)
}

fn unknown(path: &str) -> ExprError {
    loc(40415, format!("BSON field '{STAGE}.{path}' is an unknown field."))
}

fn missing(path: &str) -> ExprError {
    loc(40414, format!("BSON field '{STAGE}.{path}' is missing but a required field"))
}

fn wrong_type(path: &str, v: &Bson, expected: &str) -> ExprError {
    ExprError::type_mismatch(format!(
        "BSON field '{STAGE}.{path}' is the wrong type '{}', expected type '{expected}'",
        type_name(v)
    ))
}

impl Densify {
    pub fn parse(arg: &Bson) -> Result<Densify> {
        let Bson::Document(spec) = arg else {
            return Err(ExprError::failed_to_parse(format!(
                "The {STAGE} stage specification must be an object, found {}",
                type_name(arg)
            )));
        };
        let (mut field, mut partitions, mut range) = (None, Vec::new(), None);
        for (k, v) in spec {
            match (k.as_str(), v) {
                ("field", Bson::String(f)) => field = Some(f.clone()),
                ("field", v) => return Err(wrong_type(k, v, "string")),
                ("partitionByFields", Bson::Array(items)) => {
                    for i in items {
                        let Bson::String(s) = i else {
                            return Err(wrong_type(k, i, "string"));
                        };
                        partitions.push(s.clone());
                    }
                }
                ("partitionByFields", v) => return Err(wrong_type(k, v, "array")),
                ("range", Bson::Document(r)) => range = Some(r),
                ("range", v) => return Err(wrong_type(k, v, "object")),
                _ => return Err(unknown(k)),
            }
        }
        let Some(field) = field else { return Err(missing("field")) };
        let Some(range) = range else { return Err(missing("range")) };
        let (step, unit, bounds) = parse_range(range)?;
        if bounds == Bounds::Partition && partitions.is_empty() {
            return Err(loc(
                5733408,
                "One cannot specify the bounds as 'partition' without specifying a non-empty array of partitionByFields. You may have meant to specify 'full' bounds.",
            ));
        }
        let field = field.split('.').map(str::to_string).collect();
        Ok(Densify { field, partitions, step, unit, bounds })
    }

    /// The documents of `input`, sorted, with the missing steps added.
    pub fn open<'a>(&self, input: Docs<'a>, env: &EnvRef<'a>, vars: &Vars) -> Result<Docs<'a>> {
        let path = |p: &str| p.split('.').map(str::to_string).collect::<Vec<_>>();
        let mut keys: Vec<(Vec<String>, bool)> = Vec::new();
        if self.bounds != Bounds::Full {
            keys.extend(self.partitions.iter().map(|p| (path(p), true)));
        }
        keys.push((self.field.clone(), true));
        let sorted = spill::sort(input, &keys, env)?;
        let mut state = State::new(self.clone(), vars.clone())?;
        let mut tail_done = false;
        let mut input = sorted;
        let mut pending: std::vec::IntoIter<Document> = Vec::new().into_iter();
        Ok(Box::new(std::iter::from_fn(move || {
            loop {
                if let Some(d) = pending.next() {
                    return Some(Ok(d));
                }
                let batch = match input.next() {
                    Some(Ok(d)) => state.process(d),
                    Some(Err(e)) => Err(e),
                    None if tail_done => return None,
                    None => {
                        tail_done = true;
                        state.finish()
                    }
                };
                match batch {
                    Ok(docs) => pending = docs.into_iter(),
                    Err(e) => {
                        tail_done = true;
                        input = Box::new(std::iter::empty());
                        return Some(Err(e));
                    }
                }
            }
        })))
    }
}

fn parse_range(range: &Document) -> Result<(Bson, Option<&'static str>, Bounds)> {
    let (mut step, mut bounds, mut unit) = (None, None, None);
    for (k, v) in range {
        match (k.as_str(), v) {
            ("step", v) => step = Some(v.clone()),
            ("bounds", v) => bounds = Some(v),
            ("unit", Bson::String(_)) => unit = Some(v),
            ("unit", v) => return Err(wrong_type("range.unit", v, "string")),
            _ => return Err(unknown(&format!("range.{k}"))),
        }
    }
    let Some(step) = step else { return Err(missing("range.step")) };
    let Some(bounds) = bounds else { return Err(missing("range.bounds")) };
    if !is_number(&step) || compare(&step, &Bson::Int32(0)).is_le() {
        return Err(loc(
            5733401,
            "The step parameter in a range statement must be a strictly positive numeric value",
        ));
    }
    let unit = match unit {
        Some(u) => {
            if to_int(&step).is_none() {
                return Err(loc(
                    6586400,
                    "The step parameter in a range statement must be a whole number when densifying a date range",
                ));
            }
            Some(crate::expr::date::unit(u)?)
        }
        None => None,
    };
    let bounds = match bounds {
        Bson::Array(items) => explicit(items, &step, unit)?,
        Bson::String(s) if s == "full" => Bounds::Full,
        Bson::String(s) if s == "partition" => Bounds::Partition,
        Bson::String(_) => {
            return Err(loc(5946802, "Bounds string must either be 'full' or 'partition'"));
        }
        _ => {
            return Err(loc(
                5733404,
                "The bounds in a range statement must be the string 'full', 'partition', or an ascending array of two numbers or two dates",
            ));
        }
    };
    Ok((step, unit, bounds))
}

fn explicit(items: &[Bson], step: &Bson, unit: Option<&str>) -> Result<Bounds> {
    let [lo, hi] = items else {
        return Err(loc(
            5733403,
            "A bounding array in a range statement must have exactly two elements",
        ));
    };
    if compare(lo, hi).is_gt() {
        return Err(loc(
            5733402,
            "A bounding array must be an ascending array of either two dates or two numbers",
        ));
    }
    let mixed = "A bounding array must contain either both dates or both numeric types";
    match lo {
        lo if is_number(lo) => {
            if unit.is_some() {
                return Err(loc(5733409, "Numeric bounds may not have unit parameter"));
            }
            if !is_number(hi) {
                return Err(loc(5733406, mixed));
            }
            if type_name(lo) != type_name(hi) || type_name(lo) != type_name(step) {
                return Err(loc(
                    5876900,
                    "Upper bound, lower bound, and step must all have the same type",
                ));
            }
        }
        Bson::DateTime(_) => {
            if !matches!(hi, Bson::DateTime(_)) {
                return Err(loc(5733405, mixed));
            }
            if unit.is_none() {
                return Err(loc(5733410, "A bounding array of dates must specify a unit"));
            }
        }
        _ => return Err(loc(5946800, "Explicit bounds must be numeric or dates")),
    }
    Ok(Bounds::Explicit(Box::new((lo.clone(), hi.clone()))))
}

/// The pass over the sorted documents: per partition, the last value on the grid.
struct State {
    spec: Densify,
    vars: Vars,
    /// `{field: "$field", ...}` of the partition fields (`None`: one partition).
    key_of: Option<Expr>,
    table: Vec<(Bson, Bson)>,
    /// The smallest and largest values seen (`"full"`).
    min: Option<Bson>,
    max: Option<Bson>,
    generated: usize,
}

impl State {
    fn new(spec: Densify, vars: Vars) -> Result<State> {
        let key_of = match spec.partitions.is_empty() {
            true => None,
            false => {
                let mut d = Document::new();
                for p in &spec.partitions {
                    let path: Vec<String> = p.split('.').map(str::to_string).collect();
                    stages::set(&mut d, &path, Bson::String(format!("${p}")));
                }
                Some(Expr::parse(&Bson::Document(d))?)
            }
        };
        let mut state =
            State { spec, vars, key_of, table: Vec::new(), min: None, max: None, generated: 0 };
        if let (Bounds::Explicit(b), None) = (&state.spec.bounds, &state.key_of) {
            let before = state.step(&b.0, false)?;
            state.table.push((Bson::Document(Document::new()), before));
        }
        Ok(state)
    }

    /// `v` one step up (or down).
    fn step(&self, v: &Bson, up: bool) -> Result<Bson> {
        let delta = match up {
            true => self.spec.step.clone(),
            false => crate::expr::arith::subtract(
                "$subtract",
                &[Bson::Int32(0), self.spec.step.clone()],
            )?,
        };
        offset(v, &delta, self.spec.unit)
    }

    fn last(&self, key: &Bson) -> Option<&Bson> {
        self.table.iter().find(|(k, _)| compare(k, key).is_eq()).map(|(_, v)| v)
    }

    fn set_last(&mut self, key: &Bson, v: Bson) {
        match self.table.iter_mut().find(|(k, _)| compare(k, key).is_eq()) {
            Some(slot) => slot.1 = v,
            None => self.table.push((key.clone(), v)),
        }
    }

    /// The documents for one input document: the missing steps before it, then it.
    fn process(&mut self, doc: Document) -> Result<Vec<Document>> {
        let val = get_path(&Bson::Document(doc.clone()), &self.spec.field);
        if is_nullish(&val) {
            return Ok(vec![doc]);
        }
        self.check(&val)?;
        if self.spec.bounds == Bounds::Full {
            self.min.get_or_insert_with(|| val.clone());
            self.max = Some(val.clone());
        }
        let key = match &self.key_of {
            Some(e) => e.eval(&mut self.vars.with_doc(&doc))?,
            None => Bson::Document(Document::new()),
        };
        let (start, end) = match &self.spec.bounds {
            Bounds::Explicit(b) => (Some(b.0.clone()), Some(b.1.clone())),
            _ => (None, None),
        };
        let Some(mut last) = self.last(&key).cloned() else { return self.first(doc, val, key) };
        if end.as_ref().is_some_and(|e| compare(&last, e).is_ge()) {
            return Ok(vec![doc]);
        }
        if let Some(start) = start.filter(|s| compare(s, &last).is_gt()) {
            last = self.step(&start, false)?;
        }
        if compare(&last, &val).is_gt() {
            return Ok(vec![doc]);
        }
        self.fill_to(doc, last, val, key)
    }

    /// The first document of a partition.
    fn first(&mut self, doc: Document, val: Bson, key: Bson) -> Result<Vec<Document>> {
        match (&self.spec.bounds, &self.min) {
            (Bounds::Explicit(b), _) if compare(&val, &b.0).is_gt() => {
                let before = self.step(&b.0.clone(), false)?;
                self.fill_to(doc, before, val, key)
            }
            (Bounds::Full, Some(min)) if compare(&val, min).is_gt() => {
                let min = min.clone();
                let before = self.step(&min, false)?;
                if compare(&val, &self.step(&min, true)?).is_ge() {
                    return self.fill_to(doc, before, val, key);
                }
                self.set_last(&key, before);
                Ok(vec![doc])
            }
            _ => {
                self.set_last(&key, val);
                Ok(vec![doc])
            }
        }
    }

    /// The steps after `last` below `val` (and below an explicit upper bound), then `doc`.
    fn fill_to(
        &mut self,
        doc: Document,
        last: Bson,
        val: Bson,
        key: Bson,
    ) -> Result<Vec<Document>> {
        let next = self.step(&last, true)?;
        let end = match &self.spec.bounds {
            Bounds::Explicit(b) => Some(b.1.clone()),
            _ => None,
        };
        if compare(&val, &next).is_le() || end.as_ref().is_some_and(|e| compare(&next, e).is_ge()) {
            if compare(&val, &next).is_eq() {
                self.set_last(&key, val);
            }
            return Ok(vec![doc]);
        }
        let max = match end {
            Some(e) if compare(&e, &val).is_le() => e,
            _ => val.clone(),
        };
        let mut out = self.generate(&key, next, &max, false)?;
        let last_generated = out
            .last()
            .map(|d| get_path(&Bson::Document(d.clone()), &self.spec.field))
            .unwrap_or(Bson::Null);
        let on_grid = compare(&self.step(&last_generated, true)?, &val).is_eq();
        self.set_last(&key, if on_grid { val } else { last_generated });
        out.push(doc);
        Ok(out)
    }

    /// Documents of partition `key` at `from`, `from + step`, ... below `max` (or up to it).
    fn generate(
        &mut self,
        key: &Bson,
        from: Bson,
        max: &Bson,
        inclusive: bool,
    ) -> Result<Vec<Document>> {
        let mut out = Vec::new();
        let mut v = from;
        while compare(&v, max).is_lt() || (inclusive && compare(&v, max).is_eq()) {
            self.generated += 1;
            if self.generated > MAX_DOCS {
                return Err(loc(
                    5897900,
                    format!(
                        "Generated {} documents in $densify, which is over the limit of {MAX_DOCS}. Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents",
                        self.generated
                    ),
                ));
            }
            let mut d = match key {
                Bson::Document(k) => k.clone(),
                _ => Document::new(),
            };
            stages::set(&mut d, &self.spec.field, v.clone());
            out.push(d);
            v = self.step(&v, true)?;
        }
        Ok(out)
    }

    /// The steps after the input: up to the explicit upper bound, or the largest value of
    /// all (`"full"`), in every partition seen.
    fn finish(&mut self) -> Result<Vec<Document>> {
        let (min, max, inclusive) = match &self.spec.bounds {
            Bounds::Partition => return Ok(Vec::new()),
            Bounds::Explicit(b) => (b.0.clone(), b.1.clone(), false),
            Bounds::Full => match (&self.min, &self.max) {
                (Some(lo), Some(hi)) => (lo.clone(), hi.clone(), true),
                _ => return Ok(Vec::new()),
            },
        };
        let mut out = Vec::new();
        for (key, last) in std::mem::take(&mut self.table) {
            let from = match compare(&min, &last).is_gt() {
                true => min.clone(),
                false => self.step(&last, true)?,
            };
            out.extend(self.generate(&key, from, &max, inclusive)?);
        }
        Ok(out)
    }

    /// A densified value: a number, or a date with a `unit`.
    fn check(&self, v: &Bson) -> Result<()> {
        match (v, self.spec.unit) {
            (Bson::DateTime(_), Some(_)) => Ok(()),
            (Bson::DateTime(_), None) => {
                Err(loc(5733501, "Unit must be specified with a date step"))
            }
            (v, None) if is_number(v) => Ok(()),
            (v, Some(_)) if is_number(v) => {
                Err(loc(5733506, "Unit must not be specified with non-date values"))
            }
            _ => Err(loc(5733201, "Densify field type must be numeric or a date")),
        }
    }
}

#[cfg(test)]
mod tests {
    //! `$densify` on the manual's examples (hourly temperatures, coffee by altitude) and
    //! its specification errors.

    use bson::{Bson, DateTime, Document, bson, doc};

    use crate::agg::tests::{Mem, run};
    use crate::expr::Result;

    fn hour(h: u32) -> Bson {
        let s = format!("2021-05-18T{h:02}:00:00Z");
        Bson::DateTime(DateTime::parse_rfc3339_str(&s).expect("a date"))
    }

    fn coffee() -> Vec<Document> {
        [
            (600, "A"),
            (750, "A"),
            (950, "A"),
            (1250, "G"),
            (1700, "G"),
            (1600, "S"),
            (1800, "S"),
            (2000, "S"),
        ]
        .iter()
        .map(|(alt, v)| doc! {"altitude": *alt, "variety": *v, "score": 1})
        .collect()
    }

    /// `(variety, altitude, generated)` of each output document.
    fn rows(out: &[Document]) -> Vec<(String, i32, bool)> {
        out.iter()
            .map(|d| {
                let v = d.get_str("variety").unwrap_or_default().to_string();
                (v, d.get_i32("altitude").unwrap_or(-1), !d.contains_key("score"))
            })
            .collect()
    }

    #[test]
    fn hourly_readings_within_explicit_bounds() -> Result<()> {
        let temps: Vec<Document> = [(0, 12), (4, 11), (8, 11), (12, 12)]
            .iter()
            .map(|(h, t)| doc! {"metadata": {"sensorId": 5578}, "timestamp": hour(*h), "temp": *t})
            .collect();
        let stage = bson!([{"$densify": {"field": "timestamp",
            "range": {"step": 1, "unit": "hour", "bounds": [hour(0), hour(8)]}}}]);
        let out = run(&Mem::default(), temps, stage)?;
        let got: Vec<(Bson, bool)> = out
            .iter()
            .map(|d| (d.get("timestamp").cloned().unwrap_or(Bson::Null), d.contains_key("temp")))
            .collect();
        let want: Vec<(Bson, bool)> =
            [0, 1, 2, 3, 4, 5, 6, 7, 8, 12].iter().map(|h| (hour(*h), h % 4 == 0)).collect();
        assert_eq!(got, want);
        assert_eq!(out[1], doc! {"timestamp": hour(1)});
        Ok(())
    }

    #[test]
    fn coffee_by_altitude_over_full_and_partition_bounds() -> Result<()> {
        let full = bson!([{"$densify": {"field": "altitude", "partitionByFields": ["variety"],
            "range": {"bounds": "full", "step": 200}}}, {"$sort": {"variety": 1, "altitude": 1}}]);
        let got = rows(&run(&Mem::default(), coffee(), full)?);
        let mut want = Vec::new();
        for (v, own) in
            [("A", vec![600, 750, 950]), ("G", vec![1250, 1700]), ("S", vec![1600, 1800, 2000])]
        {
            let mut all: Vec<(String, i32, bool)> = (0..8)
                .map(|k| 600 + 200 * k)
                .filter(|a| !own.contains(a))
                .map(|a| (v.to_string(), a, true))
                .collect();
            all.extend(own.iter().map(|a| (v.to_string(), *a, false)));
            all.sort_by_key(|r| r.1);
            want.extend(all);
        }
        assert_eq!(got, want);

        let partition = bson!([{"$densify": {"field": "altitude", "partitionByFields": ["variety"],
            "range": {"bounds": "partition", "step": 200}}}]);
        let got = rows(&run(&Mem::default(), coffee(), partition)?);
        let r = |v: &str, a, g| (v.to_string(), a, g);
        assert_eq!(
            got,
            vec![
                r("A", 600, false),
                r("A", 750, false),
                r("A", 800, true),
                r("A", 950, false),
                r("G", 1250, false),
                r("G", 1450, true),
                r("G", 1650, true),
                r("G", 1700, false),
                r("S", 1600, false),
                r("S", 1800, false),
                r("S", 2000, false),
            ]
        );
        // Documents without the field pass first; explicit bounds fill every partition (`A`,
        // all below them, at the end).
        let mut docs = coffee();
        docs.push(doc! {"variety": "A", "score": 2});
        let explicit = bson!([{"$densify": {"field": "altitude", "partitionByFields": ["variety"],
            "range": {"bounds": [1000, 1400], "step": 200}}}]);
        let got = rows(&run(&Mem::default(), docs, explicit)?);
        assert_eq!(got.first(), Some(&r("A", -1, false)));
        let generated: Vec<_> = got.iter().filter(|g| g.2).cloned().collect();
        assert_eq!(
            generated,
            vec![
                r("G", 1000, true),
                r("G", 1200, true),
                r("S", 1000, true),
                r("S", 1200, true),
                r("A", 1000, true),
                r("A", 1200, true)
            ]
        );
        Ok(())
    }

    #[test]
    fn densify_specification_errors_carry_mongodb_codes() {
        let code = |spec: Bson| {
            run(&Mem::default(), vec![doc! {"x": 1, "s": "a"}], bson!([{"$densify": spec}]))
                .err()
                .map(|e| e.code)
        };
        let range = |r: Bson| bson!({"field": "x", "range": r});
        let cases: Vec<(Bson, i32)> = vec![
            (bson!(1), 9),
            (bson!({"range": {"step": 1, "bounds": "full"}}), 40414),
            (bson!({"field": "x"}), 40414),
            (bson!({"field": 1, "range": {"step": 1, "bounds": "full"}}), 14),
            (bson!({"field": "x", "range": {"step": 1, "bounds": "full"}, "y": 1}), 40415),
            (range(bson!({"bounds": "full"})), 40414),
            (range(bson!({"step": 0, "bounds": "full"})), 5733401),
            (range(bson!({"step": 1.5, "bounds": "full", "unit": "day"})), 6586400),
            (range(bson!({"step": 1, "bounds": "full", "unit": "eon"})), 9),
            (range(bson!({"step": 1, "bounds": [0]})), 5733403),
            (range(bson!({"step": 1, "bounds": [2, 1]})), 5733402),
            (range(bson!({"step": 1, "bounds": [0, 1], "unit": "day"})), 5733409),
            (range(bson!({"step": 1, "bounds": [0, 1.5]})), 5876900),
            (range(bson!({"step": 1, "bounds": ["a", "b"]})), 5946800),
            (range(bson!({"step": 1, "bounds": "some"})), 5946802),
            (range(bson!({"step": 1, "bounds": 3})), 5733404),
            (range(bson!({"step": 1, "bounds": "partition"})), 5733408),
            (bson!({"field": "s", "range": {"step": 1, "bounds": "full"}}), 5733201),
        ];
        for (spec, want) in cases {
            assert_eq!(code(spec.clone()), Some(want), "{spec}");
        }
    }
}
