//! A window function's `window`: `{documents: [lo, hi]}` (positions relative to the current
//! document) or `{range: [lo, hi], unit?}` (values of the single `sortBy` field relative to
//! the current document's), parsed with MongoDB's checks and codes, and the span of a
//! partition each document's window covers ([`Window::span`]).
//!
//! A range window holds only documents whose sort value has the expected type (numbers, or
//! dates with a `unit`): they sit together in the sorted partition, so the window is the
//! run of them between the thresholds. `"current"` in a range is the current document's
//! position (not its value), as in MongoDB.

use bson::{Bson, Document};

use crate::expr::value::{compare, is_number, to_int, type_name};
use crate::expr::{Expr, ExprError, Result};

/// One end of a window.
#[derive(Clone, Debug, PartialEq)]
pub enum Bound {
    Unbounded,
    Current,
    /// A position offset (documents) or a value offset (range).
    At(Bson),
}

/// A parsed `window`.
#[derive(Clone, Debug, PartialEq)]
pub enum Window {
    Documents(Bound, Bound),
    Range(Bound, Bound, Option<&'static str>),
}

/// The whole partition: every window function's default but `$derivative`'s.
pub const WHOLE: Window = Window::Documents(Bound::Unbounded, Bound::Unbounded);

fn bad(message: impl Into<String>) -> ExprError {
    ExprError::failed_to_parse(message)
}

impl Window {
    /// Parses `window`'s value; `sort` is the stage's `sortBy`.
    pub fn parse(v: &Bson, sort: Option<&[(Vec<String>, bool)]>) -> Result<Window> {
        let Bson::Document(d) = v else { return Err(bad("'window' field must be an object")) };
        let (documents, range, unit) = (d.get("documents"), d.get("range"), d.get("unit"));
        if documents.is_some() && range.is_some() {
            return Err(bad("Window bounds can specify either 'documents' or 'unit', not both."));
        }
        if range.is_none() && unit.is_some() {
            return Err(bad("Window bounds can only specify 'unit' with range-based bounds."));
        }
        match (documents, range) {
            (Some(docs), _) => Self::documents(d, docs, sort),
            (None, Some(range)) => Self::range(d, range, unit, sort),
            (None, None) if d.is_empty() => Ok(WHOLE),
            (None, None) => Err(bad(
                "'window' field can only contain 'documents' as the only argument or 'range' with an optional 'unit' field",
            )),
        }
    }

    fn documents(d: &Document, docs: &Bson, sort: Option<&[(Vec<String>, bool)]>) -> Result<Self> {
        if d.len() != 1 {
            return Err(bad("'window' field that specifies documents cannot have other fields"));
        }
        let (lo, hi) = pair(docs)?;
        let int = |v: Bson| match to_int(&v).filter(|_| is_number(&v)) {
            Some(n) => Ok(Bson::Int64(n)),
            None => Err(bad("Numeric document-based bounds must be an integer")),
        };
        let (lo, hi) = (bound(lo, &int)?, bound(hi, &int)?);
        check_forward(&lo, &hi)?;
        let window = Window::Documents(lo, hi);
        if window != WHOLE && sort.is_none() {
            return Err(ExprError::location(5339901, "Document-based bounds require a sortBy"));
        }
        Ok(window)
    }

    fn range(
        d: &Document,
        range: &Bson,
        unit: Option<&Bson>,
        sort: Option<&[(Vec<String>, bool)]>,
    ) -> Result<Self> {
        let (lo, hi) = pair(range)?;
        let unit = match unit {
            Some(unit) => {
                if d.len() != 2 {
                    return Err(bad(
                        "'window' field that specifies unit cannot have other fields besides 'range'",
                    ));
                }
                if !matches!(unit, Bson::String(_)) {
                    return Err(bad("'unit' must be a string"));
                }
                Some(crate::expr::date::unit(unit)?)
            }
            None if d.len() != 1 => {
                return Err(bad(
                    "'window' field that specifies range cannot have other fields besides 'unit'",
                ));
            }
            None => None,
        };
        let check = |v: Bson| match (unit, &v) {
            (Some(_), v) if to_int(v).is_some() && is_number(v) => Ok(v.clone()),
            (Some(_), _) => Err(bad("With 'unit', range-based bounds must be an integer")),
            (None, v) if is_number(v) => Ok(v.clone()),
            (None, _) => Err(bad("Range-based bounds expression must be a number")),
        };
        let (lo, hi) = (bound(lo, &check)?, bound(hi, &check)?);
        check_forward(&lo, &hi)?;
        match sort {
            Some([(_, asc)]) if !asc => {
                Err(ExprError::location(8947401, "Range-based bounds require an ascending sortBy"))
            }
            Some([_]) => Ok(Window::Range(lo, hi, unit)),
            _ => Err(ExprError::location(
                5339902,
                "Range-based bounds require sortBy a single field",
            )),
        }
    }

    /// The first and last positions (inclusive) of the window of the document at `i` in a
    /// partition whose first sort values are `keys`; `None` when the window is empty.
    pub fn span(&self, i: usize, keys: &[Bson]) -> Result<Option<(usize, usize)>> {
        match self {
            Window::Documents(lo, hi) => Ok(documents_span(lo, hi, i, keys.len())),
            Window::Range(lo, hi, unit) => range_span(lo, hi, *unit, i, keys),
        }
    }
}

/// The two ends of a bounds array.
fn pair(v: &Bson) -> Result<(&Bson, &Bson)> {
    match v {
        Bson::Array(items) if items.len() == 2 => Ok((&items[0], &items[1])),
        _ => Err(bad(format!("Window bounds must be a 2-element array: {v}"))),
    }
}

fn bound(v: &Bson, check: &dyn Fn(Bson) -> Result<Bson>) -> Result<Bound> {
    match v {
        Bson::String(s) if s == "unbounded" => Ok(Bound::Unbounded),
        Bson::String(s) if s == "current" => Ok(Bound::Current),
        Bson::String(_) => Err(bad("Window bounds must be 'unbounded', 'current', or a number.")),
        v => match Expr::parse(v)? {
            Expr::Literal(c) => Ok(Bound::At(check(c)?)),
            _ => Err(bad("Window bounds expression must be a constant.")),
        },
    }
}

/// MongoDB's 5339900: a lower bound above the upper (`"current"` counting as 0).
fn check_forward(lo: &Bound, hi: &Bound) -> Result<()> {
    let zero = Bson::Int32(0);
    let value = |b: &Bound| match b {
        Bound::Current => Some(zero.clone()),
        Bound::At(v) => Some(v.clone()),
        Bound::Unbounded => None,
    };
    if let (Some(l), Some(h)) = (value(lo), value(hi))
        && compare(&l, &h).is_gt()
    {
        return Err(ExprError::location(
            5339900,
            format!("Lower bound must not exceed upper bound: [{}, {}]", show(&l), show(&h)),
        ));
    }
    Ok(())
}

/// A number as MongoDB's `Value::toString` prints it.
fn show(v: &Bson) -> String {
    match v {
        Bson::Double(d) => format!("{d}"),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        other => other.to_string(),
    }
}

fn documents_span(lo: &Bound, hi: &Bound, i: usize, n: usize) -> Option<(usize, usize)> {
    let at = |b: &Bound, unbounded: i64| match b {
        Bound::Unbounded => unbounded,
        Bound::Current => i as i64,
        Bound::At(v) => i as i64 + to_int(v).unwrap_or(0),
    };
    let last = n as i64 - 1;
    let (lo, hi) = (at(lo, 0), at(hi, last));
    if lo > last || hi < 0 || n == 0 {
        return None;
    }
    Some((lo.max(0) as usize, hi.min(last) as usize))
}

fn range_span(
    lo: &Bound,
    hi: &Bound,
    unit: Option<&str>,
    i: usize,
    keys: &[Bson],
) -> Result<Option<(usize, usize)>> {
    let base = keys.get(i).unwrap_or(&Bson::Null);
    let expected = |v: &Bson| match unit {
        Some(_) => matches!(v, Bson::DateTime(_)),
        None => is_number(v),
    };
    match (unit, base) {
        (Some(_), Bson::DateTime(_)) => {}
        (Some(_), other) => {
            return Err(ExprError::location(
                5429513,
                format!(
                    "Invalid range: Expected the sortBy field to be a Date, but it was {}",
                    type_name(other)
                ),
            ));
        }
        (None, Bson::DateTime(_)) => {
            return Err(ExprError::location(
                5429413,
                "Invalid range: For windows that involve date or time ranges, a unit must be provided.",
            ));
        }
        (None, other) if !is_number(other) => {
            return Err(ExprError::location(
                5429414,
                format!(
                    "Invalid range: Expected the sortBy field to be a number, but it was {}",
                    type_name(other)
                ),
            ));
        }
        _ => {}
    }
    // The keys are in sort order, so each end is a binary search (`partition_point`).
    let lower = match lo {
        Bound::Current => Some(i),
        Bound::Unbounded => keys.iter().position(expected),
        Bound::At(delta) => {
            let threshold = offset(base, delta, unit)?;
            let first = keys.partition_point(|v| compare(v, &threshold).is_lt());
            Some(first).filter(|&j| keys.get(j).is_some_and(expected))
        }
    };
    let Some(lower) = lower else { return Ok(None) };
    let rest = keys.get(lower..).unwrap_or_default();
    let upper = match hi {
        Bound::Current => Some(i),
        Bound::Unbounded => {
            let start = lower.max(i);
            let run = keys.get(start..).unwrap_or_default().partition_point(expected);
            Some(start + run.saturating_sub(1))
        }
        Bound::At(delta) => {
            let threshold = offset(base, delta, unit)?;
            match rest.partition_point(|v| compare(v, &threshold).is_le()) {
                0 => None,
                k => Some(lower + k - 1),
            }
        }
    };
    Ok(upper.filter(|&u| u >= lower).map(|u| (lower, u)))
}

/// `base + delta`: a number, or a date moved by `delta` `unit`s (calendar months and
/// years as `$dateAdd` moves them).
pub(crate) fn offset(base: &Bson, delta: &Bson, unit: Option<&str>) -> Result<Bson> {
    match unit {
        None => crate::expr::arith::add("$add", &[base.clone(), delta.clone()]),
        Some(unit) => Expr::parse(&Bson::Document(bson::doc! {"$dateAdd": {
            "startDate": {"$literal": base.clone()},
            "unit": unit,
            "amount": delta.clone(),
        }}))?
        .eval_doc(&Document::new()),
    }
}
