//! String operators. Strings are UTF-8; `CP` operators count code points, `Bytes`
//! operators count bytes. Regular expressions use the `regex` crate (linear time; no
//! look-around or backreferences, unlike MongoDB's PCRE).

use bson::{Bson, Document};

use super::ops::eval_named;
use super::value::{is_nullish, to_int, type_name};
use super::{Args, ExprError, Result, Vars};

fn text(v: &Bson) -> Option<&str> {
    match v {
        Bson::String(s) | Bson::Symbol(s) => Some(s),
        _ => None,
    }
}

pub fn concat(_: &str, args: &[Bson]) -> Result<Bson> {
    let mut out = String::new();
    for v in args {
        match v {
            _ if is_nullish(v) => return Ok(Bson::Null),
            _ => match text(v) {
                Some(s) => out.push_str(s),
                None => {
                    return Err(ExprError::location(
                        16702,
                        format!("$concat only supports strings, not {}", type_name(v)),
                    ));
                }
            },
        }
    }
    Ok(Bson::String(out))
}

/// A value as `$toLower`/`$substr` coerce it to a string.
fn coerce(op: &str, v: &Bson) -> Result<String> {
    Ok(match v {
        _ if is_nullish(v) => String::new(),
        Bson::Int32(i) => i.to_string(),
        Bson::Int64(i) => i.to_string(),
        Bson::Double(d) => d.to_string(),
        Bson::Decimal128(d) => d.to_string(),
        Bson::DateTime(d) => d.try_to_rfc3339_string().unwrap_or_default(),
        _ => match text(v) {
            Some(s) => s.to_string(),
            None => {
                return Err(ExprError::location(
                    16007,
                    format!("can't convert from BSON type {} to String", type_name(v)),
                ))
                .map_err(|e| ExprError { message: format!("{op}: {}", e.message), ..e });
            }
        },
    })
}

pub fn to_lower(op: &str, args: &[Bson]) -> Result<Bson> {
    Ok(Bson::String(coerce(op, args.first().unwrap_or(&Bson::Null))?.to_lowercase()))
}

pub fn to_upper(op: &str, args: &[Bson]) -> Result<Bson> {
    Ok(Bson::String(coerce(op, args.first().unwrap_or(&Bson::Null))?.to_uppercase()))
}

fn index_arg(op: &str, v: &Bson, what: &str, code: i32) -> Result<i64> {
    match to_int(v) {
        Some(i) if super::value::is_number(v) => Ok(i),
        _ => Err(ExprError::location(
            code,
            format!("{op}: {what} must be a numeric type (is BSON type {})", type_name(v)),
        )),
    }
}

pub fn substr_cp(op: &str, args: &[Bson]) -> Result<Bson> {
    let [s, start, len] = args else { return Ok(Bson::Null) };
    let s = coerce(op, s)?;
    let start = index_arg(op, start, "starting index", 34452)?;
    let len = index_arg(op, len, "length", 34453)?;
    if start < 0 {
        return Err(ExprError::location(
            34455,
            format!("{op}: starting index must be non-negative (got: {start})"),
        ));
    }
    let take = if len < 0 { usize::MAX } else { len as usize };
    Ok(Bson::String(s.chars().skip(start as usize).take(take).collect()))
}

pub fn substr_bytes(op: &str, args: &[Bson]) -> Result<Bson> {
    let [s, start, len] = args else { return Ok(Bson::Null) };
    let s = coerce(op, s)?;
    let start = index_arg(op, start, "starting index", 16034)?.max(0) as usize;
    let len = index_arg(op, len, "length", 16035)?;
    if start >= s.len() {
        return Ok(Bson::String(String::new()));
    }
    let end = if len < 0 { s.len() } else { (start + len as usize).min(s.len()) };
    if !s.is_char_boundary(start) {
        return Err(ExprError::location(
            28656,
            format!("{op}:  Invalid range, starting index is a UTF-8 continuation byte."),
        ));
    }
    if !s.is_char_boundary(end) {
        return Err(ExprError::location(
            28657,
            format!("{op}:  Invalid range, ending index is in the middle of a UTF-8 character."),
        ));
    }
    Ok(Bson::String(s[start..end].to_string()))
}

pub fn split(_: &str, args: &[Bson]) -> Result<Bson> {
    let [s, sep] = args else { return Ok(Bson::Null) };
    if is_nullish(s) || is_nullish(sep) {
        return Ok(Bson::Null);
    }
    let Some(s) = text(s) else {
        return Err(ExprError::location(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, found: {}",
                type_name(s)
            ),
        ));
    };
    let Some(sep) = text(sep) else {
        return Err(ExprError::location(
            40086,
            format!(
                "$split requires an expression that evaluates to a string as a second argument, found: {}",
                type_name(sep)
            ),
        ));
    };
    if sep.is_empty() {
        return Err(ExprError::location(40087, "$split requires a non-empty separator"));
    }
    Ok(Bson::Array(s.split(sep).map(|p| Bson::String(p.to_string())).collect()))
}

pub fn str_len_cp(op: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().unwrap_or(&Bson::Null);
    match text(v) {
        Some(s) => Ok(super::value::int_or_long(s.chars().count() as i64)),
        None => Err(ExprError::location(
            34471,
            format!("{op} requires a string argument, found: {}", type_name(v)),
        )),
    }
}

pub fn str_len_bytes(op: &str, args: &[Bson]) -> Result<Bson> {
    let v = args.first().unwrap_or(&Bson::Null);
    match text(v) {
        Some(s) => Ok(super::value::int_or_long(s.len() as i64)),
        None => Err(ExprError::location(
            34473,
            format!("{op} requires a string argument, found: {}", type_name(v)),
        )),
    }
}

fn index_of(op: &str, args: &[Bson], bytes: bool) -> Result<Bson> {
    let s = args.first().unwrap_or(&Bson::Null);
    if is_nullish(s) {
        return Ok(Bson::Null);
    }
    let Some(s) = text(s) else {
        return Err(ExprError::location(
            40091,
            format!("{op} requires a string as the first argument, found: {}", type_name(s)),
        ));
    };
    let needle = args.get(1).unwrap_or(&Bson::Null);
    let Some(needle) = text(needle) else {
        return Err(ExprError::location(
            40092,
            format!("{op} requires a string as the second argument, found: {}", type_name(needle)),
        ));
    };
    let bound = |i: usize, what: &str| -> Result<Option<usize>> {
        match args.get(i) {
            None => Ok(None),
            Some(v) => match to_int(v) {
                Some(n) if n >= 0 && super::value::is_number(v) => Ok(Some(n as usize)),
                Some(_) if super::value::is_number(v) => Err(ExprError::location(
                    40097,
                    format!("{op} requires a nonnegative {what} index, found: {v}"),
                )),
                _ => Err(ExprError::location(
                    40096,
                    format!(
                        "{op} requires an integral {what} index, found a value of type: {}, with value: {v}",
                        type_name(v)
                    ),
                )),
            },
        }
    };
    let start = bound(2, "start")?.unwrap_or(0);
    let units: Vec<usize> = if bytes {
        (0..=s.len()).collect()
    } else {
        s.char_indices().map(|(i, _)| i).chain(std::iter::once(s.len())).collect()
    };
    let end = bound(3, "ending")?.unwrap_or(units.len()).min(units.len().saturating_sub(1));
    for (unit, &offset) in units.iter().enumerate().skip(start) {
        if unit > end || offset + needle.len() > units.get(end).copied().unwrap_or(s.len()) {
            break;
        }
        if s.get(offset..).is_some_and(|rest| rest.starts_with(needle)) {
            return Ok(super::value::int_or_long(unit as i64));
        }
    }
    Ok(Bson::Int32(-1))
}

pub fn index_of_cp(op: &str, args: &[Bson]) -> Result<Bson> {
    index_of(op, args, false)
}

pub fn index_of_bytes(op: &str, args: &[Bson]) -> Result<Bson> {
    index_of(op, args, true)
}

pub fn strcasecmp(op: &str, args: &[Bson]) -> Result<Bson> {
    let [a, b] = args else { return Ok(Bson::Null) };
    let (a, b) = (coerce(op, a)?.to_uppercase(), coerce(op, b)?.to_uppercase());
    Ok(Bson::Int32(a.cmp(&b) as i32))
}

pub fn trim(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let input = eval_named(args, "input", vars)?;
    if is_nullish(&input) {
        return Ok(Bson::Null);
    }
    let Some(s) = text(&input) else {
        return Err(ExprError::location(
            50699,
            format!(
                "{op} requires its input to be a string, got {input} (of type {}) instead.",
                type_name(&input)
            ),
        ));
    };
    let chars = eval_named(args, "chars", vars)?;
    let set: Vec<char> = match &chars {
        Bson::Undefined => vec![
            ' ', '\0', '\t', '\n', '\u{0B}', '\u{0C}', '\r', '\u{A0}', '\u{1680}', '\u{2000}',
            '\u{2001}', '\u{2002}', '\u{2003}', '\u{2004}', '\u{2005}', '\u{2006}', '\u{2007}',
            '\u{2008}', '\u{2009}', '\u{200A}',
        ],
        Bson::Null => return Ok(Bson::Null),
        other => match text(other) {
            Some(c) => c.chars().collect(),
            None => {
                return Err(ExprError::location(
                    50700,
                    format!(
                        "{op} requires 'chars' to be a string, got {other} (of type {}) instead.",
                        type_name(other)
                    ),
                ));
            }
        },
    };
    let out = match op {
        "$ltrim" => s.trim_start_matches(set.as_slice()),
        "$rtrim" => s.trim_end_matches(set.as_slice()),
        _ => s.trim_matches(set.as_slice()),
    };
    Ok(Bson::String(out.to_string()))
}

fn replace(op: &str, args: &Args, vars: &mut Vars, all: bool) -> Result<Bson> {
    let mut parts = Vec::new();
    for name in ["input", "find", "replacement"] {
        let v = eval_named(args, name, vars)?;
        if !is_nullish(&v) && text(&v).is_none() {
            return Err(ExprError::location(
                51746,
                format!("{op} requires that '{name}' be a string, found: {v}"),
            ));
        }
        parts.push(v);
    }
    let [Bson::String(input), Bson::String(find), Bson::String(with)] = parts.as_slice() else {
        return Ok(Bson::Null);
    };
    Ok(Bson::String(if all {
        input.replace(find.as_str(), with)
    } else {
        input.replacen(find.as_str(), with, 1)
    }))
}

pub fn replace_all(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    replace(op, args, vars, true)
}

pub fn replace_one(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    replace(op, args, vars, false)
}

/// The compiled regex of a `$regex*` operator; `None` when the input is null.
fn regex_args(op: &str, args: &Args, vars: &mut Vars) -> Result<Option<(String, regex::Regex)>> {
    let input = eval_named(args, "input", vars)?;
    let pattern = eval_named(args, "regex", vars)?;
    let options = eval_named(args, "options", vars)?;
    let (pattern, mut flags) = match &pattern {
        Bson::RegularExpression(re) => (re.pattern.to_string(), re.options.to_string()),
        Bson::String(s) => (s.clone(), String::new()),
        v if is_nullish(v) => return Ok(None),
        v => {
            return Err(ExprError::location(
                51105,
                format!("{op} needs 'regex' to be of type string or regex"),
            ))
            .map_err(|e| ExprError {
                message: format!("{} (found {})", e.message, type_name(v)),
                ..e
            });
        }
    };
    match &options {
        Bson::String(o) if !flags.is_empty() && !o.is_empty() => {
            return Err(ExprError::location(
                51107,
                format!("{op} found regex option(s) specified in both 'regex' and 'option' fields"),
            ));
        }
        Bson::String(o) => flags.push_str(o),
        v if is_nullish(v) => {}
        _ => {
            return Err(ExprError::location(
                51106,
                format!("{op} needs 'options' to be of type string"),
            ));
        }
    }
    let input = match input {
        Bson::String(s) => s,
        v if is_nullish(&v) => return Ok(None),
        v => {
            return Err(ExprError::location(
                51104,
                format!("{op} needs 'input' to be of type string (found {})", type_name(&v)),
            ));
        }
    };
    let inline: String = flags.chars().filter(|c| matches!(c, 'i' | 'm' | 's' | 'x')).collect();
    let full = if inline.is_empty() { pattern } else { format!("(?{inline}){pattern}") };
    let re = regex::Regex::new(&full)
        .map_err(|e| ExprError::location(51111, format!("Invalid Regex in {op}: {e}")))?;
    Ok(Some((input, re)))
}

pub fn regex_match(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    Ok(Bson::Boolean(regex_args(op, args, vars)?.is_some_and(|(s, re)| re.is_match(&s))))
}

fn match_doc(s: &str, caps: &regex::Captures) -> Document {
    let whole = caps.get(0).map_or("", |m| m.as_str());
    let idx = caps.get(0).map_or(0, |m| s[..m.start()].chars().count());
    let groups: Vec<Bson> = caps
        .iter()
        .skip(1)
        .map(|g| g.map_or(Bson::Null, |m| Bson::String(m.as_str().to_string())))
        .collect();
    let mut d = Document::new();
    d.insert("match", whole);
    d.insert("idx", super::value::int_or_long(idx as i64));
    d.insert("captures", groups);
    d
}

pub fn regex_find(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some((s, re)) = regex_args(op, args, vars)? else { return Ok(Bson::Null) };
    Ok(re.captures(&s).map_or(Bson::Null, |c| Bson::Document(match_doc(&s, &c))))
}

pub fn regex_find_all(op: &str, args: &Args, vars: &mut Vars) -> Result<Bson> {
    let Some((s, re)) = regex_args(op, args, vars)? else { return Ok(Bson::Array(Vec::new())) };
    Ok(Bson::Array(re.captures_iter(&s).map(|c| Bson::Document(match_doc(&s, &c))).collect()))
}
