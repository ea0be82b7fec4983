//! Array operators, the set operators, and the accumulator-like expressions (`$sum`,
//! `$avg`, `$max`, `$min`, `$stdDev*` over one array or over their arguments).

use bson::Bson;

use super::accum::Acc;
use super::ops::{eval_named, named};
use super::value::{
    compare, equal, is_nullish, is_number, or_null, sort_values, to_int, truthy, type_name,
};
use super::{Args, Expr, ExprError, MISSING, Result, Vars};

fn array_arg(v: &Bson, code: i32, msg: impl Fn(&str) -> String) -> Result<&Vec<Bson>> {
    match v {
        Bson::Array(items) => Ok(items),
        other => Err(ExprError::location(code, msg(type_name(other)))),
    }
}

pub fn size(_: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().unwrap_or(&MISSING);
    let items = array_arg(v, 17124, |t| {
        format!("The argument to $size must be an array. Type of argument was: {t}")
    })?;
    Ok(super::value::int_or_long(items.len() as i64))
}

/// An array index counted from the end when negative.
fn at(items: &[Bson], i: i64) -> Bson {
    let idx = if i < 0 { items.len() as i64 + i } else { i };
    usize::try_from(idx).ok().and_then(|i| items.get(i)).cloned().unwrap_or(MISSING)
}

pub fn elem_at(_: &str, args: &[Bson]) -> Result<Bson> {
    let [a, i] = args else { return Ok(Bson::Null) };
    if is_nullish(a) || is_nullish(i) {
        return Ok(Bson::Null);
    }
    let items = array_arg(a, 28689, |t| {
        format!("$arrayElemAt's first argument must be an array, but is {t}")
    })?;
    if !is_number(i) {
        return Err(ExprError::location(
            28690,
            format!(
                "$arrayElemAt's second argument must be a numeric value, but is {}",
                type_name(i)
            ),
        ));
    }
    let Some(i) = to_int(i).filter(|i| i32::try_from(*i).is_ok()) else {
        return Err(ExprError::location(
            28691,
            format!(
                "$arrayElemAt's second argument must be representable as a 32-bit integer: {i}"
            ),
        ));
    };
    Ok(at(items, i))
}

pub fn concat_arrays(_: &str, args: &[Bson]) -> Result<Bson> {
    let mut out = Vec::new();
    for v in args {
        if is_nullish(v) {
            return Ok(Bson::Null);
        }
        out.extend(
            array_arg(v, 28664, |t| format!("$concatArrays only supports arrays, not {t}"))?
                .iter()
                .cloned(),
        );
    }
    Ok(Bson::Array(out))
}

fn end(op: &str, args: &[Bson], first: bool) -> Result<Bson> {
    let v = args.first().unwrap_or(&MISSING);
    if is_nullish(v) {
        return Ok(Bson::Null);
    }
    let items = array_arg(v, 28689, |t| format!("{op}'s argument must be an array, but is {t}"))?;
    Ok(if first { items.first() } else { items.last() }.cloned().unwrap_or(MISSING))
}

pub fn first(op: &str, args: &[Bson]) -> Result<Bson> {
    end(op, args, true)
}

pub fn last(op: &str, args: &[Bson]) -> Result<Bson> {
    end(op, args, false)
}

pub fn is_array(_: &str, args: &[Bson]) -> Result<Bson> {
    Ok(Bson::Boolean(matches!(args.first(), Some(Bson::Array(_)))))
}

pub fn in_(_: &str, args: &[Bson]) -> Result<Bson> {
    let [v, a] = args else { return Ok(Bson::Null) };
    let items =
        array_arg(a, 40081, |t| format!("$in requires an array as a second argument, found: {t}"))?;
    Ok(Bson::Boolean(items.iter().any(|i| equal(i, &or_null(v.clone())))))
}

pub fn index_of_array(_: &str, args: &[Bson]) -> Result<Bson> {
    let a = args.first().unwrap_or(&MISSING);
    if is_nullish(a) {
        return Ok(Bson::Null);
    }
    let items = array_arg(a, 40090, |t| {
        format!("$indexOfArray requires an array as a first argument, found: {t}")
    })?;
    let needle = args.get(1).cloned().map(or_null).unwrap_or(Bson::Null);
    let bound = |i: usize| -> Result<Option<usize>> {
        match args.get(i) {
            None => Ok(None),
            Some(v) => match to_int(v) {
                Some(n) if n >= 0 && is_number(v) => Ok(Some(n as usize)),
                Some(_) if is_number(v) => Err(ExprError::location(
                    40097,
                    format!("$indexOfArray requires a nonnegative index, found: {v}"),
                )),
                _ => Err(ExprError::location(
                    40096,
                    format!(
                        "$indexOfArray requires an integral index, found a value of type: {}, with value: {v}",
                        type_name(v)
                    ),
                )),
            },
        }
    };
    let (start, stop) = (bound(2)?.unwrap_or(0), bound(3)?.unwrap_or(items.len()).min(items.len()));
    let found = (start..stop).find(|&i| items.get(i).is_some_and(|x| equal(x, &needle)));
    Ok(Bson::Int32(found.map_or(-1, |i| i as i32)))
}

pub fn range(_: &str, args: &[Bson]) -> Result<Bson> {
    let int = |i: usize, code: i32, what: &str| -> Result<i64> {
        let v = args.get(i).unwrap_or(&Bson::Int32(1));
        match to_int(v) {
            Some(n) if is_number(v) && i32::try_from(n).is_ok() => Ok(n),
            _ => Err(ExprError::location(
                code,
                format!(
                    "$range requires a {what} that can be represented as a 32-bit integer, found value: {v}"
                ),
            )),
        }
    };
    let (start, stop, step) = (
        int(0, 34444, "starting value")?,
        int(1, 34446, "ending value")?,
        int(2, 34448, "step value")?,
    );
    if step == 0 {
        return Err(ExprError::location(34449, "$range requires a non-zero step value"));
    }
    let mut out = Vec::new();
    let mut i = start;
    while (step > 0 && i < stop) || (step < 0 && i > stop) {
        out.push(Bson::Int32(i as i32));
        i += step;
    }
    Ok(Bson::Array(out))
}

pub fn reverse(_: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().unwrap_or(&MISSING);
    if is_nullish(v) {
        return Ok(Bson::Null);
    }
    let items = array_arg(v, 34435, |t| {
        format!("The argument to $reverseArray must be an array, but was of type: {t}")
    })?;
    Ok(Bson::Array(items.iter().rev().cloned().collect()))
}

pub fn slice(_: &str, args: &[Bson]) -> Result<Bson> {
    if args.iter().any(is_nullish) {
        return Ok(Bson::Null);
    }
    let a = args.first().unwrap_or(&MISSING);
    let items = array_arg(a, 28724, |t| {
        format!("First argument to $slice must be an array, but is of type: {t}")
    })?;
    let int = |i: usize| args.get(i).and_then(|v| to_int(v).filter(|_| is_number(v)));
    let len = items.len() as i64;
    let (start, n) = match args.len() {
        2 => {
            let n = int(1).ok_or_else(|| {
                ExprError::location(28725, "Second argument to $slice must be a numeric value")
            })?;
            if n < 0 { ((len + n).max(0), -n) } else { (0, n) }
        }
        _ => {
            let pos = int(1).ok_or_else(|| {
                ExprError::location(28725, "Second argument to $slice must be a numeric value")
            })?;
            let n = int(2).ok_or_else(|| {
                ExprError::location(28727, "Third argument to $slice must be numeric")
            })?;
            if n <= 0 {
                return Err(ExprError::location(
                    28729,
                    format!("Third argument to $slice must be positive: {n}"),
                ));
            }
            (if pos < 0 { (len + pos).max(0) } else { pos.min(len) }, n)
        }
    };
    Ok(Bson::Array(items.iter().skip(start as usize).take(n as usize).cloned().collect()))
}

/// The distinct values of `items` in first-seen order.
fn distinct(items: impl IntoIterator<Item = Bson>) -> Vec<Bson> {
    let mut out: Vec<Bson> = Vec::new();
    for v in items {
        if !out.iter().any(|o| equal(o, &v)) {
            out.push(v);
        }
    }
    out
}

fn sets<'a>(op: &str, args: &'a [Bson]) -> Result<Option<Vec<&'a Vec<Bson>>>> {
    let mut out = Vec::new();
    for v in args {
        if is_nullish(v) {
            return Ok(None);
        }
        out.push(array_arg(v, 17044, |t| {
            format!("All operands of {op} must be arrays. One argument is of type: {t}")
        })?);
    }
    Ok(Some(out))
}

pub fn set_union(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some(sets) = sets(op, args)? else { return Ok(Bson::Null) };
    Ok(Bson::Array(distinct(sets.into_iter().flatten().cloned())))
}

pub fn set_intersection(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some(sets) = sets(op, args)? else { return Ok(Bson::Null) };
    let Some((first, rest)) = sets.split_first() else { return Ok(Bson::Array(Vec::new())) };
    let keep = first.iter().filter(|v| rest.iter().all(|s| s.iter().any(|x| equal(x, v))));
    Ok(Bson::Array(distinct(keep.cloned())))
}

pub fn set_difference(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some(sets) = sets(op, args)? else { return Ok(Bson::Null) };
    let [a, b] = sets.as_slice() else { return Ok(Bson::Null) };
    Ok(Bson::Array(distinct(a.iter().filter(|v| !b.iter().any(|x| equal(x, v))).cloned())))
}

fn subset(a: &[Bson], b: &[Bson]) -> bool {
    a.iter().all(|v| b.iter().any(|x| equal(x, v)))
}

pub fn set_equals(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some(sets) = sets(op, args)? else {
        return Err(ExprError::location(17044, format!("All operands of {op} must be arrays.")));
    };
    let Some((first, rest)) = sets.split_first() else { return Ok(Bson::Boolean(true)) };
    Ok(Bson::Boolean(rest.iter().all(|s| subset(first, s) && subset(s, first))))
}

pub fn set_is_subset(op: &str, args: &[Bson]) -> Result<Bson> {
    let Some(sets) = sets(op, args)? else {
        return Err(ExprError::location(17046, format!("both operands of {op} must be arrays.")));
    };
    let [a, b] = sets.as_slice() else { return Ok(Bson::Null) };
    Ok(Bson::Boolean(subset(a, b)))
}

pub fn any_true(op: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().unwrap_or(&MISSING);
    let items = array_arg(v, 17041, |t| format!("{op}'s argument must be an array, but is {t}"))?;
    Ok(Bson::Boolean(items.iter().any(truthy)))
}

pub fn all_true(op: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().unwrap_or(&MISSING);
    let items = array_arg(v, 17040, |t| format!("{op}'s argument must be an array, but is {t}"))?;
    Ok(Bson::Boolean(items.iter().all(truthy)))
}

/// `$sum` and friends as expressions: over the elements of a single array argument, or
/// over the arguments.
fn fold(op: &str, args: &[Bson]) -> Result<Bson> {
    let values: Vec<Bson> = match args {
        [Bson::Array(items)] => items.clone(),
        _ => args.to_vec(),
    };
    let mut acc = Acc::new(op, None)?;
    for v in values {
        acc.add(v)?;
    }
    Ok(acc.finish())
}

pub fn sum(op: &str, args: &[Bson]) -> Result<Bson> {
    fold(op, args)
}
pub fn avg(op: &str, args: &[Bson]) -> Result<Bson> {
    fold(op, args)
}
pub fn max(op: &str, args: &[Bson]) -> Result<Bson> {
    fold(op, args)
}
pub fn min(op: &str, args: &[Bson]) -> Result<Bson> {
    fold(op, args)
}
pub fn std_dev_pop(op: &str, args: &[Bson]) -> Result<Bson> {
    fold(op, args)
}
pub fn std_dev_samp(op: &str, args: &[Bson]) -> Result<Bson> {
    fold(op, args)
}

/// The `as` variable name of `$filter`/`$map` (default `this`).
fn as_name(args: &Args) -> Result<String> {
    match named(args, "as") {
        None => Ok("this".to_string()),
        Some(Expr::Literal(Bson::String(s))) => {
            super::cond::check_var_name(s)?;
            Ok(s.clone())
        }
        Some(_) => Err(ExprError::failed_to_parse("'as' must be a string naming a variable")),
    }
}

/// The `input` array; `None` for null.
fn input(args: &Args, vars: &mut Vars, code: i32, op: &str) -> Result<Option<Vec<Bson>>> {
    match eval_named(args, "input", vars)? {
        Bson::Array(items) => Ok(Some(items)),
        v if is_nullish(&v) => Ok(None),
        v => Err(ExprError::location(
            code,
            format!("input to {op} must be an array not {}", type_name(&v)),
        )),
    }
}

pub fn filter(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let name = as_name(args)?;
    let Some(items) = input(args, vars, 28651, op)? else { return Ok(Bson::Null) };
    let limit = match eval_named(args, "limit", vars)? {
        v if is_nullish(&v) => usize::MAX,
        v => match to_int(&v) {
            Some(n) if n > 0 && is_number(&v) => n as usize,
            _ => {
                return Err(ExprError::location(
                    327391,
                    format!("$filter: limit must be greater than 0: {v}"),
                ));
            }
        },
    };
    let Some(cond) = named(args, "cond") else { return Ok(Bson::Null) };
    let mut out = Vec::new();
    for item in items {
        if out.len() >= limit {
            break;
        }
        let keep = vars.scoped(vec![(name.clone(), item.clone())], |v| cond.eval(v))?;
        if truthy(&keep) {
            out.push(item);
        }
    }
    Ok(Bson::Array(out))
}

pub fn map(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let name = as_name(args)?;
    let Some(items) = input(args, vars, 16883, op)? else { return Ok(Bson::Null) };
    let Some(body) = named(args, "in") else { return Ok(Bson::Null) };
    let mut out = Vec::new();
    for item in items {
        out.push(or_null(vars.scoped(vec![(name.clone(), item)], |v| body.eval(v))?));
    }
    Ok(Bson::Array(out))
}

pub fn reduce(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let items = match eval_named(args, "input", vars)? {
        Bson::Array(items) => items,
        v if is_nullish(&v) => return Ok(Bson::Null),
        v => {
            return Err(ExprError::location(
                40080,
                format!("$reduce requires that 'input' be an array, found: {v}"),
            ));
        }
    };
    let mut acc = eval_named(args, "initialValue", vars)?;
    let Some(body) = named(args, "in") else { return Ok(Bson::Null) };
    for item in items {
        let bindings = vec![("value".to_string(), acc), ("this".to_string(), item)];
        acc = vars.scoped(bindings, |v| body.eval(v))?;
    }
    Ok(acc)
}

/// A `sortBy` of `$sortArray` or of `$top`/`$bottom`: `1`/`-1`, or fields with directions.
pub fn sort_spec(v: &Bson) -> Result<Vec<(Vec<String>, bool)>> {
    let dir = |d: &Bson| match to_int(d) {
        Some(1) => Ok(true),
        Some(-1) => Ok(false),
        _ => Err(ExprError::location(
            15975,
            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
        )),
    };
    match v {
        Bson::Document(d) if !d.is_empty() => d
            .iter()
            .map(|(k, d)| Ok((k.split('.').map(str::to_string).collect(), dir(d)?)))
            .collect(),
        Bson::Document(_) => {
            Err(ExprError::location(15976, "$sort stage must have at least one sort key"))
        }
        other => Ok(vec![(Vec::new(), dir(other)?)]),
    }
}

/// Compares two values by a sort spec (an empty path: the values themselves).
pub fn compare_by(spec: &[(Vec<String>, bool)], a: &Bson, b: &Bson) -> std::cmp::Ordering {
    for (path, asc) in spec {
        let get = |v: &Bson| or_null(super::value::get_path(v, path));
        let ord = compare(&get(a), &get(b));
        let ord = if *asc { ord } else { ord.reverse() };
        if ord.is_ne() {
            return ord;
        }
    }
    std::cmp::Ordering::Equal
}

pub fn sort_array(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let mut items = match eval_named(args, "input", vars)? {
        Bson::Array(items) => items,
        v if is_nullish(&v) => return Ok(Bson::Null),
        v => {
            return Err(ExprError::location(
                2942504,
                format!(
                    "The input argument to $sortArray must be an array, but was of type: {}",
                    type_name(&v)
                ),
            ));
        }
    };
    let spec = sort_spec(&eval_named(args, "sortBy", vars)?)?;
    items.sort_by(|a, b| compare_by(&spec, a, b));
    Ok(Bson::Array(items))
}

pub fn zip(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let inputs = match eval_named(args, "inputs", vars)? {
        Bson::Array(items) => items,
        v => {
            return Err(ExprError::location(
                34460,
                format!("inputs must be an array of expressions, found {}", type_name(&v)),
            ));
        }
    };
    let mut arrays = Vec::new();
    for v in inputs {
        match v {
            Bson::Array(a) => arrays.push(a),
            v if is_nullish(&v) => return Ok(Bson::Null),
            v => {
                return Err(ExprError::location(
                    34468,
                    format!("$zip found a non-array expression in input: {v}"),
                ));
            }
        }
    }
    let longest = truthy(&eval_named(args, "useLongestLength", vars)?);
    let defaults = match eval_named(args, "defaults", vars)? {
        Bson::Array(d) if longest => d,
        Bson::Array(_) => {
            return Err(ExprError::location(
                34466,
                "cannot specify defaults unless useLongestLength is true",
            ));
        }
        _ => Vec::new(),
    };
    let n =
        if longest { arrays.iter().map(Vec::len).max() } else { arrays.iter().map(Vec::len).min() }
            .unwrap_or(0);
    let rows = (0..n)
        .map(|i| {
            Bson::Array(
                arrays
                    .iter()
                    .enumerate()
                    .map(|(k, a)| a.get(i).or(defaults.get(k)).cloned().unwrap_or(Bson::Null))
                    .collect(),
            )
        })
        .collect();
    Ok(Bson::Array(rows))
}

pub fn n_of(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let n = eval_named(args, "n", vars)?;
    let n = match to_int(&n) {
        Some(k) if k > 0 && is_number(&n) => k as usize,
        _ => {
            return Err(ExprError::location(
                5787908,
                format!("Value for 'n' must be a positive integral value, found {n}"),
            ));
        }
    };
    let mut items = match eval_named(args, "input", vars)? {
        Bson::Array(items) => items,
        v => {
            return Err(ExprError::location(
                5788200,
                format!("Input must be an array, found {}", type_name(&v)),
            ));
        }
    };
    let out: Vec<Bson> = match op {
        "$firstN" => items.into_iter().take(n).collect(),
        "$lastN" => {
            let skip = items.len().saturating_sub(n);
            items.into_iter().skip(skip).collect()
        }
        _ => {
            items.retain(|v| !is_nullish(v));
            sort_values(&mut items);
            if op == "$maxN" {
                items.reverse();
            }
            items.into_iter().take(n).collect()
        }
    };
    Ok(Bson::Array(out))
}
