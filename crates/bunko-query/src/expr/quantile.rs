//! `$median` and `$percentile`, as `$group` accumulators and as expressions over an array
//! (MongoDB 7.0): `{input, p: [numbers in [0, 1]], method: "approximate"}` (`$median`
//! without `p`). The numeric values among the input (as doubles) are ranked and the value
//! at rank `ceil(n·p) − 1` (the last for `p = 1`) is each percentile: MongoDB's discrete
//! percentile, which its expression form computes for `"approximate"` too; its accumulator
//! approximates the same value with a t-digest, which agrees with it on small inputs. No
//! numeric value: `null` (`$percentile`: one `null` per `p`). The specification is checked
//! in MongoDB's order with its codes.

use bson::Bson;

use super::value::{is_number, to_f64};
use super::{Args, Expr, ExprError, Result};

/// A checked specification: the input and the percentiles asked (`[0.5]` for `$median`).
#[derive(Clone, Debug, PartialEq)]
pub struct Quantile {
    pub input: Expr,
    pub ps: Vec<f64>,
    pub median: bool,
}

/// Parses `op`'s argument; `accumulator`: in a `$group` (its own error codes).
pub fn parse(op: &str, arg: &Bson, accumulator: bool) -> Result<Quantile> {
    let median = op == "$median";
    let doc = match arg {
        Bson::Document(d) => d,
        Bson::Array(_) if accumulator => {
            let message = format!("The {op} accumulator is a unary operator");
            return Err(ExprError::location(40237, message));
        }
        other => {
            let code = match (median, accumulator) {
                (true, true) => 7436100,
                (true, false) => 7436201,
                (false, true) => 7429703,
                (false, false) => 7436200,
            };
            let message = format!("specification must be an object; found {op}: {other}");
            return Err(ExprError::location(code, message));
        }
    };
    let known: &[&str] = if median { &["input", "method"] } else { &["input", "p", "method"] };
    if let Some(unknown) = doc.keys().find(|k| !known.contains(&k.as_str())) {
        let message = format!("BSON field '{op}.{unknown}' is an unknown field.");
        return Err(ExprError::location(40415, message));
    }
    let missing = |field: &str| {
        let message = format!("BSON field '{op}.{field}' is missing but a required field");
        ExprError::location(40414, message)
    };
    let input = Expr::parse(doc.get("input").ok_or_else(|| missing("input"))?)?;
    let ps = match median {
        true => vec![0.5],
        false => percentiles(doc.get("p").ok_or_else(|| missing("p"))?)?,
    };
    match doc.get("method") {
        None => Err(missing("method")),
        Some(Bson::String(m)) if m == "approximate" => Ok(Quantile { input, ps, median }),
        Some(Bson::String(_)) => Err(ExprError::new(
            2,
            "BadValue",
            "Currently only 'approximate' can be used as a percentile 'method'.",
        )),
        Some(other) => Err(ExprError::new(
            14,
            "TypeMismatch",
            format!(
                "BSON field '{op}.method' is the wrong type '{}', expected type 'string'",
                super::value::type_name(other)
            ),
        )),
    }
}

/// The `p` field: a constant array of numbers in `[0, 1]`.
fn percentiles(p: &Bson) -> Result<Vec<f64>> {
    let fail = |code: i32, found: String| {
        let message = format!(
            "The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: {found}"
        );
        ExprError::location(code, message)
    };
    if reads_variables(p) {
        let message = format!(
            "The $percentile 'p' field must be an array of constant values, but found value: {p}."
        );
        return Err(ExprError::location(7750300, message));
    }
    let Bson::Array(items) = p else { return Err(fail(7750301, p.to_string())) };
    if items.is_empty() {
        return Err(fail(7750301, p.to_string()));
    }
    items
        .iter()
        .map(|item| match to_f64(item).filter(|_| is_number(item)) {
            None => Err(fail(7750302, item.to_string())),
            Some(x) if !(0.0..=1.0).contains(&x) => Err(fail(7750303, x.to_string())),
            Some(x) => Ok(x),
        })
        .collect()
}

/// Whether a `p` value names a field or a variable (it must be constant).
fn reads_variables(v: &Bson) -> bool {
    match v {
        Bson::String(s) => s.starts_with('$'),
        Bson::Array(items) => items.iter().any(reads_variables),
        Bson::Document(d) => d.iter().any(|(k, v)| k.starts_with('$') || reads_variables(v)),
        _ => false,
    }
}

/// The answer for the samples `values` (numbers already as doubles).
pub fn finish(q: &Quantile, mut values: Vec<f64>) -> Bson {
    values.sort_by(f64::total_cmp);
    let at = |p: f64| -> Bson {
        let n = values.len();
        if n == 0 {
            return Bson::Null;
        }
        let rank = if p >= 1.0 { n - 1 } else { ((n as f64 * p).ceil() as usize).max(1) - 1 };
        Bson::Double(values[rank.min(n - 1)])
    };
    match q.median {
        true => at(0.5),
        false => Bson::Array(q.ps.iter().map(|p| at(*p)).collect()),
    }
}

/// The numeric values of an expression's input: a number, or an array's numbers.
pub fn samples(input: &Bson) -> Vec<f64> {
    match input {
        Bson::Array(items) => items.iter().filter(|v| is_number(v)).filter_map(to_f64).collect(),
        v if is_number(v) => to_f64(v).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The expression forms, parsed from their argument as written (`Expr::parse` hands them
/// here): `input` and the percentiles as named arguments.
pub fn parse_expr(op: &str, arg: &Bson) -> Result<Args> {
    let q = parse(op, arg, false)?;
    let ps = Bson::Array(q.ps.into_iter().map(Bson::Double).collect());
    Ok(Args::Named(vec![("input".to_string(), q.input), ("p".to_string(), Expr::Literal(ps))]))
}

/// Evaluates an expression form ([`parse_expr`]'s arguments).
pub fn eval(op: &'static str, args: &Args, vars: &mut super::Vars) -> Result<Bson> {
    let input = super::ops::eval_named(args, "input", vars)?;
    let ps = match super::ops::named(args, "p") {
        Some(Expr::Literal(Bson::Array(ps))) => ps.iter().filter_map(to_f64).collect(),
        _ => vec![0.5],
    };
    let q = Quantile { input: Expr::Literal(Bson::Null), ps, median: op == "$median" };
    Ok(finish(&q, samples(&input)))
}
