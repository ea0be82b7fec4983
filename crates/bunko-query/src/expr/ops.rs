//! The operator table: every expression operator by name, with how its arguments are
//! written (positional or named), how many positional arguments it takes, and the function
//! that evaluates it. Most operators are eager (their arguments are evaluated first and
//! the function sees values); the few that decide what to evaluate (`$cond`, `$and`,
//! `$let`, `$map`, ...) are lazy and see the argument expressions.

use bson::Bson;

use super::{Args, Expr, ExprError, Result, Vars};
use super::{arith, array, bits, boolean, compare, cond, date, object, parts, quantile, string};
use super::{trig, types};

/// A lazy operator: its arguments unevaluated.
pub type LazyFn = fn(&'static str, &Args, &mut Vars) -> Result<Bson>;

/// One operator.
#[derive(Debug)]
pub struct Op {
    pub name: &'static str,
    /// Takes a document of named arguments (`{input, as, cond}`) when given one.
    pub named: bool,
    pub check: fn(&str, &Args) -> Result<()>,
    pub run: LazyFn,
}

impl PartialEq for Op {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

/// The operator named `name`.
pub fn find(name: &str) -> Option<&'static Op> {
    TABLE.iter().find(|op| op.name == name)
}

/// Positional arguments, evaluated.
pub fn values(args: &Args, vars: &mut Vars) -> Result<Vec<Bson>> {
    match args {
        Args::List(items) => items.iter().map(|e| e.eval(vars)).collect(),
        Args::Named(_) => Ok(Vec::new()),
    }
}

/// The named argument `name` (an expression), if given.
pub fn named<'a>(args: &'a Args, name: &str) -> Option<&'a Expr> {
    match args {
        Args::Named(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, e)| e),
        Args::List(_) => None,
    }
}

/// The named argument `name`, evaluated (missing if not given).
pub fn eval_named(args: &Args, name: &str, vars: &mut Vars) -> Result<Bson> {
    named(args, name).map_or(Ok(super::MISSING), |e| e.eval(vars))
}

/// Checks that only the known named arguments are given and the required ones are.
pub fn check_named(op: &str, args: &Args, known: &[&str], required: &[&str]) -> Result<()> {
    let Args::Named(fields) = args else {
        return Err(ExprError::failed_to_parse(format!(
            "{op} expects an object of named arguments"
        )));
    };
    if let Some((bad, _)) = fields.iter().find(|(n, _)| !known.contains(&n.as_str())) {
        return Err(ExprError::failed_to_parse(format!("{op} found an unknown argument: {bad}")));
    }
    if let Some(missing) = required.iter().find(|r| !fields.iter().any(|(n, _)| n == *r)) {
        return Err(ExprError::failed_to_parse(format!("Missing '{missing}' parameter to {op}")));
    }
    Ok(())
}

fn arity(op: &str, args: &Args, min: usize, max: usize) -> Result<()> {
    let Args::List(items) = args else {
        return Err(ExprError::location(
            16020,
            format!("Expression {op} takes exactly {min} arguments. 1 were passed in."),
        ));
    };
    let n = items.len();
    if n < min || n > max {
        let msg = match (min == max, n < min) {
            (true, _) => {
                format!("Expression {op} takes exactly {min} arguments. {n} were passed in.")
            }
            (false, true) => {
                format!("Expression {op} takes at least {min} arguments, and {n} were passed in.")
            }
            (false, false) => {
                format!("Expression {op} takes at most {max} arguments, and {n} were passed in.")
            }
        };
        return Err(ExprError::location(if min == max { 16020 } else { 16021 }, msg));
    }
    Ok(())
}

/// `$rand: {}`: a double in [0, 1), drawn anew at each evaluation.
fn random(_: &'static str, _: &Args, _: &mut Vars) -> Result<Bson> {
    Ok(Bson::Double(rand::random::<f64>()))
}

fn any(_: &str, _: &Args) -> Result<()> {
    Ok(())
}

macro_rules! eager {
    ($name:literal, $min:expr, $max:expr, $f:path) => {
        Op {
            name: $name,
            named: false,
            check: |op, args| arity(op, args, $min, $max),
            run: |_, args, vars| {
                let vals = values(args, vars)?;
                $f($name, &vals)
            },
        }
    };
}

macro_rules! lazy {
    ($name:literal, $named:expr, $check:expr, $f:path) => {
        Op { name: $name, named: $named, check: $check, run: $f }
    };
}

const N: usize = usize::MAX;

#[rustfmt::skip]
static TABLE: &[Op] = &[
    // arithmetic
    eager!("$add", 0, N, arith::add),
    eager!("$subtract", 2, 2, arith::subtract),
    eager!("$multiply", 0, N, arith::multiply),
    eager!("$divide", 2, 2, arith::divide),
    eager!("$mod", 2, 2, arith::modulo),
    eager!("$abs", 1, 1, arith::abs),
    eager!("$ceil", 1, 1, arith::ceil),
    eager!("$floor", 1, 1, arith::floor),
    eager!("$sqrt", 1, 1, arith::sqrt),
    eager!("$exp", 1, 1, arith::exp),
    eager!("$ln", 1, 1, arith::ln),
    eager!("$log10", 1, 1, arith::log10),
    eager!("$log", 2, 2, arith::log),
    eager!("$pow", 2, 2, arith::pow),
    lazy!("$rand", true, |op, a| check_named(op, a, &[], &[]), random),
    eager!("$round", 1, 2, arith::round),
    eager!("$trunc", 1, 2, arith::trunc),
    // trigonometry
    eager!("$sin", 1, 1, trig::unary_trig),
    eager!("$cos", 1, 1, trig::unary_trig),
    eager!("$tan", 1, 1, trig::unary_trig),
    eager!("$asin", 1, 1, trig::unary_trig),
    eager!("$acos", 1, 1, trig::unary_trig),
    eager!("$atan", 1, 1, trig::unary_trig),
    eager!("$atan2", 2, 2, trig::atan2),
    eager!("$sinh", 1, 1, trig::unary_trig),
    eager!("$cosh", 1, 1, trig::unary_trig),
    eager!("$tanh", 1, 1, trig::unary_trig),
    eager!("$asinh", 1, 1, trig::unary_trig),
    eager!("$acosh", 1, 1, trig::unary_trig),
    eager!("$atanh", 1, 1, trig::unary_trig),
    eager!("$degreesToRadians", 1, 1, trig::unary_trig),
    eager!("$radiansToDegrees", 1, 1, trig::unary_trig),
    // bitwise
    eager!("$bitAnd", 0, N, bits::fold),
    eager!("$bitOr", 0, N, bits::fold),
    eager!("$bitXor", 0, N, bits::fold),
    eager!("$bitNot", 1, 1, bits::not),
    // comparison
    eager!("$cmp", 2, 2, compare::cmp),
    eager!("$eq", 2, 2, compare::cmp),
    eager!("$ne", 2, 2, compare::cmp),
    eager!("$gt", 2, 2, compare::cmp),
    eager!("$gte", 2, 2, compare::cmp),
    eager!("$lt", 2, 2, compare::cmp),
    eager!("$lte", 2, 2, compare::cmp),
    // boolean
    lazy!("$and", false, any, boolean::and),
    lazy!("$or", false, any, boolean::or),
    eager!("$not", 1, 1, boolean::not),
    // conditional
    lazy!("$cond", true, cond::check_cond, cond::cond),
    lazy!("$ifNull", false, |op, a| arity(op, a, 2, N), cond::if_null),
    lazy!("$switch", true, |op, a| check_named(op, a, &["branches", "default"], &["branches"]), cond::switch),
    lazy!("$let", true, |op, a| check_named(op, a, &["vars", "in"], &["vars", "in"]), cond::let_),
    // string
    eager!("$concat", 0, N, string::concat),
    eager!("$substr", 3, 3, string::substr_bytes),
    eager!("$substrBytes", 3, 3, string::substr_bytes),
    eager!("$substrCP", 3, 3, string::substr_cp),
    eager!("$toLower", 1, 1, string::to_lower),
    eager!("$toUpper", 1, 1, string::to_upper),
    eager!("$split", 2, 2, string::split),
    eager!("$strLenCP", 1, 1, string::str_len_cp),
    eager!("$strLenBytes", 1, 1, string::str_len_bytes),
    eager!("$indexOfCP", 2, 4, string::index_of_cp),
    eager!("$indexOfBytes", 2, 4, string::index_of_bytes),
    eager!("$strcasecmp", 2, 2, string::strcasecmp),
    lazy!("$trim", true, |op, a| check_named(op, a, &["input", "chars"], &["input"]), string::trim),
    lazy!("$ltrim", true, |op, a| check_named(op, a, &["input", "chars"], &["input"]), string::trim),
    lazy!("$rtrim", true, |op, a| check_named(op, a, &["input", "chars"], &["input"]), string::trim),
    lazy!("$replaceAll", true, |op, a| check_named(op, a, &["input", "find", "replacement"], &["input", "find", "replacement"]), string::replace_all),
    lazy!("$replaceOne", true, |op, a| check_named(op, a, &["input", "find", "replacement"], &["input", "find", "replacement"]), string::replace_one),
    lazy!("$regexMatch", true, |op, a| check_named(op, a, &["input", "regex", "options"], &["input", "regex"]), string::regex_match),
    lazy!("$regexFind", true, |op, a| check_named(op, a, &["input", "regex", "options"], &["input", "regex"]), string::regex_find),
    lazy!("$regexFindAll", true, |op, a| check_named(op, a, &["input", "regex", "options"], &["input", "regex"]), string::regex_find_all),
    // array
    eager!("$size", 1, 1, array::size),
    eager!("$arrayElemAt", 2, 2, array::elem_at),
    eager!("$concatArrays", 0, N, array::concat_arrays),
    eager!("$first", 1, 1, array::first),
    eager!("$last", 1, 1, array::last),
    eager!("$isArray", 1, 1, array::is_array),
    eager!("$in", 2, 2, array::in_),
    eager!("$indexOfArray", 2, 4, array::index_of_array),
    eager!("$range", 2, 3, array::range),
    eager!("$reverseArray", 1, 1, array::reverse),
    eager!("$slice", 2, 3, array::slice),
    eager!("$setUnion", 0, N, array::set_union),
    eager!("$setIntersection", 0, N, array::set_intersection),
    eager!("$setDifference", 2, 2, array::set_difference),
    eager!("$setEquals", 2, N, array::set_equals),
    eager!("$setIsSubset", 2, 2, array::set_is_subset),
    eager!("$anyElementTrue", 1, 1, array::any_true),
    eager!("$allElementsTrue", 1, 1, array::all_true),
    eager!("$sum", 1, N, array::sum),
    eager!("$avg", 1, N, array::avg),
    eager!("$max", 1, N, array::max),
    eager!("$min", 1, N, array::min),
    eager!("$stdDevPop", 1, N, array::std_dev_pop),
    eager!("$stdDevSamp", 1, N, array::std_dev_samp),
    lazy!("$filter", true, |op, a| check_named(op, a, &["input", "as", "cond", "limit"], &["input", "cond"]), array::filter),
    lazy!("$map", true, |op, a| check_named(op, a, &["input", "as", "in"], &["input", "in"]), array::map),
    lazy!("$reduce", true, |op, a| check_named(op, a, &["input", "initialValue", "in"], &["input", "initialValue", "in"]), array::reduce),
    lazy!("$sortArray", true, |op, a| check_named(op, a, &["input", "sortBy"], &["input", "sortBy"]), array::sort_array),
    lazy!("$zip", true, |op, a| check_named(op, a, &["inputs", "useLongestLength", "defaults"], &["inputs"]), array::zip),
    lazy!("$firstN", true, |op, a| check_named(op, a, &["input", "n"], &["input", "n"]), array::n_of),
    lazy!("$lastN", true, |op, a| check_named(op, a, &["input", "n"], &["input", "n"]), array::n_of),
    lazy!("$maxN", true, |op, a| check_named(op, a, &["input", "n"], &["input", "n"]), array::n_of),
    lazy!("$minN", true, |op, a| check_named(op, a, &["input", "n"], &["input", "n"]), array::n_of),
    // object
    eager!("$mergeObjects", 0, N, object::merge_objects),
    eager!("$objectToArray", 1, 1, object::object_to_array),
    eager!("$arrayToObject", 1, 1, object::array_to_object),
    lazy!("$getField", true, object::check_get_field, object::get_field),
    lazy!("$setField", true, |op, a| check_named(op, a, &["field", "input", "value"], &["field", "input", "value"]), object::set_field),
    lazy!("$unsetField", true, |op, a| check_named(op, a, &["field", "input"], &["field", "input"]), object::unset_field),
    // sizes and timestamp parts
    eager!("$bsonSize", 1, 1, parts::bson_size),
    eager!("$binarySize", 1, 1, parts::binary_size),
    eager!("$tsSecond", 1, 1, parts::timestamp_part),
    eager!("$tsIncrement", 1, 1, parts::timestamp_part),
    // type
    eager!("$type", 1, 1, types::type_),
    eager!("$isNumber", 1, 1, types::is_number_),
    eager!("$toString", 1, 1, types::to),
    eager!("$toInt", 1, 1, types::to),
    eager!("$toLong", 1, 1, types::to),
    eager!("$toDouble", 1, 1, types::to),
    eager!("$toDecimal", 1, 1, types::to),
    eager!("$toBool", 1, 1, types::to),
    eager!("$toDate", 1, 1, types::to),
    eager!("$toObjectId", 1, 1, types::to),
    eager!("$toUUID", 1, 1, types::to_uuid),
    eager!("$toHashedIndexKey", 1, 1, types::hashed_index_key),
    lazy!("$median", true, |_, _| Ok(()), quantile::eval),
    lazy!("$percentile", true, |_, _| Ok(()), quantile::eval),
    lazy!("$convert", true, |op, a| check_named(op, a, &["input", "to", "onError", "onNull", "format", "base", "byteOrder"], &["input", "to"]), types::convert),
    // date
    lazy!("$year", true, any, date::part),
    lazy!("$month", true, any, date::part),
    lazy!("$dayOfMonth", true, any, date::part),
    lazy!("$hour", true, any, date::part),
    lazy!("$minute", true, any, date::part),
    lazy!("$second", true, any, date::part),
    lazy!("$millisecond", true, any, date::part),
    lazy!("$dayOfWeek", true, any, date::part),
    lazy!("$dayOfYear", true, any, date::part),
    lazy!("$week", true, any, date::part),
    lazy!("$isoWeek", true, any, date::part),
    lazy!("$isoWeekYear", true, any, date::part),
    lazy!("$isoDayOfWeek", true, any, date::part),
    lazy!("$dateToString", true, |op, a| check_named(op, a, &["date", "format", "timezone", "onNull"], &["date"]), date::date_to_string),
    lazy!("$dateFromString", true, |op, a| check_named(op, a, &["dateString", "format", "timezone", "onError", "onNull"], &["dateString"]), date::date_from_string),
    lazy!("$dateTrunc", true, |op, a| check_named(op, a, &["date", "unit", "binSize", "timezone", "startOfWeek"], &["date", "unit"]), date::date_trunc),
    lazy!("$dateAdd", true, |op, a| check_named(op, a, &["startDate", "unit", "amount", "timezone"], &["startDate", "unit", "amount"]), date::date_add),
    lazy!("$dateSubtract", true, |op, a| check_named(op, a, &["startDate", "unit", "amount", "timezone"], &["startDate", "unit", "amount"]), date::date_add),
    lazy!("$dateDiff", true, |op, a| check_named(op, a, &["startDate", "endDate", "unit", "timezone", "startOfWeek"], &["startDate", "endDate", "unit"]), date::date_diff),
    lazy!("$dateFromParts", true, |op, a| check_named(op, a, &["year", "month", "day", "hour", "minute", "second", "millisecond", "timezone"], &["year"]), date::date_from_parts),
    lazy!("$dateToParts", true, |op, a| check_named(op, a, &["date", "timezone", "iso8601"], &["date"]), date::date_to_parts),
];
