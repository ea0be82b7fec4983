//! The window functions of one `output` field, parsed with MongoDB's checks and codes: the
//! `$group` accumulators (an [`AccSpec`] fed over each document's window, see `compute`)
//! and the window-only functions.

use bson::{Bson, Document};

use super::bounds::{Bound, WHOLE, Window};
use crate::expr::accum::{AccSpec, NAMES};
use crate::expr::value::{is_number, to_f64, to_int, type_name};
use crate::expr::{Expr, ExprError, Result};

/// The window-only functions.
const WINDOW_ONLY: &[&str] = &[
    "$rank",
    "$denseRank",
    "$documentNumber",
    "$shift",
    "$derivative",
    "$integral",
    "$expMovingAvg",
    "$covariancePop",
    "$covarianceSamp",
    "$locf",
    "$linearFill",
];

/// The `$rank` family.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rank {
    /// `$rank`: ties share the first tied position.
    Sparse,
    Dense,
    Number,
}

/// One parsed window function.
#[derive(Clone, Debug, PartialEq)]
pub enum Func {
    Acc(AccSpec),
    Rank(Rank),
    Shift {
        output: Expr,
        by: i64,
        default: Bson,
    },
    Derivative {
        input: Expr,
        unit: Option<&'static str>,
    },
    Integral {
        input: Expr,
        unit: Option<&'static str>,
    },
    /// `alpha` is `2 / (N + 1)` for `N`.
    ExpMovingAvg {
        input: Expr,
        alpha: f64,
    },
    Covariance {
        input: Expr,
        samp: bool,
    },
    Locf(Expr),
    LinearFill(Expr),
}

/// A sort specification: paths, ascending.
type Sort<'a> = Option<&'a [(Vec<String>, bool)]>;

fn bad(message: impl Into<String>) -> ExprError {
    ExprError::failed_to_parse(message)
}

fn known(name: &str) -> bool {
    NAMES.contains(&name) || WINDOW_ONLY.contains(&name)
}

/// Parses `field: value` of `output` into its function and window.
pub fn parse(field: &str, value: &Bson, sort: Sort<'_>) -> Result<(Func, Window)> {
    let Bson::Document(obj) = value else {
        return Err(bad(format!("The field '{field}' must be an object")));
    };
    let Some((name, arg)) = obj.iter().find(|(k, _)| k.starts_with('$')) else {
        return Err(bad(match obj.keys().next() {
            Some(first) if !first.is_empty() => {
                format!("Expected a $-prefixed window function, {first}")
            }
            _ => "Expected a $-prefixed window function".to_string(),
        }));
    };
    if !known(name) {
        return Err(bad(format!("Unrecognized window function, {name}")));
    }
    match name.as_str() {
        "$rank" | "$denseRank" | "$documentNumber" => rank(name, arg, obj, sort),
        "$shift" => shift(arg, obj, sort),
        "$derivative" | "$integral" => with_unit(name, arg, obj, sort),
        "$expMovingAvg" => exp_moving_avg(arg, obj, sort),
        "$locf" | "$linearFill" => fill(name, arg, obj, sort),
        _ => accumulator(field, name, arg, obj, sort),
    }
}

/// The `window` of `obj`, or `default`, refusing any key but `name` and `window`.
fn window_of(name: &str, obj: &Document, sort: Sort<'_>, default: Window) -> Result<Window> {
    let mut window = default;
    for (k, v) in obj {
        match k.as_str() {
            "window" => window = Window::parse(v, sort)?,
            k if k == name => {}
            k if known(k) => {
                return Err(bad("Cannot specify two functions in window function spec"));
            }
            k => {
                let named = matches!(
                    name,
                    "$first"
                        | "$last"
                        | "$firstN"
                        | "$lastN"
                        | "$minN"
                        | "$maxN"
                        | "$top"
                        | "$topN"
                        | "$bottom"
                        | "$bottomN"
                        | "$median"
                        | "$percentile"
                );
                return Err(bad(if named {
                    format!("{name} got unexpected argument: {k}")
                } else {
                    format!("Window function found an unknown argument: {k}")
                }));
            }
        }
    }
    Ok(window)
}

/// Refuses a `window` (and any other key) beside the function `name`.
fn no_window(name: &str, obj: &Document) -> Result<()> {
    if let Some(k) = obj.keys().find(|k| *k != name) {
        return Err(match k.as_str() {
            "window" => bad(format!("'window' field is not allowed in {name}")),
            k if known(k) => bad("Cannot specify two functions in window function spec"),
            k => bad(format!("Window function found an unknown argument: {k}")),
        });
    }
    Ok(())
}

fn accumulator(
    field: &str,
    name: &str,
    arg: &Bson,
    obj: &Document,
    sort: Sort<'_>,
) -> Result<(Func, Window)> {
    let window = window_of(name, obj, sort, WHOLE)?;
    if matches!(name, "$covariancePop" | "$covarianceSamp") {
        let input = Expr::parse(arg)?;
        return Ok((Func::Covariance { input, samp: name == "$covarianceSamp" }, window));
    }
    let mut spec = Document::new();
    spec.insert(name, arg.clone());
    Ok((Func::Acc(AccSpec::parse(field, &Bson::Document(spec))?), window))
}

fn rank(name: &str, arg: &Bson, obj: &Document, sort: Sort<'_>) -> Result<(Func, Window)> {
    if obj.len() != 1 {
        return Err(ExprError::location(
            5371601,
            "Rank style window functions take no other arguments",
        ));
    }
    if !matches!(arg, Bson::Document(d) if d.is_empty()) {
        return Err(ExprError::location(
            5371603,
            format!("{name} must be specified with '{{}}' as the value"),
        ));
    }
    if !matches!(sort, Some([_])) {
        return Err(ExprError::location(
            5371602,
            format!(
                "{name} must be specified with a top level sortBy expression with exactly one element"
            ),
        ));
    }
    let rank = match name {
        "$rank" => Rank::Sparse,
        "$denseRank" => Rank::Dense,
        _ => Rank::Number,
    };
    Ok((Func::Rank(rank), Window::Documents(Bound::Unbounded, Bound::Current)))
}

fn shift(arg: &Bson, obj: &Document, sort: Sort<'_>) -> Result<(Func, Window)> {
    if let Some(k) = obj.keys().find(|k| *k != "$shift") {
        return Err(match k.as_str() {
            "window" => bad("$shift does not accept a 'window' field"),
            k if known(k) => bad("Cannot specify multiple functions in window function spec"),
            k => bad(format!("Window function found an unknown argument: {k}")),
        });
    }
    let Bson::Document(args) = arg else { return Err(bad("Argument to $shift must be an object")) };
    let (mut output, mut by, mut default) = (None, None, Bson::Null);
    for (k, v) in args {
        match k.as_str() {
            "output" => output = Some(Expr::parse(v)?),
            "default" => match Expr::parse(v)? {
                Expr::Literal(c) => default = c,
                _ => {
                    return Err(bad("'$shift:default' expression must yield a constant value."));
                }
            },
            "by" => match to_int(v).filter(|n| is_number(v) && i32::try_from(*n).is_ok()) {
                Some(n) => by = Some(n),
                None => {
                    return Err(bad(format!(
                        "'$shift:by' field must be an integer, but found  by: {v}"
                    )));
                }
            },
            _ => return Err(bad("Unknown argument in $shift")),
        }
    }
    let Some(output) = output else { return Err(bad("$shift requires an 'output' expression.")) };
    let Some(by) = by else { return Err(bad("$shift requires 'by' as an integer value.")) };
    if sort.is_none() {
        return Err(bad("'$shift' requires a sortBy"));
    }
    let at = Bound::At(Bson::Int64(by));
    Ok((Func::Shift { output, by, default }, Window::Documents(at.clone(), at)))
}

/// `$derivative` and `$integral`: `{input, unit?}` over a single-field `sortBy`.
fn with_unit(name: &str, arg: &Bson, obj: &Document, sort: Sort<'_>) -> Result<(Func, Window)> {
    match sort {
        None => return Err(bad(format!("{name} requires a sortBy"))),
        Some([_]) => {}
        Some(_) => return Err(bad(format!("{name} requires a non-compound sortBy"))),
    }
    let mut window = None;
    for (k, v) in obj {
        match k.as_str() {
            "window" => window = Some(Window::parse(v, sort)?),
            k if k == name => {}
            k => return Err(bad(format!("{name} got unexpected argument: {k}"))),
        }
    }
    let Bson::Document(args) = arg else {
        return Err(bad(format!("{name} expects an object, but got a {}: {arg}", type_name(arg))));
    };
    let (mut input, mut unit) = (None, None);
    for (k, v) in args {
        match k.as_str() {
            "input" => input = Some(Expr::parse(v)?),
            "unit" => unit = Some(time_unit(v)?),
            k => return Err(bad(format!("{name} got unexpected argument: {k}"))),
        }
    }
    let Some(input) = input else {
        return Err(bad(format!("{name} requires an 'input' expression")));
    };
    if name == "$integral" {
        return Ok((Func::Integral { input, unit }, window.unwrap_or(WHOLE)));
    }
    let Some(window) = window else {
        return Err(bad("$derivative requires explicit window bounds"));
    };
    Ok((Func::Derivative { input, unit }, window))
}

/// A `unit` of `$derivative`/`$integral`: a week or shorter.
fn time_unit(v: &Bson) -> Result<&'static str> {
    if !matches!(v, Bson::String(_)) {
        return Err(bad(format!("unit' must be a string, but got {}", type_name(v))));
    }
    match crate::expr::date::unit(v)? {
        "year" | "quarter" | "month" => {
            Err(ExprError::location(5490710, "unit must be 'week' or smaller"))
        }
        unit => Ok(unit),
    }
}

fn exp_moving_avg(arg: &Bson, obj: &Document, sort: Sort<'_>) -> Result<(Func, Window)> {
    let Bson::Document(args) = arg.clone() else {
        return Err(bad("$expMovingAvg must have exactly one argument that is an object"));
    };
    if obj.len() != 1 {
        return Err(bad("$expMovingAvg must have exactly one argument that is an object"));
    }
    const SHAPE: &str = "$expMovingAvg sub object must have exactly two fields: An 'input' field, and either an 'N' field or an 'alpha' field";
    let (Some(input), 2) = (args.get("input"), args.len()) else { return Err(bad(SHAPE)) };
    if sort.is_none() {
        return Err(bad("$expMovingAvg requires an explicit 'sortBy'"));
    }
    let input = Expr::parse(input)?;
    let alpha = if let Some(n) = args.get("N") {
        if !is_number(n) {
            return Err(bad(format!(
                "'N' field must be an integer, but found type {}",
                type_name(n)
            )));
        }
        let Some(n) = to_int(n) else {
            return Err(bad(format!(
                "'N' field must be an integer, but found  N: {n}. To use a non-integer, use the 'alpha' argument instead"
            )));
        };
        if n <= 0 {
            return Err(bad(format!("'N' must be greater than zero. Got {n}")));
        }
        2.0 / (n as f64 + 1.0)
    } else if let Some(a) = args.get("alpha") {
        let Some(alpha) = to_f64(a).filter(|_| is_number(a)) else {
            return Err(bad("'alpha' must be a number"));
        };
        if alpha <= 0.0 || alpha >= 1.0 {
            return Err(bad(format!(
                "'alpha' must be between 0 and 1 (exclusive), found alpha: {a}"
            )));
        }
        alpha
    } else {
        return Err(bad(format!("Got unrecognized field in $expMovingAvg{SHAPE}")));
    };
    Ok((Func::ExpMovingAvg { input, alpha }, Window::Documents(Bound::Unbounded, Bound::Current)))
}

/// `$locf` and `$linearFill`: an expression, no window.
fn fill(name: &str, arg: &Bson, obj: &Document, sort: Sort<'_>) -> Result<(Func, Window)> {
    no_window(name, obj)?;
    let input = Expr::parse(arg)?;
    if name == "$locf" {
        return Ok((Func::Locf(input), Window::Documents(Bound::Unbounded, Bound::Current)));
    }
    if !matches!(sort, Some([_])) {
        return Err(ExprError::location(
            605001,
            "$linearFill must be specified with a top level sortBy expression with exactly one element",
        ));
    }
    Ok((Func::LinearFill(input), WHOLE))
}
