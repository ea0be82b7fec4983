//! Numbers as Erlang sees them in CouchDB's built-in reducers: integers are exact
//! (bignums there, `i128` here, falling back to floats past that), floats are doubles,
//! and integer plus float is float. The JSON text of the map value decides which: `2` is an
//! integer, `2.0` and `2e0` are floats, as jiffy decodes them.

use serde_json::{Number, Value};

/// An Erlang number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    /// Reads a JSON number, keeping integers exact.
    pub(crate) fn from_number(n: &Number) -> Num {
        let text = n.to_string();
        let integral = !text.contains(['.', 'e', 'E']);
        match (integral, text.parse::<i128>()) {
            (true, Ok(i)) => Num::Int(i),
            _ => Num::Float(text.parse::<f64>().unwrap_or(f64::NAN)),
        }
    }

    fn float(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }

    pub(crate) fn add(self, other: Num) -> Num {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => {
                a.checked_add(b).map_or(Num::Float(a as f64 + b as f64), Num::Int)
            }
            (a, b) => Num::Float(a.float() + b.float()),
        }
    }

    pub(crate) fn mul(self, other: Num) -> Num {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => {
                a.checked_mul(b).map_or(Num::Float(a as f64 * b as f64), Num::Int)
            }
            (a, b) => Num::Float(a.float() * b.float()),
        }
    }

    /// `erlang:min/2`: the first argument when they compare equal.
    pub(crate) fn min(self, other: Num) -> Num {
        if other.lt(self) { other } else { self }
    }

    /// `erlang:max/2`: the first argument when they compare equal.
    pub(crate) fn max(self, other: Num) -> Num {
        if self.lt(other) { other } else { self }
    }

    fn lt(self, other: Num) -> bool {
        match (self, other) {
            (Num::Int(a), Num::Int(b)) => a < b,
            (a, b) => a.float() < b.float(),
        }
    }

    /// Whether this is the integer 0 (Erlang's pattern `0` does not match `0.0`).
    pub(crate) fn is_int_zero(self) -> bool {
        self == Num::Int(0)
    }

    /// The JSON number; a float that is not finite (Erlang raises `badarith` there)
    /// becomes `null`.
    pub(crate) fn to_value(self) -> Value {
        match self {
            Num::Int(i) => i64::try_from(i)
                .map(Value::from)
                .unwrap_or_else(|_| serde_json::from_str(&i.to_string()).unwrap_or(Value::Null)),
            Num::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        }
    }
}

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Num::Int(i) => write!(f, "{i}"),
            Num::Float(x) => write!(f, "{x:?}"),
        }
    }
}

/// A JSON value written the way Erlang's `~p`/`~w` print the term jiffy decodes it to
/// (`<<"text">>` for strings, `{[{<<"k">>,v}]}` for objects), for error texts.
pub(crate) fn erl_term(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => Num::from_number(n).to_string(),
        Value::String(s) => format!("<<{}>>", Value::String(s.clone())),
        Value::Array(items) => {
            format!("[{}]", items.iter().map(erl_term).collect::<Vec<_>>().join(","))
        }
        Value::Object(members) => format!(
            "{{[{}]}}",
            members
                .iter()
                .map(|(k, v)| format!("{{<<{}>>,{}}}", Value::String(k.clone()), erl_term(v)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(text: &str) -> Num {
        match serde_json::from_str(text) {
            Ok(Value::Number(n)) => Num::from_number(&n),
            _ => Num::Float(f64::NAN),
        }
    }

    #[test]
    fn integers_stay_exact_and_floats_stay_floats() {
        assert_eq!(num("12345678901234567890").add(num("1")), Num::Int(12345678901234567891));
        assert_eq!(num("1").add(num("2.0")), Num::Float(3.0));
        assert_eq!(num("1e2"), Num::Float(100.0));
        assert_eq!(Num::Float(3.0).to_value().to_string(), "3.0");
        assert_eq!(
            Num::Int(i128::from(i64::MAX) + 1).to_value().to_string(),
            "9223372036854775808"
        );
        assert_eq!(Num::Int(i128::MAX).add(Num::Int(1)), Num::Float(i128::MAX as f64 + 1.0));
    }

    #[test]
    fn erlang_min_max_keep_the_first_of_equals() {
        assert_eq!(Num::Int(1).min(Num::Float(1.0)), Num::Int(1));
        assert_eq!(Num::Float(1.0).max(Num::Int(1)), Num::Float(1.0));
        assert_eq!(Num::Int(2).min(Num::Float(1.5)), Num::Float(1.5));
    }

    #[test]
    fn terms_print_like_erlang() {
        let value: Value = serde_json::json!({"a": ["x", 1, 2.5, null, true]});
        assert_eq!(erl_term(&value), r#"{[{<<"a">>,[<<"x">>,1,2.5,null,true]}]}"#);
    }
}
