//! Erlang's `~w` and `~p` renderings of decoded JSON, so that reason texts read exactly as
//! CouchDB's (`mango_error:info/2` formats offending values with them).
//!
//! A decoded JSON value is an Erlang term: `null`/`true`/`false` atoms, integers, floats,
//! binaries for strings, lists for arrays and `{[{Key, Value}, ...]}` for objects.
//! `~w` writes binaries as byte lists (`<<97,98>>`); `~p` writes printable binaries as
//! strings (`<<"ab">>`) and, an Erlang quirk, lists of printable character codes as strings
//! (`[65,66]` prints as `"AB"`). `~p` breaks long terms over several lines; this rendering
//! always stays on one line.

use serde_json::{Number, Value};

use crate::term::integer_parts;

/// `io_lib:format("~w", [Term])`.
pub fn w(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out, false);
    out
}

/// `io_lib:format("~p", [Term])`, on one line.
pub fn p(v: &Value) -> String {
    let mut out = String::new();
    write(v, &mut out, true);
    out
}

fn write(v: &Value, out: &mut String, pretty: bool) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n)),
        Value::String(s) => binary(s, out, pretty),
        Value::Array(items) => {
            if pretty && is_printable_list(items) {
                char_list(items, out);
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out, pretty);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push_str("{[");
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push('{');
                binary(k, out, pretty);
                out.push(',');
                write(v, out, pretty);
                out.push('}');
            }
            out.push_str("]}");
        }
    }
}

fn binary(s: &str, out: &mut String, pretty: bool) {
    out.push_str("<<");
    if pretty && s.bytes().all(is_printable_byte) {
        if !s.is_empty() {
            out.push('"');
            escape_into(s.chars(), out);
            out.push('"');
        }
    } else {
        let bytes: Vec<String> = s.bytes().map(|b| b.to_string()).collect();
        out.push_str(&bytes.join(","));
    }
    out.push_str(">>");
}

/// Printable in Erlang's default (latin1) printable range. The bytes of UTF-8 sequences
/// are all >= 0x80; those >= 0xA0 count as printable latin1, which is why most non-ASCII
/// text prints as a string, byte for byte the original UTF-8.
fn is_printable_byte(b: u8) -> bool {
    matches!(b, 32..=126 | 160..=255 | 8..=13 | 27)
}

fn is_printable_list(items: &[Value]) -> bool {
    !items.is_empty()
        && items.iter().all(|v| match v {
            Value::Number(n) => char_code(n).is_some_and(is_printable_byte),
            _ => false,
        })
}

fn char_code(n: &Number) -> Option<u8> {
    let (negative, digits) = integer_parts(n)?;
    if negative {
        return None;
    }
    if digits.is_empty() {
        return Some(0);
    }
    digits.parse().ok()
}

fn char_list(items: &[Value], out: &mut String) {
    let codes = items.iter().filter_map(|v| match v {
        Value::Number(n) => char_code(n).map(char::from),
        _ => None,
    });
    out.push('"');
    escape_into(codes, out);
    out.push('"');
}

/// Escapes as Erlang's string printer does for the characters it considers printable.
fn escape_into(chars: impl Iterator<Item = char>, out: &mut String) {
    for c in chars {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{1b}' => out.push_str("\\e"),
            c => out.push(c),
        }
    }
}

/// Integers print as written; floats in Erlang's shortest round-trip form (`1.5`, `100.0`,
/// `1.0e21`, `1.0e-5`).
fn number(n: &Number) -> String {
    match integer_parts(n) {
        Some((negative, digits)) => {
            let digits = if digits.is_empty() { "0" } else { digits };
            if negative { format!("-{digits}") } else { digits.to_owned() }
        }
        None => float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

/// `io_lib_format:fwrite_g/1`: the shortest digits that read back as the same double, in
/// plain notation unless scientific notation is shorter (ties go to plain), and always
/// scientific from 2^53 up.
fn float(x: f64) -> String {
    if !x.is_finite() {
        // jiffy rejects such numbers; there is no Erlang rendering to copy.
        return x.to_string();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "1.2345e-5".
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i64 = exp.parse().unwrap_or(0);
    let scientific = match digits.split_at_checked(1) {
        Some((first, "")) => format!("{first}.0e{exp}"),
        Some((first, rest)) => format!("{first}.{rest}e{exp}"),
        None => sci.clone(),
    };
    if x.abs() >= 9_007_199_254_740_992.0 {
        return format!("{sign}{scientific}");
    }
    let plain = plain(&digits, exp);
    let body = if plain.len() <= scientific.len() { plain } else { scientific };
    format!("{sign}{body}")
}

/// `digits` (d.ddd x 10^exp) written out with a decimal point and at least one digit on
/// each side.
fn plain(digits: &str, exp: i64) -> String {
    let len = digits.len() as i64;
    if exp < 0 {
        format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
    } else if exp + 1 >= len {
        format!("{digits}{}.0", "0".repeat((exp + 1 - len) as usize))
    } else {
        match digits.split_at_checked((exp + 1) as usize) {
            Some((int, frac)) => format!("{int}.{frac}"),
            None => format!("{digits}.0"),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn w_matches_erlang() {
        // Expected texts come from `io_lib:format("~w", ...)` in OTP 25.
        assert_eq!(w(&json!("abc")), "<<97,98,99>>");
        assert_eq!(w(&json!("")), "<<>>");
        assert_eq!(w(&json!({"a": 1})), "{[{<<97>>,1}]}");
        assert_eq!(w(&json!([1, null, true])), "[1,null,true]");
        assert_eq!(w(&json!([65, 66])), "[65,66]");
        assert_eq!(w(&json!({})), "{[]}");
    }

    #[test]
    fn p_matches_erlang() {
        assert_eq!(p(&json!("abc")), "<<\"abc\">>");
        assert_eq!(p(&json!("")), "<<>>");
        assert_eq!(p(&json!([65, 66])), "\"AB\"");
        assert_eq!(p(&json!([1, 2])), "[1,2]");
        assert_eq!(p(&json!({"a": "up"})), "{[{<<\"a\">>,<<\"up\">>}]}");
        assert_eq!(p(&json!("é")), "<<\"é\">>");
        assert_eq!(p(&json!("a\u{1}")), "<<97,1>>");
        assert_eq!(p(&json!("q\"")), "<<\"q\\\"\">>");
    }

    #[test]
    fn floats_match_erlang() {
        let cases = [
            (1.5, "1.5"),
            (1.0e10, "1.0e10"),
            (100.0, "100.0"),
            (0.1, "0.1"),
            (1.0e-5, "1.0e-5"),
            (123456789.0, "123456789.0"),
            (1.0e21, "1.0e21"),
            (9007199254740992.0, "9.007199254740992e15"),
            (0.001, "0.001"),
            (-2.5, "-2.5"),
            (0.0, "0.0"),
            (0.0001, "0.0001"),
            (1.2345678901234567e19, "1.2345678901234567e19"),
            (1.0e15, "1.0e15"),
            (123.456, "123.456"),
            (5.0e-324, "5.0e-324"),
            (0.00012, "1.2e-4"),
            (1.0e100, "1.0e100"),
            (1234.5e3, "1.2345e6"),
        ];
        for (x, text) in cases {
            assert_eq!(float(x), text, "{x}");
        }
        let n: Value = serde_json::from_str("1e2").unwrap_or_default();
        assert_eq!(w(&n), "100.0");
        let n: Value = serde_json::from_str("-0").unwrap_or_default();
        assert_eq!(w(&n), "0");
    }
}
