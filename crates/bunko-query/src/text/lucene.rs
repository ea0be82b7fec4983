//! A [`Text`] tree in Lucene syntax, exactly as `mango_selector_text:to_query` writes it
//! (`_explain` shows it as `query`): empty `AND`/`OR` groups disappear, string values are
//! quoted and escaped, ranges on strings run from `""` to CouchDB's `u0x10FFFF`.

use serde_json::Value;

use super::{End, Term, Text};

impl Text {
    /// The Lucene query text; empty when nothing is searched.
    pub fn lucene(&self) -> String {
        let mut out = String::new();
        write(self, &mut out);
        out
    }
}

fn write(text: &Text, out: &mut String) {
    match text {
        Text::And(items) => group(items, " AND ", out),
        Text::Or(items) => group(items, " OR ", out),
        Text::Not(exists, Some(arg)) => {
            let arg = arg.lucene();
            out.push('(');
            write(exists, out);
            if !arg.is_empty() {
                out.push_str(" AND NOT (");
                out.push_str(&arg);
                out.push(')');
            }
            out.push(')');
        }
        Text::Not(exists, None) => {
            out.push_str("($fieldnames:/.*/  AND NOT (");
            write(exists, out);
            out.push_str("))");
        }
        Text::Field(field, term) => {
            out.push('(');
            out.push_str(&field.name());
            out.push(':');
            match term {
                Term::Value(v) => out.push_str(&value_str(v)),
                Term::Range(lower, upper) => range(lower, upper, out),
                Term::Prefix(p) => {
                    out.push_str(&escape_value(p));
                    out.push('*');
                }
            }
            out.push(')');
        }
        Text::FieldName { name, prefix } => {
            out.push_str("($fieldnames:");
            out.push_str(name);
            if *prefix {
                out.push('*');
            }
            out.push(')');
        }
        Text::Regex(field) => {
            out.push_str("($fieldnames:");
            out.push_str(&field.name());
            out.push(')');
        }
        Text::Default(v) => {
            out.push_str("($default:");
            out.push_str(&value_str(v));
            out.push(')');
        }
    }
}

fn group(items: &[Text], sep: &str, out: &mut String) {
    let parts: Vec<String> =
        items.iter().map(Text::lucene).filter(|q| !q.is_empty() && q != "()").collect();
    if parts.is_empty() {
        return;
    }
    out.push('(');
    out.push_str(&parts.join(sep));
    out.push(')');
}

fn range(lower: &End, upper: &End, out: &mut String) {
    let numeric = [lower, upper].iter().any(|e| match e {
        End::Inclusive(v) | End::Exclusive(v) => v.is_number(),
        End::Open => false,
    });
    match lower {
        End::Exclusive(v) => {
            out.push('{');
            out.push_str(&value_str(v));
        }
        End::Inclusive(v) => {
            out.push('[');
            out.push_str(&value_str(v));
        }
        End::Open => out.push_str(if numeric { "[*" } else { "[\"\"" }),
    }
    out.push_str(" TO ");
    match upper {
        End::Exclusive(v) => {
            out.push_str(&value_str(v));
            out.push('}');
        }
        End::Inclusive(v) => {
            out.push_str(&value_str(v));
            out.push(']');
        }
        End::Open => out.push_str(if numeric { "*]" } else { "u0x10FFFF]" }),
    }
}

/// `mango_selector_text:value_str`.
fn value_str(v: &Value) -> String {
    match v {
        Value::String(s) if is_number_string(s) => format!("\"{s}\""),
        Value::String(s) => format!("\"{}\"", escape_value(s)),
        Value::Number(n) => {
            let text = n.to_string();
            if text.contains(['.', 'e', 'E']) {
                erlang_float(n.as_f64().unwrap_or(0.0))
            } else {
                text
            }
        }
        Value::Bool(b) => b.to_string(),
        _ => "true".to_string(),
    }
}

/// `mango_util:is_number_string`: CouchDB's unanchored pattern finds a number in any text
/// holding a digit, `NaN` or `Infinity`.
fn is_number_string(s: &str) -> bool {
    s.chars().any(char::is_numeric) || s.contains("NaN") || s.contains("Infinity")
}

/// `mango_util:lucene_escape_query_value`: Lucene's special characters and white space
/// get a backslash.
pub(crate) fn escape_value(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if (c == '&' || c == '|') && chars.peek() == Some(&c) {
            chars.next();
            out.push('\\');
            out.push(c);
            out.push(c);
            continue;
        }
        if "+-(){}[]!^~*?:/\\\" \t\r\n".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Erlang's `float_to_binary/1`: scientific notation with 20 decimals, `e+01`.
fn erlang_float(x: f64) -> String {
    let text = format!("{x:.20e}");
    let Some((mantissa, exp)) = text.split_once('e') else { return text };
    let (sign, digits) = match exp.strip_prefix('-') {
        Some(d) => ('-', d),
        None => ('+', exp),
    };
    format!("{mantissa}e{sign}{digits:0>2}")
}
