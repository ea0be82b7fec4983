//! Conditional operators and variables: `$cond` (array or named form), `$ifNull`,
//! `$switch`, `$let`.

use bson::Bson;

use super::ops::{check_named, eval_named, named};
use super::value::{is_nullish, truthy};
use super::{Args, Expr, ExprError, MISSING, Result, Vars};

pub fn check_cond(op: &str, args: &Args) -> Result<()> {
    match args {
        Args::List(items) if items.len() == 3 => Ok(()),
        Args::List(items) => Err(ExprError::location(
            16020,
            format!("Expression $cond takes exactly 3 arguments. {} were passed in.", items.len()),
        )),
        Args::Named(_) => check_named(op, args, &["if", "then", "else"], &["if", "then", "else"])
            .map_err(|e| {
                let missing = ["if", "then", "else"].into_iter().find(|k| named(args, k).is_none());
                match missing {
                    Some(k) => {
                        ExprError::location(17080, format!("Missing '{k}' parameter to $cond"))
                    }
                    None => ExprError::location(
                        17083,
                        e.message.replace(
                            "found an unknown argument",
                            "Unrecognized parameter to $cond",
                        ),
                    ),
                }
            }),
    }
}

pub fn cond(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let (c, t, e) = match args {
        Args::List(items) => match items.as_slice() {
            [c, t, e] => (c, t, e),
            _ => return Ok(Bson::Null),
        },
        Args::Named(_) => match (named(args, "if"), named(args, "then"), named(args, "else")) {
            (Some(c), Some(t), Some(e)) => (c, t, e),
            _ => return Ok(Bson::Null),
        },
    };
    if truthy(&c.eval(vars)?) { t.eval(vars) } else { e.eval(vars) }
}

pub fn if_null(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Args::List(items) = args else { return Ok(Bson::Null) };
    let Some((last, rest)) = items.split_last() else { return Ok(Bson::Null) };
    for e in rest {
        let v = e.eval(vars)?;
        if !is_nullish(&v) {
            return Ok(v);
        }
    }
    last.eval(vars)
}

pub fn switch(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some(Expr::Array(branches)) = named(args, "branches") else {
        return Err(ExprError::location(40061, "$switch expected an array for 'branches'"));
    };
    for branch in branches {
        let Expr::Object(fields) = branch else {
            return Err(ExprError::location(40062, "$switch expected each branch to be an object"));
        };
        let get = |k: &str| fields.iter().find(|(n, _)| n == k).map(|(_, e)| e);
        let (Some(case), Some(then)) = (get("case"), get("then")) else {
            return Err(ExprError::location(
                40064,
                "$switch requires each branch have a 'case' expression and a 'then' expression",
            ));
        };
        if truthy(&case.eval(vars)?) {
            return then.eval(vars);
        }
    }
    match named(args, "default") {
        Some(d) => d.eval(vars),
        None => Err(ExprError::location(
            40066,
            "$switch could not find a matching branch for an input, and no default was specified.",
        )),
    }
}

/// A user variable name: starts with a lowercase letter or a non-ASCII character.
pub fn check_var_name(name: &str) -> Result<()> {
    let first = name.chars().next();
    let ok = first.is_some_and(|c| c.is_ascii_lowercase() || !c.is_ascii())
        && name.chars().all(|c| c.is_alphanumeric() || c == '_' || !c.is_ascii());
    if ok {
        Ok(())
    } else {
        Err(ExprError::location(
            16867,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ))
    }
}

pub fn let_(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some(Expr::Object(defs)) = named(args, "vars") else {
        return Err(ExprError::location(10065, "invalid parameter: expected an object (vars)"));
    };
    let mut bindings = Vec::new();
    for (name, e) in defs {
        check_var_name(name)?;
        bindings.push((name.clone(), e.eval(vars)?));
    }
    vars.scoped(bindings, |vars| eval_named(args, "in", vars))
        .map(|v| if v == MISSING { MISSING } else { v })
}
