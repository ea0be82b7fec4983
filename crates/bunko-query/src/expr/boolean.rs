//! Boolean operators. `$and` and `$or` stop at the first deciding argument.

use bson::Bson;

use super::value::truthy;
use super::{Args, Result, Vars};

fn items(args: &Args) -> &[super::Expr] {
    match args {
        Args::List(items) => items,
        Args::Named(_) => &[],
    }
}

pub fn and(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    for e in items(args) {
        if !truthy(&e.eval(vars)?) {
            return Ok(Bson::Boolean(false));
        }
    }
    Ok(Bson::Boolean(true))
}

pub fn or(_: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    for e in items(args) {
        if truthy(&e.eval(vars)?) {
            return Ok(Bson::Boolean(true));
        }
    }
    Ok(Bson::Boolean(false))
}

pub fn not(_: &str, args: &[Bson]) -> Result<Bson> {
    Ok(Bson::Boolean(!args.first().is_some_and(truthy)))
}
