//! Computing one window function over one sorted partition: a value per document.
//!
//! Accumulators fold the `$group` [`Acc`] over each document's window ([`Window::span`]).
//! A window that only grows from a fixed start (`["unbounded", ...]`, the usual running
//! total) is fed once, document by document, its state copied for each answer; the whole
//! partition is folded once; any other window is folded afresh per document.

use bson::{Bson, Document};

use super::bounds::{WHOLE, Window};
use super::func::{Func, Rank};
use crate::expr::accum::{Acc, AccSpec};
use crate::expr::arith;
use crate::expr::value::{compare, int_or_long, is_nullish, is_number, to_f64, type_name};
use crate::expr::{Expr, ExprError, Result, Vars};

/// One partition, in `sortBy` order: each document's variables and the value of its first
/// `sortBy` field (missing without one).
pub struct Partition {
    pub vars: Vec<Vars>,
    pub keys: Vec<Bson>,
}

impl Partition {
    fn eval(&mut self, e: &Expr, i: usize) -> Result<Bson> {
        match self.vars.get_mut(i) {
            Some(v) => e.eval(v),
            None => Ok(Bson::Null),
        }
    }

    fn key(&self, i: usize) -> &Bson {
        self.keys.get(i).unwrap_or(&Bson::Null)
    }
}

/// The value of `func` over `window` for each document of `part`.
pub fn compute(func: &Func, window: &Window, part: &mut Partition) -> Result<Vec<Bson>> {
    match func {
        Func::Acc(spec) => accumulate(spec, window, part),
        Func::Rank(rank) => Ok(ranks(*rank, &part.keys)),
        Func::Shift { output, by, default } => {
            let n = part.vars.len() as i64;
            (0..n)
                .map(|i| match i + by {
                    j if (0..n).contains(&j) => part.eval(output, j as usize),
                    _ => Ok(default.clone()),
                })
                .collect()
        }
        Func::Derivative { input, unit } => {
            (0..part.vars.len()).map(|i| derivative(input, *unit, window, i, part)).collect()
        }
        Func::Integral { input, unit } => {
            (0..part.vars.len()).map(|i| integral(input, *unit, window, i, part)).collect()
        }
        Func::ExpMovingAvg { input, alpha } => {
            let mut avg: Option<f64> = None;
            let mut out = Vec::with_capacity(part.vars.len());
            for i in 0..part.vars.len() {
                let v = part.eval(input, i)?;
                if let Some(x) = to_f64(&v).filter(|_| is_number(&v)) {
                    avg = Some(avg.map_or(x, |a| x * alpha + a * (1.0 - alpha)));
                }
                out.push(avg.map_or(Bson::Null, Bson::Double));
            }
            Ok(out)
        }
        Func::Covariance { input, samp } => {
            let values: Vec<Bson> =
                (0..part.vars.len()).map(|i| part.eval(input, i)).collect::<Result<_>>()?;
            spans(window, part)?
                .into_iter()
                .map(|span| Ok(covariance(&values, span, *samp)))
                .collect()
        }
        Func::Locf(input) => {
            let mut last = Bson::Null;
            let mut out = Vec::with_capacity(part.vars.len());
            for i in 0..part.vars.len() {
                let v = part.eval(input, i)?;
                if !is_nullish(&v) {
                    last = v;
                }
                out.push(last.clone());
            }
            Ok(out)
        }
        Func::LinearFill(input) => linear_fill(input, part),
    }
}

/// Each document's window span.
fn spans(window: &Window, part: &Partition) -> Result<Vec<Option<(usize, usize)>>> {
    (0..part.vars.len()).map(|i| window.span(i, &part.keys)).collect()
}

fn accumulate(spec: &AccSpec, window: &Window, part: &mut Partition) -> Result<Vec<Bson>> {
    if matches!(spec.op, "$first" | "$last") {
        return endpoint(&spec.expr, spec.op == "$first", window, part);
    }
    let n = part.vars.len();
    let mut empty = match part.vars.first() {
        Some(v) => v.with_doc(&Document::new()),
        None => return Ok(Vec::new()),
    };
    let fresh = spec.start(&mut empty)?;
    if *window == WHOLE {
        let v = fold(spec, fresh, part, 0, n - 1)?.finish();
        return Ok(vec![v; n]);
    }
    // A window growing from a fixed start is fed once; any other is folded per document.
    let mut running: Option<(usize, usize, Acc)> = None;
    let mut out = Vec::with_capacity(n);
    for span in spans(window, part)? {
        let Some((lo, hi)) = span else {
            out.push(fresh.clone().finish());
            continue;
        };
        let (start, fed, acc) = match running.take() {
            Some((start, fed, acc)) if start == lo && fed <= hi + 1 => (start, fed, acc),
            _ => (lo, lo, fresh.clone()),
        };
        let acc = if fed <= hi { fold(spec, acc, part, fed, hi)? } else { acc };
        out.push(acc.clone().finish());
        running = Some((start, hi + 1, acc));
    }
    Ok(out)
}

/// `$first` and `$last` over a window: the input of its first or last document, as it is
/// (missing stays missing); null for an empty window.
fn endpoint(input: &Expr, first: bool, window: &Window, part: &mut Partition) -> Result<Vec<Bson>> {
    let mut out = Vec::with_capacity(part.vars.len());
    for span in spans(window, part)? {
        out.push(match span {
            Some((lo, hi)) => part.eval(input, if first { lo } else { hi })?,
            None => Bson::Null,
        });
    }
    Ok(out)
}

/// `acc` fed the documents `lo..=hi`.
fn fold(spec: &AccSpec, mut acc: Acc, part: &mut Partition, lo: usize, hi: usize) -> Result<Acc> {
    for v in part.vars.iter_mut().take(hi + 1).skip(lo) {
        spec.feed(&mut acc, v)?;
    }
    Ok(acc)
}

/// `$rank` (ties share the first tied position), `$denseRank` (ties share, no gaps),
/// `$documentNumber` (the position), counted from 1.
fn ranks(rank: Rank, keys: &[Bson]) -> Vec<Bson> {
    let (mut current, mut dense) = (0usize, 0usize);
    (0..keys.len())
        .map(|i| {
            let tie = i > 0 && compare(&keys[i - 1], &keys[i]).is_eq();
            if !tie {
                current = i + 1;
                dense += 1;
            }
            int_or_long(match rank {
                Rank::Sparse => current,
                Rank::Dense => dense,
                Rank::Number => i + 1,
            } as i64)
        })
        .collect()
}

/// `(y(last) - y(first)) / (x(last) - x(first))` over the window, `x` the sort value
/// (dates in milliseconds, then per `unit`).
fn derivative(
    input: &Expr,
    unit: Option<&str>,
    window: &Window,
    i: usize,
    part: &mut Partition,
) -> Result<Bson> {
    let Some((lo, hi)) = window.span(i, &part.keys)? else { return Ok(Bson::Null) };
    let (left, right) = (part.key(lo).clone(), part.key(hi).clone());
    let dates = matches!((&left, &right), (Bson::DateTime(_), Bson::DateTime(_)));
    match unit {
        Some(_) if !dates => {
            return Err(ExprError::location(
                5624900,
                "$derivative with 'unit' expects the sortBy field to be a Date",
            ));
        }
        None if matches!(left, Bson::DateTime(_)) || matches!(right, Bson::DateTime(_)) => {
            return Err(ExprError::location(
                5624901,
                "$derivative where the sortBy is a Date requires an 'unit'",
            ));
        }
        None if !is_number(&left) || !is_number(&right) => {
            return Err(ExprError::location(
                5624902,
                "$derivative (with no 'unit') expects the sortBy field to be numeric",
            ));
        }
        _ => {}
    }
    let run = arith::subtract("$subtract", &[right, left])?;
    let (y1, y2) = (part.eval(input, lo)?, part.eval(input, hi)?);
    let rise = arith::subtract("$subtract", &[y2, y1])?;
    if is_nullish(&rise) {
        return Err(ExprError::location(5624903, "$derivative input must not be null or missing"));
    }
    if to_f64(&run) == Some(0.0) {
        return Ok(Bson::Null);
    }
    let slope = arith::divide("$divide", &[rise, run])?;
    match unit {
        Some(unit) => {
            arith::multiply("$multiply", &[slope, Bson::Int64(crate::expr::date::unit_ms(unit))])
        }
        None => Ok(slope),
    }
}

/// The trapezoidal integral of the input over the sort value across the window.
fn integral(
    input: &Expr,
    unit: Option<&str>,
    window: &Window,
    i: usize,
    part: &mut Partition,
) -> Result<Bson> {
    let Some((lo, hi)) = window.span(i, &part.keys)? else { return Ok(Bson::Null) };
    let mut points = Vec::with_capacity(hi + 1 - lo);
    for j in lo..=hi {
        let (x, y) = (part.key(j).clone(), part.eval(input, j)?);
        points.push(point(&x, &y, unit)?);
    }
    if points.iter().any(|(x, y)| x.is_nan() || y.is_nan()) {
        return Ok(Bson::Double(f64::NAN));
    }
    // A fold from +0: an empty `sum` of floats is -0.
    let area = points
        .windows(2)
        .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
        .fold(0.0, |a, b| a + b);
    Ok(match unit {
        Some(unit) => Bson::Double(area / crate::expr::date::unit_ms(unit) as f64),
        None if points.len() < 2 => Bson::Int32(0),
        None => Bson::Double(area),
    })
}

/// One `$integral` point: the sort value (dates in milliseconds) and the input.
fn point(x: &Bson, y: &Bson, unit: Option<&str>) -> Result<(f64, f64)> {
    let x_ok = is_number(x) || matches!(x, Bson::DateTime(_));
    if !is_number(y) || !x_ok {
        return Err(ExprError::location(
            5423900,
            "The input value of $integral window function must be a vector of 2 value, the first value must be numeric or date type and the second must be numeric.",
        ));
    }
    let x = match (unit, x) {
        (Some(_), Bson::DateTime(d)) => d.timestamp_millis() as f64,
        (Some(_), _) => {
            return Err(ExprError::location(
                5423901,
                "$integral with 'unit' expects the sortBy field to be a Date",
            ));
        }
        (None, Bson::DateTime(_)) => {
            return Err(ExprError::location(
                5423902,
                "$integral (with no 'unit') expects the sortBy field to be numeric",
            ));
        }
        (None, x) => to_f64(x).unwrap_or(0.0),
    };
    Ok((x, to_f64(y).unwrap_or(0.0)))
}

/// The covariance of the `[x, y]` pairs of numbers in the span (others are skipped).
fn covariance(values: &[Bson], span: Option<(usize, usize)>, samp: bool) -> Bson {
    let Some((lo, hi)) = span else { return Bson::Null };
    let pairs: Vec<(f64, f64)> = values[lo..=hi]
        .iter()
        .filter_map(|v| match v {
            Bson::Array(xy) if xy.len() == 2 && is_number(&xy[0]) && is_number(&xy[1]) => {
                Some((to_f64(&xy[0])?, to_f64(&xy[1])?))
            }
            _ => None,
        })
        .collect();
    let n = pairs.len() as f64;
    if pairs.is_empty() || (samp && pairs.len() < 2) {
        return Bson::Null;
    }
    let (mx, my) =
        (pairs.iter().map(|p| p.0).sum::<f64>() / n, pairs.iter().map(|p| p.1).sum::<f64>() / n);
    let sum: f64 = pairs.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    Bson::Double(sum / if samp { n - 1.0 } else { n })
}

/// `$linearFill`: a null or missing value interpolated between the nearest non-null
/// values before and after it (by the sort value); null without both.
fn linear_fill(input: &Expr, part: &mut Partition) -> Result<Vec<Bson>> {
    let n = part.vars.len();
    let ys = (0..n).map(|i| part.eval(input, i)).collect::<Result<Vec<_>>>()?;
    let mut last_x: Option<&Bson> = None;
    for (x, y) in part.keys.iter().zip(&ys) {
        check_fill_point(x, y, last_x)?;
        last_x = Some(x);
    }
    let mut out = Vec::with_capacity(n);
    let mut before: Option<usize> = None;
    for i in 0..n {
        if !is_nullish(&ys[i]) {
            before = Some(i);
            out.push(ys[i].clone());
            continue;
        }
        let after = (i + 1..n).find(|&j| !is_nullish(&ys[j]) && !is_nullish(part.key(j)));
        let (Some(a), Some(b)) = (before, after) else {
            out.push(Bson::Null);
            continue;
        };
        let (x, x1, x2) = (part.key(i).clone(), part.key(a).clone(), part.key(b).clone());
        let (y1, y2) = (ys[a].clone(), ys[b].clone());
        let slope = arith::divide(
            "$divide",
            &[
                arith::subtract("$subtract", &[y2, y1.clone()])?,
                arith::subtract("$subtract", &[x2, x1.clone()])?,
            ],
        )?;
        let dx = arith::subtract("$subtract", &[x, x1])?;
        out.push(arith::add("$add", &[y1, arith::multiply("$multiply", &[dx, slope])?])?);
    }
    Ok(out)
}

/// MongoDB's checks of one `$linearFill` document, in sort order.
fn check_fill_point(x: &Bson, y: &Bson, last_x: Option<&Bson>) -> Result<()> {
    if !is_number(y) && !is_nullish(y) {
        return Err(ExprError::type_mismatch(format!(
            "Value to be filled must be numeric or nullish, but found {}",
            type_name(y)
        )));
    }
    let date = |v: &Bson| matches!(v, Bson::DateTime(_) | Bson::Timestamp(_));
    if !is_number(x) && !date(x) {
        return Err(ExprError::type_mismatch(format!(
            "Value of the sortBy field must be numeric or a date, but found {}",
            type_name(x)
        )));
    }
    let Some(last) = last_x else { return Ok(()) };
    if compare(x, last).is_eq() {
        return Err(ExprError::location(
            6050106,
            "There can be no repeated values in the sort field",
        ));
    }
    if date(x) != date(last) {
        return Err(ExprError::type_mismatch(format!(
            "Conflicting sort value types, previously received type {}, but found {}",
            type_name(last),
            type_name(x)
        )));
    }
    Ok(())
}
